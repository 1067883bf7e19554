"""Where the tool keeps its files: the private per-user state directory (what decides a
verdict), the git directory's (logs, durations) with its per-run log directories and their
pruning, and the writing and reading of files the user names.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path

from pytest_verifygate.state.files import (
    DIRECTORY,
    STATE_DIR_NAME,
    StateFileError,
    open_state_dir,
    read_bounded,
    read_state_file,
    replace_in,
    state_parts,
)

LOGS_DIR_NAME = "logs"
KEEP_LOG_RUNS = 10
KEEP_LOG_BYTES = 256 * 1024 * 1024  # past it, the oldest runs go (the newest always stays)
GIT_FILE_BYTES = 64 * 1024  # the most of ``.git`` (a file) and ``commondir`` that is read
LOG_NAME_CHARS = 60
_RUN_DIR_NAME = re.compile(r"[0-9]{8}-[0-9]{6}\.[0-9]{9}-[1-9][0-9]*")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def git_state_dir(repo_root: Path) -> Path | None:
    """``<git dir>/verifygate`` (a linked worktree's in the common git dir); None without git."""
    dot_git = repo_root / ".git"
    if dot_git.is_dir():
        return dot_git / STATE_DIR_NAME
    first = _first_line(dot_git) if dot_git.is_file() else None
    if first is None or not first.startswith("gitdir:"):
        return None
    target = Path(first.partition(":")[2].strip())
    target = target if target.is_absolute() else (repo_root / target).resolve()
    # A linked worktree keeps its state in the common git dir: its result cache is the main
    # checkout's, and its logs outlive a temporary worktree.
    common = (_first_line(target / "commondir") or "").strip()
    return ((target / common).resolve() if common else target) / STATE_DIR_NAME


def _first_line(path: Path) -> str | None:
    """The first line of a small file git wrote, read as a state file is (never blocking)."""
    try:
        raw = read_state_file(path, GIT_FILE_BYTES)
    except StateFileError:
        return None
    lines = (raw or b"").decode("utf-8", "replace").splitlines()
    return lines[0] if lines else None


def state_dir(repo_root: Path) -> Path:
    """``<git dir>/verifygate``, or a per-user, per-project temp directory without git."""
    return git_state_dir(repo_root) or _temp_state_dir(repo_root)


def _temp_state_dir(repo_root: Path) -> Path:
    import hashlib

    digest = hashlib.sha256(str(repo_root.resolve()).encode()).hexdigest()[:16]
    return _private_temp_dir() / digest / STATE_DIR_NAME


@functools.cache  # one directory per process, even when it has to be a fresh one
def _private_temp_dir() -> Path:
    """``<tmp>/verifygate-<uid>`` if it is this user's alone; else a fresh private one: anyone
    could create that name first and plant logs or cached results."""
    import tempfile

    path = Path(tempfile.gettempdir()) / f"verifygate-{os.getuid()}"
    with contextlib.suppress(OSError):
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o77:
            return path
    return Path(tempfile.mkdtemp(prefix="verifygate-"))


def user_state_dir() -> Path | None:
    """``$XDG_STATE_HOME/verifygate`` (``~/.local/state/verifygate``), made private if
    missing; None unless it is this user's."""
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):  # unset, or relative (which the XDG spec says to ignore)
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".local", "state")
    directory = Path(base, STATE_DIR_NAME)
    try:
        fd = open_state_dir(directory, create=True)
    except OSError:
        return None
    try:
        owner = os.fstat(fd).st_uid
    finally:
        os.close(fd)
    return directory if owner == os.getuid() else None


def private_dir(folder: str, project: Path | str) -> Path | None:
    """``<user state dir>/<folder>/<project, hashed>``: what decides a verdict (cached passes,
    an agent's rounds), out of reach of an agent confined to the workspace. None when the user
    has no state directory."""
    import hashlib

    base = user_state_dir()
    if base is None:
        return None
    tag = hashlib.sha256(str(project).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return base / folder / tag


def repository_key(repo_root: Path) -> str:
    """What names a repository's private state: its common git directory (linked worktrees
    share their cached passes), else the directory itself."""
    state = git_state_dir(repo_root)
    return os.path.realpath(state.parent if state is not None else repo_root)


def new_log_dir(repo_root: Path, warnings: list[str]) -> Path:
    """A fresh private directory for one run's gate logs, older runs' pruned; the temp
    directory, with a warning, when there can be none there."""
    logs = state_dir(repo_root) / LOGS_DIR_NAME
    try:
        return _new_run_dir(logs)
    except OSError as exc:
        problem = exc.strerror or str(exc)
    fallback = Path("<temp>")
    try:
        fallback = _temp_state_dir(repo_root) / LOGS_DIR_NAME
        run_dir = _new_run_dir(fallback)
    except OSError as second:  # nowhere at all: each gate says so in its output
        warnings.append(f"warning: cannot keep gate logs in {logs} ({problem}) nor in "
                        f"{fallback} ({second.strerror or second}); reports keep each gate's "
                        "output tail only")
        return logs / "unavailable"
    warnings.append(blocker(logs / "run") or f"warning: cannot keep gate logs in {logs} "
                    f"({problem}); they go to {fallback} instead")
    return run_dir


def _new_run_dir(logs: Path) -> Path:
    # Names sort in time order (UTC, to the nanosecond) and end in the pid (``_in_use``).
    now = time.time_ns()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now // 1_000_000_000))
    name = f"{stamp}.{now % 1_000_000_000:09d}-{os.getpid()}"
    logs_fd = open_state_dir(logs, create=True)
    try:
        os.mkdir(name, 0o700, dir_fd=logs_fd)
        with contextlib.suppress(OSError):  # a run never fails for want of tidying up
            _prune(logs_fd, name)
    finally:
        os.close(logs_fd)
    return logs / name


def make_private_dir(path: Path) -> None:
    """Make ``path`` and its missing parents private directories, through no link."""
    os.close(open_state_dir(path, create=True))


def blocker(path: Path) -> str | None:
    """The warning for a path that failed because a file or link is where a parent should be."""
    split = state_parts(path)
    depth = len(split[0].parts) if split is not None else len(path.parts)
    for parent in path.parents:
        try:  # below the state root's holder, a link is never followed
            info = os.lstat(parent) if len(parent.parts) > depth else os.stat(parent)
        except (FileNotFoundError, NotADirectoryError):  # missing, or itself under a file
            continue
        except OSError:  # unreadable: not a file in the way
            return None
        if stat.S_ISDIR(info.st_mode):
            return None
        what = "a symbolic link (never followed)" if stat.S_ISLNK(info.st_mode) else \
            "not a directory"
        message = f"warning: {parent} is {what}: nothing verifygate keeps under it is used"
        if parent.name == STATE_DIR_NAME or (parent.name == LOGS_DIR_NAME
                                             and parent.parent.name == STATE_DIR_NAME):
            message += f"; gate logs go to {_private_temp_dir()} instead"
        return message
    return None


def claim_log_dir(run_dir: Path | None) -> Callable[[], None]:
    """Keep ``run_dir`` from being pruned until the returned function is called (a shared
    ``flock``: the kernel drops it however the process ends)."""
    fds: list[int] = []
    with contextlib.suppress(OSError):  # no directory to keep: the logs say why, gate by gate
        if run_dir is not None:
            fds.append(open_state_dir(run_dir))
            fcntl.flock(fds[0], fcntl.LOCK_SH)

    def release() -> None:
        while fds:
            os.close(fds.pop())  # and with it the lock

    return release


def _locked_by_a_run(run_fd: int) -> bool:
    try:
        fcntl.flock(run_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return isinstance(exc, BlockingIOError)
    return False


def _in_use(logs_fd: int, run: str) -> bool:
    """Whether a run may still write into ``run``: it is claimed, or its process (the pid
    ending the name; a reused pid only keeps it longer) is alive."""
    try:
        fd = os.open(run, DIRECTORY | os.O_NOFOLLOW, dir_fd=logs_fd)
    except OSError:
        return True  # not to be opened: not to be removed either
    try:
        if _locked_by_a_run(fd):
            return True
    finally:
        os.close(fd)  # and with it the lock
    owner = int(run.rpartition("-")[2])
    return owner != os.getpid() and process_alive(owner)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` may be running: another user's is, and so is a number too
    large to be a pid (no directory named after it is removed)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        pass
    return True


def _prune(logs_fd: int, current: str) -> None:
    """Remove older runs' log directories, and in them only log files."""
    with os.scandir(logs_fd) as entries:
        # Only real directories: a link is not a run of ours, and is never followed.
        runs = sorted(entry.name for entry in entries if _RUN_DIR_NAME.fullmatch(entry.name)
                      and entry.is_dir(follow_symlinks=False))
    # By name, the start time: a directory's mtime moves whenever a gate creates its log.
    removable = [run for run in runs if run != current and not _in_use(logs_fd, run)]
    # The newest KEEP_LOG_RUNS always stay: a run in use is not made up for by a newer one.
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
    """Remove one run's log files, and its directory if nothing else is left."""
    run_fd = os.open(run, DIRECTORY | os.O_NOFOLLOW, dir_fd=logs_fd)
    try:
        if _locked_by_a_run(run_fd):
            return
        with os.scandir(run_fd) as entries:
            for entry in entries:
                # A gate's log (``log_file_name``) or its temp file (``logfile.py``) only.
                name = entry.name
                if (_UNSAFE_CHARS.search(name) is None and name.endswith((".log", ".unroll"))
                        and entry.is_file(follow_symlinks=False)):
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=run_fd)
        os.rmdir(run, dir_fd=logs_fd)  # not empty: someone else's files stay, and so does it
    finally:
        os.close(run_fd)


def write_output(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write a file the user named (``--json``): a regular file is replaced atomically, a
    link's target too; a device or FIFO (``/dev/stdout``) is written into."""
    text = os.fspath(path)
    try:
        info = os.stat(text)
    except (FileNotFoundError, NotADirectoryError):
        info = None
    if (text.endswith(("/", os.sep)) or os.path.basename(text) in ("", ".", "..")
            or (info is not None and stat.S_ISDIR(info.st_mode))):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file name", text)
    if info is not None and not stat.S_ISREG(info.st_mode):
        # Non-blocking open: a FIFO with no reader is an error (ENXIO), not a hang.
        fd = os.open(text, os.O_WRONLY | os.O_NONBLOCK)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        return
    target = Path(os.path.realpath(text) if os.path.islink(text) else text)
    target.parent.mkdir(parents=True, exist_ok=True)
    dir_fd = os.open(target.parent, DIRECTORY)
    try:
        replace_in(dir_fd, target.name, data)
    finally:
        os.close(dir_fd)


def log_file_name(gate_name: str) -> str:
    """``lint.log``, or for a name not short, lowercase and safe, ``Lint_me-4f0c2a9e1b.log``."""
    if (_UNSAFE_CHARS.search(gate_name) is None and len(gate_name) <= LOG_NAME_CHARS
            and gate_name == gate_name.lower() and not gate_name.startswith((".", "-"))):
        return f"{gate_name}.log"
    import hashlib

    safe = _UNSAFE_CHARS.sub("_", gate_name)[:LOG_NAME_CHARS]
    digest = hashlib.sha256(gate_name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{safe.strip('._-') or 'gate'}-{digest}.log"


def read_user_file(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """The regular file ``path`` (a link followed), up to ``limit`` bytes; None for anything
    else. Non-blocking: a FIFO in a cloned repository never hangs us."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return read_bounded(fd, limit)
    except (OSError, StateFileError):
        return None
    finally:
        os.close(fd)
