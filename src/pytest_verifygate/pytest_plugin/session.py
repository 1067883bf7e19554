"""The pytest run with ``--verify-contract``: a ``VerifyGateSession`` plugin that prepares the
run, starts the gates once pytest knows its items, hands each item its result and reports.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
from collections.abc import Generator, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_verifygate import codes, engine, option_checks
from pytest_verifygate.contract import posix_relative
from pytest_verifygate.engine import prepare
from pytest_verifygate.git.changes import ChangeSet
from pytest_verifygate.item_names import item_names, role_marker
from pytest_verifygate.notices import Notices, collecting
from pytest_verifygate.plugins import register_plugins
from pytest_verifygate.pytest_plugin.declared import declared_lines
from pytest_verifygate.pytest_plugin.items import (
    ASIDE_KEY,
    INTERRUPTED_REASON,
    ContractFile,
    GateItem,
)
from pytest_verifygate.pytest_plugin.options import output_paths, read_options
from pytest_verifygate.report.redact import Redactor, redactor_for
from pytest_verifygate.report.terminal import (
    Styled,
    closing_summary,
    table_lines,
    verdict_line,
    verdict_style,
)
from pytest_verifygate.runner.records import GateResult, result_from_entry
from pytest_verifygate.signals import Interruptible
from pytest_verifygate.state.outputs import remember_outputs
from pytest_verifygate.state.storage import make_private_dir, new_log_dir

if TYPE_CHECKING:
    from pytest_verifygate.report.github import CommandStop
    from pytest_verifygate.report.model import Report
    from pytest_verifygate.runner.records import GatePlan
    from pytest_verifygate.runner.scheduler import GateRunner
    from pytest_verifygate.selection import Selection

# Where the controller puts what its workers need (in ``workerinput``).
WORKERINPUT_KEY = "verifygate"
# The attribute of a ``TestReport`` carrying the gate's report entry (basic types only).
REPORT_ATTRIBUTE = "verifygate"
DESELECTED_REASON = "deselected in this pytest run (-k, -m, --lf, --deselect or node ids)"


class VerifyGateSession:
    """One pytest run with ``--verify-contract``: the plan, the runner, the gate results
    received, and the report."""

    def __init__(self, config: pytest.Config) -> None:
        # An xdist worker takes its controller's change set, roles and phase: workers must
        # collect the same items.
        self.config = config
        self.options = read_options(config)
        request = self.options.request
        shared = getattr(config, "workerinput", {}).get(WORKERINPUT_KEY)
        self.shared_log_dir: Path | None = None
        if shared is not None:
            request = request._replace(contract=config.rootpath / shared["contract"],
                                       changes=ChangeSet.from_dict(shared["changes"]),
                                       role=tuple(shared["roles"]), phase=shared["phase"])
            self.shared_log_dir = Path(shared["log_dir"])
        # A commit's check sees the work tree as the commit records it (docs: pre-commit and git
        # hooks), from before anything is read to the end of the gates; xdist's controller
        # sets it up for its workers.
        self.interruptible = Interruptible(keep_others=True)  # pytest keeps its own SIGINT
        # SIGTERM, SIGHUP, SIGQUIT end the session like Ctrl-C, from before work is set aside.
        self.interruptible.__enter__()
        self.aside, self.aside_lines = config.stash.get(ASIDE_KEY, (None, []))
        self.aside_stack = contextlib.ExitStack()
        if self.aside is not None:
            self.aside_stack.callback(self.aside.close)
        self.errors: list[str] = []
        request = request._replace(work_set_aside=self.aside is not None or shared is not None)
        try:
            self.plan = plan = prepare(request)
        except BaseException:
            self.aside_stack.close()
            self.interruptible.__exit__()
            raise
        self.contract = contract = plan.contract
        register_plugins(contract, config.pluginmanager)  # the contract's, under pytest too
        self.item_names = item_names(gate.name for gate in contract.gates)  # gate -> item name
        self.declared_lines = declared_lines(contract)
        self.is_worker = hasattr(config, "workerinput")
        self.annotate = option_checks.github_annotations(
            config.getoption("verify_annotations"), os.environ)
        self.contract_path = _pytest_view(contract.path, config.rootpath)
        self.contract_nodeid = posix_relative(self.contract_path, config.rootpath)
        self.forced_paths: frozenset[Path] = frozenset()
        self.runner: GateRunner | None = None
        self.runner_names: frozenset[str] = frozenset()
        self.started = False
        self.session: pytest.Session | None = None
        self.collected_names: list[str] | None = None
        self.collected_tests = False  # items that are not gates: the user's own tests
        self.entries: dict[str, dict[str, Any]] = {}
        self.results: list[GateResult] | None = None
        self.report: Report | None = None
        self.report_path: str | None = None  # named in the summary only once written
        self.annotations: list[str] = []  # GitHub's, for the terminal summary
        self.messages: list[str] = []
        self.notices = Notices()  # what the run found (state files, logs): shown once
        self.command_stop: CommandStop | None = None
        # Markers registered before collection, so --strict-markers accepts what items carry.
        for category in ("unit", "integration"):
            config.addinivalue_line("markers", f"{category}: verify contract gates with "
                                    f"category = \"{category}\"")
        for role in sorted({role for gate in contract.gates for role in gate.roles or ()}):
            config.addinivalue_line("markers", f"{role_marker(role)}: verify contract gates "
                                    f"for role {role!r}")
        self.arrange_collection()

    def arrange_collection(self) -> None:
        """Have the contract collected exactly once: as named (``verify.toml::lint``), through
        a directory argument (its directories let past ``norecursedirs`` and ``--ignore``), or
        else added as an argument."""
        rootpath = self.config.rootpath
        if not self.contract_path.is_relative_to(rootpath):
            # Node ids are relative to the rootdir; a contract outside it would get none.
            raise pytest.UsageError(
                f"the contract {self.contract.path} is outside pytest's rootdir {rootpath}: "
                "run pytest from the project root, or pass --rootdir=<project root>"
            )
        invocation_dir = self.config.invocation_params.dir
        argument_paths = [
            Path(os.path.abspath(invocation_dir / arg.split("::")[0])) for arg in self.config.args
        ]
        if self.contract_path in argument_paths:
            return
        for argument in argument_paths:
            if argument.is_dir() and self.contract_path.is_relative_to(argument):
                between = [parent for parent in self.contract_path.parents
                           if parent.is_relative_to(argument) and parent != argument]
                self.forced_paths = frozenset([self.contract_path, *between])
                return
        self.config.args.append(str(self.contract_path))

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        return False if collection_path in self.forced_paths else None

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> ContractFile | None:
        if file_path == self.contract_path or (
            file_path.name == self.contract_path.name and file_path.samefile(self.contract.path)
        ):
            return ContractFile.from_parent(parent, path=file_path)
        return None

    def pytest_report_header(self) -> list[str]:
        said, self.aside_lines = self.aside_lines, []
        return [f"verifygate: {self.contract_nodeid}: {len(self.plan.selected)} of "
                f"{len(self.plan.selections)} gate(s) selected (changes: "
                f"{self.plan.changes.describe()})",
                *(f"verifygate: {line}" for line in [*said, *self.plan.warnings])]

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        if not self.is_worker and self.annotate:
            from pytest_verifygate.report.github import CommandStop

            self.command_stop = CommandStop.on_terminal(self.config)  # test output isn't ours

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session: pytest.Session) -> Generator[None, object, object]:
        try:
            return (yield)
        except BaseException:
            # Cut short: pytest still calls collection_finish, but what would have been
            # collected is unknown: every selected gate counts (interrupted).
            self.collected_names = None
            raise

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected_names = list(dict.fromkeys(
            item.gate.name for item in session.items if isinstance(item, GateItem)))
        self.collected_tests = any(not isinstance(item, GateItem) for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = {
            "contract": self.contract_nodeid,
            "changes": self.plan.changes.to_dict(),
            "roles": list(self.options.request.role or ()),
            "phase": self.options.request.phase,
            "log_dir": str(self.log_dir),  # one log directory for the whole run
        }

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        if self.collected_names is None:
            gates = {f"{self.contract_nodeid}::{item}": gate
                     for gate, item in self.item_names.items()}
            self.collected_names = [gates[nodeid] for nodeid in dict.fromkeys(ids)
                                    if nodeid in gates]
            self.collected_tests = any(nodeid not in gates for nodeid in ids)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> None:
        """With the first item, start every gate this process will run (an xdist worker's
        gates run with their items: it does not know them in advance)."""
        if self.started:
            return
        self.started = True
        option = self.config.option
        if self.is_worker or option.setuponly or option.setupplan:
            return
        names = list(dict.fromkeys(item.gate.name for item in item.session.items
                                   if isinstance(item, GateItem) and item.selection.selected))
        if names:
            self.runner_names = frozenset(names)
            plans = [self.gate_plans[name] for name in names]
            with collecting(self.notices):
                self.runner = engine.start(self.plan, plans, hook=self.config.hook,
                                           log_dir=self.log_dir)

    def result_for(self, name: str, *, again: bool = False) -> GateResult:
        """The gate's result: from the runner, or by running it now (``again``: a rerun
        plugin runs the item once more)."""
        if not again and self.runner is not None and name in self.runner_names:
            return self.runner.result(name)
        plans, log_dir = [self.gate_plans[name]], self.log_dir
        with collecting(self.notices), engine.start(self.plan, plans, jobs=1, log_dir=log_dir,
                                                    hook=self.config.hook) as runner:
            return runner.result(name)

    @functools.cached_property
    def gate_plans(self) -> dict[str, GatePlan]:
        # Only when a gate is to run: planning reads the result cache's inputs.
        with collecting(self.notices):
            return {plan.gate.name: plan for plan in self.plan.gate_plans()}

    @functools.cached_property
    def log_dir(self) -> Path:
        if self.shared_log_dir is not None:
            with contextlib.suppress(OSError):  # another host (--tx ssh=...): logs stay there
                make_private_dir(self.shared_log_dir)  # through no planted link
                return self.shared_log_dir
        with collecting(self.notices):
            return new_log_dir(self.contract.repo_root)

    @functools.cached_property
    def redactor(self) -> Redactor:
        return redactor_for(self.contract.gates)  # once: building it parses every command

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if not isinstance(item, GateItem):
            return report
        if call.when != "call" and item.selection.selected:
            # JUnit's time= adds the three phases: it is the gate's duration_s.
            report.duration = 0.0
        entry = item.gate_entry
        if call.when == "call" and entry is not None:
            # Basic types only: the entry travels to the xdist controller on the report.
            setattr(report, REPORT_ATTRIBUTE, entry)
            if entry["attempts"] and not entry.get("cached"):
                # The gate's own time, not the item's wait for it (JUnit, --durations).
                report.duration = float(entry["duration_s"])
        if call.when == "call" and report.skipped and isinstance(report.longrepr, tuple):
            # -rs and JUnit show the gate's place in the contract, not this package's line.
            report.longrepr = (os.fspath(item.path), item.line, report.longrepr[2])
        return report

    def pytest_report_teststatus(
        self, report: pytest.TestReport
    ) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
        entry: dict[str, Any] | None = getattr(report, REPORT_ATTRIBUTE, None)
        if report.when == "call" and report.passed and entry is not None and entry.get("cached"):
            return "passed", ".", ("PASSED (cached)", {"green": True})
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry: dict[str, Any] | None = getattr(report, REPORT_ATTRIBUTE, None)
        # A report pytest-rerunfailures will run again is not the item's result: its last is.
        if entry is not None and report.outcome != "rerun":  # type: ignore[comparison-overlap]
            previous = self.entries.get(entry["name"])
            # With --dist each a gate runs on every worker: the report keeps the worst.
            if previous is None or (entry["outcome"] == codes.FAILED
                                    and previous["outcome"] != codes.FAILED):
                self.entries[entry["name"]] = entry
        if self.runner is not None and self.session is not None and (
            self.session.shouldfail or self.session.shouldstop
        ):
            self.runner.cancel()  # -x / --maxfail: kill the gates still running now

    # A gate runs under its own timeout_seconds; pytest-timeout's --timeout is for Python
    # tests (a gate allowed 300 s must not be killed after --timeout 1): it sets no timer.

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_timeout_set_timer(self, item: pytest.Item) -> bool | None:
        return True if isinstance(item, GateItem) else None

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_timeout_cancel_timer(self, item: pytest.Item) -> bool | None:
        return True if isinstance(item, GateItem) else None

    @pytest.hookimpl(tryfirst=True)  # the work is back before any plugin writes its files
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.interruptible.hold()  # a signal from here on is noted, not raised: whole report
        if self.runner is not None:
            self.runner.close()  # kill the gates still running (-x, Ctrl-C), join its threads
        if self.aside is not None:  # what the gates saw is checked, then the work put back
            self.errors = self.aside.finish()
            self.messages += [*self.aside_lines, *self.errors]
            self.aside_lines = []
        # A usage error before any gate started: no run to report, no verdict reached.
        usage_error = exitstatus == pytest.ExitCode.USAGE_ERROR and not self.started
        if not self.is_worker and not self.config.option.collectonly and not usage_error:
            self.finish(session, exitstatus)
        received = self.interruptible.received
        if received is not None and session.exitstatus != pytest.ExitCode.INTERRUPTED:
            self.messages.append(f"interrupted by {signal.Signals(received).name}")
        self.end_interrupted_if_signalled()

    def pytest_unconfigure(self) -> None:
        if self.runner is not None:
            self.runner.close()
        self.aside_stack.close()  # the session never finished: the work is put back all the same
        for line in self.aside_lines:
            print(f"verifygate: {line}", file=sys.stderr)
        if not self.is_worker and self.report is not None:
            # Every file is written now (pytest's JUnit too): not changes for the next run.
            said = {*self.plan.warnings, *self.notices}
            with collecting() as found:
                remember_outputs(output_paths(self.config, self.options.report,
                                              self.options.digest))
            for warning in found:
                if warning not in said:  # the terminal summary is written: stderr is left
                    print(f"verifygate: {warning}", file=sys.stderr)
        self.interruptible.__exit__()
        self.end_interrupted_if_signalled()  # a signal during the summary counts too

    def end_interrupted_if_signalled(self) -> None:
        if self.interruptible.fired and self.session is not None:
            self.session.exitstatus = pytest.ExitCode.INTERRUPTED

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        """The run's report: recorded, written where asked, and the session's exit status."""
        results, selections = self.final_results()
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or any(
            result.code == codes.INTERRUPTED for result in results)
        run = engine.RunResult(self.contract, self.plan.changes, tuple(selections),
                               tuple(results), interrupted, shard=self.plan.shard,
                               errors=tuple(self.errors))
        with collecting(self.notices):
            engine.record(run)
        report = engine.report(run, self.config.hook, redactor=self.redactor)
        self.results, self.report = results, report
        if not self.is_worker:
            from pytest_verifygate.report.writers import Targets, write_all

            written = write_all(
                report, Targets(json=self.options.report, digest=self.options.digest,
                                github=self.annotate),
                repo_root=self.contract.repo_root, project_root=self.contract.root,
                hook=self.config.hook)
            self.report_path, self.annotations = written.report_path, written.annotations
            self.messages += [*written.problems, *written.warnings]
            if written.problems:
                session.exitstatus = pytest.ExitCode.USAGE_ERROR
        if self.errors and session.exitstatus in (pytest.ExitCode.OK,
                                                  pytest.ExitCode.NO_TESTS_COLLECTED):
            # The commit's check failed beside its gates (the index changed meanwhile): with
            # some gates deselected too, nothing that ran vouches for what is committed.
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if any(s.reason == DESELECTED_REASON for s in selections) or session.exitstatus not in (
                pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            return
        if report["verdict"] == codes.VERDICT_FAILED:
            if not any(result.failed for result in results):
                # fail_when_unverified: changes but no gate ran is a failure, not "no tests".
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            # No gate applies (roles, phases, a shard): `verifygate run` exits 0 for the same
            # change; exit status 5 would fail a CI job.
            session.exitstatus = pytest.ExitCode.OK

    def final_results(self) -> tuple[list[GateResult], list[Selection]]:
        """Every gate this run was to run, in contract order, the rest not selected; a gate
        whose item never reported (-x, Ctrl-C, a lost worker) is the runner's or interrupted."""
        results: list[GateResult] = []
        selections: list[Selection] = []
        for selection in self.plan.selections:
            name = selection.gate.name
            if selection.selected and self.collected_names is not None and (
                    name not in self.collected_names):
                selection = selection._replace(selected=False, reason=DESELECTED_REASON)
            selections.append(selection)
            if not selection.selected:
                continue
            if name in self.entries:
                results.append(result_from_entry(self.entries[name]))
            elif self.runner is not None and name in self.runner_names:
                results.append(self.runner.result(name))  # done: the runner is closed
            else:
                results.append(GateResult(
                    name=name, outcome=codes.FAILED, code=codes.INTERRUPTED, cwd=selection.gate.cwd,
                    command=self.gate_plans[name].display_command, reason=INTERRUPTED_REASON))
        return results, selections

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.results is None or self.report is None:
            return
        reporter = terminalreporter  # colored as pytest's --color, NO_COLOR... decide
        reporter.write_sep("=", "verifygate")
        if self.results:
            _write_styled(reporter, table_lines(self.results))
        else:
            reporter.write_line("no gate ran")
        timeouts = {gate.name: gate.timeout_seconds for gate in self.contract.gates}
        for title, lines in closing_summary(self.report, timeouts):
            reporter.write_sep("-", title)
            _write_styled(reporter, lines)
        reporter.write_line(verdict_line(self.report, report_path=self.report_path),
                            **{verdict_style(self.report): True})
        annotations = self.annotations
        for line in self.command_stop.around(annotations) if self.command_stop else annotations:
            reporter.write_line(line)
        for warning in self.notices:
            if warning not in self.plan.warnings:
                reporter.write_line(f"verifygate: {warning}", yellow=True)
        for message in self.messages:
            reporter.write_line(f"verifygate: {message}", red=True)
        notice = self.suite_twice()
        if notice is not None:  # a notice, not a failure
            reporter.write_line(f"verifygate: {notice}", yellow=True)

    def suite_twice(self) -> str | None:
        """A notice when a collected gate runs pytest and this run collects tests too (under
        pytest-xdist as well, where only the workers collect)."""
        import shlex

        if not self.collected_tests:
            return None  # no tests of pytest's own: nothing runs twice
        gates = {gate.name: gate for gate in self.contract.gates}
        for name in self.collected_names or ():
            command = gates[name].command
            words = command.split() if isinstance(command, str) else command
            if any(os.path.basename(word) in ("pytest", "py.test") for word in words):
                nodeid = f"{self.contract_nodeid}::{self.item_names[name]}"
                return (f"gate {name!r} runs pytest, and this run collects tests "
                        f"too: the suite runs twice. Collect only the gates (pytest "
                        f"{self.contract_nodeid} --verify-contract), or leave the gate out "
                        f"here (--deselect {shlex.quote(nodeid)})")
        return None


def _write_styled(reporter: pytest.TerminalReporter, lines: Iterable[Styled]) -> None:
    """Lines of the console's styled segments, in pytest's markup."""
    for line in lines:
        reporter.ensure_newline()
        for text, style in line:
            reporter.write(text, **({style: True} if style else {}))
        reporter.line("")


def _pytest_view(path: Path, rootpath: Path) -> Path:
    """``path`` (resolved) as pytest sees it: under the rootdir as spelt, symlinks and all."""
    try:
        return rootpath / path.relative_to(rootpath.resolve())
    except ValueError:
        return path
