"""The verify contract: the records (``model``), finding the file (``discover``), reading and
parsing it (``parse``), checking its values (``fields``;
``settings`` for the settings every form shares), one loader per form (``native`` for
verify.toml, pyproject.toml and middle; ``opentiger``) and ``load_contract``, which puts them
together (``load``).

This package's public names are re-exported lazily from the modules that own them, so that
importing the records (``contract.model``: the runner's records and the command parser need
them) does not load the loaders.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the real names; at run time they load on first use
    from pytest_verifygate.contract.discover import CONTRACT_NAMES as CONTRACT_NAMES
    from pytest_verifygate.contract.discover import contract_format as contract_format
    from pytest_verifygate.contract.discover import display_path as display_path
    from pytest_verifygate.contract.discover import find_contract as find_contract
    from pytest_verifygate.contract.discover import find_repo_root as find_repo_root
    from pytest_verifygate.contract.discover import posix_relative as posix_relative
    from pytest_verifygate.contract.discover import project_root_of as project_root_of
    from pytest_verifygate.contract.load import load_contract as load_contract
    from pytest_verifygate.contract.model import CATEGORIES as CATEGORIES
    from pytest_verifygate.contract.model import EMPTY_ENV as EMPTY_ENV
    from pytest_verifygate.contract.model import GATE_KEYS as GATE_KEYS
    from pytest_verifygate.contract.model import KINDS as KINDS
    from pytest_verifygate.contract.model import MAX_RETRIES as MAX_RETRIES
    from pytest_verifygate.contract.model import ON_MISSING as ON_MISSING
    from pytest_verifygate.contract.model import OPENTIGER_KEYS as OPENTIGER_KEYS
    from pytest_verifygate.contract.model import OPENTIGER_RULE_KEYS as OPENTIGER_RULE_KEYS
    from pytest_verifygate.contract.model import SETTINGS_KEYS as SETTINGS_KEYS
    from pytest_verifygate.contract.model import Contract as Contract
    from pytest_verifygate.contract.model import Gate as Gate
    from pytest_verifygate.contract.model import Settings as Settings
    from pytest_verifygate.contract.opentiger import (
        minimatch_to_gitignore as minimatch_to_gitignore,
    )

_EXPORTS = {
    "CONTRACT_NAMES": "pytest_verifygate.contract.discover",
    "contract_format": "pytest_verifygate.contract.discover",
    "display_path": "pytest_verifygate.contract.discover",
    "find_contract": "pytest_verifygate.contract.discover",
    "find_repo_root": "pytest_verifygate.contract.discover",
    "posix_relative": "pytest_verifygate.contract.discover",
    "project_root_of": "pytest_verifygate.contract.discover",
    "load_contract": "pytest_verifygate.contract.load",
    "CATEGORIES": "pytest_verifygate.contract.model",
    "EMPTY_ENV": "pytest_verifygate.contract.model",
    "GATE_KEYS": "pytest_verifygate.contract.model",
    "KINDS": "pytest_verifygate.contract.model",
    "MAX_RETRIES": "pytest_verifygate.contract.model",
    "ON_MISSING": "pytest_verifygate.contract.model",
    "OPENTIGER_KEYS": "pytest_verifygate.contract.model",
    "OPENTIGER_RULE_KEYS": "pytest_verifygate.contract.model",
    "SETTINGS_KEYS": "pytest_verifygate.contract.model",
    "Contract": "pytest_verifygate.contract.model",
    "Gate": "pytest_verifygate.contract.model",
    "Settings": "pytest_verifygate.contract.model",
    "minimatch_to_gitignore": "pytest_verifygate.contract.opentiger",
}

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
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_verifygate.contract' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
