"""A gate's log file: private (0600, through no link), never a reason to fail; past
``log_max_bytes`` an attempt keeps its first quarter and, as a ring in the file, its last three.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO

from pytest_verifygate.state.files import open_state_dir

DEFAULT_LOG_MAX_BYTES = 16 * 1024 * 1024
MIN_LOG_MAX_BYTES = 4096
COPY_CHUNK = 1 << 20


class GateLog:
    """One attempt's part of a gate's log: attempt 0 starts the file, a retry appends to it.
    A failed write stops the log and is noted (``problem``)."""

    def __init__(self, path: Path, attempt: int, max_bytes: int = DEFAULT_LOG_MAX_BYTES) -> None:
        self.path = path
        self.max_bytes = max(MIN_LOG_MAX_BYTES, max_bytes)
        self.head = self.max_bytes // 4
        self.ring = self.max_bytes - self.head
        self.written = 0  # bytes of output this attempt wrote, kept or not
        self.problem: str | None = None
        self.created = False  # the file exists (complete or not): the result may name it
        self.fd: int | None = None
        self.base = 0  # where this attempt's output starts in the file
        try:
            self.fd = _open(path, append=attempt > 0)
            self.created = True
            self.base = os.lseek(self.fd, 0, os.SEEK_END)
            if attempt:
                header = f"\n--- verifygate: attempt {attempt + 1} ---\n".encode()
                _write_at(self.fd, header, self.base)
                self.base += len(header)
        except OSError as exc:
            self._fail(exc)

    def write(self, data: bytes) -> None:
        if self.fd is None or not data:
            return
        try:
            self._write(memoryview(data))
        except OSError as exc:
            self._fail(exc)

    def _write(self, data: memoryview) -> None:
        assert self.fd is not None
        position = self.written
        self.written += len(data)
        if position < self.max_bytes:  # still filling the file straight
            straight = min(len(data), self.max_bytes - position)
            _write_at(self.fd, data[:straight], self.base + position)
            data, position = data[straight:], position + straight
        if not data:
            return
        if len(data) > self.ring:  # only its last ``ring`` bytes can be kept
            skipped = len(data) - self.ring
            data, position = data[skipped:], position + skipped
        # Output byte number ``n`` (past the head) lives at ring index (n - head) % ring.
        index = (position - self.head) % self.ring
        first = min(len(data), self.ring - index)
        ring_start = self.base + self.head
        _write_at(self.fd, data[:first], ring_start + index)
        if first < len(data):
            _write_at(self.fd, data[first:], ring_start)

    def close(self) -> None:
        """Put the ring in order behind a note of what was cut; close the file."""
        try:
            if self.fd is not None and self.written > self.max_bytes:
                self._unroll()
        except OSError as exc:
            self._fail(exc)
        finally:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None

    def _cut_notice(self) -> bytes:
        cut = self.written - self.max_bytes
        return (f"\n--- verifygate: {cut:,} bytes cut here; this log keeps the first "
                f"{self.head:,} and the last {self.ring:,} of {self.written:,} bytes "
                f"(log_max_bytes) ---\n").encode()

    def _unroll(self) -> None:
        """Write prefix, head, notice and ring (oldest first) to a new file, and replace."""
        assert self.fd is not None
        oldest = (self.written - self.head) % self.ring
        ring_start = self.base + self.head
        temp = f".{self.path.name}.{os.getpid()}.unroll"
        dir_fd = open_state_dir(self.path.parent)
        try:
            out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600,
                          dir_fd=dir_fd)
            with open(out, "wb") as target:
                _copy(self.fd, target, 0, ring_start)
                target.write(self._cut_notice())
                _copy(self.fd, target, ring_start + oldest, self.ring - oldest)
                _copy(self.fd, target, ring_start, oldest)
            os.replace(temp, self.path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            # No room to put the tail in order: keep the head, and say the rest is gone.
            os.ftruncate(self.fd, ring_start)
            _write_at(self.fd, self._cut_notice(), ring_start)
            raise
        finally:
            os.close(dir_fd)

    def _fail(self, error: OSError) -> None:
        if self.problem is None:
            self.problem = error.strerror or str(error)
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None

    def problem_note(self) -> str:
        if not self.created:
            return (f"verifygate: no log file for this gate ({self.path}: {self.problem}); "
                    "only this output tail is kept\n")
        return (f"verifygate: the log {self.path} is incomplete ({self.problem}); the output "
                "tail here is complete\n")


def _open(path: Path, *, append: bool) -> int:
    # Read back to put the ring in order; not inherited by gates (PEP 446).
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | (0 if append else os.O_TRUNC)
    # Made again if the run's directory vanished.
    dir_fd = open_state_dir(path.parent, create=True)
    try:
        fd = os.open(path.name, flags, 0o600, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o600)  # a file that was there before: private from now on
    return fd


def _write_at(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _copy(source: int, target: BinaryIO, offset: int, count: int) -> None:
    while count > 0:
        chunk = os.pread(source, min(COPY_CHUNK, count), offset)
        if not chunk:
            return
        target.write(chunk)
        offset += len(chunk)
        count -= len(chunk)
