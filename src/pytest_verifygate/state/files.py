"""The one way into the tool's state directories. Anything that can write the work tree can
write ``.git``: a link planted under a state root never leads a write, read or removal
elsewhere, and a FIFO, a device or a huge file in a state file's place never hangs a run.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path

STATE_DIR_NAME = "verifygate"
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY
# A temp file of ``replace_in``, and when one is left over.
_TEMP_NAME = re.compile(r"\..+\.[0-9]+\.[0-9]+\.tmp")
STALE_TEMP_NS = 3600 * 10**9


class StateFileError(Exception):
    """A state file that is not to be read, and why."""


def state_parts(path: Path) -> tuple[Path, tuple[str, ...]] | None:
    """``path`` split into the trusted directory holding its state root and the names from the
    root down (the last ``verifygate``: none is named so under a root); None outside one."""
    parts = path.parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] == STATE_DIR_NAME:
            return Path(*parts[:index]) if index else Path("."), parts[index:]
    return None


def open_state_dir(path: Path, *, create: bool = False) -> int:
    """A descriptor of the directory ``path``: under a state root, each directory from the root
    down is opened ``O_NOFOLLOW`` relative to the one before, so a planted link is an
    ``OSError``; with ``create``, missing ones are made and all made private (0700)."""
    split = state_parts(Path(os.path.abspath(path)))
    if split is None:
        if create:
            os.makedirs(path, exist_ok=True)
        return os.open(path, DIRECTORY)
    anchor, names = split
    if create:  # the temp directory's per-project part, made on first use
        os.makedirs(anchor, 0o700, exist_ok=True)
    fd = os.open(anchor, DIRECTORY)
    try:
        for depth, name in enumerate(names, 1):
            child = _open_child(fd, name, create, anchor.joinpath(*names[:depth]))
            os.close(fd)
            fd = child
            if create:  # logs and caches are the user's alone (made under a loose umask)
                with contextlib.suppress(OSError):
                    info = os.fstat(fd)
                    if info.st_uid == os.getuid() and info.st_mode & 0o077:
                        os.fchmod(fd, 0o700)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_child(parent: int, name: str, create: bool, path: Path) -> int:
    """The directory ``name`` in ``parent``; ``ELOOP`` for a link or anything else there."""
    flags = DIRECTORY | os.O_NOFOLLOW
    try:
        try:
            return os.open(name, flags, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=parent)
            return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise OSError(errno.ELOOP, "a symbolic link or not a directory: never followed",
                          str(path)) from None
        raise


def read_state_file(path: Path, limit: int) -> bytes | None:
    """The content of a state file of at most ``limit`` bytes, or None when there is none;
    ``StateFileError`` for anything but a regular file within ``limit``."""
    try:
        dir_fd = open_state_dir(path.parent)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise StateFileError(exc.strerror or str(exc)) from None
    try:
        _check(os.lstat(path.name, dir_fd=dir_fd), limit)  # a FIFO is never opened
        # Non-blocking all the same, for a FIFO swapped in after the check.
        fd = os.open(path.name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(exc.strerror or str(exc)) from None
    finally:
        os.close(dir_fd)
    try:
        return read_bounded(fd, limit)
    except OSError as exc:
        raise StateFileError(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def read_bounded(fd: int, limit: int) -> bytes:
    """The content of the open regular file ``fd`` of at most ``limit`` bytes, else an error."""
    _check(os.fstat(fd), limit)
    data = b""
    while chunk := os.read(fd, limit + 1 - len(data)):
        data += chunk
        if len(data) > limit:
            raise StateFileError(f"larger than {limit} bytes")
    return data


def _check(info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise StateFileError("not a regular file")
    if info.st_size > limit:
        raise StateFileError(f"larger than {limit} bytes")


def prune_own_files(directory: Path, is_own: Callable[[str], object], keep: int, *,
                    companions: Callable[[str], Iterable[str]] = lambda name: ()) -> int:
    """Remove the files ``is_own`` names but the newest ``keep`` (by mtime), with their
    ``companions``, and temp files a killed writer left; return how many went."""
    try:
        fd = open_state_dir(directory)
    except OSError:
        return 0
    try:
        own: list[os.DirEntry[str]] = []
        stale = time.time_ns() - STALE_TEMP_NS
        with os.scandir(fd) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    if is_own(entry.name):
                        own.append(entry)
                    elif (_TEMP_NAME.fullmatch(entry.name)
                          and entry.stat(follow_symlinks=False).st_mtime_ns < stale):
                        os.unlink(entry.name, dir_fd=fd)
        # Dated only when some must go: a stat each, thousands in a full cache.
        dated: list[tuple[int, str]] = []
        for entry in own if len(own) > keep else ():
            with contextlib.suppress(OSError):
                dated.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.name))
        dated.sort()
        removed = 0
        for _, name in dated[: max(0, len(dated) - keep)]:
            try:
                os.unlink(name, dir_fd=fd)
            except OSError:
                continue
            removed += 1
            for companion in companions(name):
                with contextlib.suppress(OSError):
                    os.unlink(companion, dir_fd=fd)
        return removed
    finally:
        os.close(fd)


def write_state(path: Path, data: str | bytes) -> None:
    """Write a state file atomically, its directory reached through no link."""
    dir_fd = open_state_dir(path.parent, create=True)
    try:
        replace_in(dir_fd, path.name, data)
    finally:
        os.close(dir_fd)


def replace_in(dir_fd: int, name: str, data: str | bytes, *, mode: int = 0o600,
               sync: bool = True) -> None:
    """Write ``name`` in ``dir_fd`` through a new temp file (``O_EXCL``: never a planted link)
    and ``os.replace`` (a link at ``name`` is replaced, not followed), with ``mode``; with
    ``sync``, on disk before it replaces the old one."""
    temp = f".{name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                 dir_fd=dir_fd)
    try:
        if mode != 0o600:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise


def remove_state_file(path: Path) -> None:
    """Remove the state file ``path`` (a link, not its target); missing is no error."""
    try:
        dir_fd = open_state_dir(path.parent)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
