"""The pytest plugin: ``pytest --verify-contract`` makes every selected gate a pytest item.

Owns the ``--verify-*`` options and ``verify_*`` ini options, the contract ``File`` collector
and ``GateItem``, the markers, starting the gates concurrently once pytest knows which items
will run, the pytest-xdist wiring (the change set goes to the workers, each gate's result comes
back on its ``TestReport``), the JUnit properties, the terminal summary and the JSON report and
digest written at the end of the session. Loading, selection, running and classification are
the engine's; this module only adapts them to pytest.

Without ``--verify-contract`` the plugin registers its options and hookspecs and nothing else:
the engine is imported lazily, no collector hook is active and nothing is collected.
"""

from __future__ import annotations

import os
import shlex
import signal
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr

    from pytest_verifygate.changes import ChangeSet
    from pytest_verifygate.contract import Contract, Gate
    from pytest_verifygate.report.redact import Redactor
    from pytest_verifygate.runner import GatePlan, GateResult, GateRunner
    from pytest_verifygate.selection import Selection

PLUGIN_NAME = "verifygate-session"
# The runner sets it in every gate's environment. A pytest run inside a gate ignores
# --verify-contract: with `addopts = --verify-contract` and a gate running pytest, gates would
# run gates forever.
WORKERINPUT_KEY = "verifygate"
REPORT_ATTRIBUTE = "verifygate"
DESELECTED_REASON = "deselected in this pytest run (-k, -m, --lf, --deselect or node ids)"

# How much of a failed gate's output a failure shows, by verbosity (lines, characters);
# the whole output is always in the gate's log file.
TAIL_LIMITS = {0: (40, 4000), 1: (200, 20000)}

_SESSION_KEY = pytest.StashKey["VerifyGateSession"]()
_NESTED_KEY = pytest.StashKey[str]()


# --------------------------------------------------------------------------------------------
# options


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    # Always registered, so a conftest implementing them never fails validation.
    from pytest_verifygate import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_verifygate import options  # argparse types shared with the CLI

    group = parser.getgroup("verifygate", "verify contract gates (pytest-verifygate)")
    group.addoption(
        "--verify-contract", dest="verify_contract", nargs="?", const="", default=None,
        metavar="PATH",
        help="collect one item per selected gate of the verify contract: PATH, or the "
        "contract found from the current directory up (default: ini verify_contract)",
    )
    group.addoption("--verify-role", dest="verify_role", metavar="R",
                    help="select the gates for this role (ini: verify_role)")
    group.addoption("--verify-phase", dest="verify_phase", type=options.positive_int, metavar="N",
                    help="select the gates for this phase (ini: verify_phase)")
    group.addoption("--verify-staged", dest="verify_staged", action="store_true", default=False,
                    help="the change set is the index against HEAD")
    group.addoption("--verify-changed-from", dest="verify_changed_from", metavar="REF",
                    help="the change set is everything since merge-base(REF, HEAD) "
                    "(ini: verify_changed_from)")
    group.addoption("--verify-files", dest="verify_files", nargs="+", action="extend",
                    metavar="F", help="the change set is these files")
    group.addoption("--verify-all", dest="verify_all", action="store_true", default=False,
                    help="no change filtering: every gate applies")
    group.addoption("--verify-jobs", dest="verify_jobs", type=options.jobs, metavar="N",
                    help="gates run at once in this process (0 = one per CPU; ini: "
                    "verify_jobs; default: the contract's settings.jobs)")
    group.addoption("--verify-report", dest="verify_report", metavar="PATH",
                    help="write the JSON report here (ini: verify_report)")
    group.addoption("--verify-digest", dest="verify_digest", metavar="PATH",
                    help="write the Markdown digest of failed gates here (ini: verify_digest)")
    group.addoption("--verify-annotations", dest="verify_annotations",
                    choices=options.ANNOTATION_CHOICES, default=None,
                    help="github: GitHub Actions error annotations for failed gates and a table "
                    "in $GITHUB_STEP_SUMMARY (default: when GITHUB_ACTIONS is true); none: never")
    group.addoption("--verify-no-cache", dest="verify_no_cache", action="store_true",
                    default=False, help="run gates with cache = true even if they passed on "
                    "these inputs (a pass is still stored)")
    parser.addini("verify_contract", "contract file used by a bare --verify-contract "
                  "(relative to the ini file)", default="")
    parser.addini("verify_role", "default for --verify-role", default="")
    parser.addini("verify_phase", "default for --verify-phase", default="")
    parser.addini("verify_changed_from", "default for --verify-changed-from", default="")
    parser.addini("verify_jobs", "default for --verify-jobs", default="")
    parser.addini("verify_report", "default for --verify-report (relative to the ini file)",
                  default="")
    parser.addini("verify_digest", "default for --verify-digest (relative to the ini file)",
                  default="")


def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    # argparse hands an optional-value option the next word, so `--verify-contract tests/`
    # would read `tests/` as the contract. A word that cannot be a contract file is a test
    # path: rewrite the flag to its explicit empty form so the word stays positional.
    for index, word in enumerate(args[:-1]):
        if word == "--":
            return
        if word == "--verify-contract" and not _could_be_contract(args[index + 1]):
            args[index] = "--verify-contract="


def _could_be_contract(word: str) -> bool:
    return (
        not word.startswith("-")
        and "::" not in word
        and word.endswith((".toml", ".json"))
    )


class VerifyOptions(NamedTuple):
    """The ``--verify-*`` options with their ini defaults applied."""

    contract: Path | None
    role: str | None
    phase: int | None
    staged: bool
    changed_from: str | None
    files: tuple[str, ...] | None
    all: bool
    jobs: int | None
    report: Path | None
    digest: Path | None


def read_options(config: pytest.Config) -> VerifyOptions:
    """Command-line values win over ini values; paths are made absolute now."""
    from pytest_verifygate import options

    invocation_dir = config.invocation_params.dir
    ini_dir = config.inipath.parent if config.inipath is not None else config.rootpath

    def ini(name: str) -> str:
        return str(config.getini(name) or "").strip()

    def cli_path(value: str | None) -> Path | None:
        return invocation_dir / value if value else None

    def ini_path(name: str) -> Path | None:
        value = ini(name)
        return ini_dir / value if value else None

    sources = [
        name
        for name, given in (
            ("--verify-staged", config.getoption("verify_staged")),
            ("--verify-changed-from", config.getoption("verify_changed_from")),
            ("--verify-files", config.getoption("verify_files")),
            ("--verify-all", config.getoption("verify_all")),
        )
        if given
    ]
    if len(sources) > 1:
        raise pytest.UsageError(
            f"{' and '.join(sources)} cannot be combined: choose one source of changed files"
        )
    phase: int | None = config.getoption("verify_phase")
    if phase is None and ini("verify_phase"):
        phase = _ini_number(ini("verify_phase"), "verify_phase", options.positive_int)
    jobs: int | None = config.getoption("verify_jobs")
    if jobs is None and ini("verify_jobs"):
        jobs = _ini_number(ini("verify_jobs"), "verify_jobs", options.jobs)
    files = config.getoption("verify_files")
    changed_from = config.getoption("verify_changed_from")
    if not sources and ini("verify_changed_from"):
        changed_from = ini("verify_changed_from")
    contract_option: str = config.getoption("verify_contract") or ""
    return VerifyOptions(
        contract=cli_path(contract_option) or ini_path("verify_contract"),
        role=config.getoption("verify_role") or ini("verify_role") or None,
        phase=phase,
        staged=bool(config.getoption("verify_staged")),
        changed_from=changed_from or None,
        files=tuple(files) if files is not None else None,
        all=bool(config.getoption("verify_all")),
        jobs=jobs,
        report=cli_path(config.getoption("verify_report")) or ini_path("verify_report"),
        digest=cli_path(config.getoption("verify_digest")) or ini_path("verify_digest"),
    )


def _ini_number(text: str, name: str, check: Callable[[str], int]) -> int:
    """An ini option's number, checked like the command-line option of the same name."""
    import argparse

    try:
        return check(text)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option {name}: {exc}") from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "verifygate: a gate of the verify contract")
    if config.getoption("verify_contract") is None:
        return
    from pytest_verifygate.runner import GATE_ENV

    if os.environ.get(GATE_ENV):
        config.stash[_NESTED_KEY] = os.environ[GATE_ENV]
        return
    from pytest_verifygate.errors import VerifyGateError

    try:
        session = VerifyGateSession.from_config(config)
    except VerifyGateError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_SESSION_KEY] = session
    config.pluginmanager.register(session, PLUGIN_NAME)


def pytest_report_header(config: pytest.Config) -> str | None:
    gate = config.stash.get(_NESTED_KEY, None)
    if gate is None:
        return None
    return f"verifygate: running inside gate {gate!r}: --verify-contract is ignored"


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION_KEY, None)
    if session is not None:
        session.close_runner()
        session.interruptible.__exit__()
        del config.stash[_SESSION_KEY]
        config.pluginmanager.unregister(session)


# --------------------------------------------------------------------------------------------
# collection


class ContractFile(pytest.File):
    """The contract file as a collector: one ``GateItem`` per selected gate, in file order."""

    def collect(self) -> Iterator[GateItem]:
        session = self.config.stash[_SESSION_KEY]
        for selection in session.selections:
            if selection.selected:
                yield GateItem.from_parent(self, name=selection.gate.name, gate=selection.gate)


class GateFailed(Exception):
    """A gate's result was ``failed``; carries the result for ``repr_failure``."""

    def __init__(self, result: GateResult, headline: str) -> None:
        super().__init__(headline)
        self.result = result
        self.headline = headline


class GateItem(pytest.Item):
    """One selected gate. Its outcome is the gate's: passed, failed, or skipped (also pending)."""

    def __init__(self, *, gate: Gate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate
        self.gate_entry: dict[str, Any] | None = None
        self.add_marker("verifygate")
        if gate.category is not None:
            self.add_marker(gate.category)
        for role in gate.roles or ():
            self.add_marker(f"verify_role_{role}")

    def runtest(self) -> None:
        # The same properties, messages and reasons as ``verifygate run --junit`` writes.
        from pytest_verifygate.report import gate_entry
        from pytest_verifygate.report.junit import failure_message, properties, skip_message

        session = self.config.stash[_SESSION_KEY]
        entry = self.gate_entry = gate_entry(session.result_for(self.gate.name),
                                             session.contract, session.redactor())
        # Shown from the report entry, not the raw result: JUnit XML and CI logs leave the
        # machine like the report does, so they get the same redaction of secrets.
        self.user_properties.extend(properties(entry))
        if entry["outcome"] == "failed":
            raise GateFailed(result_from_entry(entry),
                             failure_message(entry, self.gate.timeout_seconds))
        if entry["outcome"] in ("skipped", "pending"):
            # Reported at the gate's location (the contract), not at this line.
            raise pytest.skip.Exception(skip_message(entry), _use_item_location=True)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | TerminalRepr:
        if not isinstance(excinfo.value, GateFailed):
            return super().repr_failure(excinfo, style=style)
        return failure_repr(
            excinfo.value.result,
            excinfo.value.headline,
            path=str(self.path),
            verbosity=self.config.get_verbosity(),
        )

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"gate {self.name}"


# --------------------------------------------------------------------------------------------
# failure text


def failure_text(result: GateResult, head: str, *, verbosity: int) -> str:
    """The headline, where to look, then the end of the output, bounded by verbosity."""
    lines = [head]
    if result.reason:
        lines.append(f"reason: {result.reason}")
    if verbosity >= 1:
        lines.append(f"command: {shlex.join(result.command)}")
        lines.append(f"cwd: {result.cwd}")
    if result.log_path:
        lines.append(f"full log: {result.log_path}")
    output = result.output_tail.rstrip("\n")
    if output:
        limit = TAIL_LIMITS.get(max(verbosity, 0))  # -vv and more: all the output kept
        text, shown, total = _bounded_tail(output, limit)
        if result.output_truncated:  # the engine kept only the end: the total is unknown
            title = f"output (last {shown} lines)"
        elif shown < total:
            title = f"output (last {shown} of {total} lines)"
        else:
            title = "output"
        lines.append(f"{'-' * 10} {title} {'-' * 10}")
        lines.append(text)
    else:
        lines.append("(no output)")
    return "\n".join(lines)


def _bounded_tail(output: str, limit: tuple[int, int] | None) -> tuple[str, int, int]:
    """The end of ``output`` within ``limit`` (lines, characters), lines shown, lines in all."""
    lines = output.split("\n")
    total = len(lines)
    if limit is None:
        return output, total, total
    max_lines, max_chars = limit
    text = "\n".join(lines[-max_lines:])
    if len(text) > max_chars:
        text = text[-max_chars:]
        newline = text.find("\n")
        # Start at a line boundary, unless one line alone is longer than the budget.
        text = text[newline + 1:] if newline != -1 else "..." + text
    return text, text.count("\n") + 1, total


def failure_repr(result: GateResult, head: str, *, path: str, verbosity: int) -> TerminalRepr:
    # An exception-style repr rather than a plain string: its ``reprcrash`` message (the
    # headline) becomes the short summary line and JUnit's message=, and it survives xdist.
    from _pytest._code.code import (
        ExceptionChainRepr,
        ReprFileLocation,
        ReprTracebackNative,
    )

    text = failure_text(result, head, verbosity=verbosity)
    crash = ReprFileLocation(path=path, lineno=1, message=head)
    return ExceptionChainRepr([(ReprTracebackNative([text + "\n"]), crash, None)])


# --------------------------------------------------------------------------------------------
# the session


class VerifyGateSession:
    """One pytest run with ``--verify-contract``: contract, change set, selection, runner,
    the gate results received, and the report. Registered as a plugin while active.
    """

    def __init__(
        self,
        config: pytest.Config,
        options: VerifyOptions,
        contract: Contract,
        changes: ChangeSet,
        selections: Sequence[Selection],
        *,
        shared_log_dir: Path | None = None,
    ) -> None:
        from pytest_verifygate.contract import posix_relative
        from pytest_verifygate.signals import Interruptible

        self.config = config
        self.options = options
        self.contract = contract
        self.changes = changes
        self.selections = list(selections)
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
        self.report: dict[str, Any] | None = None
        self.messages: list[str] = []
        self.interruptible = Interruptible((signal.SIGTERM,), keep_others=True)
        self._redactor: Redactor | None = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> VerifyGateSession:
        from pytest_verifygate.changes import ChangeRequest, ChangeSet, compute_changes
        from pytest_verifygate.contract import load_contract
        from pytest_verifygate.selection import select_gates

        options = read_options(config)
        workerinput: dict[str, Any] = getattr(config, "workerinput", {})
        shared = workerinput.get(WORKERINPUT_KEY)
        log_dir: Path | None = None
        if shared is not None:
            # An xdist worker: the controller already decided; select exactly as it did.
            contract = load_contract(_from_rootdir(shared["contract"], config.rootpath))
            changes = ChangeSet.from_dict(shared["changes"])
            role, phase = shared["role"], shared["phase"]
            log_dir = Path(shared["log_dir"]) if shared.get("log_dir") else None
        else:
            contract = load_contract(options.contract, start=config.invocation_params.dir,
                                     flag="--verify-contract")
            request = ChangeRequest(files=options.files, staged=options.staged,
                                    changed_from=options.changed_from, all=options.all)
            changes = compute_changes(
                contract.root, request, settings_changed_from=contract.settings.changed_from,
                cwd=config.invocation_params.dir,
            )
            role, phase = options.role, options.phase
        options = options._replace(role=role, phase=phase)
        selections = select_gates(contract, changes, role=role, phase=phase)
        session = cls(config, options, contract, changes, selections, shared_log_dir=log_dir)
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
            self.config.addinivalue_line(
                "markers", f"verify_role_{role}: verify contract gates for role {role!r}"
            )

    def arrange_collection(self) -> None:
        """Make sure the contract is collected exactly once, whatever the paths given.

        A path argument naming the contract is used as given (``verify.toml::lint``). A
        directory argument that contains it would walk to it, but ``norecursedirs`` (``.*``)
        or ``--ignore`` may skip ``.middle/``: those directories are let through. Otherwise
        (``testpaths = tests``, or test files named) the contract is added as an argument.
        """
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
                between = [
                    parent for parent in self.contract_path.parents
                    if parent.is_relative_to(argument) and parent != argument
                ]
                self.forced_paths = frozenset([self.contract_path, *between])
                return
        self.config.args.append(str(self.contract_path))

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        if collection_path in self.forced_paths:
            return False
        return None

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> ContractFile | None:
        if file_path == self.contract_path or (
            file_path.name == self.contract_path.name and file_path.samefile(self.contract.path)
        ):
            return ContractFile.from_parent(parent, path=file_path)
        return None

    def pytest_report_header(self) -> list[str]:
        selected = sum(1 for selection in self.selections if selection.selected)
        lines = [
            f"verifygate: {self.contract_nodeid}: {selected} of {len(self.selections)} gate(s) "
            f"selected (changes: {self.changes.describe()})"
        ]
        lines += [f"verifygate: {warning}"
                  for warning in (*self.contract.warnings, *self.changes.warnings)]
        return lines

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        self.interruptible.__enter__()  # SIGTERM ends the session like Ctrl-C

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
            "role": self.options.role,
            "phase": self.options.phase,
            "log_dir": str(self._log_dir()),
        }

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        if self.collected_names is None:
            prefix = self.contract_nodeid + "::"
            self.collected_names = _unique(
                nodeid[len(prefix):] for nodeid in ids if nodeid.startswith(prefix)
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
        names = _unique(item.gate.name for item in session.items if isinstance(item, GateItem))
        if not names:
            return
        from pytest_verifygate.engine import make_runner

        plans = self._plans()
        self.runner = make_runner(self.contract, [plans[name] for name in names],
                                  jobs=self.options.jobs, hook=self.config.hook,
                                  log_dir=self._log_dir())
        self.runner_names = frozenset(names)
        self.runner.start()

    def result_for(self, name: str) -> GateResult:
        """The gate's result: from the running runner, or by running it now."""
        if self.runner is not None and name in self.runner_names:
            return self.runner.result(name)
        from pytest_verifygate.engine import make_runner

        runner = make_runner(self.contract, [self._plans()[name]], jobs=1,
                             hook=self.config.hook, log_dir=self._log_dir())
        try:
            runner.start()
            return runner.result(name)
        finally:
            runner.close()

    def _plans(self) -> dict[str, GatePlan]:
        if self.plans is None:
            from pytest_verifygate.engine import plan_gates

            planned = plan_gates(self.contract, self.selections,
                                 read_cache=not self.config.getoption("verify_no_cache"))
            self.plans = {plan.gate.name: plan for plan in planned}
        return self.plans

    def _log_dir(self) -> Path:
        if self.log_dir is None:
            from pytest_verifygate.storage import new_log_dir

            if self.shared_log_dir is not None:
                try:
                    self.shared_log_dir.mkdir(parents=True, exist_ok=True)
                    self.log_dir = self.shared_log_dir
                except OSError:  # another host (--tx ssh=...): keep logs there instead
                    self.log_dir = new_log_dir(self.contract.repo_root)
            else:
                self.log_dir = new_log_dir(self.contract.repo_root)
        return self.log_dir

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
        if call.when == "call" and isinstance(item, GateItem) and item.gate_entry is not None:
            # Basic types only: the entry travels to the xdist controller on the report.
            report.verifygate = item.gate_entry  # type: ignore[attr-defined]
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
        if entry is not None:
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

    # -- the end -------------------------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.close_runner()
        if self.is_worker or self.config.option.collectonly:
            return
        from pytest_verifygate.engine import VERDICT_FAILED, verdict_of
        from pytest_verifygate.report import build_report

        results, selections = self.final_results()
        verdict = verdict_of(results, self.changes, self.contract.settings.fail_when_unverified)
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or any(
            result.code == "interrupted" for result in results
        )
        report = build_report(contract=self.contract, changes=self.changes,
                              selections=selections, results=results, verdict=verdict,
                              interrupted=interrupted, redactor=self.redactor())
        self.config.hook.pytest_verifygate_modifyreport(report=report)
        self.results, self.report = results, report
        self.write_outputs(report, session)
        if self.github_annotations():
            from pytest_verifygate.report.github import append_step_summary

            warning = append_step_summary(report, os.environ, repo_root=self.contract.repo_root)
            self.messages += [warning] if warning else []
        deselected = any(s.reason == DESELECTED_REASON for s in selections)
        if (
            verdict == VERDICT_FAILED
            and not any(result.failed for result in results)
            and not deselected
            and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
        ):
            # fail_when_unverified: changes present but no gate ran is a failure, not "no tests"
            # (the verdict line in the summary says why).
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

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
        from pytest_verifygate.runner import GateResult

        plan = self._plans().get(name)
        return GateResult(
            name=name,
            outcome="failed",
            code="interrupted",
            command=plan.display_command if plan is not None else (),
            cwd=self.contract.gate(name).cwd,
            reason="the run stopped before this gate finished",
        )

    def write_outputs(self, report: dict[str, Any], session: pytest.Session) -> None:
        for kind, path in (("report", self.options.report), ("digest", self.options.digest)):
            if path is None:
                continue
            # Imported only when asked for: most runs write neither file.
            from pytest_verifygate.report import write_report
            from pytest_verifygate.storage import write_atomic

            try:
                if kind == "report":
                    write_report(path, report)
                else:
                    from pytest_verifygate.report.digest import to_digest

                    write_atomic(path, to_digest(report, root=str(self.contract.repo_root)))
            except OSError as exc:
                self.messages.append(f"cannot write the {kind} {path}: {exc.strerror or exc}")
                session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def github_annotations(self) -> bool:
        from pytest_verifygate import options

        return options.github_annotations(self.config.getoption("verify_annotations"),
                                          os.environ)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.results is None or self.report is None:
            return
        from pytest_verifygate.report.console import summary_table, verdict_line

        reporter = terminalreporter
        reporter.write_sep("=", "verifygate")
        if self.results:
            for line in summary_table(self.results).splitlines():
                reporter.write_line(line)
        else:
            reporter.write_line("no gate ran")
        report_path = str(self.options.report) if self.options.report else None
        reporter.write_line(verdict_line(self.report, report_path=report_path))
        if self.github_annotations():
            from pytest_verifygate.report.github import error_annotations

            for line in error_annotations(self.report, repo_root=self.contract.repo_root,
                                          project_root=self.contract.root):
                reporter.write_line(line)
        for message in self.messages:
            reporter.write_line(f"verifygate: {message}", red=True)


# --------------------------------------------------------------------------------------------
# helpers


def result_from_entry(entry: dict[str, Any]) -> GateResult:
    """A ``GateResult`` back from its report entry (what an xdist worker sends)."""
    from pytest_verifygate.runner import GateResult

    values = {key: value for key, value in entry.items() if key in GateResult._fields}
    values["command"] = tuple(values.get("command") or ())
    return GateResult(**values)


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
