"""Which gates apply to a run, and why: by kind, role, phase and changed-file patterns.

Owns the compiled ``when_changed`` matchers (gitignore-style, via pathspec's ``GitIgnoreSpec``,
built once per gate) and a human-readable reason for every gate, selected or not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pathspec import GitIgnoreSpec

from pytest_verifygate.changes import ChangeSet
from pytest_verifygate.contract import Contract, Gate


@dataclass(frozen=True)
class Selection:
    """The decision for one gate. ``matched_files`` are the existing changed files that match
    its ``when_changed`` (what ``{files}`` expands to); None when there is no change filtering.
    """

    gate: Gate
    selected: bool
    reason: str
    matched_files: tuple[str, ...] | None = None


def select_gates(
    contract: Contract,
    changes: ChangeSet,
    *,
    role: str | None = None,
    phase: int | None = None,
    include_manual: bool = True,
) -> list[Selection]:
    """Decide, for every gate in contract order, whether it runs (SPEC 4)."""
    return [
        _decide(gate, changes, role=role, phase=phase, include_manual=include_manual)
        for gate in contract.gates
    ]


def _decide(
    gate: Gate, changes: ChangeSet, *, role: str | None, phase: int | None, include_manual: bool
) -> Selection:
    if gate.kind == "manual" and not include_manual:
        return Selection(gate, False, "manual gate, and manual gates are excluded")
    if role is not None and gate.roles is not None and role not in gate.roles:
        return Selection(gate, False, f"role {role!r} is not in roles [{', '.join(gate.roles)}]")
    if phase is not None and gate.phases is not None and phase not in gate.phases:
        phases = ", ".join(str(p) for p in gate.phases)
        return Selection(gate, False, f"phase {phase} is not in phases [{phases}]")
    if not changes.filtering:
        return Selection(gate, True, "no change filtering (all gates apply)")
    for pattern in gate.when_changed_all:
        if not any(True for _ in matching(GitIgnoreSpec.from_lines([pattern]), changes.files)):
            return Selection(
                gate, False, f"when_changed_all pattern {pattern!r} matches no changed file"
            )
    existing = set(changes.existing_files)
    if gate.when_changed is None:
        reason = "always (no when_changed)"
        if gate.when_changed_all:
            reason = "every when_changed_all pattern matches a changed file"
        return Selection(gate, True, reason, tuple(f for f in changes.files if f in existing))
    spec = GitIgnoreSpec.from_lines(gate.when_changed)
    matched = list(matching(spec, changes.files))
    if not matched:
        if not changes.files:
            return Selection(gate, False, "no files changed")
        return Selection(gate, False, f"no changed file matches when_changed "
                                      f"[{', '.join(gate.when_changed)}]")
    first = matched[0]
    more = f" (and {len(matched) - 1} more)" if len(matched) > 1 else ""
    deleted_note = " (deleted)" if first not in existing else ""
    return Selection(
        gate,
        True,
        f"changed {first!r}{deleted_note}{more} matches when_changed",
        tuple(f for f in matched if f in existing),
    )


def matching(spec: GitIgnoreSpec, files: Sequence[str]) -> Iterable[str]:
    """The files that ``spec`` matches, in order."""
    return spec.match_files(files)


def files_for_gate(gate: Gate, candidates: Sequence[str]) -> tuple[str, ...]:
    """``candidates`` filtered by the gate's ``when_changed`` (all of them when it has none)."""
    if gate.when_changed is None:
        return tuple(candidates)
    return tuple(matching(GitIgnoreSpec.from_lines(gate.when_changed), candidates))
