"""The agent digest (a bounded Markdown account of failed gates an agent can act on), gate
output cleaned for reading, and the failure signature that tells a repeated failure from a new one.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pytest_verifygate import codes
from pytest_verifygate.ansi import CURSOR_CONTROL, UNSAFE_CHARACTERS, strip_ansi
from pytest_verifygate.commands import command_text
from pytest_verifygate.report.junit import gate_status
from pytest_verifygate.report.outcomes import failure_code, outcome_counts

if TYPE_CHECKING:
    from pytest_verifygate.report.model import GateEntry, Report

PER_GATE_BYTES = 4096
TOTAL_BYTES = 16384
# Below these a digest cannot say anything useful.
MIN_PER_GATE_BYTES = 512
MIN_TOTAL_BYTES = 1024
# A gate section is only started when at least this much room is left for it.
MIN_SECTION_BYTES = 1024
MAX_ERROR_LINES = 12
MAX_ERROR_LINE_BYTES = 300
MAX_COMMAND_BYTES = 400
# Under a gate's section when its command, directory or output named the repository's path.
SHORTENED_NOTE = "Paths under the repository are shown relative to its root (`.` is the root)."
MAX_NAME_BYTES = 100
MAX_NAMES_IN_TITLE = 10
# Longer backtick runs are shortened so the fence (one longer than the longest run) stays short.
MAX_BACKTICK_RUN = 16
# Only the end of a (possibly huge) output is scanned; the digest never shows more.
MAX_SCAN_CHARS = 1 << 20

HINTS = {
    codes.COMMAND_FAILED:
        "Read the output below, fix the code it points at, and run the gate again.",
    codes.MISSING_SCRIPT: "The package.json script does not exist: define the script, or fix "
                          "the gate's command in the contract.",
    codes.MISSING_MAKE_TARGET: "make has no such target: add the target to the Makefile, or fix "
                               "the gate's command in the contract.",
    codes.NO_TEST_FILES: "The test runner found no tests: add tests where it looks, or fix its "
                         "path or pattern in the gate's command.",
    codes.UNSUPPORTED_FORMAT: "The command needs a shell: set shell = true for this gate, or "
                              "write the command as an array.",
    codes.SETUP_OR_BOOTSTRAP_ISSUE: "A tool or dependency is missing: install or configure it; "
                                    "do not change source code to work around it.",
    codes.SEQUENCE_ISSUE: "An expected build artifact is missing: run the step that produces it "
                          "first, or fix the order of the gates.",
    codes.TIMEOUT: "The gate ran past its timeout: look for a hang or an endless loop, or raise "
                   "timeout_seconds if the work is legitimately slow.",
    codes.INTERRUPTED: "The run was interrupted before this gate finished: run it again.",
}

_ERROR_LINE = re.compile(
    r"^\s*(?:"
    r"FAILED\b|FAIL\b|ERROR\b|E {2,}\S|"  # pytest, jest, go test
    r"(?:fatal )?error(?:\[\w+\])?:|Error:|fatal:|panic:|"  # compilers, node, git, go
    r"[\w.]*(?:Error|Exception):|Traceback \(most recent call last\)|"  # exceptions
    r"npm ERR!|g?make(?:\[\d+\])?: \*\*\*|"
    r"\S+:\d+(?::\d+)?:? *(?:error|fatal|E\d+|F\d+)\b|"  # file:line: error / lint codes
    r".*\berror TS\d+:|[\u2717\u2715\u00d7] "  # tsc, test reporters
    r")"
)
_CONTROL = re.compile(UNSAFE_CHARACTERS)
_REPLACEMENT_RUN = re.compile("\ufffd{2,}")
_BACKTICK_RUN = re.compile(f"`{{{MAX_BACKTICK_RUN + 1},}}")

# What differs between two runs of the very same failure.
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{12}\b")
# Hex ids mix letters and digits; all-digit runs are left to _NUMBER, so that a value is
# normalized the same way whether or not it happens to contain a letter.
_HEX_ID = re.compile(r"\b(?:0x[0-9a-fA-F]+|(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)"
                     r"[0-9a-fA-F]{7,})\b")
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~])/(?:[\w.@+~-]+/)*[\w.@+~-]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACES = re.compile(r"[ \t]+")


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _keep(text: str, limit: int, *, end: bool = False) -> str:
    """At most ``limit`` UTF-8 bytes of ``text``, its start (or ``end``), cut at a character."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    kept = data[len(data) - max(0, limit):] if end else data[: max(0, limit)]
    return kept.decode("utf-8", "ignore")


def _shorten(text: str, limit: int) -> str:
    """``text`` within ``limit`` bytes, its start kept and the cut marked."""
    if _size(text) <= limit:
        return text
    return _keep(text, limit - 3) + "..."


def _shorten_middle(line: str, limit: int) -> str:
    """A long line within ``limit`` bytes: the start names the error, the end often holds the
    value that differs, the middle is cut."""
    if _size(line) <= limit:
        return line
    marker = " [... middle of a long line cut ...] "
    room = max(0, limit - _size(marker))
    head = _keep(line, room // 3)
    tail = _keep(line, room - _size(head), end=True)
    return head + marker + tail


def normalize_paths(text: str, root: str | os.PathLike[str] | None) -> str:
    """Absolute paths under ``root`` (or its real path) made relative: ``root/src/a.py`` becomes
    ``src/a.py``, ``root`` alone ``.``."""
    base = os.fspath(root).rstrip("/") if root else ""
    if not base:  # no root, or "/" (every absolute path would lose its leading slash)
        return text
    for variant in sorted({base, os.path.realpath(base)}, key=len, reverse=True):
        # Not inside a word or a longer path: dropping ``root/`` from ``TO<root>/KEN`` would join
        # a masked secret back together.
        pattern = re.compile(r"(?<![\w/])" + re.escape(variant) + r"(?:(/)|(?![\w.\-]))")
        text = pattern.sub(lambda match: "" if match.group(1) else ".", text)
    return text


def _shorten_backticks(match: re.Match[str]) -> str:
    extra = len(match.group()) - MAX_BACKTICK_RUN
    return "`" * MAX_BACKTICK_RUN + f"[+{extra} backticks]"


def clean_output(output: str, root: str | os.PathLike[str] | None = None) -> list[str]:
    """Gate output as the lines a reader would have seen, safe to put in a Markdown fence."""
    if len(output) > MAX_SCAN_CHARS:
        cut = len(output) - MAX_SCAN_CHARS
        line_start = output.rfind("\n", 0, cut) + 1
        head = ""
        if line_start < cut:  # a cut inside one huge line keeps its start: it names the error
            head = output[line_start:min(cut, line_start + 1024)] + " [...] "
        output = head + output[cut:]
    # Cursor moves and erases redraw text in place, as a carriage return does.
    text = strip_ansi(re.sub(CURSOR_CONTROL, "\r", output)).replace("\r\n", "\n")
    text = normalize_paths(text, root)
    lines: list[str] = []
    for raw in text.split("\n"):
        # Progress bars redraw with carriage returns: keep what the line finally showed.
        if "\r" in raw:
            shown = [part for part in raw.split("\r") if part.strip()]
            raw = shown[-1] if shown else ""
        # Control characters go first: removing them can join runs that must be shortened.
        line = _REPLACEMENT_RUN.sub("\ufffd", _CONTROL.sub("", raw))
        lines.append(_BACKTICK_RUN.sub(_shorten_backticks, line).rstrip())
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _fitting(lines: Iterable[str], longest: int, room: int) -> list[str]:
    """``lines``, each cut to ``longest`` bytes, for as long as they fit in ``room`` bytes."""
    kept: list[str] = []
    for line in lines:
        line = _shorten_middle(line, longest)
        room -= _size(line) + 1
        if room < 0:
            break
        kept.append(line)
    return kept


def _excerpt(lines: Sequence[str], budget: int) -> str:
    """The end of the output within ``budget`` bytes, plus earlier error lines that fit."""
    marker_room = 120  # the "[... N lines omitted ...]" markers
    room = max(0, budget - marker_room)
    tail_room = room * 3 // 4 if len(lines) > 1 else room
    longest = max(64, min(tail_room, max(tail_room // 3, 1024)))
    tail = _fitting(reversed(lines), longest, tail_room)[::-1]
    cut = len(lines) - len(tail)
    errors = itertools.islice((line for line in lines[:cut] if _ERROR_LINE.match(line)),
                              MAX_ERROR_LINES)
    picked = _fitting(errors, min(MAX_ERROR_LINE_BYTES, longest),
                      room - sum(_size(line) + 1 for line in tail))
    parts: list[str] = []
    if picked:
        parts += ["[verifygate: error lines from earlier in the output]", *picked]
    if cut:
        parts.append(f"[... {cut} earlier line(s) omitted ...]")
    parts += tail
    return _keep("\n".join(parts), budget, end=True)


def is_error_line(line: str) -> bool:
    """Whether a cleaned output line reads like an error (``FAILED``, ``error:``, ...)."""
    return _ERROR_LINE.match(line) is not None


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _inline(text: str, limit: int) -> str:
    """Text for one line of Markdown: control characters blanked, backtick runs shortened."""
    text = _BACKTICK_RUN.sub(_shorten_backticks, _CONTROL.sub(" ", strip_ansi(text)))
    return _shorten(text.replace("\n", " "), limit)


def _code_span(text: str) -> str:
    """Inline code that no backtick in ``text`` can end early."""
    ticks = "`" * (_longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def gate_digest(gate: GateEntry, *, root: str | os.PathLike[str] | None = None,
                budget: int = PER_GATE_BYTES, heading: int = 3) -> str:
    """The digest section of one failed gate entry, at most ``budget`` bytes."""
    budget = max(budget, MIN_PER_GATE_BYTES)
    code = failure_code(gate)
    name = _inline(str(gate.get("name", "?")), min(MAX_NAME_BYTES, budget // 10))
    raw = (command_text(gate.get("command") or []), str(gate.get("cwd") or "."),
           str(gate.get("output_tail") or ""))
    shown = [normalize_paths(text, root) for text in raw]
    command = _inline(shown[0], min(MAX_COMMAND_BYTES, budget // 5))
    cwd = _inline(shown[1], min(100, budget // 10))
    header = [
        f"{'#' * heading} {_code_span(name)} failed: {code}, {gate_status(gate)}",
        f"Hint: {HINTS.get(code, HINTS[codes.COMMAND_FAILED])}",
        f"Command: {_code_span(command)} (cwd: {_code_span(cwd)})",
    ]
    if shown != list(raw):  # said, so that a `pwd` printing "." misleads no one
        header.append(SHORTENED_NOTE)
    reason = gate.get("reason")
    if reason and code in (codes.INTERRUPTED, codes.UNSUPPORTED_FORMAT):
        header.append(f"Reason: {_inline(str(reason), 200)}")
    # Paragraphs of their own: lines of one paragraph render as one line in Markdown.
    head = "\n\n".join(header)
    lines = clean_output(raw[2], root)
    if not lines:
        return _keep(f"{head}\n\n(no output)", budget)
    title = "Output (end):" if gate.get("output_truncated") else "Output:"
    # The fence is at most MAX_BACKTICK_RUN + 1 long: reserve it before choosing lines.
    fence_room = 2 * (MAX_BACKTICK_RUN + 2)
    room = budget - _size(head) - _size(title) - fence_room - 4
    if room < 256:
        return _keep(f"{head}\n\n(output left out: no room)", budget)
    excerpt = _excerpt(lines, room)
    fence = "`" * max(3, _longest_backticks(excerpt) + 1)  # no backtick run can close it
    return "\n".join([head, "", title, fence, excerpt, fence])


def _one_line(report: Report) -> str:
    verdict = report.get("verdict")
    line = f"verifygate: {verdict} ({outcome_counts(report.get('summary', {}))})"
    pending = [str(gate.get("name")) for gate in report.get("gates", [])
               if gate.get("outcome") == codes.PENDING]
    if pending:
        shown = ", ".join(_code_span(_inline(name, 64)) for name in pending[:5])
        line += f"; awaiting human sign-off: {shown}" + (" ..." if len(pending) > 5 else "")
    elif verdict == codes.VERDICT_FAILED:
        line += f"; {codes.UNVERIFIED_FAILURE}: {codes.UNVERIFIED_FIX}"
    elif verdict == codes.VERDICT_UNVERIFIED:
        line += "; no gate applied to the changes"
    return line + "\n"


def to_digest(report: Report, *, root: str | os.PathLike[str] | None = None,
              per_gate: int = PER_GATE_BYTES, total: int = TOTAL_BYTES,
              heading: int = 2) -> str:
    """The Markdown digest of a report's failed gates (one line when nothing failed), at most
    ``per_gate`` UTF-8 bytes a gate and ``total`` in all, paths under ``root`` relative."""
    if per_gate < MIN_PER_GATE_BYTES or total < MIN_TOTAL_BYTES:
        raise ValueError(f"digest limits too small: per_gate >= {MIN_PER_GATE_BYTES} and "
                         f"total >= {MIN_TOTAL_BYTES} bytes")
    gates = list(report.get("gates", []))
    failed = [gate for gate in gates if gate.get("outcome") == codes.FAILED]
    if not failed:
        return _keep(_one_line(report), total)
    # Gates cut short are counted apart from failures; one that never started has no section.
    cut = [gate for gate in failed if gate.get("code") == codes.INTERRUPTED]
    unstarted = [gate for gate in cut if not gate.get("attempts")]
    failures = len(failed) - len(cut)
    failed = [gate for gate in failed if gate not in unstarted]
    names = [_code_span(_inline(str(gate.get("name", "?")), 64)) for gate in failed]
    if failures:
        title = f"verifygate: {failures} of {len(gates)} gate(s) failed"
        title += f", {len(cut)} interrupted" if cut else ""
    else:
        title = f"verifygate: interrupted: {len(cut)} of {len(gates)} gate(s) did not finish"
    parts = [f"{'#' * heading} {title}" + (f": {_first(names)}" if names else "")]
    if unstarted:
        never = [_code_span(_inline(str(gate.get("name", "?")), 64)) for gate in unstarted]
        parts.append(_shorten(f"Interrupted before they started: {_first(never)}", 400))
    used = sum(_size(part) + 2 for part in parts) - 2
    omitted_room = 160  # for the closing "N more failed gate(s) not shown" line
    for index, gate in enumerate(failed):
        remaining = len(failed) - index
        available = total - used - 2 - (omitted_room if remaining > 1 else 0)
        share = available // remaining
        budget = min(per_gate, max(share, MIN_SECTION_BYTES), available)
        if budget < MIN_SECTION_BYTES:
            rest = ", ".join(names[index:index + 5]) + (" ..." if remaining > 5 else "")
            parts.append(_shorten(f"({remaining} more failed gate(s) not shown: {rest}; run "
                                  f"`verifygate run` or read the JSON report)", omitted_room))
            break
        section = gate_digest(gate, root=root, budget=budget, heading=heading + 1)
        parts.append(section)
        used += _size(section) + 2
    return _keep("\n\n".join(parts) + "\n", total)


def _first(names: Sequence[str]) -> str:
    more = len(names) - MAX_NAMES_IN_TITLE
    return ", ".join(names[:MAX_NAMES_IN_TITLE]) + (f" and {more} more" if more > 0 else "")


def _signature_text(text: str) -> str:
    text = _UUID.sub("<id>", text)
    text = _ABSOLUTE_PATH.sub("<path>", text)
    text = _HEX_ID.sub("<hex>", text)
    text = _NUMBER.sub("<n>", text)
    return _SPACES.sub(" ", text)


def failure_signature(report: Report, *,
                      root: str | os.PathLike[str] | None = None) -> str | None:
    """A fingerprint of what failed (None when nothing did): names, codes and outputs without
    what varies between runs of one failure (paths, ids, numbers)."""
    failed = sorted((gate for gate in report.get("gates", []) if gate.get("outcome") ==
                     codes.FAILED), key=lambda gate: str(gate.get("name")))
    if not failed and report.get("verdict") != codes.VERDICT_FAILED:
        return None
    digest = hashlib.sha256()
    for gate in failed:
        lines = clean_output(str(gate.get("output_tail") or ""), root)
        body = "\n".join(_signature_text(line) for line in lines if line.strip())
        for part in (str(gate.get("name")), str(gate.get("code")), body):
            digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()
