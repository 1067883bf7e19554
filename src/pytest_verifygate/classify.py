"""Failure codes: what kind of failure a gate had, so people and orchestrators know what to do.

Owns the stable code names and an ordered rule table. The exit status and signal are looked at
first; then anchored, per-tool patterns over stdout and stderr together (ANSI stripped). Every
pattern is anchored to the start of a line and names a specific tool's message, so ordinary test
output ("not found", "no tests found" inside an assertion) stays ``command_failed``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

COMMAND_FAILED = "command_failed"
MISSING_SCRIPT = "missing_script"
MISSING_MAKE_TARGET = "missing_make_target"
NO_TEST_FILES = "no_test_files"
UNSUPPORTED_FORMAT = "unsupported_format"
SETUP_OR_BOOTSTRAP_ISSUE = "setup_or_bootstrap_issue"
SEQUENCE_ISSUE = "sequence_issue"
TIMEOUT = "timeout"
INTERRUPTED = "interrupted"

CODES = (
    COMMAND_FAILED,
    MISSING_SCRIPT,
    MISSING_MAKE_TARGET,
    NO_TEST_FILES,
    UNSUPPORTED_FORMAT,
    SETUP_OR_BOOTSTRAP_ISSUE,
    SEQUENCE_ISSUE,
    TIMEOUT,
    INTERRUPTED,
)
# Codes that ``on_missing = "skip"`` turns into a skip, and that a retry cannot change.
MISSING_CODES = frozenset({MISSING_SCRIPT, MISSING_MAKE_TARGET, NO_TEST_FILES})
NOT_RETRIED = MISSING_CODES | {UNSUPPORTED_FORMAT, INTERRUPTED}

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def strip_ansi(text: str) -> str:
    """Remove ANSI colour and cursor sequences."""
    return _ANSI.sub("", text)


@dataclass(frozen=True)
class Failure:
    """What the classifier knows about one failed run of a gate."""

    exit_code: int | None
    signal: int | None
    output: str
    argv: Sequence[str]
    cwd: Path


@dataclass(frozen=True)
class Rule:
    """Output matching ``pattern`` (multiline, anchored) means ``code`` when ``accept`` agrees."""

    code: str
    tool: str
    pattern: re.Pattern[str]
    accept: Callable[[re.Match[str], Failure], bool] | None = None


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.MULTILINE)


def _package_not_local(match: re.Match[str], failure: Failure) -> bool:
    """A missing module is a setup problem only if it is not one of the project's own."""
    name = match.group("module")
    if name.startswith((".", "/")):
        return False
    top = name.split(".")[0].split("/")[0]
    if not top or top.startswith("@"):
        return True
    local = (failure.cwd / top, failure.cwd / f"{top}.py", failure.cwd / "src" / top)
    return not any(path.exists() for path in local)


def _node_package(match: re.Match[str], failure: Failure) -> bool:
    name = match.group("module")
    return not name.startswith((".", "/", "~")) and not re.match(r"[A-Za-z]:[\\/]", name)


RULES: tuple[Rule, ...] = (
    # Package-manager scripts that do not exist.
    Rule(MISSING_SCRIPT, "npm", _rx(r"^npm (?:ERR!|error) Missing script: \"?[^\"\n]+\"?")),
    Rule(MISSING_SCRIPT, "pnpm", _rx(r"^\s*ERR_PNPM_NO_SCRIPT\b")),
    Rule(MISSING_SCRIPT, "pnpm", _rx(r"^\s*ERR_PNPM_RECURSIVE_RUN_NO_SCRIPT\b")),
    Rule(MISSING_SCRIPT, "yarn", _rx(r"^error Command \"[^\"\n]+\" not found\.$")),
    Rule(MISSING_SCRIPT, "yarn", _rx(r"^Usage Error: Couldn't find a script named \"[^\"\n]+\"")),
    Rule(MISSING_SCRIPT, "bun", _rx(r"^error: Script not found \"[^\"\n]+\"")),
    # make: a target named on the command line with no rule (a missing prerequisite file,
    # "needed by ...", is an ordinary build failure).
    Rule(
        MISSING_MAKE_TARGET,
        "make",
        _rx(r"^g?make(?:\[\d+\])?: \*\*\* No rule to make target [`'‘][^'’\n]+['’]\.\s+Stop\.$"),
    ),
    # Test runners that found no tests.
    Rule(NO_TEST_FILES, "jest", _rx(r"^No tests found, exiting with code 1")),
    Rule(NO_TEST_FILES, "vitest", _rx(r"^No test files found, exiting with code 1")),
    Rule(NO_TEST_FILES, "mocha", _rx(r"^Error: No test files found")),
    Rule(NO_TEST_FILES, "pytest", _rx(r"^=+ no tests ran in [\d.]+s =+$")),
    # Tools and dependencies that are not there.
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "sh", _rx(r"^(?:/bin/)?(?:ba|da|z)?sh: (?:\d+: |line \d+: )?"
                                             r"[^:\n]+: (?:command )?not found$")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "env", _rx(r"^(?:/usr/bin/)?env: [‘'\"]?[^:\n]+[’'\"]?: "
                                              r"No such file or directory$")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "python", _rx(r"^\S*python[\d.]*: No module named \S+")),
    Rule(
        SETUP_OR_BOOTSTRAP_ISSUE,
        "python",
        _rx(r"^(?:E\s+)?ModuleNotFoundError: No module named '(?P<module>[\w.]+)'"),
        _package_not_local,
    ),
    Rule(
        SETUP_OR_BOOTSTRAP_ISSUE,
        "node",
        _rx(r"^(?:Uncaught )?Error: Cannot find module '(?P<module>[^'\n]+)'"),
        _node_package,
    ),
    Rule(
        SETUP_OR_BOOTSTRAP_ISSUE,
        "node",
        _rx(r"^(?:Uncaught )?Error \[ERR_MODULE_NOT_FOUND\]: Cannot find package "
            r"'(?P<module>[^'\n]+)'"),
        _node_package,
    ),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "node", _rx(r"^Error: spawn \S+ ENOENT$")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "pnpm",
         _rx(r"^\s*ERR_PNPM_RECURSIVE_EXEC_FIRST_FAIL\s+Command \"[^\"\n]+\" not found")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "npx", _rx(r"^npm (?:ERR!|error) could not determine "
                                              r"executable to run$")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "cargo", _rx(r"^error: no such command: `[^`\n]+`")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "go", _rx(r"^go: (?:go\.mod file not found|cannot find "
                                             r"main module)")),
    Rule(SETUP_OR_BOOTSTRAP_ISSUE, "uv", _rx(r"^error: Failed to spawn: `[^`\n]+`")),
)

_PYTEST_NAMES = re.compile(r"(?:^|[/\\])(?:py\.test|pytest)(?:-[\d.]+)?$")
_ARTIFACT_TESTS = frozenset({"-f", "-s", "-e", "-d"})


def _program_argv(argv: Sequence[str]) -> list[str]:
    """The argv of the program itself; for ``sh -c "script"`` the script's words."""
    if len(argv) == 3 and argv[1] == "-c" and Path(argv[0]).name in ("sh", "bash", "dash"):
        try:
            return shlex.split(argv[2])
        except ValueError:
            return []
    return list(argv)


def _runs_pytest(argv: Sequence[str]) -> bool:
    if not argv:
        return False
    if _PYTEST_NAMES.search(argv[0]):
        return True
    return len(argv) >= 3 and "python" in Path(argv[0]).name and argv[1:3] == ["-m", "pytest"]


def _artifact_check(argv: Sequence[str]) -> bool:
    """``test -f dist/x`` or ``[ -s build/y ]``: checking that an earlier step built something."""
    if not argv or Path(argv[0]).name not in ("test", "["):
        return False
    return len(argv) >= 3 and argv[1] in _ARTIFACT_TESTS


def classify(failure: Failure) -> str:
    """The failure code of a gate that ran and failed (not a timeout or an interruption)."""
    if failure.signal is not None:
        return COMMAND_FAILED
    if failure.exit_code in (126, 127):
        return SETUP_OR_BOOTSTRAP_ISSUE
    text = strip_ansi(failure.output)
    program = _program_argv(failure.argv)
    if failure.exit_code == 5 and _runs_pytest(program):
        return NO_TEST_FILES
    for rule in RULES:
        for match in rule.pattern.finditer(text):
            if rule.accept is None or rule.accept(match, failure):
                return rule.code
    if failure.exit_code == 1 and not text.strip() and _artifact_check(program):
        return SEQUENCE_ISSUE
    return COMMAND_FAILED
