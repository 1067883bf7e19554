"""A contract bound by its past: the gates it had at a git revision (an agent session's start)
still run as they were then, so removing, weakening or moving a gate lets nothing through.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pytest_verifygate.contract.discover import (
    CONTRACT_NAMES,
    contract_format,
    display_path,
    find_contract,
    find_repo_root,
    posix_relative,
    project_root_of,
    pyproject_has_table,
)
from pytest_verifygate.contract.fields import FieldReader
from pytest_verifygate.contract.load import load_contract, load_text
from pytest_verifygate.contract.model import Contract, Gate, Settings
from pytest_verifygate.errors import ChangeSetError, ContractError
from pytest_verifygate.gitcmd import git_output

CHANGE_NOTE_START = "the contract changed since "


class NoContractError(ContractError):
    """No contract is found now, and none was there at the revision either."""


def load_contract_since(revision: str, path: str | os.PathLike[str] | None = None,
                        start: Path | None = None, *, flag: str = "--contract") -> Contract:
    """``load_contract(path, start)`` plus the gates the contract had at ``revision``, as they
    were then; a revision's contract that does not load binds nothing (a warning says so)."""
    here = (start or Path.cwd()).resolve()
    try:
        current = load_contract(path, start=start, flag=flag)
    except ContractError as exc:
        raise _not_loaded(exc, revision, path, here) from None
    if find_repo_root(current.root) is None:
        return current  # a contract outside any repository: no revision binds it
    # An explicit --contract is compared with the same file then; else the one found then.
    relative = posix_relative(current.path, current.repo_root)
    earlier: str | None = relative
    text = _show(revision, current.repo_root, relative)
    if path is None and not (text is not None and _first_candidate(here, current.repo_root,
                                                                  relative, text)):
        earlier = _find_at(revision, current.repo_root, here)
        if earlier != relative:
            text = None if earlier is None else _show(revision, current.repo_root, earlier)
    if earlier is None or text is None:
        return current  # no contract then: the current one is all there is
    then_path = current.repo_root / earlier
    if then_path == current.path and text == current.text:
        return current
    if project_root_of(then_path) != current.root:
        raise ContractError(
            display_path(current.path),
            f"replaces {earlier}, the contract at {revision[:12]}, from another directory: "
            "their gates' paths cannot be compared",
            hint=f"restore {earlier} (git checkout {revision[:12]} -- {earlier})",
        )
    reader = FieldReader(f"{earlier} at {revision[:12]}", current.root, current.repo_root)
    try:
        settings, gates, _ = load_text(text, contract_format(then_path), reader)
    except ContractError as exc:
        warning = f"{exc}; only the current contract's gates run"
        return current._replace(warnings=(*current.warnings, warning))
    return _bind(current, settings, gates, revision=revision, earlier=earlier)


def _not_loaded(error: ContractError, revision: str, path: str | os.PathLike[str] | None,
                here: Path) -> ContractError:
    """The error itself, one saying the contract was removed since ``revision``, or
    ``NoContractError`` when there is none now and was none then."""
    if path is None:
        if find_contract(here) is not None:
            return error
        repo_root = find_repo_root(here)
        earlier = None if repo_root is None else _find_at(revision, repo_root, here)
    else:
        named = Path(path) if os.path.isabs(path) else here / path
        repo_root = find_repo_root(named.parent)
        if named.exists() or repo_root is None:
            return error
        earlier = posix_relative(named.parent.resolve() / named.name, repo_root)
        if _show(revision, repo_root, earlier) is None:
            earlier = None
    if repo_root is None or earlier is None:
        return NoContractError(error.path, error.message, hint=error.hint)
    return ContractError(
        display_path(repo_root / earlier), f"was removed since {revision[:12]}",
        hint=f"restore it (git checkout {revision[:12]} -- {earlier}); its gates must pass",
    )


def _bind(current: Contract, settings: Settings, gates: Sequence[Gate], *, revision: str,
          earlier: str) -> Contract:
    """``current`` with the gates and plugins it had at ``revision``, and a first warning
    saying what changed; ``fail_when_unverified`` if either set it."""
    now = {gate.name: gate for gate in current.gates}
    then = {gate.name for gate in gates}
    removed = [gate.name for gate in gates if gate.name not in now]
    changed = [gate.name for gate in gates if gate.name in now and now[gate.name] != gate]
    merged = (*gates, *(gate for gate in current.gates if gate.name not in then))
    parts = [f"{_names(changed)} changed" if changed else "",
             f"{_names(removed)} removed" if removed else ""]
    what = " and ".join(part for part in parts if part)
    moved = f" (it was {earlier})" if earlier != posix_relative(current.path,
                                                                 current.repo_root) else ""
    detail = (f"gate {what}: they run as they were then" if what
              else "no gate was removed or changed")
    if current.settings.plugins != settings.plugins:
        # A plugin can change a verdict: only the ones the binding commit named are loaded.
        detail += "; settings.plugins changed: the plugins of then are loaded"
    note = f"{CHANGE_NOTE_START}{revision[:12]}{moved}: {detail}"
    return current._replace(
        gates=merged,
        settings=current.settings._replace(
            fail_when_unverified=current.settings.fail_when_unverified
            or settings.fail_when_unverified, plugins=settings.plugins),
        warnings=(note, *current.warnings),
    )


def change_note(warnings: Sequence[str]) -> str | None:
    """The warning ``load_contract_since`` adds when the contract changed, if any."""
    return next((w for w in warnings if w.startswith(CHANGE_NOTE_START)), None)


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(f"`{name}`" for name in names[:10])
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")


def _show(revision: str, repo_root: Path, relative: str) -> str | None:
    """The text of ``relative`` at ``revision``; None when it was not there (or not text).
    A git that fails raises: "no contract then" would let the gates it had go unchecked."""
    try:
        raw = git_output(repo_root, "show", f"{revision}:{relative}")
    except ChangeSetError:
        # Absent then, or git failed: the listing (which raises when git fails) tells which.
        if _present(revision, repo_root, [relative]):
            raise
        return None
    try:
        return None if b"\0" in raw else raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _present(revision: str, repo_root: Path, candidates: Sequence[str]) -> set[str]:
    """Which of ``candidates`` (paths relative to the repository) ``revision`` has."""
    listed = git_output(repo_root, "ls-tree", "-z", "--name-only", "--full-tree", revision,
                        "--", *candidates)
    return {os.fsdecode(item) for item in listed.split(b"\0") if item}


def _candidates(start: Path, repo_root: Path) -> list[str]:
    """Where ``find_contract(start)`` looks, in its order, relative to the repository."""
    try:
        below = start.relative_to(repo_root.resolve())
    except ValueError:
        return []
    return [(d / name).as_posix() for d in (below, *below.parents) for name in CONTRACT_NAMES]


def _first_candidate(start: Path, repo_root: Path, relative: str, text: str) -> bool:
    """Whether ``relative``, there at the revision with ``text``, is surely what discovery found
    then: the first place it looks (saves listing the revision's tree on most stops)."""
    candidates = _candidates(start, repo_root)
    if not candidates or candidates[0] != relative:
        return False
    return not relative.endswith("pyproject.toml") or pyproject_has_table(text)


def _find_at(revision: str, repo_root: Path, start: Path) -> str | None:
    """The contract ``find_contract(start)`` would have found at ``revision`` (its path in the
    repository), or None."""
    candidates = _candidates(start, repo_root)
    present = _present(revision, repo_root, candidates) if candidates else set()
    for candidate in candidates:
        if candidate not in present:
            continue
        if candidate.rsplit("/", 1)[-1] != "pyproject.toml":
            return candidate
        text = _show(revision, repo_root, candidate)
        if text is not None and pyproject_has_table(text):
            return candidate
    return None
