"""The verify contract: its records, finding its file, and ``load_contract`` (imported on first
use, so that importing the records does not load the parsers).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_verifygate.contract.discover import (
    display_path,
    find_contract,
    find_repo_root,
    posix_relative,
)
from pytest_verifygate.contract.keys import GATE_KEYS, SETTINGS_KEYS
from pytest_verifygate.contract.model import Contract, Gate

if TYPE_CHECKING:
    from pytest_verifygate.contract.load import load_contract as load_contract

__all__ = [
    "GATE_KEYS", "SETTINGS_KEYS", "Contract", "Gate", "display_path", "find_contract",
    "find_repo_root", "load_contract", "posix_relative",
]


def __getattr__(name: str) -> Any:
    if name == "load_contract":
        from pytest_verifygate.contract.load import load_contract

        return load_contract
    raise AttributeError(f"module 'pytest_verifygate.contract' has no attribute {name!r}")
