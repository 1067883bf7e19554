"""Which gates apply to a run, and why (a reason for every gate): by kind, role, phase and the
changed files their patterns match; and the warnings about patterns that match no tracked file.

PYTEST_DONT_REWRITE
"""

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from pytest_verifygate.contract import Contract, Gate, display_path
from pytest_verifygate.errors import UsageError
from pytest_verifygate.git.changes import ChangeSet, all_files
from pytest_verifygate.gitcmd import git_answer
from pytest_verifygate.patterns import match_files, matches_any, matching_any, unmatched

# What left a gate out (``Selection.left_out_by``): pytest collects a gate left out by the
# change set as a skipped item (an answer, not an absence), never one left out by the others.
BY_ROLE = "role"
BY_PHASE = "phase"
BY_CHANGES = "changes"
BY_NAME = "name"  # other gates were named on the command line (``verifygate run NAME``)

ROLE_ENV = "VERIFYGATE_ROLE"


class Selection(NamedTuple):
    """The decision for one gate; ``matched_files``: the existing changed files it takes (what
    ``{files}`` expands to), None without change filtering."""

    gate: Gate
    selected: bool
    reason: str
    matched_files: tuple[str, ...] | None = None
    left_out_by: str | None = None


def asked_roles(given: Iterable[str] | None, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The roles a run asks for: those given (``--role``), else the comma-separated
    ``VERIFYGATE_ROLE``; duplicates and blanks dropped."""
    roles = environ.get(ROLE_ENV, "").split(",") if given is None else given
    return tuple(dict.fromkeys(role.strip() for role in roles if role.strip()))


def select_gates(contract: Contract, changes: ChangeSet, *,
                 role: str | Sequence[str] | None = None,
                 phase: int | None = None) -> list[Selection]:
    """Decide, for every gate in contract order, whether it runs (docs: Gate keys); a gate
    with ``roles`` only when one of the ``role`` asked for is among them."""
    roles = (role,) if isinstance(role, str) else tuple(role or ())
    candidates: Sequence[str] = changes.files
    if len(candidates) >= PREFILTER_MIN_FILES:
        candidates = prefiltered(contract.gates, candidates)
    return [
        _decide(gate, changes, _typed(gate, contract, candidates, changes), roles=roles,
                phase=phase)
        for gate in contract.gates
    ]


def _typed(gate: Gate, contract: Contract, candidates: Sequence[str],
           changes: ChangeSet) -> Sequence[str]:
    """The changed files of the kinds and names the gate takes (``filetypes.py``)."""
    if not changes.filtering or not gate.filters_files:
        return candidates
    from pytest_verifygate.filetypes import files_of_gate  # only for gates that filter

    # The prefilter kept only what some gate's patterns can match: none, for a gate without.
    source = candidates if gate.when_changed is not None else changes.files
    return files_of_gate(gate, contract.root, source, changes.deleted)


def only_named(selections: Sequence[Selection], names: Sequence[str],
               shown: str) -> list[Selection]:
    """``selections`` with every gate not in ``names`` left out (``verifygate run NAME...``);
    a name that is no gate is a ``UsageError``."""
    known = [selection.gate.name for selection in selections]
    for name in names:
        if name not in known:
            from pytest_verifygate.contract.fields import did_you_mean

            hint = did_you_mean(name, known) or f"gates: {', '.join(known)}"
            raise UsageError(f"{shown} has no gate named {name!r} ({hint})")
    return [selection if selection.gate.name in names
            else selection._replace(selected=False, matched_files=None, left_out_by=BY_NAME,
                                    reason="not named on the command line")
            for selection in selections]


def _described(gate: Gate) -> str:
    from pytest_verifygate.filetypes import describe_filter

    return describe_filter(gate)


def _role_mismatch(gate: Gate, roles: tuple[str, ...]) -> str | None:
    if gate.roles is None or any(role in gate.roles for role in roles):
        return None
    scope = f"roles [{', '.join(gate.roles)}]"
    if not roles:
        return f"only for {scope}; no role asked for (--role, {ROLE_ENV})"
    if len(roles) == 1:
        return f"role {roles[0]!r} is not in {scope}"
    asked = ", ".join(repr(role) for role in roles)
    return f"none of the roles asked for ({asked}) is in {scope}"


def _decide(gate: Gate, changes: ChangeSet, candidates: Sequence[str], *,
            roles: tuple[str, ...], phase: int | None) -> Selection:
    mismatch = _role_mismatch(gate, roles)
    if mismatch is not None:
        return Selection(gate, False, mismatch, left_out_by=BY_ROLE)
    if phase is not None and gate.phases is not None and phase not in gate.phases:
        phases = ", ".join(str(p) for p in gate.phases)
        return Selection(gate, False, f"phase {phase} is not in phases [{phases}]",
                         left_out_by=BY_PHASE)
    if not changes.filtering:
        return Selection(gate, True, "no change filtering (all gates apply)")
    for pattern in gate.when_changed_all:
        if not matches_any([pattern], candidates):
            return Selection(gate, False, f"when_changed_all pattern {pattern!r} matches no "
                             "changed file", left_out_by=BY_CHANGES)
    if gate.when_changed is None and not gate.filters_files:
        reason = "always (no when_changed)"
        if gate.when_changed_all:
            reason = "every when_changed_all pattern matches a changed file"
        return Selection(gate, True, reason, changes.existing_files)
    matched = (list(candidates) if gate.when_changed is None
               else match_files(gate.when_changed, candidates))
    if not matched:
        if not changes.files:
            return Selection(gate, False, "no files changed", left_out_by=BY_CHANGES)
        wanted = [f"when_changed [{', '.join(gate.when_changed)}]"] if gate.when_changed else []
        if gate.filters_files:
            wanted.append(_described(gate))
        return Selection(gate, False, f"no changed file matches {'; '.join(wanted)}",
                         left_out_by=BY_CHANGES)
    first = matched[0]
    more = f" (and {len(matched) - 1} more)" if len(matched) > 1 else ""
    deleted_note = " (deleted)" if first in changes.deleted else ""
    watched = "when_changed" if gate.when_changed else _described(gate)
    return Selection(gate, True, f"changed {first!r}{deleted_note}{more} matches {watched}",
                     tuple(f for f in matched if f not in changes.deleted))


PREFILTER_MIN_FILES = 2000


def prefiltered(gates: Sequence[Gate], paths: Sequence[str]) -> Sequence[str]:
    """The ``paths`` that could match some gate's patterns: one match against the union of
    every include pattern, for a large change set most of whose paths match none."""
    includes: list[str] = []
    for gate in gates:
        includes += [pattern for pattern in (*(gate.when_changed or ()), *gate.when_changed_all)
                     if not pattern.startswith("!")]
    return matching_any(list(dict.fromkeys(includes)), paths)


def unmatched_pattern_warnings(contract: Contract, selections: Sequence[Selection]) -> list[str]:
    """``pattern_warnings`` for the gates no changed file selected (a typo must not leave a
    gate out silently), on every run. That every pattern matched is remembered for this
    contract and commit: the next runs list no tracked files (a commit's hook waits for them)."""
    import hashlib

    from pytest_verifygate.state.files import StateFileError, read_state_file, write_state
    from pytest_verifygate.state.storage import git_state_dir

    left_out = [selection.gate for selection in selections
                if selection.left_out_by == BY_CHANGES]
    if not left_out:
        return []
    state = git_state_dir(contract.repo_root)
    head = state and git_answer(contract.repo_root, "rev-parse", "--verify", "--quiet", "HEAD")
    memo = state / "patterns-matched" if state and head else None
    key = hashlib.sha256(repr((str(contract.path), contract.text, head)).encode()).hexdigest()
    with contextlib.suppress(OSError, StateFileError):
        if memo and read_state_file(memo, 64) == key.encode():
            return []
    tracked = all_files(contract.root)
    if pattern_warnings(contract, tracked=tracked):
        return pattern_warnings(contract, left_out, tracked)
    with contextlib.suppress(OSError):
        if memo:
            write_state(memo, key)
    return []


def pattern_warnings(contract: Contract, gates: Iterable[Gate] | None = None,
                     tracked: Sequence[str] | None = None) -> list[str]:
    """One warning per pattern (not negated) of ``gates`` (default: all) that matches none of
    the ``tracked`` files (default: git's, under the contract's root)."""
    gates = contract.gates if gates is None else gates
    if tracked is None:
        tracked = all_files(contract.root)
    shown = display_path(contract.path)
    places = [(gate.name, key, pattern) for gate in gates
              for key, patterns in (("when_changed", gate.when_changed or ()),
                                    ("when_changed_all", gate.when_changed_all))
              for pattern in patterns if not pattern.startswith("!")]
    missing = set(unmatched(list(dict.fromkeys(pattern for _, _, pattern in places)), tracked))
    return [f"{shown}: gate {name!r}: key {key!r}: {pattern!r} matches no tracked file, so no "
            "change selects the gate through it (a typo? patterns are relative to the "
            "contract's directory)"
            for name, key, pattern in places if pattern in missing]


def files_for_gate(gate: Gate, candidates: Sequence[str], root: Path,
                   tags: dict[str, frozenset[str]] | None = None) -> tuple[str, ...]:
    """``candidates`` (paths under ``root``) filtered by the gate's ``when_changed`` and by the
    kinds and names it takes (``tags``: see ``files_of_gate``)."""
    files = tuple(candidates if gate.when_changed is None
                  else match_files(gate.when_changed, candidates))
    if not gate.filters_files:
        return files
    from pytest_verifygate.filetypes import files_of_gate

    return files_of_gate(gate, root, files, tags=tags)
