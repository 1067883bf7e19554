"""A session's starting point: the commit the agent hook compares the session's work with, so
that an agent cannot stop by committing its broken work (``docs/how-to/agents.md``).

PYTEST_DONT_REWRITE
"""

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple

from pytest_verifygate.agents.state import (
    is_state_name,
    private_path,
    session_file_stem,
    write_signed,
)
from pytest_verifygate.errors import ChangeSetError
from pytest_verifygate.git.changes import git_answer, git_output
from pytest_verifygate.state.files import StateFileError, prune_own_files, read_state_file
from pytest_verifygate.state.integrity import is_signed
from pytest_verifygate.state.storage import blocker, state_dir

START_VERSION = 1
KEEP_STARTS = 200
MAX_START_BYTES = 16 * 1024
START_SEAL = b"agent-start"  # what a start record's MAC is for (integrity.signed)

# How a starting point was chosen, as messages say it.
FROM_SESSION_START = "HEAD when the session began"
FROM_FIRST_STOP = "HEAD at the session's first stop"
FROM_UPSTREAM = "the merge base with the upstream branch"
FROM_CHANGED_FROM = "the merge base of --changed-from and HEAD"


class StartPoint(NamedTuple):
    """A session's starting point; ``commit`` None: the repository had no commit then."""

    commit: str | None
    source: str

    @property
    def short(self) -> str:
        return self.commit[:12] if self.commit else "(no commit)"


def start_path(repo_root: Path, session_id: str) -> Path:
    return state_dir(repo_root) / "agent" / "starts" / f"{session_file_stem(session_id)}.json"


def private_start_path(repo_root: Path, session_id: str) -> Path | None:
    return private_path("agent-starts", os.path.realpath(repo_root),
                        f"{session_file_stem(session_id)}.json")


def record_session_start(repo_root: Path, session_id: str) -> StartPoint:
    """Record HEAD as the session's start, unless a resumed session has one."""
    recorded, problem = _recorded(repo_root, session_id)
    if recorded is not None:
        return recorded
    if problem is not None:
        print(f"verifygate agent-hook: {problem}; recording HEAD", file=sys.stderr)
    start = StartPoint(head_commit(repo_root), FROM_SESSION_START)
    _write(repo_root, session_id, start)
    return start


def session_start_point(repo_root: Path, session_id: str, changed_from: str | None = None
                        ) -> tuple[StartPoint, str | None]:
    """The starting point of a stop's checks, and a warning, if any."""
    if changed_from:
        if changed_from.startswith("-"):
            raise ChangeSetError(f"invalid git ref {changed_from!r}: a ref cannot start with '-'")
        if _commit(repo_root, changed_from) is None:
            raise ChangeSetError(f"--changed-from {changed_from}: no such commit")
        base = git_answer(repo_root, "merge-base", "--end-of-options", changed_from, "HEAD")
        if base is None:
            # Histories that never met (an orphan branch): every file is the session's.
            return StartPoint(None, FROM_CHANGED_FROM), (
                f"--changed-from {changed_from} shares no history with HEAD: every file "
                "counts as changed")
        return StartPoint(base.decode().strip(), FROM_CHANGED_FROM), None
    recorded, warning = _recorded(repo_root, session_id)
    if recorded is not None:
        if recorded.commit is None or _commit(repo_root, recorded.commit) is not None:
            return recorded, warning  # the copy under the git directory may be forged
        warning = (f"the session's recorded start {recorded.short} is no longer in the "
                   "repository")
    if warning is not None:
        warning += "; starting from the upstream merge base or HEAD instead"
    start = _upstream_base(repo_root) or StartPoint(head_commit(repo_root), FROM_FIRST_STOP)
    _write(repo_root, session_id, start)
    return start, warning


def head_commit(repo_root: Path) -> str | None:
    return _commit(repo_root, "HEAD")


def _commit(repo_root: Path, ref: str) -> str | None:
    """``ref``'s commit id, if any; a git that fails raises."""
    found = git_answer(repo_root, "rev-parse", "--verify", "--quiet", "--end-of-options",
                       f"{ref}^{{commit}}")
    return None if found is None else found.decode().strip() or None


def _upstream_base(repo_root: Path) -> StartPoint | None:
    """The merge base with a fetched upstream branch, if any. A git that fails raises: a broken
    configuration must not look like "no upstream"."""
    branch = git_answer(repo_root, "symbolic-ref", "--quiet", "HEAD")
    if branch is None:
        return None  # detached HEAD: no branch, no upstream
    upstream = git_output(repo_root, "for-each-ref", "--format=%(upstream)",
                          branch.decode().strip()).decode().strip()
    if not upstream or _commit(repo_root, upstream) is None:
        return None
    base = git_answer(repo_root, "merge-base", upstream, "HEAD")
    return StartPoint(base.decode().strip(), FROM_UPSTREAM) if base else None


def _recorded(repo_root: Path, session_id: str) -> tuple[StartPoint | None, str | None]:
    """The recorded start: the copy in the user's state directory, out of reach of an agent
    confined to the project, else the one under the git directory (whose problem is said)."""
    in_git_dir = _read(start_path(repo_root, session_id), session_id)
    private = private_start_path(repo_root, session_id)
    recorded = _read(private, session_id)[0] if private is not None else None
    return (recorded, in_git_dir[1]) if recorded is not None else in_git_dir


def _read(path: Path, session_id: str) -> tuple[StartPoint | None, str | None]:
    """The recorded start, or None with why it is not used. Whatever can write the work tree
    can write ``.git``: believed only with this user's seal and for this session."""
    try:
        raw = read_state_file(path, MAX_START_BYTES)
        if raw is None:
            return None, None
        data = json.loads(raw.decode("utf-8"))
    except (StateFileError, ValueError, RecursionError) as exc:
        if blocker(path) is not None:  # a file where a directory should be: said once
            return None, None
        return None, f"ignoring the unreadable session start {path} ({exc})"
    if not (isinstance(data, dict) and is_signed(START_SEAL, data)
            and data.get("session_id") == session_id and isinstance(data.get("source"), str)):
        return None, (f"ignoring the session start {path}: not written by this user's "
                      "verifygate for this session")
    commit = data.get("commit")
    if commit is not None and not (isinstance(commit, str) and commit.isalnum()):
        return None, f"ignoring the session start {path}: not a commit id"
    return StartPoint(commit, data["source"]), None


def _write(repo_root: Path, session_id: str, start: StartPoint) -> None:
    record: dict[str, object] = {
        "version": START_VERSION, "session_id": session_id, "commit": start.commit,
        "source": start.source, "recorded": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    for path in (start_path(repo_root, session_id), private_start_path(repo_root, session_id)):
        if path is not None:
            with contextlib.suppress(OSError):
                write_signed(path, START_SEAL, record)
                prune_own_files(path.parent, is_state_name, KEEP_STARTS)
