"""Merging the agent hook into a coding agent's configuration (what ``install-hook`` writes).

Works on the parsed JSON document, in place: every entry and key already there is kept, the
adapter's hooks are appended to their events' lists, and an event that already runs
``verifygate agent-hook`` (any flags, any path to the program) is left as it is, so merging
twice changes nothing the second time. A document whose shape is not the agent's (not an
object, ``hooks`` not an object, an event that is not a list) is refused with
``ConfigShapeError``, never rewritten.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import shlex
from typing import Any, NamedTuple

from pytest_verifygate.agents.protocol import Adapter
from pytest_verifygate.errors import VerifyGateError


class ConfigShapeError(VerifyGateError):
    """The configuration is JSON, but not shaped as the agent's configuration is."""


class Merged(NamedTuple):
    """What merging changed: lines for the user, one per hook added or kept."""

    added: list[str]
    kept: list[str]


def hook_command(agent: str, max_rounds: int | None = None) -> str:
    """The command an agent's configuration runs: ``verifygate agent-hook --agent NAME``."""
    words = ["verifygate", "agent-hook", "--agent", agent]
    if max_rounds is not None:
        words += ["--max-rounds", str(max_rounds)]
    return shlex.join(words)


def is_agent_hook(command: object) -> bool:
    """Whether a configured command runs ``verifygate agent-hook`` (as a program on PATH, by
    its path, or as ``python -m pytest_verifygate.cli``)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: not a command of ours
        return False
    return "agent-hook" in words and any(
        os.path.basename(word) == "verifygate" or word == "pytest_verifygate.cli"
        for word in words)


def merge_hooks(config: object, adapter: Adapter, command: str, max_rounds: int) -> Merged:
    """Add ``adapter``'s hooks running ``command`` to ``config`` (changed in place)."""
    if not isinstance(config, dict):
        raise ConfigShapeError(f"it holds a JSON {type(config).__name__}, not an object")
    added: list[str] = []
    kept: list[str] = []
    for key, value in adapter.top_level.items():
        if key not in config:
            config[key] = value
    hooks = config.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigShapeError("'hooks' is not an object")
    for event, entry in adapter.entries(command, max_rounds):
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise ConfigShapeError(f"'hooks.{event}' is not a list")
        existing = next((found for found in _commands(entries, adapter.nested)
                         if is_agent_hook(found)), None)
        if existing is not None:
            kept.append(f"{event}: already runs `{existing}`")
            continue
        entries.append(entry)
        added.append(f"{event}: `{command}`{_details(entry)}")
    return Merged(added, kept)


def _commands(entries: list[Any], nested: bool) -> list[object]:
    """The commands an event's entries run: each entry's own (Cursor) or those of each
    matcher group's ``hooks`` (Claude Code, Codex, Gemini CLI)."""
    commands: list[object] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        hooks = entry.get("hooks") if nested else [entry]
        if isinstance(hooks, list):
            commands += [hook.get("command") for hook in hooks if isinstance(hook, dict)]
    return commands


def _details(entry: dict[str, Any]) -> str:
    hook = entry["hooks"][0] if "hooks" in entry else entry
    shown = [f"{key} {hook[key]}" for key in ("timeout", "loop_limit") if key in hook]
    return f" ({', '.join(shown)})" if shown else ""
