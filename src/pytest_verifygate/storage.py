"""Where pytest-verifygate keeps files of its own: under the git directory, never the work tree.

Owns the state directory (``<git dir>/verifygate``; a per-user temp directory outside git),
the per-run log directories (private to the user; never pruned while a run uses them; in the
temp directory, with one warning, when the state directory cannot be used), pruning to the
newest few and to a total size (shared by the logs, the result cache and the agent sessions),
and the atomic write every file of ours (and every report) goes through.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

# ``<git dir>/verifygate``, and the per-run log directories' home in it.
STATE_DIR_NAME = "verifygate"
LOGS_DIR_NAME = "logs"
KEEP_LOG_RUNS = 10
# The logs of all kept runs together: past it, the oldest runs go (the newest always stays).
KEEP_LOG_BYTES = 256 * 1024 * 1024

# The log directories runs of this process are using now -> how many runs use each. Runs of
# other processes are known by the pid in the directory's name (see ``_in_use``).
_claimed: dict[str, int] = {}
_warned: set[str] = set()
# Pruning of older log directories still going on (``_prune_meanwhile``).
_pruning: list[threading.Thread] = []


def git_dir(repo_root: Path) -> Path | None:
    """The repository's git directory; follows the ``gitdir:`` file of submodules, and of
    linked worktrees to the common git dir they share with the main checkout."""
    dot_git = repo_root / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        try:
            first = dot_git.read_text(encoding="utf-8", errors="replace").splitlines()[0]
        except (OSError, IndexError):
            return None
        if first.startswith("gitdir:"):
            target = Path(first.partition(":")[2].strip())
            target = target if target.is_absolute() else (repo_root / target).resolve()
            # A linked worktree keeps its state in the repository's common git dir: its result
            # cache is the main checkout's, and its logs outlive a temporary worktree.
            try:
                common = (target / "commondir").read_text(encoding="utf-8").strip()
            except OSError:  # a submodule, or a worktree of an old git: its own dir
                return target
            return (target / common).resolve() if common else target
    return None


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
    return _private_temp_dir() / digest


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
    fallback = Path("<temp>") / digest / LOGS_DIR_NAME
    try:
        fallback = _private_temp_dir() / digest / LOGS_DIR_NAME
        run_dir = _new_run_dir(fallback)
    except OSError as second:  # nowhere at all: each gate says so in its output
        warn_once(f"cannot keep gate logs in {logs} ({problem}) nor in {fallback} "
                  f"({second.strerror or second}); reports keep each gate's output tail only")
        return logs / "unavailable"
    if not blocked(logs / "run"):  # a file in the way: its one warning says where logs go
        warn_once(f"cannot keep gate logs in {logs} ({problem}); they go to {fallback} instead")
    return run_dir


def _new_run_dir(logs: Path) -> Path:
    make_private_dir(logs)
    _make_private(logs.parent)  # the state directory: logs and caches are the user's alone
    # Named so that names sort in time order (pruning keeps the last ones): UTC, since time
    # zones and daylight saving differ between runs, and nanoseconds, since several runs can
    # start within one second. The pid says which process's run it is (see ``_in_use``).
    now = time.time_ns()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now // 1_000_000_000))
    run_dir = logs / f"{stamp}.{now % 1_000_000_000:09d}-{os.getpid()}"
    run_dir.mkdir(mode=0o700)
    _prune_meanwhile(logs, run_dir)
    return run_dir


def _prune_meanwhile(logs: Path, current: Path) -> None:
    """Prune older runs in a thread while this one starts its gates: removing a directory
    takes a millisecond or two on some file systems (ext4 on a virtual disk), about what a
    commit's gates take. ``finish_pruning`` waits for it."""

    def prune() -> None:
        with contextlib.suppress(OSError):  # a run never fails for want of tidying up
            _prune(logs, current)

    thread = threading.Thread(target=prune, name="verifygate-prune-logs")
    try:
        thread.start()
    except RuntimeError:  # no thread to be had (a process limit): prune now instead
        prune()
        return
    _pruning.append(thread)


def finish_pruning() -> None:
    """Wait until the pruning this process started is done (a runner closing, an exit)."""
    while _pruning:
        _pruning.pop().join()


def make_private_dir(path: Path) -> None:
    """Make ``path``, and the parents it lacks, directories only this user can use (0700)."""
    missing = []
    parent = path
    while not parent.is_dir() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
    _make_private(path)


def _make_private(directory: Path) -> None:
    """Take group and other permissions off a directory of this user's (made before logs were
    private, or under a loose umask); anything else is left as it is."""
    import stat

    with contextlib.suppress(OSError):
        info = os.lstat(directory)
        if (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
                and info.st_mode & 0o077):
            os.chmod(directory, 0o700)


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
    message = f"{blocker} is not a directory: nothing verifygate keeps under it is used"
    if blocker.name == STATE_DIR_NAME or (blocker.name == LOGS_DIR_NAME
                                          and blocker.parent.name == STATE_DIR_NAME):
        message += f"; gate logs go to {_private_temp_dir()} instead"
    warn_once(message)
    return True


def _not_a_directory(path: Path) -> Path | None:
    """The nearest existing parent of ``path`` if it is not a directory, else None."""
    import stat

    for parent in path.parents:
        try:
            info = os.stat(parent)
        except (FileNotFoundError, NotADirectoryError):  # missing, or itself under a file
            continue
        except OSError:  # unreadable: not a file in the way
            return None
        return None if stat.S_ISDIR(info.st_mode) else parent
    return None


def claim_log_dir(run_dir: Path | None) -> Callable[[], None]:
    """Mark ``run_dir`` as used by a run of this process until the returned function is
    called (at most once counts): no run of this process prunes it meanwhile."""
    if run_dir is None:
        return _nothing
    key = str(run_dir)
    _claimed[key] = _claimed.get(key, 0) + 1
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        left = _claimed.get(key, 1) - 1
        if left > 0:
            _claimed[key] = left
        else:
            _claimed.pop(key, None)

    return release


def _nothing() -> None:
    return None


def _in_use(run_dir: Path) -> bool:
    """Whether a run may still be writing into ``run_dir``: one of this process that claimed
    it, or any run of a process that is still alive (its pid ends the directory's name; a
    reused pid only keeps a directory longer)."""
    if str(run_dir) in _claimed:
        return True
    owner = run_dir.name.rpartition("-")[2]
    if not owner.isdigit() or int(owner) == os.getpid():
        return False
    try:
        os.kill(int(owner), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    except (OverflowError, ValueError):  # digits, but no pid
        return False
    return True


def _prune(logs: Path, current: Path) -> None:
    try:
        with os.scandir(logs) as entries:
            # Only real directories: a link is not a run of ours, and is never followed.
            runs = sorted(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False))
    except OSError:
        return
    # By name, which is the run's start time: a directory's mtime moves whenever a gate
    # creates its log in there, so a long run would outlive the runs started after it.
    removable = [run for run in runs if run != current and not _in_use(run)]
    doomed = set(removable[: max(0, len(runs) - KEEP_LOG_RUNS)])
    kept = [run for run in runs if run not in doomed]
    if len(kept) > 1:
        sizes = {run: _size(run) for run in kept}
        total = sum(sizes.values())
        for run in kept:  # oldest first
            if total <= KEEP_LOG_BYTES:
                break
            if run in removable:
                doomed.add(run)
                total -= sizes[run]
    for run in sorted(doomed):
        _remove_run(run)


def _size(run_dir: Path) -> int:
    total = 0
    with contextlib.suppress(OSError), os.scandir(run_dir) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                total += entry.stat(follow_symlinks=False).st_size
    return total


def prune_oldest(
    paths: Iterable[Path],
    keep: int,
    remove: Callable[[Path], object] = os.unlink,
    *,
    by_name: bool = False,
) -> int:
    """Remove all of ``paths`` but the newest ``keep``; return how many were removed.

    Newest by modification time, of the path itself (a link's own, never its target's), ties
    broken by name; with ``by_name``, by name alone (for names that sort in time order).
    ``remove`` (default: unlink, which removes a link, not what it points to) may raise
    ``OSError``: a path another process pruned or replaced meanwhile is skipped, not counted,
    as is one that vanished before its time could be read. Safe while other processes prune
    the same paths.
    """
    candidates = list(paths)
    if len(candidates) <= keep:  # the usual case: nothing to read, nothing to remove
        return 0
    if by_name:
        ordered = sorted(candidates)
    else:
        dated: list[tuple[int, Path]] = []
        for path in candidates:
            try:
                dated.append((os.lstat(path).st_mtime_ns, path))
            except OSError:
                continue
        dated.sort()
        ordered = [path for _, path in dated]
    removed = 0
    for old in ordered[: max(0, len(ordered) - keep)]:
        try:
            remove(old)
        except OSError:
            continue
        removed += 1
    return removed


def _remove_run(run_dir: Path) -> None:
    """Remove one run's log directory.

    It holds only the gates' log files, so they are unlinked directly: every run prunes one
    old directory, and ``shutil`` would cost its import (bz2, lzma, zlib) on every commit.
    Anything else found in there is left to ``shutil.rmtree``.
    """
    try:
        with os.scandir(run_dir) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    raise IsADirectoryError(entry.path)
                os.unlink(entry.path)
        run_dir.rmdir()
    except OSError:
        import shutil

        shutil.rmtree(run_dir, ignore_errors=True)


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temp file and ``os.replace``: a reader sees the old
    file or the complete new one, never half of either."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A temp name of our own (this process, this instant) rather than ``tempfile.mkstemp``,
    # whose import (random, shutil) would cost every agent stop more than the write itself.
    # O_EXCL keeps mkstemp's guarantee: the file is new and ours, never a planted link.
    temp = target.with_name(f".{target.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


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
