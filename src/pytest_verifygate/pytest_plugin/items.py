"""The pytest side of a contract: the contract ``File`` collector and one ``GateItem`` per gate.

An item does not run its gate: the gates start together when the run begins (see
``session.py``), and each item waits for its own gate's result, then passes, fails with the
gate's classified failure, or skips with the reason (skipped and pending gates). A gate left
out because nothing it watches changed is an item too, skipped with that reason: a change that
no gate watches is not "no tests". What an item needs from the session is the ``GateSource``
protocol, found in the config's stash.

An item's name is the gate's name made safe for a node id (``names.item_name``: the same for
ordinary names); ``-k`` also matches the gate's own name.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_verifygate import codes
from pytest_verifygate.contract import Contract, Gate
from pytest_verifygate.names import role_marker
from pytest_verifygate.pytest_plugin.failure import failure_repr
from pytest_verifygate.runner.records import GateResult
from pytest_verifygate.selection import BY_CHANGES, Selection

if TYPE_CHECKING:
    from pytest_verifygate.report.model import GateEntry
    from pytest_verifygate.report.redact import Redactor


class GateSource(Protocol):
    """What the collector and the items need from the run's session."""

    contract: Contract
    selections: Sequence[Selection]
    item_names: Mapping[str, str]  # gate name -> item name
    declared_lines: Mapping[str, int]  # gate name -> its table's line in the contract (1-based)

    def result_for(self, name: str, *, again: bool = False) -> GateResult: ...

    def redactor(self) -> Redactor: ...


SOURCE_KEY = pytest.StashKey[GateSource]()
# Why a gate the run stopped before it finished did not pass (-x, --maxfail, a worker lost).
INTERRUPTED_REASON = "the run stopped (-x, --maxfail or Ctrl-C) before this gate finished"


class ContractFile(pytest.File):
    """The contract file as a collector: one ``GateItem`` per selected gate, and per gate left
    out by the change set (skipped), in file order."""

    def collect(self) -> Iterator[GateItem]:
        session = self.config.stash[SOURCE_KEY]
        for selection in session.selections:
            if selection.selected or selection.left_out_by == BY_CHANGES:
                yield GateItem.from_parent(self, name=session.item_names[selection.gate.name],
                                           gate=selection.gate, selection=selection)


class GateFailed(Exception):
    """A gate's result was ``failed``; carries the result for ``repr_failure``."""

    def __init__(self, result: GateResult, headline: str) -> None:
        super().__init__(headline)
        self.result = result
        self.headline = headline


class GateItem(pytest.Item):
    """One gate, selected or left out by the change set. A selected gate's outcome is the
    gate's: passed, failed, or skipped (also pending, and interrupted); the other is skipped."""

    def __init__(self, *, gate: Gate, selection: Selection, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate
        self.selection = selection
        self.gate_entry: GateEntry | None = None
        self.line = self.config.stash[SOURCE_KEY].declared_lines.get(gate.name, 1)
        self.extra_keyword_matches.add(gate.name)  # -k finds the name as the contract has it
        self.add_marker("verifygate")
        if gate.category is not None:
            self.add_marker(gate.category)
        for role in gate.roles or ():
            self.add_marker(role_marker(role))

    @property
    def runs(self) -> bool:
        """Whether the gate runs (it is selected), rather than being skipped unchanged."""
        return self.selection.selected

    def runtest(self) -> None:
        # The same properties, messages and reasons as ``verifygate run --junit`` writes.
        from pytest_verifygate.report.document import gate_entry
        from pytest_verifygate.report.junit import (
            failure_message,
            skip_message,
            unchanged_entry,
        )

        if not self.runs:
            # Stays in the report's not_selected, as ``verifygate run`` reports it.
            self._record_properties(unchanged_entry(self.gate.name, self.selection.reason))
            pytest.skip(self.selection.reason)
        session = self.config.stash[SOURCE_KEY]
        previous = self.gate_entry
        # Run again by a rerun plugin (pytest-rerunfailures): the gate runs again for real,
        # never a replay of the result it already had.
        result = session.result_for(self.gate.name, again=previous is not None)
        if previous is not None:
            result = after_rerun(result_from_entry(previous), result)
        entry = self.gate_entry = gate_entry(result, session.contract, session.redactor())
        # Shown from the report entry, not the raw result: JUnit XML and CI logs leave the
        # machine like the report does, so they get the same redaction of secrets.
        self._record_properties(entry)
        if entry["outcome"] == codes.FAILED and entry["code"] == codes.INTERRUPTED:
            # Cut short (-x, --maxfail): not a failure of its own; the report says interrupted.
            pytest.skip(f"{codes.INTERRUPTED}: {entry.get('reason') or INTERRUPTED_REASON}")
        if entry["outcome"] == codes.FAILED:
            raise GateFailed(result_from_entry(entry),
                             failure_message(entry, self.gate.timeout_seconds))
        if entry["outcome"] == codes.PASSED and entry.get("output_tail"):
            # A passing gate's output (its end) where pytest users look for a passing test's:
            # -rP's "Captured stdout call", JUnit's <system-out> with junit_logging=all.
            from pytest_verifygate.text import terminal_safe

            self.add_report_section("call", "stdout", terminal_safe(str(entry["output_tail"])))
        if entry["outcome"] in (codes.SKIPPED, codes.PENDING):
            # The session's makereport hook moves the location to the contract.
            pytest.skip(skip_message(entry))

    def _record_properties(self, entry: Mapping[str, Any]) -> None:
        """The ``verifygate.*`` properties, for JUnit families that allow them in a testcase.

        pytest writes every user property into the testcase; its default family, xunit2
        (``junit-10.xsd``), forbids testcase properties, which is why pytest warns about
        ``record_property`` there. Under xunit2 the JSON report (``--verify-report``) has them.
        """
        from pytest_verifygate.report.junit import has_testcase_properties, properties

        try:
            family = str(self.config.getini("junit_family"))
        except ValueError:  # pytest's junitxml plugin is disabled: nothing reads the family
            family = "xunit1"
        if has_testcase_properties(family):
            # Fresh on a rerun: the properties describe the result this item reports.
            self.user_properties[:] = [(key, value) for key, value in self.user_properties
                                       if not key.startswith("verifygate.")]
            self.user_properties.extend(properties(entry))

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> Any:
        if not isinstance(excinfo.value, GateFailed):
            return super().repr_failure(excinfo, style=style)
        return failure_repr(
            excinfo.value.result,
            excinfo.value.headline,
            path=str(self.path),
            lineno=self.line,
            verbosity=self.config.get_verbosity(),
        )

    def reportinfo(self) -> tuple[Path, int, str]:
        # pytest's line numbers are 0-based here, as a function's are.
        return self.path, self.line - 1, f"gate {self.gate.name}"


def after_rerun(before: GateResult, again: GateResult) -> GateResult:
    """The result of a gate run again by a rerun plugin: every attempt counted, and flaky
    when it passed this time after failing before."""
    return again._replace(
        attempts=before.attempts + again.attempts,
        flaky=again.outcome == codes.PASSED and (before.failed or again.flaky or before.flaky),
    )


def result_from_entry(entry: Mapping[str, Any]) -> GateResult:
    """A ``GateResult`` back from its report entry (what an xdist worker sends)."""
    values = {key: value for key, value in entry.items() if key in GateResult._fields}
    values["command"] = tuple(values.get("command") or ())
    return GateResult(**values)


def suite_twice(items: Sequence[pytest.Item], contract_nodeid: str) -> list[str]:
    """A notice when a collected gate runs pytest and the same run collects tests too (the
    suite would run twice), naming both ways out; none otherwise."""
    import shlex

    tests = any(not isinstance(item, GateItem) for item in items)
    twice = [item for item in items if isinstance(item, GateItem) and any(
        os.path.basename(word) in ("pytest", "py.test") for word in (
            item.gate.command.split() if isinstance(item.gate.command, str)
            else item.gate.command))]
    if not tests or not twice:
        return []
    return [f"gate {twice[0].gate.name!r} runs pytest, and this run collects tests too: the "
            f"suite runs twice. Collect only the gates (pytest {contract_nodeid} "
            f"--verify-contract), or leave the gate out here (--deselect "
            f"{shlex.quote(twice[0].nodeid)})"]
