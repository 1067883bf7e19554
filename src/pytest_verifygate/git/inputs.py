"""The fingerprint of the files a cached gate reads, the content side of the result cache's key:
git's blob ids where git vouches for a file, else hashed here; ``OSError`` when one cannot be.

PYTEST_DONT_REWRITE
"""

import errno
import functools
import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from pytest_verifygate.errors import ChangeSetError
from pytest_verifygate.git.changes import (
    GITLINK,
    LISTING,
    SYMLINK,
    TOP_LEVEL,
    UNTRACKED,
    blob_id,
    check_work_tree,
)
from pytest_verifygate.gitcmd import git_output

READ_SIZE = 1 << 20
# Past these the gate is not cached: files walked in a directory git does not list (ignored,
# linked), and the size of one file (hashing would cost more than the cache saves).
MAX_WALKED_FILES = 10_000
MAX_HASHED_BYTES = 1 << 30
_DELETED = "deleted"
_NO_REPOSITORY = "not in a git repository"
_GLOB = frozenset("*?[\\")
_SPECIAL = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
            (stat.S_ISBLK, "a device"))


class _Listing(NamedTuple):
    paths: tuple[str, ...]
    ids: dict[str, str]  # "mode oid" of tracked files git vouches for
    algorithm: str
    gitlinks: frozenset[str] = frozenset()  # submodules
    links: frozenset[str] = frozenset()  # tracked symbolic links
    others: frozenset[str] = frozenset()  # untracked files, not ignored


class RepoFiles:
    """The project's files (POSIX paths relative to ``root``), listed once per plan."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._digests: dict[tuple[str, ...] | None, str] = {}
        self._matched: dict[tuple[str, ...] | None, tuple[str, ...]] = {}
        self._hashed: dict[str, str] = {}  # files hashed here, shared by every gate's digest
        self._unhashable: dict[str, OSError] = {}  # and those that could not be
        # What a caller works out from this listing once for all its gates (the result
        # cache's configuration names).
        self.derived: dict[str, frozenset[str]] = {}

    def digest(self, patterns: tuple[str, ...] | None) -> str:
        """A fingerprint of the files matching ``patterns`` (None: every file)."""
        if patterns not in self._digests:
            self._digests[patterns] = self._digest(self.matching(patterns))
        return self._digests[patterns]

    def paths(self) -> tuple[str, ...]:
        """Every file git knows of or would add."""
        return self._listing.paths

    def matching(self, patterns: tuple[str, ...] | None) -> tuple[str, ...]:
        """The files ``patterns`` match (None: every file)."""
        if patterns not in self._matched:
            self._matched[patterns] = (self.paths() if patterns is None
                                       else tuple(self._matching(patterns)))
        return self._matched[patterns]

    def digest_except(self, judged: frozenset[str]) -> str:
        """A fingerprint of every file git knows of or would add, of those ``judged`` only the
        names: a tool that checks each file alone may still look for the others (isort's
        first-party modules)."""
        return self._digest(self.paths(), judged)

    def _digest(self, paths: Iterable[str], named: frozenset[str] = frozenset()) -> str:
        digest = hashlib.sha256()
        for path in paths:
            identity = self.identity(path)
            # Keyed as when the deletion is staged, so a pass before ``git add`` holds after it.
            if identity != _DELETED:
                identity = "named" if path in named else identity
                digest.update(os.fsencode(path) + b"\0" + identity.encode() + b"\n")
        return digest.hexdigest()

    def stamps(self, patterns: tuple[str, ...] | None) -> str:
        """A fingerprint of what ``lstat`` says of the files ``patterns`` match: a file changed
        and put back as it was has a new ``ctime`` (or inode), which no one can set back."""
        digest = hashlib.sha256()
        for path in self.matching(patterns):
            full = self.root / path
            stamp = [_stamp(os.lstat, full)]
            if stamp[0] is not None and stat.S_ISLNK(stamp[0][0]):
                stamp.append(_stamp(os.stat, full))  # and what the link leads to
            digest.update(os.fsencode(path) + b"\0" + repr(stamp).encode() + b"\n")
        return digest.hexdigest()

    @functools.cached_property
    def _listing(self) -> "_Listing":
        return _list_files(self.root)

    def identity(self, path: str) -> str:
        """``"<mode> <oid>"`` of one file as git would name it, or ``deleted``."""
        identity = self._listing.ids.get(path) or self._hashed.get(path)
        if identity is None:
            identity = self._hashed[path] = self._identity(path)
        return identity

    def _matching(self, patterns: tuple[str, ...]) -> list[str]:
        """The files ``patterns`` match, and the submodules and linked directories they reach."""
        from pytest_verifygate.patterns import match_files

        listing = self._listing
        ignored = self._ignored_files(patterns)
        matched = set(match_files(patterns, [*listing.paths, *ignored]))
        reached = {link for link in listing.gitlinks if _may_reach(patterns, link)}
        # Git's listing names tracked links by their mode; untracked and ignored ones are
        # looked at, only where a pattern may reach into them.
        for path in (*listing.links, *listing.others, *ignored):
            full = self.root / path
            if (path not in matched and _may_reach(patterns, path) and os.path.islink(full)
                    and os.path.isdir(full)):
                reached.add(path)
        return sorted(matched | reached)

    def _identity(self, path: str) -> str:
        if path in self._unhashable:
            raise self._unhashable[path]
        try:
            if path in self._listing.gitlinks:
                # What is checked out and edited there, not the commit the superproject records.
                return f"{GITLINK} {RepoFiles(self.root / path).digest(None)}"
            return _file_id(self.root / path, self._listing.algorithm)
        except OSError as exc:  # the file it names may lie under a linked directory
            where = path if exc.filename is None else os.path.relpath(exc.filename, self.root)
            failure = OSError(f"{Path(where).as_posix()}: {exc.strerror or exc}")
        self._unhashable[path] = failure
        raise failure

    def _ignored_files(self, patterns: tuple[str, ...]) -> list[str]:
        """Ignored files, and the files of ignored directories one of ``patterns`` names."""
        files = [item for item in self._ignored if not item.endswith("/")]
        for directory in (item for item in self._ignored if item.endswith("/")):
            if any(_names(pattern, directory) for pattern in patterns):
                found = [f"{directory}{path}" for path in _files_under(self.root / directory)]
                if len(found) > MAX_WALKED_FILES:
                    raise OSError(f"{directory} holds more than {MAX_WALKED_FILES} files")
                files += found
        return files

    @functools.cached_property
    def _ignored(self) -> tuple[str, ...]:
        try:
            out = git_output(self.root, "ls-files", "-z", *UNTRACKED, "--ignored", "--directory")
        except ChangeSetError as exc:
            if _NO_REPOSITORY not in str(exc):
                raise OSError(str(exc)) from None
            return ()  # no git: every file is listed already
        return tuple(os.fsdecode(item) for item in out.split(b"\0") if item)


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
    """Whether any of ``patterns`` could match a path inside ``directory`` (in doubt, yes)."""
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


def _stamp(call: Callable[[Path], os.stat_result], path: Path) -> tuple[int, ...] | None:
    try:
        info = call(path)
    except OSError:
        return None
    return (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino,
            info.st_dev)


def _list_files(root: Path) -> _Listing:
    # One read-only call, no index lock.
    try:
        check_work_tree(root, git_output(root, *TOP_LEVEL))
        # With the mode seen on disk: under ``core.fileMode=false`` git would vouch for a
        # file whose executable bit was removed (``test -x`` passing on a stale key).
        out = git_output(root, "-c", "core.fileMode=true", *LISTING, "--modified", *UNTRACKED)
    except ChangeSetError as exc:
        if _NO_REPOSITORY not in str(exc):
            raise OSError(str(exc)) from None  # a git that fails: the gate runs, uncached
        return _Listing(tuple(sorted(_files_under(root))), {}, "sha1")  # no git: hash them all
    ids: dict[str, str] = {}
    paths: set[str] = set()
    dirty: set[str] = set()
    gitlinks: set[str] = set()
    links: set[str] = set()
    others: set[str] = set()
    algorithm = "sha1"
    for record in out.split(b"\0"):
        tag, _, rest = record.partition(b" ")
        if tag == b"?":
            others.add(os.fsdecode(rest))
            continue
        meta, _, raw_path = rest.partition(b"\t")
        fields = meta.split(b" ")
        if len(fields) != 3:
            continue
        mode, oid, stage_number = (field.decode() for field in fields)
        path = os.fsdecode(raw_path)
        paths.add(path)
        if len(oid) == 64:
            algorithm = "sha256"
        if mode == GITLINK:
            gitlinks.add(path)
        elif mode == SYMLINK:
            links.add(path)
        # Only "H" at stage 0 is a file git checked; anything else (modified, in conflict,
        # flagged, a submodule, a link: git's id names its target) is read here.
        if tag != b"H" or stage_number != "0" or mode in (GITLINK, SYMLINK):
            dirty.add(path)
        else:
            ids[path] = f"{mode} {oid}"
    for path in dirty:
        ids.pop(path, None)
    return _Listing(tuple(sorted(paths | others)), ids, algorithm, frozenset(gitlinks),
                    frozenset(links), frozenset(others))


def _files_under(top: Path) -> Iterator[str]:
    """Every file under ``top`` (hidden directories skipped), a link to a directory as one."""
    for directory, subdirs, names in os.walk(top):
        linked = [name for name in subdirs if os.path.islink(os.path.join(directory, name))]
        subdirs[:] = [name for name in subdirs if not name.startswith(".") and name not in linked]
        for name in (*names, *(name for name in linked if not name.startswith("."))):
            yield Path(os.path.relpath(os.path.join(directory, name), top)).as_posix()


def _file_id(full: Path, algorithm: str) -> str:
    """``"<mode> <oid>"`` as git would record the file now; a link's with what it leads to."""
    try:
        info = os.lstat(full)
    except FileNotFoundError:
        return _DELETED
    if stat.S_ISLNK(info.st_mode):
        target = blob_id(os.fsencode(os.readlink(full)), algorithm)
        return f"{SYMLINK} {target} -> {_resolved(full, algorithm)}"
    if stat.S_ISDIR(info.st_mode):
        return "other"  # a nested repository: present, content its own
    return _content_id(full, info, algorithm)


def _content_id(full: Path, info: os.stat_result, algorithm: str) -> str:
    """``"<mode> <oid>"`` of the regular file ``full``; else ``OSError``, unopened."""
    if not stat.S_ISREG(info.st_mode):
        kind = next((kind for test, kind in _SPECIAL if test(info.st_mode)), "not a file")
        raise OSError(f"{kind}, not read")
    if info.st_size > MAX_HASHED_BYTES:
        raise OSError(f"over {MAX_HASHED_BYTES >> 20} MiB, not hashed")
    # Non-blocking: a FIFO put in the file's place since it was looked at cannot hang the open.
    with open(os.open(full, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY), "rb") as handle:
        opened = os.fstat(handle.fileno())
        if not stat.S_ISREG(opened.st_mode) or opened.st_size > MAX_HASHED_BYTES:
            raise OSError("replaced while it was read")
        digest = hashlib.new(algorithm)
        digest.update(b"blob %d\0" % opened.st_size)
        remaining = opened.st_size
        # One byte past the size: a file growing meanwhile is caught, and never read to its end.
        while remaining >= 0 and (chunk := handle.read(min(READ_SIZE, remaining + 1))):
            digest.update(chunk)
            remaining -= len(chunk)
    if remaining != 0:
        raise OSError("changed while it was read")
    mode = "100755" if opened.st_mode & stat.S_IXUSR else "100644"
    return f"{mode} {digest.hexdigest()}"


def _resolved(link: Path, algorithm: str) -> str:
    """The identity of what ``link`` points to: a file's content, a directory's files (links
    followed the same way, ``.git`` aside, no loop), or ``missing``."""
    files = 0

    def target(path: Path, inside: frozenset[tuple[int, int]]) -> str:
        try:
            info = os.stat(path)  # ELOOP, for a loop of links, is raised
        except (FileNotFoundError, NotADirectoryError):
            return "missing"  # dangling: the gate finds nothing there either
        return content(path, info, inside)

    def content(path: Path, info: os.stat_result, inside: frozenset[tuple[int, int]]) -> str:
        nonlocal files
        if not stat.S_ISDIR(info.st_mode):
            files += 1
            if files > MAX_WALKED_FILES:
                raise OSError(errno.EFBIG, f"leads to more than {MAX_WALKED_FILES} files",
                              str(link))
            return _content_id(path, info, algorithm)
        node = (info.st_dev, info.st_ino)
        if node in inside:
            raise OSError("a link loop")
        with os.scandir(path) as scan:
            names = sorted(entry.name for entry in scan if entry.name != ".git")
        digest = hashlib.sha256()
        for name in names:
            identity = entry(path / name, inside | {node})
            digest.update(os.fsencode(name) + b"\0" + identity.encode() + b"\n")
        return f"tree {digest.hexdigest()}"

    def entry(path: Path, inside: frozenset[tuple[int, int]]) -> str:
        try:
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                return f"link {os.readlink(path)!r} -> {target(path, inside)}"
            return content(path, info, inside)
        except OSError as exc:
            if exc.filename is not None:  # names its file already
                raise
            raise OSError(errno.EIO, exc.strerror or str(exc), str(path)) from exc

    return target(link, frozenset())
