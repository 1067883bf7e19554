"""The words every text form of a run shares (outcome counts, durations, a gate's code), so
that each form says them the same way.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from pytest_verifygate import codes

if TYPE_CHECKING:
    from pytest_verifygate.report.model import Summary


def is_interrupted(gate: Mapping[str, Any]) -> bool:
    """Whether a report entry (or a result's dict) is a gate cut short, not a failure."""
    return gate.get("outcome") == codes.FAILED and gate.get("code") == codes.INTERRUPTED


def summary_counts(gates: Iterable[tuple[str, str | None]]) -> Summary:
    """A report's ``summary`` from each gate's (outcome, code); gates cut short count as
    ``interrupted``, not ``failed``: nothing is known to be wrong with them."""
    summary = dict.fromkeys((*codes.OUTCOMES, codes.INTERRUPTED), 0)
    for outcome, code in gates:
        key = codes.INTERRUPTED if (outcome, code) == (codes.FAILED, codes.INTERRUPTED) else outcome
        summary[key] = summary.get(key, 0) + 1
    return cast("Summary", summary)


def outcome_counts(summary: Mapping[str, Any]) -> str:
    """``2 passed, 1 failed, 0 skipped, 0 pending[, 2 interrupted]``; zero counts are kept
    so the shape never changes: scripts and people grep for it."""
    counts = ", ".join(f"{summary.get(outcome, 0)} {outcome}" for outcome in codes.OUTCOMES)
    interrupted = summary.get(codes.INTERRUPTED, 0)
    return counts + (f", {interrupted} {codes.INTERRUPTED}" if interrupted else "")


def format_seconds(seconds: float, *, prose: bool = False) -> str:
    """``1.20s`` / ``2m05.0s`` for columns; with ``prose`` ``1.20 s`` / ``2 min 5 s``."""
    minutes = int(seconds // 60)
    if prose:
        return f"{seconds:.2f} s" if seconds < 60 else f"{minutes} min {seconds % 60:.0f} s"
    return f"{seconds:.2f}s" if seconds < 60 else f"{minutes}m{seconds % 60:04.1f}s"


def failure_code(gate: Mapping[str, Any]) -> str:
    """The code of a failed gate's report entry; ``command_failed`` when it names none."""
    return str(gate.get("code") or codes.COMMAND_FAILED)


def skip_code(gate: Mapping[str, Any]) -> str | None:
    """The code a gate skipped by ``on_missing = "skip"`` was skipped for, else None: a
    skipped entry has no code, but its reason starts with it."""
    if gate.get("outcome") != codes.SKIPPED:
        return None
    if gate.get("code") in codes.MISSING_CODES:
        return str(gate["code"])
    word = str(gate.get("reason") or "").split(" ", 1)[0]
    return word if word in codes.MISSING_CODES else None


def flaky_note(gate: Mapping[str, Any]) -> str:
    """``flaky: passed on attempt 2 after 1 failed``, or empty for a gate that is not flaky."""
    if not gate.get("flaky"):
        return ""
    attempts = int(gate.get("attempts") or 0)
    if attempts < 2:
        return "flaky: passed on a retry"
    return f"flaky: passed on attempt {attempts} after {attempts - 1} failed"
