"""The agent hook's command, and merging it into an agent's configuration in place, keeping
every entry and key already there (``install-agent-hook``).

PYTEST_DONT_REWRITE
"""

import os
import shlex
import sys
from typing import Any, NamedTuple

from pytest_verifygate.agents.protocol import Adapter
from pytest_verifygate.errors import VerifyGateError


class ConfigShapeError(VerifyGateError):
    """The configuration is JSON, but not shaped as the agent's configuration is."""


class Merged(NamedTuple):
    """What merging changed: lines for the user, one per hook added or kept."""

    added: list[str]
    kept: list[str]


MODULES = ("pytest_verifygate", "pytest_verifygate.cli")


SAFE_PATH = ["-P"] if sys.version_info >= (3, 11) else []


def program() -> list[str]:
    """This interpreter running ``verifygate``: the agent's PATH may lack the virtualenv, and
    every agent lets a hook that exits 127 pass. With ``-P`` (Python 3.11+) the project's
    directory, where agents run hooks, is not searched first: a file the agent writes there
    cannot stand in for this package or a contract's plugin."""
    return [sys.executable, *SAFE_PATH, "-m", MODULES[0]]


def join(words: list[str]) -> str:
    """``words`` as one command line for the shell agents run hooks with (``cmd.exe`` on
    Windows)."""
    if os.name == "nt":
        import subprocess

        return subprocess.list2cmdline(words)
    return shlex.join(words)


def hook_command(agent: str, max_rounds: int | None = None) -> str:
    words = [*program(), "agent-hook", "--agent", agent]
    if max_rounds is not None:
        words += ["--max-rounds", str(max_rounds)]
    return join(words)


def _split(command: object) -> tuple[list[str], list[str], list[str]] | None:
    """A command that runs ``verifygate`` (by name, path or ``python -m``) as its ``NAME=value``
    assignments, the program's words and its arguments; None for any other."""
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: not a command of ours
        return None
    count = 0
    while count < len(words) and "=" in words[count] and not words[count].startswith("="):
        count += 1  # NAME=value assignments before the program
    assignments, words = words[:count], words[count:]
    if words[:1] and os.path.basename(words[0]) == "verifygate":
        return assignments, words[:1], words[1:]
    flags = 2 if words[1:2] == ["-P"] else 1
    if len(words) >= flags + 2 and words[flags] == "-m" and words[flags + 1] in MODULES:
        return assignments, words[:flags + 2], words[flags + 2:]
    return None


def is_agent_hook(command: object, agent: str) -> bool:
    """Whether ``command`` runs ``verifygate agent-hook``, and names no other ``--agent``."""
    split = _split(command)
    arguments = split[2] if split is not None else []
    if arguments[:1] != ["agent-hook"]:
        return False
    named = [arguments[i + 1] for i, word in enumerate(arguments[:-1]) if word == "--agent"]
    named += [word.split("=", 1)[1] for word in arguments if word.startswith("--agent=")]
    return not named or named[-1] == agent


def unreachable(command: str) -> str | None:
    """Why the agent hook ``command`` might not start from an agent's shell (None: it will)."""
    split = _split(command)
    if split is None:
        return None
    first = split[1][0]
    if first.startswith(("$", "~", "%")):  # the shell expands it: only the agent can tell
        return None
    if os.sep not in first and "/" not in first:
        return f"`{first}` is looked up on the agent's PATH, which may not have it"
    if not (os.path.isfile(first) and os.access(first, os.X_OK)):
        return f"{first} is not there (or not executable)"
    return None


def repointed(command: str) -> str:
    split = _split(command)
    assert split is not None
    assignments, _, arguments = split
    return join([*assignments, *program(), *arguments])


def merge_hooks(config: object, adapter: Adapter, command: str, max_rounds: int,
                *, replace: bool = False) -> Merged:
    """Add ``adapter``'s hooks running ``command`` to ``config`` and remove those of its retired
    events. An event that already runs the agent hook keeps it, but with ``replace`` (other
    options were asked for) its command becomes ``command``, and a command that would not
    start runs this interpreter. A document of another shape is refused, never rewritten."""
    if not isinstance(config, dict):
        raise ConfigShapeError(f"it holds a JSON {type(config).__name__}, not an object")
    added: list[str] = []
    kept: list[str] = []
    for key, value in adapter.top_level.items():
        config.setdefault(key, value)
    hooks = config.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigShapeError("'hooks' is not an object")
    for event, entry in adapter.entries(command, max_rounds):
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise ConfigShapeError(f"'hooks.{event}' is not a list")
        # Claude Code, Codex and Gemini CLI nest hooks in matcher groups; Cursor does not.
        nested = "hooks" in entry
        existing = next((hook for hook in _hooks(entries, nested)
                         if is_agent_hook(hook.get("command"), adapter.name)), None)
        if existing is None:
            entries.append(entry)
            added.append(f"{event}: `{command}`{_details(entry)}")
            continue
        update = {}
        if replace:
            wanted = entry["hooks"][0] if nested else entry
            # What the options decide; a timeout the user set stays.
            update = {key: wanted[key] for key in ("command", "loop_limit")
                      if key in wanted and existing.get(key) != wanted[key]}
        elif unreachable(existing["command"]) is not None:
            update = {"command": repointed(existing["command"])}
        if update:
            added.append(f"{event}: `{existing['command']}` now runs "
                         f"`{update.get('command', existing['command'])}`{_details(update)}")
            existing.update(update)
        else:
            kept.append(f"{event}: already runs `{existing['command']}`")
    for event in adapter.retired:
        entries = hooks.get(event)
        if isinstance(entries, list) and _retire(entries, adapter):
            added.append(f"{event}: removed the agent hook (the hook no longer serves it)")
            if not entries:
                del hooks[event]
    return Merged(added, kept)


def _retire(entries: list[Any], adapter: Adapter) -> bool:
    """Remove ``adapter``'s agent hooks (and the groups that empties) from an event's matcher
    groups; whether any was there."""
    def ours(hook: object) -> bool:
        return isinstance(hook, dict) and is_agent_hook(hook.get("command"), adapter.name)

    removed = False
    for index in reversed(range(len(entries))):
        inner = entries[index].get("hooks") if isinstance(entries[index], dict) else None
        if isinstance(inner, list) and any(ours(hook) for hook in inner):
            removed = True
            inner[:] = [hook for hook in inner if not ours(hook)]
            if not inner:
                del entries[index]
    return removed


def _hooks(entries: list[Any], nested: bool) -> list[dict[str, Any]]:
    """The hooks an event's entries (or, ``nested``, their matcher groups) hold."""
    groups = [entry.get("hooks") if nested else [entry] for entry in entries
              if isinstance(entry, dict)]
    return [hook for group in groups if isinstance(group, list)
            for hook in group if isinstance(hook, dict)]


def _details(entry: dict[str, Any]) -> str:
    hook = entry["hooks"][0] if "hooks" in entry else entry
    shown = [f"{key} {hook[key]}" for key in ("timeout", "loop_limit") if key in hook]
    return f" ({', '.join(shown)})" if shown else ""
