"""Where pytest-verifygate keeps files of its own: under the git directory, never the work tree.

Owns the state directory (``<git dir>/verifygate``; a per-user temp directory outside git)
and the one way into it: every directory from its root down is opened without following a
link (``open_state_dir``), and every state file is written through that (``write_state``).
Also the per-run log directories (private to the user; never pruned while a run uses them; in
the temp directory, with one warning, when the state directory cannot be used), pruning that
removes only entries named as the tool names them (``prune_own_files``), and the atomic write
of files the user names (``write_atomic``, ``write_output``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pytest_verifygate.state.files import (
    DIRECTORY,
    STATE_DIR_NAME,
    StateFileError,
    open_state_dir,
    read_state_file,
    replace_in,
    state_parts,
)

# The per-run log directories' home in the state directory.
LOGS_DIR_NAME = "logs"
KEEP_LOG_RUNS = 10
# The logs of all kept runs together: past it, the oldest runs go (the newest always stays).
KEEP_LOG_BYTES = 256 * 1024 * 1024
# The most of ``.git`` (a file in submodules and worktrees) and ``commondir`` that is read.
GIT_FILE_BYTES = 64 * 1024

# Warnings said already by this process (``warn_once``).
_warned: set[str] = set()
# The name of the thread that prunes older log directories (``_prune_meanwhile``).
PRUNING_THREAD = "verifygate-prune-logs"


def git_dir(repo_root: Path) -> Path | None:
    """The repository's git directory; follows the ``gitdir:`` file of submodules, and of
    linked worktrees to the common git dir they share with the main checkout."""
    dot_git = repo_root / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        first = _first_line(dot_git)
        if first is None:
            return None
        if first.startswith("gitdir:"):
            target = Path(first.partition(":")[2].strip())
            target = target if target.is_absolute() else (repo_root / target).resolve()
            # A linked worktree keeps its state in the repository's common git dir: its result
            # cache is the main checkout's, and its logs outlive a temporary worktree.
            common = _first_line(target / "commondir")
            if common is None:  # a submodule, or a worktree of an old git: its own dir
                return target
            return (target / common.strip()).resolve() if common.strip() else target
    return None


def _first_line(path: Path) -> str | None:
    """The first line of a small file git wrote (``.git``, ``commondir``); None if there is
    none. Read like a state file: a FIFO or a device there never blocks, and a huge file is
    not read whole."""
    try:
        raw = read_state_file(path, GIT_FILE_BYTES)
    except StateFileError:
        return None
    lines = (raw or b"").decode("utf-8", "replace").splitlines()
    return lines[0] if lines else None


def git_state_dir(repo_root: Path) -> Path | None:
    """``<git dir>/verifygate``; None outside a git repository."""
    found = git_dir(repo_root)
    return None if found is None else found / STATE_DIR_NAME


def state_dir(repo_root: Path) -> Path:
    """``<git dir>/verifygate``, or a per-user, per-project temp directory without git."""
    found = git_state_dir(repo_root)
    if found is not None:
        return found
    import hashlib

    digest = hashlib.sha256(str(repo_root.resolve()).encode()).hexdigest()[:16]
    return _private_temp_dir() / digest / STATE_DIR_NAME


@functools.cache  # one directory per process, even when it has to be a fresh one
def _private_temp_dir() -> Path:
    """``<tmp>/verifygate-<uid>``, made private (0700) to this user and checked to be so.

    The temp directory is shared: anyone could create that name first, or a link there, and
    plant logs or cached results. If it is not a directory owned by this user that nobody
    else can write, a fresh private directory serves this run instead.
    """
    import stat
    import tempfile

    path = Path(tempfile.gettempdir()) / f"verifygate-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
        if (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
                and not info.st_mode & 0o077):
            return path
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="verifygate-"))


def new_log_dir(repo_root: Path) -> Path:
    """A fresh directory (0700) for one run's gate logs; older runs beyond the last few, or
    beyond ``KEEP_LOG_BYTES`` together, are removed unless a run still uses them.

    If the state directory cannot be used (a read-only ``.git``, a file in its place), the logs
    go to the per-user temp directory instead, with one warning on stderr: a run never fails
    for want of a place for its logs.
    """
    logs = state_dir(repo_root) / LOGS_DIR_NAME
    try:
        return _new_run_dir(logs)
    except OSError as exc:
        problem = exc.strerror or str(exc)
    import hashlib

    digest = hashlib.sha256(str(repo_root.resolve()).encode()).hexdigest()[:16]
    fallback = Path("<temp>") / digest / STATE_DIR_NAME / LOGS_DIR_NAME
    try:
        fallback = _private_temp_dir() / digest / STATE_DIR_NAME / LOGS_DIR_NAME
        run_dir = _new_run_dir(fallback)
    except OSError as second:  # nowhere at all: each gate says so in its output
        warn_once(f"cannot keep gate logs in {logs} ({problem}) nor in {fallback} "
                  f"({second.strerror or second}); reports keep each gate's output tail only")
        return logs / "unavailable"
    if not blocked(logs / "run"):  # a file in the way: its one warning says where logs go
        warn_once(f"cannot keep gate logs in {logs} ({problem}); they go to {fallback} instead")
    return run_dir


def _new_run_dir(logs: Path) -> Path:
    # Named so that names sort in time order (pruning keeps the last ones): UTC, since time
    # zones and daylight saving differ between runs, and nanoseconds, since several runs can
    # start within one second. The pid says which process's run it is (see ``_in_use``).
    now = time.time_ns()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now // 1_000_000_000))
    name = f"{stamp}.{now % 1_000_000_000:09d}-{os.getpid()}"
    logs_fd = open_state_dir(logs, create=True)
    try:
        os.mkdir(name, 0o700, dir_fd=logs_fd)
    finally:
        os.close(logs_fd)
    run_dir = logs / name
    _prune_meanwhile(logs, run_dir)
    return run_dir


def _prune_meanwhile(logs: Path, current: Path) -> None:
    """Prune older runs in a thread while this one starts its gates: removing a directory
    takes a millisecond or two on some file systems (ext4 on a virtual disk), about what a
    commit's gates take. ``finish_pruning`` waits for it."""

    def prune() -> None:
        with contextlib.suppress(OSError):  # a run never fails for want of tidying up
            _prune(logs, current)

    thread = threading.Thread(target=prune, name=PRUNING_THREAD)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had (a process limit): prune now instead
        prune()


def finish_pruning() -> None:
    """Wait until the pruning this process started is done (a runner closing, an exit)."""
    for thread in threading.enumerate():
        if thread.name == PRUNING_THREAD and thread is not threading.current_thread():
            thread.join()


def make_private_dir(path: Path) -> None:
    """Make ``path``, and the parents it lacks, directories only this user can use (0700);
    under a state root, through no link (``open_state_dir``)."""
    os.close(open_state_dir(path, create=True))


def warn_once(message: str) -> None:
    """One line on stderr, once per process, for what the user should know about storage."""
    if not first_time(message):
        return
    import sys

    with contextlib.suppress(OSError, ValueError):
        print(f"verifygate: warning: {message}", file=sys.stderr, flush=True)


def first_time(message: str) -> bool:
    """Whether ``message`` is new to this process; from now on it is not. A caller that shows
    a warning in its own place (a plan's warnings) notes it here, so ``warn_once`` does not
    repeat it."""
    if message in _warned:
        return False
    _warned.add(message)
    return True


def blocked(path: Path) -> bool:
    """Whether ``path`` cannot be used because something other than a directory (a file)
    sits where one of its parents should be: then one warning, naming that, stands for every
    path under it (the cache entries, the durations, the record of outputs, the logs), once.

    Only for a path that just failed: this looks at the file system."""
    blocker = _not_a_directory(path)
    if blocker is None:
        return False
    what = "a symbolic link (never followed)" if blocker.is_symlink() else "not a directory"
    message = f"{blocker} is {what}: nothing verifygate keeps under it is used"
    if blocker.name == STATE_DIR_NAME or (blocker.name == LOGS_DIR_NAME
                                          and blocker.parent.name == STATE_DIR_NAME):
        message += f"; gate logs go to {_private_temp_dir()} instead"
    warn_once(message)
    return True


def _not_a_directory(path: Path) -> Path | None:
    """The nearest existing parent of ``path`` if it is not a directory (a link counts as
    not one: none is followed), else None."""
    import stat

    split = state_parts(path)
    depth = len(split[0].parts) if split is not None else len(path.parts)
    for parent in path.parents:
        try:  # below the state root's holder, a link is never followed
            info = os.lstat(parent) if len(parent.parts) > depth else os.stat(parent)
        except (FileNotFoundError, NotADirectoryError):  # missing, or itself under a file
            continue
        except OSError:  # unreadable: not a file in the way
            return None
        return None if stat.S_ISDIR(info.st_mode) else parent
    return None


def claim_log_dir(run_dir: Path | None) -> Callable[[], None]:
    """Mark ``run_dir`` as used by a run until the returned function is called (at most once
    counts): no run, of this process or another, prunes it meanwhile.

    The mark is a shared ``flock`` on the directory, which pruning must take exclusively to
    remove it: the kernel drops it when the run's process ends, however it ends.
    """
    if run_dir is None:
        return _nothing
    import fcntl

    try:
        fd = open_state_dir(run_dir)
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:  # no directory to keep: the logs say why, gate by gate
        return _nothing
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            os.close(fd)  # and with it the lock

    return release


def _nothing() -> None:
    return None


def _in_use(logs_fd: int, run: str) -> bool:
    """Whether a run may still be writing into the directory ``run``: one that claimed it
    (``claim_log_dir``), or one of a process that is still alive (its pid ends the name; a
    reused pid only keeps a directory longer) that has not claimed it yet."""
    import fcntl

    try:
        fd = os.open(run, DIRECTORY | os.O_NOFOLLOW, dir_fd=logs_fd)
    except OSError:
        return True  # not to be opened: not to be removed either
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # claimed
        return True
    except OSError:  # a file system without locks: the pid alone decides
        pass
    finally:
        os.close(fd)  # and with it the lock: pruning is best effort, a claim never waits
    owner = int(run.rpartition("-")[2])
    if owner == os.getpid():
        return False
    try:
        os.kill(owner, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    except (OverflowError, ValueError):  # digits, but no pid
        return False
    return True


def is_run_dir_name(name: str) -> bool:
    """Whether ``name`` is one ``_new_run_dir`` makes: ``20250131-235959.123456789-4242``."""
    stamp, dash, pid = name.rpartition("-")
    day, dot, nanos = stamp.partition(".")
    digits = day[:8] + day[9:] + nanos + pid
    return bool(dash and dot and len(day) == 15 and day[8] == "-" and len(nanos) == 9
                and pid and digits.isascii() and digits.isdigit() and pid[0] != "0")


def is_own_log_name(name: str) -> bool:
    """Whether ``name`` is a file a run writes in its log directory: a gate's log
    (``log_file_name``) or the temp file its tail is put in order in (``logfile.py``)."""
    return is_file_name_safe(name) and name.endswith((".log", ".unroll"))


def _prune(logs: Path, current: Path) -> None:
    """Remove older runs' log directories; only directories named as runs are (see
    ``is_run_dir_name``), and in them only log files: whatever else is found stays."""
    logs_fd = open_state_dir(logs)
    try:
        with os.scandir(logs_fd) as entries:
            # Only real directories: a link is not a run of ours, and is never followed.
            runs = sorted(entry.name for entry in entries if is_run_dir_name(entry.name)
                          and entry.is_dir(follow_symlinks=False))
        # By name, which is the run's start time: a directory's mtime moves whenever a gate
        # creates its log in there, so a long run would outlive the runs started after it.
        removable = [run for run in runs
                     if run != current.name and not _in_use(logs_fd, run)]
        # The newest KEEP_LOG_RUNS always stay: a run kept for being in use is not made up for
        # by removing a newer one (which another pruning, started earlier, might still list).
        oldest = set(runs[: max(0, len(runs) - KEEP_LOG_RUNS)])
        doomed = {run for run in removable if run in oldest}
        kept = [run for run in runs if run not in doomed]
        if len(kept) > 1:
            sizes = {run: _size(logs_fd, run) for run in kept}
            total = sum(sizes.values())
            for run in kept:  # oldest first
                if total <= KEEP_LOG_BYTES:
                    break
                if run in removable:
                    doomed.add(run)
                    total -= sizes[run]
        for run in sorted(doomed):
            with contextlib.suppress(OSError):
                _remove_run(logs_fd, run)
    finally:
        os.close(logs_fd)


def _size(logs_fd: int, run: str) -> int:
    total = 0
    with contextlib.suppress(OSError):
        run_fd = os.open(run, DIRECTORY | os.O_NOFOLLOW, dir_fd=logs_fd)
        try:
            with os.scandir(run_fd) as entries:
                for entry in entries:
                    with contextlib.suppress(OSError):
                        total += entry.stat(follow_symlinks=False).st_size
        finally:
            os.close(run_fd)
    return total


def _remove_run(logs_fd: int, run: str) -> None:
    """Remove one run's log files and, if nothing else is left in it, its directory; not
    if a run claimed it meanwhile (the lock is held until it is gone)."""
    import fcntl

    run_fd = os.open(run, DIRECTORY | os.O_NOFOLLOW, dir_fd=logs_fd)
    try:
        try:
            fcntl.flock(run_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # claimed since it was chosen: it stays
            return
        except OSError:  # a file system without locks: ``_in_use`` chose by the pid
            pass
        with os.scandir(run_fd) as entries:
            for entry in entries:
                if is_own_log_name(entry.name) and entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.name, dir_fd=run_fd)
        os.rmdir(run, dir_fd=logs_fd)  # not empty: someone else's files stay, and so does it
    finally:
        os.close(run_fd)


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` to ``path`` (a file of the user's, not state: see ``write_state``)
    through a temp file and ``os.replace``: a reader sees the old file or the complete new
    one, never half of either. A link at ``path`` itself is replaced, not followed."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    dir_fd = os.open(target.parent, DIRECTORY)
    try:
        replace_in(dir_fd, target.name, data)
    finally:
        os.close(dir_fd)


def write_output(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write a file the user named (``--json``, ``--junit``, ``--verify-digest``) as users of
    such options expect: a regular file (or a new one) is replaced atomically; a symbolic link
    is followed, and its target replaced (the link stays); a device or FIFO (``/dev/stdout``,
    ``/dev/null``) is written into, never replaced; a directory is an ``IsADirectoryError``.

    Only for paths a user gave: state files use ``write_atomic``, which never follows a link.
    """
    import errno
    import stat

    text = os.fspath(path)
    if not text or text.endswith(("/", os.sep)) or os.path.basename(text) in ("", ".", ".."):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file name", text)
    try:
        info = os.stat(text)
    except (FileNotFoundError, NotADirectoryError):
        info = None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file name", text)
    if info is not None and not stat.S_ISREG(info.st_mode):
        # Non-blocking open: a FIFO with no reader is an error (ENXIO), not a hang.
        fd = os.open(text, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        return
    write_atomic(os.path.realpath(text) if os.path.islink(text) else text, data)


# The longest part of a gate's name kept in its log file's name (the name is any text).
LOG_NAME_CHARS = 60


# What a file name made from a name may keep as it is, on any file system (``_`` stands for
# anything else).
FILE_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def is_file_name_safe(name: str) -> bool:
    """Whether every character of ``name`` is one of ``FILE_NAME_CHARS`` (the common case is
    checked without compiling a pattern)."""
    return FILE_NAME_CHARS.issuperset(name)


def log_file_name(gate_name: str) -> str:
    """A gate's log file name: safe on any file system, bounded, and unique per gate name.

    A name of lowercase letters, digits, ``.``, ``_`` and ``-`` (not starting with ``.`` or
    ``-``, at most ``LOG_NAME_CHARS`` long) is used as it is: ``lint.log``. Any other (spaces,
    ``/``, ``:``, unicode, capitals that a case-insensitive file system would merge, 300
    characters) keeps its safe characters, cut short, and a digest of the whole name:
    ``Type_check_mypy-4f0c2a9e1b.log``.
    """
    if (is_file_name_safe(gate_name) and len(gate_name) <= LOG_NAME_CHARS
            and gate_name == gate_name.lower() and not gate_name.startswith((".", "-"))):
        return f"{gate_name}.log"
    import re

    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", gate_name)[:LOG_NAME_CHARS]
    import hashlib  # only for names that need it: not on most runs

    digest = hashlib.sha256(gate_name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{safe.strip('._-') or 'gate'}-{digest}.log"


def read_user_file(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """The regular file ``path`` of the user's project (a link followed), read up to
    ``limit`` bytes; None for anything else (missing, a FIFO, a device, a directory, larger).
    Opened non-blocking and checked once open: a FIFO in a cloned repository never hangs a
    command that only looks at the project (``check``, ``init``)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = b""
        while chunk := os.read(fd, limit + 1 - len(data)):
            data += chunk
            if len(data) > limit:  # grown since: still too large
                return None
    except OSError:
        return None
    finally:
        os.close(fd)
    return data
