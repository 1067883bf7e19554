"""The result cache: a gate that passed is not run again while its inputs are unchanged.

Owns the cache key, looking entries up, storing passes and bounding the cache's size. A key is
the SHA-256 of

- the gate's definition: name, project directory, ``cwd``, the argvs after ``{files}``
  expansion, the environment it sets, ``timeout_seconds`` and ``shell``;
- the programs it names (``argv[0]``, and for ``shell = true`` the words in command position
  of the script): the resolved path, size and modification time of what ``PATH`` finds, which
  changes whenever the tool is installed or upgraded, without running it;
- the content of its input files: those matching ``inputs``, else ``when_changed``, else every
  file git knows of or would add (tracked, plus untracked files that are not ignored). Tracked
  files that are unmodified in the work tree are named by git's own blob ids (``git ls-files
  --stage``), so a large repository costs one git call, not a read of every file; modified and
  untracked files are hashed here in git's blob format, with their mode.

Only clean passes are stored (not failures, not a pass that needed a retry), and only when the
inputs are the same after the gate ran as before: a gate that rewrites its inputs (a formatter)
is stored on the run that leaves them unchanged. Entries live under the git directory
(``<git dir>/verifygate/cache``, never the work tree), one small JSON file per key written
through a temp file and ``os.replace``, so concurrent runs and pytest-xdist workers share them
safely. The newest ``KEEP_ENTRIES`` entries (by last use) are kept; older ones are pruned when
a pass is stored.
"""

import contextlib
import hashlib
import json
import os
import re
import shlex
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pytest_verifygate import codes
from pytest_verifygate.changes import git_output, walk_files
from pytest_verifygate.commands import ASSIGNMENT
from pytest_verifygate.contract import Contract
from pytest_verifygate.errors import ChangeSetError
from pytest_verifygate.runner.records import CacheSlot, GatePlan, GateResult
from pytest_verifygate.storage import prune_oldest, state_dir, write_atomic

CACHE_VERSION = 1
KEEP_ENTRIES = 512
TAIL_BYTES = 4096  # of a cached pass's output, kept to show with the reused result
STALE_TEMP_SECONDS = 3600.0
MAX_TOOLS = 16
READ_SIZE = 1 << 20

_PROGRAM = re.compile(r"[\w./+-]+")
_SHELL_WORDS = frozenset({
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac",
    "in", "time", "!", "{", "}", "exec", "command", "builtin",
})


def cache_dir(repo_root: Path) -> Path:
    """``<git dir>/verifygate/cache``."""
    return state_dir(repo_root) / "cache"


# --------------------------------------------------------------------------------------------
# the input files


class _Listing(NamedTuple):
    paths: tuple[str, ...]
    ids: dict[str, str]  # "mode oid" of tracked files unmodified in the work tree
    algorithm: str


class RepoFiles:
    """The project's files, listed once per plan: git's ids where git has them, hashes else.

    Paths are POSIX paths relative to the project root, like ``when_changed`` patterns.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._listing: _Listing | None = None
        self._digests: dict[tuple[str, ...] | None, str] = {}
        self._hashed: dict[str, str] = {}  # files hashed here, shared by every gate's digest

    def digest(self, patterns: tuple[str, ...] | None) -> str:
        """A fingerprint of the content of the files matching ``patterns`` (None: every file).

        Raises ``OSError`` when a matching file cannot be read.
        """
        if patterns in self._digests:
            return self._digests[patterns]
        listing = self._listing = self._listing or _list_files(self.root)
        paths: Sequence[str] = listing.paths
        if patterns is not None:
            from pytest_verifygate.patterns import matcher

            paths = list(matcher(patterns).match_files(paths))
        digest = hashlib.sha256()
        for path in paths:
            identity = listing.ids.get(path) or self._hashed.get(path)
            if identity is None:
                identity = self._hashed[path] = _file_id(self.root / path, listing.algorithm)
            digest.update(os.fsencode(path) + b"\0" + identity.encode() + b"\n")
        self._digests[patterns] = result = digest.hexdigest()
        return result


def _list_files(root: Path) -> _Listing:
    # One read-only call, no index lock: tagged records "H <mode> <oid> <stage>\t<path>" for
    # the index, "C ..." again for entries that differ in the work tree (deletions included;
    # a file only touched may be listed too, and hashing it here gives git's id anyway),
    # "M ..." for unmerged entries and "? <path>" for untracked files that are not ignored.
    try:
        out = git_output(root, "ls-files", "-z", "-t", "--stage", "--modified", "--others",
                         "--exclude-standard")
    except ChangeSetError:
        return _Listing(tuple(sorted(walk_files(root))), {}, "sha1")  # no git: hash every file
    ids: dict[str, str] = {}
    paths: set[str] = set()
    dirty: set[str] = set()
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
        if tag not in (b"H", b"S") or stage_number != b"0":  # S: sparse, not checked out
            dirty.add(path)  # modified, deleted or in conflict: the work tree's content counts
        else:
            ids[path] = f"{mode.decode()} {oid.decode()}"
    for path in dirty:
        ids.pop(path, None)
    return _Listing(tuple(sorted(paths)), ids, algorithm)


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


# --------------------------------------------------------------------------------------------
# the gate's definition and tools


def _definition(contract: Contract, plan: GatePlan, patterns: tuple[str, ...] | None) -> str:
    gate = plan.gate
    return json.dumps({
        "version": CACHE_VERSION,
        "gate": gate.name,
        "project": os.path.relpath(contract.root, contract.repo_root),
        "cwd": gate.cwd,
        "invocations": [list(argv) for argv in plan.invocations],
        "env": sorted(plan.env.items()),
        "timeout_seconds": gate.timeout_seconds,
        "shell": gate.shell,
        "inputs": list(patterns) if patterns is not None else None,
        "tools": tool_identities(plan),
    }, sort_keys=True, ensure_ascii=True)


def tool_identities(plan: GatePlan) -> list[list[Any]]:
    """``[name, resolved path, size, mtime_ns]`` of each program the gate names.

    A program not found is ``[name, None]``. Running ``tool --version`` would cost a spawn per
    tool per run; the executable's size and modification time change on every install.
    """
    names = [argv[0] for argv in plan.invocations if argv]
    if plan.gate.shell and plan.invocations:
        names += script_programs(plan.invocations[0][-1])
    import shutil  # for which(); kept off the start-up of runs where nothing caches

    search_path = plan.env.get("PATH", os.environ.get("PATH", os.defpath))
    identities: list[list[Any]] = []
    for name in list(dict.fromkeys(names))[:MAX_TOOLS]:
        if "/" in name:
            found: str | None = name if os.path.isabs(name) else str(plan.cwd / name)
        else:
            found = shutil.which(name, path=search_path)
        try:
            info = os.stat(found) if found is not None else None
        except OSError:
            info = None
        if found is None or info is None:
            identities.append([name, None])
        else:
            identities.append([name, os.path.realpath(found), info.st_size, info.st_mtime_ns])
    return identities


def script_programs(script: str) -> list[str]:
    """The words in command position of a ``sh`` script, best effort (first of each command)."""
    lexer = shlex.shlex(script.replace("\n", ";"), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    programs: list[str] = []
    expecting, skip_next = True, False
    try:
        for token in lexer:
            if skip_next:
                skip_next = False
            elif set(token) <= set("();<>|&"):  # an operator
                if "<" in token or ">" in token:
                    skip_next = not token.endswith("&")  # a file name follows, not a command
                else:
                    expecting = True
            elif expecting and not (ASSIGNMENT.match(token) or token in _SHELL_WORDS):
                if _PROGRAM.fullmatch(token):
                    programs.append(token)
                expecting = False
    except ValueError:  # unbalanced quotes: sh will say so when the gate runs
        pass
    return programs


# --------------------------------------------------------------------------------------------
# lookup and store


def _key(definition: str, inputs_digest: str) -> str:
    return hashlib.sha256(f"{definition}\0{inputs_digest}".encode()).hexdigest()


def attach(contract: Contract, plan: GatePlan, files: RepoFiles, *, read: bool) -> GatePlan:
    """The plan with its cache slot; with ``read``, a stored pass for these inputs as ``hit``.

    A gate whose inputs cannot be read is planned without a slot: it runs, uncached.
    """
    gate = plan.gate
    patterns = gate.inputs if gate.inputs is not None else gate.when_changed
    definition = _definition(contract, plan, patterns)
    try:
        key = _key(definition, files.digest(patterns))
    except OSError:
        return plan
    slot = CacheSlot(cache_dir(contract.repo_root), key, contract.root, definition, patterns)
    if read:
        slot = slot._replace(hit=lookup(slot, plan))
    return plan._replace(cache=slot)


def lookup(slot: CacheSlot, plan: GatePlan) -> GateResult | None:
    """The stored pass for ``slot.key`` as a ``cached`` result, or None."""
    try:
        entry = json.loads(slot.path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(entry, dict) and entry.get("version") == CACHE_VERSION
            and entry.get("key") == slot.key):
        return None
    with contextlib.suppress(OSError):
        os.utime(slot.path)  # pruning keeps the entries used last
    tail = entry.get("output_tail")
    tail = tail if isinstance(tail, str) else ""
    size = entry.get("output_bytes")
    return GateResult(
        name=plan.gate.name,
        outcome=codes.PASSED,
        command=plan.display_command,
        cwd=plan.gate.cwd,
        exit_code=0,
        output_tail=tail,
        output_truncated=entry.get("output_truncated") is True,
        output_bytes=size if isinstance(size, int) and size >= 0 else len(tail.encode()),
        cached=True,
    )


def store(slot: CacheSlot, result: GateResult) -> bool:
    """Remember a clean pass; True if stored. Never raises for a cache it cannot write."""
    if result.outcome != codes.PASSED or result.flaky or result.cached:
        return False
    try:
        if _key(slot.definition, RepoFiles(slot.root).digest(slot.patterns)) != slot.key:
            return False  # the inputs changed while the gate ran: the pass proves neither

        tail, truncated = result.output_tail, result.output_truncated
        encoded = tail.encode("utf-8", "replace")
        if len(encoded) > TAIL_BYTES:
            tail, truncated = encoded[-TAIL_BYTES:].decode("utf-8", "ignore"), True
        entry = {
            "version": CACHE_VERSION,
            "key": slot.key,
            "gate": result.name,
            "stored_at": round(time.time(), 3),
            "duration_s": result.duration_s,
            "output_tail": tail,
            "output_truncated": truncated,
            "output_bytes": result.output_bytes,
        }
        write_atomic(slot.path, json.dumps(entry, ensure_ascii=True) + "\n")
        prune(slot.directory)
    except OSError:
        return False
    return True


def prune(directory: Path, keep: int = KEEP_ENTRIES) -> int:
    """Keep the ``keep`` entries used last (by mtime); remove the rest and stale temp files.

    Safe while other processes read, write and prune the same directory. Returns how many
    entries were removed.
    """
    try:
        with os.scandir(directory) as scan:
            names = [item.name for item in scan]
    except OSError:
        return 0
    now = time.time()
    for temp in (directory / name for name in names if name.endswith(".tmp")):
        with contextlib.suppress(OSError):
            if now - os.lstat(temp).st_mtime > STALE_TEMP_SECONDS:  # left by a killed writer
                os.unlink(temp)
    entries = [directory / name for name in names if name.endswith(".json")]
    return prune_oldest(entries, keep)
