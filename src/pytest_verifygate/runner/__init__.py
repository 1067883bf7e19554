"""Running gates: spawning, timeouts, bounded output capture, retries, concurrency, cancelling.

Each gate attempt is spawned in a new session (its own process group) with stdin closed and
stdout+stderr merged into one pipe. The pipe is read without blocking; every byte goes to the
gate's log file and only the last ``tail_bytes`` are kept in memory. A timeout, a cancel (Ctrl-C,
``-x``) or the gate's leader exiting while others in its group still run all end the same way:
SIGTERM to the whole group, a short grace, then SIGKILL. No process outlives its gate.
"""

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO, NamedTuple

from pytest_verifygate import codes
from pytest_verifygate.contract import Gate

READ_SIZE = 1 << 20
TICK_SECONDS = 0.1
KILL_GRACE_SECONDS = 2.0
LEFTOVER_GRACE_SECONDS = 0.5
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 8.0
# Set in every gate's environment to the gate's name (so a gate can tell it runs under us).
GATE_ENV = "VERIFYGATE_GATE"
# The default ``env`` of a plan: read-only, since one instance is shared by every such plan.
_NO_ENV: Mapping[str, str] = MappingProxyType({})


class GateResult(NamedTuple):
    """How one selected gate ended. ``outcome``: passed, failed, skipped or pending."""

    name: str
    outcome: str
    code: str | None = None
    command: tuple[str, ...] = ()
    cwd: str = "."
    exit_code: int | None = None
    signal: int | None = None
    duration_s: float = 0.0
    attempts: int = 0
    output_tail: str = ""
    output_truncated: bool = False
    output_bytes: int = 0
    log_path: str | None = None
    reason: str | None = None
    flaky: bool = False
    started_at: float | None = None
    finished_at: float | None = None
    cached: bool = False  # a pass reused from the result cache: nothing was run

    @property
    def failed(self) -> bool:
        return self.outcome == "failed"


class CacheSlot(NamedTuple):
    """Where a cacheable gate's pass is stored, and the stored pass if reading found one.

    ``definition`` and ``patterns`` are kept so the key can be computed again after the gate
    ran (its inputs must not have changed meanwhile for the pass to be stored).
    """

    directory: Path
    key: str
    root: Path
    definition: str
    patterns: tuple[str, ...] | None
    hit: GateResult | None = None

    @property
    def path(self) -> Path:
        return self.directory / f"{self.key}.json"


class GatePlan(NamedTuple):
    """A selected gate turned into what to do: spawn these argvs, skip it, or fail it early."""

    gate: Gate
    cwd: Path
    invocations: tuple[tuple[str, ...], ...] = ()
    env: Mapping[str, str] = _NO_ENV
    display_command: tuple[str, ...] = ()
    skip_reason: str | None = None
    pending_reason: str | None = None
    unsupported: str | None = None
    # Set for gates with ``cache = true``: where a pass is stored, and the reused pass if any.
    cache: CacheSlot | None = None


ClassifyHook = Callable[[Gate, GateResult], str | None]
GateCallback = Callable[[Gate, GateResult], None]
StartCallback = Callable[[Gate], None]


class OutputSink:
    """Everything a gate prints: streamed to a log file, the last ``tail_bytes`` kept."""

    def __init__(self, log: BinaryIO | None, tail_bytes: int) -> None:
        self.log = log
        self.tail_bytes = tail_bytes
        self.tail = bytearray()
        self.total = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        if self.log is not None:
            self.log.write(data)
        if len(data) >= self.tail_bytes:
            self.tail[:] = data[-self.tail_bytes :]
            return
        self.tail += data
        if len(self.tail) > 2 * self.tail_bytes:  # trim rarely: amortized O(1) per byte
            del self.tail[: len(self.tail) - self.tail_bytes]

    def text(self) -> tuple[str, bool]:
        """The kept tail as text (invalid UTF-8 replaced) and whether anything was cut."""
        kept = bytes(self.tail[-self.tail_bytes :])
        truncated = self.total > len(kept)
        text = kept.decode("utf-8", "replace")
        if truncated and text.startswith("\ufffd"):  # the cut split a multi-byte character
            text = text.lstrip("\ufffd")
        encoded = text.encode("utf-8")
        if len(encoded) > self.tail_bytes:
            # Each invalid byte became a 3-byte U+FFFD: cut again so the tail stays within
            # tail_bytes as UTF-8 too (ignore drops only the one character split by the cut).
            text = encoded[-self.tail_bytes :].decode("utf-8", "ignore")
            truncated = True
        return text, truncated


class _Slot:
    """Where one gate's result (or the exception that ended its thread) is handed over."""

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


class _Attempt:
    """How one spawn of a gate's command ended (filled in while it is supervised)."""

    __slots__ = ("exit_code", "interrupted", "signal", "spawn_failed", "timed_out")

    def __init__(self, spawn_failed: bool = False) -> None:
        self.exit_code: int | None = None
        self.signal: int | None = None
        self.timed_out = False
        self.interrupted = False
        self.spawn_failed = spawn_failed

    @property
    def failed(self) -> bool:
        return (self.exit_code not in (None, 0) or self.signal is not None or self.timed_out
                or self.interrupted or self.spawn_failed)


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
        self._slots: dict[str, _Slot] = {}
        self._queue: deque[tuple[GatePlan, _Slot]] = deque()
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
            slot = self._slots[plan.gate.name] = _Slot()
            if _needs_process(plan):
                self._queue.append((plan, slot))
        # Plain threads rather than concurrent.futures: its import (and logging's) is a
        # noticeable share of the command line's start-up, and nothing here needs more.
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
        # Wait in short steps so Ctrl-C reaches the main thread promptly.
        while not slot.done.wait(TICK_SECONDS * 5):
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

    def __enter__(self) -> "GateRunner":
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
            flaky=result.outcome == "passed" and failed_before,
        )
        if plan.cache is not None and result.outcome == "passed":
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
            return _base_result(plan, "failed", codes.UNSUPPORTED_FORMAT,
                                output=f"verifygate: {plan.unsupported}\n")
        with _open_log(log_path, append=attempt_number > 0) as log:
            if log is not None and attempt_number:
                log.write(f"\n--- verifygate: attempt {attempt_number + 1} ---\n".encode())
            sink = OutputSink(log, self.tail_bytes)
            deadline = time.monotonic() + plan.gate.timeout_seconds
            outcome = _Attempt()
            for argv in plan.invocations:
                step = self._spawn_and_wait(plan, argv, sink, deadline)
                # The first chunk that failed decides (a signal death counts as a failure).
                if not outcome.failed or step.timed_out or step.interrupted:
                    outcome = step
                if step.timed_out or step.interrupted or step.spawn_failed:
                    break
        output, truncated = sink.text()
        result = _base_result(
            plan, "passed", None, output=output, truncated=truncated, total=sink.total,
            exit_code=outcome.exit_code, signal_number=outcome.signal,
            log_path=str(log_path) if log_path else None,
        )
        if outcome.interrupted:
            return result._replace(outcome="failed", code=codes.INTERRUPTED)
        if outcome.timed_out:
            return result._replace(outcome="failed", code=codes.TIMEOUT)
        if outcome.spawn_failed:
            return result._replace(outcome="failed", code=codes.SETUP_OR_BOOTSTRAP_ISSUE)
        if outcome.exit_code == 0:
            return result
        from pytest_verifygate.classify import Failure, classify  # only when a gate failed

        argv = plan.invocations[0] if plan.invocations else ()
        code = classify(Failure(outcome.exit_code, outcome.signal, output, argv, plan.cwd))
        result = result._replace(outcome="failed", code=code)
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
            return result._replace(outcome="skipped",
                                   reason=f"{result.code} (on_missing = \"skip\")")
        return result

    def _spawn_and_wait(
        self, plan: GatePlan, argv: Sequence[str], sink: OutputSink, deadline: float
    ) -> _Attempt:
        if not plan.cwd.is_dir():
            message = f"verifygate: the gate's cwd {plan.gate.cwd!r} does not exist\n"
            sink.write(message.encode())
            return _Attempt(spawn_failed=True)
        env = dict(os.environ)
        env.update(plan.env)
        # Lets a pytest started by a gate know it runs inside one (no recursive gate runs).
        env[GATE_ENV] = plan.gate.name
        try:
            process = subprocess.Popen(
                list(argv),
                cwd=plan.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except FileNotFoundError:
            message = f"verifygate: cannot run {argv[0]!r}: program not found on PATH\n"
            sink.write(message.encode())
            return _Attempt(spawn_failed=True)
        except PermissionError:
            message = f"verifygate: cannot run {argv[0]!r}: permission denied (not executable)\n"
            sink.write(message.encode())
            return _Attempt(spawn_failed=True)
        except OSError as exc:
            sink.write(f"verifygate: cannot run {argv[0]!r}: {exc.strerror or exc}\n".encode())
            return _Attempt(spawn_failed=True)
        return self._supervise(process, sink, deadline)

    def _supervise(
        self, process: subprocess.Popen[bytes], sink: OutputSink, deadline: float
    ) -> _Attempt:
        assert process.stdout is not None
        fd = process.stdout.fileno()
        os.set_blocking(fd, False)
        _widen_pipe(fd)
        pgid = process.pid
        outcome = _Attempt()
        kill_at: float | None = None  # when SIGKILL follows the SIGTERM already sent
        eof = False
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while not eof:
                now = time.monotonic()
                wait = TICK_SECONDS if kill_at is None else min(TICK_SECONDS, kill_at - now)
                if selector.select(max(0.0, min(wait, deadline - now + 0.001))):
                    eof = _drain(fd, sink)
                    if eof:
                        break
                now = time.monotonic()
                if kill_at is None:
                    if self.cancelled.is_set():
                        outcome.interrupted = True
                    elif now >= deadline:
                        outcome.timed_out = True
                    elif process.poll() is not None:
                        # The gate is done but something it started still holds the pipe.
                        # (Its status is read after the loop, where a signal death becomes
                        # ``signal``; a negative returncode must never reach exit_code.)
                        kill_at = now + LEFTOVER_GRACE_SECONDS
                        _signal_group(pgid, signal.SIGTERM)
                        continue
                    if outcome.interrupted or outcome.timed_out:
                        _signal_group(pgid, signal.SIGTERM)
                        kill_at = now + KILL_GRACE_SECONDS
                elif now >= kill_at:
                    _signal_group(pgid, signal.SIGKILL)
                    eof = _drain_after_kill(fd, sink, selector)
                    break
        process.stdout.close()
        returncode = process.wait()
        _reap_leftovers(pgid, KILL_GRACE_SECONDS)
        if returncode < 0:
            outcome.signal = -returncode
        outcome.exit_code = returncode if returncode >= 0 else None
        return outcome


def _widen_pipe(fd: int) -> None:
    """Ask Linux for a pipe as large as one read: a gigabyte of output then takes a thousand
    wake-ups instead of sixteen thousand (the default pipe holds 64 KiB)."""
    import fcntl

    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is not None:
        with contextlib.suppress(OSError):  # over /proc/sys/fs/pipe-max-size, or not Linux
            fcntl.fcntl(fd, set_size, READ_SIZE)


def _drain(fd: int, sink: OutputSink) -> bool:
    """Read what is available; True at end of file."""
    while True:
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return False
        except OSError:
            return True
        if not chunk:
            return True
        sink.write(chunk)
        if len(chunk) < READ_SIZE:
            return False


def _drain_after_kill(fd: int, sink: OutputSink, selector: selectors.BaseSelector) -> bool:
    """After SIGKILL the writers are gone within moments; read what they left, briefly."""
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        if selector.select(0.05) and _drain(fd, sink):
            return True
    return False


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a reused id owned by someone else
        return False
    return True


def _reap_leftovers(pgid: int, grace: float) -> None:
    """Kill whatever is left of the gate's process group (daemons that closed their output)."""
    if not _group_alive(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    end = time.monotonic() + min(grace, LEFTOVER_GRACE_SECONDS)
    while time.monotonic() < end:
        if not _group_alive(pgid):
            return
        time.sleep(0.02)
    _signal_group(pgid, signal.SIGKILL)


def _open_log(path: Path | None, *, append: bool) -> BinaryIO | contextlib.nullcontext[None]:
    if path is None:
        return contextlib.nullcontext()
    return open(path, "ab" if append else "wb")


def _needs_process(plan: GatePlan) -> bool:
    cached = plan.cache is not None and plan.cache.hit is not None
    return plan.skip_reason is None and plan.pending_reason is None and not cached


def _base_result(
    plan: GatePlan,
    outcome: str,
    code: str | None,
    *,
    output: str = "",
    truncated: bool = False,
    total: int | None = None,
    exit_code: int | None = None,
    signal_number: int | None = None,
    log_path: str | None = None,
) -> GateResult:
    return GateResult(
        name=plan.gate.name,
        outcome=outcome,
        code=code,
        command=plan.display_command,
        cwd=plan.gate.cwd,
        exit_code=exit_code,
        signal=signal_number,
        output_tail=output,
        output_truncated=truncated,
        output_bytes=len(output.encode()) if total is None else total,
        log_path=log_path,
    )


def _static_result(plan: GatePlan) -> GateResult:
    if plan.cache is not None and plan.cache.hit is not None:
        return plan.cache.hit
    if plan.pending_reason is not None:
        return _base_result(plan, "pending", None)._replace(reason=plan.pending_reason)
    return _base_result(plan, "skipped", None)._replace(reason=plan.skip_reason)


def _interrupted(plan: GatePlan, reason: str) -> GateResult:
    return _base_result(plan, "failed", codes.INTERRUPTED)._replace(reason=reason)
