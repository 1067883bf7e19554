"""The one door into the engine: ``prepare`` a run, ``run`` it, assemble its ``report``.

    contract ──► change set ──► selection ──► plan ──► runner ──► classify ──► report
     (load)       (git, CI)      (pathspec)   ({files})  (spawn)    (codes)     (JSON, …)

Every front end (the ``verifygate`` subcommands, the pytest plugin, the agent hooks)
translates its own inputs into a ``RunRequest``, calls ``prepare`` for a ``Plan`` and ``run``
(or, for pytest, ``start``) for the results, then renders what ``report`` assembles. None of
them loads a contract, computes changes, selects gates or builds a report by itself.

Also the public Python API for orchestrators (re-exported from ``pytest_verifygate``). The
runner is imported only when something runs: preparing a run (what ``verifygate list`` and a
stop with no changes do) spawns nothing and imports no process machinery.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_verifygate import codes
from pytest_verifygate.contract import Contract, Gate, load_contract
from pytest_verifygate.git.changes import ChangeRequest, ChangeSet, compute_changes
from pytest_verifygate.notices import collecting, warn
from pytest_verifygate.plan import plan_gates
from pytest_verifygate.selection import (
    Selection,
    only_named,
    select_gates,
    unmatched_pattern_warnings,
)

# Names of modules a run may never load, for the type checker only.
if TYPE_CHECKING:
    from pytest_verifygate.hookspecs import GateHooks
    from pytest_verifygate.report.model import Report
    from pytest_verifygate.report.redact import Redactor
    from pytest_verifygate.runner.records import CacheSlot, GatePlan, GateResult
    from pytest_verifygate.runner.scheduler import GateRunner
    from pytest_verifygate.shards import Shard

GateCallback = Callable[[Gate], None]
ResultCallback = Callable[[Gate, "GateResult"], None]


class RunRequest(NamedTuple):
    """What a front end asks for, in the engine's words.

    ``contract``: the contract file (relative to ``start``), or None to find it from ``start``
    upwards. ``start`` also anchors explicit changed files; None is the current directory.
    ``changes``: how to compute the change set, or a change set already computed (what a
    pytest-xdist worker receives from its controller). ``contract_flag`` names the front end's
    contract option in hints.
    """

    contract: str | os.PathLike[str] | None = None
    start: Path | None = None
    changes: ChangeRequest | ChangeSet = ChangeRequest()
    role: str | Sequence[str] | None = None  # the role or roles asked for
    phase: int | None = None
    jobs: int | None = None
    read_cache: bool = True
    contract_flag: str = "--contract"
    shard: Shard | None = None  # run only this part of the selected gates (shards.py)
    # A commit whose contract still binds the run (the agent hook's session start): the gates
    # it had run as they were there, with those added since (``contract/revision.py``).
    bound_by: str | None = None
    names: tuple[str, ...] = ()  # only these gates (``verifygate run NAME...``); empty: all
    # The front end set the work tree aside for this run itself (a commit's check): any other
    # run first puts back what a killed one left aside, and waits for none (``set_aside``).
    work_set_aside: bool = False


class Plan(NamedTuple):
    """A prepared run: the contract, the change set and every gate's selection, in order."""

    contract: Contract
    changes: ChangeSet
    selections: tuple[Selection, ...]
    jobs: int
    read_cache: bool = True
    shard: Shard | None = None
    shard_warnings: tuple[str, ...] = ()
    # Patterns of the gates left out by the change set that match no tracked file.
    pattern_warnings: tuple[str, ...] = ()

    @property
    def selected(self) -> tuple[Selection, ...]:
        return tuple(s for s in self.selections if s.selected)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the user should know before the gates run (contract, change set, patterns)."""
        return (*self.contract.warnings, *self.changes.warnings, *self.pattern_warnings,
                *self.shard_warnings)

    def gate_plans(self) -> list[GatePlan]:
        """The selected gates as argvs to spawn (or why not to spawn them)."""
        return plan_gates(self.contract, self.selections, read_cache=self.read_cache)


class RunResult(NamedTuple):
    """Everything a report needs about one run."""

    contract: Contract
    changes: ChangeSet
    selections: tuple[Selection, ...]
    results: tuple[GateResult, ...]
    interrupted: bool = False
    shard: Shard | None = None
    # What the user should know that the run found (its state files, its logs), each once and
    # none of the plan's: for the front end to show as it shows the plan's warnings.
    warnings: tuple[str, ...] = ()
    # What fails the run beside its gates: a commit's files or index changed while they ran.
    errors: tuple[str, ...] = ()

    @property
    def verdict(self) -> codes.Verdict:
        changed = bool(self.changes.files) or not self.changes.filtering
        return codes.verdict_of(
            {result.outcome for result in self.results}, failed=bool(self.errors),
            unverified_fails=changed and self.contract.settings.fail_when_unverified)


def prepare(request: RunRequest) -> Plan:
    """Load the contract, compute the change set and select the gates (docs: The contract,
    The change set).

    Raises ``ContractError`` / ``ChangeSetError`` (one line each) for what a user can fix.
    """
    if not request.work_set_aside:
        from pytest_verifygate.git.set_aside import put_back

        put_back(request.start or Path.cwd(), warn)
    if request.bound_by is None:
        contract = load_contract(request.contract, start=request.start,
                                 flag=request.contract_flag)
    else:
        from pytest_verifygate.contract.revision import load_contract_since

        contract = load_contract_since(request.bound_by, request.contract, start=request.start,
                                       flag=request.contract_flag)
    if isinstance(request.changes, ChangeSet):
        changes = request.changes
    else:
        changes = compute_changes(contract.root, request.changes,
                                  settings_changed_from=contract.settings.changed_from,
                                  cwd=request.start)
    selections = select_gates(contract, changes, role=request.role, phase=request.phase)
    if request.names:
        from pytest_verifygate.contract import display_path

        selections = only_named(selections, request.names, display_path(contract.path))
    pattern_warnings = tuple(unmatched_pattern_warnings(contract, selections))
    shard_warnings: tuple[str, ...] = ()
    if request.shard is not None:
        from pytest_verifygate.shards import shard_selections

        selections, warning = shard_selections(contract, selections, request.shard)
        shard_warnings = (warning,) if warning else ()
    return Plan(contract, changes, tuple(selections), effective_jobs(request.jobs, contract),
                request.read_cache, shard=request.shard, shard_warnings=shard_warnings,
                pattern_warnings=pattern_warnings)


def change_set(request: RunRequest, root: Path) -> ChangeSet:
    """The change set ``request`` asks for, for the project at ``root``, without a contract:
    what a front end still needs to know when the contract cannot be loaded (the agent hook
    fails closed only if the session changed something)."""
    if isinstance(request.changes, ChangeSet):
        return request.changes
    return compute_changes(root, request.changes, cwd=request.start)


def gate_timeouts(contract_path: Path) -> dict[str, float]:
    """Each gate's ``timeout_seconds`` in the contract at ``contract_path``."""
    return {gate.name: gate.timeout_seconds for gate in load_contract(contract_path).gates}


def effective_jobs(jobs: int | None, contract: Contract) -> int:
    """``--jobs`` if given, else the contract's setting; 0 means one per CPU."""
    value = contract.settings.jobs if jobs is None else jobs
    return value if value > 0 else (os.cpu_count() or 1)


def start(
    plan: Plan,
    gate_plans: Sequence[GatePlan] | None = None,
    *,
    jobs: int | None = None,
    hook: GateHooks | None = None,
    on_started: GateCallback | None = None,
    on_finished: ResultCallback | None = None,
    log_dir: Path | None = None,
) -> GateRunner:
    """Start the gates of ``gate_plans`` (default: every selected gate) and return the runner.

    They start in the contract's order (with more than one job, the longest first: see
    ``start_order``), after the gates they need (a need that is not among ``gate_plans`` does
    not hold a gate back), exclusive gates alone. For front ends that take results one by one
    (pytest items): ``runner.result(name)`` waits for one gate; ``runner.close()`` kills what
    still runs. ``hook`` is a pluggy ``HookRelay`` with our hookspecs: the classify, started
    and finished hooks are called. What it finds to say goes to ``notices``.
    """
    runner = _runner(plan, gate_plans, jobs=jobs, hook=hook, on_started=on_started,
                     on_finished=on_finished, log_dir=log_dir)
    try:
        runner.start()
    except BaseException:
        runner.close()
        raise
    return runner


def _runner(
    plan: Plan,
    gate_plans: Sequence[GatePlan] | None,
    *,
    jobs: int | None,
    hook: GateHooks | None,
    on_started: GateCallback | None,
    on_finished: ResultCallback | None,
    log_dir: Path | None,
) -> GateRunner:
    """A runner for ``gate_plans``, wired to the pluggy hooks, not started yet."""
    from pytest_verifygate.report.redact import redactor_for
    from pytest_verifygate.runner.scheduler import GateRunner, needs_process
    from pytest_verifygate.state.storage import new_log_dir

    def classify_hook(gate: Gate, result: GateResult) -> str | None:
        return None if hook is None else hook.pytest_verifygate_classify(gate=gate, result=result)

    def started(gate: Gate) -> None:
        if hook is not None:
            hook.pytest_verifygate_gate_started(gate=gate)
        if on_started is not None:
            on_started(gate)

    def finished(gate: Gate, result: GateResult) -> None:
        if hook is not None:
            hook.pytest_verifygate_gate_finished(gate=gate, result=result)
        if on_finished is not None:
            on_finished(gate, result)

    contract = plan.contract
    plans = (plan.gate_plans() if gate_plans is None
             else in_contract_order(gate_plans, contract))
    jobs = plan.jobs if jobs is None else jobs
    # Logs are sinks too: a gate's log holds its output with the report's secrets masked.
    redactor = redactor_for(contract.gates)
    if log_dir is None and any(needs_process(gate_plan) for gate_plan in plans):
        log_dir = new_log_dir(contract.repo_root)
    # A run answered from the cache makes no log directory: it would cost a directory and a
    # pruning pass, and push the logs of runs that did run out of the last few kept.
    return GateRunner(
        plans,
        jobs=jobs,
        start_order=start_order(contract, plans, jobs),
        tail_bytes=contract.settings.output_tail_bytes,
        log_dir=log_dir,
        classify_hook=classify_hook if hook is not None else None,
        on_started=started,
        on_finished=finished,
        log_max_bytes=contract.settings.log_max_bytes,
        log_filter=redactor.stream_masker,
        store_passes=_store_passes if any(plan.cache for plan in plans) else None,
    )


def _store_passes(passes: list[tuple[CacheSlot, GateResult]]) -> None:
    from pytest_verifygate.result_cache import store  # only when some gate caches its passes

    store(passes)


def start_order(contract: Contract, gate_plans: Sequence[GatePlan], jobs: int
                ) -> list[str] | None:
    """The order to start gates in when more than one runs at once: the longest first, by
    the durations earlier runs recorded (``state/durations.py``), so that a long gate is not left to
    start when the others are done. None (declared order) with one job: then the order is
    all a contract says (middle's and openTiger's files run that way by default), and the
    total time is the same in any order."""
    from pytest_verifygate.runner.scheduler import needs_process

    # Gates answered from the cache, skipped or pending start nothing: a run of one process
    # or none has no order to choose, and reads no durations.
    running = [gate_plan.gate.name for gate_plan in gate_plans if needs_process(gate_plan)]
    if jobs <= 1 or len(running) < 2:
        return None
    from pytest_verifygate.state.durations import planned_order

    return planned_order(contract, running)


def in_contract_order(gate_plans: Sequence[GatePlan], contract: Contract) -> list[GatePlan]:
    """``gate_plans`` in the contract's order, whatever order a front end asked for them in
    (pytest's items may be reordered): results come back in this order, and gates start in it
    unless ``start_order`` says otherwise (see the scheduler)."""
    position = {gate.name: index for index, gate in enumerate(contract.gates)}
    return sorted(gate_plans, key=lambda gate_plan: position.get(gate_plan.gate.name,
                                                                len(position)))


def run(
    plan: Plan,
    *,
    hook: GateHooks | None = None,
    on_started: GateCallback | None = None,
    on_finished: ResultCallback | None = None,
) -> RunResult:
    """Run the selected gates and wait for all of them; what the run found to say (its state
    files, its logs) is the result's ``warnings``, none of the plan's.

    Ctrl-C (KeyboardInterrupt, or a signal turned into one) stops every running gate's
    process group; the gates that had not finished are ``interrupted`` and the returned
    result says so (it is not re-raised).
    """
    from pytest_verifygate.signals import hold_interrupts

    with collecting() as found:
        runner = _runner(plan, None, jobs=None, hook=hook, on_started=on_started,
                         on_finished=on_finished, log_dir=None)
        interrupted = False
        try:
            runner.start()
            results = runner.results()
            hold_interrupts()  # the gates are done: a signal from here on must not cost the report
        except KeyboardInterrupt:
            interrupted = True
            runner.cancel()
            results = runner.results()
        finally:
            runner.close()
        finished = RunResult(plan.contract, plan.changes, plan.selections, tuple(results),
                             interrupted, shard=plan.shard)
        record(finished)
    return finished._replace(warnings=tuple(w for w in found if w not in plan.warnings))


def record(run: RunResult) -> None:
    """Remember what a finished run measured (each gate's duration) for the next runs' shards.

    Not a shard's run: every shard of a split must read the same durations, also when they
    run one after another on one machine (``verifygate merge`` records the whole run's).
    """
    if run.shard is not None:
        return
    from pytest_verifygate.state import durations

    contract = run.contract
    durations.record_durations(contract.repo_root, durations.contract_key(contract),
                               durations.measured_seconds(r._asdict() for r in run.results),
                               [gate.name for gate in contract.gates])


def run_gates(
    contract: Contract,
    selections: Sequence[Selection],
    changes: ChangeSet,
    *,
    jobs: int | None = None,
    hook: GateHooks | None = None,
    on_started: GateCallback | None = None,
    on_finished: ResultCallback | None = None,
    read_cache: bool = True,
) -> RunResult:
    """``run`` for callers that loaded, computed and selected themselves (the Python API).

    ``read_cache=False`` runs gates with ``cache = true`` even when a pass is stored for
    their inputs (a new pass is still stored).
    """
    plan = Plan(contract, changes, tuple(selections), effective_jobs(jobs, contract), read_cache)
    return run(plan, hook=hook, on_started=on_started, on_finished=on_finished)


def report(run: RunResult, hook: GateHooks | None = None, *,
           redactor: Redactor | None = None) -> Report:
    """The JSON report (docs: JSON report) of a finished run: the one place it is assembled.

    With ``hook`` (a pluggy ``HookRelay``), plugins get ``pytest_verifygate_modifyreport``
    on it before it is returned.
    """
    from pytest_verifygate.report.document import build_report

    document = build_report(contract=run.contract, changes=run.changes,
                            selections=run.selections, results=run.results,
                            verdict=run.verdict, interrupted=run.interrupted, redactor=redactor)
    # What the run itself found (its state files, its logs) is for every reader of the report.
    document["warnings"] = list(dict.fromkeys([*document["warnings"], *run.warnings]))
    if run.errors:
        document["errors"] = list(run.errors)
    if run.shard is not None:
        from pytest_verifygate.report.document import shard_entry

        # What ``verifygate merge`` checks the shards by, and puts their gates in order by.
        document["shard"] = shard_entry(run.contract, run.shard.number, run.shard.total)
    if hook is not None:
        hook.pytest_verifygate_modifyreport(report=document)
    return document


# The public API's name for ``report``.
to_report = report


def listed_gates(plan: Plan) -> list[dict[str, Any]]:
    """One row per gate in contract order: ``name``, ``selected``, ``runs`` (whether ``run``
    would start it), ``reason``, ``argv`` (the argvs ``run`` would spawn, ``{files}``
    expanded; empty when it spawns none) and the text form's ``mark`` (run, skip, pend).
    What the result cache has to say goes to ``notices``."""
    planned = {gate_plan.gate.name: gate_plan
               for gate_plan in (plan.gate_plans() if plan.selected else ())}
    rows: list[dict[str, Any]] = []
    for selection in plan.selections:
        name, reason = selection.gate.name, selection.reason
        gate_plan = planned.get(name)
        mark, runs = ("run", True) if selection.selected else ("skip", False)
        if gate_plan is not None and gate_plan.skip_reason is not None:
            mark, runs, reason = "skip", False, f"{gate_plan.skip_reason} ({reason})"
        elif gate_plan is not None and gate_plan.pending_reason is not None:
            mark, runs, reason = "pend", False, f"{gate_plan.pending_reason} ({reason})"
        elif gate_plan is not None and gate_plan.cache is not None and gate_plan.cache.hit:
            runs, reason = False, f"{reason}; cached: the pass stored for these inputs is reused"
        argv = ([list(invocation) for invocation in gate_plan.invocations]
                if gate_plan is not None and runs else [])
        rows.append({"name": name, "selected": selection.selected, "runs": runs,
                     "reason": reason, "argv": argv, "mark": mark})
    return rows
