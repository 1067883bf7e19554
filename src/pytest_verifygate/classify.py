"""Failure codes: what kind of failure a gate had, from its exit status, then from a table of
anchored per-tool patterns, so that "not found" inside an assertion stays ``command_failed``.

PYTEST_DONT_REWRITE
"""

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from pytest_verifygate.ansi import plain_output
from pytest_verifygate.codes import (
    CODES,
    COMMAND_FAILED,
    MISSING_MAKE_TARGET,
    MISSING_SCRIPT,
    NO_TEST_FILES,
    SEQUENCE_ISSUE,
    SETUP_OR_BOOTSTRAP_ISSUE,
)
from pytest_verifygate.commands import shell_words

# ``classify.CODES`` is where the hooks reference sends a plugin for the code names.
__all__ = ["CODES", "RULES", "Failure", "Rule", "classify"]

# What a failing pytest test printed or logged is not read.
_PYTEST_CAPTURED = re.compile(
    r"^-+ Captured (?:stdout|stderr|log) \w+ -+$"
    r".*?(?=^-+ Captured |^_{3,} .* _{3,}$|^=+ .* =+$|\Z)",
    re.MULTILINE | re.DOTALL,
)


class Failure(NamedTuple):
    """What the classifier knows about one failed run of a gate."""

    exit_code: int | None
    signal: int | None
    output: str
    argv: Sequence[str]
    cwd: Path
    # The command of the gate declared just before this one, when there is one.
    previous: Sequence[str] = ()


class Rule(NamedTuple):
    """Output matching ``pattern`` (multiline, anchored) means ``code`` when ``accept`` agrees."""

    code: str
    tool: str
    pattern: re.Pattern[str]
    accept: Callable[[re.Match[str], Failure], bool] | None = None


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.MULTILINE)


# "make", "gmake", "make[2]" (a sub-make).
_MAKE = r"g?make(?:\[\d+\])?"
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
# npm's shorthand commands for lifecycle scripts.
_SCRIPT_ALIASES = {"t": "test", "tst": "test"}


def _program_argv(argv: Sequence[str]) -> list[str]:
    """The argv of the program itself; for ``sh -c "script"`` the script's words."""
    if (len(argv) >= 3 and Path(argv[0]).name in _SHELLS and argv[1].startswith("-")
            and argv[1].endswith("c")):
        return shell_words(argv[2]) or []
    return list(argv)


def _asked_for(match: re.Match[str], failure: Failure) -> bool:
    """The missing script or target is one the gate's command names (not a nested one)."""
    words = _program_argv(failure.argv)
    if not words or any("$" in word for word in words):  # unknown, or set by the shell
        return True
    named = set(words) | {_SCRIPT_ALIASES[word] for word in words if word in _SCRIPT_ALIASES}
    return match.group("name") in named


_PY_FRAME = re.compile(
    r'^\s*File "(?P<file>[^"\n]+\.py)", line \d+|^(?P<short>[^\s:][^:\n]*\.py):\d+: in ',
    re.MULTILINE,
)


def _is_python_module(directory: Path, name: str) -> bool:
    package = directory / name
    return ((directory / f"{name}.py").is_file() or (package / "__init__.py").is_file()
            or (package.is_dir() and any(package.glob("*.py"))))


def _traceback_dirs(failure: Failure, text: str) -> set[Path]:
    """The project directories (under cwd) of the files a Python traceback passes through."""
    cwd = failure.cwd.resolve()
    found: set[Path] = set()
    for frame in _PY_FRAME.finditer(text):
        path = Path(frame.group("file") or frame.group("short"))
        path = (path if path.is_absolute() else cwd / path).resolve()
        if path.is_relative_to(cwd) and "site-packages" not in path.parts:
            found.add(path.parent)
    return found


def _python_dependency(match: re.Match[str], failure: Failure) -> bool:
    """Whether a missing Python module is a setup problem: the project's own package that is
    not importable, or a name the project does not have (a dependency). ``app.gone`` of the
    project's ``app``, or ``helpers`` only next to the importing file, is the project's mistake."""
    top, _, submodule = match.group("module").partition(".")
    if not top:
        return False
    cwd = failure.cwd.resolve()
    in_project = any(_is_python_module(root, top) for root in (cwd, cwd / "src"))
    beside = any(_is_python_module(d, top) for d in _traceback_dirs(failure, match.string))
    if submodule:
        return not (in_project or beside)
    return in_project or not beside


_LOCAL_SPECIFIERS = (".", "/", "~", "#", "@/", "file:")
_WINDOWS_PATH = re.compile(r"[A-Za-z]:[\\/]")


def _node_package(match: re.Match[str], failure: Failure) -> bool:
    """A bare specifier or a path inside ``node_modules`` names a package; other paths,
    ``#imports`` and ``@/``/``~`` aliases are the project's own modules."""
    name = match.group("module")
    if "/node_modules/" in name.replace("\\", "/"):
        return True
    return not name.startswith(_LOCAL_SPECIFIERS) and not _WINDOWS_PATH.match(name)


_MAKE_ERROR_5 = _rx(rf"^{_MAKE}: \*\*\* \[[^\]\n]+\] Error 5$")


def _pytest_exit_5(match: re.Match[str], failure: Failure) -> bool:
    """pytest's summary means "no tests" only with its exit status 5 (also through make)."""
    return failure.exit_code == 5 or _MAKE_ERROR_5.search(match.string) is not None


_PYTEST_STATS = r"(?:no tests ran|\d+ (?:deselected|warnings?|errors?|skipped))"

RULES: tuple[Rule, ...] = (
    # Package-manager scripts that do not exist.
    Rule(MISSING_SCRIPT, "npm",
         _rx(r"^npm (?:ERR!|error) [Mm]issing script: \"?(?P<name>[^\"\n]+?)\"?$"), _asked_for),
    Rule(MISSING_SCRIPT, "pnpm",
         _rx(r"^\s*(?:ERR_PNPM_NO_SCRIPT|ERROR)\s+Missing script: \"?(?P<name>[^\"\s]+)\"?"),
         _asked_for),
    Rule(MISSING_SCRIPT, "pnpm",
         _rx(r"^\s*ERR_PNPM_NO_SCRIPT_OR_SERVER\s+Missing script (?P<name>\S+) or file "),
         _asked_for),
    Rule(MISSING_SCRIPT, "pnpm",
         _rx(r"^\s*ERR_PNPM_RECURSIVE_RUN_NO_SCRIPT\s+None of the selected packages has an? "
             r"\"(?P<name>[^\"\n]+)\" script"), _asked_for),
    Rule(MISSING_SCRIPT, "yarn",
         _rx(r"^error Command \"(?P<name>[^\"\n]+)\" not found\."
             r"(?: Did you mean \"[^\"\n]+\"\?)?$"), _asked_for),
    Rule(MISSING_SCRIPT, "yarn",
         _rx(r"^Usage Error: Couldn't find a script named \"(?P<name>[^\"\n]+)\""), _asked_for),
    Rule(MISSING_SCRIPT, "bun",
         _rx(r"^error: (?:Script not found|missing script) \"(?P<name>[^\"\n]+)\""), _asked_for),
    # No package.json: no script of it can be defined (openTiger's reading too).
    Rule(MISSING_SCRIPT, "npm", _rx(r"^npm (?:ERR!|error) enoent Could not read package\.json")),
    Rule(MISSING_SCRIPT, "pnpm", _rx(r"^\s*ERR_PNPM_NO_IMPORTER_MANIFEST_FOUND\b")),
    Rule(MISSING_SCRIPT, "yarn", _rx(r"^error Couldn't find a package\.json file in ")),
    # make: no rule for a target the command names ("needed by ..." is a build failure), or no
    # makefile at all.
    Rule(MISSING_MAKE_TARGET, "make",
         _rx(rf"^{_MAKE}: \*\*\* No rule to make target [`'\u2018](?P<name>[^'\u2019\n]+)"
             r"['\u2019]\.\s+Stop\.$"), _asked_for),
    Rule(MISSING_MAKE_TARGET, "make",
         _rx(rf"^{_MAKE}: \*\*\* No targets specified and no makefile found\.\s+Stop\.$")),
    # Test runners that found no tests.
    Rule(NO_TEST_FILES, "jest", _rx(r"^No tests found, exiting with code 1")),
    Rule(NO_TEST_FILES, "vitest", _rx(r"^No (?:test|benchmark) files found, exiting with code 1")),
    Rule(NO_TEST_FILES, "mocha", _rx(r"^Error: No test files found")),
    Rule(NO_TEST_FILES, "bun", _rx(r"^No tests found!\s*Tests need \"\.test\"")),
    Rule(NO_TEST_FILES, "bun", _rx(r"^The following filters did not match any test files")),
    Rule(NO_TEST_FILES, "pytest",
         _rx(rf"^(?:=+ )?{_PYTEST_STATS}(?:, {_PYTEST_STATS})* in [\d.]+s(?: \([\d:]+\))?"
             r"(?: =+)?$"), _pytest_exit_5),
    # Tools, dependencies and runtimes that are not there.
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "sh",
         _rx(r"^(?:/\S*/)?(?:ba|da|z|k)?sh: (?:\d+: |line \d+: )?[^:\n]+: "
             r"(?:command )?not found$")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "env",
         _rx(r"^(?:/usr/bin/)?env: ['\"\u2018]?[^:\n]+['\"\u2019]?: No such file or directory$")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "make",
         _rx(rf"^{_MAKE}: \*\*\* \[[^\]\n]+\] Error 127$")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "python",
         _rx(r"^\S*python[\d.]*: No module named (?P<module>[\w.]+)"), _python_dependency),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "python",
         _rx(r"^ModuleNotFoundError: No module named '(?P<module>[\w.]+)'"), _python_dependency),
    # In a pytest traceback only the first "E" line of a block is the exception itself.
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "pytest",
         _rx(r"^(?!E\s)[^\n]*\nE +ModuleNotFoundError: No module named '(?P<module>[\w.]+)'"),
         _python_dependency),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "node",
         _rx(r"^(?:Uncaught )?Error: Cannot find module '(?P<module>[^'\n]+)'"), _node_package),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "node",
         _rx(r"^(?:Uncaught )?Error \[ERR_MODULE_NOT_FOUND\]: Cannot find (?:package|module) "
             r"'(?P<module>[^'\n]+)'"), _node_package),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "jest",
         _rx(r"^\s*● Test suite failed to run\n\n\s+Cannot find module '(?P<module>[^'\n]+)' "
             r"from '[^'\n]+'$"), _node_package),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "node", _rx(r"^Error: spawn \S+ ENOENT$")),
    # An installed package that needs another runtime (an ES module required from CommonJS).
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "node",
         _rx(r"^(?:Uncaught )?Error(?: \[ERR_REQUIRE_ESM\])?: require\(\) of ES Module "
             r"(?P<module>\S+)"), _node_package),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "vitest",
         _rx(r"^\s*MISSING DEPENDENCY\s+Cannot find dependency '[^'\n]+'")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "npm", _rx(r"^npm (?:ERR!|error) code EBADENGINE$")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "npx",
         _rx(r"^npm (?:ERR!|error) could not determine executable to run$")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "pnpm",
         _rx(r"^\s*ERR_PNPM_RECURSIVE_EXEC_FIRST_FAIL\s+Command \"[^\"\n]+\" not found")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "cargo", _rx(r"^error: no such command: `[^`\n]+`")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "cargo",
         _rx(r"^error: could not find `Cargo\.toml` in `[^`\n]+` or any parent directory$")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "go",
         _rx(r"^go: (?:go\.mod file not found|cannot find main module)")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "uv", _rx(r"^error: Failed to spawn: `[^`\n]+`")),
)

_PYTEST_NAMES = frozenset({"pytest", "py.test"})
_ARTIFACT_TESTS = frozenset({"-f", "-s"})
# Directory names that hold what a build produces.
_ARTIFACT_DIRS = frozenset({"artifact", "artifacts", "build", "debug", "dist", "out", "release",
                            "target"})
_PACKAGE_MANAGERS = frozenset({"npm", "pnpm", "yarn", "bun"})
_CLEAN_SCRIPT = re.compile(r"\b(?:run\s+)?(?:clean|distclean|clobber)\b", re.IGNORECASE)


def _runs_pytest(argv: Sequence[str]) -> bool:
    """``pytest``, ``python -m pytest``, ``uv run pytest``, ``coverage run -m pytest``, ..."""
    for index, word in enumerate(argv):
        if re.sub(r"-[\d.]+$", "", Path(word).name) in _PYTEST_NAMES:
            return True
        if word == "-m" and argv[index + 1 : index + 2] == ["pytest"]:
            return True
    return False


def _artifact_check(argv: Sequence[str]) -> bool:
    """``test -f dist/x`` or ``[ -s build/y ]``: checking what an earlier step built."""
    if len(argv) < 3 or Path(argv[0]).name not in ("test", "[") or argv[1] not in _ARTIFACT_TESTS:
        return False
    path = argv[2].replace("\\", "/").lower()
    if ".." in path or "*" in path:
        return False
    return any(part in _ARTIFACT_DIRS for part in path.split("/"))


def _cleans(argv: Sequence[str]) -> bool:
    """``make clean``, ``npm run clean``, ``pnpm distclean``...: a step that removes builds."""
    if not argv:
        return False
    program = Path(argv[0]).name
    if re.fullmatch(_MAKE, program):
        return any("clean" in word.lower() for word in argv[1:])
    return program in _PACKAGE_MANAGERS and _CLEAN_SCRIPT.search(" ".join(argv[1:])) is not None


def classify(failure: Failure) -> str:
    """The failure code of a gate that ran and failed (not a timeout or an interruption)."""
    if failure.signal is not None:
        return COMMAND_FAILED
    if failure.exit_code in (126, 127):
        return SETUP_OR_BOOTSTRAP_ISSUE
    program = _program_argv(failure.argv)
    if failure.exit_code == 5 and _runs_pytest(program):
        return NO_TEST_FILES
    text = _PYTEST_CAPTURED.sub("", plain_output(failure.output))
    for rule in RULES:
        for match in rule.pattern.finditer(text):
            if rule.accept is None or rule.accept(match, failure):
                return rule.code
    if (failure.exit_code == 1 and not text.strip() and _artifact_check(program)
            and _cleans(_program_argv(failure.previous))):
        return SEQUENCE_ISSUE
    return COMMAND_FAILED
