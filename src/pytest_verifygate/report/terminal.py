"""What ``verifygate run`` prints for people: a line per gate, after a failure the digest, a
recap table and the slowest and failed gates, then the verdict line. Lines are styled segments,
so that the pytest plugin can hand the same lines to pytest's terminal writer.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from pytest_verifygate import codes
from pytest_verifygate.contract import Gate
from pytest_verifygate.report.outcomes import (
    failure_code,
    flaky_note,
    format_seconds,
    is_interrupted,
    outcome_counts,
    skip_code,
)
from pytest_verifygate.runner.records import GateResult

if TYPE_CHECKING:
    from pytest_verifygate.report.model import Report

# By outcome; a gate cut short (failed with code ``interrupted``) by that code.
LABELS = {codes.PASSED: "PASS", codes.FAILED: "FAIL", codes.SKIPPED: "SKIP",
          codes.PENDING: "PEND", codes.INTERRUPTED: "STOP"}
# pytest's terminal-writer markup names; on our own terminal, these SGR codes.
STYLES = {codes.PASSED: "green", codes.FAILED: "red", codes.SKIPPED: "yellow",
          codes.PENDING: "cyan", codes.INTERRUPTED: "yellow"}
VERDICT_STYLES = {codes.VERDICT_PASSED: "green", codes.VERDICT_FAILED: "red"}
_SGR = {"red": "31", "green": "32", "yellow": "33", "cyan": "36", "bold": "1"}
_RESET = "\x1b[0m"
SLOWEST_SHOWN = 5

# A line as segments of text, each with a style (a key of ``_SGR``) or None.
Styled = tuple[tuple[str, str | None], ...]


def color_wanted(choice: str | None, stream: TextIO, environ: Mapping[str, str]) -> bool:
    """Whether to color what goes to ``stream``, by pytest's rules in pytest's order."""
    if choice in ("yes", "no"):
        return choice == "yes"
    if environ.get("PY_COLORS") in ("0", "1"):
        return environ["PY_COLORS"] == "1"
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError, OSError):  # closed, or not a file at all
        return False
    return terminal and environ.get("TERM") != "dumb"


def paint(text: str, style: str | None, color: bool) -> str:
    if not color or style is None or not text:
        return text
    return f"\x1b[{_SGR[style]}m{text}{_RESET}"


def render(line: Styled, color: bool) -> str:
    return "".join(paint(text, style, color) for text, style in line)


def _outcome(gate: Mapping[str, Any]) -> str:
    """A gate's outcome, ``interrupted`` if cut short."""
    return codes.INTERRUPTED if is_interrupted(gate) else str(gate.get("outcome"))


def outcome_style(gate: Mapping[str, Any]) -> str | None:
    return STYLES.get(_outcome(gate))


def verdict_style(report: Report) -> str:
    """Green passed, red failed, yellow otherwise (pending, or unverified: nothing ran)."""
    return VERDICT_STYLES.get(str(report["verdict"]), "yellow")


def _label(gate: Mapping[str, Any]) -> str:
    return LABELS.get(_outcome(gate), _outcome(gate).upper())


def gate_line(result: GateResult, width: int, *, color: bool = False) -> str:
    """``  FAIL  tests   1.20s  command_failed``: label, name, time, then code or reason."""
    entry = {"outcome": result.outcome, "code": result.code}
    label = paint(_label(entry), outcome_style(entry), color)
    detail = result.code or result.reason or ""
    if result.outcome == codes.FAILED and result.reason:
        detail = f"{result.code}: {result.reason}"
    if result.outcome in (codes.PASSED, codes.FAILED) and result.flaky:
        detail = (detail + f" ({flaky_note(result._asdict())})").strip()
    timing = format_seconds(result.duration_s) if result.attempts else ""
    if result.cached:
        timing = "cached"
    return f"  {label}  {result.name:<{width}}  {timing:>8}  {detail}".rstrip()


class Progress:
    """Prints one line per finished gate; on a terminal also a live 'running: ...' line."""

    def __init__(self, stream: TextIO, names: Sequence[str], *, live: bool,
                 color: bool = False) -> None:
        self.stream = stream
        self.live = live
        self.color = color
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
            self.stream.write(gate_line(result, self.width, color=self.color) + "\n")
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


def summary_table(results: Sequence[GateResult], color: bool = False) -> str:
    return "\n".join(render(line, color) for line in table_lines(results))


def table_lines(results: Sequence[GateResult]) -> list[Styled]:
    """The table's lines (gate, outcome, code, time), the outcome cells styled."""
    rows: list[tuple[str, ...]] = [("gate", "outcome", "code", "time")]
    styles: list[str | None] = [None, None]  # the heading and its rule
    for result in results:
        timing = format_seconds(result.duration_s) if result.attempts else "-"
        outcome = result.outcome + (" (flaky)" if result.flaky else "")
        if result.outcome == codes.FAILED and result.code == codes.INTERRUPTED:
            outcome = codes.INTERRUPTED  # cut short: not counted as a failure
        outcome += " (cached)" if result.cached else ""
        # A result read back from a report entry (pytest) has a skip's code only in its reason.
        code = result.code if result.failed else skip_code(result._asdict())
        rows.append((result.name, outcome, code or "-", timing))
        styles.append(outcome_style({"outcome": result.outcome, "code": result.code}))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    rows.insert(1, tuple("-" * width for width in widths))
    # The padding stays outside the styled text: a colored cell is as wide as a plain one.
    return [((name.ljust(widths[0]) + "  ", None), (outcome, style),
             (" " * (widths[1] - len(outcome)) + f"  {code.ljust(widths[2])}  {timing}", None))
            for (name, outcome, code, timing), style in zip(rows, styles, strict=True)]


def _listed(names: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


def verdict_line(report: Report, *, report_path: str | None = None) -> str:
    """``verdict: failed (1 passed, 1 failed, 0 skipped, 0 pending): tests [command_failed]``."""
    verdict = report["verdict"]
    gates = report["gates"]
    interrupted = [str(gate["name"]) for gate in gates if is_interrupted(gate)]
    failed = [gate for gate in gates if _outcome(gate) == codes.FAILED]
    pending = [str(gate["name"]) for gate in gates if gate.get("outcome") == codes.PENDING]
    line = f"verdict: {verdict} ({outcome_counts(report['summary'])})"
    if failed or interrupted:
        line += ": " + _listed([f"{gate['name']} [{failure_code(gate)}]" for gate in failed])
        if interrupted:
            line += ("; " if failed else "") + f"{codes.INTERRUPTED}: {_listed(interrupted)}"
    elif verdict == codes.VERDICT_FAILED:
        line += f": {(report.get('errors') or [codes.UNVERIFIED_FAILURE])[0]}"
    elif pending:
        line += f": awaiting sign-off: {_listed(pending)}"
    elif verdict == codes.VERDICT_UNVERIFIED:
        line += ": no gate ran" + (" (no gate applies to this change)" if not gates else "")
    if report_path:
        line += f"; report: {report_path}"
    return line


def closing_summary(report: Report, timeouts: Mapping[str, float] | None = None
                    ) -> list[tuple[str, list[Styled]]]:
    """After a failure, as pytest's ``--durations`` and short test summary: (title, lines) of
    the slowest gates that ran and of the failed gates."""
    gates = report["gates"]
    failed = [gate for gate in gates if gate.get("outcome") == codes.FAILED]
    if not failed:
        return []
    from pytest_verifygate.report.junit import gate_status  # only when something failed

    ran = [gate for gate in gates if gate.get("attempts") and not gate.get("cached")]
    slowest = sorted(ran, key=lambda gate: -float(gate.get("duration_s") or 0))[:SLOWEST_SHOWN]
    times = [format_seconds(float(gate.get("duration_s") or 0)) for gate in slowest]
    time_width = max((len(text) for text in times), default=0)
    width = max(len(str(gate["name"])) for gate in failed)
    sections: list[tuple[str, list[Styled]]] = []
    if slowest:
        sections.append(("slowest gates", [
            ((f"  {text:>{time_width}}  {gate['name']}", None),)
            for text, gate in zip(times, slowest, strict=True)]))
    timeouts = timeouts or {}
    sections.append(("failed gates", [
        (("  ", None), (_label(gate), outcome_style(gate)),
         (f"  {gate['name']!s:<{width}}  [{failure_code(gate)}] "
          f"{gate_status(gate, timeouts.get(str(gate['name'])))}", None))
        for gate in failed]))
    return sections


def run_summary(report: Report, results: Sequence[GateResult], *,
                root: str | os.PathLike[str] | None = None, report_path: str | None = None,
                color: bool = False, timeouts: Mapping[str, float] | None = None,
                fold: Callable[[str, str], str] | None = None) -> str:
    """What ``verifygate run`` prints after the gate lines: after a failure the digest (never
    colored: it is Markdown, folded by ``fold`` in a CI log), the table and
    ``closing_summary``; then the verdict line."""
    verdict = paint(verdict_line(report, report_path=report_path), verdict_style(report), color)
    sections = closing_summary(report, timeouts)
    if not sections:
        return verdict + "\n"
    from pytest_verifygate.report.digest import gate_digest, to_digest  # only after a failure

    if fold is None:
        digest = to_digest(report, root=root).rstrip()
    else:
        failed = [gate for gate in report.get("gates", []) if gate.get("outcome") == codes.FAILED]
        digest = "".join(fold(f"verifygate {gate.get('name')} [{failure_code(gate)}]",
                              gate_digest(gate, root=root)) for gate in failed).rstrip()
    table = summary_table(results, color)
    closing = "".join(paint(f"{title}:", "bold", color) + "\n"
                      + "".join(render(line, color) + "\n" for line in lines)
                      for title, lines in sections)
    return f"\n{digest}\n\n{table}\n\n{closing}{verdict}\n"
