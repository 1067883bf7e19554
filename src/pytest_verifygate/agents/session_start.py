"""A session's record: where it began (the commit, the directory, every ref and worktree HEAD,
git's clean filters) and the commits seen at its stops, kept in the user's private state
directory; and what the record tells of work the agent moved out of what is checked out or hid
from git (``docs/how-to/agents.md``, "Where the session's work is"); the run request of the
session's stop.

PYTEST_DONT_REWRITE
"""

import argparse
import hashlib
import json
import os
import stat
import time
from pathlib import Path
from typing import NamedTuple

from pytest_verifygate.agents.state import is_state_name, session_file_stem
from pytest_verifygate.engine import RunRequest
from pytest_verifygate.errors import ChangeSetError
from pytest_verifygate.git.changes import ChangeRequest, ChangeSet, all_files
from pytest_verifygate.gitcmd import empty_tree, git_answer, git_output, head_commit
from pytest_verifygate.state.files import (
    StateFileError,
    prune_own_files,
    read_state_file,
    write_state,
)
from pytest_verifygate.state.storage import user_state_dir

RECORD_VERSION = 3  # 3: git's clean filters at the start
KEEP_SESSIONS = 200
MAX_RECORD_BYTES = 16 << 20  # every ref of a large repository
KEEP_SEEN = 50
# Refs that move without the session's work: fetched commits, and notes (no file of them is
# ever checked out).
FOREIGN_REFS = ("refs/remotes/", "refs/prefetch/", "refs/notes/")
WORKTREE = "worktree "  # the key of a worktree's HEAD among the refs
ABSENT = "absent"


class GitFilters(NamedTuple):
    """What makes git report a file unchanged that is not, from outside the tree: a SHA-256 of
    the ``filter.*`` configuration of every scope, and of ``.git/info/attributes`` (or
    ``ABSENT``)."""

    configuration: str
    info_attributes: str


NO_FILTERS = GitFilters(hashlib.sha256(b"").hexdigest(), ABSENT)


class SessionRecord(NamedTuple):
    """What bound at a session's start. ``commit`` None: the repository had no commit then;
    ``refs``: every ref's and every worktree HEAD's commit then; ``seen``: the session's own
    commits seen checked out or on a ref at its stops; ``filters`` None: a record of an
    earlier release, which did not keep them."""

    session_id: str
    repository: str
    directory: str
    commit: str | None
    started: float
    refs: dict[str, str]
    seen: tuple[str, ...] = ()
    filters: GitFilters | None = None

    @property
    def short(self) -> str:
        return self.commit[:12] if self.commit else "(no commit)"


def record_path(session_id: str) -> Path | None:
    """``<user state dir>/agent-sessions/<session>.json``: a session's record is found by its
    id alone, whatever directory or repository its stop is made from."""
    base = user_state_dir()
    name = f"{session_file_stem(session_id)}.json"
    return None if base is None else base / "agent-sessions" / name


def record_start(directory: Path, repo_root: Path, session_id: str) -> None:
    """Record where the session begins, unless it has begun already (a resumed or compacted
    session, a later prompt of a Cursor conversation keeps its first record)."""
    if load(session_id) is not None:
        return
    save(SessionRecord(session_id, os.path.realpath(repo_root), os.path.realpath(directory),
                       head_commit(repo_root), time.time(), snapshot(repo_root),
                       filters=git_filters(repo_root)))


def load(session_id: str) -> SessionRecord | None:
    """The session's record; None when there is none. ``StateFileError`` when it cannot be
    read: not to be taken for "no record"."""
    path = record_path(session_id)
    if path is None:
        return None
    raw = read_state_file(path, MAX_RECORD_BYTES)
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
        filters = data.get("filters")
        record = SessionRecord(
            str(data["session_id"]), str(data["repository"]), str(data["directory"]),
            None if data["commit"] is None else str(data["commit"]), float(data["started"]),
            {str(name): str(tip) for name, tip in data["refs"].items()},
            tuple(str(commit) for commit in data["seen"]),
            None if filters is None else GitFilters(str(filters["configuration"]),
                                                    str(filters["info_attributes"])))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise StateFileError(f"{path}: not a session record ({type(exc).__name__})") from None
    if record.session_id != session_id:
        raise StateFileError(f"{path}: the record of another session")
    return record


def save(record: SessionRecord) -> None:
    """Keep ``record``; ``OSError`` when there is no private directory to keep it in."""
    path = record_path(record.session_id)
    if path is None:
        raise OSError("no private state directory (set HOME or XDG_STATE_HOME)")
    data = {"version": RECORD_VERSION, **record._asdict(), "seen": list(record.seen),
            "filters": None if record.filters is None else record.filters._asdict()}
    write_state(path, json.dumps(data, indent=1) + "\n")
    prune_own_files(path.parent, is_state_name, KEEP_SESSIONS)


def snapshot(repo_root: Path) -> dict[str, str]:
    """Every ref's commit and every worktree's HEAD (a detached one is on no ref)."""
    refs = {}
    for line in git_output(repo_root, "for-each-ref", "--format=%(objectname) %(refname)"
                           ).decode("utf-8", "surrogateescape").splitlines():
        tip, _, name = line.partition(" ")
        refs[name] = tip
    worktree = None
    for line in git_output(repo_root, "worktree", "list", "--porcelain"
                           ).decode("utf-8", "surrogateescape").splitlines():
        word, _, value = line.partition(" ")
        if word == "worktree":
            worktree = value
        elif word == "HEAD" and worktree is not None:
            refs[WORKTREE + worktree] = value
    return refs


def git_filters(repo_root: Path) -> GitFilters:
    """The clean filters configured now, and the attributes of ``.git/info/attributes``."""
    configuration = git_answer(repo_root, "config", "--get-regexp", r"^filter\.") or b""
    where = git_output(repo_root, "rev-parse", "--git-path", "info/attributes")
    return GitFilters(hashlib.sha256(configuration).hexdigest(),
                      _file_digest(repo_root / os.fsdecode(where.rstrip(b"\n"))))


def _file_digest(path: Path) -> str:
    """The SHA-256 of the file git reads at ``path``, through a link as git does; what else is
    there, said in words. Opened without blocking: a FIFO there never hangs the stop."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return ABSENT
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file"
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
        return digest.hexdigest()
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    finally:
        os.close(fd)


def filters_changed(record: SessionRecord, repo_root: Path) -> str | None:
    """Why what git reports changed cannot be believed, else None: its clean filters (a
    filter's output is what git compares) or ``.git/info/attributes`` (which applies them,
    outside the tree) are not what they were when the session began."""
    now = git_filters(repo_root)
    if record.filters is None:
        # A record of an earlier release: nothing tells what was set at the start. Where
        # nothing is set now, nothing can hide a change; else the doubt is not a pass.
        if now == NO_FILTERS:
            return None
        return ("the session's record was made by an earlier verifygate and does not tell "
                "whether git's clean filters or .git/info/attributes changed during the "
                "session, and some are set now (they decide which changes git shows): start a "
                "new session")
    changed = [what for what, before, after in zip(
        ("the `filter.*` configuration", ".git/info/attributes"), record.filters, now,
        strict=True) if before != after]
    if not changed:
        return None
    return ("git's clean filters or .git/info/attributes changed during the session "
            f"({' and '.join(changed)}); restore them, since they decide which changes git "
            "shows (a change a person made holds from the next session on)")


def _exists(repo_root: Path, commit: str) -> bool:
    return git_answer(repo_root, "rev-parse", "--verify", "--quiet", "--end-of-options",
                      f"{commit}^{{commit}}") is not None


def _not_in(repo_root: Path, tips: list[str], record: SessionRecord, *,
            limit: int | None = 10, but_head: bool = True) -> list[str]:
    """Commits reachable from ``tips`` but from nothing that was there when the session began
    (and, ``but_head``, from nothing checked out): the session's own, newest first, at most
    ``limit`` (None: all)."""
    if not tips:
        return []
    excluded = [*record.refs.values(), *([record.commit] if record.commit else [])]
    if but_head and head_commit(repo_root) is not None:
        excluded.append("HEAD")
    lines = [*tips, *(f"^{tip}" for tip in excluded)]
    most = [] if limit is None else [f"--max-count={limit}"]
    out = git_output(repo_root, "rev-list", *most, "--ignore-missing", "--stdin",
                     stdin="\n".join(lines).encode() + b"\n")
    return out.decode().split()


def moved_work(record: SessionRecord, repo_root: Path) -> tuple[str | None, str | None]:
    """Why the session's work is not (all) in what is checked out, else None: its start was
    rewritten away, or a ref or a worktree holds commits of the session that HEAD does not;
    and that tip, if any."""
    if record.commit is not None and not _exists(repo_root, record.commit):
        return (f"the commit the session began at ({record.short}) is no longer in the "
                "repository: history was rewritten (an amend or rebase of it, then its "
                "reflog expired and pruned), so what the session changed cannot be told"), None
    for name, tip in sorted(snapshot(repo_root).items()):
        if record.refs.get(name) == tip or name.startswith(FOREIGN_REFS):
            continue
        if _not_in(repo_root, [tip], record, limit=1):
            what = (f"the HEAD of the worktree {name[len(WORKTREE):]}"
                    if name.startswith(WORKTREE) else name)
            return (f"your commits on {what} ({tip[:12]}) are not checked out here: check "
                    "out (or merge) the branch that holds your work, so that it can be "
                    "verified, or delete what you do not mean to keep"), tip
    return None, None


def unjudged(record: SessionRecord, root: Path, changes: ChangeSet) -> str | None:
    """Why commits the session made are not part of what its stop judges, else None: the
    project at ``root`` judged on ``changes``. A commit of the session that HEAD does not hold
    (HEAD's reflog since the start and the commits seen at its stops tell them) passes only
    when it was rewritten into what is judged (amended, rebased, squashed: each file it
    changed is among ``changes``), and never when it was pushed: the remote has it as it is."""
    off_head = _not_in(root, [*_reflog_since(root, record.started), *record.seen], record,
                       limit=None)
    if not off_head:
        return None
    remote_tips = git_output(root, "for-each-ref", "--format=%(objectname)", "refs/remotes/"
                             ).decode().split()
    on_remotes = set(_not_in(root, remote_tips, record, limit=None))
    pushed = [commit for commit in off_head if commit in on_remotes]
    if pushed:
        ref = git_output(root, "for-each-ref", "--count=1", "--format=%(refname)",
                         f"--contains={pushed[0]}", "refs/remotes/").decode().strip()
        return (f"the session's commits ({_listed(pushed)}) were pushed ({ref}) but are not in "
                "what is checked out, so what was pushed was never judged: check out (or "
                "merge) the pushed commits so that they can be verified (to undo one, `git "
                "revert` it), or push the checked-out work in their place")
    judged = set(changes.files) if changes.filtering else set(all_files(root))
    left_out: dict[str, None] = {}  # the files, in the order the commits were found
    commits = []
    for commit, files in _changed_by(root, off_head).items():
        if not files <= judged:
            commits.append(commit)
            left_out.update(dict.fromkeys(sorted(files - judged)))
    if not commits:
        return None
    return (f"the session's commits ({_listed(commits)}) are on nothing checked out any more "
            "(a reset, a deleted branch), and what they changed "
            f"({_listed(list(left_out), short=False)}) is not among the changes judged: check "
            "out the commit that holds your work so that it can be verified; to undo it, `git "
            "revert` it instead")


def _listed(items: list[str], most: int = 3, *, short: bool = True) -> str:
    """``items`` named in a message: commits by their short id, at most ``most`` of them."""
    shown = ", ".join(item[:12] if short else item for item in items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def _changed_by(root: Path, commits: list[str]) -> dict[str, set[str]]:
    """The files under ``root`` each of ``commits`` changed (a merge: from its first parent;
    a root commit: all of its files)."""
    out = git_output(root, "diff-tree", "--stdin", "-r", "--raw", "-z", "--no-abbrev",
                     "--no-renames", "--relative", "--root", "-m", "--first-parent",
                     stdin="\n".join(commits).encode() + b"\n")
    changed: dict[str, set[str]] = {commit: set() for commit in commits}
    fields = iter(out.split(b"\0"))
    files: set[str] = set()
    for field in fields:
        if field.startswith(b":"):  # a file's modes, ids and status; its path comes next
            files.add(os.fsdecode(next(fields, b"")))
        elif field:  # the commit whose files follow (one that changed none under root: none)
            files = changed.setdefault(field.decode(), set())
    return changed


def note_seen(record: SessionRecord, repo_root: Path, *tips: str) -> SessionRecord:
    """``record`` with the session's own commits among HEAD, HEAD's reflog since the start and
    ``tips`` kept as seen: a reflog the agent expires, a worktree it removes, later, do not
    hide what a stop found. Only the newest of them are kept, each holding its ancestors."""
    candidates = [*record.seen, head_commit(repo_root), *_reflog_since(repo_root, record.started),
                  *tips]
    known = list(dict.fromkeys(commit for commit in candidates if commit is not None))
    own = set(_not_in(repo_root, known, record, limit=None, but_head=False))
    seen = [commit for commit in known if commit in own]
    if len(seen) > 1:
        newest = set(git_output(repo_root, "merge-base", "--independent", *seen).split())
        seen = [commit for commit in seen if commit.encode() in newest]
    return record._replace(seen=tuple(seen[-KEEP_SEEN:]))


def _reflog_since(repo_root: Path, started: float) -> list[str]:
    """The commits HEAD pointed to since ``started`` (none without a reflog)."""
    if head_commit(repo_root) is None:
        # git shows no reflog of an unborn HEAD (a repository or an orphan branch before its
        # first commit): the refs and the commits seen at the stops still tell the session's.
        return []
    out = git_answer(repo_root, "log", "-g", "--date=unix", "--format=%H %gd", "HEAD")
    commits = []
    for line in (out or b"").decode().splitlines():
        commit, _, selector = line.partition(" ")
        stamp = selector.rpartition("{")[2].rstrip("}")
        if stamp.isdigit() and int(stamp) >= int(started):
            commits.append(commit)
    return commits


class StartPoint(NamedTuple):
    """The commit a stop's checks start from; ``commit`` None: the repository had none."""

    commit: str | None
    source: str

    @property
    def short(self) -> str:
        return self.commit[:12] if self.commit else "(no commit)"


FROM_SESSION_START = "HEAD when the session began"
FROM_CHANGED_FROM = "the merge base of --changed-from and HEAD"


def changed_from_start(repo_root: Path, changed_from: str) -> tuple[StartPoint, str | None]:
    """``--changed-from``'s starting point (the merge base with HEAD), and a warning, if any."""
    if changed_from.startswith("-"):
        raise ChangeSetError(f"invalid git ref {changed_from!r}: a ref cannot start with '-'")
    if git_answer(repo_root, "rev-parse", "--verify", "--quiet", "--end-of-options",
                  f"{changed_from}^{{commit}}") is None:
        raise ChangeSetError(f"--changed-from {changed_from}: no such commit")
    base = git_answer(repo_root, "merge-base", "--end-of-options", changed_from, "HEAD")
    if base is None:
        # Histories that never met (an orphan branch): every file is the session's.
        return StartPoint(None, FROM_CHANGED_FROM), (
            f"--changed-from {changed_from} shares no history with HEAD: every file counts "
            "as changed")
    return StartPoint(base.decode().strip(), FROM_CHANGED_FROM), None


def run_request(args: argparse.Namespace, cwd: Path, start: StartPoint | None) -> RunRequest:
    """What a session's stop (and its background run) checks: everything since the starting
    point, committed or not, plus untracked files, under the contract as it was there, for
    the gates of ``--role``."""
    bound_by = None
    if start is None:  # outside git: nothing tells what changed, so every gate applies
        changes = ChangeRequest(all=True)
    elif start.commit is None:
        # The repository had no commit when the session began: every file is the session's,
        # and there was no contract to bind it (the empty tree holds none).
        no_commit_yet = head_commit(Path.cwd()) is None
        changes = ChangeRequest(worktree=True) if no_commit_yet else ChangeRequest(all=True)
        bound_by = empty_tree(Path.cwd())
    else:
        changes = ChangeRequest(changed_from=args.changed_from or start.commit)
        bound_by = start.commit
    return RunRequest(contract=args.contract, start=cwd, changes=changes, role=args.role,
                      read_cache=not args.no_cache, jobs=args.jobs, bound_by=bound_by)
