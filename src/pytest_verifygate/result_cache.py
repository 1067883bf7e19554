"""The result cache (docs: how-to/cache.md): a key of a gate's definition, tools and inputs,
and its entries in the user's private state directory (``cache/<repository>``), per key and,
for a ``{files}`` gate, per file. An entry not right in every way is not believed: the gate
runs.

PYTEST_DONT_REWRITE
"""

import contextlib
import glob
import hashlib
import itertools
import json
import os
import re
import shlex
import stat
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pytest_verifygate import codes
from pytest_verifygate.commands import ASSIGNMENT
from pytest_verifygate.contract import Contract, Gate
from pytest_verifygate.git.inputs import RepoFiles
from pytest_verifygate.notices import warn
from pytest_verifygate.runner.records import CacheSlot, GatePlan, GateResult
from pytest_verifygate.selection import files_for_gate
from pytest_verifygate.state.files import (
    StateFileError,
    open_state_dir,
    prune_own_files,
    read_state_file,
    replace_in,
)
from pytest_verifygate.state.storage import blocker, private_dir, read_user_file, repository_key

CACHE_VERSION = 1
KEEP_ENTRIES = 512
KEEP_FILE_ENTRIES = 16384  # one per file and gate, a few hundred bytes each
TAIL_BYTES = 4096  # of a cached pass's output, shown with the reused result
MAX_TOOLS = 16
MAX_ENTRY_BYTES = 64 * 1024  # TAIL_BYTES JSON-escaped and more: anything larger is not ours
# Judged files a tool may read as its configuration count in every file's context.
_CONFIG_SUFFIXES = (".toml", ".ini", ".cfg", ".conf", ".yaml", ".yml", ".json", ".jsonc",
                    ".json5")
MAX_CONFIG_FILES = 500
MAX_CONFIG_BYTES = 64 * 1024
_WORDS = re.compile(rb"[^\s\"'`=,:;()\[\]{}<>]+")

# What a tool may read from outside the repository (docs: how-to/cache.md, "What a pass
# depends on"): configuration files of these names in the directories above it, the user's.
_CONFIG_NAMES = ("pyproject.toml", "setup.cfg", "tox.ini", ".editorconfig", "ruff.toml",
                 ".ruff.toml", ".codespellrc", ".isort.cfg", "typos.toml", "_typos.toml",
                 ".typos.toml", "Cargo.toml", ".flake8", ".pylintrc", "mypy.ini", ".mypy.ini")
_USER_CONFIG_ENDS = ("", "rc", ".cfg", ".toml", ".ini")
_PYTHON_VARIABLES = frozenset({"PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE",
                               "PYTHONSAFEPATH", "PYTHONSTARTUP", "XDG_CONFIG_HOME"})
_RUNNERS = frozenset({"uv", "uvx", "poetry", "pdm", "pipenv", "hatch", "rye"})
_SITE_PACKAGES = "lib/python3*/*-packages"  # site-packages, and Debian's dist-packages
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.json")
_FILE_ENTRY_NAME = re.compile(r"f-[0-9a-f]{64}\.json")
_PROGRAM = re.compile(r"[\w./+-]+")
_SHELL_WORDS = frozenset({
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac",
    "in", "time", "!", "{", "}", "exec", "command", "builtin",
})


def cache_dir(repo_root: Path) -> Path | None:
    """Where ``repo_root``'s passes are kept: never under the work tree or ``.git``, which
    whatever the gates check can write. None: nothing is cached."""
    return private_dir("cache", repository_key(repo_root))


def _definition(contract: Contract, plan: GatePlan) -> dict[str, Any]:
    """What a pass depends on besides its files, the same for the gate's key and its files'."""
    gate = plan.gate
    return {
        "version": CACHE_VERSION,
        "gate": gate.name,
        "project": os.path.relpath(contract.root, contract.repo_root),
        "cwd": gate.cwd,
        "env": sorted(plan.env.items()),
        "timeout_seconds": gate.timeout_seconds,
        "shell": gate.shell,
        "tools": tool_identities(plan),
        "outside": outside_identities(plan, contract.root),
    }


def _text(definition: dict[str, Any], **fields: Any) -> str:
    return json.dumps({**definition, **fields}, sort_keys=True, ensure_ascii=True)


def context_digest(gate: Gate, root: Path, files: RepoFiles) -> str:
    """What a file checked alone is checked against: the gate's ``inputs``, else every file but
    those it judges on its own, whose names alone count (docs: how-to/cache.md, "Per file")."""
    if gate.inputs is not None:
        return files.digest(gate.inputs)
    judged = files_for_gate(gate, files.paths(), root)
    named = _configuration_names(gate, root, files)
    return files.digest_except(frozenset(path for path in judged if not (
        _looks_like_configuration(path) or path.rsplit("/", 1)[-1] in named)))


def _looks_like_configuration(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith(".") or name.endswith("rc") or name.lower().endswith(_CONFIG_SUFFIXES)


def _configuration_names(gate: Gate, root: Path, files: RepoFiles) -> frozenset[str]:
    """The file names the gate's command and the project's configuration files mention: a
    file a tool is told to read (codespell's ``dictionary = words.txt``) is configuration too.
    The files are read once per listing, for every gate."""
    if "configuration" not in files.derived:
        found = [path for path in files.paths() if _looks_like_configuration(path)]
        if len(found) > MAX_CONFIG_FILES:  # cannot be read on every run: no reuse file by file
            raise OSError(f"more than {MAX_CONFIG_FILES} configuration files")
        # Larger ones are lock files and data, not what a person writes to name a file.
        texts = filter(None, (read_user_file(root / path, MAX_CONFIG_BYTES) for path in found))
        files.derived["configuration"] = _names_in(texts)
    return files.derived["configuration"] | _names_in([gate.command_text.encode()])


def _names_in(texts: Iterable[bytes]) -> frozenset[str]:
    return frozenset(os.fsdecode(word.rstrip(b"/").rsplit(b"/", 1)[-1])
                     for text in texts for word in _WORDS.findall(text))


def program_names(plan: GatePlan) -> list[str]:
    """The programs a gate runs: its first word, the module of ``python -m`` and the tool of
    ``uv run`` (and the like), and for ``shell = true`` the first word of each command."""
    names = []
    if plan.invocations:
        argv = plan.invocations[0]
        names.append(argv[0])
        runner = os.path.basename(argv[0]) in _RUNNERS
        for word, after in itertools.pairwise(argv[1:]):
            if (word == "-m" or (runner and word == "run")) and _PROGRAM.fullmatch(after):
                names.append(after)
                break
        if plan.gate.shell:
            names += script_programs(argv[-1])
    return list(dict.fromkeys(names))[:MAX_TOOLS]


def tool_identities(plan: GatePlan) -> list[list[Any]]:
    """``[name, resolved path, size, mtime_ns, site directories' mtime_ns]`` (``[name, None]``:
    not found) of each program the gate names: they change on every install, of the program or
    of a package (a plugin) in its environment, and need no spawn."""
    import shutil  # for which(); kept off the start-up of runs where nothing caches

    search_path = plan.env.get("PATH", os.environ.get("PATH", os.defpath))
    identities: list[list[Any]] = []
    for name in program_names(plan):
        found = plan.cwd / name if "/" in name else shutil.which(name, path=search_path)
        try:
            info = os.stat(found) if found is not None else None
        except OSError:
            info = None
        if found is None or info is None:
            identities.append([name, None])
        else:
            # The environment a program lives in: <prefix>/bin/<name> beside <prefix>/lib.
            prefix = os.path.dirname(os.path.dirname(os.path.abspath(found)))
            identities.append([name, os.path.realpath(found), info.st_size, info.st_mtime_ns,
                               _stamps(glob.glob(os.path.join(prefix, _SITE_PACKAGES)))])
    return identities


def outside_identities(plan: GatePlan, root: Path) -> list[list[Any]]:
    """What a tool may read from outside the project: configuration files of known names in
    the directories above ``root`` (the repository's too), the user's configuration of each
    program, the environment variables named after it and Python's own (docs:
    how-to/cache.md)."""
    names = [os.path.basename(name) for name in program_names(plan)]
    # Strings, not Path objects: a few hundred paths for every gate.
    home = os.environ.get("HOME") or os.path.expanduser("~")
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    user_site = os.environ.get("PYTHONUSERBASE") or os.path.join(home, ".local")
    paths = [os.path.join(parent, file) for parent in map(str, root.resolve().parents)
             for file in _CONFIG_NAMES]
    paths += [place for name in names for place in (
        os.path.join(config_home, name), *(os.path.join(home, f".{name}{end}")
                                           for end in _USER_CONFIG_ENDS))]
    prefixes = tuple(f"{name.upper().replace('-', '_')}_" for name in names)
    return [_stamps([*paths, *glob.glob(os.path.join(user_site, _SITE_PACKAGES))], into=True),
            sorted((key, value) for key, value in os.environ.items()
                   if key in _PYTHON_VARIABLES or key.startswith(prefixes))]


def _stamps(paths: list[str], *, into: bool = False) -> list[list[Any]]:
    """``[path, size, mtime_ns]`` of those of ``paths`` that exist; ``into``: with the entries
    of a directory (``~/.config/ruff/``), one level down."""
    found: list[list[Any]] = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        found.append([path, info.st_size, info.st_mtime_ns])
        if into and stat.S_ISDIR(info.st_mode) and not path.endswith("-packages"):
            with contextlib.suppress(OSError):
                found += _stamps(sorted(os.path.join(path, name) for name in os.listdir(path)))
    return found


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


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def attach(contract: Contract, plan: GatePlan, files: RepoFiles, *, read: bool) -> GatePlan:
    """The plan with its cache slot; with ``read``, a stored pass for these inputs as ``hit``.
    A gate whose inputs cannot be hashed gets none: it runs, with a warning."""
    gate = plan.gate
    patterns = gate.inputs if gate.inputs is not None else gate.when_changed
    common = _definition(contract, plan)
    definition = _text(common, inputs=patterns,
                       invocations=[list(argv) for argv in plan.invocations])
    try:
        key = _key(definition, files.digest(patterns))
    except OSError as exc:
        warn(f"warning: gate {gate.name!r} runs uncached: {exc.strerror or exc}")
        return plan
    directory = cache_dir(contract.repo_root)
    if directory is None:
        return plan
    slot = CacheSlot(directory, key, contract.root, definition, patterns)
    if plan.given_files and (gate.when_changed or gate.filters_files):
        slot = _with_file_keys(slot, contract.root, plan, files, common)
    slot = slot._replace(stamps=files.stamps(_stamped(slot)))
    if read:
        slot = slot._replace(hit=lookup(slot, plan))
    return plan._replace(cache=slot)


def _with_file_keys(slot: CacheSlot, root: Path, plan: GatePlan, files: RepoFiles,
                    common: dict[str, Any]) -> CacheSlot:
    """``slot`` with a key for each file the plan gives the gate, by its unexpanded command."""
    definition = _text(common, per_file=True, command=plan.gate.command,
                       when_changed=plan.gate.when_changed, inputs=plan.gate.inputs)
    try:
        context = context_digest(plan.gate, root, files)
    except OSError:
        return slot
    keys: list[tuple[str, str]] = []
    for path in plan.given_files:
        with contextlib.suppress(OSError):
            keys.append((path, _key(definition, context, path, files.identity(path))))
    return slot._replace(file_definition=definition, file_gate=plan.gate, file_keys=tuple(keys))


def _file_entry_path(slot: CacheSlot, key: str) -> Path:
    return slot.directory / f"f-{key}.json"


def _read_entry(path: Path, key: str, gate: str) -> dict[str, Any] | None:
    """The entry in ``path`` for this key and gate (touched), or None."""
    try:
        data = read_state_file(path, MAX_ENTRY_BYTES)
        entry = json.loads(data.decode("utf-8")) if data is not None else None
    except StateFileError as exc:
        # A file in place of its directory: one warning naming it stands for every file.
        warn(blocker(path) or f"warning: ignoring {path}: {exc}")
        return None
    except (ValueError, RecursionError):
        return None
    if not (isinstance(entry, dict) and entry.get("version") == CACHE_VERSION
            and entry.get("key") == key and entry.get("gate") == gate):
        return None
    with contextlib.suppress(OSError):
        os.utime(path, follow_symlinks=False)
    return entry


def _write_entries(directory: Path, entries: list[tuple[str, dict[str, Any]]]) -> None:
    """Write each ``(name, entry)`` into ``directory``, not synced to disk: an entry a crash
    cut short is not right in every way, so it is not believed (``_read_entry``)."""
    if not entries:
        return
    dir_fd = open_state_dir(directory, create=True)
    try:
        for name, entry in entries:
            entry = {"version": CACHE_VERSION, **entry, "stored_at": round(time.time(), 3)}
            replace_in(dir_fd, name, json.dumps(entry, ensure_ascii=True) + "\n", sync=False)
    finally:
        os.close(dir_fd)


def reused_files(slot: CacheSlot, gate: str) -> frozenset[str]:
    """The files of ``slot.file_keys`` that already passed: an entry for their key."""
    return frozenset(path for path, key in slot.file_keys
                     if _read_entry(_file_entry_path(slot, key), key, gate))


def files_pass(plan: GatePlan, count: int) -> GateResult:
    """The ``cached`` pass of a gate whose every file passed before (``reused_files``)."""
    tail = f"{count} file(s), each passed before with this configuration"
    return _cached_pass(plan, {"output_tail": tail, "output_bytes": 0})


def lookup(slot: CacheSlot, plan: GatePlan) -> GateResult | None:
    """The stored pass for ``slot.key`` as a ``cached`` result, or None."""
    entry = _read_entry(slot.path, slot.key, plan.gate.name)
    return None if entry is None else _cached_pass(plan, entry)


def _cached_pass(plan: GatePlan, entry: dict[str, Any]) -> GateResult:
    tail = entry.get("output_tail")
    tail = tail if isinstance(tail, str) else ""
    size = entry.get("output_bytes")
    return GateResult(name=plan.gate.name, outcome=codes.PASSED, command=plan.display_command,
                      cwd=plan.gate.cwd, exit_code=0, output_tail=tail,
                      output_truncated=entry.get("output_truncated") is True,
                      output_bytes=size if type(size) is int and size >= 0 else len(tail.encode()),
                      cached=True)


def store(passes: Sequence[tuple[CacheSlot, GateResult]]) -> None:
    """Remember the clean passes (no retry) of a run whose inputs did not change while it ran:
    one look at the files after the last gate serves every gate, stricter than one after each
    (a gate's inputs held over a longer time). Never raises for a cache it cannot write."""
    seen: dict[Path, RepoFiles] = {}
    written: set[Path] = set()
    for slot, result in passes:
        files = seen.setdefault(slot.root, RepoFiles(slot.root))
        with contextlib.suppress(OSError):
            if _store(slot, result, files):
                written.add(slot.directory)
    for directory in written:  # the ones used last stay
        prune_own_files(directory, _ENTRY_NAME.fullmatch, KEEP_ENTRIES)
        prune_own_files(directory, _FILE_ENTRY_NAME.fullmatch, KEEP_FILE_ENTRIES)


def _store(slot: CacheSlot, result: GateResult, files: RepoFiles) -> bool:
    """Store one pass (``store``); whether anything was written. ``OSError`` where the inputs
    cannot be listed or the cache cannot be written."""
    if result.outcome != codes.PASSED or result.flaky or result.cached:
        return False
    unchanged = _key(slot.definition, files.digest(slot.patterns)) == slot.key
    passed = _unchanged_files(slot, files)
    # Read after the content: a file swapped while the gate read it, then put back, has
    # the same content and a new ctime or inode.
    if files.stamps(_stamped(slot)) != slot.stamps:
        return False
    entries: list[tuple[str, dict[str, Any]]] = [
        (_file_entry_path(slot, key).name, {"key": key, "gate": result.name, "path": path})
        for path, key in passed]
    if unchanged:  # else the inputs changed while the gate ran: the pass proves neither
        tail, truncated = result.output_tail, result.output_truncated  # masked as captured
        encoded = tail.encode("utf-8", "replace")
        if len(encoded) > TAIL_BYTES:
            tail, truncated = encoded[-TAIL_BYTES:].decode("utf-8", "ignore"), True
        entries.append((slot.path.name, {
            "key": slot.key, "gate": result.name, "duration_s": result.duration_s,
            "output_tail": tail, "output_truncated": truncated,
            "output_bytes": result.output_bytes,
        }))
    _write_entries(slot.directory, entries)
    return bool(entries)


def _stamped(slot: CacheSlot) -> tuple[str, ...] | None:
    """The files whose stamps must hold while the gate runs: all for a per-file slot (each
    file's context is nearly every file), else its inputs."""
    return None if slot.file_keys else slot.patterns


def _unchanged_files(slot: CacheSlot, files: RepoFiles) -> list[tuple[str, str]]:
    """The ``(path, key)`` of the files the pass checked whose key is the same after it."""
    if slot.file_definition is None or slot.file_gate is None or not slot.file_keys:
        return []
    try:
        context = context_digest(slot.file_gate, slot.root, files)
    except OSError:
        return []
    unchanged = []
    for path, key in slot.file_keys:
        with contextlib.suppress(OSError):
            if _key(slot.file_definition, context, path, files.identity(path)) == key:
                unchanged.append((path, key))
    return unchanged
