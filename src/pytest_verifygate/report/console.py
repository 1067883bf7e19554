"""Human-readable output of ``verifygate run``: progress lines, the failure digest, the verdict.

On a terminal a status line shows the gates still running and is redrawn as they finish; on a
pipe (CI logs, pre-commit) every finished gate is one plain line and nothing is redrawn. What
follows the gate lines is kept short, because pre-commit and CI logs are read by people in a
hurry: on success only the verdict line; on failure the digest of the failed gates (the end of
their output), a recap table in contract order, and the verdict line naming each failed gate
with its code.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from pytest_verifygate import codes
from pytest_verifygate.contract import Gate
from pytest_verifygate.report.words import failure_code, format_seconds, outcome_counts
from pytest_verifygate.runner.records import GateResult

LABELS = {codes.PASSED: "PASS", codes.FAILED: "FAIL", codes.SKIPPED: "SKIP",
          codes.PENDING: "PEND"}


def gate_line(result: GateResult, width: int) -> str:
    """``  FAIL  tests   1.20s  command_failed``: label, name, time, then code or reason."""
    label = LABELS.get(result.outcome, result.outcome.upper())
    detail = result.code or result.reason or ""
    if result.outcome == codes.FAILED and result.reason:
        detail = f"{result.code}: {result.reason}"
    if result.outcome in (codes.PASSED, codes.FAILED) and result.flaky:
        detail = (detail + " (flaky: passed on a retry)").strip()
    timing = format_seconds(result.duration_s) if result.attempts else ""
    if result.cached:
        timing = "cached"
    return f"  {label}  {result.name:<{width}}  {timing:>8}  {detail}".rstrip()


class Progress:
    """Prints one line per finished gate; on a terminal also a live 'running: ...' line."""

    def __init__(self, stream: TextIO, names: Sequence[str], *, live: bool) -> None:
        self.stream = stream
        self.live = live
        self.width = max((len(name) for name in names), default=4)
        self.total = len(names)
        self.running: list[str] = []
        self.done = 0
        self.lock = threading.Lock()

    def started(self, gate: Gate) -> None:
        with self.lock:
            self.running.append(gate.name)
            self._status()

    def finished(self, gate: Gate, result: GateResult) -> None:
        with self.lock:
            if gate.name in self.running:
                self.running.remove(gate.name)
            self.done += 1
            self._clear()
            self.stream.write(gate_line(result, self.width) + "\n")
            self._status()
            self.stream.flush()

    def close(self) -> None:
        with self.lock:
            self._clear()
            self.stream.flush()

    def _clear(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[K")

    def _status(self) -> None:
        if self.live and self.running:
            shown = ", ".join(self.running[:4]) + (" ..." if len(self.running) > 4 else "")
            self.stream.write(f"\r\x1b[K  [{self.done}/{self.total}] running: {shown}")
            self.stream.flush()


def summary_table(results: Sequence[GateResult]) -> str:
    """A plain-text table: gate, outcome, code, time."""
    rows = [("gate", "outcome", "code", "time")]
    for result in results:
        timing = format_seconds(result.duration_s) if result.attempts else "-"
        outcome = result.outcome + (" (flaky)" if result.flaky else "")
        outcome += " (cached)" if result.cached else ""
        rows.append((result.name, outcome, result.code or "-", timing))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _names(gates: Sequence[Mapping[str, Any]], limit: int = 6) -> str:
    shown = ", ".join(str(gate["name"]) for gate in gates[:limit])
    return shown + (f" (+{len(gates) - limit} more)" if len(gates) > limit else "")


def verdict_line(report: Mapping[str, Any], *, report_path: str | None = None) -> str:
    """``verdict: failed (1 passed, 1 failed, 0 skipped, 0 pending): tests [command_failed]``.

    The counts come first and never change shape (scripts grep for them); after them, what a
    person needs next: the failed gates with their codes, the gates awaiting sign-off, or why
    nothing ran.
    """
    verdict = report["verdict"]
    line = f"verdict: {verdict} ({outcome_counts(report['summary'])})"
    gates: list[Mapping[str, Any]] = list(report.get("gates", []))
    failed = [gate for gate in gates if gate.get("outcome") == codes.FAILED]
    pending = [gate for gate in gates if gate.get("outcome") == codes.PENDING]
    if failed:
        shown = [f"{gate['name']} [{failure_code(gate)}]" for gate in failed[:6]]
        more = f" (+{len(failed) - 6} more)" if len(failed) > 6 else ""
        line += ": " + ", ".join(shown) + more
    elif verdict == codes.VERDICT_FAILED:
        line += f": {codes.UNVERIFIED_FAILURE}"
    elif pending:
        line += f": awaiting sign-off: {_names(pending)}"
    elif verdict == codes.VERDICT_UNVERIFIED:
        line += ": no gate ran" + (" (no gate applies to this change)" if not gates else "")
    if report_path:
        line += f"; report: {report_path}"
    return line


def run_summary(
    report: Mapping[str, Any],
    results: Sequence[GateResult],
    *,
    root: str | os.PathLike[str] | None = None,
    report_path: str | None = None,
) -> str:
    """What ``verifygate run`` prints after the gate lines (text format), newline-terminated.

    Nothing failed: the verdict line alone. Something failed: the digest of the failed gates,
    the recap table of ``results`` (in contract order, as ``run_gates`` returns them), then the
    verdict line.
    """
    verdict = verdict_line(report, report_path=report_path)
    if not any(gate.get("outcome") == codes.FAILED for gate in report.get("gates", [])):
        return verdict + "\n"
    from pytest_verifygate.report.digest import to_digest  # only when something failed
    digest = to_digest(report, root=root).rstrip()
    return f"\n{digest}\n\n{summary_table(results)}\n{verdict}\n"
