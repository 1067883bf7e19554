"""JUnit XML of a report, as ``pytest --junitxml`` would write it (docs: JUnit), and a failed
gate's headline and text, which the pytest plugin shows too.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import re
import signal
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pytest_verifygate import codes
from pytest_verifygate.ansi import strip_ansi
from pytest_verifygate.commands import command_text
from pytest_verifygate.item_names import item_name
from pytest_verifygate.report.outcomes import failure_code, flaky_note, skip_code

if TYPE_CHECKING:
    from pytest_verifygate.report.model import GateEntry, Report

SUITE_NAME = "verifygate"
# What XML 1.0 does not allow, as ranges: its complement compiles ten times slower (3 ms a run).
_INVALID_XML = "[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]"
# How much of a failed gate's output a terminal shows, by pytest verbosity (lines, characters);
# from -vv on, all the report kept.
TAIL_LIMITS = {0: (40, 4000), 1: (200, 20000)}


def gate_status(gate: GateEntry, timeout_seconds: float | None = None) -> str:
    """How a failed gate ended: ``exit status 1``, ``timed out after 5 s``, ..."""
    code = failure_code(gate)
    signal_number = gate.get("signal")
    if code == codes.TIMEOUT:
        status = "timed out" + (
            f" after {timeout_seconds:g} s" if timeout_seconds is not None else "")
    elif code == codes.INTERRUPTED:
        status = "interrupted before it finished"
    elif signal_number is not None:
        status = f"killed by signal {signal_number}"
        with contextlib.suppress(ValueError):  # a number this platform has no name for
            status += f" ({signal.Signals(int(signal_number)).name})"
    elif gate.get("modified_files"):  # a fixer: it may well have exited 0
        status = f"modified the files it was given (exit status {gate.get('exit_code')})"
    elif gate.get("exit_code") is not None:
        status = f"exit status {gate['exit_code']}"
    elif code == codes.UNSUPPORTED_FORMAT:
        status = "not run (the command needs a shell)"
    else:
        status = "could not be started"
    attempts = int(gate.get("attempts") or 0)
    return status + (f" (after {attempts} attempts)" if attempts > 1 else "")


def failure_message(gate: GateEntry, timeout_seconds: float | None = None) -> str:
    """``[<code>] <name>: <how it ended>``: the first line of every failure report."""
    return f"[{failure_code(gate)}] {gate.get('name')}: {gate_status(gate, timeout_seconds)}"


def unchanged_entry(name: str, reason: str) -> GateEntry:
    """The skipped entry of a gate that nothing it watches changed."""
    return {"name": name, "outcome": codes.SKIPPED, "code": None, "command": [], "cwd": ".",
            "exit_code": None, "signal": None, "duration_s": 0.0, "attempts": 0,
            "output_tail": "", "output_truncated": False, "cached": False, "reason": reason}


def skip_message(gate: GateEntry) -> str:
    """Why a skipped or pending gate did not pass."""
    outcome = str(gate.get("outcome"))
    reason = str(gate.get("reason") or outcome)
    return f"pending: {reason}" if outcome == codes.PENDING else reason


def failure_text(gate: GateEntry, headline: str, *, verbosity: int | None = None) -> str:
    """The headline, where to look, then the output the report kept: all of it for a file
    (``verbosity`` None), else cut to ``TAIL_LIMITS`` with the command from ``-v`` on."""
    lines = [headline]
    if gate.get("reason"):
        lines.append(f"reason: {gate['reason']}")
    if verbosity is None or verbosity >= 1:
        lines.append(f"command: {command_text(gate.get('command') or [])}")
        lines.append(f"cwd: {gate.get('cwd') or '.'}")
    if gate.get("log_path"):
        lines.append(f"full log: {gate['log_path']}")
    output = str(gate.get("output_tail") or "").rstrip("\n")
    if not output:
        return "\n".join([*lines, "(no output)"])
    truncated = bool(gate.get("output_truncated"))
    title = "output (end)" if truncated else "output"
    if verbosity is not None:
        output, shown, total = _bounded_tail(output, TAIL_LIMITS.get(max(verbosity, 0)))
        if truncated:  # the engine kept only the end: the total is unknown
            title = f"output (last {shown} lines)"
        elif shown < total:
            title = f"output (last {shown} of {total} lines)"
    return "\n".join([*lines, f"{'-' * 10} {title} {'-' * 10}", output])


def _bounded_tail(output: str, limit: tuple[int, int] | None) -> tuple[str, int, int]:
    """The end of ``output`` within ``limit`` (lines, characters), lines shown, lines in all."""
    lines = output.split("\n")
    total = len(lines)
    if limit is None:
        return output, total, total
    max_lines, max_chars = limit
    text = "\n".join(lines[-max_lines:])
    if len(text) > max_chars:
        text = text[-max_chars:]
        newline = text.find("\n")
        # Start at a line boundary, unless one line alone is longer than the budget.
        text = text[newline + 1:] if newline != -1 else "..." + text
    return text, text.count("\n") + 1, total


def _xml(text: str) -> str:
    return re.sub(_INVALID_XML, "", strip_ansi(text))


def has_testcase_properties(family: str) -> bool:
    return family in ("xunit1", "legacy")


def properties(gate: GateEntry) -> list[tuple[str, str]]:
    """The ``verifygate.*`` properties, valued exactly as the pytest plugin values them."""
    exit_code = gate.get("exit_code")
    return [
        ("verifygate.code", str(gate.get("code") or skip_code(gate) or "")),
        ("verifygate.outcome", str(gate.get("outcome"))),
        ("verifygate.exit_code", "" if exit_code is None else str(exit_code)),
        ("verifygate.duration_s", f"{float(gate.get('duration_s') or 0.0):.3f}"),
        ("verifygate.cached", "true" if gate.get("cached") else "false"),
        ("verifygate.attempts", str(int(gate.get("attempts") or 0))),
        ("verifygate.flaky", "true" if gate.get("flaky") else "false"),
    ]


def to_junit(report: Report, *, suite_seconds: float | None = None,
             started_at: float | None = None, timeouts: Mapping[str, float] | None = None,
             cases: Sequence[GateEntry] | None = None,
             names: Mapping[str, str] | None = None, family: str = "xunit2") -> str:
    """The JUnit XML document of a report; ``cases`` (default: its gates) with ``names``
    (default ``item_name``), ``suite_seconds`` (default: their durations added up)."""
    # Imported here: the helpers above serve front ends that need no XML.
    import datetime
    import xml.etree.ElementTree as ET

    gates: list[GateEntry] = list(report.get("gates", []) if cases is None else cases)
    failures = sum(1 for gate in gates if gate.get("outcome") == codes.FAILED)
    skipped = sum(1 for gate in gates if gate.get("outcome") in (codes.SKIPPED, codes.PENDING))
    if suite_seconds is None:
        suite_seconds = sum(float(gate.get("duration_s") or 0.0) for gate in gates)
    # Only what Maven Surefire's surefire-test-report.xsd declares too (no hostname, no type on
    # <skipped>): the file is valid against its schema and pytest's junit-10.xsd alike.
    attributes = {
        "name": SUITE_NAME,
        "errors": "0",
        "failures": str(failures),
        "skipped": str(skipped),
        "tests": str(len(gates)),
        "time": f"{suite_seconds:.3f}",
    }
    if started_at is not None:
        moment = datetime.datetime.fromtimestamp(started_at, datetime.timezone.utc)
        attributes["timestamp"] = moment.astimezone().isoformat()
    suite = ET.Element("testsuite", attributes)
    ET.SubElement(ET.SubElement(suite, "properties"), "property", name="verifygate.verdict",
                  value=str(report.get("verdict")))
    # The contract path as pytest's ``classname`` spells a node id's file part.
    owner = _xml(re.sub(r"\.py$", "", str(report.get("contract", "")).replace("/", ".")))
    for gate in gates:
        name = str(gate.get("name"))
        shown = (names or {}).get(name, item_name(name))
        # time= is the gate's duration_s as written in its property (both rounded alike).
        case = ET.SubElement(suite, "testcase", classname=owner, name=_xml(shown),
                             time=f"{float(gate.get('duration_s') or 0.0):.3f}")
        if has_testcase_properties(family):
            listed = ET.SubElement(case, "properties")
            for key, value in properties(gate):
                ET.SubElement(listed, "property", name=key, value=_xml(value))
        outcome = gate.get("outcome")
        if outcome in (codes.SKIPPED, codes.PENDING):
            # The reason once, as its message (it starts with the skip's code, if any): a body
            # repeating it is shown twice by viewers.
            ET.SubElement(case, "skipped", message=_xml(skip_message(gate)))
            continue
        if outcome == codes.FAILED:
            headline = failure_message(gate, (timeouts or {}).get(name))
            # A gate cut short is a <failure> too (typed interrupted): junit-10.xsd has no
            # <error> in a testcase, and an unfinished gate is never a pass.
            failure = ET.SubElement(case, "failure", message=_xml(headline),
                                    type=failure_code(gate))
            failure.text = _xml(failure_text(gate, headline))
        if outcome == codes.FAILED or gate.get("flaky"):
            # Surefire's record of the attempts before the last (junitparser's is_rerun and
            # is_flaky). Only the last attempt's output is kept, so their <stackTrace>, which
            # Surefire's schema requires, is empty.
            tag = "rerunFailure" if outcome == codes.FAILED else "flakyFailure"
            attempts = int(gate.get("attempts") or 0)
            note = flaky_note(gate)
            for number in range(1, attempts):
                message = f"attempt {number} of {attempts} failed" + (f" ({note})" if note else "")
                ET.SubElement(ET.SubElement(case, tag, message=message, type="retried"),
                              "stackTrace")
    root = ET.Element("testsuites", name=SUITE_NAME)
    root.append(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
