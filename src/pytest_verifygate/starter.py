"""The starter contract ``verifygate init`` writes: a gate for each tool the project's files
show it uses, kept to the changes it can judge.

PYTEST_DONT_REWRITE
"""

import ast
import configparser
import contextlib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from pytest_verifygate.contract.parse import parse_toml
from pytest_verifygate.contract.writer import Value

# A lock file says which runner puts the project's tools on PATH.
_RUNNERS = (("uv.lock", ["uv", "run"]), ("poetry.lock", ["poetry", "run"]),
            ("pdm.lock", ["pdm", "run"]), ("Pipfile.lock", ["pipenv", "run"]))
_PYTHON = ["python", "pyi"]
_PYTHON_CONFIGS = ("pyproject.toml", "setup.cfg", "tox.ini", "pytest.ini")
_PYTHON_VERSION_ENV = re.compile(r"py(py)?[\d.]*(-.*)?$")


class Starter(NamedTuple):
    gates: list[dict[str, Value]]
    found: list[str]  # what was detected, for the summary line
    # Better added by hand (comments in the file): tox, nox and pre-commit.
    suggestions: list[str]
    # Gates whose program is not installed here (written as comments), and why, one line each.
    unresolved: list[dict[str, Value]]
    notes: list[str]


def starter_gates(root: Path) -> Starter:
    pyproject = _toml(root / "pyproject.toml")
    tool = pyproject.get("tool", {}) if isinstance(pyproject.get("tool"), dict) else {}
    setup_cfg = _ini(root / "setup.cfg")
    tox_ini = _ini(root / "tox.ini")
    lock, runner = next(((name, prefix) for name, prefix in _RUNNERS
                         if (root / name).is_file()), ("", []))
    prefix_for = _command_prefixes(root, runner)
    gates: list[dict[str, Value]] = []
    found: list[str] = []
    unresolved: list[dict[str, Value]] = []
    notes: list[str] = []
    if runner and not shutil.which(runner[0]):
        notes.append(f"{lock}: {runner[0]} is not on PATH here: the gates run the tools from "
                     "PATH")
    # Only what is there: a pattern that matches nothing is what verifygate check warns of.
    python_and_config = ["**/*.py", *(["**/*.pyi"] if _any(root, "*.pyi") else []),
                         *(name for name in _PYTHON_CONFIGS if (root / name).is_file())]

    def add(tool_name: str, name: str, command: list[str], program: str = "",
            **keys: Value) -> None:
        prefix = prefix_for(program or command[0])
        gate: dict[str, Value] = {"name": name, "command": [*(prefix or []), *command], **keys}
        if prefix is None:
            unresolved.append(gate)
            notes.append(f"not written: gate {name!r}: {program or command[0]} is not installed "
                         "here (it is in the file as a comment: install it, then uncomment it)")
        else:
            gates.append(gate)
            found.append(tool_name)

    # ruff and black read only the files and their config: their passes are cached. mypy,
    # pyright and pytest read what is installed, which the cache key does not see.
    ruff = "ruff" in tool or (root / "ruff.toml").is_file() or (root / ".ruff.toml").is_file()
    black = "black" in tool
    if ruff:
        # --force-exclude: files named on the command line still obey the config's excludes.
        add("ruff", "ruff", ["ruff", "check", "--force-exclude", "{files}"], types_or=_PYTHON,
            cache=True)
        if not black:
            add("ruff format", "ruff-format",
                ["ruff", "format", "--check", "--force-exclude", "{files}"], types_or=_PYTHON,
                cache=True)
    if black:
        add("black", "black", ["black", "--check", "{files}"], types_or=_PYTHON, cache=True)
    if (root / ".flake8").is_file() or "flake8" in setup_cfg or "flake8" in tox_ini:
        add("flake8", "flake8", ["flake8", "{files}"], types=["python"])
    mypy = tool.get("mypy") if isinstance(tool.get("mypy"), dict) else None
    if mypy is None and ((root / "mypy.ini").is_file() or "mypy" in setup_cfg):
        mypy = {}
    if mypy is not None:
        # With files = [...] mypy checks the program it names, else the changed files.
        command = ["mypy"] if mypy.get("files") else ["mypy", "{files}"]
        add("mypy", "mypy", command, when_changed=python_and_config)
    if "pyright" in tool or (root / "pyrightconfig.json").is_file():
        add("pyright", "pyright", ["pyright"], when_changed=python_and_config)
    if ("pytest" in tool or (root / "pytest.ini").is_file() or "tool:pytest" in setup_cfg
            or "pytest" in tox_ini or any((root / name / "conftest.py").is_file()
                                          for name in ("", "tests", "test", "testing"))):
        add("pytest", "pytest", ["python", "-m", "pytest", "-q"], program="pytest",
            when_changed=python_and_config)
    for docs in ("docs", "doc"):
        if (root / docs / "conf.py").is_file():
            add("sphinx", "docs", ["sphinx-build", "-q", "-b", "dummy", docs,
                                   f"{docs}/_build/verifygate"],
                when_changed=[f"{docs}/**", "**/*.py",
                              *(["**/*.rst"] if _any(root, "*.rst", docs) else [])])
            break
    suggestions = []
    if (root / ".pre-commit-config.yaml").is_file():
        suggestions.append("This project has a .pre-commit-config.yaml: verifygate migrate "
                           "adds its hooks to this file as gates (or add a gate running "
                           "[\"pre-commit\", \"run\", \"--files\", \"{files}\"]).")
    for what, each, names, runs in (
            ("tox environments", "environment", _tox_envs(tox_ini, tool), "tox -e"),
            ("nox sessions", "session", _nox_sessions(root / "noxfile.py"), "nox -s")):
        if names:
            suggestions.append(f"{what}: {', '.join(names)}: a gate per {each} to check, e.g. "
                               f'command = "{runs} {names[0]}".')
    return Starter(gates, found, suggestions, unresolved, notes)


def _command_prefixes(root: Path, runner: list[str]) -> Callable[[str], list[str] | None]:
    """What goes before a program's command so that it resolves on this machine: the lock
    file's runner when it is installed (and the project's ``.venv``, if made yet, has the
    program, or it is on PATH), nothing when the program is on PATH, else None."""
    runner_found = bool(runner) and shutil.which(runner[0]) is not None
    environment = root / ".venv"

    def prefix(program: str) -> list[str] | None:
        on_path = shutil.which(program) is not None
        if runner_found and (on_path or not environment.is_dir()
                             or (environment / "bin" / program).is_file()):
            return runner
        return [] if on_path else None

    return prefix


def _any(root: Path, pattern: str, but: str = "") -> bool:
    """Whether a file matching ``pattern`` is under ``root``, outside hidden directories,
    virtualenvs and ``but``."""
    import fnmatch

    for _directory, subdirs, names in os.walk(root):
        subdirs[:] = [name for name in subdirs if not name.startswith(".")
                      and name not in ("node_modules", "venv", but)]
        if any(fnmatch.fnmatch(name, pattern) for name in names):
            return True
    return False


def _toml(path: Path) -> dict[str, Any]:
    try:
        return parse_toml(_text(path, "utf-8-sig"), str(path))
    except UnicodeDecodeError:
        return {}


def _ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    with contextlib.suppress(configparser.Error, UnicodeDecodeError):  # unreadable: no tools
        parser.read_string(_text(path), str(path))
    return parser


def _tox_envs(tox_ini: configparser.ConfigParser, tool: dict[str, Any]) -> list[str]:
    """The envlist's named environments (lint, docs), not the interpreter matrix (py311,
    py3.13) or generated names; from tox.ini, else ``[tool.tox] env_list`` (tox 4's TOML)."""
    toml_list = tool.get("tox", {}).get("env_list") if isinstance(tool.get("tox"), dict) else None
    if tox_ini.has_option("tox", "envlist"):
        # Commas inside braces (py3{10,11}-django) belong to one generated name.
        names = re.split(r"[\s,]+(?![^{]*})", tox_ini.get("tox", "envlist"))
    elif isinstance(toml_list, list):
        names = [name for name in toml_list if isinstance(name, str)]
    else:
        return []
    return [name for name in names if name and not _PYTHON_VERSION_ENV.match(name)
            and not re.search(r"[{}]", name)]


def _nox_sessions(path: Path) -> list[str]:
    """The functions of ``noxfile.py`` decorated as sessions (read, never run)."""
    try:
        tree = ast.parse(_text(path))
    # Nesting deeper than the parser's stack is a MemoryError or a RecursionError: no sessions.
    except (UnicodeDecodeError, SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    sessions = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
                "session" in ast.unparse(decorator) for decorator in node.decorator_list):
            sessions.append(node.name)
    return sessions


# The most of a project file ``init`` reads to find its tools.
MAX_FILE_BYTES = 4 << 20


def _text(path: Path, encoding: str = "utf-8") -> str:
    """``path``'s text; empty unless a regular file of a sane size (read non-blocking)."""
    from pytest_verifygate.state.storage import read_user_file

    return (read_user_file(path, MAX_FILE_BYTES) or b"").decode(encoding)
