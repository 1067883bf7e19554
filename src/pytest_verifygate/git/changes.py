"""The change set: which files changed, from explicit paths, the index, a git ref or a range.

Owns every git call that reads changes, and ``git_output``, the one way the package runs git
(with ``GIT``'s options: what the repository's configuration could change in git's
answer is off). Git is always asked for NUL-separated output (``-z``) so any file name works,
renames are split into a deletion and an addition (both paths count), and deleted files are
kept for selection while ``existing_files`` leaves them out of ``{files}``. Paths in a
``ChangeSet`` are POSIX paths relative to the project root.

What git can be told not to see is looked at anyway (docs, "The change set"): edits to
entries marked assume-unchanged or skip-worktree, files inside changed submodules, untracked
files hidden only by local exclude files. A git that fails raises ``ChangeSetError``; no
failure ever becomes an empty change set.

Also leaves out what is never a change: anything under ``.git/``, the files the current run
writes (``ChangeRequest.outputs``) and those earlier runs wrote and nobody changed since (see
``state/outputs.py``): a report, JUnit file or digest written inside the work tree must not select
gates on the next run.

Also owns CI base detection: the ref a pull or merge request build compares against (GitHub
Actions, GitLab CI, or the generic ``VERIFYGATE_CHANGED_FROM``), with the words that say where
it came from and how to fix a clone too shallow for it.

PYTEST_DONT_REWRITE
"""

import os
import posixpath
import stat
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pytest_verifygate.errors import ChangeSetError

# How the package runs git, every time: whatever the repository's configuration or an agent
# writing it says, git answers from the objects and the files themselves. No replace refs (a
# commit swapped for one with the current tree), no grafts (``GIT_ENVIRONMENT``), no file
# system monitor (a command that says what changed), and no stat shortcut that ignores the
# change time (a file rewritten at the same size with its modification time put back).
GIT = ("git", "--no-replace-objects", "-c", "core.fsmonitor=false", "-c",
       "core.checkStat=default", "-c", "core.trustctime=true", "-c",
       "advice.graftFileDeprecated=false")
GIT_ENVIRONMENT = {"GIT_GRAFT_FILE": os.devnull}

# A change set's diff (raw: with modes, to find submodules). ``--relative``: git runs in the
# project root, so paths come relative to it and changes outside it are left out (a project
# below the repository's top level).
DIFF = ("diff", "--raw", "-z", "--no-abbrev", "--no-renames", "--relative",
        "--ignore-submodules=none")
STAGED_DIFF = (*DIFF, "--cached", "--")
# Submodules aside, as pre-commit's stash leaves them: a checkout of the index has none of
# their content, so the gates read them as they are.
UNSTAGED_NAMES = ("diff", "--name-only", "-z", "--no-renames", "--relative",
                  "--ignore-submodules=all", "--")
FLAGGED = ("ls-files", "-z", "-v")
TOP_LEVEL = ("rev-parse", "--show-toplevel", "--show-prefix")


def git_environment() -> dict[str, str]:
    """The environment every git of the package runs with: this one, without grafts."""
    return {**os.environ, **GIT_ENVIRONMENT}


# Where a change set came from, as written in the report's "changes.source".
SOURCE_FILES = "files"
SOURCE_STAGED = "staged"
SOURCE_REF = "ref"
SOURCE_RANGE = "pre-commit"
SOURCE_WORKTREE = "worktree"
SOURCE_ALL = "all"

NOTHING_STAGED = ("warning: nothing is staged and pre-commit names no range (as under `pre-commit "
                  "run --all-files`): checking every gate")

# The variables that decide a change base, in the order they are consulted.
CHANGED_FROM_ENV = "VERIFYGATE_CHANGED_FROM"
GITHUB_BASE_ENV = "GITHUB_BASE_REF"
GITLAB_BASE_ENV = "CI_MERGE_REQUEST_DIFF_BASE_SHA"


class ChangeSet(NamedTuple):
    """The files a run is about. ``source == "all"`` means no change filtering at all.

    Two change sets are equal when every field is, ``warnings`` and ``detected_by`` included.
    """

    source: str
    files: tuple[str, ...] = ()
    deleted: frozenset[str] = frozenset()
    ref: str | None = None
    warnings: tuple[str, ...] = ()
    # Where an implicit ref came from ("GitHub Actions pull request (GITHUB_BASE_REF=main)",
    # "settings.changed_from", ...): shown in headers and the report's changes.detected_by.
    detected_by: str | None = None

    @property
    def filtering(self) -> bool:
        """Whether gates are selected by the changed files (false for ``--all``)."""
        return self.source != SOURCE_ALL

    @property
    def existing_files(self) -> tuple[str, ...]:
        """Changed files not known to be deleted: what ``{files}`` may expand to.

        (For explicit ``--files``, existence is checked when ``{files}`` is expanded.)
        """
        if not self.deleted:
            return self.files
        return tuple(path for path in self.files if path not in self.deleted)

    def describe(self) -> str:
        """One line for headers: ``ref origin/main, 3 file(s), from GitHub Actions ...``."""
        if not self.filtering:
            return "all (no change filtering)"
        text = self.source + (f" {self.ref}" if self.ref else "")
        text += f", {len(self.files)} file(s)"
        return text + (f", from {self.detected_by}" if self.detected_by else "")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form, also used to hand the change set to pytest-xdist workers."""
        data: dict[str, Any] = {
            "source": self.source,
            "ref": self.ref,
            "files": list(self.files),
            "deleted": sorted(self.deleted),
        }
        if self.detected_by is not None:
            data["detected_by"] = self.detected_by
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ChangeSet":
        return cls(
            source=str(data["source"]),
            ref=data.get("ref"),
            files=tuple(data.get("files", ())),
            deleted=frozenset(data.get("deleted", ())),
            detected_by=data.get("detected_by"),
        )


class ChangeRequest(NamedTuple):
    """What the user asked for; ``compute_changes`` applies the order of precedence (docs:
    The change set).

    ``outputs``: the files this run will write (reports, JUnit, digest), relative to the
    current directory or absolute; they are left out of the change set. ``index_apart``: the
    caller runs a staged run's gates on the index whenever the work tree differs from it
    (``pushed.run_in_pushed_commit``), so there is no partial staging to warn about.
    """

    files: Sequence[str] | None = None
    staged: bool = False
    changed_from: str | None = None
    worktree: bool = False
    all: bool = False
    outputs: Sequence[str | os.PathLike[str]] = ()
    index_apart: bool = False


def compute_changes(
    root: Path,
    request: ChangeRequest | None = None,
    *,
    settings_changed_from: str = "",
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ChangeSet:
    """The change set for a project rooted at ``root``: the first source that applies.

    Explicit files, ``--staged``, ``--changed-from``, the working tree (API), pre-commit's
    range or index (docs: The change set); then the environment's change base
    (``detect_change_base``: ``VERIFYGATE_CHANGED_FROM``, a GitHub Actions pull request's
    ``GITHUB_BASE_REF``, a GitLab merge request's ``CI_MERGE_REQUEST_DIFF_BASE_SHA``), then
    ``settings.changed_from`` (the repository-wide default, which a build's own base beats);
    else every file, no filtering.
    The package's own files are left out (see ``without_own_files``).
    """
    request = request or ChangeRequest()
    changes = _compute(root, request, settings_changed_from,
                       os.environ if environ is None else environ, cwd)
    return without_own_files(changes, root, request.outputs, cwd or Path.cwd())


def _compute(
    root: Path,
    request: ChangeRequest,
    settings_changed_from: str,
    env: Mapping[str, str],
    cwd: Path | None,
) -> ChangeSet:
    if request.files is not None:
        return _explicit(root, request.files, cwd or Path.cwd())
    if request.all:
        return ChangeSet(SOURCE_ALL)
    if request.staged:
        return _staged(root, warn_partial=env.get("PRE_COMMIT") != "1"
                       and not request.index_apart)
    if request.changed_from:
        return _since_ref(root, request.changed_from)
    if request.worktree:
        return _since_ref(root, "HEAD", source=SOURCE_WORKTREE)
    from_ref, to_ref = env.get("PRE_COMMIT_FROM_REF"), env.get("PRE_COMMIT_TO_REF")
    if from_ref and to_ref:
        return _range(root, from_ref, to_ref)
    if env.get("PRE_COMMIT") == "1":
        if env.get("PRE_COMMIT_REMOTE_BRANCH"):
            # A pre-push of history the remote has no base for (a first push): pre-commit
            # passes no range and means every file; "staged" would be empty and let it through.
            return ChangeSet(SOURCE_ALL)
        staged = _staged(root, warn_partial=False)
        if staged.files:
            return staged
        # Nothing staged and no range: ``pre-commit run --all-files`` (pre-commit.ci, tox),
        # which tells hooks nothing about "all files". Checking the empty staged change would
        # run no gate and print "Passed"; every gate is what such a run asks for.
        return ChangeSet(SOURCE_ALL, warnings=(NOTHING_STAGED,))
    base = detect_change_base(env)
    if base is None and settings_changed_from:
        base = ChangeBase(settings_changed_from, "settings.changed_from")
    if base is not None:
        return _since_base(root, base)
    return ChangeSet(SOURCE_ALL)


def all_files(root: Path) -> tuple[str, ...]:
    """Every tracked file under ``root`` (all files when it is not in a git repository)."""
    try:
        out = git_output(root, "ls-files", "-z", "--cached", "--", ".")
    except ChangeSetError as exc:
        if "not in a git repository" not in str(exc):
            raise  # a git that fails is not a reason to guess
        return tuple(sorted(walk_files(root)))
    return tuple(sorted(os.fsdecode(p) for p in out.split(b"\0") if p))


def walk_files(root: Path) -> Iterable[str]:
    """Every file under ``root`` (hidden directories skipped), as POSIX relative paths."""
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if not d.startswith(".")]
        for name in names:
            yield Path(os.path.relpath(os.path.join(directory, name), root)).as_posix()


# --------------------------------------------------------------------------------------------
# what is never a change

def without_own_files(
    changes: ChangeSet, root: Path, outputs: Iterable[str | os.PathLike[str]], cwd: Path
) -> ChangeSet:
    """``changes`` without what the package itself writes: anything under ``.git/``, this
    run's ``outputs``, and the outputs of earlier runs still as they were written."""
    if not changes.files:
        return changes
    from pytest_verifygate.state.outputs import in_git_dir, own_files

    own = own_files(root, outputs, cwd)
    # Git never lists its own directory; only paths named by the user can be in it (one
    # search over them all: a list of 100,000 names is checked in milliseconds).
    named = changes.source == SOURCE_FILES and ".git/" in "\0".join(changes.files)
    if not own and not named:
        return changes
    kept = tuple(path for path in changes.files
                 if path not in own and not (named and in_git_dir(path)))
    if len(kept) == len(changes.files):
        return changes
    return changes._replace(files=kept, deleted=changes.deleted.intersection(kept))


# --------------------------------------------------------------------------------------------
# CI change base


class ChangeBase(NamedTuple):
    """A git ref to compare against, why it was chosen, and how to fetch it if it is missing."""

    ref: str
    detected_by: str
    fetch_hint: str | None = None


def detect_change_base(environ: Mapping[str, str]) -> ChangeBase | None:
    """The change base this environment names, first that applies, or None.

    1. ``VERIFYGATE_CHANGED_FROM``: set on purpose for this environment, so it wins;
    2. GitHub Actions pull request builds: ``GITHUB_BASE_REF`` (the target branch) as
       ``origin/<branch>``, the remote-tracking ref actions/checkout creates;
    3. GitLab merge request pipelines: ``CI_MERGE_REQUEST_DIFF_BASE_SHA``.
    """
    ref = environ.get(CHANGED_FROM_ENV, "").strip()
    if ref:
        return ChangeBase(ref, CHANGED_FROM_ENV)
    branch = environ.get(GITHUB_BASE_ENV, "").strip()
    if branch:
        return ChangeBase(
            f"origin/{branch}",
            f"GitHub Actions pull request ({GITHUB_BASE_ENV}={branch})",
            "give actions/checkout `fetch-depth: 0` (all history and branches), or fetch "
            # The explicit refspec creates origin/<branch> in a single-branch clone too, where
            # a plain `git fetch origin <branch>` fills only FETCH_HEAD.
            "more history before verifygate runs: "
            f"`git fetch --deepen=200 origin +{branch}:refs/remotes/origin/{branch}`",
        )
    sha = environ.get(GITLAB_BASE_ENV, "").strip()
    if sha:
        return ChangeBase(
            sha,
            f"GitLab merge request ({GITLAB_BASE_ENV})",
            "set the CI/CD variable `GIT_DEPTH: 0` (a full clone), or fetch more history "
            "before verifygate runs: `git fetch --deepen=200`",
        )
    return None


# --------------------------------------------------------------------------------------------
# sources


def _explicit(root: Path, paths: Sequence[str], cwd: Path) -> ChangeSet:
    """Paths as the user named them, relative to ``cwd``, made relative to the project root.

    This runs over change sets of 100,000 paths, so the common case (a relative path under the
    root) is plain string work; existence is checked only where ``{files}`` is expanded.
    """
    files: list[str] = []
    real_cwd = os.path.realpath(cwd)
    prefixes = {os.path.join(os.path.realpath(root), ""), os.path.join(str(root), "")}
    at_root = os.path.join(real_cwd, "") in prefixes
    for path in paths:
        if not path:
            continue
        if at_root and not os.path.isabs(path):
            relative = posixpath.normpath(path)
            if relative == ".." or relative.startswith("../"):
                continue  # outside the project root: ignored for selection (docs: The contract)
        else:
            full = os.path.normpath(os.path.join(real_cwd, path))
            prefix = next((p for p in prefixes if full.startswith(p)), None)
            if prefix is None:
                continue
            relative = full[len(prefix):]
        files.append(relative)
    return ChangeSet(SOURCE_FILES, files=_unique(files))


def _staged(root: Path, *, warn_partial: bool) -> ChangeSet:
    # Given no commit to compare with, ``diff --cached`` compares the index with HEAD, or with
    # nothing before the first commit: one git call either way. What differs between the index
    # and the work tree is for the warning below.
    out = git_output(root, *STAGED_DIFF)
    files, deleted = _commit_changes(root, _parse_raw(out))
    warnings: tuple[str, ...] = ()
    if warn_partial and files:
        partial = sorted(set(files) & set(unstaged_files(root)))
        if partial:
            shown = ", ".join(partial[:5]) + (" ..." if len(partial) > 5 else "")
            warnings = (
                f"warning: {len(partial)} staged file(s) also have unstaged changes ({shown}); "
                "gates see the working tree, not the index. Stage or stash them to check "
                "exactly what will be committed.",
            )
    return _change_set(files, deleted, SOURCE_STAGED, None, warnings)


def _since_base(root: Path, base: ChangeBase) -> ChangeSet:
    """``_since_ref`` for a ref nobody typed: errors say where it came from and how to fix."""
    try:
        changes = _since_ref(root, base.ref, fetch_hint=base.fetch_hint)
    except ChangeSetError as exc:
        raise ChangeSetError(f"change base from {base.detected_by}: {exc}") from None
    return changes._replace(detected_by=base.detected_by)


def _since_ref(
    root: Path, ref: str, *, source: str = SOURCE_REF, fetch_hint: str | None = None
) -> ChangeSet:
    warnings: tuple[str, ...] = ()
    if ref == "HEAD":
        # Before the first commit there is no HEAD: every file is new, so compare against the
        # empty tree (``--changed-from HEAD`` and the agent hook work in a fresh repository).
        base = "HEAD" if _has_head(root) else _empty_tree(root)
    else:
        _verify_ref(root, ref, fetch_hint=fetch_hint)
        merge_base = _merge_base(root, ref, fetch_hint=fetch_hint)
        base = merge_base or _empty_tree(root)
        if merge_base is None:
            # Histories that never met (``git checkout --orphan``): nothing is shared, so
            # every file is a change; never "nothing changed".
            warnings = (f"warning: {ref!r} and HEAD share no history: every file counts as "
                        "changed",)
    files, deleted = worktree_changes(root, base)
    return _change_set(files, deleted, source, ref, warnings)


def _range(root: Path, from_ref: str, to_ref: str) -> ChangeSet:
    _verify_ref(root, from_ref)
    _verify_ref(root, to_ref)
    out = git_output(root, *_DIFF, f"{from_ref}...{to_ref}", "--")
    files, deleted = _commit_changes(root, _parse_raw(out))
    return _change_set(files, deleted, SOURCE_RANGE, f"{from_ref}...{to_ref}", ())


# --------------------------------------------------------------------------------------------
# what git is told not to see, and submodules

# Untracked files count unless the project's own ``.gitignore`` files ignore them:
# ``.git/info/exclude`` and ``core.excludesFile`` are local, and whatever writes the work tree
# (an agent) can write them, so a file they hide is still a change.
UNTRACKED = ("ls-files", "-z", "--others", "--exclude-per-directory=.gitignore")


def worktree_changes(root: Path, base: str) -> tuple[list[str], set[str]]:
    """The files whose content in the work tree differs from commit or tree ``base``, the
    untracked ones (see ``UNTRACKED``), and those of submodules the same way, recursively;
    with the deleted ones (tracked in ``base``, absent from the disk).

    Git's own answer is checked where it can be told not to look: entries marked
    ``assume-unchanged`` or ``skip-worktree`` are compared by content, and git's idea of the
    work tree must be ``root`` or hold it (``core.worktree`` or ``GIT_WORK_TREE`` pointed at
    another checkout is an error).
    """
    top, out, untracked, flagged = _git_together(
        root, TOP_LEVEL, (*_DIFF, base, "--"), UNTRACKED, FLAGGED)
    check_work_tree(root, top)
    entries = _parse_raw(out)
    files: list[str] = [entry.path for entry in entries]
    files += [os.fsdecode(p) for p in untracked.split(b"\0") if p]
    hidden, removed = hidden_edits(root, flagged)
    files += hidden
    # What git calls deleted but is on the disk (untracked since, ``git rm --cached``) is
    # there for the gates to read: not deleted.
    deleted = {entry.path for entry in entries
               if entry.status == "D" and not os.path.lexists(root / entry.path)}
    deleted.update(removed)
    for entry in entries:
        if _GITLINK in (entry.old_mode, entry.new_mode) and (root / entry.path / ".git").exists():
            inner_base = entry.old_oid if entry.old_mode == _GITLINK else None
            inner = root / entry.path
            sub_files, sub_deleted = worktree_changes(inner, inner_base or _empty_tree(inner))
            files += _prefixed(entry.path, sub_files)
            deleted |= set(_prefixed(entry.path, sub_deleted))
    return files, deleted


def unstaged_files(root: Path, top: bytes | None = None) -> list[str]:
    """The tracked files whose work tree content differs from the index (what a commit
    would not take), entries marked not to be looked at included; ``root`` must be git's
    work tree or inside it (``top``: what ``TOP_LEVEL`` printed there, if read)."""
    if top is None:
        top, out, flagged = _git_together(root, TOP_LEVEL, UNSTAGED_NAMES,
                                          FLAGGED)
    else:
        out, flagged = _git_together(root, UNSTAGED_NAMES, FLAGGED)
    check_work_tree(root, top)
    return [*(os.fsdecode(p) for p in out.split(b"\0") if p), *hidden_edits(root, flagged)[0]]


def hidden_edits(root: Path, listing: bytes) -> tuple[list[str], list[str]]:
    """Of the entries ``git ls-files -z -v`` lists, those git is told not to look at
    (``assume-unchanged``: a lower-case tag; ``skip-worktree``: ``S``) whose file differs
    from the index: present with other content, or absent (a skip-worktree entry absent
    from the disk is a sparse checkout's, not an edit, when one is configured); and of those,
    the absent ones."""
    import re

    # Most entries are "H <path>": only the others are looked at (100,000 entries: ~2 ms).
    data = b"\0" + listing
    flagged: dict[str, bytes] = {}
    for match in re.finditer(rb"\0[^H\0]", data):
        end = data.find(b"\0", match.start() + 1)
        tag, _, raw_path = data[match.start() + 1:end if end >= 0 else None].partition(b" ")
        if tag == b"S" or tag.islower():
            flagged[os.fsdecode(raw_path)] = tag
    if not flagged:
        return [], []
    suspects: dict[str, str] = {}
    changed: list[str] = []
    removed: list[str] = []
    sparse: list[str] = []
    for path, (mode, oid) in _index_entries(root, sorted(flagged)).items():
        if mode == _GITLINK.encode():
            continue
        try:
            info = os.lstat(root / path)
        except FileNotFoundError:
            (sparse if flagged[path] == b"S" else removed).append(path)
            continue
        except OSError:
            changed.append(path)  # cannot be compared: a change
            continue
        if stat.S_ISREG(info.st_mode) and mode != _SYMLINK:
            suspects[path] = oid.decode()
        elif not (stat.S_ISLNK(info.st_mode) and mode == _SYMLINK
                  and _link_id(root / path, oid) == oid):
            # Never opened: a link is read as what it says, anything else (a FIFO would
            # block git) is a change.
            changed.append(path)
    if suspects:
        # Hashed by git as ``git add`` would (its filters, line endings).
        for group in _groups(sorted(suspects)):
            ids = git_output(root, "hash-object", "--", *group).split()
            changed += [path for path, oid in zip(group, ids, strict=True)
                        if oid.decode() != suspects[path]]
    if sparse and git_answer(root, "config", "--type=bool", "--get",
                             "core.sparseCheckout") != b"true\n":
        removed += sparse  # no sparse checkout: a file deleted and hidden from git
    return [*changed, *removed], removed


def _index_entries(root: Path, paths: list[str]) -> dict[str, tuple[bytes, bytes]]:
    """The index's mode and id of each of ``paths`` (stage 0)."""
    entries: dict[str, tuple[bytes, bytes]] = {}
    for group in _groups(paths):
        out = git_output(root, "ls-files", "-z", "--stage", "--", *group,
                         environ={"GIT_LITERAL_PATHSPECS": "1"})
        for record in out.split(b"\0"):
            meta, _, raw_path = record.partition(b"\t")
            fields = meta.split(b" ")
            if len(fields) == 3 and fields[2] == b"0":
                entries[os.fsdecode(raw_path)] = (fields[0], fields[1])
    return entries


def _groups(paths: list[str]) -> Iterator[list[str]]:
    """``paths`` in groups short enough for any command line."""
    for start in range(0, len(paths), 500):
        yield paths[start:start + 500]


def _link_id(link: Path, oid: bytes) -> bytes:
    """Git's id of a link's target text, in the hash ``oid`` (the index's id) is in; empty
    when the link cannot be read (gone since: a change)."""
    import hashlib

    try:
        target = os.readlink(os.fsencode(link))
    except OSError:
        return b""
    algorithm = "sha256" if len(oid) == 64 else "sha1"
    return hashlib.new(algorithm, b"blob %d\0" % len(target) + target).hexdigest().encode()


def _commit_changes(root: Path, entries: "list[_Entry]") -> tuple[list[str], set[str]]:
    """Files and deletions of a diff between commits (or a commit and the index), with what
    changed inside each submodule between the two commits it records, recursively."""
    files = [entry.path for entry in entries]
    deleted = {entry.path for entry in entries if entry.status == "D"}
    for entry in entries:
        if entry.new_mode != _GITLINK or not (root / entry.path / ".git").exists():
            continue  # a removed submodule: its path is the change
        inner = root / entry.path
        old = entry.old_oid if entry.old_mode == _GITLINK else _empty_tree(inner)
        try:
            out = git_output(inner, *_DIFF, old, entry.new_oid, "--")
        except ChangeSetError as exc:
            raise ChangeSetError(f"submodule {entry.path}: {exc} (its commits are not "
                                 "here: git submodule update --init --recursive)") from None
        sub_files, sub_deleted = _commit_changes(inner, _parse_raw(out))
        files += _prefixed(entry.path, sub_files)
        deleted |= set(_prefixed(entry.path, sub_deleted))
    return files, deleted


def _prefixed(directory: str, paths: Iterable[str]) -> list[str]:
    return [f"{directory}/{path}" for path in paths]


def verify_work_tree(root: Path) -> None:
    """Raise ``ChangeSetError`` unless git's work tree is ``root`` or holds it."""
    check_work_tree(root, git_output(root, *TOP_LEVEL))


def check_work_tree(root: Path, top_line: bytes) -> None:
    """Raise unless git's work tree (``top_line``: what ``rev-parse --show-toplevel`` prints
    first) is ``root`` or holds it: git would answer about another checkout than this one."""
    top = os.fsdecode(top_line.partition(b"\n")[0])
    real_root, real_top = os.path.realpath(root), os.path.realpath(top) if top else ""
    if not real_top or os.path.commonpath([real_root, real_top]) != real_top:
        raise ChangeSetError(
            f"git's work tree for {root} is {top or 'none'} (core.worktree or GIT_WORK_TREE "
            f"points elsewhere): unset it, or run in {top}")


# --------------------------------------------------------------------------------------------
# git helpers

# ``DIFF``'s ``--raw`` gives each entry's modes: a submodule is mode 160000.
_DIFF = DIFF
_GITLINK = "160000"
_SYMLINK = b"120000"
class _Entry(NamedTuple):
    """One entry of ``git diff --raw -z``."""

    path: str
    status: str
    old_mode: str
    new_mode: str
    old_oid: str
    new_oid: str


def git_output(root: Path, *args: str, environ: Mapping[str, str] | None = None) -> bytes:
    """What ``git <args>`` run in ``root`` prints on stdout (``environ``: variables to add).

    Raises ``ChangeSetError`` with one line when git cannot be run or fails (outside a
    repository: that, and how to choose gates without one). Git's stdin is closed, so it can
    never wait for an answer. Git runs as ``GIT`` says: replace refs, grafts and the
    other ways a repository's configuration can change git's answer are off.
    """
    return _finish_git(root, _start_git(root, *args, environ=environ))


def git_answer(root: Path, *args: str) -> bytes | None:
    """``git_output``, or None when git says no without an error: exit status 1 and nothing
    on stderr (``rev-parse --verify --quiet`` of a missing ref, ``merge-base`` of unrelated
    histories). Any other failure (a broken configuration, say) raises ``ChangeSetError``."""
    process = _start_git(root, *args)
    with process:
        stdout, stderr = process.communicate()
    if process.returncode == 1 and not stderr.strip():
        return None
    return _checked(root, process, stdout, stderr)


def _git_together(root: Path, *reads: Sequence[str]) -> tuple[bytes, ...]:
    """Independent git reads at once rather than one after the other (every commit and agent
    stop waits for them); errors as ``git_output`` reports them, the first one's first."""
    running: list[subprocess.Popen[bytes]] = []
    try:
        for args in reads:
            running.append(_start_git(root, *args))
    except BaseException:
        _reap(running)
        raise
    outputs: list[bytes] = []
    for index, process in enumerate(running):
        try:
            outputs.append(_finish_git(root, process))
        except BaseException:
            _reap(running[index + 1:])  # reaped quietly: the first error is the one to report
            raise
    return tuple(outputs)


def _reap(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        with process:
            process.communicate()


def _start_git(root: Path, *args: str, environ: Mapping[str, str] | None = None
               ) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen([*GIT, *args], cwd=root,
                                env={**git_environment(), **(environ or {})},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise ChangeSetError("git is not installed or not on PATH") from None
    except OSError as exc:  # not executable, no such directory: still one line, not a trace
        raise ChangeSetError(f"cannot run git in {root}: {exc.strerror or exc}") from None


def _finish_git(root: Path, process: subprocess.Popen[bytes]) -> bytes:
    """Wait for a git started by ``_start_git``: its output, or a one-line error."""
    with process:
        stdout, stderr = process.communicate()
    return _checked(root, process, stdout, stderr)


def _checked(root: Path, process: subprocess.Popen[bytes], stdout: bytes,
             stderr_bytes: bytes) -> bytes:
    """``stdout`` of a git that exited with status 0, else a one-line ``ChangeSetError``."""
    if process.returncode != 0:
        stderr = stderr_bytes.decode("utf-8", "replace")
        message = stderr.strip().splitlines()
        first = message[0] if message else f"exit status {process.returncode}"
        # Outside a repository, ``git diff`` turns into ``git diff --no-index`` and rejects
        # the options that need one instead of saying so.
        if "not a git repository" in first or "usage: git diff --no-index" in stderr:
            raise ChangeSetError(
                f"{root} is not in a git repository, so no change set can be computed "
                "(verifygate run and pytest take explicit files or all gates instead)"
            )
        args = list(process.args)[len(GIT):]  # type: ignore[arg-type]
        while args[:1] == ["-c"]:  # a setting for this call: the command comes after
            args = args[2:]
        command = args[0] if args else "git"
        raise ChangeSetError(f"git {command!s} failed: {first}")
    return stdout


def _empty_tree(root: Path) -> str:
    """The id of the empty tree in this repository's hash (SHA-1 or SHA-256)."""
    return git_output(root, "hash-object", "-t", "tree", "/dev/null").decode().strip()


def _has_head(root: Path) -> bool:
    return git_answer(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}") is not None


def _verify_ref(root: Path, ref: str, *, fetch_hint: str | None = None) -> None:
    if ref.startswith("-"):
        raise ChangeSetError(f"invalid git ref {ref!r}: a ref cannot start with '-'")
    found = git_answer(root, "rev-parse", "--verify", "--quiet", "--end-of-options",
                       f"{ref}^{{commit}}")
    if found is None:
        hint = " (fetch it first, e.g. git fetch origin)" if "/" in ref else ""
        if fetch_hint:
            hint = f"; {fetch_hint}"
        raise ChangeSetError(f"unknown git ref {ref!r}: no such commit{hint}")


def _merge_base(root: Path, ref: str, *, fetch_hint: str | None = None) -> str | None:
    """The merge-base of ``ref`` and HEAD; None when the histories never met (and the clone
    is not shallow: there, the one-line error says how to fetch the missing history)."""
    found = git_answer(root, "merge-base", "--end-of-options", ref, "HEAD")
    if found is not None:
        return found.decode().strip()
    if git_output(root, "rev-parse", "--is-shallow-repository").strip() == b"true":
        # Never fall back to a guess: without the merge-base the selection would be wrong.
        hint = fetch_hint or (
            "fetch more history (`git fetch --deepen=200` or `git fetch --unshallow`; in "
            "CI clone it whole: actions/checkout `fetch-depth: 0`, GitLab `GIT_DEPTH: 0`)"
        )
        raise ChangeSetError(
            f"no merge-base between {ref!r} and HEAD in this shallow clone: {hint}")
    return None


def _parse_raw(out: bytes) -> list[_Entry]:
    """Parse ``git diff --raw -z --no-renames``: ``:<old mode> <new mode> <old id> <new id>
    <status>`` and the path alternate."""
    fields = out.split(b"\0")
    entries: list[_Entry] = []
    for meta, raw_path in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.lstrip(b":").decode("ascii", "replace").split(" ")
        if len(parts) != 5:
            continue
        old_mode, new_mode, old_oid, new_oid, status = parts
        entries.append(_Entry(os.fsdecode(raw_path), status[:1], old_mode, new_mode, old_oid,
                              new_oid))
    return entries


def _change_set(
    files: list[str],
    deleted: set[str],
    source: str,
    ref: str | None,
    warnings: tuple[str, ...],
) -> ChangeSet:
    return ChangeSet(source, files=_unique(files), deleted=frozenset(deleted), ref=ref,
                     warnings=warnings)


def _unique(files: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(files)))
