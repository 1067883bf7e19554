"""``load_contract``: find or check the file, read and parse it, and hand it to its format's
loader; every problem in the file is a one-line ``ContractError``, never a traceback.

PYTEST_DONT_REWRITE
"""

import os
from pathlib import Path

from pytest_verifygate.contract.discover import (
    contract_format,
    display_path,
    find_contract,
    find_repo_root,
    project_root_of,
)
from pytest_verifygate.contract.fields import FieldReader
from pytest_verifygate.contract.model import Contract, Gate, Settings
from pytest_verifygate.contract.native import load_native
from pytest_verifygate.contract.parse import parse_json, parse_toml, read_text
from pytest_verifygate.errors import ContractError


def load_contract(path: str | os.PathLike[str] | None = None, start: Path | None = None, *,
                  flag: str = "--contract") -> Contract:
    """Load and validate the contract at ``path``, or the one found from ``start``; ``flag``
    is how the calling front end names the contract option, for the hints."""
    if path is None:
        found = find_contract(start)
        if found is None:
            where = (start or Path.cwd()).resolve()
            raise ContractError(
                str(where),
                "no verify contract found here or above (up to the git toplevel)",
                hint=f"create verify.toml with at least one [[gate]], or pass {flag} PATH",
            )
        contract_path = found
    else:
        contract_path = Path(path)
        if not contract_path.is_absolute():
            contract_path = (start or Path.cwd()) / contract_path
    shown = display_path(contract_path)
    if contract_path.is_dir():
        raise ContractError(shown, "is a directory, not a contract file")
    if not contract_path.is_file():
        raise ContractError(shown, "no such contract file", hint=f"check the {flag} path")
    # The directory is resolved, a symlinked contract file is not: a link to a file elsewhere
    # cannot move the project root (and the repository cwd must stay inside) out of here.
    contract_path = contract_path.parent.resolve() / contract_path.name
    root = project_root_of(contract_path)
    repo_root = find_repo_root(root) or root
    fmt = contract_format(contract_path)
    text = read_text(contract_path, shown)
    settings, gates, warnings = load_text(text, fmt, FieldReader(shown, root, repo_root))
    return Contract(path=contract_path, root=root, repo_root=repo_root, format=fmt,
                    settings=settings, gates=tuple(gates), warnings=tuple(warnings), text=text)


def load_text(text: str, fmt: str, reader: FieldReader) -> tuple[Settings, list[Gate], list[str]]:
    """The settings, gates and warnings of a contract's ``text`` in format ``fmt``."""
    if fmt == "opentiger":
        from pytest_verifygate.contract.opentiger import load_opentiger  # JSON contracts only

        return load_opentiger(parse_json(text, reader.shown), reader)
    settings, gates = load_native(parse_toml(text, reader.shown), reader, fmt)
    return settings, gates, []
