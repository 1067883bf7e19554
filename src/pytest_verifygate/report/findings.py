"""Where a failed gate's errors are: the findings of the annotation hook and of the built-in
readers, kept when they name a file of the repository.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from pytest_verifygate.report.error_formats import (
    ERROR,
    MAX_MESSAGE_LINES,
    SEVERITIES,
    Finding,
    builtin_findings,
)
from pytest_verifygate.state.storage import read_user_file

if TYPE_CHECKING:
    from pytest_verifygate.report.model import GateEntry

HOOK_NAME = "pytest_verifygate_annotation_locations"


class AnnotationHook(Protocol):
    """The part of the hook relay the reports call (``hookspecs.GateHooks`` has it)."""

    def pytest_verifygate_annotation_locations(self, *, gate: Any, output: str
                                               ) -> list[Any]: ...


MAX_MESSAGE_CHARS = 1000
# A test file is read to find a failed test's ``def`` only up to this size.
MAX_SOURCE_BYTES = 1 << 20


class Located(NamedTuple):
    """A finding at a file of the repository (``file`` relative to its root, POSIX form)."""

    file: str
    line: int | None
    col: int | None
    message: str = ""
    severity: str = ERROR
    title: str | None = None


class Resolver:
    """Paths a gate printed (absolute, or relative to one of ``bases``) as files of the
    repository; symlinks are resolved first: a link out of the repository is not in it."""

    def __init__(self, repo_root: str | os.PathLike[str],
                 bases: Sequence[str | os.PathLike[str]]) -> None:
        self.real_root = os.path.realpath(repo_root)
        self.bases = [os.fspath(base) for base in bases]
        self._known: dict[str, str | None] = {}
        self._sources: dict[str, list[str]] = {}

    def file(self, path: str) -> str | None:
        """``path`` relative to the repository root when it names a file inside it."""
        if path not in self._known:
            self._known[path] = self._find(path)
        return self._known[path]

    def _find(self, path: str) -> str | None:
        bases = [""] if os.path.isabs(path) else self.bases
        for base in bases:
            try:
                full = os.path.realpath(os.path.join(base, path))
                inside = full.startswith(os.path.join(self.real_root, "")) and os.path.isfile(full)
            except (OSError, ValueError):  # ValueError: a NUL in the path
                continue
            if inside:
                return Path(os.path.relpath(full, self.real_root)).as_posix()
        return None

    def exists(self, path: str) -> bool:
        return self.file(path) is not None

    def definition(self, file: str, symbol: str) -> int | None:
        """The line of ``def name`` (``Class.name``: inside ``class Class``) in a Python file."""
        if file not in self._sources:
            data = read_user_file(os.path.join(self.real_root, file), MAX_SOURCE_BYTES)
            self._sources[file] = (data or b"").decode("utf-8", "replace").splitlines()
        lines = self._sources[file]
        *classes, name = symbol.split(".")
        start = 0
        for class_name in classes:
            header = re.compile(rf"^\s*class\s+{re.escape(class_name)}\b")
            start = next((i for i in range(start, len(lines)) if header.match(lines[i])), -1)
            if start < 0:
                return None
        definition = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(")
        return next((i + 1 for i in range(start, len(lines)) if definition.match(lines[i])), None)


# A file location anywhere in a line: path:line[:col] (compilers, linters, pytest, mypy),
# File "path", line N (Python tracebacks) and path(line,col) (tsc).
_LOCATION_PATTERNS = (
    re.compile(r"(?:^|(?<=[\s\"'(\[<=]))(?P<path>[^\s:\"'()\[\]<>=,]+):(?P<line>\d+)"
               r"(?::(?P<col>\d+))?(?![\w.])"),
    re.compile(r"\bFile \"(?P<path>[^\"]+)\", line (?P<line>\d+)"),
    re.compile(r"(?:^|(?<=\s))(?P<path>[^\s:\"'()]+)\((?P<line>\d+),(?P<col>\d+)\)"),
)


def find_location(
    line: str, *, repo_root: str | os.PathLike[str], bases: Sequence[str | os.PathLike[str]]
) -> Located | None:
    """The first place in ``line`` naming a file of the repository."""
    resolver = Resolver(repo_root, bases)
    for pattern in _LOCATION_PATTERNS:
        for match in pattern.finditer(line):
            file = resolver.file(match["path"])
            if file is not None and int(match["line"]) > 0:
                col = match.groupdict().get("col")
                return Located(file, int(match["line"]), int(col) if col else None)
    return None


def _as_finding(item: Any) -> Finding | None:
    """A hook's result item as a ``Finding``, or None when it is not one."""
    if not isinstance(item, (Mapping, tuple)):
        return None
    try:
        finding = Finding(**item) if isinstance(item, Mapping) else Finding(*item)
    except TypeError:
        return None
    valid = (
        isinstance(finding.path, str) and isinstance(finding.message, str)
        and all(n is None or (isinstance(n, int) and n >= 1) for n in (finding.line, finding.col))
        and all(t is None or isinstance(t, str) for t in (finding.title, finding.symbol))
    )
    if not valid:
        return None
    if finding.severity not in SEVERITIES:
        finding = finding._replace(severity=ERROR)
    return finding


def hook_findings(hook: AnnotationHook, gate: GateEntry, output: str
                  ) -> tuple[list[Finding], list[str]]:
    """What the hook's implementations found, and problems with it (one raised, items that
    are not findings)."""
    name = str(gate.get("name", "?"))
    try:
        results = getattr(hook, HOOK_NAME)(gate=dict(gate), output=output)
    except Exception as exc:  # a plugin's bug must not cost the run its annotations
        return [], [f"{HOOK_NAME} failed for gate {name!r} ({type(exc).__name__}: {exc}); "
                    "its findings are left out"]
    findings: list[Finding] = []
    rejected = 0
    for result in results or ():
        try:
            items = list(result or ())
        except TypeError:
            items = [result]
        for item in items:
            finding = _as_finding(item)
            if finding is None:
                rejected += 1
            else:
                findings.append(finding)
    problems = [f"{HOOK_NAME} returned {rejected} item(s) for gate {name!r} that are not "
                "findings (path, line, col, message): left out"] if rejected else []
    return findings, problems


def _clip(message: str) -> str:
    lines = message.strip().splitlines()
    if len(lines) > MAX_MESSAGE_LINES:
        lines = [*lines[:MAX_MESSAGE_LINES], "..."]
    text = "\n".join(lines)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


def locate(findings: Iterable[Finding], resolver: Resolver) -> list[Located]:
    """The findings that name a file of the repository, in order, without repeats."""
    resolved = [(finding, resolver.file(finding.path)) for finding in findings]
    # A finding without a line (pytest's "FAILED path::test" alone) only adds something
    # when nothing else points into its file: with --tb=line the same failure is there too.
    exact = {file for finding, file in resolved if file is not None and finding.line}
    located: list[Located] = []
    seen: set[tuple[str, int | None, int | None, str]] = set()
    for finding, file in resolved:
        if file is None or (finding.line is None and file in exact):
            continue
        # Some tools say line 0 (or column 0) for the file as a whole.
        line = finding.line or None
        col = finding.col or None
        if line is None and finding.symbol:
            line = resolver.definition(file, finding.symbol)
        message = _clip(finding.message) or finding.severity
        key = (file, line, col, message.split("\n", 1)[0])
        if key not in seen:
            seen.add(key)
            located.append(Located(file, line, col, message, finding.severity, finding.title))
    return located


def gate_locations(gate: GateEntry, lines: Sequence[str], resolver: Resolver,
                   hook: AnnotationHook | None = None) -> tuple[list[Located], list[str]]:
    """A failed gate's errors at files of the repository (the hook's first), and problems with
    the hook; ``lines`` is the cleaned output."""
    problems: list[str] = []
    findings: list[Finding] = []
    if hook is not None and hasattr(hook, HOOK_NAME):
        findings, problems = hook_findings(hook, gate, "\n".join(lines))
    findings += builtin_findings(lines, resolver.exists)
    return locate(findings, resolver), problems
