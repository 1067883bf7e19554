"""The result cache: a gate that passed is not run again while its inputs are unchanged.

Owns the cache key, looking entries up, storing passes and bounding the cache's size. A key is
the SHA-256 of

- the gate's definition: name, project directory, ``cwd``, the argvs after ``{files}``
  expansion, the environment it sets, ``timeout_seconds`` and ``shell``;
- the programs it names (``argv[0]``, and for ``shell = true`` the words in command position
  of the script): the resolved path, size and modification time of what ``PATH`` finds, which
  changes whenever the tool is installed or upgraded, without running it;
- the content of its input files (``git/inputs.py``): those matching ``inputs``, else
  ``when_changed``, else every file git knows of or would add.

Only clean passes are stored (not failures, not a pass that needed a retry), and only when the
inputs are the same after the gate ran as before: a gate that rewrites its inputs (a formatter)
is stored on the run that leaves them unchanged. Entries live under the git directory
(``<git dir>/verifygate/cache``, 0700, never the work tree), one small file per key written
through a temp file and ``os.replace``, so concurrent runs and pytest-xdist workers share them
safely; the directory is reached through no link (``storage.open_state_dir``). The newest
``KEEP_ENTRIES`` entries (by last use) are kept; older ones are pruned when a pass is stored,
and only files named as entries are (``<key>.json``): nothing else there is touched.

A gate taking ``{files}`` that has ``when_changed`` or file types is also reused per file: each
file a clean pass checked gets an entry (``f-<key>.json``) keyed by the gate's definition with
``{files}`` unexpanded, the file's path and content, and the digest of the gate's context (its
``inputs``, else every file it does not judge on its own: the configuration). A file with an
entry is not passed again (``reused_files``); a file ``when_changed`` matches and its types let
through is judged on its own, as ``{files}`` promises. The newest ``KEEP_FILE_ENTRIES`` of these
are kept.

A stored pass makes a gate pass without running, and anything that can write the work tree
can write ``.git``: an entry is sealed with this user's key (``state/integrity.py``) and believed
only when its seal, its size, its key and its fields are right; anything else is ignored with
one warning, and the gate runs. Its output is stored masked (``report.redact``), so a secret
rotated since never shows on a cached rerun.

PYTEST_DONT_REWRITE
"""

import contextlib
import hashlib
import json
import os
import re
import shlex
import time
from pathlib import Path
from typing import Any

from pytest_verifygate import codes
from pytest_verifygate.commands import ASSIGNMENT
from pytest_verifygate.contract import Contract, Gate
from pytest_verifygate.git.inputs import RepoFiles
from pytest_verifygate.report.redact import Redactor, redactor_for
from pytest_verifygate.runner.records import CacheSlot, GatePlan, GateResult
from pytest_verifygate.selection import files_for_gate
from pytest_verifygate.state.files import (
    is_temp_name,
    open_state_dir,
    prune_own_files,
    write_state,
)
from pytest_verifygate.state.integrity import read_sealed, seal
from pytest_verifygate.state.storage import state_dir, warn_once

__all__ = ["KEEP_ENTRIES", "KEEP_FILE_ENTRIES", "RepoFiles", "attach", "cache_dir",
           "context_digest", "files_pass", "lookup", "prune", "redactor_for", "reused_files",
           "script_programs", "store", "tool_identities"]

CACHE_VERSION = 1
KEEP_ENTRIES = 512
KEEP_FILE_ENTRIES = 16384  # per-file entries: one per file and gate, a few hundred bytes each
FILE_ENTRY_PREFIX = "f-"
TAIL_BYTES = 4096  # of a cached pass's output, kept to show with the reused result
STALE_TEMP_SECONDS = 3600.0
MAX_TOOLS = 16
# An entry holds at most TAIL_BYTES of output, JSON-escaped: anything much larger is not ours.
MAX_ENTRY_BYTES = 64 * 1024
SEAL_PURPOSE = b"result-cache"

_PROGRAM = re.compile(r"[\w./+-]+")
_SHELL_WORDS = frozenset({
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac",
    "in", "time", "!", "{", "}", "exec", "command", "builtin",
})


def cache_dir(repo_root: Path) -> Path:
    """``<git dir>/verifygate/cache``."""
    return state_dir(repo_root) / "cache"


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


def _file_definition(contract: Contract, plan: GatePlan) -> str:
    """The gate's definition for per-file entries: the command with ``{files}`` unexpanded."""
    gate = plan.gate
    return json.dumps({
        "version": CACHE_VERSION,
        "per_file": True,
        "gate": gate.name,
        "project": os.path.relpath(contract.root, contract.repo_root),
        "cwd": gate.cwd,
        "command": gate.command,
        "env": sorted(plan.env.items()),
        "timeout_seconds": gate.timeout_seconds,
        "shell": gate.shell,
        "when_changed": gate.when_changed,
        "inputs": gate.inputs,
        "tools": tool_identities(plan),
    }, sort_keys=True, ensure_ascii=True)


def context_digest(gate: Gate, root: Path, files: RepoFiles) -> str:
    """What a file checked alone is checked against: the content of the gate's ``inputs``,
    else of every file it would not judge on its own (those ``when_changed`` matches and its
    file types let through): its configuration."""
    if gate.inputs is not None:
        return files.digest(gate.inputs)
    judged = files_for_gate(gate, files.paths())
    if gate.filters_files:
        from pytest_verifygate.filetypes import files_of_gate

        judged = files_of_gate(gate, root, judged)
    return files.digest_except(frozenset(judged))


def _per_file(plan: GatePlan) -> bool:
    return bool(plan.given_files and (plan.gate.when_changed or plan.gate.filters_files))


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


def attach(contract: Contract, plan: GatePlan, files: RepoFiles, redactor: Redactor | None = None,
           *, read: bool) -> GatePlan:
    """The plan with its cache slot; with ``read``, a stored pass for these inputs as ``hit``.

    ``redactor``: the report's, for ``contract`` (made here if not given; building one parses
    every gate's command, so a caller attaching several gates passes one).

    A gate whose inputs cannot be hashed is planned without a slot: it runs, uncached, with
    one warning on stderr saying which input and why.
    """
    gate = plan.gate
    patterns = gate.inputs if gate.inputs is not None else gate.when_changed
    definition = _definition(contract, plan, patterns)
    try:
        key = _key(definition, files.digest(patterns))
    except OSError as exc:
        warn_once(f"gate {gate.name!r} runs uncached: {exc.strerror or exc}")
        return plan
    slot = CacheSlot(cache_dir(contract.repo_root), key, contract.root, definition, patterns,
                     redactor=redactor if redactor is not None else redactor_for(contract.gates))
    if _per_file(plan):
        slot = _with_file_keys(slot, contract, plan, files)
    if read:
        slot = slot._replace(hit=lookup(slot, plan))
    return plan._replace(cache=slot)


def _file_key(definition: str, context: str, path: str, identity: str) -> str:
    return hashlib.sha256(f"{definition}\0{context}\0{path}\0{identity}".encode()).hexdigest()


def _with_file_keys(slot: CacheSlot, contract: Contract, plan: GatePlan,
                    files: RepoFiles) -> CacheSlot:
    """``slot`` with the per-file key of each file the plan gives the gate (a file that
    cannot be hashed gets none: it is checked, and nothing is stored for it)."""
    definition = _file_definition(contract, plan)
    try:
        context = context_digest(plan.gate, contract.root, files)
    except OSError:
        return slot
    keys: list[tuple[str, str]] = []
    for path in plan.given_files:
        try:
            keys.append((path, _file_key(definition, context, path, files.identity(path))))
        except OSError:
            continue
    return slot._replace(file_definition=definition, file_gate=plan.gate, file_keys=tuple(keys))


def _file_entry_path(slot: CacheSlot, key: str) -> Path:
    return slot.directory / f"{FILE_ENTRY_PREFIX}{key}.json"


def reused_files(slot: CacheSlot, gate: str) -> frozenset[str]:
    """The files of ``slot.file_keys`` that already passed: a sealed entry for their key."""
    passed: set[str] = set()
    for path, key in slot.file_keys:
        entry_path = _file_entry_path(slot, key)
        data = read_sealed(entry_path, SEAL_PURPOSE, MAX_ENTRY_BYTES)
        try:
            entry = json.loads(data.decode("utf-8")) if data is not None else None
        except (ValueError, RecursionError):
            continue
        if (isinstance(entry, dict) and entry.get("version") == CACHE_VERSION
                and entry.get("key") == key and entry.get("gate") == gate):
            passed.add(path)
            with contextlib.suppress(OSError):
                os.utime(entry_path, follow_symlinks=False)  # kept by pruning as used
    return frozenset(passed)


def files_pass(plan: GatePlan, count: int) -> GateResult:
    """The ``cached`` pass of a gate whose every file passed before (``reused_files``)."""
    return GateResult(name=plan.gate.name, outcome=codes.PASSED, command=plan.display_command,
                      cwd=plan.gate.cwd, exit_code=0,
                      output_tail=f"{count} file(s), each passed before with this configuration",
                      cached=True)


def lookup(slot: CacheSlot, plan: GatePlan) -> GateResult | None:
    """The stored pass for ``slot.key`` as a ``cached`` result, or None.

    Only an entry sealed by this user, of a sane size, for this very key, is believed.
    """
    data = read_sealed(slot.path, SEAL_PURPOSE, MAX_ENTRY_BYTES)
    if data is None:
        return None
    try:
        entry = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not (isinstance(entry, dict) and entry.get("version") == CACHE_VERSION
            and entry.get("key") == slot.key and entry.get("gate") == plan.gate.name):
        return None
    with contextlib.suppress(OSError):
        os.utime(slot.path, follow_symlinks=False)  # pruning keeps the entries used last
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
        output_bytes=size if type(size) is int and size >= 0 else len(tail.encode()),
        cached=True,
    )


def store(slot: CacheSlot, result: GateResult) -> bool:
    """Remember a clean pass, its output masked and the entry sealed; True if stored.

    Never raises for a cache it cannot write; without a key to seal with, nothing is stored.
    """
    if result.outcome != codes.PASSED or result.flaky or result.cached:
        return False
    try:
        files = RepoFiles(slot.root)
        _store_files(slot, files, result.name)
        if _key(slot.definition, files.digest(slot.patterns)) != slot.key:
            return False  # the inputs changed while the gate ran: the pass proves neither
        tail = result.output_tail  # masked as it was captured
        truncated = result.output_truncated
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
        sealed = seal(SEAL_PURPOSE, (json.dumps(entry, ensure_ascii=True) + "\n").encode())
        if sealed is None:
            return False
        write_state(slot.path, sealed)
        prune(slot.directory)
    except OSError:
        return False
    return True


def _store_files(slot: CacheSlot, files: RepoFiles, gate: str) -> None:
    """An entry for each file the pass checked whose key is the same after the run."""
    if slot.file_definition is None or slot.file_gate is None or not slot.file_keys:
        return
    try:
        context = context_digest(slot.file_gate, slot.root, files)
    except OSError:
        return
    for path, key in slot.file_keys:
        try:
            now = _file_key(slot.file_definition, context, path, files.identity(path))
        except OSError:
            continue
        if now != key:
            continue  # this file or the context changed while the gate ran
        entry = {"version": CACHE_VERSION, "key": key, "gate": gate, "path": path,
                 "stored_at": round(time.time(), 3)}
        sealed = seal(SEAL_PURPOSE, (json.dumps(entry, ensure_ascii=True) + "\n").encode())
        if sealed is None:
            return
        write_state(_file_entry_path(slot, key), sealed)
    prune_own_files(slot.directory, is_file_entry_name, KEEP_FILE_ENTRIES)


def prune(directory: Path, keep: int = KEEP_ENTRIES) -> int:
    """Keep the ``keep`` entries used last (by mtime); remove the rest and stale temp files.

    Only files named as this module names them (a key's hex digest and ``.json``, a temp file
    of ``write_state``) are ever removed, and ``directory`` is reached through no link. Safe
    while other processes read, write and prune the same directory. Returns how many entries
    were removed.
    """
    try:
        fd = open_state_dir(directory)
    except OSError:
        return 0
    try:
        now = time.time()
        with os.scandir(fd) as scan:
            temps = [item.name for item in scan if is_temp_name(item.name)]
        for temp in temps:
            with contextlib.suppress(OSError):
                info = os.lstat(temp, dir_fd=fd)
                if now - info.st_mtime > STALE_TEMP_SECONDS:  # left by a killed writer
                    os.unlink(temp, dir_fd=fd)
    finally:
        os.close(fd)
    return prune_own_files(directory, is_entry_name, keep)


def is_entry_name(name: str) -> bool:
    """Whether ``name`` is an entry's: ``<SHA-256 of the key, in hex>.json``."""
    stem, _, suffix = name.partition(".")
    return (suffix == "json" and len(stem) == 64 and stem.isascii()
            and all(char in "0123456789abcdef" for char in stem))


def is_file_entry_name(name: str) -> bool:
    """Whether ``name`` is a per-file entry's: ``f-<SHA-256 in hex>.json``."""
    return name.startswith(FILE_ENTRY_PREFIX) and is_entry_name(name[len(FILE_ENTRY_PREFIX):])
