"""The plan stage: each selected gate turned into what the runner spawns (``{files}`` expanded
relative to its ``cwd``, a result-cache slot attached), or why it will not be.

PYTEST_DONT_REWRITE
"""

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_verifygate.commands import (
    ParsedCommand,
    UnsupportedCommand,
    expand,
    parse_command,
    shell_words,
)
from pytest_verifygate.contract import Contract, Gate
from pytest_verifygate.git.changes import all_files
from pytest_verifygate.runner.records import GatePlan
from pytest_verifygate.selection import Selection, files_for_gate

if TYPE_CHECKING:
    from pytest_verifygate.git.inputs import RepoFiles

# Arguments shown of a gate's command in reports; the rest are counted, not listed.
MAX_DISPLAY_ARGS = 50


def plan_gates(contract: Contract, selections: Sequence[Selection], *,
               read_cache: bool = True) -> list[GatePlan]:
    """The selected gates' plans; with ``read_cache``, a pass stored for the same inputs
    resolves a plan without spawning anything."""
    plans: list[GatePlan] = []
    tracked: tuple[str, ...] | None = None
    repo_files: RepoFiles | None = None
    tags: dict[str, frozenset[str]] = {}  # each file's kinds, read once for every gate
    for selection in selections:
        if not selection.selected:
            continue
        gate = selection.gate
        cwd = (contract.root / gate.cwd).resolve()
        if gate.kind == "manual":
            plans.append(_unspawned(gate, cwd)._replace(
                pending_reason="manual gate: awaits human sign-off"))
            continue
        try:
            parsed = parse_command(gate.command, shell=gate.shell)
        except UnsupportedCommand as exc:
            plans.append(_unspawned(gate, cwd)._replace(unsupported=str(exc)))
            continue
        files: list[str] = []
        given: list[str] = []
        if parsed.uses_files:
            if selection.matched_files is not None:
                candidates: Sequence[str] = selection.matched_files
            else:
                if tracked is None:
                    tracked = all_files(contract.root)
                candidates = files_for_gate(gate, tracked, contract.root, tags)
            given = [path for path in candidates if os.path.lexists(contract.root / path)]
            files = [_relative_to_cwd(path, contract.root, cwd) for path in given]
            if not files:
                plans.append(_unspawned(gate, cwd)._replace(
                    skip_reason="no matching files for {files}"))
                continue
        invocations = tuple(tuple(argv) for argv in expand(parsed, files))
        env = {**gate.env, **parsed.env}
        if contract.format == "opentiger" and "PATH" not in env:
            env["PATH"] = node_bin_path(cwd, os.environ.get("PATH", ""))
        plan = GatePlan(gate, cwd, invocations=invocations, env=env,
                        display_command=_truncated(invocations[0]), given_files=tuple(given),
                        root=contract.root, file_args=tuple(files))
        if gate.cache:
            # Only when some gate caches its passes.
            from pytest_verifygate import result_cache
            from pytest_verifygate.git import inputs

            repo_files = repo_files or inputs.RepoFiles(contract.root)
            plan = result_cache.attach(contract, plan, repo_files, read=read_cache)
            if read_cache and plan.cache is not None and plan.cache.hit is None:
                plan = _without_passed_files(plan, parsed, contract.root)
        plans.append(plan)
    return plans


def _without_passed_files(plan: GatePlan, parsed: ParsedCommand, root: Path) -> GatePlan:
    """``plan`` without the files that passed before as they are (none left: a cached pass)."""
    from pytest_verifygate import result_cache

    slot = plan.cache
    if slot is None or not slot.file_keys:
        return plan
    reused = result_cache.reused_files(slot, plan.gate.name)
    if not reused:
        return plan
    remaining = tuple(path for path in plan.given_files if path not in reused)
    if not remaining:
        return plan._replace(cache=slot._replace(hit=result_cache.files_pass(plan, len(reused))))
    files = [_relative_to_cwd(path, root, plan.cwd) for path in remaining]
    invocations = tuple(tuple(argv) for argv in expand(parsed, files))
    keys = tuple(item for item in slot.file_keys if item[0] not in reused)
    return plan._replace(invocations=invocations, display_command=_truncated(invocations[0]),
                         given_files=remaining, cache=slot._replace(file_keys=keys),
                         file_args=tuple(files))


def node_bin_path(cwd: Path, path: str) -> str:
    """``PATH`` as openTiger gives it: this ``node_modules/.bin`` first, no other project's."""
    own = str(cwd / "node_modules" / ".bin")
    kept = [entry for entry in path.split(os.pathsep) if entry.strip() and not (
        Path(entry).parts[-2:] == ("node_modules", ".bin")
        and not Path(entry).resolve().is_relative_to(cwd))]
    return os.pathsep.join(dict.fromkeys([own, *kept]))


def _relative_to_cwd(path: str, root: Path, cwd: Path) -> str:
    relative = os.path.relpath(root / path, cwd) if cwd != root else path
    # A file named "-rf" must never read as an option, wherever {files} stands.
    return "./" + relative if relative.startswith("-") else relative


def _unspawned(gate: Gate, cwd: Path) -> GatePlan:
    """The plan of a gate that starts nothing (pending, unsupported, skipped): its command as
    declared."""
    words = shell_words(gate.command_text)
    shown = _truncated(words) if words is not None else (gate.command_text,)
    return GatePlan(gate, cwd, display_command=shown)


def _truncated(argv: Sequence[str]) -> tuple[str, ...]:
    if len(argv) <= MAX_DISPLAY_ARGS:
        return tuple(argv)
    hidden = len(argv) - MAX_DISPLAY_ARGS
    return (*argv[:MAX_DISPLAY_ARGS], f"... ({hidden} more arguments)")
