"""What a cached gate reads: the project's files matching its patterns, and their fingerprint.

Owns the content side of the result cache's key (``cache.py``). The files are those git
tracks or would add (untracked, not ignored), plus, for a gate with patterns, the ignored files
its patterns reach: ignored files git lists one by one (``.env``), and files inside an ignored
directory that a pattern names by its path (``build/**``, not ``**/*.py``: a virtualenv or
``node_modules`` stays out). Tracked files git vouches for are named by git's own blob ids
(``git ls-files --stage``: one git call, no file read); every other file is hashed here, in
git's blob format, with its mode. Git does not vouch for a file marked ``assume-unchanged`` or
``skip-worktree`` (edits to it are invisible to git) nor for a submodule (an id names its
recorded commit, not what is checked out or edited there): those are hashed as they are on
disk, a submodule as a repository of its own. What cannot be read, or an ignored directory
too large to hash, leaves the gate without a key: it runs, uncached.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from pytest_verifygate.changes import git_output, walk_files
from pytest_verifygate.errors import ChangeSetError

READ_SIZE = 1 << 20
# Files hashed in ignored directories that a pattern names; past this the gate is not cached.
MAX_IGNORED_FILES = 10_000
_GITLINK = "160000"
_GLOB = frozenset("*?[\\")


class _Listing(NamedTuple):
    paths: tuple[str, ...]
    ids: dict[str, str]  # "mode oid" of tracked files git vouches for
    algorithm: str
    gitlinks: frozenset[str] = frozenset()  # submodules


class RepoFiles:
    """The project's files, listed once per plan: git's ids where git has them, hashes else.

    Paths are POSIX paths relative to the project root, like ``when_changed`` patterns.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._listing: _Listing | None = None
        self._ignored: tuple[str, ...] | None = None
        self._digests: dict[tuple[str, ...] | None, str] = {}
        self._hashed: dict[str, str] = {}  # files hashed here, shared by every gate's digest

    def digest(self, patterns: tuple[str, ...] | None) -> str:
        """A fingerprint of the content of the files matching ``patterns`` (None: every file).

        Raises ``OSError`` when a matching file cannot be read, or an ignored directory a
        pattern names holds too many files to hash.
        """
        if patterns in self._digests:
            return self._digests[patterns]
        listing = self._listing = self._listing or _list_files(self.root)
        paths: Sequence[str] = listing.paths
        if patterns is not None:
            from pytest_verifygate.patterns import matcher

            candidates = [*listing.paths, *self._ignored_files(patterns)]
            paths = sorted(set(matcher(patterns).match_files(candidates)) | {
                link for link in listing.gitlinks if _may_reach(patterns, link)})
        digest = hashlib.sha256()
        for path in paths:
            identity = listing.ids.get(path) or self._hashed.get(path)
            if identity is None:
                identity = self._hashed[path] = self._identity(path, listing)
            digest.update(os.fsencode(path) + b"\0" + identity.encode() + b"\n")
        self._digests[patterns] = result = digest.hexdigest()
        return result

    def _identity(self, path: str, listing: _Listing) -> str:
        if path in listing.gitlinks:
            # What is checked out and edited there, not the commit the superproject records.
            return f"{_GITLINK} {RepoFiles(self.root / path).digest(None)}"
        return _file_id(self.root / path, listing.algorithm)

    def _ignored_files(self, patterns: tuple[str, ...]) -> list[str]:
        """Ignored files git lists one by one, and the files of ignored directories that one
        of ``patterns`` names by its path."""
        if self._ignored is None:
            try:
                out = git_output(self.root, "ls-files", "-z", "--others", "--ignored",
                                 "--exclude-standard", "--directory")
            except ChangeSetError:
                out = b""  # no git: every file is listed already
            self._ignored = tuple(os.fsdecode(item) for item in out.split(b"\0") if item)
        files = [item for item in self._ignored if not item.endswith("/")]
        for directory in (item for item in self._ignored if item.endswith("/")):
            if any(_names(pattern, directory) for pattern in patterns):
                found = [f"{directory}{path}" for path in walk_files(self.root / directory)]
                if len(found) > MAX_IGNORED_FILES:
                    raise OSError(f"{directory} holds more than {MAX_IGNORED_FILES} files")
                files += found
        return files


def _literal_prefix(pattern: str) -> str:
    """The part of a gitignore-style pattern before its first glob character, unanchored."""
    text = pattern.lstrip("/")
    cut = next((index for index, char in enumerate(text) if char in _GLOB), len(text))
    return text[:cut]


def _names(pattern: str, directory: str) -> bool:
    """Whether ``pattern`` names ``directory`` (``dir/``) or a path inside it explicitly."""
    if pattern.startswith("!"):
        return False
    prefix = _literal_prefix(pattern)
    return prefix.startswith(directory) or prefix.rstrip("/") == directory.rstrip("/")


def _may_reach(patterns: tuple[str, ...], directory: str) -> bool:
    """Whether any of ``patterns`` could match a path inside ``directory`` (a submodule):
    when in doubt, yes, so that the gate is keyed by what it may read there."""
    inside = f"{directory}/"
    for pattern in patterns:
        if pattern.startswith("!"):
            continue
        body = pattern.rstrip("/")
        # Without a slash but at its end, a gitignore pattern matches at any depth.
        if "/" not in body or body.startswith("**"):
            return True
        prefix = _literal_prefix(pattern)
        if prefix.startswith(inside) or inside.startswith(prefix) or prefix == directory:
            return True
    return False


def _list_files(root: Path) -> _Listing:
    # One read-only call, no index lock: tagged records "H <mode> <oid> <stage>\t<path>" for
    # the index, "C ..." again for entries that differ in the work tree (deletions included;
    # a file only touched may be listed too, and hashing it here gives git's id anyway),
    # "M ..." for unmerged entries, "S ..." for skip-worktree ones, lower case ("h ...") for
    # assume-unchanged ones (``-v``), and "? <path>" for untracked files that are not ignored.
    try:
        out = git_output(root, "ls-files", "-z", "-v", "--stage", "--modified", "--others",
                         "--exclude-standard")
    except ChangeSetError:
        return _Listing(tuple(sorted(walk_files(root))), {}, "sha1")  # no git: hash every file
    ids: dict[str, str] = {}
    paths: set[str] = set()
    dirty: set[str] = set()
    gitlinks: set[str] = set()
    algorithm = "sha1"
    for record in out.split(b"\0"):
        tag, _, rest = record.partition(b" ")
        if tag == b"?":
            paths.add(os.fsdecode(rest))
            continue
        meta, _, raw_path = rest.partition(b"\t")
        fields = meta.split(b" ")
        if len(fields) != 3:
            continue
        mode, oid, stage_number = fields
        path = os.fsdecode(raw_path)
        paths.add(path)
        if len(oid) == 64:
            algorithm = "sha256"
        if mode.decode() == _GITLINK:
            gitlinks.add(path)
        # Only "H" at stage 0 is a file git checked: modified, deleted, in conflict, marked
        # skip-worktree or assume-unchanged, or a submodule, its content is read here.
        if tag != b"H" or stage_number != b"0" or mode.decode() == _GITLINK:
            dirty.add(path)
        else:
            ids[path] = f"{mode.decode()} {oid.decode()}"
    for path in dirty:
        ids.pop(path, None)
    return _Listing(tuple(sorted(paths)), ids, algorithm, frozenset(gitlinks))


def _file_id(full: Path, algorithm: str) -> str:
    """``"<mode> <oid>"`` as git would record the file now (an id git would give it)."""
    try:
        info = os.lstat(full)
    except FileNotFoundError:
        return "deleted"
    digest = hashlib.new(algorithm)
    if stat.S_ISLNK(info.st_mode):
        target = os.fsencode(os.readlink(full))
        digest.update(b"blob %d\0" % len(target) + target)
        return f"120000 {digest.hexdigest()}"
    if not stat.S_ISREG(info.st_mode):
        return "other"  # a nested repository or a special file: present, content unknown
    digest.update(b"blob %d\0" % info.st_size)
    with open(full, "rb") as handle:
        while chunk := handle.read(READ_SIZE):
            digest.update(chunk)
    mode = "100755" if info.st_mode & stat.S_IXUSR else "100644"
    return f"{mode} {digest.hexdigest()}"
