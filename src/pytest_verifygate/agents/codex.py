"""Codex CLI's hook protocol: Claude Code's (``claude.py``), configured in ``.codex/hooks.json``.

Input (Codex's ``stop.command.input`` schema): ``session_id``, ``turn_id``, ``cwd``,
``hook_event_name`` (``Stop``, ``SubagentStop`` with ``agent_id``, ``SessionStart``),
``stop_hook_active``, ``last_assistant_message``, ``model``, ``transcript_path``. ``turn_id``
is what tells a Codex payload from Claude Code's.

Codex's ``SessionStart`` has no ``turn_id``: its ``transcript_path`` is null or a
``rollout-*.jsonl`` file (``detect.py``); Claude Code answers a ``SessionStart`` the same way.

Output: the same ``{"decision": "block", "reason": ...}`` and ``systemMessage``; Codex rejects
keys outside its output schema, and these are all inside it. Hooks are on by default, but
Codex runs a project's hooks only when the project is trusted and each hook is too (reviewed
in ``/hooks``, which stores its hash, or ``--dangerously-bypass-hook-trust``); otherwise it
skips them without a word, ``codex exec`` included (``setup``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import Any

from pytest_verifygate.agents import claude
from pytest_verifygate.agents.protocol import (
    SESSION_START_TIMEOUT,
    STOP_TIMEOUT,
    Adapter,
    HookEntry,
    HookPayload,
    command_hook,
)


def parse(data: dict[str, Any]) -> HookPayload:
    return claude.parse(data, agent="codex")


def entries(command: str, max_rounds: int) -> list[HookEntry]:
    return [
        ("SessionStart", {"hooks": [command_hook(command, SESSION_START_TIMEOUT)]}),
        ("Stop", {"hooks": [command_hook(command, STOP_TIMEOUT)]}),
    ]


ADAPTER = Adapter(
    name="codex", title="Codex CLI", parse=parse, render=claude.render,
    config_file=".codex/hooks.json", entries=entries, retired=("SubagentStop",),
    setup=("Codex skips a project's hooks without a word unless the project is trusted and "
           "each hook is: in `codex`, trust the project, then review and trust the hooks in "
           "/hooks (again whenever a hook's command changes); hooks are on by default, no "
           "[features] setting is needed",
           "headless (`codex exec`): trust the project and the hooks once as above (or "
           "`[projects.\"<root>\"] trust_level = \"trusted\"` in ~/.codex/config.toml and "
           "`codex exec --dangerously-bypass-hook-trust`); then `verifygate agent-status` "
           "exits 1 unless the last stop was verified (also when no hook ran)"),
)
