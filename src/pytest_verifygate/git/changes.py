"""The change set (docs: The change set) and ``git_output``, the one way the package runs git:
a git that fails raises ``ChangeSetError``, never an empty change set.

PYTEST_DONT_REWRITE
"""

import hashlib
import os
import posixpath
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pytest_verifygate.errors import ChangeSetError, UsageError
from pytest_verifygate.gitcmd import empty_tree, git_answer, git_output, head_commit

# ``-z`` for any file name; a rename is a deletion and an addition (both paths count); ``--raw``
# for the modes (a submodule is 160000); ``--relative`` leaves out changes outside the root.
DIFF = ("diff", "--raw", "-z", "--no-abbrev", "--no-renames", "--relative",
        "--ignore-submodules=none")
STAGED_DIFF = (*DIFF, "--cached", "--")
TOP_LEVEL = ("rev-parse", "--show-toplevel", "--show-prefix")
# One record per index entry: "<tag> <mode> <oid> <stage>\t<path>", tag "H" for a file git
# checks, lower case for assume-unchanged, "S" for skip-worktree; ``--modified`` adds a "C"
# record per entry whose file differs, ``UNTRACKED`` a "? <path>" per untracked file.
LISTING = ("ls-files", "-z", "-v", "--stage")
# Only the project's own ``.gitignore`` files hide an untracked file: ``.git/info/exclude`` and
# ``core.excludesFile`` are local, and whatever writes the work tree can write them.
UNTRACKED = ("--others", "--exclude-per-directory=.gitignore")
GITLINK = "160000"
SYMLINK = "120000"

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
    """The files a run is about, relative to the project root; "all": no change filtering."""

    source: str
    files: tuple[str, ...] = ()
    deleted: frozenset[str] = frozenset()
    ref: str | None = None
    warnings: tuple[str, ...] = ()
    # Where an implicit ref came from ("settings.changed_from", ...), for the report.
    detected_by: str | None = None

    @property
    def filtering(self) -> bool:
        """Whether gates are selected by the changed files (false for ``--all``)."""
        return self.source != SOURCE_ALL

    @property
    def existing_files(self) -> tuple[str, ...]:
        """Changed files not known to be deleted: what ``{files}`` may expand to."""
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
        data: dict[str, Any] = {"source": self.source, "ref": self.ref,
                                "files": list(self.files), "deleted": sorted(self.deleted)}
        if self.detected_by is not None:
            data["detected_by"] = self.detected_by
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ChangeSet":
        return cls(str(data["source"]), tuple(data.get("files", ())),
                   frozenset(data.get("deleted", ())), data.get("ref"),
                   detected_by=data.get("detected_by"))


class ChangeRequest(NamedTuple):
    """What the user asked for; ``compute_changes`` applies the order of precedence."""

    files: Sequence[str] | None = None
    staged: bool = False
    changed_from: str | None = None
    worktree: bool = False
    all: bool = False
    # The files this run will write (reports, JUnit, digest): never changes.
    outputs: Sequence[str | os.PathLike[str]] = ()


def compute_changes(root: Path, request: ChangeRequest | None = None, *,
                    settings_changed_from: str = "", environ: Mapping[str, str] | None = None,
                    cwd: Path | None = None) -> ChangeSet:
    """The change set of the first source that applies, without the package's own files."""
    request = request or ChangeRequest()
    env = os.environ if environ is None else environ
    cwd = cwd or Path.cwd()
    refuse_tracked_outputs(request.outputs, cwd)
    changes = _compute(root, request, settings_changed_from, env, cwd)
    changes = without_own_files(changes, root, request.outputs, cwd)
    if changes.source == SOURCE_FILES:
        _refuse_unknown_files(root, changes.files, cwd)
    return changes


def _refuse_unknown_files(root: Path, files: Sequence[str], cwd: Path) -> None:
    """``UsageError`` for a named file neither in the work tree nor in the index: it names
    nothing a gate could check, and a run for nothing says ``passed``."""
    top = os.fspath(root)  # os.path, not pathlib: a --files-from list may name 100,000
    missing = [path for path in files if not os.path.lexists(os.path.join(top, path))]
    if not missing:
        return
    indexed = set(all_files(root))
    unknown = next((path for path in missing if path not in indexed), None)
    if unknown is None:
        return
    typed = os.path.relpath(root / unknown, cwd)
    meant = os.path.relpath(root / typed, cwd)  # a path from the project root, typed elsewhere
    hint = (f"did you mean {meant}? " if not typed.startswith("..") and (
        os.path.lexists(root / typed) or Path(typed).as_posix() in indexed) else "")
    raise UsageError(f"{typed}: no such file in the work tree or the index ({hint}named files "
                     "are relative to the current directory; a deletion is found by "
                     "--changed-from REF)")


def _compute(root: Path, request: ChangeRequest, settings_changed_from: str,
             env: Mapping[str, str], cwd: Path) -> ChangeSet:
    if request.files is not None:
        return _explicit(root, request.files, cwd)
    if request.all:
        return ChangeSet(SOURCE_ALL)
    if request.staged:
        return _staged(root)
    if request.changed_from:
        return _since_ref(root, request.changed_from)
    if request.worktree:
        return _since_ref(root, "HEAD", source=SOURCE_WORKTREE)
    from_ref, to_ref = env.get("PRE_COMMIT_FROM_REF"), env.get("PRE_COMMIT_TO_REF")
    if from_ref and to_ref:
        return _range(root, from_ref, to_ref)
    if env.get("PRE_COMMIT") == "1":
        if env.get("PRE_COMMIT_REMOTE_BRANCH"):
            # A first push has no range and means every file: "staged" would let it through.
            return ChangeSet(SOURCE_ALL)
        staged = _staged(root)
        if staged.files:
            return staged
        # ``pre-commit run --all-files`` says nothing of "all files": the empty staged change
        # would run no gate and print "Passed".
        return ChangeSet(SOURCE_ALL, warnings=(NOTHING_STAGED,))
    base = detect_change_base(env)
    if base is None and settings_changed_from:
        base = ChangeBase(settings_changed_from, "settings.changed_from")
    if base is None:
        return ChangeSet(SOURCE_ALL)
    try:
        changes = _since_ref(root, base.ref, fetch_hint=base.fetch_hint)
    except ChangeSetError as exc:  # a ref nobody typed: say where it came from
        raise ChangeSetError(f"change base from {base.detected_by}: {exc}") from None
    return changes._replace(detected_by=base.detected_by)


def all_files(root: Path) -> tuple[str, ...]:
    """Every tracked file under ``root`` (every file, hidden directories aside, outside git)."""
    try:
        out = git_output(root, "ls-files", "-z", "--cached", "--", ".")
    except ChangeSetError as exc:
        if "not in a git repository" not in str(exc):
            raise  # a git that fails is not a reason to guess
        return tuple(sorted(_walk_files(root)))
    return tuple(sorted(os.fsdecode(item) for item in out.split(b"\0") if item))


def _walk_files(root: Path) -> Iterable[str]:
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if not d.startswith(".")]
        for name in names:
            yield Path(os.path.relpath(os.path.join(directory, name), root)).as_posix()


def without_own_files(changes: ChangeSet, root: Path, outputs: Iterable[str | os.PathLike[str]],
                      cwd: Path) -> ChangeSet:
    """``changes`` without what the package writes: anything under ``.git/``, this run's
    ``outputs`` and earlier runs' still as written (``state/outputs.py``)."""
    if not changes.files:
        return changes
    from pytest_verifygate.notices import collecting
    from pytest_verifygate.state.outputs import in_git_dir, own_files

    with collecting() as found:  # what is wrong with the record: the change set's warnings
        own = own_files(root, outputs, cwd) & set(changes.files)
    if own and changes.source != SOURCE_FILES:
        # Staged (``git add -A``), a report is part of what is committed: a change.
        listed = git_output(root, "ls-files", "-z", "--cached", "--",
                            *(f":(literal){path}" for path in own))
        own -= {os.fsdecode(item) for item in listed.split(b"\0")}
    changes = changes._replace(warnings=(*changes.warnings, *found))
    # Git never lists its own directory: only paths the user names can be in it.
    named = changes.source == SOURCE_FILES and ".git/" in "\0".join(changes.files)
    if not own and not named:
        return changes
    kept = tuple(path for path in changes.files
                 if path not in own and not (named and in_git_dir(path)))
    return changes._replace(files=kept, deleted=changes.deleted.intersection(kept))


def refuse_tracked_outputs(outputs: Iterable[str | os.PathLike[str]], cwd: Path) -> None:
    """``UsageError`` for an output path (a report, a JUnit file) git tracks or has staged:
    writing it would replace the user's file, and as the package's own output it would no
    longer be a change, so the gates that judge it would never run again."""
    for output in outputs:
        path = cwd / output
        if not path.parent.is_dir():
            continue  # a directory still to be made holds no tracked file
        try:
            listed = git_output(path.parent, "ls-files", "-z", "--cached", "--",
                                f":(literal){path.name}")
        except ChangeSetError as exc:
            if "not in a git repository" in str(exc):
                continue
            raise
        if listed:
            raise UsageError(f"{os.fspath(output)} is a file git tracks: write the report "
                             "elsewhere (a git-ignored path, or outside the work tree)")


class ChangeBase(NamedTuple):
    """A git ref to compare against, why it was chosen, and how to fetch it if it is missing."""

    ref: str
    detected_by: str
    fetch_hint: str | None = None


def detect_change_base(environ: Mapping[str, str]) -> ChangeBase | None:
    """The change base this environment names, or None, in the order of ``*_ENV`` above
    (``VERIFYGATE_CHANGED_FROM`` is set on purpose, so it wins)."""
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


def _explicit(root: Path, paths: Sequence[str], cwd: Path) -> ChangeSet:
    """Paths named relative to ``cwd``, made relative to the root (there may be 100,000)."""
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


def _staged(root: Path) -> ChangeSet:
    """The index against HEAD (the gates see the index: ``set_aside``)."""
    files, deleted = _commit_changes(root, parse_raw(git_output(root, *STAGED_DIFF)))
    return ChangeSet(SOURCE_STAGED, _unique(files), frozenset(deleted))


def _since_ref(root: Path, ref: str, *, source: str = SOURCE_REF,
               fetch_hint: str | None = None) -> ChangeSet:
    warnings: tuple[str, ...] = ()
    if ref == "HEAD":
        # Before the first commit every file is new.
        base = "HEAD" if head_commit(root) is not None else empty_tree(root)
    else:
        _verify_ref(root, ref, fetch_hint=fetch_hint)
        merge_base = _merge_base(root, ref, fetch_hint=fetch_hint)
        base = merge_base or empty_tree(root)
        if merge_base is None:
            # Histories that never met (``git checkout --orphan``): every file is a change.
            warnings = (f"warning: {ref!r} and HEAD share no history: every file counts as "
                        "changed",)
    files, deleted = worktree_changes(root, base)
    return ChangeSet(source, _unique(files), frozenset(deleted), ref, warnings)


def _range(root: Path, from_ref: str, to_ref: str) -> ChangeSet:
    _verify_ref(root, from_ref)
    _verify_ref(root, to_ref)
    out = git_output(root, *DIFF, f"{from_ref}...{to_ref}", "--")
    files, deleted = _commit_changes(root, parse_raw(out))
    return ChangeSet(SOURCE_RANGE, _unique(files), frozenset(deleted), f"{from_ref}...{to_ref}")


def worktree_changes(root: Path, base: str) -> tuple[list[str], set[str]]:
    """The work tree's files that differ from commit or tree ``base`` (untracked ones, hidden
    edits, submodules' files), and the deleted ones of them."""
    check_work_tree(root, git_output(root, *TOP_LEVEL))  # before git walks a foreign tree
    out = git_output(root, *DIFF, base, "--")
    listing = git_output(root, *LISTING, *UNTRACKED)
    entries = parse_raw(out)
    _, untracked, flagged = read_listing(listing)
    hidden, removed = hidden_edits(root, flagged)
    files = [*(entry.path for entry in entries), *untracked, *hidden]
    # Deleted for git but on the disk (``git rm --cached``): there for the gates to read.
    deleted = {entry.path for entry in entries
               if entry.status == "D" and not os.path.lexists(root / entry.path)}
    deleted.update(removed)
    for entry in entries:
        if GITLINK in (entry.old_mode, entry.new_mode) and (root / entry.path / ".git").exists():
            inner = root / entry.path
            inner_base = entry.old_oid if entry.old_mode == GITLINK else empty_tree(inner)
            _add_inner(files, deleted, entry.path, worktree_changes(inner, inner_base))
    return files, deleted


class _Flagged(NamedTuple):
    """An index entry git is told not to look at (``LISTING``'s record)."""

    tag: bytes
    mode: str
    oid: str


def read_listing(listing: bytes) -> tuple[list[str], list[str], dict[str, _Flagged]]:
    """Of a ``LISTING``: the modified files (submodules aside), the untracked ones and the
    flagged entries; records tagged "H" are skipped unparsed (there may be 100,000)."""
    modified: list[str] = []
    untracked: list[str] = []
    flagged: dict[str, _Flagged] = {}
    for match in re.finditer(rb"\0([^H\0][^\0]*)", b"\0" + listing):
        tag, _, rest = match.group(1).partition(b" ")
        if tag == b"?":
            untracked.append(os.fsdecode(rest))
            continue
        meta, _, raw_path = rest.partition(b"\t")
        mode, oid, stage = meta.decode("ascii", "replace").split(" ")
        path = os.fsdecode(raw_path)
        if tag == b"C":
            if mode != GITLINK:
                modified.append(path)
        elif (tag == b"S" or tag.islower()) and stage == "0":
            flagged[path] = _Flagged(tag, mode, oid)
    return modified, untracked, flagged


def hidden_edits(root: Path, flagged: Mapping[str, _Flagged]) -> tuple[list[str], list[str]]:
    """Of the ``flagged`` entries, those whose file differs, and the absent ones of them."""
    suspects: dict[str, str] = {}
    changed: list[str] = []
    removed: list[str] = []
    sparse: list[str] = []
    for path, entry in sorted(flagged.items()):
        if entry.mode == GITLINK:
            continue
        try:
            info = os.lstat(root / path)
        except FileNotFoundError:
            (sparse if entry.tag.upper() == b"S" else removed).append(path)
            continue
        except OSError:
            changed.append(path)  # cannot be compared: a change
            continue
        if stat.S_ISREG(info.st_mode) and entry.mode != SYMLINK:
            suspects[path] = entry.oid
        elif not (stat.S_ISLNK(info.st_mode) and entry.mode == SYMLINK
                  and _link_id(root / path, entry.oid) == entry.oid):
            # Never opened (a FIFO would block git): a link is read as what it says.
            changed.append(path)
    # Hashed by git as ``git add`` would (its filters, line endings), 500 paths per call.
    paths = list(suspects)
    for start in range(0, len(paths), 500):
        group = paths[start:start + 500]
        ids = git_output(root, "hash-object", "--", *group).decode().split()
        changed += [path for path, oid in zip(group, ids, strict=True) if oid != suspects[path]]
    # A skip-worktree entry absent from the disk is a sparse checkout's, when one is on.
    if sparse and git_answer(root, "config", "--type=bool", "--get",
                             "core.sparseCheckout") != b"true\n":
        removed += sparse
    return [*changed, *removed], removed


def blob_id(data: bytes, algorithm: str) -> str:
    """Git's id of a blob holding ``data``, in ``algorithm`` ("sha1" or "sha256")."""
    return hashlib.new(algorithm, b"blob %d\0" % len(data) + data).hexdigest()


def _link_id(link: Path, oid: str) -> str:
    """Git's id of a link's target text in ``oid``'s hash; empty when it is gone since."""
    try:
        target = os.readlink(os.fsencode(link))
    except OSError:
        return ""
    return blob_id(target, "sha256" if len(oid) == 64 else "sha1")


def _commit_changes(root: Path, entries: "list[_Entry]") -> tuple[list[str], set[str]]:
    """Files and deletions of a diff between commits or the index, submodules' included."""
    files = [entry.path for entry in entries]
    deleted = {entry.path for entry in entries if entry.status == "D"}
    for entry in entries:
        if entry.new_mode != GITLINK or not (root / entry.path / ".git").exists():
            continue  # a removed submodule: its path is the change
        inner = root / entry.path
        old = entry.old_oid if entry.old_mode == GITLINK else empty_tree(inner)
        try:
            out = git_output(inner, *DIFF, old, entry.new_oid, "--")
        except ChangeSetError as exc:
            raise ChangeSetError(f"submodule {entry.path}: {exc} (its commits are not "
                                 "here: git submodule update --init --recursive)") from None
        _add_inner(files, deleted, entry.path, _commit_changes(inner, parse_raw(out)))
    return files, deleted


def _add_inner(files: list[str], deleted: set[str], directory: str,
               inner: tuple[list[str], set[str]]) -> None:
    files += [f"{directory}/{path}" for path in inner[0]]
    deleted.update(f"{directory}/{path}" for path in inner[1])


def check_work_tree(root: Path, top_line: bytes) -> None:
    """Raise unless git's work tree (``top_line``, from ``TOP_LEVEL``) is ``root`` or holds it:
    git would answer about another checkout."""
    top = os.fsdecode(top_line.partition(b"\n")[0])
    real_root, real_top = os.path.realpath(root), os.path.realpath(top) if top else ""
    if not real_top or os.path.commonpath([real_root, real_top]) != real_top:
        raise ChangeSetError(
            f"git's work tree for {root} is {top or 'none'} (core.worktree or GIT_WORK_TREE "
            f"points elsewhere): unset it, or run in {top}")


class _Entry(NamedTuple):
    path: str
    status: str
    old_mode: str
    new_mode: str
    old_oid: str
    new_oid: str


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
    """The merge-base of ``ref`` and HEAD; None when the histories never met."""
    found = git_answer(root, "merge-base", "--end-of-options", ref, "HEAD")
    if found is not None:
        return found.decode().strip()
    if git_output(root, "rev-parse", "--is-shallow-repository").strip() == b"true":
        # Never a guess: without the merge-base the selection would be wrong.
        hint = fetch_hint or (
            "fetch more history (`git fetch --deepen=200` or `git fetch --unshallow`; in "
            "CI clone it whole: actions/checkout `fetch-depth: 0`, GitLab `GIT_DEPTH: 0`)"
        )
        raise ChangeSetError(
            f"no merge-base between {ref!r} and HEAD in this shallow clone: {hint}")
    return None


def parse_raw(out: bytes) -> list[_Entry]:
    """``git diff --raw -z``: ``:<modes> <ids> <status>`` and the path alternate."""
    fields = out.split(b"\0")
    entries: list[_Entry] = []
    for meta, raw_path in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.lstrip(b":").decode("ascii", "replace").split(" ")
        if len(parts) == 5:
            old_mode, new_mode, old_oid, new_oid, status = parts
            entries.append(_Entry(os.fsdecode(raw_path), status[:1], old_mode, new_mode,
                                  old_oid, new_oid))
    return entries


def _unique(files: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(files)))
