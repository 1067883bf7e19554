"""pytest-verifygate: verification gates as pytest items, a CLI, and hooks for commits and agents.

The public Python API (for orchestrators) is re-exported here lazily, so that importing the
package (as the ``verifygate`` command and pytest's plugin loader do) stays cheap.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = {
    "load_contract": "pytest_verifygate.contract",
    "find_contract": "pytest_verifygate.contract",
    "Contract": "pytest_verifygate.contract",
    "Gate": "pytest_verifygate.contract",
    "compute_changes": "pytest_verifygate.changes",
    "ChangeRequest": "pytest_verifygate.changes",
    "ChangeSet": "pytest_verifygate.changes",
    "select_gates": "pytest_verifygate.selection",
    "run_gates": "pytest_verifygate.engine",
    "RunResult": "pytest_verifygate.engine",
    "GateResult": "pytest_verifygate.runner",
    "to_report": "pytest_verifygate.api",
    "to_digest": "pytest_verifygate.digest",
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
