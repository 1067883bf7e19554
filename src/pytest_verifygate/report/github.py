"""GitHub Actions output: what a run shows on a pull request and on the run's summary page.

Owns GitHub Actions workflow commands: the ``::error``/``::warning`` annotations of failed
gates (one per error a tool reported, at its file, line and column, read by
``report.locations``; one per gate when nothing there points into the repository), within
the limits GitHub shows per step; the escaping those commands need; stopping workflow
commands while untrusted text (gate output, test names, file names) is printed; folding each
failed gate's output in the log (``::group::``); the Markdown appended to
``$GITHUB_STEP_SUMMARY``; and the step's outputs written to ``$GITHUB_OUTPUT`` (``verdict``,
``failed-gates``, ``report``). Everything works on the report (docs: JSON
report), so the ``verifygate`` command and the pytest plugin (the xdist controller) share it.
Where a build's change base comes from is input, not output: ``changes.detect_change_base``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_verifygate import codes
from pytest_verifygate.git.changes import ChangeSet
from pytest_verifygate.report.digest import clean_output, is_error_line, normalize_paths, to_digest
from pytest_verifygate.report.junit import gate_status
from pytest_verifygate.report.locations import ERROR, NOTICE, WARNING
from pytest_verifygate.report.places import Located, Resolver, find_location, gate_locations
from pytest_verifygate.report.words import (
    failure_code,
    flaky_note,
    format_seconds,
    outcome_counts,
    skip_code,
)

if TYPE_CHECKING:
    from pytest_verifygate.hookspecs import GateHooks
    from pytest_verifygate.report.model import Report

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
OUTPUT_ENV = "GITHUB_OUTPUT"

# GitHub shows at most this much of an annotation's message usefully; the log has the rest.
MAX_MESSAGE_CHARS = 500
# GitHub shows at most 10 error, 10 warning and 10 notice annotations of one step (and 50 of
# a job): more would be dropped in silence, so no more are printed and the summary says so.
MAX_ANNOTATIONS = {ERROR: 10, WARNING: 10, NOTICE: 10}
# Annotations left out that the step summary still lists, one line each.
MAX_LISTED_LEFT_OUT = 50
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


def _output_lines(gate: Mapping[str, Any]) -> list[str]:
    return [line.strip() for line in clean_output(str(gate.get("output_tail") or ""))]


def _bases(gate: Mapping[str, Any], repo_root: str | os.PathLike[str],
           project_root: str | os.PathLike[str] | None) -> list[str]:
    """Where a gate's relative paths may start: its cwd, the project root, the repository."""
    project = Path(project_root if project_root is not None else repo_root)
    return list(dict.fromkeys([str(project / str(gate.get("cwd") or ".")), str(project),
                               str(repo_root)]))


def _shorten(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE_CHARS else (
        message[: MAX_MESSAGE_CHARS - 3] + "...")


def gate_annotation(
    gate: Mapping[str, Any],
    *,
    repo_root: str | os.PathLike[str],
    project_root: str | os.PathLike[str] | None = None,
) -> str:
    """The one ``::error`` command for a failed gate whose output names no error's place.

    The message is the first line of the output that reads like an error (a traceback's
    exception rather than its first line; the last line when none does; how the gate ended
    when it printed nothing), without pytest's ``E`` margin. The location is the first
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
        message = normalize_paths(re.sub(r"^E\s+", "", lines[chosen]), repo_root)
    else:
        message = gate_status(gate)
        if gate.get("reason"):
            message += f": {gate['reason']}"
    bases = _bases(gate, repo_root, project_root)
    order = ([chosen] if lines else []) + errors + list(range(len(lines)))
    location = None
    for index in dict.fromkeys(order):
        location = find_location(lines[index], repo_root=repo_root, bases=bases)
        if location is not None:
            break
    return workflow_command(
        "error", _shorten(message),
        file=location.file if location else None,
        line=location.line if location else None,
        col=location.col if location else None,
        title=f"verifygate {name} [{code}]",
    )


def located_annotation(gate: Mapping[str, Any], found: Located, *,
                       repo_root: str | os.PathLike[str], kind: str | None = None) -> str:
    """The workflow command for one error a gate's tool reported at a file of the repository."""
    title = f"verifygate {gate.get('name', '?')}"
    if found.title:
        title += f": {found.title}"
    return workflow_command(kind or found.severity,
                            _shorten(normalize_paths(found.message, repo_root)),
                            file=found.file, line=found.line, col=found.col, title=title)


class Annotation(NamedTuple):
    """One annotation a failed gate asks for: its kind, its command, and where it points."""

    gate: str
    kind: str
    command: str
    where: str
    message: str


class Annotations(NamedTuple):
    """What to print (``shown``, within GitHub's limits), what was left out, and problems
    with the ``pytest_verifygate_annotation_locations`` hook."""

    shown: list[str]
    left_out: list[Annotation]
    warnings: list[str]


def _gate_annotations(
    gate: Mapping[str, Any], *, repo_root: str | os.PathLike[str],
    project_root: str | os.PathLike[str] | None, hook: GateHooks | None,
) -> tuple[list[Annotation], list[str]]:
    name = str(gate.get("name", "?"))
    lines = clean_output(str(gate.get("output_tail") or ""))
    resolver = Resolver(repo_root, _bases(gate, repo_root, project_root))
    located, problems = gate_locations(gate, lines, resolver, hook)
    # The gate failed: when its tool reported only warnings (eslint --max-warnings 0), they
    # are why, and are shown as errors.
    promote = not any(found.severity == ERROR for found in located)
    annotations = []
    for found in located:
        kind = ERROR if promote and found.severity == WARNING else found.severity
        where = found.file + "".join(f":{n}" for n in (found.line, found.col) if n)
        annotations.append(Annotation(
            name, kind, located_annotation(gate, found, repo_root=repo_root, kind=kind),
            where, found.message.split("\n", 1)[0]))
    if not any(annotation.kind == ERROR for annotation in annotations):
        command = gate_annotation(gate, repo_root=repo_root, project_root=project_root)
        annotations.insert(0, Annotation(name, ERROR, command, "", gate_status(gate)))
    return annotations, problems


def plan_annotations(
    report: Report,
    *,
    repo_root: str | os.PathLike[str],
    project_root: str | os.PathLike[str] | None = None,
    hook: GateHooks | None = None,
) -> Annotations:
    """The annotations of a report's failed gates, within GitHub's per-step limits.

    Each failed gate gets its first annotation before any gate gets a second, so one gate
    with fifty lint errors cannot hide another gate's failure. ``hook`` is a pluggy hook
    relay (pytest's ``config.hook``, or the ``verifygate`` command's plugins) whose
    ``pytest_verifygate_annotation_locations`` implementations read more formats.
    """
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
            if rank < len(annotations) and budget.get(annotations[rank].kind, 0) > 0:
                budget[annotations[rank].kind] -= 1
                kept.add((number, rank))
    shown = [annotation.command for number, annotations in enumerate(per_gate)
             for rank, annotation in enumerate(annotations) if (number, rank) in kept]
    left_out = [annotation for number, annotations in enumerate(per_gate)
                for rank, annotation in enumerate(annotations) if (number, rank) not in kept]
    return Annotations(shown, left_out, warnings)


def left_out_line(left_out: Sequence[Annotation]) -> str:
    """One plain log line (never a workflow command) saying how many annotations GitHub
    would not have shown."""
    return (f"verifygate: {len(left_out)} more error(s) and warning(s) not annotated (GitHub "
            f"shows {MAX_ANNOTATIONS[ERROR]} of each per step); the step summary lists them")


def error_annotations(
    report: Report,
    *,
    repo_root: str | os.PathLike[str],
    project_root: str | os.PathLike[str] | None = None,
    hook: GateHooks | None = None,
    stop: CommandStop | None = None,
) -> list[str]:
    """The lines to print for a report's failed gates: workflow commands in contract order,
    then, when GitHub's limits left some out, one plain line saying how many. With ``stop``
    (commands stopped around untrusted text), they come resumed and stopped again after."""
    planned = plan_annotations(report, repo_root=repo_root, project_root=project_root,
                               hook=hook)
    lines = planned.shown + ([left_out_line(planned.left_out)] if planned.left_out else [])
    return [*stop.resuming(), *lines, *stop.stopping()] if stop is not None else lines


# --------------------------------------------------------------------------------------------
# untrusted text on a GitHub Actions log


class CommandStop:
    """Workflow commands off while untrusted text is printed.

    The runner reads a workflow command from any line of a step's output (stdout and
    stderr) that starts with ``::`` after leading blanks, or that holds ``##[`` anywhere (the
    old form). Gate output, test names and file names are not ours: between
    ``::stop-commands::TOKEN`` and ``::TOKEN::`` the runner honours none of them. The token
    is random and new for every stop, so the text cannot end the pause early.
    """

    def __init__(self, write_line: Callable[[str], object],
                 token: Callable[[], str] | None = None) -> None:
        self.write_line = write_line
        self._new_token = token or (lambda: "verifygate-" + secrets.token_hex(16))
        self.token: str | None = None

    @classmethod
    def on_stream(cls, stream: Any) -> CommandStop:
        """Stop and resume lines written (and flushed) on ``stream``."""
        def write_line(line: str) -> None:
            try:
                stream.write(line + "\n")
                stream.flush()
            except (OSError, ValueError):  # a closed stdout: nothing reaches the runner
                pass

        return cls(write_line)

    @staticmethod
    def inert_json(text: str) -> str:
        return inert_json(text)

    @staticmethod
    def inert_text(text: str) -> str:
        return inert_text(text)

    @classmethod
    def on_terminal(cls, config: Any) -> CommandStop | None:
        """For a pytest session (``config``): commands stopped now, on pytest's terminal, and
        resumed when pytest ends (after its last line). None without a terminal reporter."""
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

    def stopping(self) -> list[str]:
        """The line that stops commands (none when they are stopped already)."""
        if self.token is not None:
            return []
        self.token = self._new_token()
        return [f"::stop-commands::{self.token}"]

    def resuming(self) -> list[str]:
        """The line that resumes commands (none when they are not stopped)."""
        if self.token is None:
            return []
        token, self.token = self.token, None
        return [f"::{token}::"]

    def stop(self) -> None:
        for line in self.stopping():
            self.write_line(line)

    def resume(self) -> None:
        for line in self.resuming():
            self.write_line(line)

    def __enter__(self) -> CommandStop:
        self.stop()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.resume()


# A line starts after CR or LF (the runner splits on both); its leading blanks are trimmed.
_COMMAND_LINE = re.compile(r"(?:^|(?<=[\r\n]))([^\S\r\n]*):(?=:)")


def inert_text(text: str) -> str:
    """Text (the agent digest) no runner reads a workflow command from, read the same by
    people: a zero-width space breaks ``::`` at a line's start and the old ``##[``."""
    return _COMMAND_LINE.sub("\\1:\u200b", text).replace("##[", "#\u200b#[")


def inert_json(text: str) -> str:
    """JSON text no runner reads a workflow command from, meaning the same to JSON readers.

    A JSON line never starts with ``::``; the only way left is the old ``##[`` form, which
    can only be inside a string, where ``\\u005b`` is the same ``[``.
    """
    return text.replace("##[", "##\\u005b")


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


def _left_out_section(left_out: Sequence[Annotation]) -> list[str]:
    """The errors GitHub would not have shown as annotations: counted, and listed."""
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


def step_summary(
    report: Report,
    *,
    repo_root: str | os.PathLike[str] | None = None,
    project_root: str | os.PathLike[str] | None = None,
    hook: GateHooks | None = None,
    planned: Annotations | None = None,
) -> str:
    """The Markdown for ``$GITHUB_STEP_SUMMARY``: verdict, a table of gates, the errors
    left without an annotation by GitHub's limits, the digest."""
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
                shown += f" ({flaky_note(gate)})"
            if gate.get("cached"):
                shown += " (cached)"
            if outcome != codes.FAILED and gate.get("reason"):
                shown += f": {gate['reason']}"
            shown_code = gate.get("code") or skip_code(gate)  # as the console table shows it
            code = _code(str(shown_code)) if shown_code else ""
            lines.append(f"| {_code(str(gate.get('name', '?')))} | {_cell(shown)} | {code} | "
                         f"{_seconds(gate)} |")
        lines.append("")
    not_selected = len(report.get("not_selected", []))
    lines.append(f"**{outcome_counts(report.get('summary', {}))}**"
                 + (f"; {not_selected} gate(s) not selected" if not_selected else ""))
    if planned is None and repo_root is not None:
        planned = plan_annotations(report, repo_root=repo_root, project_root=project_root,
                                   hook=hook)
    if planned is not None and planned.left_out:
        lines += _left_out_section(planned.left_out)
    if any(gate.get("outcome") == codes.FAILED for gate in gates):
        # One level below the page's own heading (###), as Markdown nests sections.
        digest = to_digest(report, root=repo_root, heading=4).rstrip()
        lines += ["", "<details><summary>Output of the failed gates</summary>", "", digest, "",
                  "</details>"]
    return "\n".join(lines) + "\n\n"


def append_step_summary(
    report: Report,
    environ: Mapping[str, str],
    *,
    repo_root: str | os.PathLike[str] | None = None,
    project_root: str | os.PathLike[str] | None = None,
    hook: GateHooks | None = None,
    planned: Annotations | None = None,
) -> str | None:
    """Append the step summary to ``$GITHUB_STEP_SUMMARY`` when it is set.

    Returns a warning when the file cannot be written (the run's result stands), else None.
    """
    path = environ.get(STEP_SUMMARY_ENV, "")
    if not path:
        return None
    try:
        # File names that are not UTF-8 (surrogate escapes) are shown escaped, never a crash.
        with open(path, "a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(step_summary(report, repo_root=repo_root, project_root=project_root,
                                      hook=hook, planned=planned))
    except OSError as exc:
        return f"cannot append to {STEP_SUMMARY_ENV} {path}: {exc.strerror or exc}"
    return None


def github_outputs(
    report: Report,
    environ: Mapping[str, str],
    *,
    repo_root: str | os.PathLike[str],
    project_root: str | os.PathLike[str] | None = None,
    hook: GateHooks | None = None,
) -> tuple[list[str], list[str]]:
    """What a GitHub Actions run gets: (lines to print, warnings).

    The lines are the annotations (and a plain line when GitHub's limits left some out).
    The step summary is appended as a side effect; the caller prints the lines on stdout,
    after resuming workflow commands (``CommandStop``).
    """
    planned = plan_annotations(report, repo_root=repo_root, project_root=project_root,
                               hook=hook)
    warning = append_step_summary(report, environ, repo_root=repo_root, planned=planned)
    lines = planned.shown + ([left_out_line(planned.left_out)] if planned.left_out else [])
    return lines, planned.warnings + ([warning] if warning else [])


# --------------------------------------------------------------------------------------------
# the step's outputs, and folding in the log


def step_outputs(report: Mapping[str, Any], report_path: str | None) -> dict[str, str]:
    """What a step that ran the gates offers later steps (``steps.<id>.outputs``): the
    verdict, the failed gates (a JSON array, for ``fromJSON``) and the JSON report's path
    (empty when none was written)."""
    import json

    failed = [str(gate.get("name")) for gate in report.get("gates", [])
              if gate.get("outcome") == codes.FAILED]
    return {"verdict": str(report.get("verdict")),
            "failed-gates": json.dumps(failed, ensure_ascii=False),
            "report": report_path or ""}


def write_step_outputs(report: Mapping[str, Any], environ: Mapping[str, str], *,
                       report_path: str | None = None,
                       delimiter: Callable[[], str] | None = None) -> str | None:
    """Append ``step_outputs`` to ``$GITHUB_OUTPUT`` when it is set; a warning when the file
    cannot be written (the run's result stands), else None.

    Each value is written in GitHub's multiline form (``name<<DELIMITER``) with a random
    delimiter, so no gate name can end a value early or add an output of its own.
    """
    path = environ.get(OUTPUT_ENV, "")
    if not path:
        return None
    new_delimiter = delimiter or (lambda: "verifygate_" + secrets.token_hex(16))
    lines: list[str] = []
    for name, value in step_outputs(report, report_path).items():
        token = new_delimiter()
        lines += [f"{name}<<{token}", value, token]
    try:
        with open(path, "a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write("\n".join(lines) + "\n")
    except OSError as exc:
        return f"cannot append to {OUTPUT_ENV} {path}: {exc.strerror or exc}"
    return None


def folded(title: str, body: str, stop: CommandStop | None) -> str:
    """``body`` folded under ``title`` in a GitHub Actions log (``::group::``/``::endgroup::``).

    With ``stop`` (workflow commands stopped around untrusted text), the group commands are
    written with commands resumed, and ``body`` with them stopped again.
    """
    resume = stop.resuming() if stop is not None else []
    pause = stop.stopping() if stop is not None else []
    opening = [*resume, workflow_command("group", title), *pause]
    closing = [*(stop.resuming() if stop is not None else []), "::endgroup::",
               *(stop.stopping() if stop is not None else [])]
    return "\n".join([*opening, body.rstrip("\n"), *closing]) + "\n"
