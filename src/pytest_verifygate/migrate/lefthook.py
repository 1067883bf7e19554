"""A ``lefthook.yml`` as gates: each command (or job) of its ``pre-commit`` and ``pre-push``
hooks becomes a gate running its ``run`` script through sh, as lefthook runs it.

PYTEST_DONT_REWRITE
"""

import re
from collections.abc import Iterator
from typing import Any

from pytest_verifygate.contract.writer import Value
from pytest_verifygate.errors import UsageError
from pytest_verifygate.item_names import unique_name
from pytest_verifygate.migrate import Migration

_FILE_TEMPLATES = re.compile(r"\{(staged_files|push_files|all_files|files)\}")
_BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")
_CARRIED = {"run", "glob", "root", "name", "exclude", "file_types", "stage_fixed"}


def from_lefthook(config: object, shown: str) -> Migration:
    if not isinstance(config, dict):
        raise UsageError(f"{shown}: not a lefthook config (a mapping of git hooks)")
    gates: list[dict[str, Value]] = []
    notes: list[str] = []
    taken: set[str] = set()
    for hook_name, hook in config.items():
        if not isinstance(hook, dict) or hook_name not in ("pre-commit", "pre-push"):
            if isinstance(hook, dict) and {"commands", "jobs", "scripts"} & hook.keys():
                notes.append(f"{hook_name}: only pre-commit and pre-push carry over (gates "
                             "check files)")
            continue
        if hook.get("scripts"):
            notes.append(f"{hook_name}: scripts (files under .lefthook/) are not carried "
                         "over: add a gate per script")
        for name, command in _commands(hook):
            gate = _gate(hook_name, name, command, notes)
            if gate is not None:
                # The same command name in both hooks (lint, lint): pre-push-lint for the second.
                wanted = name if name not in taken else f"{hook_name}-{name}"
                gates.append({"name": unique_name(wanted, taken, "{}-{}"), **gate})
    return Migration(gates, {}, notes)


def _commands(hook: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    commands = hook.get("commands")
    if isinstance(commands, dict):
        for name, command in commands.items():
            if isinstance(command, dict):
                yield str(name), command
    jobs = hook.get("jobs")
    if isinstance(jobs, list):
        for position, job in enumerate(jobs, start=1):
            if isinstance(job, dict):
                yield str(job.get("name") or f"job-{position}"), job


def _gate(hook_name: str, name: str, command: dict[str, Any],
          notes: list[str]) -> dict[str, Value] | None:
    run = command.get("run")
    if not isinstance(run, str) or not run.strip():
        notes.append(f"{hook_name} {name!r}: no run command (a script or group): not carried "
                     "over")
        return None
    script = _FILE_TEMPLATES.sub("{files}", run.strip())
    if re.search(r"\bgit\s+add\b", script) or command.get("stage_fixed"):
        notes.append(f"{hook_name} {name!r} stages what it fixed (git add / stage_fixed): a "
                     "gate that changes its files fails instead (review, then stage); drop "
                     "the git add")
    gate: dict[str, Value] = {"command": script, "shell": True}
    if hook_name == "pre-push":
        gate["roles"] = ["pre-push"]
    globs = command.get("glob")
    patterns = [globs] if isinstance(globs, str) else list(globs or ())
    if patterns:
        gate["when_changed"] = [expanded for pattern in patterns
                                for expanded in _expand_braces(str(pattern))]
    if isinstance(command.get("root"), str):
        gate["cwd"] = command["root"].rstrip("/") or "."
    exclude = command.get("exclude")
    if isinstance(exclude, str):
        gate["exclude_regex"] = exclude
    elif isinstance(exclude, list) and exclude:
        gate["when_changed"] = [*gate.get("when_changed", ["**"]),  # type: ignore[misc]
                                *(f"!{pattern}" for pattern in exclude)]
    if isinstance(command.get("file_types"), list):
        notes.append(f"{hook_name} {name!r}: file_types not carried over: use types = [...]")
    for key in sorted(set(command) - _CARRIED):
        notes.append(f"{hook_name} {name!r}: {key} not carried over")
    return gate


def _expand_braces(pattern: str) -> list[str]:
    """lefthook's ``*.{js,ts}`` as gitignore-style patterns (which have no braces)."""
    match = _BRACES.search(pattern)
    if match is None:
        return [pattern]
    return [expanded for choice in match.group(1).split(",")
            for expanded in _expand_braces(pattern[:match.start()] + choice
                                           + pattern[match.end():])]
