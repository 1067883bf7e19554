"""The change set: which files changed, from explicit paths, the index, a git ref or a range.

Owns every git call that reads changes, and ``git_output``, the one way the package runs git.
Git is always asked for NUL-separated output (``-z``) so any file name works, renames are split
into a deletion and an addition (both paths count), and deleted files are kept for selection
while ``existing_files`` leaves them out of ``{files}``. Paths in a ``ChangeSet`` are POSIX
paths relative to the project root.

Also leaves out what is never a change: anything under ``.git/``, the files the current run
writes (``ChangeRequest.outputs``) and those earlier runs wrote and nobody changed since (see
``outputs.py``): a report, JUnit file or digest written inside the work tree must not select
gates on the next run.

Also owns CI base detection: the ref a pull or merge request build compares against (GitHub
Actions, GitLab CI, or the generic ``VERIFYGATE_CHANGED_FROM``), with the words that say where
it came from and how to fix a clone too shallow for it.

PYTEST_DONT_REWRITE
"""

import os
import posixpath
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pytest_verifygate.errors import ChangeSetError

# Where a change set came from, as written in the report's "changes.source".
SOURCE_FILES = "files"
SOURCE_STAGED = "staged"
SOURCE_REF = "ref"
SOURCE_RANGE = "pre-commit"
SOURCE_WORKTREE = "worktree"
SOURCE_ALL = "all"

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
    """What the user asked for; ``compute_changes`` applies the order of precedence (README:
    The change set).

    ``outputs``: the files this run will write (reports, JUnit, digest), relative to the
    current directory or absolute; they are left out of the change set.
    """

    files: Sequence[str] | None = None
    staged: bool = False
    changed_from: str | None = None
    worktree: bool = False
    all: bool = False
    outputs: Sequence[str | os.PathLike[str]] = ()


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
    range or index (README: The change set); then the environment's change base
    (``detect_change_base``:
    ``VERIFYGATE_CHANGED_FROM``, a GitHub Actions pull request's ``GITHUB_BASE_REF``, a GitLab
    merge request's ``CI_MERGE_REQUEST_DIFF_BASE_SHA``), then ``settings.changed_from`` (the
    repository-wide default, which a build's own base beats); else every file, no filtering.
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
        return _staged(root, warn_partial=env.get("PRE_COMMIT") != "1")
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
        return _staged(root, warn_partial=False)
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
    except ChangeSetError:
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
    from pytest_verifygate.outputs import in_git_dir, own_files

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
                continue  # outside the project root: ignored for selection (README: The contract)
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
    # nothing before the first commit: one git call either way. The unstaged diff is for the
    # warning below.
    unstaged: bytes | None = None
    if warn_partial:
        out, unstaged = _git_together(root, _STAGED_DIFF, _UNSTAGED_NAMES)
    else:
        out = git_output(root, *_STAGED_DIFF)
    files, deleted = _parse_name_status(out)
    warnings: tuple[str, ...] = ()
    if unstaged is not None and files:
        partial = sorted(set(files) & {os.fsdecode(p) for p in unstaged.split(b"\0") if p})
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
    if ref == "HEAD":
        # Before the first commit there is no HEAD: every file is new, so compare against the
        # empty tree (``--changed-from HEAD`` and the agent hook work in a fresh repository).
        base = "HEAD" if _has_head(root) else _empty_tree(root)
    else:
        _verify_ref(root, ref, fetch_hint=fetch_hint)
        base = _merge_base(root, ref, fetch_hint=fetch_hint)
    # Run in ``root``, ls-files lists the untracked files below it, relative to it.
    out, untracked = _git_together(root, (*_DIFF, base, "--"),
                                   ("ls-files", "-z", "--others", "--exclude-standard"))
    files, deleted = _parse_name_status(out)
    files += [os.fsdecode(p) for p in untracked.split(b"\0") if p]
    return _change_set(files, deleted, source, ref, ())


def _range(root: Path, from_ref: str, to_ref: str) -> ChangeSet:
    _verify_ref(root, from_ref)
    _verify_ref(root, to_ref)
    out = git_output(root, *_DIFF, f"{from_ref}...{to_ref}", "--")
    files, deleted = _parse_name_status(out)
    return _change_set(files, deleted, SOURCE_RANGE, f"{from_ref}...{to_ref}", ())


# --------------------------------------------------------------------------------------------
# git helpers

# Every change set's diff. ``--relative``: git runs in the project root, so paths come
# relative to it and changes outside it are left out (a project below the repository's top
# level).
_DIFF = ("diff", "--name-status", "-z", "--no-renames", "--relative")
_STAGED_DIFF = (*_DIFF, "--cached", "--")
_UNSTAGED_NAMES = ("diff", "--name-only", "-z", "--no-renames", "--relative", "--")


def git_output(root: Path, *args: str) -> bytes:
    """What ``git <args>`` run in ``root`` prints on stdout.

    Raises ``ChangeSetError`` with one line when git cannot be run or fails (outside a
    repository: that, and how to choose gates without one). Git's stdin is closed, so it can
    never wait for an answer.
    """
    return _finish_git(root, _start_git(root, *args))


def _git_together(root: Path, first: Sequence[str], second: Sequence[str]
                  ) -> tuple[bytes, bytes]:
    """Two independent git reads at once rather than one after the other (every commit and
    agent stop waits for them); errors as ``git_output`` reports them, the first one's first."""
    running = _start_git(root, *second)
    try:
        out = git_output(root, *first)
    except BaseException:
        with running:  # reaped quietly: the first error is the one to report
            running.communicate()
        raise
    return out, _finish_git(root, running)


def _start_git(root: Path, *args: str) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(["git", *args], cwd=root, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise ChangeSetError("git is not installed or not on PATH") from None
    except OSError as exc:  # not executable, no such directory: still one line, not a trace
        raise ChangeSetError(f"cannot run git in {root}: {exc.strerror or exc}") from None


def _finish_git(root: Path, process: subprocess.Popen[bytes]) -> bytes:
    """Wait for a git started by ``_start_git``: its output, or a one-line error."""
    with process:
        stdout, stderr_bytes = process.communicate()
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
        command = list(process.args)[1]  # type: ignore[arg-type]
        raise ChangeSetError(f"git {command!s} failed: {first}")
    return stdout


def _empty_tree(root: Path) -> str:
    """The id of the empty tree in this repository's hash (SHA-1 or SHA-256)."""
    return git_output(root, "hash-object", "-t", "tree", "/dev/null").decode().strip()


def _has_head(root: Path) -> bool:
    try:
        git_output(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    except ChangeSetError as exc:
        if "not in a git repository" in str(exc):
            raise
        return False
    return True


def _verify_ref(root: Path, ref: str, *, fetch_hint: str | None = None) -> None:
    if ref.startswith("-"):
        raise ChangeSetError(f"invalid git ref {ref!r}: a ref cannot start with '-'")
    try:
        git_output(root, "rev-parse", "--verify", "--quiet", "--end-of-options",
                   f"{ref}^{{commit}}")
    except ChangeSetError as exc:
        if "not in a git repository" in str(exc):
            raise
        hint = " (fetch it first, e.g. git fetch origin)" if "/" in ref else ""
        if fetch_hint:
            hint = f"; {fetch_hint}"
        raise ChangeSetError(f"unknown git ref {ref!r}: no such commit{hint}") from None


def _merge_base(root: Path, ref: str, *, fetch_hint: str | None = None) -> str:
    try:
        return git_output(root, "merge-base", ref, "HEAD").decode().strip()
    except ChangeSetError:
        shallow = git_output(root, "rev-parse", "--is-shallow-repository").strip() == b"true"
        if shallow:
            # Never fall back to a guess: without the merge-base the selection would be wrong.
            hint = fetch_hint or (
                "fetch more history (`git fetch --deepen=200` or `git fetch --unshallow`; in "
                "CI clone it whole: actions/checkout `fetch-depth: 0`, GitLab `GIT_DEPTH: 0`)"
            )
            raise ChangeSetError(
                f"no merge-base between {ref!r} and HEAD in this shallow clone: {hint}"
            ) from None
        raise ChangeSetError(f"{ref!r} and HEAD share no history (no merge-base)") from None


def _parse_name_status(out: bytes) -> tuple[list[str], set[str]]:
    """Parse ``git diff --name-status -z --no-renames``: status and path alternate."""
    fields = out.split(b"\0")
    files: list[str] = []
    deleted: set[str] = set()
    for status, raw_path in zip(fields[0::2], fields[1::2], strict=False):
        if not status:
            continue
        path = os.fsdecode(raw_path)
        files.append(path)
        if status.startswith(b"D"):
            deleted.add(path)
    return files, deleted


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
