"""The agent hook's command, and merging it into an agent's configuration in place, keeping
every entry and key already there (``install-agent-hook``).

PYTEST_DONT_REWRITE
"""

import json
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
    """This interpreter running ``verifygate``: the agent's PATH may lack the virtualenv. With
    ``-E`` no ``PYTHONPATH``/``PYTHONHOME`` from the agent's environment (a project ``.env``
    an agent CLI loads) picks the code that runs, and with ``-P`` (Python 3.11+) neither does
    the project's directory, where agents run hooks."""
    return [sys.executable, "-E", *SAFE_PATH, "-m", MODULES[0]]


def hook_command(agent: str, max_rounds: int | None = None, *, background: bool = False
                 ) -> str:
    words = [*program(), "agent-hook", "--agent", agent]
    if max_rounds is not None:
        words += ["--max-rounds", str(max_rounds)]
    return guarded(shlex.join(words + ["--background"] * background), agent)


def guarded(command: str, agent: str) -> str:
    """``command`` (which answers with exit status 0) in a POSIX ``sh`` guard that turns any
    failure to start it (its interpreter gone, a broken package) into the agent's own block:
    every agent takes any other exit status for a hook error, and lets the stop through."""
    problem = ("verifygate agent-hook could not run (exit status $?): its Python environment "
               "is gone or broken. Reinstall pytest-verifygate there, or run 'verifygate "
               f"install-agent-hook --agent {agent}' again from an environment that has it")
    if agent == "cursor":  # a stop hook answers on stdout, in JSON, with exit status 0
        answer = json.dumps({"followup_message": problem.replace("$?", "%s")}) + "\\n"
        return f'{command} || printf {shlex.quote(answer)} "$?"'
    # Claude Code, Codex CLI and Gemini CLI read exit status 2 as a block, stderr its reason.
    return f'{command} || {{ echo "{problem}" >&2; exit 2; }}'


def _split(command: object) -> tuple[list[str], list[str], list[str]] | None:
    """A command that runs ``verifygate`` (by name, path or ``python -m``) as its ``NAME=value``
    assignments, the program's words and its arguments; None for any other."""
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: not a command of ours
        return None
    if "||" in words:  # the guard ``hook_command`` writes
        words = words[:words.index("||")]
    count = 0
    while count < len(words) and "=" in words[count] and not words[count].startswith("="):
        count += 1  # NAME=value assignments before the program
    assignments, words = words[:count], words[count:]
    if words[:1] and os.path.basename(words[0]) == "verifygate":
        return assignments, words[:1], words[1:]
    flags = 1
    while words[flags:flags + 1] in (["-E"], ["-P"]):
        flags += 1
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


def repointed(command: str, agent: str) -> str:
    """``command`` run by this interpreter, in the guard, its other words kept."""
    split = _split(command)
    assert split is not None
    assignments, _, arguments = split
    return guarded(shlex.join([*assignments, *program(), *arguments]), agent)


def merge_hooks(config: object, adapter: Adapter, command: str, max_rounds: int,
                *, replace: bool = False, after_edit: str | None = None) -> Merged:
    """Add ``adapter``'s hooks running ``command`` to ``config`` and remove those of its retired
    events. An event that already runs the agent hook keeps it, but with ``replace`` (other
    options were asked for) its command becomes ``command``, and a command that would not
    start runs this interpreter; with ``after_edit``, the after-edit event runs that command.
    A document of another shape is refused, never rewritten."""
    if not isinstance(config, dict):
        raise ConfigShapeError(f"it holds a JSON {type(config).__name__}, not an object")
    added: list[str] = []
    kept: list[str] = []
    for key, value in adapter.top_level.items():
        config.setdefault(key, value)
    hooks = config.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigShapeError("'hooks' is not an object")
    events = adapter.entries(command, max_rounds)
    if after_edit is not None and adapter.after_edit is not None:
        events.append(adapter.after_edit(after_edit))
    for event, entry in events:
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise ConfigShapeError(f"'hooks.{event}' is not a list")
        # Claude Code, Codex and Gemini CLI nest hooks in matcher groups; Cursor does not.
        nested = "hooks" in entry
        existing = next((hook for hook in _hooks(entries, nested)
                         if is_agent_hook(hook.get("command"), adapter.name)), None)
        if existing is None:
            entries.append(entry)
            added.append(f"{event}: `{(entry['hooks'][0] if nested else entry)['command']}`"
                         f"{_details(entry)}")
            continue
        update = {}
        if replace:
            wanted = entry["hooks"][0] if nested else entry
            # What the options decide; a timeout the user set stays.
            update = {key: wanted[key] for key in ("command", "loop_limit")
                      if key in wanted and existing.get(key) != wanted[key]}
        elif (unreachable(existing["command"]) is not None
              or "||" not in str(existing["command"])):  # written before the guard
            update = {"command": repointed(existing["command"], adapter.name)}
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
