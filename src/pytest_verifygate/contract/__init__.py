"""The verify contract: the records (``model``), finding the file (``discover``), reading and
parsing it (``parse``), checking its values (``fields``; ``settings`` for the settings every
form shares), one loader per form (``native`` for verify.toml, pyproject.toml and middle;
``opentiger``, imported only for its own form) and ``load_contract``, which puts them together
(``load``).

PYTEST_DONT_REWRITE
"""

from pytest_verifygate.contract.discover import (
    CONTRACT_NAMES,
    contract_format,
    display_path,
    find_contract,
    find_repo_root,
    posix_relative,
    project_root_of,
)
from pytest_verifygate.contract.load import load_contract
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
    "posix_relative",
    "project_root_of",
]
