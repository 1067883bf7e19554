"""Human-readable output of the ``verifygate`` command: progress lines and the summary table.

On a terminal a status line shows the gates still running and is redrawn as they finish; on a
pipe (CI logs, pre-commit) every finished gate is one plain line and nothing is redrawn.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TextIO

from pytest_verifygate.contract import Gate
from pytest_verifygate.runner import GateResult

LABELS = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "pending": "PEND"}


def format_seconds(seconds: float) -> str:
    return f"{seconds:.2f}s" if seconds < 60 else f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def gate_line(result: GateResult, width: int) -> str:
    label = LABELS.get(result.outcome, result.outcome.upper())
    detail = result.code or result.reason or ""
    if result.outcome == "failed" and result.reason:
        detail = f"{result.code}: {result.reason}"
    if result.outcome in ("passed", "failed") and result.flaky:
        detail = (detail + " (flaky: passed on a retry)").strip()
    timing = format_seconds(result.duration_s) if result.attempts else ""
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
        rows.append((result.name, outcome, result.code or "-", timing))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
