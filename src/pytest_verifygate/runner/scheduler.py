"""The scheduler: planned gates run on up to ``jobs`` threads, each result awaited by name.

Owns what happens around each attempt: retries with backoff, turning how an attempt ended into
an outcome and a code (the classifier, then the ``pytest_verifygate_classify`` hook, then the
gate's ``on_missing``), storing a cacheable pass, the start/finish callbacks, and cancelling.
The attempt itself (spawning, output, deadlines, signals) is ``runner.process``'s.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pytest_verifygate import codes
from pytest_verifygate.runner.process import run_attempt
from pytest_verifygate.runner.records import GatePlan, GateResult, bare_result

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_verifygate.contract import Gate

BACKOFF_BASE_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 8.0
# How long a wait for a result blocks at a time: short, so Ctrl-C reaches the main thread.
WAIT_STEP_SECONDS = 0.5

ClassifyHook = Callable[["Gate", GateResult], str | None]
GateCallback = Callable[["Gate", GateResult], None]
StartCallback = Callable[["Gate"], None]


class _ResultSlot:
    """Where one gate's result (or the exception that ended its thread) is handed over.

    ``concurrent.futures.Future`` would do, but importing it loads ``logging``: several
    milliseconds on every ``verifygate run`` (every commit), for three methods' worth of use.
    """

    def __init__(self) -> None:
        self.done = threading.Event()
        self._result: GateResult | None = None
        self._error: BaseException | None = None

    def set(self, result: GateResult) -> None:
        self._result = result
        self.done.set()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self.done.set()

    def value(self) -> GateResult:
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


class GateRunner:
    """Runs planned gates concurrently; results can be awaited one by one or all together."""

    def __init__(
        self,
        plans: Sequence[GatePlan],
        *,
        jobs: int,
        tail_bytes: int = 65536,
        log_dir: Path | None = None,
        classify_hook: ClassifyHook | None = None,
        on_started: StartCallback | None = None,
        on_finished: GateCallback | None = None,
    ) -> None:
        self.plans = list(plans)
        self.jobs = max(1, jobs)
        self.tail_bytes = tail_bytes
        self.log_dir = log_dir
        self.classify_hook = classify_hook
        self.on_started = on_started
        self.on_finished = on_finished
        self.cancelled = threading.Event()
        # Taken here, in the thread that makes the runner: see ``process.spawn_and_wait``.
        self.base_env = dict(os.environ)
        self._slots: dict[str, _ResultSlot] = {}
        self._queue: deque[tuple[GatePlan, _ResultSlot]] = deque()
        self._workers: list[threading.Thread] | None = None
        self._callback_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Queue every gate; up to ``jobs`` run at once, the rest wait in contract order."""
        if self._workers is not None:
            return
        self._workers = []
        if self.log_dir is not None:
            # Made once here; a directory that cannot be made fails each gate as it opens
            # its log, where the error is handed to whoever waits for that gate.
            with contextlib.suppress(OSError):
                self.log_dir.mkdir(parents=True, exist_ok=True)
        for plan in self.plans:
            slot = self._slots[plan.gate.name] = _ResultSlot()
            if _needs_process(plan):
                self._queue.append((plan, slot))
        # Plain threads rather than a concurrent.futures executor, for the same start-up
        # cost as _ResultSlot's; nothing here needs more.
        for index in range(min(self.jobs, len(self._queue))):
            worker = threading.Thread(target=self._work, name=f"gate-{index}")
            self._workers.append(worker)
            worker.start()
        # Announced last: a Ctrl-C raised from the callback leaves every gate with a slot.
        for plan in self.plans:
            if not _needs_process(plan):
                self._slots[plan.gate.name].set(self._finish(plan, _static_result(plan)))

    def _work(self) -> None:
        while True:
            try:
                plan, slot = self._queue.popleft()
            except IndexError:
                return
            try:
                slot.set(self._run_plan(plan))
            except BaseException as exc:  # handed to whoever waits for this gate
                slot.fail(exc)

    def result(self, name: str) -> GateResult:
        """Wait for one gate's result (starting the run if needed)."""
        self.start()
        slot = self._slots[name]
        while not slot.done.wait(WAIT_STEP_SECONDS):
            if not any(worker.is_alive() for worker in self._workers or ()):
                if slot.done.is_set():
                    break
                # Nobody is left to fill it: a Ctrl-C cut start() short.
                plan = next(plan for plan in self.plans if plan.gate.name == name)
                slot.set(self._finish(plan, _interrupted(plan, "the run was interrupted "
                                                                "before it started")))
        return slot.value()

    def results(self) -> list[GateResult]:
        """Wait for every gate; results in plan (contract) order."""
        return [self.result(plan.gate.name) for plan in self.plans]

    def cancel(self) -> None:
        """Stop everything: running gates are killed, waiting gates never start."""
        self.cancelled.set()

    def close(self) -> None:
        """Cancel what is still running and wait for the worker threads to finish."""
        if self._workers is None:
            return
        if any(not slot.done.is_set() for slot in self._slots.values()):
            self.cancel()
        for worker in self._workers:
            worker.join()

    def __enter__(self) -> GateRunner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- one gate ------------------------------------------------------------------------

    def _run_plan(self, plan: GatePlan) -> GateResult:
        gate = plan.gate
        if self.cancelled.is_set():
            return self._finish(plan, _interrupted(plan, "the run was interrupted before it "
                                                         "started"))
        if self.on_started is not None:
            with self._callback_lock:
                self.on_started(gate)
        log_path = self._log_path(gate)
        started = time.time()
        failed_before = False
        attempts = 0
        while True:
            attempts += 1
            result = self._attempt(plan, log_path, attempts - 1)
            if not result.failed:
                break
            failed_before = True
            if attempts > gate.retries or result.code in codes.NOT_RETRIED:
                break
            delay = min(BACKOFF_BASE_SECONDS * 2 ** (attempts - 1), BACKOFF_MAX_SECONDS)
            if self.cancelled.wait(delay):
                break
        finished = time.time()
        result = result._replace(
            attempts=attempts,
            duration_s=round(finished - started, 3),
            started_at=started,
            finished_at=finished,
            flaky=result.outcome == codes.PASSED and failed_before,
        )
        if plan.cache is not None and result.outcome == codes.PASSED:
            from pytest_verifygate.cache import store  # only for gates with caching on

            store(plan.cache, result)
        return self._finish(plan, result)

    def _finish(self, plan: GatePlan, result: GateResult) -> GateResult:
        if self.on_finished is not None:
            with self._callback_lock:
                self.on_finished(plan.gate, result)
        return result

    def _log_path(self, gate: Gate) -> Path | None:
        return None if self.log_dir is None else self.log_dir / f"{gate.name}.log"

    def _attempt(self, plan: GatePlan, log_path: Path | None, attempt_number: int) -> GateResult:
        if plan.unsupported is not None:
            return bare_result(plan, codes.FAILED, codes.UNSUPPORTED_FORMAT,
                               output=f"verifygate: {plan.unsupported}\n")
        end, sink = run_attempt(plan, log_path=log_path, attempt_number=attempt_number,
                                tail_bytes=self.tail_bytes, cancelled=self.cancelled,
                                base_env=self.base_env)
        output, truncated = sink.text()
        result = bare_result(
            plan, codes.PASSED, None, output=output, truncated=truncated, total=sink.total,
            exit_code=end.exit_code, signal_number=end.signal,
            log_path=str(log_path) if log_path else None,
        )
        if end.interrupted:
            return result._replace(outcome=codes.FAILED, code=codes.INTERRUPTED)
        if end.timed_out:
            return result._replace(outcome=codes.FAILED, code=codes.TIMEOUT)
        if end.spawn_failed:
            return result._replace(outcome=codes.FAILED, code=codes.SETUP_OR_BOOTSTRAP_ISSUE)
        if end.exit_code == 0:
            return result
        return self._classified(plan, result)

    def _classified(self, plan: GatePlan, result: GateResult) -> GateResult:
        """A failed command's result with its code: the classifier's, unless the hook names
        another; a missing tool or target becomes a skip where the gate says so."""
        from pytest_verifygate.classify import Failure, classify  # only when a gate failed

        argv = plan.invocations[0] if plan.invocations else ()
        code = classify(Failure(result.exit_code, result.signal, result.output_tail, argv,
                                plan.cwd))
        result = result._replace(outcome=codes.FAILED, code=code)
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


def _needs_process(plan: GatePlan) -> bool:
    cached = plan.cache is not None and plan.cache.hit is not None
    return plan.skip_reason is None and plan.pending_reason is None and not cached


def _static_result(plan: GatePlan) -> GateResult:
    """The result of a gate that runs nothing: a reused pass, pending or skipped."""
    if plan.cache is not None and plan.cache.hit is not None:
        return plan.cache.hit
    if plan.pending_reason is not None:
        return bare_result(plan, codes.PENDING, None)._replace(reason=plan.pending_reason)
    return bare_result(plan, codes.SKIPPED, None)._replace(reason=plan.skip_reason)


def _interrupted(plan: GatePlan, reason: str) -> GateResult:
    return bare_result(plan, codes.FAILED, codes.INTERRUPTED)._replace(reason=reason)
