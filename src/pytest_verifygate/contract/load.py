"""Loading a contract: ``load_contract`` finds or checks the file, reads and parses it, hands
it to its format's loader and returns a ``Contract``.

Every problem a user can put in a contract file becomes a ``ContractError`` naming the file,
the gate and the key, with a fix; nothing lets a traceback through for bad input.

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
from pytest_verifygate.contract.model import Contract
from pytest_verifygate.contract.native import load_native
from pytest_verifygate.contract.parse import parse_json, parse_toml, read_text
from pytest_verifygate.errors import ContractError


def load_contract(
    path: str | os.PathLike[str] | None = None,
    start: Path | None = None,
    *,
    flag: str = "--contract",
) -> Contract:
    """Load and validate a contract: the file at ``path``, or the one found from ``start``.

    ``flag`` is how the calling front end names the contract option, for the hints.
    """
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
    # Resolve the directory but not a symlinked contract file itself: the project root (and
    # the repository that cwd must stay inside) is where the contract was found or named, so
    # a link to a file elsewhere cannot move the gates out of this repository.
    contract_path = contract_path.parent.resolve() / contract_path.name
    root = project_root_of(contract_path)
    repo_root = find_repo_root(root) or root
    fmt = contract_format(contract_path)
    text = read_text(contract_path, shown)
    reader = FieldReader(shown, root, repo_root)
    parsed = parse_json(text, shown) if fmt == "opentiger" else parse_toml(text, shown)
    if fmt == "opentiger":
        from pytest_verifygate.contract.opentiger import load_opentiger  # JSON contracts only

        settings, gates, warnings = load_opentiger(parsed, reader)
    else:
        settings, gates = load_native(parsed, reader, fmt)
        warnings = []
    return Contract(
        path=contract_path,
        root=root,
        repo_root=repo_root,
        format=fmt,
        settings=settings,
        gates=tuple(gates),
        warnings=tuple(warnings),
        text=text,
    )

