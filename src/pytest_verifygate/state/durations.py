"""How long each gate took in earlier runs (``<git dir>/verifygate/durations.json``:
``{"version": 1, "durations": [[contract, gate, seconds], ...]}``), and the orders made from it:
shards' weights and the longest gates first. A file not of this shape is ignored, with a warning.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import graphlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_verifygate import codes
from pytest_verifygate.notices import warn
from pytest_verifygate.state.files import StateFileError, read_state_file, write_state
from pytest_verifygate.state.storage import blocker, git_state_dir

if TYPE_CHECKING:
    from pytest_verifygate.contract import Contract

FILE_NAME = "durations.json"
VERSION = 1
MAX_ENTRIES = 2000
MAX_FILE_BYTES = 1 << 20
DEFAULT_SECONDS = 1.0  # with nothing measured every gate weighs the same
# A measurement this close to the recorded one is not written: unchanged gates leave the file be.
TOLERANCE_SECONDS = 0.05
TOLERANCE_RATIO = 0.1
MAX_SECONDS = 3.2e7

# Failures that measured the gate's work; the others (not started, interrupted, a missing
# tool or script) end at once and would make the gate look short.
_MEASURED_FAILURES = frozenset({codes.COMMAND_FAILED, codes.TIMEOUT, codes.SEQUENCE_ISSUE})

Entry = tuple[str, str, float]


def durations_path(repo_root: Path) -> Path | None:
    state = git_state_dir(repo_root)
    return None if state is None else state / FILE_NAME


def contract_key(contract: Contract) -> str:
    """How the file names a contract: its path relative to the repository."""
    from pytest_verifygate.contract import posix_relative

    return posix_relative(contract.path, contract.repo_root)


def read_durations(repo_root: Path, contract: str) -> tuple[dict[str, float], str | None]:
    """Gate name -> seconds recorded for ``contract`` (``contract_key``), and a warning when
    the file had to be ignored."""
    entries, warning = _read(durations_path(repo_root))
    return _of_contract(entries, contract), warning


def _of_contract(entries: Iterable[Entry], contract: str) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for owner, name, value in entries:
        if owner == contract:
            seconds.setdefault(name, value)
    return seconds


def record_durations(repo_root: Path, contract: str, measured: Mapping[str, float],
                     gate_names: Iterable[str] | None) -> bool:
    """Record ``measured`` for ``contract`` (its gates: ``gate_names``); whether it was written."""
    path = durations_path(repo_root) if measured else None
    if path is None:
        return False
    old = _read_or_warn(path)
    recorded = _of_contract(old, contract)
    fresh: list[Entry] = []
    for name, value in measured.items():
        value = round(min(max(value, 0.0), MAX_SECONDS), 3)
        previous = recorded.get(name)
        if previous is not None and abs(value - previous) <= max(
                TOLERANCE_SECONDS, TOLERANCE_RATIO * previous):
            value = previous
        fresh.append((contract, name, value))
    # This contract's other gates once each, none it no longer has; other contracts as they are.
    known = None if gate_names is None else frozenset(gate_names)
    seen = set(measured)
    kept: list[Entry] = []
    for owner, name, value in old:
        if owner == contract:
            if name in seen or (known is not None and name not in known):
                continue
            seen.add(name)
        kept.append((owner, name, value))
    entries = [*fresh, *kept]
    if sorted(entries) == sorted(old):
        return False
    try:
        write_state(path, render(entries[:MAX_ENTRIES]))
    except OSError:  # left alone: durations only make later runs better balanced
        return False
    return True


def measured_seconds(gates: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The durations of gates that did their work (not cached, not stopped before it), from
    report entries or ``GateResult._asdict()``."""
    measured: dict[str, float] = {}
    for gate in gates:
        outcome, code = gate.get("outcome"), gate.get("code")
        ran = outcome == codes.PASSED or (outcome == codes.FAILED
                                          and code in _MEASURED_FAILURES)
        duration = gate.get("duration_s")
        if (ran and not gate.get("cached") and (gate.get("attempts") or 0) > 0
                and isinstance(duration, (int, float)) and math.isfinite(duration)):
            measured[str(gate.get("name"))] = float(duration)
    return measured


def estimates(names: Iterable[str], recorded: Mapping[str, float]) -> dict[str, float]:
    """Seconds for each of ``names``: the recorded value, else the median of those recorded."""
    import statistics

    fallback = statistics.median(recorded.values()) if recorded else DEFAULT_SECONDS
    return {name: recorded.get(name, fallback) for name in names}


def longest_first(names: Sequence[str], recorded: Mapping[str, float],
                  needs: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """``names`` (in contract order) longest first, a gate counting as long as the longest
    chain of gates that ``needs`` it; equal estimates keep their order."""
    seconds = estimates(names, recorded)
    waiting_for: dict[str, list[str]] = {name: [] for name in names}
    for name in names:
        for need in (needs or {}).get(name, ()):
            if need in waiting_for and need != name:
                waiting_for[need].append(name)
    # In a circle (which the loader refuses) a gate counts its seconds alone.
    chains = dict(seconds)
    with contextlib.suppress(graphlib.CycleError):
        for name in graphlib.TopologicalSorter(waiting_for).static_order():
            chains[name] = seconds[name] + max(
                (chains[other] for other in waiting_for[name]), default=0.0)
    return sorted(names, key=lambda name: -chains[name])


def planned_order(contract: Contract, names: Sequence[str]) -> list[str]:
    entries = _read_or_warn(durations_path(contract.repo_root))
    recorded = _of_contract(entries, contract_key(contract))
    return longest_first(names, recorded, {gate.name: gate.needs for gate in contract.gates})


def _read_or_warn(path: Path | None) -> list[Entry]:
    entries, warning = _read(path)
    if warning is not None:
        warn(warning)
    return entries


def _read(path: Path | None) -> tuple[list[Entry], str | None]:
    """The file's entries, or none and a warning (none when there is no file)."""
    if path is None:
        return [], None
    # Not sealed: CI shares the file between machines, and it never passes a gate.
    try:
        raw = read_state_file(path, MAX_FILE_BYTES)
    except StateFileError as exc:  # a FIFO or a directory there is not rewritten
        return [], blocker(path) or _ignored(path, f"cannot be read ({exc})", "")
    if raw is None:
        return [], None
    try:
        return _parse(raw), None
    except ValueError as exc:
        return [], _ignored(path, str(exc))


def _ignored(path: Path, problem: str, then: str = " and rewritten by the next run") -> str:
    return (f"warning: {path}: this file of gate durations {problem}; ignored (shards split "
            f"by count){then}")


def _parse(raw: bytes) -> list[Entry]:
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8 text") from None
    except ValueError as exc:
        raise ValueError(f"is not valid JSON ({exc})") from None
    except RecursionError:
        raise ValueError("is nested too deeply") from None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ValueError(f'is not of version {VERSION} (expected {{"version": {VERSION}, '
                         '"durations": [...]})')
    items = data.get("durations")
    if not isinstance(items, list):
        raise ValueError('has no "durations" list')
    entries: list[Entry] = []
    for item in items:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                and isinstance(item[1], str) and isinstance(item[2], (int, float))
                and not isinstance(item[2], bool) and math.isfinite(item[2])
                and 0 <= item[2] <= MAX_SECONDS):
            raise ValueError("holds an entry that is not [contract, gate, seconds]: "
                             f"{_shown(item)}")
        entries.append((item[0], item[1], float(item[2])))
    return entries


def _shown(item: object) -> str:
    """A bad entry, short (its repr could be nested as deep as the file)."""
    try:
        return f"{item!r:.80}"
    except RecursionError:
        return type(item).__name__


def render(entries: Sequence[Entry]) -> str:
    return json.dumps({"version": VERSION, "durations": [list(entry) for entry in entries]},
                      indent=1) + "\n"
