"""The pytest run with ``--verify-contract``: one ``VerifyGateSession``, registered as a plugin.

Owns the run's side of pytest: preparing the run through the engine (on an xdist worker, from
the controller's change set), making sure the contract is collected exactly once, starting the
gates together once pytest knows which items will run, handing each item its gate's result,
cancelling on ``-x``, and at the end the report (assembled by the engine), the digest, the
GitHub outputs and the terminal summary.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import signal
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_verifygate import codes, engine
from pytest_verifygate.contract import posix_relative
from pytest_verifygate.engine import Plan, RunRequest, prepare
from pytest_verifygate.git.changes import ChangeRequest, ChangeSet
from pytest_verifygate.names import item_names, role_marker
from pytest_verifygate.pytest_plugin.collection import ContractCollection
from pytest_verifygate.pytest_plugin.declared import declared_lines
from pytest_verifygate.pytest_plugin.items import INTERRUPTED_REASON, GateItem, result_from_entry
from pytest_verifygate.pytest_plugin.options import VerifyOptions, output_paths, read_options
from pytest_verifygate.runner.records import GateResult
from pytest_verifygate.signals import Interruptible

if TYPE_CHECKING:
    from pytest_verifygate.report.github import CommandStop
    from pytest_verifygate.report.model import Report
    from pytest_verifygate.report.redact import Redactor
    from pytest_verifygate.report.terminal import Styled
    from pytest_verifygate.runner.records import GatePlan
    from pytest_verifygate.runner.scheduler import GateRunner
    from pytest_verifygate.selection import Selection

PLUGIN_NAME = "verifygate-session"
# Where the controller puts what its workers need (in ``workerinput``).
WORKERINPUT_KEY = "verifygate"
# The attribute of a ``TestReport`` carrying the gate's report entry (basic types only).
REPORT_ATTRIBUTE = "verifygate"
DESELECTED_REASON = "deselected in this pytest run (-k, -m, --lf, --deselect or node ids)"


class VerifyGateSession(ContractCollection):
    """One pytest run with ``--verify-contract``: contract, change set, selection, runner,
    the gate results received, and the report. Registered as a plugin while active.
    """

    def __init__(
        self,
        config: pytest.Config,
        options: VerifyOptions,
        plan: Plan,
        *,
        shared_log_dir: Path | None = None,
    ) -> None:
        contract = plan.contract
        self.config = config
        self.options = options
        self.plan = plan
        self.contract = contract
        self.changes = plan.changes
        self.selections: Sequence[Selection] = plan.selections
        self.item_names: Mapping[str, str] = item_names(gate.name for gate in contract.gates)
        self.declared_lines: Mapping[str, int] = declared_lines(contract)
        self.is_worker = hasattr(config, "workerinput")
        self.contract_path = _pytest_view(contract.path, config.rootpath)
        self.contract_nodeid = posix_relative(self.contract_path, config.rootpath)
        self.forced_paths: frozenset[Path] = frozenset()
        self.shared_log_dir = shared_log_dir
        self.log_dir: Path | None = None
        self.plans: dict[str, GatePlan] | None = None
        self.runner: GateRunner | None = None
        self.runner_names: frozenset[str] = frozenset()
        self.started = False
        self.session: pytest.Session | None = None
        self.collected_names: list[str] | None = None
        self.entries: dict[str, dict[str, Any]] = {}
        self.results: list[GateResult] | None = None
        self.report: Report | None = None
        self.report_written = False  # the summary names the report's file only once it is
        self.messages: list[str] = []
        self.interruptible = Interruptible(keep_others=True)  # pytest keeps its own SIGINT
        self._redactor: Redactor | None = None
        self.command_stop: CommandStop | None = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> VerifyGateSession:
        """The session for this pytest run: the engine's plan for the ``--verify-*`` options,
        or, on a pytest-xdist worker, for the change set its controller computed."""
        options = read_options(config)
        read_cache = not config.getoption("verify_no_cache")
        workerinput: dict[str, Any] = getattr(config, "workerinput", {})
        shared = workerinput.get(WORKERINPUT_KEY)
        log_dir: Path | None = None
        if shared is not None:
            # An xdist worker: the controller already decided; select exactly as it did.
            options = options._replace(roles=tuple(shared["roles"]), phase=shared["phase"])
            request = RunRequest(contract=_from_rootdir(shared["contract"], config.rootpath),
                                 changes=ChangeSet.from_dict(shared["changes"]),
                                 role=options.roles, phase=options.phase, jobs=options.jobs,
                                 read_cache=read_cache, contract_flag="--verify-contract",
                                 shard=options.shard)
            log_dir = Path(shared["log_dir"]) if shared.get("log_dir") else None
        else:
            changes = ChangeRequest(files=options.files, staged=options.staged,
                                    changed_from=options.changed_from, all=options.all,
                                    outputs=output_paths(config, options))
            request = RunRequest(contract=options.contract, start=config.invocation_params.dir,
                                 changes=changes, role=options.roles, phase=options.phase,
                                 jobs=options.jobs, read_cache=read_cache,
                                 contract_flag="--verify-contract", shard=options.shard)
        session = cls(config, options, prepare(request), shared_log_dir=log_dir)
        session.register_markers()
        session.arrange_collection()
        return session

    # -- configuration -------------------------------------------------------------------

    def register_markers(self) -> None:
        # Registered before collection so --strict-markers accepts what the items carry.
        for category in ("unit", "integration"):
            self.config.addinivalue_line(
                "markers", f"{category}: verify contract gates with category = \"{category}\""
            )
        roles = sorted({role for gate in self.contract.gates for role in gate.roles or ()})
        for role in roles:
            # The marker is a safe form of the role; the description names the role itself.
            self.config.addinivalue_line(
                "markers", f"{role_marker(role)}: verify contract gates for role {role!r}"
            )

    def pytest_report_header(self) -> list[str]:
        selected = sum(1 for selection in self.selections if selection.selected)
        lines = [
            f"verifygate: {self.contract_nodeid}: {selected} of {len(self.selections)} gate(s) "
            f"selected (changes: {self.changes.describe()})"
        ]
        lines += [f"verifygate: {warning}" for warning in self.plan.warnings]
        return lines

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        self.interruptible.__enter__()  # SIGTERM, SIGHUP, SIGQUIT end the session like Ctrl-C
        if not self.is_worker and self.github_annotations():
            from pytest_verifygate.report.github import CommandStop

            self.command_stop = CommandStop.on_terminal(self.config)  # test output isn't ours

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session: pytest.Session) -> Generator[None, object, object]:
        try:
            return (yield)
        except BaseException:
            # Cut short (Ctrl-C, SIGTERM): which gates would have been collected is unknown,
            # so every selected gate counts (as interrupted), none as deselected.
            self.collected_names = None
            raise

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected_names = _unique(
            item.gate.name for item in session.items if isinstance(item, GateItem)
        )

    # -- xdist ---------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        # Workers must collect the same items: they get the controller's change set and
        # selection inputs instead of computing their own, and share one log directory.
        node.workerinput[WORKERINPUT_KEY] = {
            "contract": self.contract_nodeid,
            "changes": self.changes.to_dict(),
            "roles": list(self.options.roles),
            "phase": self.options.phase,
            "log_dir": str(self._log_dir()),
        }

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        if self.collected_names is None:
            prefix = self.contract_nodeid + "::"
            gate_names = {item: gate for gate, item in self.item_names.items()}
            self.collected_names = _unique(
                gate_names[nodeid[len(prefix):]] for nodeid in ids
                if nodeid.startswith(prefix) and nodeid[len(prefix):] in gate_names
            )

    # -- running -------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> None:
        if not self.started:
            self.started = True
            self.start(item.session)

    def start(self, session: pytest.Session) -> None:
        """Start every gate that will run in this process, up to ``jobs`` at once.

        Under an xdist worker the items this process will run are not known in advance, so
        each gate runs when its item does (the parallelism comes from ``-n``).
        """
        option = self.config.option
        if self.is_worker or option.setuponly or option.setupplan:
            return
        names = _unique(item.gate.name for item in session.items
                        if isinstance(item, GateItem) and item.runs)
        if not names:
            return
        plans = self._plans()
        self.runner_names = frozenset(names)
        self.runner = engine.start(self.plan, [plans[name] for name in names],
                                   hook=self.config.hook, log_dir=self._log_dir())

    def result_for(self, name: str, *, again: bool = False) -> GateResult:
        """The gate's result: from the running runner, or by running it now (``again``: a
        rerun plugin runs the item once more, so the gate runs once more)."""
        if not again and self.runner is not None and name in self.runner_names:
            return self.runner.result(name)
        runner = engine.start(self.plan, [self._plans()[name]], jobs=1, hook=self.config.hook,
                              log_dir=self._log_dir())
        try:
            return runner.result(name)
        finally:
            runner.close()

    def _plans(self) -> dict[str, GatePlan]:
        if self.plans is None:
            self.plans = {plan.gate.name: plan for plan in self.plan.gate_plans()}
        return self.plans

    def _log_dir(self) -> Path:
        if self.log_dir is None:
            from pytest_verifygate.state.storage import make_private_dir, new_log_dir

            if self.shared_log_dir is not None:
                try:
                    make_private_dir(self.shared_log_dir)  # through no planted link
                    self.log_dir = self.shared_log_dir
                except OSError:  # another host (--tx ssh=...): keep logs there instead
                    self.log_dir = new_log_dir(self.contract.repo_root)
            else:
                self.log_dir = new_log_dir(self.contract.repo_root)
        return self.log_dir

    def remember_outputs(self) -> None:
        """Once every file is written (pytest's JUnit at its session finish too): remember
        them, so that the next run does not take them for changes while they stay as written."""
        if self.is_worker or self.report is None:
            return
        from pytest_verifygate.state.outputs import remember_outputs

        remember_outputs(output_paths(self.config, self.options))

    def close_runner(self) -> None:
        """Kill the gates still running (``-x``, Ctrl-C) and wait for the runner's threads."""
        if self.runner is not None:
            self.runner.close()

    def redactor(self) -> Redactor:
        """One redactor for the session: building it parses every gate's command."""
        if self._redactor is None:
            from pytest_verifygate.report.redact import redactor_for

            self._redactor = redactor_for(self.contract.gates)
        return self._redactor

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when != "call" and isinstance(item, GateItem) and item.runs:
            # Setup and teardown do nothing for a gate; their few milliseconds would make
            # JUnit's time= (pytest adds the three phases) differ from the gate's duration_s.
            report.duration = 0.0
        if call.when == "call" and isinstance(item, GateItem):
            entry = item.gate_entry
            if entry is not None:
                # Basic types only: the entry travels to the xdist controller on the report.
                report.verifygate = entry  # type: ignore[attr-defined]
                if entry.get("attempts") and not entry.get("cached"):
                    # The gate's own time, not the item's wait for it: gates run at once, and
                    # an item whose gate finished while another item waited took no time.
                    # JUnit's time= and --durations read this.
                    report.duration = float(entry["duration_s"])
            if report.skipped and isinstance(report.longrepr, tuple):
                # A skipped gate is reported at its location (the contract), not at the line
                # of this package that skipped it (what -rs and JUnit show).
                path, lineno = item.reportinfo()[:2]
                report.longrepr = (os.fspath(path), (lineno or 0) + 1, report.longrepr[2])
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
            if previous is None or (
                entry["outcome"] == "failed" and previous["outcome"] != "failed"
            ):
                self.entries[entry["name"]] = entry
        if self.runner is not None and self.session is not None and (
            self.session.shouldfail or self.session.shouldstop
        ):
            self.runner.cancel()  # -x / --maxfail: kill the gates still running now

    # -- pytest-timeout ------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_timeout_set_timer(self, item: pytest.Item) -> bool | None:
        # A gate item runs under its gate's own timeout_seconds, which the runner enforces on
        # the gate's whole process tree; --timeout is for Python tests (a gate allowed 300 s
        # must not be killed after --timeout 1). True: no timer of pytest-timeout's is set.
        return True if isinstance(item, GateItem) else None

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_timeout_cancel_timer(self, item: pytest.Item) -> bool | None:
        return True if isinstance(item, GateItem) else None

    # -- the end -------------------------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.interruptible.hold()  # a signal from here on is noted, not raised: whole report
        self.close_runner()
        # A usage error (a test path that does not exist, a bad option) ends pytest before
        # any gate starts: there is no run to report, and no verdict (none was reached).
        usage_error = exitstatus == pytest.ExitCode.USAGE_ERROR and not self.started
        if not self.is_worker and not self.config.option.collectonly and not usage_error:
            self.finish(session, exitstatus)
        received = self.interruptible.received
        if received is not None and session.exitstatus != pytest.ExitCode.INTERRUPTED:
            self.messages.append(f"interrupted by {signal.Signals(received).name}")
        self.end_interrupted_if_signalled()

    def end_interrupted_if_signalled(self) -> None:
        """A terminating signal noted while the report was written (``Interruptible.hold``)
        still ends the session as interrupted, as it ends ``verifygate run`` (status 130)."""
        if self.interruptible.fired and self.session is not None:
            self.session.exitstatus = pytest.ExitCode.INTERRUPTED

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        """The run's report: recorded, written where asked, and the session's exit status."""
        results, selections = self.final_results()
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or any(
            result.code == codes.INTERRUPTED for result in results
        )
        run = engine.RunResult(self.contract, self.changes, tuple(selections), tuple(results),
                               interrupted, shard=self.plan.shard)
        engine.record(run)
        report = engine.report(run, self.config.hook, redactor=self.redactor())
        verdict = report["verdict"]
        self.results, self.report = results, report
        self.write_outputs(report, session)
        if self.github_annotations():
            from pytest_verifygate.report.github import append_step_summary, write_step_outputs

            warning = append_step_summary(report, os.environ, repo_root=self.contract.repo_root,
                                          project_root=self.contract.root, hook=self.config.hook)
            self.messages += [warning] if warning else []
            report_path = str(self.options.report) if self.report_written else None
            warning = write_step_outputs(report, os.environ, report_path=report_path)
            self.messages += [warning] if warning else []
        deselected = any(s.reason == DESELECTED_REASON for s in selections)
        if (
            verdict == codes.VERDICT_FAILED
            and not any(result.failed for result in results)
            and not deselected
            and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
        ):
            # fail_when_unverified: changes present but no gate ran is a failure, not "no tests"
            # (the verdict line in the summary says why).
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif (
            verdict != codes.VERDICT_FAILED
            and not deselected
            and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
        ):
            # Nothing collected because no gate applies (roles, phases, a shard): the contract
            # was checked, and `verifygate run` exits 0 for the same change. Exit status 5
            # would fail a CI job that asked for no role.
            session.exitstatus = pytest.ExitCode.OK

    def final_results(self) -> tuple[list[GateResult], list[Selection]]:
        """Every gate this run was to run, once, in contract order; the rest as not selected.

        A gate whose item never reported (``-x``, Ctrl-C, a crashed worker) is taken from the
        runner if it finished there, else recorded as ``interrupted``.
        """
        selected = [s.gate.name for s in self.selections if s.selected]
        expected = set(selected if self.collected_names is None else self.collected_names)
        results: list[GateResult] = []
        selections: list[Selection] = []
        for selection in self.selections:
            name = selection.gate.name
            if not selection.selected:
                selections.append(selection)
                continue
            if name not in expected:
                selections.append(selection._replace(selected=False,
                                                     reason=DESELECTED_REASON))
                continue
            selections.append(selection)
            if name in self.entries:
                results.append(result_from_entry(self.entries[name]))
            elif self.runner is not None and name in self.runner_names:
                results.append(self.runner.result(name))  # done: the runner is closed
            else:
                results.append(self._never_finished(name))
        return results, selections

    def _never_finished(self, name: str) -> GateResult:
        plan = self._plans().get(name)
        return GateResult(
            name=name,
            outcome=codes.FAILED,
            code=codes.INTERRUPTED,
            command=plan.display_command if plan is not None else (),
            cwd=self.contract.gate(name).cwd,
            reason=INTERRUPTED_REASON,
        )

    def write_outputs(self, report: Report, session: pytest.Session) -> None:
        for kind, path in (("report", self.options.report), ("digest", self.options.digest)):
            if path is None:
                continue
            # Imported only when asked for: most runs write neither file.
            from pytest_verifygate.report.document import write_report
            from pytest_verifygate.state.storage import write_output

            try:
                if kind == "report":
                    write_report(path, report)
                    self.report_written = True
                else:
                    from pytest_verifygate.report.digest import to_digest

                    write_output(path, to_digest(report, root=str(self.contract.repo_root)))
            except OSError as exc:
                self.messages.append(f"cannot write the {kind} {path}: {exc.strerror or exc}")
                session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def github_annotations(self) -> bool:
        from pytest_verifygate import option_checks

        return option_checks.github_annotations(self.config.getoption("verify_annotations"),
                                          os.environ)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.results is None or self.report is None:
            return
        from pytest_verifygate.report.terminal import (
            closing_summary,
            table_lines,
            verdict_line,
            verdict_style,
        )

        # pytest's markup: colored as pytest's --color, PY_COLORS, NO_COLOR... decide.
        reporter = terminalreporter
        reporter.write_sep("=", "verifygate")
        if self.results:
            for styled in table_lines(self.results):
                _write_styled(reporter, styled)
        else:
            reporter.write_line("no gate ran")
        timeouts = {gate.name: gate.timeout_seconds for gate in self.contract.gates}
        for title, lines in closing_summary(self.report, timeouts):
            reporter.write_sep("-", title)
            for styled in lines:
                _write_styled(reporter, styled)
        report_path = str(self.options.report) if self.report_written else None
        reporter.write_line(verdict_line(self.report, report_path=report_path),
                            **{verdict_style(self.report): True})
        if self.github_annotations():
            from pytest_verifygate.report.github import error_annotations

            for line in error_annotations(self.report, repo_root=self.contract.repo_root,
                                          project_root=self.contract.root, hook=self.config.hook,
                                          stop=self.command_stop):
                reporter.write_line(line)
        for message in self.messages:
            reporter.write_line(f"verifygate: {message}", red=True)
        from pytest_verifygate.pytest_plugin.items import suite_twice  # a notice, not a failure
        for notice in suite_twice(getattr(self.session, "items", ()), self.contract_nodeid):
            reporter.write_line(f"verifygate: {notice}", yellow=True)


def _write_styled(reporter: pytest.TerminalReporter, line: Styled) -> None:
    """One line of the console's styled segments, in pytest's markup."""
    reporter.ensure_newline()
    for text, style in line:
        reporter.write(text, **({style: True} if style else {}))
    reporter.line("")


def _unique(names: Iterator[str] | Sequence[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _pytest_view(path: Path, rootpath: Path) -> Path:
    """``path`` (resolved) as pytest sees it: under the rootdir as spelt, symlinks and all."""
    try:
        return rootpath / path.relative_to(rootpath.resolve())
    except ValueError:
        return path


def _from_rootdir(relative: str, rootpath: Path) -> Path:
    return Path(relative) if os.path.isabs(relative) else rootpath / relative
