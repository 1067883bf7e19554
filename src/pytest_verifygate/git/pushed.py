"""What a push or a commit would record, checked out in a temporary ``git worktree`` when the
work tree differs from it: an uncommitted fix must not hide a broken commit (docs: Using
pre-commit).

PYTEST_DONT_REWRITE
"""

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from pytest_verifygate.errors import ChangeSetError
from pytest_verifygate.git.changes import (
    SOURCE_REF,
    STAGED_DIFF,
    TOP_LEVEL,
    ChangeSet,
    check_work_tree,
    empty_tree,
    git_output,
    head_commit,
    unstaged_files,
    without_own_files,
    worktree_changes,
)
from pytest_verifygate.state.storage import process_alive

if TYPE_CHECKING:
    import argparse

# Named after the process that made it: a later run removes one whose process is gone.
TEMP_PREFIX = "verifygate-push-"
_TEMP_NAME = re.escape(TEMP_PREFIX) + r"(\d+)-"
# Set by git for some hooks: they would point every git command in the temporary worktree
# (ours and the gates') back at the work tree.
_LOCATION_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


class PushedCommit(NamedTuple):
    """The commit a push sends; or, with ``staged_tree``, the index over the commit it follows."""

    top: Path
    commit: str
    prefix: str  # the current directory relative to ``top``
    staged_tree: str | None = None


def pushed_commit(outputs: Sequence[str]) -> PushedCommit | None:
    """The pushed commit, when pre-commit names one and the work tree differs from it other
    than by the package's own files (``outputs``: this run's reports)."""
    env = os.environ
    # PRE_COMMIT_LOCAL_BRANCH: the first push of a new history, which has no range.
    ref = env.get("PRE_COMMIT_TO_REF") if env.get("PRE_COMMIT_FROM_REF") else None
    if not ref and env.get("PRE_COMMIT") == "1" and env.get("PRE_COMMIT_REMOTE_BRANCH"):
        ref = env.get("PRE_COMMIT_LOCAL_BRANCH")
    if not ref or ref.startswith("-"):
        return None
    here = Path.cwd()
    _, top, prefix = _locate(here)
    try:
        commit = git_output(top, "rev-parse", "--verify", "--quiet", "--end-of-options",
                            f"{ref}^{{commit}}").decode().strip()
    except ChangeSetError:
        raise ChangeSetError(f"the pushed ref {ref!r} is not a commit in {top}") from None
    files, _ = worktree_changes(top, commit)
    if not without_own_files(ChangeSet(SOURCE_REF, tuple(files)), top, outputs, here).files:
        return None
    return PushedCommit(top, commit, prefix)


def staged_content(cwd: Path | None = None, *, staged: bool = False) -> PushedCommit | None:
    """The index of a staged run (``--staged``, or pre-commit's commit hook), when a tracked
    file differs from it: hidden edits included, which pre-commit's own stash misses."""
    env = os.environ
    if not staged and not (env.get("PRE_COMMIT") == "1" and not env.get("PRE_COMMIT_FROM_REF")
                           and not env.get("PRE_COMMIT_REMOTE_BRANCH")):
        return None
    here = cwd or Path.cwd()
    located, top, prefix = _locate(here)
    if not unstaged_files(top, located if os.path.samefile(top, here) else None):
        return None
    if not staged and not git_output(here, *STAGED_DIFF):
        # ``pre-commit run --all-files``: the work tree as it is (``changes``).
        return None
    return PushedCommit(top, _head_or_root(top), prefix, _index_tree(top))


def _locate(here: Path) -> tuple[bytes, Path, str]:
    """What ``TOP_LEVEL`` prints in ``here`` (checked), the top level and ``here`` below it."""
    located = git_output(here, *TOP_LEVEL)
    check_work_tree(here, located)
    top, _, prefix = os.fsdecode(located).partition("\n")
    return located, Path(top), prefix.strip("\n")


def _index_tree(top: Path) -> str:
    """The index (``GIT_INDEX_FILE`` where git set it, for ``git commit -a``) as a tree."""
    import shutil
    import tempfile

    index = Path(os.fsdecode(git_output(top, "rev-parse", "--git-path", "index")).strip("\n"))
    with tempfile.TemporaryDirectory(prefix="verifygate-index-") as private:
        copy = Path(private) / "index"
        try:
            shutil.copyfile(top / index, copy)
        except OSError as exc:
            raise ChangeSetError(f"cannot read the index {index}: {exc.strerror or exc}"
                                 ) from None
        try:
            # On a copy: write-tree would take the lock the ``git commit`` running this holds.
            return git_output(top, "write-tree", environ={"GIT_INDEX_FILE": str(copy)}
                              ).decode().strip()
        except ChangeSetError as exc:
            raise ChangeSetError(f"cannot check the staged content: {exc}") from None


def _head_or_root(top: Path) -> str:
    """HEAD's commit; before the first commit, a commit of the empty tree (git prunes it)."""
    head = head_commit(top)
    if head is not None:
        return head
    empty = empty_tree(top)
    who = {f"GIT_{role}_{field}": value for role in ("AUTHOR", "COMMITTER")
           for field, value in (("NAME", "verifygate"), ("EMAIL", "verifygate@invalid"),
                                ("DATE", "1970-01-01T00:00:00Z"))}
    return git_output(top, "commit-tree", "--no-gpg-sign", "-m", "no commit yet", empty,
                      environ=who).decode().strip()


@contextlib.contextmanager
def temporary_worktree(top: Path, commit: str, tree: str | None = None) -> Iterator[Path]:
    """``commit`` (and ``tree`` over it) in a new private temporary worktree, always removed."""
    import tempfile

    _remove_abandoned(top)
    parent = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-"))
    path = parent / (top.name or "worktree")
    try:
        # ``worktree add`` would run the repository's post-checkout hook; ``reset`` runs none.
        git_output(top, "worktree", "add", "--quiet", "--detach", "--no-checkout", str(path),
                   commit)
        git_output(path, "reset", "--quiet", "--hard", commit)
        if tree is not None:
            git_output(path, "read-tree", "--reset", "-u", tree)
        yield path
    finally:
        try:
            _remove(top, path)
        except KeyboardInterrupt:
            # Finish the job (``Interruptible`` ignores a second signal), then stop the run.
            _remove(top, path)
            raise


def _remove(top: Path, path: Path) -> None:
    import shutil

    with contextlib.suppress(ChangeSetError):
        git_output(top, "worktree", "remove", "--force", str(path))
    shutil.rmtree(path.parent, ignore_errors=True)
    with contextlib.suppress(ChangeSetError):
        git_output(top, "worktree", "prune")


def _remove_abandoned(top: Path) -> None:
    try:
        listing = git_output(top, "worktree", "list", "--porcelain", "-z")
    except ChangeSetError:
        return
    for field in listing.split(b"\0"):
        if not field.startswith(b"worktree "):
            continue
        path = Path(os.fsdecode(field[len(b"worktree "):]))
        match = re.match(_TEMP_NAME, path.parent.name)
        if (match is not None and not process_alive(int(match.group(1)))
                and _made_here(path.parent)):
            _remove(top, path)


def _made_here(parent: Path) -> bool:
    """Whether ``parent`` can be a temp directory of ours (right in the temp directory, this
    user's, 0700): anything can write ``.git/worktrees``, so a name alone is not enough."""
    import stat
    import tempfile

    try:
        info = os.lstat(parent)
    except OSError:
        return False
    return (os.path.realpath(parent.parent) == os.path.realpath(tempfile.gettempdir())
            and stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
            and stat.S_IMODE(info.st_mode) == 0o700)


@contextlib.contextmanager
def run_in_pushed_commit(args: "argparse.Namespace") -> Iterator[PushedCommit | None]:
    """For ``verifygate run`` and ``list``: while entered, the run happens in the checkout of
    what is committed or pushed; reports still go to the user's directory."""
    chosen = any(getattr(args, name, None) for name in
                 ("files", "files_from", "changed_from", "all"))
    staged = bool(getattr(args, "staged", False))
    outputs = [path for path in (getattr(args, "json", None), getattr(args, "junit", None))
               if path]
    pushed = None
    if not chosen:
        pushed = staged_content(staged=True) if staged else (
            pushed_commit(outputs) or staged_content())
    if pushed is None:
        yield None
        return
    if pushed.staged_tree is None:
        print(f"verifygate: the work tree differs from the pushed commit {pushed.commit[:12]}: "
              "checking that commit in a temporary worktree", file=sys.stderr)
    else:
        print("verifygate: the work tree differs from the index: checking the staged content "
              "in a temporary worktree", file=sys.stderr)
    here = Path.cwd()
    # With GIT_DIR set, ``git reset --hard`` would reset the work tree's repository instead.
    removed = {name: os.environ.pop(name) for name in _LOCATION_VARIABLES if name in os.environ}
    try:
        with temporary_worktree(pushed.top, pushed.commit, pushed.staged_tree) as checkout:
            for name in ("json", "junit"):
                if getattr(args, name, None):
                    setattr(args, name, os.path.join(here, getattr(args, name)))
            contract = getattr(args, "contract", None)
            if contract and os.path.isabs(contract):
                real = os.path.join(os.path.realpath(os.path.dirname(contract)),
                                    os.path.basename(contract))
                inside = os.path.relpath(real, os.path.realpath(pushed.top))
                if inside != ".." and not inside.startswith(f"..{os.sep}"):
                    args.contract = str(checkout / inside)
            start = checkout / pushed.prefix
            os.chdir(start if start.is_dir() else checkout)
            try:
                yield pushed
            finally:
                os.chdir(here)
    finally:
        os.environ.update(removed)
