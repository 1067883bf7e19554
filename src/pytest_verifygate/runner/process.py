"""A gate's commands from spawn to the last process they started: each in a session of its own,
its output read without blocking; a deadline, a cancel or leftovers holding the pipe end its
whole tree (``runner.tree``), and what survives is named.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import math
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, NamedTuple, Protocol

from pytest_verifygate.runner.tree import TREE_ENV, GateTree, Proc, describe, monotonic

if TYPE_CHECKING:
    import threading

    from pytest_verifygate.runner.logfile import GateLog
    from pytest_verifygate.runner.records import GatePlan
    from pytest_verifygate.runner.watchdog import Watchdog

READ_SIZE = 1 << 20
TICK_SECONDS = 0.1
KILL_GRACE_SECONDS = 2.0
LEFTOVER_GRACE_SECONDS = 0.5
# A year: any larger timeout (inf, a 400-digit one) is clamped, so no clock arithmetic overflows.
MAX_TIMEOUT_SECONDS = 365 * 24 * 3600.0
# How long the gate's first process is waited for after SIGKILL before it counts as a survivor.
REAP_SECONDS = 5.0
HELD_OUTPUT_NOTE = ("verifygate: a process this gate started still holds its output open and "
                    "is out of reach (it left the process group, cleared its environment and "
                    "was orphaned); it was not killed and may still be running\n")
HELD_OUTPUT_REASON = "a process it started was left running, out of reach (see its output)"
# Every gate's environment names the gate: a pytest it starts runs no gates of its own.
GATE_ENV = "VERIFYGATE_GATE"


class OutputFilter(Protocol):
    """What passes a gate's output on, changed (``report.redact``'s masker of secrets)."""

    def feed(self, data: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


class OutputSink:
    """A gate's output, masked once as it comes: streamed to its log, the last ``tail_bytes``
    kept in memory."""

    def __init__(self, log: GateLog | None, tail_bytes: int,
                 log_filter: OutputFilter | None = None) -> None:
        self.log = log
        self.log_filter = log_filter
        self.tail_bytes = tail_bytes
        self.tail = bytearray()
        self.total = 0  # bytes printed
        self.passed_on = 0  # bytes through the filter

    def write(self, data: bytes) -> None:
        self.total += len(data)
        self._pass_on(data if self.log_filter is None else self.log_filter.feed(data))

    def _pass_on(self, data: bytes) -> None:
        self.passed_on += len(data)
        if self.log is not None:
            self.log.write(data)
        self._keep(data)

    def close_log(self) -> None:
        """Pass on what the filter held back and close the log, noting a problem it met."""
        if self.log_filter is not None:
            self._pass_on(self.log_filter.flush())
        if self.log is None:
            return
        self.log.close()
        if self.log.problem is not None:
            self.note(self.log.problem_note())

    def note(self, text: str) -> None:
        """A line of ours at the end of the tail: not output of the gate, not in the log."""
        if self.log_filter is not None:  # what the filter holds back came first
            self._pass_on(self.log_filter.flush())
        self._keep(text.encode("utf-8", "replace"))

    def _keep(self, data: bytes) -> None:
        if len(data) >= self.tail_bytes:  # a read larger than the tail: no copy of it all
            self.tail[:] = data[-self.tail_bytes :]
            return
        self.tail += data
        if len(self.tail) > 2 * self.tail_bytes:  # trim rarely: amortized O(1) per byte
            del self.tail[: len(self.tail) - self.tail_bytes]

    def text(self) -> tuple[str, bool]:
        """The kept tail as text (invalid UTF-8 replaced) and whether anything was cut."""
        kept = bytes(self.tail[-self.tail_bytes :])
        truncated = self.passed_on > len(kept)
        text = kept.decode("utf-8", "replace")
        if truncated and text.startswith("\ufffd"):  # the cut split a multi-byte character
            text = text.lstrip("\ufffd")
        encoded = text.encode("utf-8")
        if len(encoded) > self.tail_bytes:
            # Each invalid byte became a 3-byte U+FFFD: cut again to stay within tail_bytes
            # (ignore drops only the one character split by the cut).
            text = encoded[-self.tail_bytes :].decode("utf-8", "ignore")
            truncated = True
        return text, truncated


@dataclass
class AttemptEnd:
    """How one attempt (or one of its commands) ended."""

    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    interrupted: bool = False
    spawn_failed: bool = False
    output_held: bool = False  # after everything found was killed (``HELD_OUTPUT_NOTE``)
    # Run in chunks at once: each failed chunk's exit status, signal and output (to be
    # classified alone), and whether any chunk passed.
    chunk_failures: tuple[tuple[int | None, int | None, str], ...] = ()
    chunk_passed: bool = False

    @property
    def failed(self) -> bool:
        return (self.exit_code not in (None, 0) or self.signal is not None or self.timed_out
                or self.interrupted or self.spawn_failed)


def run_commands(plan: GatePlan, sink: OutputSink, cancelled: threading.Event,
                 base_env: Mapping[str, str], watchdog: Watchdog, lanes: int = 1) -> AttemptEnd:
    """Run the plan's commands (its chunks of files) within one deadline: in turn, or with
    ``lanes`` > 1 its files cut into that many chunks run at once, their outputs passed on
    in chunk order. The first failure decides (a timeout or a cancel before it); in turn, a
    timeout, a cancel or a command that cannot start stops the rest."""
    deadline = monotonic() + clamp_timeout(plan.gate.timeout_seconds)
    if lanes > 1:
        from pytest_verifygate.commands import expand, parse_command

        chunks = expand(parse_command(plan.gate.command, shell=plan.gate.shell),
                        plan.file_args, lanes)
        if len(chunks) > 1:
            return _run_chunks(plan, chunks, sink, deadline, cancelled, base_env, watchdog,
                               lanes)
    end = AttemptEnd()
    for argv in plan.invocations:
        step = _run_command(plan, argv, sink, deadline, cancelled, base_env, watchdog)
        end = _decisive(end, step)
        if step.timed_out or step.interrupted or step.spawn_failed:
            break
    return end


def _decisive(end: AttemptEnd, step: AttemptEnd) -> AttemptEnd:
    """Which of two chunks' ends, the earlier ``end`` and ``step``, says how the gate ended."""
    decisive = step if not end.failed or step.timed_out or step.interrupted else end
    decisive.output_held = end.output_held or step.output_held
    return decisive


class _Spool(NamedTuple):
    """One chunk's output, kept (on disk past ``READ_SIZE``) until the chunks before it are
    passed on."""

    file: IO[bytes]

    def write(self, data: bytes) -> None:
        self.file.write(data)

    def note(self, text: str) -> None:
        self.write(text.encode("utf-8", "replace"))


def _run_chunks(plan: GatePlan, chunks: list[list[str]], sink: OutputSink, deadline: float,
                cancelled: threading.Event, base_env: Mapping[str, str], watchdog: Watchdog,
                lanes: int) -> AttemptEnd:
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    with contextlib.ExitStack() as stack:
        spools = [_Spool(stack.enter_context(tempfile.SpooledTemporaryFile(READ_SIZE)))
                  for _ in chunks]
        with ThreadPoolExecutor(lanes, thread_name_prefix=f"chunks-{plan.gate.name}") as pool:
            ends = list(pool.map(lambda argv, spool: _run_command(
                plan, argv, spool, deadline, cancelled, base_env, watchdog), chunks, spools))
        end = AttemptEnd()
        failures = []
        for step, spool in zip(ends, spools, strict=True):
            end = _decisive(end, step)
            spool.file.seek(0)
            output = spool.file.read()
            sink.write(output)
            if step.failed:
                text = output[-sink.tail_bytes:].decode("utf-8", "replace")
                failures.append((step.exit_code, step.signal, text))
        end.chunk_failures, end.chunk_passed = tuple(failures), len(failures) < len(ends)
        return end


def clamp_timeout(seconds: float) -> float:
    """``seconds`` as a float no larger than ``MAX_TIMEOUT_SECONDS`` (huge ints, inf, NaN)."""
    try:
        value = float(seconds)
    except OverflowError:  # an int beyond any float: as good as forever
        value = math.inf
    return MAX_TIMEOUT_SECONDS if math.isnan(value) else min(max(0.0, value), MAX_TIMEOUT_SECONDS)


def _run_command(plan: GatePlan, argv: Sequence[str], sink: OutputSink | _Spool,
                 deadline: float, cancelled: threading.Event, base_env: Mapping[str, str],
                 watchdog: Watchdog) -> AttemptEnd:
    """Spawn ``argv`` and supervise it until every process it started is gone. ``base_env`` is
    the runner thread's copy: ``os.environ`` read here races pytest setting it (a KeyError)."""
    if not plan.cwd.is_dir():
        return _not_started(sink, f"the gate's cwd {plan.gate.cwd!r} does not exist")
    mark = "vg" + os.urandom(12).hex()  # 96 random bits: no other gate command carries it
    env = {
        **base_env,
        **plan.env,
        GATE_ENV: plan.gate.name,
        # An outer run's marks are kept: a run inside a gate stays findable by the one around it.
        TREE_ENV: " ".join([*base_env.get(TREE_ENV, "").split(), mark]),
    }
    watchdog.expecting(mark)  # before the spawn: a run killed right after it is covered too
    try:
        process = subprocess.Popen(list(argv), cwd=plan.cwd, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    except OSError as exc:
        watchdog.forget(mark)  # nothing started: no process carries the mark
        reason = ("program not found on PATH" if isinstance(exc, FileNotFoundError)
                  else "permission denied (not executable)" if isinstance(exc, PermissionError)
                  else exc.strerror or exc)
        return _not_started(sink, f"cannot run {argv[0]!r}: {reason}")
    assert process.stdout is not None
    watchdog.started(process.pid, mark, deadline)
    tree = GateTree(process.pid, mark)
    end = AttemptEnd()
    try:
        _watch(process, sink, deadline, cancelled, tree, end)
    finally:
        process.stdout.close()
        survivors = _end_tree(process, tree, watchdog)
    if survivors:
        sink.note(describe(survivors))
    if end.output_held:
        sink.note(HELD_OUTPUT_NOTE)
    if process.returncode is not None and process.returncode < 0:
        end.signal = -process.returncode
    else:
        end.exit_code = process.returncode
    return end


def _not_started(sink: OutputSink | _Spool, message: str) -> AttemptEnd:
    sink.write(f"verifygate: {message}\n".encode())
    return AttemptEnd(spawn_failed=True)


def _watch(process: subprocess.Popen[bytes], sink: OutputSink | _Spool, deadline: float,
           cancelled: threading.Event, tree: GateTree, end: AttemptEnd) -> None:
    """Read the pipe and watch the process; on a deadline, a cancel, or leftovers holding the
    pipe after the process exited, signal the tree."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    _widen_pipe(fd)
    pipe_open = True
    kill_at: float | None = None  # when SIGKILL follows the SIGTERM already sent
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            now = monotonic()
            wait = TICK_SECONDS if kill_at is None else min(TICK_SECONDS, kill_at - now)
            wait = max(0.0, min(wait, deadline - now + 0.001))
            # Once the pipe is at its end it is not selected again (it would always be ready).
            if pipe_open and selector.select(wait) and _drain(fd, sink):
                pipe_open = False
            elif not pipe_open:  # the gate closed its output (or its leftovers did)
                _wait_exit(process, wait)
            exited = _exited(process)
            if exited and pipe_open and _drain(fd, sink):  # its last words, then end of file
                pipe_open = False
            if exited and not pipe_open:
                return
            now = monotonic()
            if kill_at is None:
                if cancelled.is_set():
                    end.interrupted = True
                elif now >= deadline:
                    end.timed_out = True
                elif exited:
                    # The gate is done but something it started still holds the pipe.
                    kill_at = now + LEFTOVER_GRACE_SECONDS
                    tree.signal(signal.SIGTERM)
                    continue
                if end.interrupted or end.timed_out:
                    tree.signal(signal.SIGTERM)
                    kill_at = now + KILL_GRACE_SECONDS
            elif now >= kill_at:
                tree.signal(signal.SIGKILL)
                if pipe_open and not _drain_after_kill(fd, sink, selector):
                    end.output_held = True
                return


def _exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether the first process exited, not reaped where that can be helped: unreaped, its pid
    (the group's id) cannot be reused while the tree is ended."""
    if process.returncode is not None:
        return True
    waitid = getattr(os, "waitid", None)
    if waitid is not None:
        try:
            return waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            pass
    return process.poll() is not None


def _wait_exit(process: subprocess.Popen[bytes], seconds: float) -> None:
    """Return when the process exits or ``seconds`` passed, checking often at first (one that
    closed its output usually exits within moments)."""
    end = monotonic() + seconds
    delay = 0.0005
    while not _exited(process):
        left = end - monotonic()
        if left <= 0:
            return
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.02)


def _end_tree(process: subprocess.Popen[bytes], tree: GateTree, watchdog: Watchdog) -> list[Proc]:
    """Kill what of the gate still runs, reap its first process; return what could not be killed."""
    survivors = tree.end(LEFTOVER_GRACE_SECONDS) if tree.traceable else []
    # Before the reap: once reaped, the first process's id may go to another process.
    watchdog.ended(process.pid)
    reaped = _reap(process)
    if not tree.traceable:
        # Without /proc the group is all there is; ended after the reap, or a zombie leader
        # would keep it alive through the whole grace.
        tree.end(LEFTOVER_GRACE_SECONDS)
    elif not reaped:
        survivors = tree.members() or survivors
    return survivors


def _reap(process: subprocess.Popen[bytes]) -> bool:
    """Wait for the first process; False if it did not end within ``REAP_SECONDS`` after a
    SIGKILL."""
    try:
        process.wait(timeout=REAP_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=REAP_SECONDS)
    return process.returncode is not None


def _widen_pipe(fd: int) -> None:
    """A pipe as large as one read (Linux): a gigabyte of output then takes a thousand wake-ups
    instead of sixteen thousand (64 KiB pipes)."""
    import fcntl

    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    if set_size is not None:
        with contextlib.suppress(OSError):  # over /proc/sys/fs/pipe-max-size
            fcntl.fcntl(fd, set_size, READ_SIZE)


def _drain(fd: int, sink: OutputSink | _Spool) -> bool:
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


def _drain_after_kill(fd: int, sink: OutputSink | _Spool,
                      selector: selectors.BaseSelector) -> bool:
    """After SIGKILL the writers are gone within moments; read what they left, briefly."""
    end = monotonic() + 1.0
    while monotonic() < end:
        if selector.select(0.05) and _drain(fd, sink):
            return True
    return False
