"""pytest-verifygate: verification gates as pytest items, a CLI, and hooks for commits and agents.

The public Python API (for orchestrators) is re-exported here lazily, so that importing the
package (as the ``verifygate`` command and pytest's plugin loader do) stays cheap.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the real names; at run time they load on first use
    from pytest_verifygate.contract import Contract as Contract
    from pytest_verifygate.contract import Gate as Gate
    from pytest_verifygate.contract import find_contract as find_contract
    from pytest_verifygate.contract import load_contract as load_contract
    from pytest_verifygate.engine import Plan as Plan
    from pytest_verifygate.engine import RunRequest as RunRequest
    from pytest_verifygate.engine import RunResult as RunResult
    from pytest_verifygate.engine import prepare as prepare
    from pytest_verifygate.engine import run as run
    from pytest_verifygate.engine import run_gates as run_gates
    from pytest_verifygate.engine import to_report as to_report
    from pytest_verifygate.errors import ContractError as ContractError
    from pytest_verifygate.errors import VerifyGateError as VerifyGateError
    from pytest_verifygate.git.changes import ChangeRequest as ChangeRequest
    from pytest_verifygate.git.changes import ChangeSet as ChangeSet
    from pytest_verifygate.git.changes import compute_changes as compute_changes
    from pytest_verifygate.report.digest import failure_signature as failure_signature
    from pytest_verifygate.report.digest import to_digest as to_digest
    from pytest_verifygate.runner.records import GateResult as GateResult
    from pytest_verifygate.selection import select_gates as select_gates

__version__ = "0.1.0"

_API = {
    "load_contract": "pytest_verifygate.contract",
    "find_contract": "pytest_verifygate.contract",
    "Contract": "pytest_verifygate.contract",
    "Gate": "pytest_verifygate.contract",
    "compute_changes": "pytest_verifygate.git.changes",
    "ChangeRequest": "pytest_verifygate.git.changes",
    "ChangeSet": "pytest_verifygate.git.changes",
    "select_gates": "pytest_verifygate.selection",
    "prepare": "pytest_verifygate.engine",
    "run": "pytest_verifygate.engine",
    "RunRequest": "pytest_verifygate.engine",
    "Plan": "pytest_verifygate.engine",
    "run_gates": "pytest_verifygate.engine",
    "RunResult": "pytest_verifygate.engine",
    "GateResult": "pytest_verifygate.runner.records",
    "to_report": "pytest_verifygate.engine",
    "to_digest": "pytest_verifygate.report.digest",
    "failure_signature": "pytest_verifygate.report.digest",
    "ContractError": "pytest_verifygate.errors",
    "VerifyGateError": "pytest_verifygate.errors",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_verifygate' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
