"""What a failed gate's tool reported: its output read back as errors with a place.

Owns the ``Finding`` record (also what a ``pytest_verifygate_annotation_locations`` hook
implementation returns) and the built-in readers of the common error formats:
``path:line[:col]: message`` (ruff's concise format, flake8, mypy with its notes and
``--pretty``, eslint's unix format, compilers, Python warnings, pytest's ``--tb=line``),
ruff's and rustc's ``--> path:line:col``, pyright's and tsc ``--pretty``'s
``path:line:col - error``, tsc's ``path(line,col): error``, eslint's default stylish format,
and pytest's failure sections and ``FAILED path::test`` lines. Reading only: which paths are
files of the repository is ``report.places``' business.

PYTEST_DONT_REWRITE
"""

import re
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

ERROR = "error"
WARNING = "warning"
NOTICE = "notice"
SEVERITIES = (ERROR, WARNING, NOTICE)
# Lines of one message (pytest's ``E`` lines, pyright's explanations) a reader joins.
MAX_MESSAGE_LINES = 8


class Finding(NamedTuple):
    """One error as a tool printed it. What a ``pytest_verifygate_annotation_locations``
    implementation returns (a plain tuple or a dict with these keys works too).

    ``path`` is as printed: absolute, or relative to the gate's ``cwd``, the project root or
    the repository root. ``line`` and ``col`` count from 1; ``line`` may be None when only the
    file is known, and then ``symbol`` (a function, or ``Class.method``) is looked up in the
    file. ``severity`` is ``error``, ``warning`` or ``notice``. ``title`` says what failed
    (a rule, a test id) and is shown after the gate's name.
    """

    path: str
    line: int | None
    col: int | None
    message: str
    severity: str = ERROR
    title: str | None = None
    symbol: str | None = None


# --------------------------------------------------------------------------------------------
# the built-in readers


_SEVERITY_WORD = re.compile(
    r"^(?P<word>error|warning|note|info|information|hint|fatal error)(?:\[[^\]]*\])?:\s*",
    re.IGNORECASE)
_ESLINT_UNIX_END = re.compile(r"\s*\[(?P<sev>Error|Warning)/(?P<rule>[^\]]*)\]$")
_PYTHON_WARNING = re.compile(r"^\w*Warning\b")
_PYTEST_FRAME_MESSAGE = re.compile(r"^in [\w<>.]+$")
_MYPY_CODE_END = re.compile(r"\s\s\[[a-z][a-z0-9-]*\]$")

_COLON = re.compile(r"^\s*(?P<path>[^\s:][^:]*?):(?P<line>\d+)(?::(?P<col>\d+))?:\s+"
                    r"(?P<message>\S.*)$")
_ARROW = re.compile(r"^\s*-->\s+(?P<path>.+?):(?P<line>\d+)(?::(?P<col>\d+))?\s*$")
_DASH = re.compile(r"^\s*(?P<path>[^\s:][^:]*?):(?P<line>\d+):(?P<col>\d+) - "
                   r"(?P<sev>error|warning|information|info|hint)\b:?\s*(?P<message>.*)$")
_PAREN = re.compile(r"^\s*(?P<path>[^\s(][^(]*?)\((?P<line>\d+),(?P<col>\d+)\): "
                    r"(?P<sev>error|warning|message|info)\b:?\s*(?P<message>.*)$")
_STYLISH = re.compile(r"^\s+(?P<line>\d+):(?P<col>\d+)\s+(?P<sev>error|warning)\s+(?P<rest>\S.*)$")
_RULE = re.compile(r"^[\w@/.-]+$")
_HEADER_PATH = re.compile(r"^(?:[A-Za-z]:)?[^\s:]\S*$")

_PYTEST_CAPTURED = re.compile(r"^-+ Captured .* -+$")
_PYTEST_LOCATION = re.compile(r"^(?P<path>[^\s:][^:]*?):(?P<line>\d+):(?: (?P<what>.*))?$")
_TRACEBACK_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)')
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failed)\b")

Found = tuple[int, Finding]  # the output line a finding starts at, for the tools' own order


def _severity(word: str) -> str:
    word = word.lower()
    if word.startswith(("error", "fatal")):
        return ERROR
    return WARNING if word == "warning" else NOTICE


def _number(text: str | None) -> int | None:
    return int(text) if text else None


def _joined(parts: Iterable[str]) -> str:
    return "\n".join(part for part in parts if part)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _continuation(lines: Sequence[str], index: int, claimed: set[int]) -> list[str]:
    """Lines after ``index`` indented deeper than it: pyright's and tsc's explanations."""
    depth = _indent(lines[index])
    more: list[str] = []
    for following in range(index + 1, min(len(lines), index + 1 + MAX_MESSAGE_LINES)):
        line = lines[following]
        if not line.strip() or _indent(line) <= depth or following in claimed:
            break
        claimed.add(following)
        more.append(line.strip())
    return more


def _arrow_findings(lines: Sequence[str], claimed: set[int], exists: Callable[[str], bool]
                    ) -> list[Found]:
    """ruff's and rustc's ``CODE message`` line, then `` --> path:line:col``."""
    found: list[Found] = []
    for index, line in enumerate(lines):
        match = _ARROW.match(line)
        if match is None or index in claimed or index == 0:
            continue
        header = lines[index - 1].strip()
        if not header or index - 1 in claimed:
            continue
        claimed.update((index - 1, index))
        helps = []
        for following in range(index + 1, min(len(lines), index + 40)):
            text = lines[following].strip()
            if not text or _ARROW.match(lines[following]):
                break
            text = text.removeprefix("= ")
            if text.startswith("help: "):
                helps.append(text)
        severity, message = ERROR, header
        word = _SEVERITY_WORD.match(header)
        if word is not None:
            severity = _severity(word["word"])
        found.append((index - 1, Finding(match["path"], int(match["line"]), _number(match["col"]),
                                         _joined([message, *helps]), severity)))
    return found


def _dash_findings(lines: Sequence[str], claimed: set[int], exists: Callable[[str], bool]
                   ) -> list[Found]:
    """pyright's and tsc ``--pretty``'s ``path:line:col - error: message``."""
    found: list[Found] = []
    for index, line in enumerate(lines):
        match = _DASH.match(line)
        if match is None or index in claimed:
            continue
        claimed.add(index)
        message = _joined([match["message"].strip(), *_continuation(lines, index, claimed)])
        found.append((index, Finding(match["path"].strip(), int(match["line"]),
                                     int(match["col"]), message, _severity(match["sev"]))))
    return found


def _paren_findings(lines: Sequence[str], claimed: set[int], exists: Callable[[str], bool]
                    ) -> list[Found]:
    """tsc's (and MSBuild's) ``path(line,col): error TS2322: message``."""
    found: list[Found] = []
    for index, line in enumerate(lines):
        match = _PAREN.match(line)
        if match is None or index in claimed:
            continue
        claimed.add(index)
        message = _joined([match["message"].strip(), *_continuation(lines, index, claimed)])
        found.append((index, Finding(match["path"].strip(), int(match["line"]),
                                     int(match["col"]), message, _severity(match["sev"]))))
    return found


def _stylish_findings(lines: Sequence[str], claimed: set[int], exists: Callable[[str], bool]
                      ) -> list[Found]:
    """eslint's default format: a file's path alone, then ``  line:col  error  message  rule``."""
    found: list[Found] = []
    current: str | None = None
    for index, line in enumerate(lines):
        if index in claimed:
            continue
        if _HEADER_PATH.match(line):
            current = line if exists(line) else None
            continue
        match = _STYLISH.match(line)
        if match is None or current is None:
            continue
        claimed.add(index)
        *words, rule = re.split(r"\s{2,}", match["rest"])
        message = f"{'  '.join(words)} ({rule})" if words and _RULE.match(rule) else match["rest"]
        found.append((index, Finding(current, int(match["line"]), int(match["col"]), message,
                                     _severity(match["sev"]))))
    return found


def _colon_findings(lines: Sequence[str], claimed: set[int], exists: Callable[[str], bool]
                    ) -> list[Found]:
    """``path:line[:col]: message``: ruff (concise), flake8, mypy, eslint (unix), compilers,
    Python warnings and pytest's ``--tb=line``. A mypy ``note`` joins the error above it at
    the same place; mypy's ``--pretty`` messages, wrapped over lines, are joined again."""
    found: list[Found] = []
    for index, line in enumerate(lines):
        match = _COLON.match(line)
        if match is None or index in claimed:
            continue
        message = match["message"].strip()
        if _PYTEST_FRAME_MESSAGE.match(message):
            continue  # pytest --tb=short: a frame of the traceback, not the error
        claimed.add(index)
        severity = ERROR
        word = _SEVERITY_WORD.match(message)
        eslint = _ESLINT_UNIX_END.search(message)
        if word is not None:
            severity = _severity(word["word"])
            message = message[word.end():]
        elif eslint is not None:
            severity = _severity(eslint["sev"])
            message = message[: eslint.start()] + f" ({eslint['rule']})"
        elif _PYTHON_WARNING.match(message):
            severity = WARNING
        if not _MYPY_CODE_END.search(message):
            message = _unwrapped(message, lines, index, claimed)
        path, number, col = match["path"], int(match["line"]), _number(match["col"])
        if severity == NOTICE:
            # A note explains the error above it; alone (gcc's "In function") it is context.
            if found and (found[-1][1].path, found[-1][1].line) == (path, number):
                at, previous = found[-1]
                found[-1] = (at, previous._replace(message=_joined([previous.message, message])))
            continue
        found.append((index, Finding(path, number, col, message, severity)))
    return found


def _unwrapped(message: str, lines: Sequence[str], index: int, claimed: set[int]) -> str:
    """mypy ``--pretty`` wraps a message over lines ending in its ``  [code]``: join them."""
    parts = [message]
    for following in range(index + 1, min(len(lines), index + 5)):
        line = lines[following]
        if not line.strip() or line[0].isspace() or following in claimed or _COLON.match(line):
            return message
        parts.append(line.strip())
        if _MYPY_CODE_END.search(line):
            claimed.update(range(index + 1, following + 1))
            return " ".join(parts)
    return message


class _Section(NamedTuple):
    name: str
    start: int
    lines: list[tuple[int, str]]


class _Summary(NamedTuple):
    """A line of pytest's short test summary: ``FAILED path::test - message``."""

    path: str
    test: str | None
    message: str

    @property
    def title(self) -> str:
        return f"{self.path}::{self.test}" if self.test else self.path


def _summary(line: str) -> _Summary | None:
    kind, space, rest = line.partition(" ")
    if kind not in ("FAILED", "ERROR") or not space or not rest or rest[0].isspace():
        return None
    node, _, message = rest.partition(" - ")
    path, _, test = node.partition("::")
    if not path or ":" in path:
        return None
    return _Summary(path, test or None, message.strip() or kind)


def _banner(line: str, fill: str) -> str | None:
    """The title of a pytest separator line (``==== FAILURES ====``), or None."""
    if not line.startswith(fill * 2) or not line.endswith(fill * 2):
        return None
    body = line.lstrip(fill).rstrip(fill)
    if len(body) < 3 or body[0] != " " or body[-1] != " ":
        return None
    return body[1:-1]


def _pytest_sections(lines: Sequence[str]) -> list[_Section]:
    """The ``____ test name ____`` sections of pytest's FAILURES and ERRORS parts."""
    sections: list[_Section] = []
    inside = False
    for index, line in enumerate(lines):
        banner = _banner(line, "=")
        if banner is not None:
            inside = banner in ("FAILURES", "ERRORS")
            continue
        if not inside:
            continue
        header = _banner(line, "_")
        if header is not None and not set(header) <= {"_", " "}:
            sections.append(_Section(header, index, []))
        elif sections:
            sections[-1].lines.append((index, line))
    return sections


def _section_key(name: str) -> str:
    for prefix in ("ERROR at setup of ", "ERROR at teardown of ", "ERROR collecting "):
        name = name.removeprefix(prefix)
    return name


def _test_symbol(test: str) -> str:
    """``TestCart::test_rate[2]`` -> ``TestCart.test_rate``: what to look for in the file."""
    return ".".join(part.split("[", 1)[0] for part in test.split("::"))


def _pytest_findings(lines: Sequence[str], claimed: set[int], exists: Callable[[str], bool]
                     ) -> list[Found]:
    """One finding per failed test: at the deepest line of the traceback in the repository,
    with the ``E`` lines as the message; from ``FAILED path::test`` alone at the test's
    ``def`` when the traceback is not in the output (``--tb=no``, or cut off)."""
    summaries: dict[str, list[tuple[int, _Summary]]] = {}
    for index, line in enumerate(lines):
        summary = _summary(line)
        if summary is not None:
            key = (summary.test or summary.path).replace("::", ".")
            summaries.setdefault(key, []).append((index, summary))
    found: list[Found] = []
    for section in _pytest_sections(lines):
        pending = summaries.get(_section_key(section.name), [])
        matched = pending[0] if pending else None
        finding = _section_finding(section, exists, matched[1] if matched else None)
        if finding is None:
            continue
        claimed.update(index for index, _ in section.lines)
        claimed.add(section.start)
        if matched is not None:
            pending.pop(0)
            claimed.add(matched[0])
        found.append((section.start, finding))
    for entries in summaries.values():
        for index, summary in entries:
            if index in claimed:
                continue
            claimed.add(index)
            symbol = _test_symbol(summary.test) if summary.test else None
            found.append((index, Finding(summary.path, None, None, summary.message, ERROR,
                                         summary.title, symbol)))
    return found


def _section_finding(section: _Section, exists: Callable[[str], bool],
                     summary: _Summary | None) -> Finding | None:
    frames: list[tuple[str, int]] = []
    blocks: list[list[str]] = []  # runs of ``E`` lines: the last one is the final error
    in_block = False
    after_frames: list[str] = []  # --tb=native: the exception's lines follow the last frame
    for _, line in section.lines:
        if _PYTEST_CAPTURED.match(line):
            break  # captured output follows: text the test printed, not its traceback
        frame = _PYTEST_LOCATION.match(line) or _TRACEBACK_FRAME.match(line)
        if frame is not None:
            frames.append((frame["path"], int(frame["line"])))
            after_frames = []
        elif line.strip() and not line[0].isspace():
            after_frames.append(line.strip())
        if line.startswith("E") and (len(line) == 1 or line[1].isspace()):
            if not in_block:
                blocks.append([])
            blocks[-1].append(line[1:])
            in_block = True
        else:
            in_block = False
    place = next(((path, number) for path, number in reversed(frames) if exists(path)), None)
    if place is None:
        return None
    error_lines = [line for line in (blocks[-1] if blocks else []) if line.strip()]
    if error_lines:
        margin = min(_indent(line) for line in error_lines)
        message = "\n".join(line[margin:].rstrip() for line in error_lines)
    elif after_frames and _EXCEPTION_LINE.match(after_frames[0]):
        message = "\n".join(after_frames)
    else:
        message = summary.message if summary is not None else section.name
    title = summary.title if summary is not None else section.name
    return Finding(place[0], place[1], None, message, ERROR, title)


BUILTIN_READERS = (_pytest_findings, _arrow_findings, _dash_findings, _paren_findings,
                   _stylish_findings, _colon_findings)


def builtin_findings(lines: Sequence[str], exists: Callable[[str], bool]) -> list[Finding]:
    """Every error the built-in readers recognise in ``lines``, in the order printed.

    Each output line belongs to at most one finding: the readers run from the most specific
    format to the most general, and a line one has taken is not read again.
    """
    claimed: set[int] = set()
    found: list[Found] = []
    for reader in BUILTIN_READERS:
        found += reader(lines, claimed, exists)
    return [finding for _, finding in sorted(found, key=lambda pair: pair[0])]
