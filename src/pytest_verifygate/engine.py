"""The one engine behind every front end: contract -> changes -> selection -> plan -> run.

The CLI, the pytest plugin, the pre-commit hook and the agent hook all call these functions;
none of them re-implements selection, running or classification. This module is also the
public Python API for orchestrators (re-exported from ``pytest_verifygate``).
"""

import os
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_verifygate.changes import ChangeSet, all_files
from pytest_verifygate.commands import UnsupportedCommand, expand, parse_command
from pytest_verifygate.contract import Contract, Gate
from pytest_verifygate.runner import GatePlan, GateResult, GateRunner
from pytest_verifygate.selection import Selection, files_for_gate
from pytest_verifygate.storage import new_log_dir

if TYPE_CHECKING:
    from pytest_verifygate.cache import RepoFiles

VERDICT_PASSED = "passed"
VERDICT_FAILED = "failed"
VERDICT_PENDING = "pending"
VERDICT_UNVERIFIED = "unverified"
MAX_DISPLAY_ARGS = 50


class RunResult(NamedTuple):
    """Everything a report needs about one run."""

    contract: Contract
    changes: ChangeSet
    selections: tuple[Selection, ...]
    results: tuple[GateResult, ...]
    interrupted: bool = False

    @property
    def verdict(self) -> str:
        return verdict_of(self.results, self.changes, self.contract.settings.fail_when_unverified)


def verdict_of(
    results: Sequence[GateResult], changes: ChangeSet, fail_when_unverified: bool = False
) -> str:
    """SPEC 5: failed > pending > unverified (no gate ran) > passed."""
    outcomes = {result.outcome for result in results}
    if "failed" in outcomes:
        return VERDICT_FAILED
    if "pending" in outcomes:
        return VERDICT_PENDING
    if "passed" not in outcomes:
        has_changes = bool(changes.files) or not changes.filtering
        if fail_when_unverified and has_changes:
            return VERDICT_FAILED
        return VERDICT_UNVERIFIED
    return VERDICT_PASSED


def effective_jobs(jobs: int | None, contract: Contract) -> int:
    """``--jobs`` if given, else the contract's setting; 0 means one per CPU."""
    value = contract.settings.jobs if jobs is None else jobs
    return value if value > 0 else (os.cpu_count() or 1)


def plan_gates(
    contract: Contract, selections: Sequence[Selection], *, read_cache: bool = True,
) -> list[GatePlan]:
    """Turn the selected gates into plans: argvs to spawn, or why not to spawn them.

    A gate with ``cache = true`` gets a cache slot; with ``read_cache`` a pass stored for
    the same inputs resolves the plan without spawning anything (see ``cache.py``).
    """
    plans: list[GatePlan] = []
    tracked: tuple[str, ...] | None = None
    repo_files: RepoFiles | None = None
    for selection in selections:
        if not selection.selected:
            continue
        gate = selection.gate
        cwd = (contract.root / gate.cwd).resolve()
        if gate.kind == "manual":
            plans.append(GatePlan(gate, cwd, display_command=_display(gate.command_text),
                                  pending_reason="manual gate: awaits human sign-off"))
            continue
        try:
            parsed = parse_command(gate.command, shell=gate.shell)
        except UnsupportedCommand as exc:
            plans.append(GatePlan(gate, cwd, display_command=_display(gate.command_text),
                                  unsupported=str(exc)))
            continue
        files: list[str] = []
        if parsed.uses_files:
            if selection.matched_files is not None:
                candidates: Sequence[str] = selection.matched_files
            else:
                if tracked is None:
                    tracked = all_files(contract.root)
                candidates = files_for_gate(gate, tracked)
            files = [
                _relative_to_cwd(path, contract.root, cwd)
                for path in candidates
                if os.path.lexists(contract.root / path)
            ]
            if not files:
                plans.append(GatePlan(gate, cwd, display_command=_display(gate.command_text),
                                      skip_reason="no matching files for {files}"))
                continue
        invocations = tuple(tuple(argv) for argv in expand(parsed, files))
        plan = GatePlan(
            gate,
            cwd,
            invocations=invocations,
            env={**gate.env, **parsed.env},
            display_command=_truncated(invocations[0]),
        )
        if gate.cache:
            from pytest_verifygate import cache  # only when some gate caches its passes

            repo_files = repo_files or cache.RepoFiles(contract.root)
            plan = cache.attach(contract, plan, repo_files, read=read_cache)
        plans.append(plan)
    return plans


def _relative_to_cwd(path: str, root: Path, cwd: Path) -> str:
    relative = os.path.relpath(root / path, cwd) if cwd != root else path
    # A file named "-rf" must never read as an option, wherever {files} stands.
    return "./" + relative if relative.startswith("-") else relative


def _display(command: str) -> tuple[str, ...]:
    try:
        return _truncated(shlex.split(command))
    except ValueError:
        return (command,)


def _truncated(argv: Sequence[str]) -> tuple[str, ...]:
    if len(argv) <= MAX_DISPLAY_ARGS:
        return tuple(argv)
    hidden = len(argv) - MAX_DISPLAY_ARGS
    return (*argv[:MAX_DISPLAY_ARGS], f"... ({hidden} more arguments)")


def make_runner(
    contract: Contract,
    plans: Sequence[GatePlan],
    *,
    jobs: int | None = None,
    hook: Any = None,
    on_started: Callable[[Gate], None] | None = None,
    on_finished: Callable[[Gate, GateResult], None] | None = None,
    log_dir: Path | None = None,
) -> GateRunner:
    """A ``GateRunner`` wired to the pluggy hooks (``hook`` is a pluggy ``HookRelay``)."""

    def classify_hook(gate: Gate, result: GateResult) -> str | None:
        code: str | None = hook.pytest_verifygate_classify(gate=gate, result=result)
        return code

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

    return GateRunner(
        plans,
        jobs=effective_jobs(jobs, contract),
        tail_bytes=contract.settings.output_tail_bytes,
        log_dir=log_dir if log_dir is not None else new_log_dir(contract.repo_root),
        classify_hook=classify_hook if hook is not None else None,
        on_started=started,
        on_finished=finished,
    )


def run_gates(
    contract: Contract,
    selections: Sequence[Selection],
    changes: ChangeSet,
    *,
    jobs: int | None = None,
    hook: Any = None,
    on_started: Callable[[Gate], None] | None = None,
    on_finished: Callable[[Gate, GateResult], None] | None = None,
    read_cache: bool = True,
) -> RunResult:
    """Run the selected gates and wait for all of them.

    Ctrl-C (KeyboardInterrupt) stops every running gate's process group; the gates that had
    not finished are ``interrupted`` and the returned result says so (it is not re-raised).
    ``read_cache=False`` runs gates with ``cache = true`` even when a pass is stored for
    their inputs (a new pass is still stored).
    """
    plans = plan_gates(contract, selections, read_cache=read_cache)
    runner = make_runner(contract, plans, jobs=jobs, hook=hook, on_started=on_started,
                         on_finished=on_finished)
    interrupted = False
    try:
        runner.start()
        results = runner.results()
    except KeyboardInterrupt:
        interrupted = True
        runner.cancel()
        results = runner.results()
    finally:
        runner.close()
    return RunResult(contract, changes, tuple(selections), tuple(results), interrupted)
