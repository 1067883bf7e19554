"""Process supervision: one attempt of a gate, from spawn to the last process of its group.

Each command is spawned in a new session (its own process group) with stdin closed and
stdout+stderr merged into one pipe. The pipe is read without blocking into an ``OutputSink``,
which streams every byte to the gate's log file and keeps only the last ``tail_bytes`` in
memory. A deadline, a cancel (Ctrl-C, ``-x``) or the gate's leader exiting while others in its
group still hold the pipe all end the same way: SIGTERM to the whole group, a short grace, then
SIGKILL. Whatever is left of the group afterwards is reaped: no process outlives its gate.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import threading
    from pathlib import Path

    from pytest_verifygate.runner.records import GatePlan

READ_SIZE = 1 << 20
TICK_SECONDS = 0.1
KILL_GRACE_SECONDS = 2.0
LEFTOVER_GRACE_SECONDS = 0.5
# Set in every gate's environment to the gate's name (so a gate can tell it runs under us).
GATE_ENV = "VERIFYGATE_GATE"


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


class AttemptEnd:
    """How one attempt (or one of its commands) ended, filled in while it is supervised."""

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


def run_attempt(
    plan: GatePlan,
    *,
    log_path: Path | None,
    attempt_number: int,
    tail_bytes: int,
    cancelled: threading.Event,
    base_env: Mapping[str, str],
) -> tuple[AttemptEnd, OutputSink]:
    """Run the plan's commands one after another until one fails, all within one deadline.

    Attempt 0 starts the log afresh; later attempts append to it under a header line.
    """
    with _open_log(log_path, append=attempt_number > 0) as log:
        if log is not None and attempt_number:
            log.write(f"\n--- verifygate: attempt {attempt_number + 1} ---\n".encode())
        sink = OutputSink(log, tail_bytes)
        deadline = time.monotonic() + plan.gate.timeout_seconds
        end = AttemptEnd()
        for argv in plan.invocations:
            step = spawn_and_wait(plan, argv, sink, deadline, cancelled, base_env)
            # The first command that failed decides (a signal death counts as a failure).
            if not end.failed or step.timed_out or step.interrupted:
                end = step
            if step.timed_out or step.interrupted or step.spawn_failed:
                break
    return end, sink


def spawn_and_wait(
    plan: GatePlan,
    argv: Sequence[str],
    sink: OutputSink,
    deadline: float,
    cancelled: threading.Event,
    base_env: Mapping[str, str],
) -> AttemptEnd:
    """Spawn ``argv`` in a session of its own and supervise it; a spawn error goes to ``sink``.

    ``base_env`` is the environment the gate inherits, snapshotted by the caller's thread:
    ``os.environ`` read here, in a worker thread, races the main thread changing it (pytest
    sets and removes ``PYTEST_CURRENT_TEST`` around every item: a ``KeyError`` mid-copy).
    """
    if not plan.cwd.is_dir():
        message = f"verifygate: the gate's cwd {plan.gate.cwd!r} does not exist\n"
        sink.write(message.encode())
        return AttemptEnd(spawn_failed=True)
    env = dict(base_env)
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
        return AttemptEnd(spawn_failed=True)
    except PermissionError:
        message = f"verifygate: cannot run {argv[0]!r}: permission denied (not executable)\n"
        sink.write(message.encode())
        return AttemptEnd(spawn_failed=True)
    except OSError as exc:
        sink.write(f"verifygate: cannot run {argv[0]!r}: {exc.strerror or exc}\n".encode())
        return AttemptEnd(spawn_failed=True)
    return supervise(process, sink, deadline, cancelled)


def supervise(
    process: subprocess.Popen[bytes],
    sink: OutputSink,
    deadline: float,
    cancelled: threading.Event,
) -> AttemptEnd:
    """Read ``process``'s pipe until end of file, ending its group on deadline or cancel."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    _widen_pipe(fd)
    pgid = process.pid
    end = AttemptEnd()
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
                if cancelled.is_set():
                    end.interrupted = True
                elif now >= deadline:
                    end.timed_out = True
                elif process.poll() is not None:
                    # The gate is done but something it started still holds the pipe.
                    # (Its status is read after the loop, where a signal death becomes
                    # ``signal``; a negative returncode must never reach exit_code.)
                    kill_at = now + LEFTOVER_GRACE_SECONDS
                    _signal_group(pgid, signal.SIGTERM)
                    continue
                if end.interrupted or end.timed_out:
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
        end.signal = -returncode
    end.exit_code = returncode if returncode >= 0 else None
    return end


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
