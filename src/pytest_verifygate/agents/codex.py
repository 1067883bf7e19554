"""Codex CLI's hook protocol: Claude Code's (``claude.py``), configured in ``.codex/hooks.json``.

Input (Codex's ``stop.command.input`` schema): ``session_id``, ``turn_id``, ``cwd``,
``hook_event_name`` (``Stop``, ``SubagentStop`` with ``agent_id``, ``SessionStart``),
``stop_hook_active``, ``last_assistant_message``, ``model``, ``transcript_path``. ``turn_id``
is what tells a Codex payload from Claude Code's.

Output: the same ``{"decision": "block", "reason": ...}`` and ``systemMessage``; Codex rejects
keys outside its output schema, and these are all inside it. Hooks run only with
``[features] codex_hooks = true`` in Codex's ``config.toml``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import Any

from pytest_verifygate.agents import claude
from pytest_verifygate.agents.protocol import Adapter, HookEntry, HookPayload, command_hook


def parse(data: dict[str, Any]) -> HookPayload:
    return claude.parse(data, agent="codex")


def entries(command: str, max_rounds: int) -> list[HookEntry]:
    return [
        ("SessionStart", {"hooks": [command_hook(command, claude.SESSION_START_TIMEOUT)]}),
        ("Stop", {"hooks": [command_hook(command, claude.STOP_TIMEOUT)]}),
    ]


ADAPTER = Adapter(
    name="codex", title="Codex CLI", parse=parse, render=claude.render,
    config_file=".codex/hooks.json", entries=entries,
    setup_note="Codex runs hooks only with `[features] codex_hooks = true` in its config.toml "
               "(~/.codex/config.toml), and asks you to trust a changed hooks.json (/hooks)",
)
