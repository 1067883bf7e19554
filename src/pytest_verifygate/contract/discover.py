"""Where a contract is: finding the file from a directory upwards, which format its name and
place say it is, the project root its paths are relative to, and the repository around it.

Also how paths are shown (``display_path``) and compared (``posix_relative``). Nothing here
reads a contract's gates.

PYTEST_DONT_REWRITE
"""

import os
from pathlib import Path

from pytest_verifygate.contract.parse import parse_toml
from pytest_verifygate.errors import ContractError

# Looked for in this order in each directory (docs: The contract).
CONTRACT_NAMES = (
    "verify.toml",
    "pyproject.toml",
    ".middle/verify.toml",
    ".opentiger/verify.contract.json",
)


def find_repo_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding ``.git`` (a directory or a file)."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def find_contract(start: Path | None = None) -> Path | None:
    """The first contract file from ``start`` upwards to the git toplevel (in the order of the
    the docs' The contract)."""
    here = (start or Path.cwd()).resolve()
    top = find_repo_root(here)
    for directory in (here, *here.parents):
        for name in CONTRACT_NAMES:
            candidate = directory / name
            if not candidate.is_file():
                continue
            if name == "pyproject.toml" and not _pyproject_has_table(candidate):
                continue
            return candidate
        if top is not None and directory == top:
            break
    return None


def _pyproject_has_table(path: Path) -> bool:
    """Whether this pyproject.toml has a ``[tool.verifygate]`` table (or might: a broken one
    that mentions us is a contract, so that loading reports what is wrong with it)."""
    try:
        raw = path.read_bytes()
    except OSError:
        return False
    if b"verifygate" not in raw:  # cheap pre-check: most pyprojects never mention us
        return False
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return True  # a broken pyproject that mentions us is reported when loaded
    return pyproject_has_table(text, str(path))


def pyproject_has_table(text: str, shown: str) -> bool:
    """Whether a pyproject.toml's ``text`` has a ``[tool.verifygate]`` table; a broken one
    that mentions us counts (it is reported when loaded, not skipped silently)."""
    if "verifygate" not in text:
        return False
    try:
        data = parse_toml(text, shown)
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
    if parent.name in (".middle", ".opentiger"):
        return parent.parent
    return parent


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
