"""The text of a native contract (``verify.toml`` or ``[tool.verifygate]``) that ``init`` and
``migrate`` write, checked by the contract's own loader before a byte is written.

PYTEST_DONT_REWRITE
"""

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_verifygate.contract.discover import find_repo_root
from pytest_verifygate.contract.parse import parse_toml
from pytest_verifygate.errors import UsageError

Value = str | bool | int | Sequence[str]
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
# What a TOML literal string ('...') cannot hold: its quote, and control characters but tab.
_NOT_LITERAL = re.compile(r"['\x00-\x08\x0a-\x1f\x7f]")


def toml_string(text: str) -> str:
    """A literal TOML string (a regex's backslashes kept as written) where it can be, else a
    basic one, whose escapes include all of JSON's."""
    return json.dumps(text, ensure_ascii=False) if _NOT_LITERAL.search(text) else f"'{text}'"


def toml_value(value: Value) -> str:
    if isinstance(value, (bool, int)):
        return json.dumps(value)  # true, false or the integer, as TOML writes them
    if isinstance(value, str):
        return toml_string(value)
    return "[" + ", ".join(toml_string(item) for item in value) + "]"


def toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def contract_text(gates: Sequence[Mapping[str, Value]], *,
                  settings: Mapping[str, Value] | None = None, comments: Sequence[str] = (),
                  table: str = "") -> str:
    """A contract's text: ``comments`` as ``#`` lines, the settings and the gates (keys in the
    order given), under ``table`` (``tool.verifygate`` in a pyproject.toml). No ``#:schema``
    line: until SchemaStore hosts the schema, a URL would not load (docs: Contract keys)."""
    lines = [f"# {line}".rstrip() for comment in comments for line in comment.splitlines()]
    prefix = f"{table}." if table else ""
    if settings:
        lines += ["", f"[{prefix}settings]"]
        lines += [f"{toml_key(key)} = {toml_value(value)}" for key, value in settings.items()]
    for gate in gates:
        lines += ["", f"[[{prefix}gate]]"]
        lines += [f"{toml_key(key)} = {toml_value(value)}" for key, value in gate.items()]
    return "\n".join(lines).lstrip("\n") + "\n"


def check_contract_text(text: str, shown: str, root: Path, *, pyproject: bool = False) -> None:
    """Load ``text`` as the contract it will be (raising ``ContractError``): what is written is
    always a contract the loader accepts."""
    from pytest_verifygate.contract.fields import FieldReader
    from pytest_verifygate.contract.load import load_text

    load_text(text, "pyproject" if pyproject else "toml",
              FieldReader(shown, root, find_repo_root(root) or root))


def native_contract(directory: Path) -> Path | None:
    """The contract ``init`` writes in ``directory``: ``verify.toml``, else a
    ``pyproject.toml`` with a ``[tool.verifygate]`` table; None if neither is there."""
    if (directory / "verify.toml").exists():
        return directory / "verify.toml"
    pyproject = directory / "pyproject.toml"
    return pyproject if pyproject.is_file() and contract_table(pyproject) is not None else None


def contract_table(path: Path) -> dict[str, Any] | None:
    """The contract's table in the TOML file at ``path`` (in a pyproject.toml, its
    ``[tool.verifygate]``, or None)."""
    data = parse_toml(path.read_text(encoding="utf-8-sig"), path.name)
    if path.name != "pyproject.toml":
        return data
    tool = data.get("tool")
    table = tool.get("verifygate") if isinstance(tool, dict) else None
    return table if isinstance(table, dict) else None


def write_new(path: Path, text: str) -> None:
    """Write ``text`` to a new file at ``path``; never over an existing file."""
    try:
        with open(path, "x", encoding="utf-8") as stream:
            stream.write(text)
    except FileExistsError:
        raise UsageError(f"{path} already exists: not overwritten (write elsewhere with "
                         "--output PATH, or - for stdout)") from None
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
