"""Where pytest-verifygate keeps files of its own: under the git directory, never the work tree.

Owns the state directory (``<git dir>/verifygate``; a per-user temp directory outside git),
the per-run log directories, pruning to the newest few (shared by the logs, the result cache and
the agent sessions), and the atomic write every file of ours (and every report) goes through.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

KEEP_LOG_RUNS = 10


def git_dir(repo_root: Path) -> Path | None:
    """The repository's git directory; follows the ``gitdir:`` file of worktrees/submodules."""
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
            return target if target.is_absolute() else (repo_root / target).resolve()
    return None


def git_state_dir(repo_root: Path) -> Path | None:
    """``<git dir>/verifygate``; None outside a git repository."""
    found = git_dir(repo_root)
    return None if found is None else found / "verifygate"


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
    """A fresh directory for one run's gate logs; older runs beyond the last few are removed."""
    logs = state_dir(repo_root) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    # Named so that names sort in time order (pruning keeps the last ones): UTC, since time
    # zones and daylight saving differ between runs, and nanoseconds, since several runs can
    # start within one second.
    now = time.time_ns()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now // 1_000_000_000))
    run_dir = logs / f"{stamp}.{now % 1_000_000_000:09d}-{os.getpid()}"
    run_dir.mkdir()
    _prune(logs)
    return run_dir


def _prune(logs: Path) -> None:
    try:
        with os.scandir(logs) as entries:
            # Only real directories: a link is not a run of ours, and is never followed.
            runs = [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    # By name, which is the run's start time: a directory's mtime moves whenever a gate
    # creates its log in there, so a long run would outlive the runs started after it.
    prune_oldest(runs, KEEP_LOG_RUNS, _remove_run, by_name=True)


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
