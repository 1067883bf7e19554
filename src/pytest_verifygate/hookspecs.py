"""The pluggy hooks pytest-verifygate calls (SPEC 6.4).

They are registered in every pytest session (so a ``conftest.py`` implementing them never
errors) and in the ``verifygate`` command, which also loads plugins from the
``verifygate`` entry-point group. The project name is ``pytest`` so ``@pytest.hookimpl``
works for both.
"""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_verifygate_classify(gate: Any, result: Any) -> str | None:
    """Return a failure code for a failed gate, or None to keep the built-in one.

    ``gate`` is the ``Gate``; ``result`` the ``GateResult`` carrying the built-in ``code``,
    ``exit_code``, ``signal`` and ``output_tail``. The returned code must be one of
    ``pytest_verifygate.classify.CODES``.
    """


@hookspec
def pytest_verifygate_gate_started(gate: Any) -> None:
    """Called when a gate's first attempt is about to be spawned."""


@hookspec
def pytest_verifygate_gate_finished(gate: Any, result: Any) -> None:
    """Called once per selected gate with its final ``GateResult`` (also for skips)."""


@hookspec
def pytest_verifygate_modifyreport(report: dict[str, Any]) -> None:
    """Change the JSON report (a dict, modified in place) just before it is written."""
