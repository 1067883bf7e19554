"""Shards: one deterministic, duration-balanced part of the selected gates per CI machine
(``--shard K/N``, or ``--shard auto`` in GitLab's ``parallel:``); gates joined by ``needs``
share a shard, and every tie is broken by name so each machine computes the same split.

PYTEST_DONT_REWRITE
"""

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from pytest_verifygate.contract import Contract, Gate
from pytest_verifygate.errors import UsageError
from pytest_verifygate.selection import Selection

BY_SHARD = "shard"  # ``Selection.left_out_by`` of a gate another shard runs
# GitLab CI's ``parallel: N``: each job's 1-based index and the job count.
INDEX_VARIABLE = "CI_NODE_INDEX"
TOTAL_VARIABLE = "CI_NODE_TOTAL"
AUTO = "auto"  # --shard auto: the shard those variables name


class Shard(NamedTuple):
    """Shard ``number`` (1-based) of ``total``."""

    number: int
    total: int

    def __str__(self) -> str:
        return f"{self.number}/{self.total}"


def parse_shard(text: str, flag: str = "--shard") -> Shard:
    """``K/N`` with 1 <= K <= N, else a ``UsageError`` naming ``flag``."""
    index_text, slash, total_text = text.strip().partition("/")
    try:
        index, total = int(index_text), int(total_text)
    except ValueError:
        index = total = 0
    if not slash or total < 1:
        raise UsageError(f"{flag} {text!r}: expected K/N, shard K of N (e.g. 2/3)")
    if not 1 <= index <= total:
        raise UsageError(f"{flag} {text!r}: K must be between 1 and N ({total})")
    return Shard(index, total)


def requested_shard(text: str | None, environ: Mapping[str, str],
                    flag: str = "--shard") -> Shard | None:
    """The shard a front end is asked for: ``K/N``, or with ``auto`` GitLab's ``parallel:``
    job's (none outside one, or under pre-commit: no merge of the parts follows a hook). Never
    from the environment alone: a git hook run in such a job checks every gate."""
    if not text:
        return None
    if text.strip() != AUTO:
        return parse_shard(text, flag)
    index, total = environ.get(INDEX_VARIABLE, "").strip(), environ.get(TOTAL_VARIABLE, "").strip()
    if environ.get("PRE_COMMIT") or not (index or total):
        return None
    return parse_shard(f"{index}/{total}", f"{flag} {AUTO}: {INDEX_VARIABLE}/{TOTAL_VARIABLE}")


def gate_groups(gates: Sequence[Gate]) -> list[list[Gate]]:
    """``gates`` in groups joined by ``needs`` among them, which must run in one shard; in
    contract order, groups by their first gate."""
    position = {gate.name: index for index, gate in enumerate(gates)}
    parent = list(range(len(gates)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for index, gate in enumerate(gates):
        for need in gate.needs:
            other = position.get(need)
            if other is not None:
                first, second = sorted((root(index), root(other)))
                parent[second] = first
    groups: dict[int, list[Gate]] = {}
    for index, gate in enumerate(gates):
        groups.setdefault(root(index), []).append(gate)
    return list(groups.values())


def split(groups: Sequence[Sequence[str]], seconds: Mapping[str, float],
          total: int) -> list[int]:
    """The shard (1-based) of each group: the heaviest group first (ties: smallest name) to
    the least loaded shard (ties: lowest index), within 4/3 of the best split (Graham)."""
    weights = [sum(seconds.get(name, 0.0) for name in group) for group in groups]
    order = sorted(range(len(groups)), key=lambda g: (-weights[g], min(groups[g], default="")))
    loads = [0.0] * total
    placed = [0] * len(groups)
    for group in order:
        lightest = min(range(total), key=lambda shard: (loads[shard], shard))
        loads[lightest] += weights[group]
        placed[group] = lightest + 1
    return placed


def shard_selections(contract: Contract, selections: Sequence[Selection],
                     shard: Shard) -> tuple[list[Selection], str | None]:
    """``selections`` cut to ``shard`` by the durations recorded for ``contract``, and a
    warning when their file had to be ignored."""
    from pytest_verifygate.state.durations import contract_key, read_durations

    recorded, warning = read_durations(contract.repo_root, contract_key(contract))
    return assign(selections, shard, recorded), warning


def assign(selections: Sequence[Selection], shard: Shard,
           recorded: Mapping[str, float]) -> list[Selection]:
    """``selections`` without the gates of other shards, by the ``recorded`` durations."""
    from pytest_verifygate.state.durations import estimates

    selected = [selection.gate for selection in selections if selection.selected]
    seconds = estimates((gate.name for gate in selected), recorded)
    for gate in selected:
        if gate.kind == "manual":  # never runs: awaits sign-off wherever it is placed
            seconds[gate.name] = 0.0
    groups = gate_groups(selected)
    places = split([[gate.name for gate in group] for group in groups], seconds, shard.total)
    shard_of = {gate.name: place for group, place in zip(groups, places, strict=True)
                for gate in group}
    return [
        selection if not selection.selected or shard_of[selection.gate.name] == shard.number
        else selection._replace(selected=False, matched_files=None, left_out_by=BY_SHARD,
                                reason=f"in shard {shard_of[selection.gate.name]} of "
                                       f"{shard.total}")
        for selection in selections
    ]
