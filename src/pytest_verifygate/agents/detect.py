"""Which agent sent a hook payload, and its adapter.

``verifygate agent-hook`` is the stop hook of every supported agent; each one's payload says
which it is (``--agent NAME`` overrides):

- ``hook_event_name`` ``AfterAgent``: Gemini CLI;
- ``stop`` (or no event name, with ``conversation_id`` or ``loop_count``): Cursor;
- ``Stop``, ``SubagentStop``, ``SessionStart``: Codex CLI when there is a ``turn_id``, Gemini
  CLI for a ``SessionStart`` with a ``timestamp``, else Claude Code;
- no event name, with a ``session_id``: Claude Code (its older releases' ``Stop``).

Anything else is no agent's stop hook payload: the hook says so in one line on stderr and
lets the agent stop (exit status 0, nothing on stdout), whoever sent it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_verifygate.agents import claude, codex, cursor, gemini
from pytest_verifygate.agents.protocol import Adapter, HookPayload, PayloadError, json_object

ADAPTERS: dict[str, Adapter] = {adapter.name: adapter for adapter in
                                (claude.ADAPTER, codex.ADAPTER, cursor.ADAPTER, gemini.ADAPTER)}
AGENT_NAMES = tuple(ADAPTERS)
CLAUDE_EVENTS = ("Stop", "SubagentStop", "SessionStart")


class UnreadPayload(Exception):
    """The hook input could not be read; ``adapter``: the agent to answer, if known."""

    def __init__(self, message: str, adapter: Adapter | None) -> None:
        super().__init__(message)
        self.adapter = adapter


def detect(data: Mapping[str, Any]) -> Adapter | None:
    """The agent whose hook payload ``data`` is; None when it is none of theirs."""
    event = data.get("hook_event_name")
    if event == "AfterAgent":
        return gemini.ADAPTER
    if event == "stop" or (event is None and ("conversation_id" in data
                                              or "loop_count" in data)):
        return cursor.ADAPTER
    if event in CLAUDE_EVENTS:
        if "turn_id" in data:
            return codex.ADAPTER
        if event == "SessionStart" and "timestamp" in data:
            return gemini.ADAPTER
        return claude.ADAPTER
    if event is None and "session_id" in data:
        return claude.ADAPTER
    return None


def read_payload(raw: bytes, agent: str | None = None) -> tuple[Adapter, HookPayload]:
    """The agent's adapter and its payload, read from the hook's stdin bytes.

    Raises ``UnreadPayload`` (one line, naming the agent when it is known)."""
    adapter = ADAPTERS[agent] if agent is not None else None
    try:
        data = json_object(raw)
    except PayloadError as exc:
        raise UnreadPayload(f"malformed hook input: {exc}", adapter) from None
    if adapter is None:
        adapter = detect(data)
    if adapter is None:
        event = data.get("hook_event_name")
        what = (f"hook event {event!r}" if isinstance(event, str)
                else "input without a known 'hook_event_name'")
        raise UnreadPayload(
            f"unrecognised hook input: {what} is not a stop hook payload of "
            f"{', '.join(a.title for a in ADAPTERS.values())} (register `verifygate agent-hook` "
            "for Stop/SubagentStop/SessionStart, Cursor's stop or Gemini CLI's AfterAgent, "
            "or name the agent with --agent)", None)
    try:
        return adapter, adapter.parse(data)
    except PayloadError as exc:
        raise UnreadPayload(f"malformed {adapter.title} hook input: {exc}", adapter) from None
