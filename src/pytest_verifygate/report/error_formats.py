"""The built-in readers of the tools' error formats the GitHub Actions docs page lists: a failed
gate's output read back as findings.

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
    """One error as a tool printed it; what an annotation hook implementation returns."""

    path: str
    line: int | None
    col: int | None
    message: str
    severity: str = ERROR
    title: str | None = None
    symbol: str | None = None


_SEVERITY_WORD = re.compile(
    r"^(?P<word>error|warning|note|info|information|hint|fatal error)(?:\[[^\]]*\])?:\s*",
    re.IGNORECASE)
_ESLINT_UNIX_END = re.compile(r"\s*\[(?P<sev>Error|Warning)/(?P<rule>[^\]]*)\]$")
_PYTHON_WARNING = re.compile(r"^\w*Warning\b")
_PYTEST_FRAME_MESSAGE = re.compile(r"^in [\w<>.]+$")
_MYPY_CODE_END = re.compile(r"\s\s\[[a-z][a-z0-9-]*\]$")

# path:line[:col]: message (ruff's concise format, flake8, mypy, eslint's unix format,
# compilers, Python warnings, pytest's --tb=line)
_COLON = re.compile(r"^\s*(?P<path>[^\s:][^:]*?):(?P<line>\d+)(?::(?P<col>\d+))?:\s+"
                    r"(?P<message>\S.*)$")
# ruff's and rustc's " --> path:line:col" under a "CODE message" line
_ARROW = re.compile(r"^\s*-->\s+(?P<path>.+?):(?P<line>\d+)(?::(?P<col>\d+))?\s*$")
# pyright's and tsc --pretty's "path:line:col - error: message", tsc's (and MSBuild's)
# "path(line,col): error TS2322: message"; both may go on in deeper indented lines
_PRETTY = (
    re.compile(r"^\s*(?P<path>[^\s:][^:]*?):(?P<line>\d+):(?P<col>\d+) - "
               r"(?P<sev>error|warning|information|info|hint)\b:?\s*(?P<message>.*)$"),
    re.compile(r"^\s*(?P<path>[^\s(][^(]*?)\((?P<line>\d+),(?P<col>\d+)\): "
               r"(?P<sev>error|warning|message|info)\b:?\s*(?P<message>.*)$"),
)
# eslint's default (stylish) format: a file's path alone, then "  line:col  error  message  rule"
_STYLISH = re.compile(r"^\s+(?P<line>\d+):(?P<col>\d+)\s+(?P<sev>error|warning)\s+(?P<rest>\S.*)$")
_RULE = re.compile(r"^[\w@/.-]+$")
_HEADER_PATH = re.compile(r"^(?:[A-Za-z]:)?[^\s:]\S*$")

_PYTEST_PART = re.compile(r"^={2,} (?P<title>.+?) ={2,}$")
_PYTEST_TEST = re.compile(r"^_{2,} (?P<name>.*[^_ ].*) _{2,}$")
_PYTEST_SUMMARY = re.compile(r"^(?P<kind>FAILED|ERROR) (?P<path>[^\s:][^:]*?)"
                             r"(?:::(?P<test>.+?))?(?: - (?P<message>.*))?$")
_PYTEST_CAPTURED = re.compile(r"^-+ Captured .* -+$")
_PYTEST_LOCATION = re.compile(r"^(?P<path>[^\s:][^:]*?):(?P<line>\d+):(?: (?P<what>.*))?$")
_TRACEBACK_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)')
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failed)\b")

Found = tuple[int, Finding]  # the output line a finding starts at, for the tools' own order
Reader = Callable[[Sequence[str], set[int], Callable[[str], bool]], list[Found]]


def _severity(word: str) -> str:
    word = word.lower()
    if word.startswith(("error", "fatal")):
        return ERROR
    return WARNING if word == "warning" else NOTICE


def _joined(parts: Iterable[str]) -> str:
    return "\n".join(part for part in parts if part)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _arrow_findings(lines: Sequence[str], claimed: set[int], exists: Callable[[str], bool]
                    ) -> list[Found]:
    found: list[Found] = []
    for index, line in enumerate(lines):
        match = _ARROW.match(line)
        if match is None or index == 0 or {index, index - 1} & claimed:
            continue
        header = lines[index - 1].strip()
        if not header:
            continue
        claimed.update((index - 1, index))
        helps = []
        for following in lines[index + 1:index + 40]:
            text = following.strip().removeprefix("= ")
            if not text or _ARROW.match(following):
                break
            if text.startswith("help: "):
                helps.append(text)
        word = _SEVERITY_WORD.match(header)
        severity = ERROR if word is None else _severity(word["word"])
        col = int(match["col"]) if match["col"] else None
        found.append((index - 1, Finding(match["path"], int(match["line"]), col,
                                         _joined([header, *helps]), severity)))
    return found


def _pretty_findings(lines: Sequence[str], claimed: set[int], exists: Callable[[str], bool]
                     ) -> list[Found]:
    found: list[Found] = []
    for pattern in _PRETTY:
        for index, line in enumerate(lines):
            match = pattern.match(line)
            if match is None or index in claimed:
                continue
            claimed.add(index)
            parts = [match["message"].strip()]
            for following in range(index + 1, min(len(lines), index + 1 + MAX_MESSAGE_LINES)):
                more = lines[following]
                if not more.strip() or _indent(more) <= _indent(line) or following in claimed:
                    break
                claimed.add(following)
                parts.append(more.strip())
            found.append((index, Finding(match["path"].strip(), int(match["line"]),
                                         int(match["col"]), _joined(parts),
                                         _severity(match["sev"]))))
    return found


def _stylish_findings(lines: Sequence[str], claimed: set[int], exists: Callable[[str], bool]
                      ) -> list[Found]:
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
    """A mypy ``note`` joins the error above it at the same place."""
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
        path, number = match["path"], int(match["line"])
        if severity == NOTICE:
            # A note explains the error above it; alone (gcc's "In function") it is context.
            if found and (found[-1][1].path, found[-1][1].line) == (path, number):
                at, previous = found[-1]
                found[-1] = (at, previous._replace(message=_joined([previous.message, message])))
            continue
        col = int(match["col"]) if match["col"] else None
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


def _pytest_findings(lines: Sequence[str], claimed: set[int], exists: Callable[[str], bool]
                     ) -> list[Found]:
    """One finding per failed test: at the deepest traceback line in the repository, the ``E``
    lines as message; else (``--tb=no``, or cut off) at the ``def`` of ``FAILED path::test``."""
    summaries: dict[str, list[Found]] = {}  # by test name: a test's file and line are unknown
    sections: list[tuple[int, str, list[str]]] = []  # in FAILURES and ERRORS: start, name, lines
    inside = False
    for index, line in enumerate(lines):
        summary = _PYTEST_SUMMARY.match(line)
        if summary is not None:
            path, test = summary["path"], summary["test"]
            message = (summary["message"] or "").strip() or summary["kind"]
            # TestCart::test_rate[2] is looked for as TestCart.test_rate in the file
            symbol = ".".join(part.split("[", 1)[0] for part in test.split("::")) if test else None
            alone = Finding(path, None, None, message, ERROR, f"{path}::{test}" if test else path,
                            symbol)
            summaries.setdefault((test or path).replace("::", "."), []).append((index, alone))
        part = _PYTEST_PART.match(line)
        header = _PYTEST_TEST.match(line)
        if part is not None:
            inside = part["title"] in ("FAILURES", "ERRORS")
        elif inside and header is not None:
            sections.append((index, header["name"], []))
        elif inside and sections:
            sections[-1][2].append(line)
    found: list[Found] = []
    for start, name, body in sections:
        key = name
        for prefix in ("ERROR at setup of ", "ERROR at teardown of ", "ERROR collecting "):
            key = key.removeprefix(prefix)
        pending = summaries.get(key, [])
        finding = _test_finding(name, body, exists, pending[0][1] if pending else None)
        if finding is None:
            continue
        claimed.update(range(start, start + 1 + len(body)))
        if pending:
            claimed.add(pending.pop(0)[0])
        found.append((start, finding))
    for index, finding in sorted(pair for pairs in summaries.values() for pair in pairs):
        if index not in claimed:
            claimed.add(index)
            found.append((index, finding))
    return found


def _test_finding(name: str, body: list[str], exists: Callable[[str], bool],
                  summary: Finding | None) -> Finding | None:
    frames: list[tuple[str, int]] = []
    blocks: list[list[str]] = []  # runs of ``E`` lines: the last one is the final error
    after_frames: list[str] = []  # --tb=native: the exception's lines follow the last frame
    in_block = False
    for line in body:
        if _PYTEST_CAPTURED.match(line):
            break  # captured output follows: text the test printed, not its traceback
        frame = _PYTEST_LOCATION.match(line) or _TRACEBACK_FRAME.match(line)
        if frame is not None:
            frames.append((frame["path"], int(frame["line"])))
            after_frames = []
        elif line.strip() and not line[0].isspace():
            after_frames.append(line.strip())
        is_error = line.startswith("E") and (len(line) == 1 or line[1].isspace())
        if is_error and not in_block:
            blocks.append([])
        if is_error:
            blocks[-1].append(line[1:])
        in_block = is_error
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
        message = summary.message if summary is not None else name
    title = summary.title if summary is not None and summary.title else name
    return Finding(place[0], place[1], None, message, ERROR, title)


# From the most specific format to the most general.
BUILTIN_READERS: tuple[Reader, ...] = (_pytest_findings, _arrow_findings, _pretty_findings,
                                       _stylish_findings, _colon_findings)


def builtin_findings(lines: Sequence[str], exists: Callable[[str], bool]) -> list[Finding]:
    """Every error the built-in readers recognise in ``lines``, in the order printed; each
    line belongs to at most one finding."""
    claimed: set[int] = set()
    found: list[Found] = []
    for reader in BUILTIN_READERS:
        found += reader(lines, claimed, exists)
    return [finding for _, finding in sorted(found, key=lambda pair: pair[0])]
