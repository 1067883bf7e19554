"""The agent digest: a short, bounded Markdown account of failed gates a coding agent can act on.

Owns the per-code hints, the choice of which output lines to keep (the end, plus error lines
found earlier), fencing that no backtick run in the output can break, and path normalization so
identical failures give identical text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from pytest_verifygate.classify import strip_ansi

PER_GATE_BYTES = 4096
TOTAL_BYTES = 16384
MAX_ERROR_LINES = 12

HINTS = {
    "command_failed": "Read the output below, fix the code it points at, and run the gate again.",
    "missing_script": "The package.json script does not exist: define it, or fix the gate's "
    "command in the contract.",
    "missing_make_target": "make has no such target: add the target to the Makefile, or fix the "
    "gate's command in the contract.",
    "no_test_files": "The test runner found no tests: add tests where it looks, or fix its path "
    "or pattern in the gate's command.",
    "unsupported_format": "The command needs a shell: set shell = true for this gate, or write "
    "the command as an array.",
    "setup_or_bootstrap_issue": "A tool or dependency is missing: install or configure it (do "
    "not change source code to work around it).",
    "sequence_issue": "An expected build artifact is missing: run the step that produces it "
    "first, or fix the order of the gates.",
    "timeout": "The gate ran past its timeout: look for a hang or an endless loop, or raise "
    "timeout_seconds if the work is legitimately slow.",
    "interrupted": "The run was interrupted before this gate finished: run it again.",
}

_ERROR_LINE = re.compile(
    r"^(?:FAILED\b|ERROR\b|E\s{2,}|error(?:\[\w+\])?:|Error:|\S+Error:|\S+:\d+(?::\d+)?:? "
    r"(?:error|E\d+|F\d+)\b|.*\berror TS\d+:)",
)


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def normalize_paths(text: str, root: str | None) -> str:
    """Absolute paths under the repository become relative, so the text is reproducible."""
    if not root:
        return text
    prefix = root.rstrip("/") + "/"
    return text.replace(prefix, "")


def _excerpt(output: str, budget: int) -> tuple[str, bool]:
    """The end of ``output`` within ``budget`` bytes, plus earlier error lines that fit."""
    text = strip_ansi(output).replace("\r\n", "\n")
    # Progress bars redraw with carriage returns; keep only what each line finally showed.
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    tail: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = len(line.encode()) + 1
        if used + cost > budget * 3 // 4 and tail:
            break
        if cost > budget * 3 // 4:
            line = "..." + line[-(budget // 2):]
            cost = len(line.encode()) + 1
        tail.append(line)
        used += cost
    tail.reverse()
    cut = len(lines) - len(tail)
    earlier = [line for line in lines[:cut] if _ERROR_LINE.match(line)][:MAX_ERROR_LINES]
    picked: list[str] = []
    for line in earlier:
        line = line if len(line) <= 300 else line[:297] + "..."
        cost = len(line.encode()) + 1
        if used + cost > budget:
            break
        picked.append(line)
        used += cost
    parts: list[str] = []
    if picked:
        parts += ["[error lines from earlier output]", *picked, "[...]"]
    elif cut:
        parts.append("[...]")
    parts += tail
    return "\n".join(parts), bool(cut)


def gate_digest(gate: Mapping[str, Any], *, root: str | None = None,
                budget: int = PER_GATE_BYTES) -> str:
    """The digest section of one failed gate (a report gate entry)."""
    code = gate.get("code") or "command_failed"
    if code == "timeout":
        status = "timed out"
    elif gate.get("signal") is not None:
        status = f"killed by signal {gate['signal']}"
    elif gate.get("exit_code") is not None:
        status = f"exit {gate['exit_code']}"
    else:
        status = "did not run"
    command = shlex.join(str(word) for word in gate.get("command") or [])
    header = [
        f"### gate `{gate['name']}` failed: {code} ({status})",
        f"Hint: {HINTS.get(code, HINTS['command_failed'])}",
        f"$ {normalize_paths(command, root)}" + (
            f"   (cwd: {gate['cwd']})" if gate.get("cwd") not in (None, ".") else ""),
    ]
    used = sum(len(line.encode()) + 1 for line in header)
    output = normalize_paths(str(gate.get("output_tail") or ""), root)
    if not output.strip():
        return "\n".join([*header, "(no output)"])
    excerpt, _ = _excerpt(output, max(256, budget - used - 16))
    fence = _fence(excerpt)
    return "\n".join([*header, fence, excerpt, fence])


def to_digest(report: Mapping[str, Any], *, root: str | None = None,
              per_gate: int = PER_GATE_BYTES, total: int = TOTAL_BYTES) -> str:
    """The Markdown digest of a report: failed gates only; one line when nothing failed."""
    gates = list(report.get("gates", []))
    failed = [gate for gate in gates if gate.get("outcome") == "failed"]
    verdict = report.get("verdict")
    if not failed:
        counts = report.get("summary", {})
        return (f"verifygate: {verdict} ({counts.get('passed', 0)} passed, "
                f"{counts.get('skipped', 0)} skipped, {counts.get('pending', 0)} pending)")
    names = ", ".join(f"`{gate['name']}`" for gate in failed)
    lines = [f"## verifygate: {len(failed)} of {len(gates)} gate(s) failed: {names}", ""]
    used = sum(len(line.encode()) + 1 for line in lines)
    for index, gate in enumerate(failed):
        remaining = len(failed) - index
        budget = min(per_gate, (total - used) // remaining)
        if budget < 300:
            lines.append(f"(... {remaining} more failed gate(s) omitted: see the JSON report)")
            break
        section = gate_digest(gate, root=root, budget=budget)
        lines += [section, ""]
        used += len(section.encode()) + 1
    return "\n".join(lines).rstrip() + "\n"
