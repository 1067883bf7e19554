"""Claude Code's hook protocol (``SessionStart``, ``Stop``, ``SubagentStop``).

Input, a JSON object on stdin: ``session_id``, ``cwd``, ``hook_event_name``,
``stop_hook_active`` and, from a subagent, ``agent_id`` (also ``transcript_path`` and others,
not used). A payload without ``hook_event_name`` is a ``Stop``, as older releases sent it.
A ``SubagentStop`` is read but not gated (``stop_hook.py``), so no hook is installed for it.

Output on stdout, exit status 0: ``{"decision": "block", "reason": ...}`` keeps the agent
working with the reason as its next instruction; ``{"systemMessage": ...}`` lets it stop with
a note for the user; nothing at all lets it stop. Exit status 2 would also block, and any
other is shown to the user as a hook error: the hook never uses either. What a
``SessionStart`` hook prints becomes the agent's context, so it prints nothing there.

Codex CLI speaks the same protocol (``codex.py``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import Any

from pytest_verifygate.agents.protocol import (
    SESSION_START,
    SESSION_START_TIMEOUT,
    STOP,
    STOP_TIMEOUT,
    SUBAGENT_STOP,
    Adapter,
    Decision,
    HookEntry,
    HookPayload,
    command_hook,
    directory,
    dumps,
    event_of,
    optional_bool,
    optional_text,
    session_text,
)

EVENTS = {"SessionStart": SESSION_START, "Stop": STOP, "SubagentStop": SUBAGENT_STOP}


def parse(data: dict[str, Any], *, agent: str = "claude",
          events: dict[str, str] = EVENTS) -> HookPayload:
    session_id = session_text(data, "session_id")
    cwd = directory(data.get("cwd"))
    active = optional_bool(data, "stop_hook_active")
    event = event_of(data, events, "Stop", ", ".join(events))
    return HookPayload(session_id=session_id, cwd=cwd, agent=agent, event=event,
                       stop_hook_active=active, agent_id=optional_text(data, "agent_id"))


def render(decision: Decision) -> str:
    data: dict[str, Any] = {}
    if decision.block_reason is not None:
        data = {"decision": "block", "reason": decision.block_reason}
    if decision.system_message is not None:
        data["systemMessage"] = decision.system_message
    return dumps(data) if data else ""


def entries(command: str, max_rounds: int) -> list[HookEntry]:
    return [
        ("SessionStart", {"hooks": [command_hook(command, SESSION_START_TIMEOUT)]}),
        ("Stop", {"hooks": [command_hook(command, STOP_TIMEOUT)]}),
    ]


ADAPTER = Adapter(
    name="claude", title="Claude Code", parse=parse, render=render,
    config_file=".claude/settings.json", entries=entries, retired=("SubagentStop",),
    setup=("Claude Code reads project hooks when a session starts: restart running sessions "
           "(a changed hook is reviewed in /hooks); the project's trust prompt must be "
           "accepted once",
           "headless (`claude -p`): nothing more; then `verifygate agent-status` exits 1 "
           "unless the last stop was verified"),
)
