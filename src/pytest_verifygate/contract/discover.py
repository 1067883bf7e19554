"""Where a contract is: its file (found from a directory upwards), its format, its project root
and repository, and how its paths are shown and compared.

PYTEST_DONT_REWRITE
"""

import os
from pathlib import Path

from pytest_verifygate.contract.parse import parse_toml
from pytest_verifygate.errors import ContractError

# Looked for in this order in each directory (docs: The contract).
CONTRACT_NAMES = ("verify.toml", "pyproject.toml", ".middle/verify.toml",
                  ".opentiger/verify.contract.json")


def find_repo_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding ``.git`` (a directory or a file)."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def find_contract(start: Path | None = None) -> Path | None:
    """The first contract file from ``start`` upwards to the git toplevel."""
    here = (start or Path.cwd()).resolve()
    top = find_repo_root(here)
    for directory in (here, *here.parents):
        for name in CONTRACT_NAMES:
            candidate = directory / name
            if candidate.is_file() and (name != "pyproject.toml" or _has_table(candidate)):
                return candidate
        if directory == top:
            break
    return None


def _has_table(path: Path) -> bool:
    try:
        raw = path.read_bytes()
    except OSError:
        return False
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return b"verifygate" in raw  # a broken pyproject that mentions us is reported when loaded
    return pyproject_has_table(text)


def pyproject_has_table(text: str) -> bool:
    """Whether a pyproject.toml's ``text`` has a ``[tool.verifygate]`` table; a broken one
    that mentions us counts (it is reported when loaded, not skipped silently)."""
    if "verifygate" not in text:  # most pyprojects never mention us: no parse
        return False
    try:
        data = parse_toml(text, "pyproject.toml")
    except ContractError:
        return True
    tool = data.get("tool")
    return isinstance(tool, dict) and "verifygate" in tool


def contract_format(path: Path) -> str:
    """Which of the four formats a contract file is, from its name and place."""
    if path.name == "pyproject.toml":
        return "pyproject"
    if path.suffix == ".json":
        return "opentiger"
    if path.parent.name == ".middle":
        return "middle"
    return "toml"


def project_root_of(path: Path) -> Path:
    """The directory that ``when_changed`` and ``cwd`` are relative to."""
    parent = path.parent
    return parent.parent if parent.name in (".middle", ".opentiger") else parent


def posix_relative(path: Path, start: Path) -> str:
    """``path`` relative to ``start`` with "/" separators; as given when it is not below it."""
    try:
        return path.relative_to(start).as_posix()
    except ValueError:
        return path.as_posix()


def display_path(path: Path) -> str:
    """``path`` as messages show it: relative to the current directory where possible."""
    try:
        return os.path.relpath(path)
    except ValueError:  # pragma: no cover - other drive on Windows
        return str(path)
