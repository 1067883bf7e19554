"""The scheduler: planned gates on up to ``jobs`` threads in ``run_order``, with retries, each
result's outcome and code, cached passes stored, callbacks and cancelling.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import graphlib
import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pytest_verifygate import codes
from pytest_verifygate.commands import MIN_CHUNK_FILES
from pytest_verifygate.runner import fixers
from pytest_verifygate.runner.logfile import DEFAULT_LOG_MAX_BYTES, GateLog
from pytest_verifygate.runner.process import (
    HELD_OUTPUT_REASON,
    AttemptEnd,
    OutputFilter,
    OutputSink,
    run_commands,
)
from pytest_verifygate.runner.records import CacheSlot, GatePlan, GateResult, bare_result
from pytest_verifygate.runner.tree import monotonic
from pytest_verifygate.runner.watchdog import Watchdog
from pytest_verifygate.state.storage import claim_log_dir, log_file_name, make_private_dir

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_verifygate.contract import Gate

BACKOFF_BASE_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 8.0
# How long a wait for a result blocks at a time: short, so Ctrl-C reaches the main thread.
WAIT_STEP_SECONDS = 0.5


class GateRunner:
    """Runs planned gates concurrently; results can be awaited one by one or all together."""

    def __init__(
        self,
        plans: Sequence[GatePlan],
        *,
        jobs: int,
        tail_bytes: int = 65536,
        log_dir: Path | None = None,
        classify_hook: Callable[[Gate, GateResult], str | None] | None = None,
        on_started: Callable[[Gate], None] | None = None,
        on_finished: Callable[[Gate, GateResult], None] | None = None,
        log_max_bytes: int = DEFAULT_LOG_MAX_BYTES,
        start_order: Sequence[str] | None = None,
        log_filter: Callable[[], OutputFilter] | None = None,
        store_passes: Callable[[list[tuple[CacheSlot, GateResult]]], object] | None = None,
    ) -> None:
        self.plans = list(plans)  # in contract order: the order results are returned in
        self.start_order = start_order
        self.jobs = max(1, jobs)
        self.tail_bytes = tail_bytes
        self.log_dir = log_dir
        self.log_max_bytes = log_max_bytes
        self.log_filter = log_filter  # a fresh secret masker per attempt: logs are sinks too
        self.store_passes = store_passes  # the result cache's, for gates that keep passes
        self._release_log_dir = claim_log_dir(None)
        self.classify_hook = classify_hook
        self.on_started = on_started
        self.on_finished = on_finished
        self.cancelled = threading.Event()
        # Taken here, in the thread that makes the runner: see ``process._run_command``.
        self.base_env = dict(os.environ)
        self._by_name = {plan.gate.name: plan for plan in self.plans}
        # Guarded by ``_ready`` (notified whenever a gate ends). ``_running``: name -> exclusive;
        # ``_done``: a result, or the exception that ended its worker.
        self._ready = threading.Condition()
        self._waiting: list[GatePlan] = []
        self._running: dict[str, bool] = {}
        self._done: dict[str, GateResult | BaseException] = {}
        self._needs: dict[str, tuple[str, ...]] = {}
        # Cores the running gates' processes take (``_lanes``): name -> how many.
        self._cores = available_cores()
        self._lanes: dict[str, int] = {}
        self._workers: list[threading.Thread] | None = None
        self._callback_lock = threading.Lock()
        self._watchdog = Watchdog()  # ends the gates' trees even if this process cannot
        # Passes of gates with caching on, stored when the run ends: one look at the files
        # after the last gate tells for every gate that its inputs held while it ran.
        self._passes: list[tuple[CacheSlot, GateResult]] = []

    def start(self) -> None:
        """Queue every gate; up to ``jobs`` run at once, the rest wait their turn."""
        if self._workers is not None:
            return
        self._workers = []
        if self.log_dir is not None:
            # One that cannot be made fails each gate as it opens its log.
            with contextlib.suppress(OSError):
                make_private_dir(self.log_dir)
            # No run prunes it while this one may still write there (released by close).
            self._release_log_dir = claim_log_dir(self.log_dir)
        ordered = run_order(self.plans, self.start_order)
        placed: set[str] = set()
        for plan in ordered:
            # Only needs placed before it: a circle can never hold a gate back for ever.
            self._needs[plan.gate.name] = tuple(need for need in plan.gate.needs if need in placed)
            placed.add(plan.gate.name)
        # Announced before any worker looks at their needs; a Ctrl-C raised from a callback
        # leaves the rest to ``result``, as interrupted.
        for plan in self.plans:
            if not needs_process(plan):
                self._deliver(plan, self._finish(plan, _static_result(plan)))
        self._waiting = [plan for plan in ordered if needs_process(plan)]
        # Not an executor: a worker picks its next gate by needs (``_pick``), which a queue cannot.
        for index in range(min(self.jobs, len(self._waiting))):
            worker = threading.Thread(target=self._work, name=f"gate-{index}")
            self._workers.append(worker)
            worker.start()

    def _deliver(self, plan: GatePlan, outcome: GateResult | BaseException) -> None:
        with self._ready:
            self._running.pop(plan.gate.name, None)
            self._lanes.pop(plan.gate.name, None)
            self._done.setdefault(plan.gate.name, outcome)
            self._ready.notify_all()

    def _work(self) -> None:
        while (picked := self._next_gate()) is not None:
            plan, held_back, lanes = picked
            outcome: GateResult | BaseException
            try:
                outcome = (self._run_plan(plan, lanes) if held_back is None
                           else self._finish(plan, held_back))
            except BaseException as exc:  # handed to whoever waits for this gate
                outcome = exc
            self._deliver(plan, outcome)

    def _next_gate(self) -> tuple[GatePlan, GateResult | None, int] | None:
        """The next gate (None: none is left), its skip result if a gate it needs did not
        pass, and how many processes its files may run in at once; blocks while every waiting
        gate must wait."""
        with self._ready:
            while self._waiting:
                picked = self._pick()
                if picked is not None:
                    index, held_back = picked
                    plan = self._waiting.pop(index)
                    lanes = 1
                    if held_back is None:
                        self._running[plan.gate.name] = plan.gate.exclusive
                        lanes = self._lanes[plan.gate.name] = self._free_cores(plan)
                    return plan, held_back, lanes
                # Woken when a gate ends; the timeout re-checks a cancel made without a notify.
                self._ready.wait(WAIT_STEP_SECONDS)
            return None

    def _pick(self) -> tuple[int, GateResult | None] | None:
        """Which waiting gate may start now (its index); called with ``_ready`` held."""
        if self.cancelled.is_set():
            return 0, None  # it ends as interrupted without starting
        if any(self._running.values()):
            return None  # an exclusive gate runs alone
        for index, plan in enumerate(self._waiting):
            unfinished = False
            for need in self._needs[plan.gate.name]:
                ended = self._done.get(need)
                if ended is None:
                    unfinished = True
                    break
                if not isinstance(ended, GateResult) or ended.outcome != codes.PASSED:
                    return index, _held_back(plan, need, ended)
            if plan.gate.exclusive:
                # After every gate before it; no gate after it starts first.
                alone = index == 0 and not self._running and not unfinished
                return (index, None) if alone else None
            if not unfinished:
                return index, None
        return None

    def _free_cores(self, plan: GatePlan) -> int:
        """The cores a gate's chunks may take: the free ones, shared with the gates that can
        start beside it now (pre-commit runs one hook's chunks on every core, #851); one for a
        gate that is ``serial``, ``exclusive`` or has too few files to split. Called with
        ``_ready`` held, after ``plan`` left ``_waiting``."""
        gate = plan.gate
        if gate.serial or gate.exclusive or len(plan.file_args) <= MIN_CHUNK_FILES:
            return 1
        free = self._cores - sum(self._lanes.values())
        idle = self.jobs - len(self._running)
        return max(1, free // (1 + min(idle, len(self._waiting))))

    def result(self, name: str) -> GateResult:
        """Wait for one gate's result, starting the run if needed."""
        self.start()
        plan = self._by_name[name]
        while True:
            with self._ready:
                # Woken when a gate ends; the timeout lets Ctrl-C reach the main thread.
                self._ready.wait_for(lambda: name in self._done, WAIT_STEP_SECONDS)
                done = self._done.get(name)
                idle = not any(worker.is_alive() for worker in self._workers or ())
            if isinstance(done, BaseException):
                raise done
            if done is not None:
                return done
            if idle:  # nobody is left to announce it: a Ctrl-C cut start() short
                self._deliver(plan, self._finish(plan, _not_started(plan)))

    def results(self) -> list[GateResult]:
        """Wait for every gate; results in plan (contract) order."""
        return [self.result(plan.gate.name) for plan in self.plans]

    def cancel(self) -> None:
        """Stop everything: running gates are killed, waiting gates never start."""
        self.cancelled.set()
        # Never blocks (on Ctrl-C this thread may hold the lock): a worker re-checks within
        # WAIT_STEP_SECONDS anyway.
        if self._ready.acquire(blocking=False):
            try:
                self._ready.notify_all()
            finally:
                self._ready.release()

    def close(self) -> None:
        """Cancel what is still running, wait for the worker threads to finish and store the
        passes the result cache keeps."""
        if self._workers is None:
            return
        if len(self._done) < len(self.plans):
            self.cancel()
        for worker in self._workers:
            if worker.ident is not None:  # a Ctrl-C may have come before it was started
                worker.join()
        self._watchdog.close()
        passes, self._passes = self._passes, []
        if passes and self.store_passes is not None:
            self.store_passes(passes)
        self._release_log_dir()

    def __enter__(self) -> GateRunner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run_plan(self, plan: GatePlan, lanes: int = 1) -> GateResult:
        gate = plan.gate
        if self.cancelled.is_set():
            return self._finish(plan, _not_started(plan))
        if self.on_started is not None:
            with self._callback_lock:
                self.on_started(gate)
        log_path = None if self.log_dir is None else self.log_dir / log_file_name(gate.name)
        started, clock = time.time(), monotonic()
        before = fixers.stamps(plan.root, plan.given_files)
        for attempts in itertools.count(1):
            result = self._attempt(plan, log_path, attempts - 1, lanes)
            changed = fixers.modified(plan.root, before)
            if changed:  # never retried: a second run would check what the first one fixed
                result = _modified(result, changed)
                break
            if not result.failed or attempts > gate.retries or result.code in codes.NOT_RETRIED:
                break
            delay = min(BACKOFF_BASE_SECONDS * 2 ** (attempts - 1), BACKOFF_MAX_SECONDS)
            if self.cancelled.wait(delay):
                # Interrupted, not failed, as a gate cut short during an attempt is.
                result = result._replace(code=codes.INTERRUPTED,
                                         reason="the run was interrupted between two attempts")
                break
        duration = monotonic() - clock
        result = result._replace(
            attempts=attempts,
            duration_s=round(duration, 3),
            started_at=started,
            finished_at=started + duration,
            flaky=result.outcome == codes.PASSED and attempts > 1,  # a pass ends the retries
        )
        if plan.cache is not None and result.outcome == codes.PASSED:
            self._passes.append((plan.cache, result))  # stored by ``close``
        return self._finish(plan, result)

    def _finish(self, plan: GatePlan, result: GateResult) -> GateResult:
        if self.on_finished is not None:
            with self._callback_lock:
                self.on_finished(plan.gate, result)
        return result

    def _attempt(self, plan: GatePlan, log_path: Path | None, attempt_number: int,
                 lanes: int = 1) -> GateResult:
        if plan.unsupported is not None:
            return bare_result(plan, codes.FAILED, codes.UNSUPPORTED_FORMAT,
                               output=f"verifygate: {plan.unsupported}\n")
        masker = self.log_filter() if self.log_filter else None  # before the log is opened
        log = None if log_path is None else GateLog(log_path, attempt_number, self.log_max_bytes)
        sink = OutputSink(log, self.tail_bytes, masker)
        try:
            end = run_commands(plan, sink, self.cancelled, self.base_env, self._watchdog, lanes)
        finally:
            sink.close_log()
        output, truncated = sink.text()
        result = bare_result(plan, codes.PASSED, None, output)._replace(
            output_truncated=truncated, output_bytes=sink.total, exit_code=end.exit_code,
            signal=end.signal, log_path=str(log.path) if log is not None and log.created else None,
        )
        if end.interrupted:
            return result._replace(outcome=codes.FAILED, code=codes.INTERRUPTED)
        if end.timed_out:
            return result._replace(outcome=codes.FAILED, code=codes.TIMEOUT)
        if end.spawn_failed:
            return result._replace(outcome=codes.FAILED, code=codes.SETUP_OR_BOOTSTRAP_ISSUE)
        if end.exit_code == 0:
            # Passed, but not quietly: the summary line says what was left behind.
            return result._replace(reason=HELD_OUTPUT_REASON) if end.output_held else result
        return self._classified(plan, result, end)

    def _classified(self, plan: GatePlan, result: GateResult, end: AttemptEnd) -> GateResult:
        """A failed command's result with its code (the classifier's, or the hook's); a missing
        tool or target is a skip where the gate says so."""
        from pytest_verifygate.classify import Failure, classify  # only when a gate failed

        argv = plan.invocations[0] if plan.invocations else ()
        # The gate declared before: a clean step makes an artifact check's failure a sequence_issue.
        index = self.plans.index(plan)
        previous = (self.plans[index - 1].invocations or ((),))[0] if index else ()
        # Each chunk run at once is judged on its own output: a chunk that found no tests says
        # nothing of another that failed, and a real failure in any chunk fails the gate.
        failures = end.chunk_failures or ((result.exit_code, result.signal, result.output_tail),)
        judged = [(classify(Failure(exit_code, signal, output, argv, plan.cwd, previous)),
                   exit_code, signal) for exit_code, signal, output in failures]
        real = [item for item in judged if item[0] not in codes.MISSING_CODES]
        if not real and end.chunk_passed and {item[0] for item in judged} == {
                codes.NO_TEST_FILES}:
            return result._replace(exit_code=0, signal=None)  # other chunks ran the tests
        code, exit_code, signal = (real or judged)[0]
        result = result._replace(outcome=codes.FAILED, code=code, exit_code=exit_code,
                                 signal=signal)
        if self.classify_hook is not None:
            override = self.classify_hook(plan.gate, result)
            if override is not None:
                if override not in codes.CODES:
                    raise ValueError(
                        f"pytest_verifygate_classify returned {override!r}; expected one of "
                        f"{', '.join(codes.CODES)}"
                    )
                result = result._replace(code=override)
        if result.code in codes.MISSING_CODES and plan.gate.on_missing == "skip":
            return result._replace(outcome=codes.SKIPPED,
                                   reason=f"{result.code} (on_missing = \"skip\")")
        return result


def available_cores() -> int:
    """The CPUs this process may run on (its affinity: a container's share, ``taskset``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def run_order(plans: Sequence[GatePlan],
              start_order: Sequence[str] | None = None) -> list[GatePlan]:
    """``plans`` in the order they start: between two exclusive gates in ``start_order``
    (unnamed gates last), else as given; then each gate after the gates it needs."""
    remaining = list(plans)
    if start_order:  # sorted within each stretch between exclusive gates (a stable sort)
        place = {name: index for index, name in enumerate(start_order)}
        remaining = []
        for exclusive, stretch in itertools.groupby(plans, key=lambda plan: plan.gate.exclusive):
            if exclusive:
                remaining += stretch
            else:
                remaining += sorted(stretch, key=lambda plan: place.get(plan.gate.name, len(place)))
    position = {plan.gate.name: index for index, plan in enumerate(remaining)}
    sorter: graphlib.TopologicalSorter[int] = graphlib.TopologicalSorter()
    for index, plan in enumerate(remaining):
        sorter.add(index, *(position[need] for need in plan.gate.needs
                            if need in position and need != plan.gate.name))
    try:
        sorter.prepare()
    except graphlib.CycleError:  # a circle of needs (the contract loader refuses them)
        return remaining
    # Always the earliest ready gate, so that everything else keeps its place.
    ready = list(sorter.get_ready())
    heapq.heapify(ready)
    ordered: list[GatePlan] = []
    while ready:
        index = heapq.heappop(ready)
        ordered.append(remaining[index])
        sorter.done(index)
        for other in sorter.get_ready():
            heapq.heappush(ready, other)
    return ordered


def _held_back(plan: GatePlan, need: str, ended: GateResult | BaseException) -> GateResult:
    """The result of a gate that does not start because ``need`` did not pass."""
    if isinstance(ended, BaseException):  # its thread raised
        how = "failed"
    elif ended.code == codes.INTERRUPTED:
        how = "was interrupted"
    else:
        how = {codes.FAILED: "failed", codes.PENDING: "is pending"}.get(ended.outcome,
                                                                        "was skipped")
    return bare_result(plan, codes.SKIPPED, None)._replace(reason=f"needs {need!r}, which {how}")


def _modified(result: GateResult, changed: tuple[str, ...]) -> GateResult:
    """``result`` failed because the gate changed files it was given (``fixers``)."""
    message = fixers.describe(changed)
    output = result.output_tail
    if output and not output.endswith("\n"):
        output += "\n"
    return result._replace(outcome=codes.FAILED, code=result.code or codes.COMMAND_FAILED,
                           output_tail=f"{output}verifygate: {message}\n", reason=message,
                           modified_files=changed)


def needs_process(plan: GatePlan) -> bool:
    """Whether the plan runs anything (it is not skipped, pending or cached)."""
    cached = plan.cache is not None and plan.cache.hit is not None
    return plan.skip_reason is None and plan.pending_reason is None and not cached


def _static_result(plan: GatePlan) -> GateResult:
    """The result of a gate that runs nothing: a reused pass, pending or skipped."""
    if plan.cache is not None and plan.cache.hit is not None:
        return plan.cache.hit
    if plan.pending_reason is not None:
        return bare_result(plan, codes.PENDING, None)._replace(reason=plan.pending_reason)
    return bare_result(plan, codes.SKIPPED, None)._replace(reason=plan.skip_reason)


def _not_started(plan: GatePlan) -> GateResult:
    return bare_result(plan, codes.FAILED, codes.INTERRUPTED)._replace(
        reason="the run was interrupted before it started")
