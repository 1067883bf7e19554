"""The contract as a pytest ``File``, one ``GateItem`` per gate (waiting for the result of the
gate the session started), and how a failed gate reads in pytest.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_verifygate import codes
from pytest_verifygate.ansi import terminal_safe
from pytest_verifygate.item_names import role_marker
from pytest_verifygate.report.document import gate_entry
from pytest_verifygate.report.junit import (
    failure_message,
    failure_text,
    has_testcase_properties,
    properties,
    skip_message,
    unchanged_entry,
)
from pytest_verifygate.selection import BY_CHANGES, Selection

if TYPE_CHECKING:
    from pytest_verifygate.contract import Contract
    from pytest_verifygate.engine import Plan
    from pytest_verifygate.git.set_aside import SetAside
    from pytest_verifygate.report.model import GateEntry
    from pytest_verifygate.report.redact import Redactor
    from pytest_verifygate.runner.records import GateResult


class GateSession(Protocol):
    """What the items need of the run behind them (``session.VerifyGateSession``)."""

    plan: Plan
    contract: Contract
    item_names: dict[str, str]
    declared_lines: dict[str, int]

    @property
    def redactor(self) -> Redactor: ...

    def result_for(self, name: str, *, again: bool = False) -> GateResult: ...


SESSION_KEY: pytest.StashKey[GateSession] = pytest.StashKey()
# What a commit's check set aside before conftest.py was imported, and what it had to say.
ASIDE_KEY: pytest.StashKey[tuple[SetAside | None, list[str]]] = pytest.StashKey()
INTERRUPTED_REASON = "the run stopped (-x, --maxfail or Ctrl-C) before this gate finished"


class ContractFile(pytest.File):
    """One ``GateItem`` per selected gate, and per gate left out by the change set (skipped:
    a change no gate watches is not "no tests"), in file order."""

    def collect(self) -> Iterator[GateItem]:
        session = self.config.stash[SESSION_KEY]
        for selection in session.plan.selections:
            if selection.selected or selection.left_out_by == BY_CHANGES:
                yield GateItem.from_parent(self, name=session.item_names[selection.gate.name],
                                           selection=selection)


class GateFailed(Exception):
    """A gate failed; carries its report entry for ``repr_failure``."""

    def __init__(self, entry: GateEntry, headline: str) -> None:
        super().__init__(headline)
        self.entry = entry


class GateItem(pytest.Item):
    """One gate: passed, failed or skipped as the gate was (pending, interrupted and
    unchanged gates are skips)."""

    def __init__(self, *, selection: Selection, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.selection = selection
        self.gate = gate = selection.gate
        self.gate_entry: GateEntry | None = None
        self.line = self.config.stash[SESSION_KEY].declared_lines.get(gate.name, 1)
        # The item's name is made safe for a node id; -k finds the gate's own.
        self.extra_keyword_matches.add(gate.name)
        self.add_marker("verifygate")
        if gate.category is not None:
            self.add_marker(gate.category)
        for role in gate.roles or ():
            self.add_marker(role_marker(role))

    def runtest(self) -> None:
        # The same properties, messages and reasons as ``verifygate run --junit`` writes.
        if not self.selection.selected:
            self._record_properties(unchanged_entry(self.gate.name, self.selection.reason))
            pytest.skip(self.selection.reason)
        session = self.config.stash[SESSION_KEY]
        previous = self.gate_entry
        # Run again by pytest-rerunfailures: the gate runs again, never a replay.
        result = session.result_for(self.gate.name, again=previous is not None)
        if previous is not None:
            # Every attempt counts, and a pass after a failure is flaky.
            flaky = result.outcome == codes.PASSED and (
                previous["outcome"] == codes.FAILED or result.flaky or previous.get("flaky"))
            result = result._replace(attempts=previous["attempts"] + result.attempts,
                                     flaky=bool(flaky))
        entry = self.gate_entry = gate_entry(result, session.contract, session.redactor)
        # From the report entry, not the raw result: JUnit and CI logs leave the machine like
        # the report, with the same redaction of secrets.
        self._record_properties(entry)
        if entry["outcome"] == codes.FAILED and entry["code"] == codes.INTERRUPTED:
            # Cut short (-x, --maxfail): not a failure of its own; the report says interrupted.
            pytest.skip(f"{codes.INTERRUPTED}: {entry.get('reason') or INTERRUPTED_REASON}")
        if entry["outcome"] == codes.FAILED:
            raise GateFailed(entry, failure_message(entry, self.gate.timeout_seconds))
        if entry["outcome"] == codes.PASSED and entry["output_tail"]:
            # Where a passing test's output is shown: -rP, JUnit's <system-out>.
            self.add_report_section("call", "stdout", terminal_safe(entry["output_tail"]))
        if entry["outcome"] in (codes.SKIPPED, codes.PENDING):
            pytest.skip(skip_message(entry))

    def _record_properties(self, entry: GateEntry) -> None:
        """The ``verifygate.*`` properties, for JUnit families that allow them in a testcase
        (pytest writes every user property there; xunit2 forbids them)."""
        try:
            family = str(self.config.getini("junit_family"))
        except ValueError:  # pytest's junitxml plugin is disabled: nothing reads the family
            family = "xunit1"
        if has_testcase_properties(family):
            # Fresh on a rerun: the properties describe the result this item reports.
            self.user_properties[:] = [(key, value) for key, value in self.user_properties
                                       if not key.startswith("verifygate.")]
            self.user_properties.extend(properties(entry))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> Any:
        if not isinstance(excinfo.value, GateFailed):
            return super().repr_failure(excinfo, style=style)
        return failure_repr(excinfo.value.entry, str(excinfo.value), path=str(self.path),
                            lineno=self.line, verbosity=self.config.get_verbosity())

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.line - 1, f"gate {self.gate.name}"


def failure_repr(entry: GateEntry, head: str, *, path: str, verbosity: int,
                 lineno: int = 1) -> Any:
    """The failure as pytest shows it: the headline, then as much output as the verbosity
    asks for.

    An exception-style repr, so that the headline becomes the short summary line and JUnit's
    ``message=`` and survives xdist. pytest has no public constructor for one: this is the
    package's one use of pytest's private ``_pytest._code.code`` (``test_plugin.py`` fails
    loudly if it changes).
    """
    from _pytest._code.code import ExceptionChainRepr, ReprFileLocation, ReprTracebackNative

    # Gate output is untrusted: no escape sequence, control or bidi character reaches the
    # terminal (an OSC 52 clipboard write, a query answered into the input).
    head = terminal_safe(head)
    text = terminal_safe(failure_text(entry, head, verbosity=verbosity))
    crash = ReprFileLocation(path=path, lineno=lineno, message=head)
    return ExceptionChainRepr([(ReprTracebackNative([text + "\n"]), crash, None)])
