"""GitHub Actions output: what a run shows on a pull request and on the run's summary page.

Owns GitHub Actions workflow commands (``::error``) for failed gates, with the file and line
when the output names a file of the repository, the escaping those commands need, and the
Markdown table appended to ``$GITHUB_STEP_SUMMARY``. Everything works on the report dict
(SPEC 6.3), so the ``verifygate`` command and the pytest plugin (the xdist controller) share it.
Where a build's change base comes from is input, not output: ``changes.detect_change_base``.
"""

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pytest_verifygate import codes
from pytest_verifygate.changes import ChangeSet
from pytest_verifygate.report.digest import clean_output, is_error_line, normalize_paths, to_digest
from pytest_verifygate.report.junit import gate_status
from pytest_verifygate.report.words import failure_code, format_seconds, outcome_counts

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"

# GitHub shows at most this much of an annotation's message usefully; the log has the rest.
MAX_MESSAGE_CHARS = 500
ICONS = {codes.PASSED: "\u2705", codes.FAILED: "\u274c", codes.SKIPPED: "\u23ed\ufe0f",
         codes.PENDING: "\u23f8\ufe0f"}


# --------------------------------------------------------------------------------------------
# GitHub Actions workflow commands


def escape_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub's toolkit does."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: the message escapes plus ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str, **properties: str | int | None) -> str:
    """``::command key=value,...::message`` with every part escaped; None properties left out."""
    shown = ",".join(f"{key}={escape_property(str(value))}"
                     for key, value in properties.items() if value is not None)
    return f"::{command}{' ' + shown if shown else ''}::{escape_data(message)}"


# A file location in tool output: path:line[:col] (compilers, linters, pytest, mypy),
# File "path", line N (Python tracebacks) and path(line,col) (tsc).
_LOCATION_PATTERNS = (
    re.compile(r"(?:^|(?<=[\s\"'(\[<=]))(?P<path>[^\s:\"'()\[\]<>=,]+):(?P<line>\d+)"
               r"(?::(?P<col>\d+))?(?![\w.])"),
    re.compile(r"\bFile \"(?P<path>[^\"]+)\", line (?P<line>\d+)"),
    re.compile(r"(?:^|(?<=\s))(?P<path>[^\s:\"'()]+)\((?P<line>\d+),(?P<col>\d+)\)"),
)


class Location(NamedTuple):
    """A place in a file of the repository: ``file`` is relative to the repository root."""

    file: str
    line: int
    col: int | None = None


def find_location(
    line: str, *, repo_root: str | os.PathLike[str], bases: Sequence[str | os.PathLike[str]]
) -> Location | None:
    """The first ``path:line`` in ``line`` naming an existing file under ``repo_root``.

    Relative paths are tried against each of ``bases`` in turn (the gate's working directory
    first); absolute ones must lie inside the repository (symlinks resolved).
    """
    real_root = os.path.realpath(repo_root)
    for pattern in _LOCATION_PATTERNS:
        for match in pattern.finditer(line):
            file = _repository_file(match["path"], real_root, bases)
            if file is not None and int(match["line"]) > 0:
                col = match.groupdict().get("col")
                return Location(file, int(match["line"]), int(col) if col else None)
    return None


def _repository_file(
    path: str, real_root: str, bases: Sequence[str | os.PathLike[str]]
) -> str | None:
    candidates = [path] if os.path.isabs(path) else [os.path.join(b, path) for b in bases]
    for candidate in candidates:
        full = os.path.realpath(candidate)
        if full.startswith(os.path.join(real_root, "")) and os.path.isfile(full):
            return Path(os.path.relpath(full, real_root)).as_posix()
    return None


def _output_lines(gate: Mapping[str, Any]) -> list[str]:
    return [line.strip() for line in clean_output(str(gate.get("output_tail") or ""))]


def gate_annotation(
    gate: Mapping[str, Any],
    *,
    repo_root: str | os.PathLike[str],
    project_root: str | os.PathLike[str] | None = None,
) -> str:
    """The ``::error`` command for one failed gate (a report gate entry).

    The message is the first line of the output that reads like an error (a traceback's
    exception rather than its first line; the last line when none does; how the gate ended
    when it printed nothing). The location is the first
    ``path:line`` naming a file of the repository: in that line, else in any error line,
    else anywhere in the output.
    """
    name = str(gate.get("name", "?"))
    code = failure_code(gate)
    lines = [line for line in _output_lines(gate) if line]
    errors = [index for index, line in enumerate(lines) if is_error_line(line)]
    # "Traceback (most recent call last):" says nothing; its exception line says what failed.
    telling = [index for index in errors if not lines[index].startswith("Traceback (")]
    chosen = (telling or errors or [len(lines) - 1])[0]
    if lines:
        message = normalize_paths(lines[chosen], repo_root)
    else:
        message = gate_status(gate)
        if gate.get("reason"):
            message += f": {gate['reason']}"
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 3] + "..."
    project = Path(project_root if project_root is not None else repo_root)
    bases = list(dict.fromkeys([str(project / str(gate.get("cwd") or ".")), str(project),
                                str(repo_root)]))
    order = ([chosen] if lines else []) + errors + list(range(len(lines)))
    location = None
    for index in dict.fromkeys(order):
        location = find_location(lines[index], repo_root=repo_root, bases=bases)
        if location is not None:
            break
    return workflow_command(
        "error", message,
        file=location.file if location else None,
        line=location.line if location else None,
        col=location.col if location else None,
        title=f"verifygate {name} [{code}]",
    )


def error_annotations(
    report: Mapping[str, Any],
    *,
    repo_root: str | os.PathLike[str],
    project_root: str | os.PathLike[str] | None = None,
) -> list[str]:
    """Workflow commands for the failed gates of a report, in contract order."""
    gates: list[Mapping[str, Any]] = list(report.get("gates", []))
    lines = [gate_annotation(gate, repo_root=repo_root, project_root=project_root)
             for gate in gates if gate.get("outcome") == codes.FAILED]
    if report.get("verdict") == codes.VERDICT_FAILED and not lines:
        lines.append(workflow_command("error", codes.UNVERIFIED_FAILURE, title="verifygate"))
    return lines


# --------------------------------------------------------------------------------------------
# step summary


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, no column breaks, no HTML."""
    text = " ".join(text.split())
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace(
        "|", "\\|")


def _code(text: str) -> str:
    """Inline code in a table cell: literal text, but ``|`` still needs its backslash."""
    if not text or "`" in text:
        return _cell(text)
    return "`" + " ".join(text.split()).replace("|", "\\|") + "`"


def _seconds(gate: Mapping[str, Any]) -> str:
    if not gate.get("attempts"):
        return "-"
    return format_seconds(float(gate.get("duration_s") or 0.0), prose=True)


def _describe(changes: Mapping[str, Any] | None) -> str:
    return ChangeSet.from_dict(changes).describe() if changes else "unknown"


def step_summary(
    report: Mapping[str, Any], *, repo_root: str | os.PathLike[str] | None = None
) -> str:
    """The Markdown for ``$GITHUB_STEP_SUMMARY``: verdict, a table of gates, the digest."""
    verdict = str(report.get("verdict"))
    # A verdict that settles the run wears its outcome's icon; pending and unverified inform.
    icon = {codes.VERDICT_PASSED: ICONS[codes.PASSED],
            codes.VERDICT_FAILED: ICONS[codes.FAILED]}.get(verdict, "\u2139\ufe0f")
    gates: list[Mapping[str, Any]] = list(report.get("gates", []))
    lines = [
        f"### {icon} verifygate: {verdict}",
        "",
        f"Contract {_code(str(report.get('contract', '')))}; changes: "
        f"{_cell(_describe(report.get('changes')))}",
        "",
    ]
    if gates:
        lines += ["| Gate | Outcome | Code | Time |", "| --- | --- | --- | --- |"]
        for gate in gates:
            outcome = str(gate.get("outcome"))
            shown = f"{ICONS.get(outcome, '')} {outcome}".strip()
            if gate.get("flaky"):
                shown += " (flaky)"
            if gate.get("cached"):
                shown += " (cached)"
            if outcome != codes.FAILED and gate.get("reason"):
                shown += f": {gate['reason']}"
            code = _code(str(gate["code"])) if gate.get("code") else ""
            lines.append(f"| {_code(str(gate.get('name', '?')))} | {_cell(shown)} | {code} | "
                         f"{_seconds(gate)} |")
        lines.append("")
    not_selected = len(report.get("not_selected", []))
    lines.append(f"**{outcome_counts(report.get('summary', {}))}**"
                 + (f"; {not_selected} gate(s) not selected" if not_selected else ""))
    if any(gate.get("outcome") == codes.FAILED for gate in gates):
        digest = to_digest(report, root=repo_root).rstrip()
        lines += ["", "<details><summary>Output of the failed gates</summary>", "", digest, "",
                  "</details>"]
    return "\n".join(lines) + "\n\n"


def append_step_summary(
    report: Mapping[str, Any],
    environ: Mapping[str, str],
    *,
    repo_root: str | os.PathLike[str] | None = None,
) -> str | None:
    """Append the step summary to ``$GITHUB_STEP_SUMMARY`` when it is set.

    Returns a warning when the file cannot be written (the run's result stands), else None.
    """
    path = environ.get(STEP_SUMMARY_ENV, "")
    if not path:
        return None
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(step_summary(report, repo_root=repo_root))
    except OSError as exc:
        return f"cannot append to {STEP_SUMMARY_ENV} {path}: {exc.strerror or exc}"
    return None


def github_outputs(
    report: Mapping[str, Any],
    environ: Mapping[str, str],
    *,
    repo_root: str | os.PathLike[str],
    project_root: str | os.PathLike[str] | None = None,
) -> tuple[list[str], list[str]]:
    """What a GitHub Actions run gets: (workflow command lines, warnings).

    The step summary is appended as a side effect; the caller prints the lines on stdout.
    """
    warning = append_step_summary(report, environ, repo_root=repo_root)
    return (error_annotations(report, repo_root=repo_root, project_root=project_root),
            [warning] if warning else [])
