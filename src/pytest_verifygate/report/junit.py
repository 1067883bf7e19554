"""JUnit XML for every CI: what ``pytest --verify-contract --junitxml`` writes, from a report.

Owns the JUnit form of a run (``verifygate run --junit PATH``): ``<testsuites>`` holding one
``<testsuite>`` with the counts, one ``<testcase>`` per selected gate (``classname`` the
contract path as pytest spells it, ``name`` the gate's pytest item name, ``names.item_name``),
a ``<failure>`` whose ``message`` is the gate's headline (``[<code>] <name>: <how it ended>``)
and whose text ends with the output, or a ``<skipped>`` with the reason, and Surefire's
``<flakyFailure>``/``<rerunFailure>`` for the attempts before a gate's last. Gates left out
because nothing they watch changed are skipped cases too, as pytest collects and skips them.

Valid against pytest's default family, xunit2 (``junit-10.xsd``), which allows no
``<properties>`` in a ``<testcase>``: the ``verifygate.*`` properties of each gate are written
under the xunit1 family only, as pytest writes ``record_property`` (the docs, "JUnit").
Also owns that headline
and the failure text under it (``failure_text``, for a file or, bounded by verbosity, for a
terminal), which the pytest plugin uses too, so both front ends say the same.

Works on the report dict (docs: JSON report), which is already redacted; output is cleaned of ANSI
sequences and of characters XML 1.0 cannot hold. Imported only when JUnit is asked for.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_verifygate import codes
from pytest_verifygate.commands import command_text
from pytest_verifygate.names import item_name
from pytest_verifygate.report.words import failure_code, flaky_note, skip_code

if TYPE_CHECKING:
    from pytest_verifygate.report.model import Report

SUITE_NAME = "verifygate"
# pytest's ``junit_family`` values: xunit2 (pytest's default) forbids testcase properties.
FAMILIES = ("xunit2", "xunit1", "legacy")
DEFAULT_FAMILY = "xunit2"
# What XML 1.0 does not allow (https://www.w3.org/TR/xml/#charsets), dropped: spelt as the few
# ranges it is, not as the complement of what is allowed (the same set, compiled in a tenth of
# the time: 3 ms of every pytest run). A source, compiled (and cached by ``re``) on first use.
_INVALID_XML = "[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]"
# How much of a failed gate's output a terminal shows, by pytest verbosity (lines, characters);
# from -vv on, all the report kept. The gate's log file always has the whole output.
TAIL_LIMITS = {0: (40, 4000), 1: (200, 20000)}


def gate_status(gate: Mapping[str, Any], timeout_seconds: float | None = None) -> str:
    """How a failed gate ended: ``exit status 1``, ``timed out after 5 s``, ..."""
    code = failure_code(gate)
    signal_number = gate.get("signal")
    exit_code = gate.get("exit_code")
    if code == codes.TIMEOUT:
        status = "timed out" + (
            f" after {timeout_seconds:g} s" if timeout_seconds is not None else "")
    elif code == codes.INTERRUPTED:
        status = "interrupted before it finished"
    elif signal_number is not None:
        status = f"killed by signal {signal_number}{_signal_name(int(signal_number))}"
    elif exit_code is not None:
        status = f"exit status {exit_code}"
    elif code == codes.UNSUPPORTED_FORMAT:
        status = "not run (the command needs a shell)"
    else:
        status = "could not be started"
    attempts = int(gate.get("attempts") or 0)
    if attempts > 1:
        status += f" (after {attempts} attempts)"
    return status


def _signal_name(number: int) -> str:
    import signal

    try:
        return f" ({signal.Signals(number).name})"
    except ValueError:
        return ""


def failure_message(gate: Mapping[str, Any], timeout_seconds: float | None = None) -> str:
    """``[<code>] <name>: <how it ended>``: the first line of every failure report."""
    return f"[{failure_code(gate)}] {gate.get('name')}: {gate_status(gate, timeout_seconds)}"


def unchanged_entry(name: str, reason: str) -> dict[str, Any]:
    """A gate left out because nothing it watches changed, as a skipped case: what pytest
    collects and skips for it, and what ``verifygate run --junit`` writes alike."""
    return {"name": name, "outcome": codes.SKIPPED, "code": None, "exit_code": None,
            "duration_s": 0.0, "cached": False, "reason": reason}


def skip_message(gate: Mapping[str, Any]) -> str:
    """Why a skipped or pending gate did not pass: its reason (``pending: ...`` if manual)."""
    outcome = str(gate.get("outcome"))
    reason = str(gate.get("reason") or outcome)
    return f"pending: {reason}" if outcome == codes.PENDING else reason


def failure_text(gate: Mapping[str, Any], headline: str, *, verbosity: int | None = None) -> str:
    """The headline, where to look, then the output the report kept (its end).

    ``gate`` is a report gate entry (or a ``GateResult._asdict()``). ``verbosity`` None is for
    a file read later (JUnit): the command, its working directory and all the output kept. A
    pytest verbosity is for a terminal: the command and working directory from ``-v`` on, the
    output cut to ``TAIL_LIMITS`` and its title counting the lines shown.
    """
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
        lines.append("(no output)")
        return "\n".join(lines)
    truncated = bool(gate.get("output_truncated"))
    if verbosity is None:
        title = "output (end)" if truncated else "output"
    else:
        output, shown, total = _bounded_tail(output, TAIL_LIMITS.get(max(verbosity, 0)))
        if truncated:  # the engine kept only the end: the total is unknown
            title = f"output (last {shown} lines)"
        elif shown < total:
            title = f"output (last {shown} of {total} lines)"
        else:
            title = "output"
    lines += [f"{'-' * 10} {title} {'-' * 10}", output]
    return "\n".join(lines)


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


def xml_text(text: str) -> str:
    """``text`` without ANSI sequences and without characters XML 1.0 cannot hold."""
    from pytest_verifygate.text import strip_ansi

    return re.sub(_INVALID_XML, "", strip_ansi(text))


def classname(contract: str) -> str:
    """The contract path as pytest's JUnit ``classname`` spells a node id's file part."""
    return re.sub(r"\.py$", "", contract.replace("/", "."))


def has_testcase_properties(family: str) -> bool:
    """Whether a JUnit ``family`` (pytest's ``junit_family``) allows testcase properties."""
    return family in ("xunit1", "legacy")


def properties(gate: Mapping[str, Any]) -> list[tuple[str, str]]:
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


def to_junit(
    report: Report,
    *,
    suite_seconds: float | None = None,
    started_at: float | None = None,
    timeouts: Mapping[str, float] | None = None,
    hostname: str | None = None,
    cases: Sequence[Mapping[str, Any]] | None = None,
    names: Mapping[str, str] | None = None,
    family: str = DEFAULT_FAMILY,
) -> str:
    """The JUnit XML document of a report.

    ``suite_seconds`` is the run's wall time (default: the gates' durations added up),
    ``started_at`` its start (epoch seconds, for ``timestamp``), ``timeouts`` each gate's
    ``timeout_seconds`` (for the headline of a gate that timed out). ``cases``: the gate
    entries to write, in order (default: the report's gates; ``unchanged_entry`` adds the
    gates pytest would skip), ``names`` each gate's testcase name (default ``item_name``).
    ``family``: pytest's ``junit_family``; testcase properties only under xunit1.
    """
    # Imported here: the message helpers above serve CI annotations and the pytest plugin,
    # which need no XML.
    import datetime
    import platform
    import xml.etree.ElementTree as ET

    gates: list[Mapping[str, Any]] = list(report.get("gates", []) if cases is None else cases)
    failures = sum(1 for gate in gates if gate.get("outcome") == codes.FAILED)
    skipped = sum(1 for gate in gates if gate.get("outcome") in (codes.SKIPPED, codes.PENDING))
    if suite_seconds is None:
        suite_seconds = sum(float(gate.get("duration_s") or 0.0) for gate in gates)
    attributes = {
        "name": SUITE_NAME,
        "errors": "0",
        "failures": str(failures),
        "skipped": str(skipped),
        "tests": str(len(gates)),
        "time": f"{suite_seconds:.3f}",
        "hostname": xml_text(hostname if hostname is not None else platform.node()),
    }
    if started_at is not None:
        moment = datetime.datetime.fromtimestamp(started_at, datetime.timezone.utc)
        attributes["timestamp"] = moment.astimezone().isoformat()
    suite = ET.Element("testsuite", attributes)
    suite_properties = ET.SubElement(suite, "properties")
    ET.SubElement(suite_properties, "property", name="verifygate.verdict",
                  value=str(report.get("verdict")))
    owner = classname(str(report.get("contract", "")))
    for gate in gates:
        name = str(gate.get("name"))
        shown = names.get(name) if names is not None else None
        # time= is the gate's duration_s as written in its property (both rounded alike).
        case = ET.SubElement(suite, "testcase", classname=xml_text(owner),
                             name=xml_text(shown if shown is not None else item_name(name)),
                             time=f"{float(gate.get('duration_s') or 0.0):.3f}")
        if has_testcase_properties(family):
            listed = ET.SubElement(case, "properties")
            for key, value in properties(gate):
                ET.SubElement(listed, "property", name=key, value=xml_text(value))
        outcome = gate.get("outcome")
        if outcome == codes.FAILED:
            timeout = (timeouts or {}).get(name)
            headline = failure_message(gate, timeout)
            # A gate cut short is a <failure> too (typed interrupted): junit-10.xsd has no
            # <error> in a testcase, and an unfinished gate is never a pass.
            failure = ET.SubElement(case, "failure", message=xml_text(headline),
                                    type=failure_code(gate))
            failure.text = xml_text(failure_text(gate, headline))
            _earlier_attempts(case, gate, "rerunFailure")
        elif outcome in (codes.SKIPPED, codes.PENDING):
            # The reason once, as its message: a body repeating it is shown twice by viewers.
            ET.SubElement(case, "skipped", message=xml_text(skip_message(gate)),
                          type=skip_code(gate) or str(outcome))
        elif gate.get("flaky"):
            _earlier_attempts(case, gate, "flakyFailure")
    root = ET.Element("testsuites", name=SUITE_NAME)
    root.append(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _earlier_attempts(case: Any, gate: Mapping[str, Any], tag: str) -> None:
    """Surefire's record of the attempts before the last (read by junitparser's ``is_flaky``
    and ``is_rerun``): ``<flakyFailure>`` when the gate passed in the end, ``<rerunFailure>``
    when it failed every time. Only the last attempt's output is kept, so these carry none."""
    import xml.etree.ElementTree as ET

    attempts = int(gate.get("attempts") or 0)
    note = flaky_note(gate)
    for number in range(1, attempts):
        message = f"attempt {number} of {attempts} failed" + (f" ({note})" if note else "")
        ET.SubElement(case, tag, message=message, type="retried")


def write_junit(path: str | os.PathLike[str], report: Report, **options: Any) -> None:
    """Write ``to_junit(report, **options)`` to ``path`` atomically."""
    from pytest_verifygate.state.storage import write_output

    write_output(path, to_junit(report, **options))
