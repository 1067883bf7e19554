"""GitHub Actions output made from a report: annotations, the step summary, the step's outputs,
and workflow commands stopped around untrusted text (gate output, test and file names).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import html
import json
import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from pytest_verifygate import codes
from pytest_verifygate.git.changes import ChangeSet
from pytest_verifygate.report.digest import clean_output, is_error_line, normalize_paths, to_digest
from pytest_verifygate.report.error_formats import ERROR, NOTICE, WARNING
from pytest_verifygate.report.findings import Resolver, find_location, gate_locations
from pytest_verifygate.report.junit import gate_status
from pytest_verifygate.report.outcomes import (
    failure_code,
    flaky_note,
    format_seconds,
    outcome_counts,
    skip_code,
)

if TYPE_CHECKING:
    from pytest_verifygate.report.findings import AnnotationHook
    from pytest_verifygate.report.model import GateEntry, Report

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
OUTPUT_ENV = "GITHUB_OUTPUT"
# GitHub shows at most this much of an annotation's message usefully; the log has the rest.
MAX_MESSAGE_CHARS = 500
# GitHub drops annotations of a kind past these in one step in silence: the summary lists them.
MAX_ANNOTATIONS = {ERROR: 10, WARNING: 10, NOTICE: 10}
MAX_LISTED_LEFT_OUT = 50
ICONS = {codes.PASSED: "\u2705", codes.FAILED: "\u274c", codes.SKIPPED: "\u23ed\ufe0f",
         codes.PENDING: "\u23f8\ufe0f"}

# Escaped as GitHub's toolkit escapes a command's message, and its property values.
_MESSAGE_ESCAPES = str.maketrans({"%": "%25", "\r": "%0D", "\n": "%0A"})
_PROPERTY_ESCAPES = str.maketrans({"%": "%25", "\r": "%0D", "\n": "%0A", ":": "%3A", ",": "%2C"})


def workflow_command(command: str, message: str, **properties: str | int | None) -> str:
    """``::command key=value,...::message``, escaped; None properties left out."""
    shown = ",".join(f"{key}={str(value).translate(_PROPERTY_ESCAPES)}"
                     for key, value in properties.items() if value is not None)
    return f"::{command}{' ' + shown if shown else ''}::{message.translate(_MESSAGE_ESCAPES)}"


def _bases(gate: GateEntry, repo_root: str | os.PathLike[str],
           project_root: str | os.PathLike[str] | None) -> list[str]:
    """Where a gate's relative paths may start: its cwd, the project root, the repository."""
    project = Path(project_root if project_root is not None else repo_root)
    return list(dict.fromkeys([str(project / str(gate.get("cwd") or ".")), str(project),
                               str(repo_root)]))


def _shorten(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return message[: MAX_MESSAGE_CHARS - 3] + "..."


def gate_annotation(gate: GateEntry, *, repo_root: str | os.PathLike[str],
                    project_root: str | os.PathLike[str] | None = None) -> str:
    """The one ``::error`` for a failed gate whose output names no error's place: the first
    error line (else the last line, else how the gate ended), at the first repository
    ``path:line`` in it, else in any error line, else anywhere in the output."""
    lines = [line.strip() for line in clean_output(str(gate.get("output_tail") or ""))
             if line.strip()]
    errors = [index for index, line in enumerate(lines) if is_error_line(line)]
    # "Traceback (most recent call last):" says nothing; its exception line says what failed.
    telling = [index for index in errors if not lines[index].startswith("Traceback (")]
    if lines:
        chosen = (telling or errors or [len(lines) - 1])[0]
        message = normalize_paths(re.sub(r"^E\s+", "", lines[chosen]), repo_root)
        order = [chosen, *errors, *range(len(lines))]
    else:
        message = gate_status(gate) + (f": {gate['reason']}" if gate.get("reason") else "")
        order = []
    bases = _bases(gate, repo_root, project_root)
    place: dict[str, str | int | None] = {}
    for index in dict.fromkeys(order):
        location = find_location(lines[index], repo_root=repo_root, bases=bases)
        if location is not None:
            place = {"file": location.file, "line": location.line, "col": location.col}
            break
    return workflow_command("error", _shorten(message), **place,
                            title=f"verifygate {gate.get('name', '?')} [{failure_code(gate)}]")


class Annotation(NamedTuple):
    gate: str
    kind: str
    command: str
    where: str
    message: str


class Annotations(NamedTuple):
    """What to print within GitHub's limits, what was left out, and the hook's problems."""

    shown: list[str]
    left_out: list[Annotation]
    warnings: list[str]


def _gate_annotations(
    gate: GateEntry, *, repo_root: str | os.PathLike[str],
    project_root: str | os.PathLike[str] | None, hook: AnnotationHook | None,
) -> tuple[list[Annotation], list[str]]:
    name = str(gate.get("name", "?"))
    lines = clean_output(str(gate.get("output_tail") or ""))
    resolver = Resolver(repo_root, _bases(gate, repo_root, project_root))
    located, problems = gate_locations(gate, lines, resolver, hook)
    # Only warnings (eslint --max-warnings 0) are why the gate failed: shown as errors.
    promote = not any(found.severity == ERROR for found in located)
    annotations = []
    for found in located:
        kind = ERROR if promote and found.severity == WARNING else found.severity
        title = f"verifygate {name}" + (f": {found.title}" if found.title else "")
        command = workflow_command(kind, _shorten(normalize_paths(found.message, repo_root)),
                                   file=found.file, line=found.line, col=found.col, title=title)
        where = found.file + "".join(f":{n}" for n in (found.line, found.col) if n)
        annotations.append(Annotation(name, kind, command, where, found.message.split("\n")[0]))
    if not any(annotation.kind == ERROR for annotation in annotations):
        command = gate_annotation(gate, repo_root=repo_root, project_root=project_root)
        annotations.insert(0, Annotation(name, ERROR, command, "", gate_status(gate)))
    return annotations, problems


def plan_annotations(report: Report, *, repo_root: str | os.PathLike[str],
                     project_root: str | os.PathLike[str] | None = None,
                     hook: AnnotationHook | None = None) -> Annotations:
    """The annotations of a report's failed gates, within GitHub's per-step limits. Each
    failed gate gets its first before any gets a second: fifty lint errors of one gate cannot
    hide another gate's failure."""
    per_gate: list[list[Annotation]] = []
    warnings: list[str] = []
    for gate in report.get("gates", []):
        if gate.get("outcome") == codes.FAILED:
            annotations, problems = _gate_annotations(
                gate, repo_root=repo_root, project_root=project_root, hook=hook)
            per_gate.append(annotations)
            warnings += map(inert_text, problems)  # a plugin's message may quote gate output
    if report.get("verdict") == codes.VERDICT_FAILED and not per_gate:
        per_gate.append([Annotation("", ERROR, workflow_command(
            "error", codes.UNVERIFIED_FAILURE, title="verifygate"), "", "")])
    budget = dict(MAX_ANNOTATIONS)
    kept: set[tuple[int, int]] = set()
    for rank in range(max((len(annotations) for annotations in per_gate), default=0)):
        for number, annotations in enumerate(per_gate):
            if rank < len(annotations) and budget[annotations[rank].kind] > 0:
                budget[annotations[rank].kind] -= 1
                kept.add((number, rank))
    shown: list[str] = []
    left_out: list[Annotation] = []
    for number, annotations in enumerate(per_gate):
        for rank, annotation in enumerate(annotations):
            if (number, rank) in kept:
                shown.append(annotation.command)
            else:
                left_out.append(annotation)
    return Annotations(shown, left_out, warnings)


def printed(planned: Annotations) -> list[str]:
    """The annotations, then one plain line when GitHub's limits left some out."""
    if not planned.left_out:
        return planned.shown
    return [*planned.shown,
            f"verifygate: {len(planned.left_out)} more error(s) and warning(s) not annotated "
            f"(GitHub shows {MAX_ANNOTATIONS[ERROR]} of each per step); the step summary "
            "lists them"]


def error_annotations(report: Report, *, repo_root: str | os.PathLike[str],
                      hook: AnnotationHook | None = None) -> list[str]:
    """The lines to print for a report's failed gates."""
    return printed(plan_annotations(report, repo_root=repo_root, hook=hook))


# A line starts after CR or LF (the runner splits on both); its leading blanks are trimmed.
_COMMAND_LINE = re.compile(r"(?:^|(?<=[\r\n]))([^\S\r\n]*):(?=:)")


def inert_text(text: str) -> str:
    """Text no runner reads a workflow command from, read the same by people: a zero-width
    space breaks ``::`` at a line's start and the old ``##[``."""
    return _COMMAND_LINE.sub("\\1:\u200b", text).replace("##[", "#\u200b#[")


def inert_json(text: str) -> str:
    """JSON text no runner reads a workflow command from: a JSON line never starts with
    ``::``, and ``##[`` can only be in a string, where ``\\u005b`` is the same ``[``."""
    return text.replace("##[", "##\\u005b")


class CommandStop:
    """Workflow commands off (``::stop-commands::TOKEN`` ... ``::TOKEN::``) while untrusted
    text is printed. The token is random and new for every stop, so the text cannot end the
    pause early."""

    inert_json = staticmethod(inert_json)
    inert_text = staticmethod(inert_text)

    def __init__(self, write_line: Callable[[str], object]) -> None:
        self.write_line = write_line
        self.token: str | None = None

    @classmethod
    def on_stream(cls, stream: TextIO) -> CommandStop:
        """Stop and resume lines written (and flushed) on ``stream``."""
        def write_line(line: str) -> None:
            try:
                stream.write(line + "\n")
                stream.flush()
            except (OSError, ValueError):  # a closed stdout: nothing reaches the runner
                pass

        return cls(write_line)

    @classmethod
    def on_terminal(cls, config: Any) -> CommandStop | None:
        """Commands stopped now on pytest's terminal, resumed when pytest ends; None without a
        terminal reporter."""
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return None
        stop = cls(reporter.write_line)
        stop.stop()
        config.add_cleanup(stop.resume)
        return stop

    @property
    def stopped(self) -> bool:
        return self.token is not None

    def around(self, lines: Sequence[str]) -> list[str]:
        """``lines`` (ours) with commands resumed before them and stopped again after."""
        resumed = [f"::{self.token}::"] if self.token is not None else []
        self.token = "verifygate-" + secrets.token_hex(16)
        return [*resumed, *lines, f"::stop-commands::{self.token}"]

    def stop(self) -> None:
        if self.token is None:
            self.token = "verifygate-" + secrets.token_hex(16)
            self.write_line(f"::stop-commands::{self.token}")

    def resume(self) -> None:
        if self.token is not None:
            token, self.token = self.token, None
            self.write_line(f"::{token}::")

    def __enter__(self) -> CommandStop:
        self.stop()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.resume()


def folded(title: str, body: str, stop: CommandStop) -> str:
    """``body`` folded under ``title`` in the log (``::group::``), commands stopped in it."""
    lines = [*stop.around([workflow_command("group", title)]), body.rstrip("\n"),
             *stop.around(["::endgroup::"])]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, no column breaks, no HTML."""
    return html.escape(" ".join(text.split()), quote=False).replace("|", "\\|")


def _code(text: str) -> str:
    """Inline code in a table cell: literal text, but ``|`` still needs its backslash."""
    if not text or "`" in text:
        return _cell(text)
    return "`" + " ".join(text.split()).replace("|", "\\|") + "`"


def _left_out_section(left_out: Sequence[Annotation]) -> list[str]:
    lines = ["", f"**{len(left_out)} error(s) and warning(s) not annotated**: GitHub shows "
             f"{MAX_ANNOTATIONS[ERROR]} error and {MAX_ANNOTATIONS[WARNING]} warning "
             "annotations per step.", "",
             "<details><summary>Not annotated</summary>", "",
             "| Gate | Kind | Where | Message |", "| --- | --- | --- | --- |"]
    for annotation in left_out[:MAX_LISTED_LEFT_OUT]:
        lines.append(f"| {_code(annotation.gate)} | {annotation.kind} | "
                     f"{_code(annotation.where) if annotation.where else '-'} | "
                     f"{_cell(annotation.message[:MAX_MESSAGE_CHARS])} |")
    if len(left_out) > MAX_LISTED_LEFT_OUT:
        lines += ["", f"... and {len(left_out) - MAX_LISTED_LEFT_OUT} more: see the log."]
    return [*lines, "", "</details>"]


def step_summary(report: Report, *, repo_root: str | os.PathLike[str] | None = None,
                 planned: Annotations | None = None) -> str:
    """The Markdown for ``$GITHUB_STEP_SUMMARY``: verdict, gates, errors not annotated, digest."""
    verdict = str(report.get("verdict"))
    # A verdict that settles the run wears its outcome's icon; pending and unverified inform.
    icon = {codes.VERDICT_PASSED: ICONS[codes.PASSED],
            codes.VERDICT_FAILED: ICONS[codes.FAILED]}.get(verdict, "\u2139\ufe0f")
    changes = report.get("changes")
    described = ChangeSet.from_dict(changes).describe() if changes else "unknown"
    gates = report.get("gates", [])
    lines = [f"### {icon} verifygate: {verdict}", "",
             f"Contract {_code(str(report.get('contract', '')))}; changes: {_cell(described)}",
             ""]
    if gates:
        lines += ["| Gate | Outcome | Code | Time |", "| --- | --- | --- | --- |"]
        for gate in gates:
            outcome = str(gate.get("outcome"))
            shown = f"{ICONS.get(outcome, '')} {outcome}".strip()
            if gate.get("flaky"):
                shown += f" ({flaky_note(gate)})"
            if gate.get("cached"):
                shown += " (cached)"
            if outcome != codes.FAILED and gate.get("reason"):
                shown += f": {gate['reason']}"
            shown_code = gate.get("code") or skip_code(gate)  # as the console table shows it
            seconds = format_seconds(float(gate.get("duration_s") or 0.0), prose=True)
            lines.append(f"| {_code(str(gate.get('name', '?')))} | {_cell(shown)} | "
                         f"{_code(str(shown_code)) if shown_code else ''} | "
                         f"{seconds if gate.get('attempts') else '-'} |")
        lines.append("")
    not_selected = len(report.get("not_selected", []))
    lines.append(f"**{outcome_counts(report.get('summary', {}))}**"
                 + (f"; {not_selected} gate(s) not selected" if not_selected else ""))
    if planned is None and repo_root is not None:
        planned = plan_annotations(report, repo_root=repo_root)
    if planned is not None and planned.left_out:
        lines += _left_out_section(planned.left_out)
    if any(gate.get("outcome") == codes.FAILED for gate in gates):
        # One level below the page's own heading (###), as Markdown nests sections.
        digest = to_digest(report, root=repo_root, heading=4).rstrip()
        lines += ["", "<details><summary>Output of the failed gates</summary>", "", digest, "",
                  "</details>"]
    return "\n".join(lines) + "\n\n"


def append_to(environ: Mapping[str, str], variable: str, text: Callable[[], str]) -> str | None:
    """Append ``text()`` to the file ``$variable`` names when it is set; a warning when it
    cannot (the run's result stands)."""
    path = environ.get(variable, "")
    if not path:
        return None
    try:
        # File names that are not UTF-8 (surrogate escapes) are shown escaped, never a crash.
        with open(path, "a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text())
    except OSError as exc:
        return f"cannot append to {variable} {path}: {exc.strerror or exc}"
    return None


def write_step_outputs(report: Report, environ: Mapping[str, str], *,
                       report_path: str | None = None) -> str | None:
    """Append ``verdict``, ``failed-gates`` (JSON) and ``report`` (its path) to ``$GITHUB_OUTPUT``
    when set; a warning if it cannot. A random ``name<<DELIMITER`` for each value keeps a gate
    name from ending it early or adding an output."""
    def text() -> str:
        failed = [str(gate.get("name")) for gate in report.get("gates", [])
                  if gate.get("outcome") == codes.FAILED]
        outputs = {"verdict": str(report.get("verdict")),
                   "failed-gates": json.dumps(failed, ensure_ascii=False),
                   "report": report_path or ""}
        written = ""
        for name, value in outputs.items():
            delimiter = "verifygate_" + secrets.token_hex(16)
            written += f"{name}<<{delimiter}\n{value}\n{delimiter}\n"
        return written

    return append_to(environ, OUTPUT_ENV, text)
