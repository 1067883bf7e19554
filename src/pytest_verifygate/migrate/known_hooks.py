"""The hooks of well-known pre-commit hook repositories, as their ``.pre-commit-hooks.yaml``
define them, and the PyPI package that provides each repository's programs: a gate runs them
from the project's own environment, not one pre-commit builds.

PYTEST_DONT_REWRITE
"""

from typing import Any, NamedTuple


class HookDefinition(NamedTuple):
    """One hook of a repository's manifest (the keys ``migrate`` uses)."""

    entry: str
    args: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    types_or: tuple[str, ...] = ()
    files: str = ""
    pass_filenames: bool = True
    always_run: bool = False
    stages: tuple[str, ...] = ()
    language: str = "python"
    # It rewrites the files it is given (pre-commit fails it when it does).
    known_fixer: bool = False
    require_serial: bool = False  # its files in one process (pre-commit's key)


class HookRepository(NamedTuple):
    package: str  # the PyPI distribution that provides the hooks' programs
    hooks: dict[str, HookDefinition]
    # Whether the config's ``rev`` is the package's version (a mirror's tags are).
    rev_is_version: bool = True


_PY = ("python", "pyi", "jupyter")
_PY_PYI = ("python", "pyi")
_ALL_STAGES = ("pre-commit", "pre-push", "manual")


def _check(entry: str, *types: str, **more: Any) -> HookDefinition:
    return HookDefinition(entry, types=types, **more)


def _fix(entry: str, *types: str, **more: Any) -> HookDefinition:
    return HookDefinition(entry, types=types, known_fixer=True, **more)


_RUFF_CHECK = HookDefinition("ruff check --force-exclude", types_or=_PY, require_serial=True)
_PRE_COMMIT_HOOKS = {
    "check-added-large-files": _check("check-added-large-files"),
    "check-ast": _check("check-ast", "python"),
    "check-byte-order-marker": _check("check-byte-order-marker", "text"),
    "check-builtin-literals": _check("check-builtin-literals", "python"),
    "check-case-conflict": _check("check-case-conflict"),
    "check-docstring-first": _check("check-docstring-first", "python"),
    "check-executables-have-shebangs": _check("check-executables-have-shebangs", "text",
                                              "executable", stages=_ALL_STAGES),
    "check-illegal-windows-names": _check("check-illegal-windows-names"),
    "check-json": _check("check-json", "json"),
    "check-merge-conflict": _check("check-merge-conflict", "text"),
    "check-shebang-scripts-are-executable": _check("check-shebang-scripts-are-executable",
                                                   "text", stages=_ALL_STAGES),
    "check-symlinks": _check("check-symlinks", "symlink"),
    "check-toml": _check("check-toml", "toml"),
    "check-vcs-permalinks": _check("check-vcs-permalinks", "text"),
    "check-xml": _check("check-xml", "xml"),
    "check-yaml": _check("check-yaml", "yaml"),
    "debug-statements": _check("debug-statement-hook", "python"),
    "destroyed-symlinks": _check("destroyed-symlinks", "file"),
    "detect-aws-credentials": _check("detect-aws-credentials", "text"),
    "detect-private-key": _check("detect-private-key", "text"),
    "double-quote-string-fixer": _fix("double-quote-string-fixer", "python"),
    "end-of-file-fixer": _fix("end-of-file-fixer", "text", stages=_ALL_STAGES),
    "file-contents-sorter": _fix("file-contents-sorter", files="^$"),
    "fix-byte-order-marker": _fix("fix-byte-order-marker", "text"),
    "forbid-new-submodules": _check("forbid-new-submodules"),
    "forbid-submodules": _check("forbid-submodules", "directory"),
    "mixed-line-ending": _fix("mixed-line-ending", "text"),
    "name-tests-test": _check("name-tests-test", files=r"(^|/)tests/.+\.py$"),
    "no-commit-to-branch": _check("no-commit-to-branch", pass_filenames=False,
                                  always_run=True),
    "pretty-format-json": _check("pretty-format-json", "json"),
    "requirements-txt-fixer": _fix("requirements-txt-fixer",
                                   files=r"(requirements|constraints).*\.txt$"),
    "sort-simple-yaml": _fix("sort-simple-yaml", files="^$"),
    "trailing-whitespace": _fix("trailing-whitespace-fixer", "text", stages=_ALL_STAGES),
}


def _pygrep(pattern: str, *types: str) -> HookDefinition:
    return HookDefinition(pattern, types=types, language="pygrep")


_MOCK_METHODS = r"""(?x)(
    assert .*\.(
        not_called|
        called_
    )|
    # ''.join(rf'(?<!\b{s})' for s in dir(mock) if s.endswith('Mock')))
    (?<!\bAsyncMock)(?<!\bMagicMock)(?<!\bMock)(?<!\bNonCallableMagicMock)(?<!\bNonCallableMock)(?<!\bPropertyMock)
    \.assert_(
        any_call|
        called|
        called_once|
        called_once_with|
        called_with|
        has_calls|
        not_called
    )($|[^(\w])
)
"""

# Keyed by the repository's name (its URL's last part): forks and moves (psf/black and
# psf/black-pre-commit-mirror, woodruffw/ and zizmorcore/zizmor-pre-commit) share hooks.
KNOWN_REPOSITORIES: dict[str, HookRepository] = {
    "ruff-pre-commit": HookRepository("ruff", {
        "ruff": _RUFF_CHECK,
        "ruff-check": _RUFF_CHECK,
        "ruff-format": _fix("ruff format --force-exclude", types_or=_PY, require_serial=True),
    }),
    "mirrors-mypy": HookRepository("mypy", {"mypy": HookDefinition(
        "mypy", args=("--ignore-missing-imports", "--scroll-output"), types_or=_PY_PYI,
        require_serial=True)}),
    "black": HookRepository("black", {
        "black": _fix("black", types_or=_PY_PYI, require_serial=True),
        "black-jupyter": _fix("black", types_or=_PY, require_serial=True)}),
    "pre-commit-hooks": HookRepository("pre-commit-hooks", _PRE_COMMIT_HOOKS),
    "codespell": HookRepository("codespell", {"codespell": _check("codespell", "text")}),
    "flake8": HookRepository("flake8", {"flake8": _check("flake8", "python",
                                                         require_serial=True)}),
    "isort": HookRepository("isort", {"isort": _fix("isort", args=("--filter-files",),
                                                    types_or=("cython", "pyi", "python"),
                                                    require_serial=True)}),
    "pyupgrade": HookRepository("pyupgrade", {"pyupgrade": _fix("pyupgrade", "python")}),
    "blacken-docs": HookRepository("blacken-docs", {"blacken-docs": _fix(
        "blacken-docs", types_or=("rst", "markdown", "tex", *_PY_PYI))}),
    "pyright-python": HookRepository("pyright", {
        "pyright": HookDefinition("pyright", types_or=_PY_PYI, require_serial=True)}),
    "uv-pre-commit": HookRepository("uv", {
        "uv-lock": HookDefinition("uv lock", files=r"^(uv\.lock|pyproject\.toml|uv\.toml)$",
                                  pass_filenames=False),
        "pip-compile": HookDefinition("uv pip compile", files=r"^requirements\.(in|txt)$",
                                      pass_filenames=False),
        "uv-export": HookDefinition("uv export", args=("--frozen",
                                                       "--output-file=requirements.txt"),
                                    files=r"^uv\.lock$", pass_filenames=False),
    }),
    "typos": HookRepository("typos", {"typos": _fix("typos", "text",
                                                    args=("--write-changes",))}),
    "zizmor-pre-commit": HookRepository("zizmor", {"zizmor": _check("zizmor", "yaml",
                                                                    require_serial=True)}),
    "pyproject-fmt": HookRepository("pyproject-fmt", {
        "pyproject-fmt": _fix("pyproject-fmt", files=r"(^|/)pyproject\.toml$")}),
    "pygrep-hooks": HookRepository("pre-commit", rev_is_version=False, hooks={
        "python-check-blanket-noqa": _pygrep(r"(?i)# noqa(?!: )", "python"),
        "python-check-mock-methods": _pygrep(_MOCK_METHODS, "python"),
        "python-no-eval": _pygrep(r"\beval\(", "python"),
        "python-no-log-warn": _pygrep(r"(?<!warnings)\.warn\(", "python"),
        "python-use-type-annotations": _pygrep(r"# type(?!: *ignore([^a-zA-Z0-9]|$))",
                                               "python"),
        "rst-backticks": _pygrep(r"(^| )`[^`]+`([^_]|$)", "rst"),
        "rst-inline-touching-normal": _pygrep(r"\w``\w", "rst"),
        "text-unicode-replacement-char": _pygrep("\ufffd", "text"),
    }),
}
# Names the same repository is published under.
KNOWN_REPOSITORIES["black-pre-commit-mirror"] = KNOWN_REPOSITORIES["black"]
