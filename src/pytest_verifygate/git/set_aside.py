"""A commit's or a push's check in place (docs: guide/pre-commit.md, "What the gates see"): for
the run, the work tree is made equal to the tree the commit records. What that tree lacks
(unstaged changes, untracked files git does not ignore, staged deletions still on disk) is
moved aside under the git directory and the recorded content written in its place; afterwards
everything goes back byte for byte, on every way out, and what a killed run set aside is put
back by the next run.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from pytest_verifygate.errors import ChangeSetError, VerifyGateError
from pytest_verifygate.git.changes import (
    GITLINK,
    LISTING,
    STAGED_DIFF,
    SYMLINK,
    ChangeRequest,
    blob_id,
    check_work_tree,
    hidden_edits,
    parse_raw,
    read_listing,
)
from pytest_verifygate.gitcmd import empty_tree, git_answer, git_output
from pytest_verifygate.notices import collecting
from pytest_verifygate.signals import hold_interrupts
from pytest_verifygate.state.files import open_state_dir, replace_in
from pytest_verifygate.state.outputs import own_files
from pytest_verifygate.state.storage import git_state_dir

# json, shutil and tempfile are imported where they are used: most runs set nothing aside.

JOURNAL = "journal.json"
JOURNAL_VERSION = 1
MAX_JOURNAL_BYTES = 256 << 20
_NO_ENTRY = "000000"
# The work tree against a tree (or the index), every path from the top: a submodule differs
# for another commit checked out or files changed in it, not for untracked ones in it.
_DIFF = ("--raw", "-z", "--no-abbrev", "--no-renames", "--ignore-submodules=untracked")
# Every exclude source counts here: an ignored file is the environment, never part of a commit.
_UNTRACKED = ("--others", "--exclude-standard")

Say = Callable[[str], None]
Stamp = tuple[int, int, int, int, int]


class Target(NamedTuple):
    """What a run is to see: at ``top``, the ``index`` file's content (a commit), else ``tree``
    (a push)."""

    top: Path
    what: str  # "the staged content", "the pushed commit 3f2a9c1d0b4e"
    tree: str | None = None
    index_file: Path | None = None


class _Entry(NamedTuple):
    """A path the run sees as ``tree`` has it: ``slot``, where what was on disk went (None:
    nothing was); ``mode`` and ``oid``, what was written (None: nothing, the tree lacks it);
    ``stamp``, the written file's ``lstat`` (None: not written yet, or nothing to write)."""

    path: str
    slot: str | None
    mode: str | None
    oid: str | None
    stamp: Stamp | None = None


def commit_target(here: Path, *, staged: bool) -> Target | None:
    """The tree a run at ``here`` is to check in place: the index for ``--staged`` or
    pre-commit's commit stage, the pushed commit for a push (pre-commit's variables); None
    for any other run. A pushed commit other than the one checked out is refused."""
    env = os.environ
    # PRE_COMMIT_LOCAL_BRANCH: the first push of a new history, which has no range.
    ref = env.get("PRE_COMMIT_TO_REF") if env.get("PRE_COMMIT_FROM_REF") else None
    if not ref and env.get("PRE_COMMIT") == "1" and env.get("PRE_COMMIT_REMOTE_BRANCH"):
        ref = env.get("PRE_COMMIT_LOCAL_BRANCH")
    if not staged and not ref and env.get("PRE_COMMIT") != "1":
        return None
    located = git_output(here, "rev-parse", "--show-toplevel", "--git-path", "index")
    check_work_tree(here, located)
    top_line, _, index_line = os.fsdecode(located).partition("\n")
    top = Path(top_line)
    if ref and not staged:
        if ref.startswith("-"):
            raise ChangeSetError(f"invalid git ref {ref!r}: a ref cannot start with '-'")
        commit = _revision(top, f"{ref}^{{commit}}")
        if commit is None:
            raise ChangeSetError(f"the pushed ref {ref!r} is not a commit in {top}")
        tree = _revision(top, f"{ref}^{{tree}}")
        if tree != _revision(top, "HEAD^{tree}"):
            raise ChangeSetError(
                f"the pushed commit {commit[:12]} is not the one checked out, and only what is "
                "checked out can be checked in your environment: check it out and push again "
                "(git switch <branch>; git push), or push it with --no-verify and let CI check it")
        return Target(top, f"the pushed commit {commit[:12]}", tree=tree)
    # git sets ``GIT_INDEX_FILE`` for its pre-commit hook (the index ``git commit -a`` or
    # ``--only`` builds is another file): a commit, even of nothing staged (``--amend``,
    # ``--allow-empty``), records the index. Without it, nothing staged under pre-commit is
    # ``pre-commit run --all-files``: the work tree as it is.
    committing = "GIT_INDEX_FILE" in env
    if staged or (not ref and not env.get("PRE_COMMIT_REMOTE_BRANCH")
                  and (committing or git_output(top, *STAGED_DIFF))):
        return Target(top, "the staged content", index_file=here / index_line.strip("\n"))
    return None


def set_aside_for(changes: ChangeRequest, here: Path, say: Say
                  ) -> contextlib.AbstractContextManager[SetAside | None]:
    """For a commit's or a push's check, the work tree as the commit records it, while
    entered; for any other run (explicit files, a ref, ``--all``), the work tree as it is."""
    if changes.files is not None or changes.changed_from or changes.all:
        return contextlib.nullcontext()
    target = commit_target(here, staged=changes.staged)
    return contextlib.nullcontext() if target is None else SetAside(target, say, changes.outputs)


def _revision(top: Path, revision: str) -> str | None:
    found = git_answer(top, "rev-parse", "--verify", "--quiet", "--end-of-options", revision)
    return found.decode().strip() if found is not None else None


def _index_tree(top: Path, index: bytes) -> str:
    """The tree of the ``index`` file's content (written from a copy: git would take the lock
    the ``git commit`` running this holds)."""
    import tempfile

    if not index:
        return empty_tree(top)
    with tempfile.TemporaryDirectory(prefix="verifygate-index-") as private:
        copy = Path(private) / "index"
        copy.write_bytes(index)
        return git_output(top, "write-tree", environ={"GIT_INDEX_FILE": str(copy)}
                          ).decode().strip()


def _read_index(target: Target) -> bytes:
    try:
        return target.index_file.read_bytes() if target.index_file is not None else b""
    except FileNotFoundError:  # nothing was ever staged
        return b""
    except OSError as exc:
        raise ChangeSetError(f"cannot read the index {target.index_file}: {exc.strerror or exc}"
                             ) from None


def differences(target: Target, *, untracked: bool = True) -> dict[str, tuple[str, str] | None]:
    """Every path at which the work tree differs from what ``target`` records (ignored files
    aside; untracked files only with ``untracked``), with its mode and id there (None where it
    has none); ``ChangeSetError`` for a submodule that differs."""
    top = target.top
    # Against the index git reads no tree at all.
    diff = ("diff-files", *_DIFF) if target.tree is None else ("diff", *_DIFF, target.tree, "--")
    found: dict[str, tuple[str, str] | None] = {}
    for entry in parse_raw(git_output(top, *diff)):
        if GITLINK in (entry.old_mode, entry.new_mode):
            raise ChangeSetError(
                f"submodule {entry.path} is not as {target.what} records it (another commit "
                "checked out, or changes in it): commit or stash them there, or stage the "
                "submodule, then try again")
        found[entry.path] = (None if entry.old_mode == _NO_ENTRY
                             else (entry.old_mode, entry.old_oid))
    if not untracked:
        return found
    _, others, flagged = read_listing(git_output(top, *LISTING, *_UNTRACKED))
    for path in others:  # a nested repository is listed as its directory
        found.setdefault(path.rstrip("/"), None)
    for path in hidden_edits(top, flagged)[0]:
        found.setdefault(path, (flagged[path].mode, flagged[path].oid))
    return found


class SetAside:
    """While entered, the work tree at ``target.top`` is ``target.tree``, ignored files aside;
    ``finish`` checks that the run changed nothing of it (nor of the index, for a commit) and
    puts everything back. ``say`` gets the lines the user should read."""

    def __init__(self, target: Target, say: Say,
                 outputs: Sequence[str | os.PathLike[str]] = ()) -> None:
        self.target = target
        self.say = say
        self.outputs = outputs  # the files this run writes (reports): never set aside
        self.entries: list[_Entry] = []
        self.removed_dirs: list[tuple[str, int]] = []  # emptied by the moves: made again after
        self.made_dirs: list[str] = []  # made for the written files: removed after
        self.home: Path | None = None  # this work tree's place under the git directory
        self.run_dir: Path | None = None
        self.lock: int | None = None
        self.index: bytes | None = None  # the index's content as checked (a commit)
        self.index_stamp: Stamp | None = None

    def __enter__(self) -> SetAside:
        try:
            self._enter()
        except OSError as exc:
            self.close()
            where = f"{exc.filename}: " if exc.filename else ""
            raise ChangeSetError(f"cannot set aside what {self.target.what} lacks ({where}"
                                 f"{exc.strerror or exc}); nothing was checked: fix that "
                                 "path, or stage or stash the work first") from None
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _enter(self) -> None:
        top = self.target.top
        state = git_state_dir(top)
        if state is None:
            raise ChangeSetError(f"{top} has no git directory to set work aside in")
        self.home = _home(state, top)
        if self.home.is_dir():  # another run may be at work: never two at once
            self._take_lock()
            recover(self.home, top, self.say)
        if self.target.index_file is not None:
            self.index_stamp = _stamp(self.target.index_file)
            self.index = _read_index(self.target)
        found = differences(self.target)
        # This run's reports, and earlier runs' as they wrote them, are the tool's own files
        # (what is wrong with their record, the change set says: it reads it too).
        with collecting():
            own = own_files(top, self.outputs, Path.cwd())
        found = {path: recorded for path, recorded in found.items()
                 if recorded is not None or path not in own}
        if not found:  # nothing differs: nothing is touched, and no other run waits on this
            self.close()
            return
        if self.lock is None:
            self._take_lock()
        _check_environment(top, found)
        self.run_dir = self.home / f"run-{os.getpid()}-{time.time_ns()}"
        os.mkdir(self.run_dir, 0o700)
        self.entries = [_Entry(path, f"{number:06d}" if os.path.lexists(top / path) else None,
                               *(found[path] or (None, None)))
                        for number, path in enumerate(sorted(found))]
        self._save()
        for entry in self.entries:
            if entry.slot is not None:
                _move(top / entry.path, self.run_dir / entry.slot)
        self._remove_emptied_dirs()
        self._write_tree_content()
        self._save()
        moved = sum(entry.slot is not None for entry in self.entries)
        self.say(f"checking {self.target.what} in place: {moved} file(s) that differ from it "
                 "are set aside until the gates are done")

    def _take_lock(self) -> None:
        assert self.home is not None
        self.lock = _lock(self.home)
        if self.lock is None:
            raise ChangeSetError("another verifygate run is checking a commit in this work "
                                 "tree: wait for it to finish, then try again")

    def _save(self) -> None:
        """The journal a later run restores from, should this one be killed."""
        import json

        assert self.run_dir is not None
        record = {"version": JOURNAL_VERSION, "pid": os.getpid(),
                  "top": os.fsdecode(self.target.top), "entries": self.entries,
                  "removed_dirs": self.removed_dirs, "made_dirs": self.made_dirs}
        run_fd = os.open(self.run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            replace_in(run_fd, JOURNAL, json.dumps(record))
        finally:
            os.close(run_fd)

    def _remove_emptied_dirs(self) -> None:
        """Directories the moves left empty go too: an empty package directory still imports."""
        top = self.target.top
        here = os.path.join(os.path.realpath(Path.cwd()), "")
        parents = {str(Path(entry.path).parent) for entry in self.entries if entry.slot}
        for directory in sorted(parents, key=lambda name: -name.count("/")):
            while directory not in ("", "."):
                if here.startswith(os.path.join(os.path.realpath(top / directory), "")):
                    break  # where this run (and likely a shell) stands: it stays
                try:
                    mode = stat.S_IMODE(os.lstat(top / directory).st_mode)
                except OSError:  # gone already
                    break
                # In the journal first: a run killed right after the rmdir still knows the mode.
                self.removed_dirs.append((directory, mode))
                self._save()
                try:
                    os.rmdir(top / directory)
                except OSError:  # not empty
                    self.removed_dirs.pop()
                    break
                directory = str(Path(directory).parent)

    def _write_tree_content(self) -> None:
        """What the tree holds at the differing paths, written by git (filters, line endings,
        modes and links as a checkout writes them) from an index of those paths alone."""
        import tempfile

        top = self.target.top
        wanted = [entry for entry in self.entries if entry.oid is not None]
        made: dict[str, None] = {}
        for entry in wanted:
            parent = Path(entry.path).parent
            while str(parent) != "." and not os.path.lexists(top / parent):
                made[str(parent)] = None
                parent = parent.parent
        self.made_dirs = list(made)
        self._save()  # before git makes them
        with tempfile.TemporaryDirectory(prefix="verifygate-index-") as private:
            env = {"GIT_INDEX_FILE": str(Path(private) / "index")}
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                infos = [word for entry in chunk
                         for word in ("--cacheinfo", f"{entry.mode},{entry.oid},{entry.path}")]
                git_output(top, "update-index", "--add", *infos, environ=env)
                git_output(top, "checkout-index", "-f", "--", *(e.path for e in chunk),
                           environ=env)
        self.entries = [entry._replace(stamp=_stamp(top / entry.path))
                        if entry.oid is not None else entry for entry in self.entries]

    def finish(self) -> list[str]:
        """Check that the run left the work tree (and for a commit, the index) as it found
        them, then put everything back; what fails the check, one line each."""
        top = self.target.top
        changed = [entry.path for entry in self.entries
                   if entry.oid is not None and not _is_written(top, entry)]
        known = {entry.path for entry in self.entries}
        changed += sorted(path for path in differences(self.target, untracked=False)
                          if path not in known)
        problems = []
        if changed:
            shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more"
                                                if len(changed) > 10 else "")
            problems.append(f"files of {self.target.what} were changed while the gates ran "
                            f"({shown}): review the changes and stage them, then try again")
        if self.target.index_file is not None and self.index is not None and (
                _stamp(self.target.index_file) != self.index_stamp):
            now = _read_index(self.target)
            if now != self.index and _index_tree(top, now) != _index_tree(top, self.index):
                problems.append("the index changed while the gates ran (a `git add` "
                                "meanwhile?): what would be committed is not what was "
                                "checked; commit again")
        failure = self.close()
        return [*problems, *([failure] if failure else [])]

    def close(self) -> str | None:
        """Put back whatever is set aside, once, keeping what was written over it meanwhile;
        why not, if it cannot be (it stays where the next run puts it back from). Under
        ``signals.Interruptible`` (every front end's) a signal is noted from here on, never
        raised: nothing cuts the putting back short."""
        failure = None
        try:
            if self.run_dir is not None and self.home is not None:
                hold_interrupts()
                run_dir, self.run_dir = self.run_dir, None
                try:
                    _restore(self.target.top, run_dir, self.entries, self.removed_dirs,
                             self.made_dirs, self.home, self.say)
                except OSError as exc:
                    failure = (f"cannot put back what was set aside ({exc}): it is in "
                               f"{run_dir}, and the next verifygate run puts it back")
                    self.say(f"error: {failure}")
        finally:
            if self.lock is not None:
                os.close(self.lock)  # and with it the lock
                self.lock = None
        return failure


def put_back(here: Path, say: Say) -> None:
    """Put back what a killed run set aside in the work tree holding ``here``, if any; every
    run does this first (one ``stat`` when there is nothing), as the work tree it judges must
    be the user's. ``ChangeSetError`` while a commit's check is at work there."""
    from pytest_verifygate.contract.discover import find_repo_root

    top = find_repo_root(here)
    state = git_state_dir(top) if top is not None else None
    if top is None or state is None or not _home(state, top).is_dir():
        return
    home = _home(state, top)
    lock = _lock(home)
    if lock is None:
        raise ChangeSetError("a commit's check is at work in this work tree and may have set "
                             "work aside: wait for it to finish, then try again")
    try:
        recover(home, top, say)
    finally:
        os.close(lock)


def at_work(top: Path) -> bool:
    """Whether a commit's check holds the work tree at ``top`` as the commit records it now
    (the lock of its place is taken). A place that cannot be opened is no check at work: the
    caller's own check says what is wrong with it."""
    state = git_state_dir(top)
    if state is None or not _home(state, top).is_dir():
        return False
    try:
        lock = _lock(_home(state, top))
    except (OSError, VerifyGateError):
        return False
    if lock is None:
        return True
    os.close(lock)
    return False


def _home(state: Path, top: Path) -> Path:
    """The work tree's own place under the git directory (worktrees share one)."""
    return state / "aside" / hashlib.sha256(os.fsencode(os.path.realpath(top))).hexdigest()[:16]


def _lock(home: Path) -> int | None:
    """``home``'s lock, taken (the kernel drops it however the process ends); None when
    another run holds it."""
    home_fd = open_state_dir(home, create=True)
    try:
        lock = os.open("lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600, dir_fd=home_fd)
    finally:
        os.close(home_fd)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        return None
    return lock


def _check_environment(top: Path, found: dict[str, tuple[str, str] | None]) -> None:
    """Refuse to move the virtualenv this runs in: untracked and not ignored, it would be set
    aside with the tools the gates run (``python -m venv`` writes no ``.gitignore`` in it)."""
    import sys

    where = os.path.relpath(os.path.realpath(sys.prefix), os.path.realpath(top))
    if where == ".." or where.startswith(("../", "/")) or where == ".":
        return
    inside = f"{where}/"
    if any(found[path] is None and (path == where or path.startswith(inside)) for path in found):
        raise ChangeSetError(f"the virtualenv {inside} this runs in is neither committed nor "
                             "ignored: add it to .gitignore, then try again")


def recover(home: Path, top: Path, say: Say) -> None:
    """Put back what runs that were killed set aside (their journals are still there)."""
    import json
    import shutil

    with os.scandir(home) as found:
        runs = sorted(entry.name for entry in found
                      if entry.name.startswith("run-") and entry.is_dir(follow_symlinks=False))
    for name in runs:
        run_dir = home / name
        try:
            with open(run_dir / JOURNAL, "rb") as handle:
                record = json.loads(handle.read(MAX_JOURNAL_BYTES))
            entries = [_Entry(str(path), slot, mode, oid, tuple(stamp) if stamp else None)
                       for path, slot, mode, oid, stamp in record["entries"]]
            removed = [(str(path), int(mode)) for path, mode in record["removed_dirs"]]
            made = [str(path) for path in record["made_dirs"]]
            if os.path.realpath(record["top"]) != os.path.realpath(top) or not all(
                    map(_inside, [entry.path for entry in entries] + made
                        + [path for path, _ in removed])):
                raise ValueError("not a journal of this work tree")
        except FileNotFoundError:  # killed before its journal was written: nothing was moved
            shutil.rmtree(run_dir, ignore_errors=True)
            continue
        except (OSError, ValueError, TypeError, KeyError) as exc:
            say(f"warning: cannot read what an earlier run set aside in {run_dir} ({exc}): "
                "put its files back by hand")
            continue
        say(f"putting back what a killed run (pid {record.get('pid')}) had set aside: "
            f"{sum(entry.slot is not None for entry in entries)} file(s)")
        _restore(top, run_dir, entries, removed, made, home, say)


def _restore(top: Path, run_dir: Path, entries: list[_Entry],
             removed_dirs: list[tuple[str, int]], made_dirs: list[str], home: Path,
             say: Say) -> None:
    kept: list[str] = []
    keep_dir = home / f"kept-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    for entry in entries:
        set_aside = entry.slot is not None and os.path.lexists(run_dir / entry.slot)
        if entry.slot is not None and not set_aside:
            continue  # never moved (a run killed on the way), or back already
        path = top / entry.path
        if not os.path.lexists(path):
            continue
        if entry.oid is not None and _is_written(top, entry):
            os.unlink(path)  # the tree's content, as written for the run
        elif set_aside or entry.oid is not None:
            # Written over meanwhile (a gate, an editor), where the user's work goes back.
            _move(path, keep_dir / entry.path)
            kept.append(entry.path)
    for directory in sorted(made_dirs, key=lambda name: -name.count("/")):
        with contextlib.suppress(OSError):
            os.rmdir(top / directory)
    for directory, mode in sorted(removed_dirs, key=lambda item: item[0].count("/")):
        with contextlib.suppress(FileExistsError):
            os.mkdir(top / directory)
            os.chmod(top / directory, mode)  # as it was: mkdir's mode passes the umask, no setgid
    for entry in entries:
        if entry.slot is not None and os.path.lexists(run_dir / entry.slot):
            _move(run_dir / entry.slot, top / entry.path)
    if kept:
        shown = ", ".join(kept[:5]) + (" ..." if len(kept) > 5 else "")
        say(f"warning: {len(kept)} file(s) were written while set aside ({shown}): yours are "
            f"back, and what was written is kept in {keep_dir}")
    with contextlib.suppress(FileNotFoundError):  # none: killed before anything was moved
        os.unlink(run_dir / JOURNAL)
    os.rmdir(run_dir)


def _is_written(top: Path, entry: _Entry) -> bool:
    """Whether ``entry``'s path still holds the tree's content as written for the run (the
    stamp first; the content where it moved, as a tool may rewrite the same bytes)."""
    path = top / entry.path
    stamp = _stamp(path)
    if stamp is None or (entry.stamp is not None and stamp == entry.stamp):
        return stamp is not None
    if entry.mode == SYMLINK:
        try:
            target = os.readlink(os.fsencode(path))
        except OSError:
            return False
        return blob_id(target, "sha256" if len(str(entry.oid)) == 64 else "sha1") == entry.oid
    mode = stamp[0]
    if not stat.S_ISREG(mode) or bool(mode & 0o100) != (entry.mode == "100755"):
        return False
    found = git_output(top, "hash-object", f"--path={entry.path}", "--", str(path))
    return found.decode().strip() == entry.oid


def _inside(path: object) -> bool:
    """Whether a journal may name ``path``: relative, in the work tree, outside ``.git``."""
    if not isinstance(path, str) or not path or path.startswith("/"):
        return False
    parts = path.split("/")
    return ".." not in parts and "" not in parts and parts[0] != ".git"


def _stamp(path: Path) -> Stamp | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns


def _move(source: Path, target: Path) -> None:
    """Move a file, link or directory as it is, across file systems if need be (never a file
    with other hard links: a copy would part it from them)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(source, target)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    if os.lstat(source).st_nlink > 1 and not os.path.isdir(source):
        raise ChangeSetError(f"{source} has other hard links, and the git directory is on another "
                             "file system, where moving it aside would part them: stage it or "
                             "remove the other links, then commit again")
    import shutil

    if os.path.isdir(source) and not os.path.islink(source):
        shutil.copytree(source, target, symlinks=True)
        shutil.rmtree(source)
    else:
        shutil.copy2(source, target, follow_symlinks=False)
        os.unlink(source)
