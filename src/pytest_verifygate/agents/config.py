"""Merging the agent hook into a coding agent's configuration (what ``install-hook`` writes).

Works on the parsed JSON document, in place: every entry and key already there is kept, the
adapter's hooks are appended to their events' lists, and an event that already runs
``verifygate agent-hook`` (any flags, any path to the program) is left as it is, so merging
twice changes nothing the second time. A document whose shape is not the agent's (not an
object, ``hooks`` not an object, an event that is not a list) is refused with
``ConfigShapeError``, never rewritten.

PYTEST_DONT_REWRITE
"""

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


def is_agent_hook(command: object, agent: str | None = None) -> bool:
    """Whether a configured command runs ``verifygate agent-hook`` (as a program on PATH, by
    its path, or as ``python -m pytest_verifygate.cli``), for ``agent`` when one is named: a
    command that names another agent with ``--agent`` is not this agent's hook."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: not a command of ours
        return False
    while words and "=" in words[0] and not words[0].startswith("="):
        words = words[1:]  # NAME=value assignments before the program
    if words[:1] and os.path.basename(words[0]) == "verifygate":
        arguments = words[1:]
    elif words[1:3] == ["-m", "pytest_verifygate.cli"]:
        arguments = words[3:]
    else:
        return False
    if arguments[:1] != ["agent-hook"]:
        return False
    named = [arguments[i + 1] for i, word in enumerate(arguments[:-1]) if word == "--agent"]
    named += [word.split("=", 1)[1] for word in arguments if word.startswith("--agent=")]
    return agent is None or not named or named[-1] == agent


def merge_hooks(config: object, adapter: Adapter, command: str, max_rounds: int,
                *, replace: bool = False) -> Merged:
    """Add ``adapter``'s hooks running ``command`` to ``config`` (changed in place).

    An event that already runs the agent hook is kept as it is, unless ``replace`` (the user
    asked for other options, such as ``--max-rounds``): then that hook's command becomes
    ``command``, and nothing else of it changes."""
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
        existing = next((hook for hook in _hooks(entries, adapter.nested)
                         if is_agent_hook(hook.get("command"), adapter.name)), None)
        if existing is not None:
            wanted = entry["hooks"][0] if adapter.nested else entry
            # What the options decide (the command, Cursor's loop_limit); a timeout the user
            # set stays.
            update = {key: wanted[key] for key in ("command", "loop_limit")
                      if key in wanted and existing.get(key) != wanted[key]}
            if replace and update:
                added.append(f"{event}: `{existing['command']}` now runs `{command}`"
                             f"{_details(update)}")
                existing.update(update)
            else:
                kept.append(f"{event}: already runs `{existing['command']}`")
            continue
        entries.append(entry)
        added.append(f"{event}: `{command}`{_details(entry)}")
    return Merged(added, kept)


def _hooks(entries: list[Any], nested: bool) -> list[dict[str, Any]]:
    """The hooks an event's entries hold: each entry itself (Cursor) or each matcher group's
    ``hooks`` (Claude Code, Codex, Gemini CLI)."""
    found: list[dict[str, Any]] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        hooks = entry.get("hooks") if nested else [entry]
        if isinstance(hooks, list):
            found += [hook for hook in hooks if isinstance(hook, dict)]
    return found


def _details(entry: dict[str, Any]) -> str:
    hook = entry["hooks"][0] if "hooks" in entry else entry
    shown = [f"{key} {hook[key]}" for key in ("timeout", "loop_limit") if key in hook]
    return f" ({', '.join(shown)})" if shown else ""
