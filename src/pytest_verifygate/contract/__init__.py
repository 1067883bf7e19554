"""The verify contract: the records (``model``), finding the file (``discover``), reading and
parsing it (``parse``), checking its values (``fields``; ``settings`` for the settings every
form shares), one loader per form (``native`` for verify.toml, pyproject.toml and middle;
``opentiger``) and ``load_contract``, which puts them together (``load``).

The loaders are imported on first use, so that importing the records (the runner's, the
reports' and the result cache's) does not load them.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_verifygate.contract.discover import (
    CONTRACT_NAMES,
    contract_format,
    display_path,
    find_contract,
    find_repo_root,
    posix_relative,
    project_root_of,
)
from pytest_verifygate.contract.model import (
    CATEGORIES,
    EMPTY_ENV,
    GATE_KEYS,
    KINDS,
    MAX_RETRIES,
    ON_MISSING,
    OPENTIGER_KEYS,
    OPENTIGER_RULE_KEYS,
    SETTINGS_KEYS,
    Contract,
    Gate,
    Settings,
)

if TYPE_CHECKING:
    from pytest_verifygate.contract.load import load_contract as load_contract
    from pytest_verifygate.contract.opentiger import (
        minimatch_to_gitignore as minimatch_to_gitignore,
    )

__all__ = [
    "CATEGORIES",
    "CONTRACT_NAMES",
    "EMPTY_ENV",
    "GATE_KEYS",
    "KINDS",
    "MAX_RETRIES",
    "ON_MISSING",
    "OPENTIGER_KEYS",
    "OPENTIGER_RULE_KEYS",
    "SETTINGS_KEYS",
    "Contract",
    "Gate",
    "Settings",
    "contract_format",
    "display_path",
    "find_contract",
    "find_repo_root",
    "load_contract",
    "minimatch_to_gitignore",
    "posix_relative",
    "project_root_of",
]


def __getattr__(name: str) -> Any:
    if name == "load_contract":
        from pytest_verifygate.contract.load import load_contract

        return load_contract
    if name == "minimatch_to_gitignore":
        from pytest_verifygate.contract.opentiger import minimatch_to_gitignore

        return minimatch_to_gitignore
    raise AttributeError(f"module 'pytest_verifygate.contract' has no attribute {name!r}")
