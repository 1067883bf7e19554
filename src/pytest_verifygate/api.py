"""Small conveniences of the public API that combine engine pieces."""

from __future__ import annotations

from typing import Any

from pytest_verifygate.engine import RunResult
from pytest_verifygate.report import build_report


def to_report(run: RunResult, hook: Any = None) -> dict[str, Any]:
    """The JSON report (SPEC 6.3) of a finished run, as a dict.

    With ``hook`` (a pluggy ``HookRelay``), plugins get ``pytest_verifygate_modifyreport``
    on it before it is returned.
    """
    report = build_report(
        contract=run.contract,
        changes=run.changes,
        selections=run.selections,
        results=run.results,
        verdict=run.verdict,
        interrupted=run.interrupted,
    )
    if hook is not None:
        hook.pytest_verifygate_modifyreport(report=report)
    return report
