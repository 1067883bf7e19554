"""JUnit XML for every CI: what ``pytest --verify-contract --junitxml`` writes, from a report.

Owns the JUnit form of a run (``verifygate run --junit PATH``): ``<testsuites>`` holding one
``<testsuite>`` with the counts, one ``<testcase>`` per selected gate (``classname`` the
contract path as pytest spells it, ``name`` the gate), the ``verifygate.*`` properties, a
``<failure>`` whose ``message`` is the gate's headline (``[<code>] <name>: <how it ended>``) and
whose text ends with the output, or a ``<skipped>`` with the reason. Also owns that headline,
which the pytest plugin uses for its failure text, so both front ends say the same.

Works on the report dict (SPEC 6.3), which is already redacted; output is cleaned of ANSI
sequences and of characters XML 1.0 cannot hold. Imported only when JUnit is asked for.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from typing import Any

SUITE_NAME = "verifygate"
# Everything XML 1.0 allows (https://www.w3.org/TR/xml/#charsets); the rest is dropped.
_INVALID_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def gate_status(gate: Mapping[str, Any], timeout_seconds: float | None = None) -> str:
    """How a failed gate ended: ``exit status 1``, ``timed out after 5 s``, ..."""
    code = gate.get("code") or "command_failed"
    signal_number = gate.get("signal")
    exit_code = gate.get("exit_code")
    if code == "timeout":
        status = "timed out" + (
            f" after {timeout_seconds:g} s" if timeout_seconds is not None else "")
    elif code == "interrupted":
        status = "interrupted before it finished"
    elif signal_number is not None:
        status = f"killed by signal {signal_number}{_signal_name(int(signal_number))}"
    elif exit_code is not None:
        status = f"exit status {exit_code}"
    elif code == "unsupported_format":
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
    code = gate.get("code") or "command_failed"
    return f"[{code}] {gate.get('name')}: {gate_status(gate, timeout_seconds)}"


def skip_message(gate: Mapping[str, Any]) -> str:
    """Why a skipped or pending gate did not pass: its reason (``pending: ...`` if manual)."""
    outcome = str(gate.get("outcome"))
    reason = str(gate.get("reason") or outcome)
    return f"pending: {reason}" if outcome == "pending" else reason


def failure_details(gate: Mapping[str, Any], headline: str) -> str:
    """The headline, where to look, then the output the report kept (its end)."""
    lines = [headline]
    if gate.get("reason"):
        lines.append(f"reason: {gate['reason']}")
    command = gate.get("command") or []
    lines.append(f"command: {shlex.join(str(word) for word in command)}")
    lines.append(f"cwd: {gate.get('cwd') or '.'}")
    if gate.get("log_path"):
        lines.append(f"full log: {gate['log_path']}")
    output = str(gate.get("output_tail") or "").rstrip("\n")
    if output:
        title = "output (end)" if gate.get("output_truncated") else "output"
        lines += [f"{'-' * 10} {title} {'-' * 10}", output]
    else:
        lines.append("(no output)")
    return "\n".join(lines)


def xml_text(text: str) -> str:
    """``text`` without ANSI sequences and without characters XML 1.0 cannot hold."""
    from pytest_verifygate.text import strip_ansi

    return _INVALID_XML.sub("", strip_ansi(text))


def classname(contract: str) -> str:
    """The contract path as pytest's JUnit ``classname`` spells a node id's file part."""
    return re.sub(r"\.py$", "", contract.replace("/", "."))


def properties(gate: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ``verifygate.*`` properties, valued exactly as the pytest plugin values them."""
    exit_code = gate.get("exit_code")
    return [
        ("verifygate.code", str(gate.get("code") or "")),
        ("verifygate.outcome", str(gate.get("outcome"))),
        ("verifygate.exit_code", "" if exit_code is None else str(exit_code)),
        ("verifygate.duration_s", f"{float(gate.get('duration_s') or 0.0):.3f}"),
        ("verifygate.cached", "true" if gate.get("cached") else "false"),
    ]


def to_junit(
    report: Mapping[str, Any],
    *,
    suite_seconds: float | None = None,
    started_at: float | None = None,
    timeouts: Mapping[str, float] | None = None,
    hostname: str | None = None,
) -> str:
    """The JUnit XML document of a report.

    ``suite_seconds`` is the run's wall time (default: the gates' durations added up),
    ``started_at`` its start (epoch seconds, for ``timestamp``), ``timeouts`` each gate's
    ``timeout_seconds`` (for the headline of a gate that timed out).
    """
    # Imported here: the message helpers above serve CI annotations and the pytest plugin,
    # which need no XML.
    import datetime
    import platform
    import xml.etree.ElementTree as ET

    gates: list[Mapping[str, Any]] = list(report.get("gates", []))
    failures = sum(1 for gate in gates if gate.get("outcome") == "failed")
    skipped = sum(1 for gate in gates if gate.get("outcome") in ("skipped", "pending"))
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
        case = ET.SubElement(suite, "testcase", classname=xml_text(owner),
                             name=xml_text(str(gate.get("name"))),
                             time=f"{float(gate.get('duration_s') or 0.0):.3f}")
        listed = ET.SubElement(case, "properties")
        for name, value in properties(gate):
            ET.SubElement(listed, "property", name=name, value=xml_text(value))
        outcome = gate.get("outcome")
        if outcome == "failed":
            timeout = (timeouts or {}).get(str(gate.get("name")))
            headline = failure_message(gate, timeout)
            failure = ET.SubElement(case, "failure", message=xml_text(headline))
            failure.text = xml_text(failure_details(gate, headline))
        elif outcome in ("skipped", "pending"):
            message = xml_text(skip_message(gate))
            skip = ET.SubElement(case, "skipped", message=message)
            skip.text = message
    root = ET.Element("testsuites", name=SUITE_NAME)
    root.append(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str | os.PathLike[str], report: Mapping[str, Any], **options: Any) -> None:
    """Write ``to_junit(report, **options)`` to ``path`` atomically."""
    from pytest_verifygate.storage import write_atomic

    write_atomic(path, to_junit(report, **options))
