"""Which agent sent a hook payload, and its adapter.

``verifygate agent-hook`` is the stop hook of every supported agent; each one's payload says
which it is (``--agent NAME`` overrides):

- ``hook_event_name`` ``AfterAgent``: Gemini CLI;
- ``stop`` (or no event name, with ``conversation_id`` or ``loop_count``): Cursor;
- ``Stop``, ``SubagentStop``, ``SessionStart``: Gemini CLI for a ``SessionStart`` with a
  ``timestamp``; Codex CLI when there is a ``turn_id`` (its ``SessionStart`` has none: there, a
  null ``transcript_path`` or one naming Codex's ``rollout-*.jsonl``); else Claude Code;
- no event name, with a ``session_id``: Claude Code (its older releases' ``Stop``).

A well-formed payload of another event (``PreToolUse``) is no stop: the hook says so in one
line and lets it be. Anything else that cannot be read is ``UnreadPayload``, which the stop
hook answers fail-closed (``stop_hook.py``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pytest_verifygate.agents import claude, codex, cursor, gemini
from pytest_verifygate.agents.protocol import (
    Adapter,
    HookPayload,
    NotAStop,
    PayloadError,
    json_object,
)

ADAPTERS: dict[str, Adapter] = {adapter.name: adapter for adapter in
                                (claude.ADAPTER, codex.ADAPTER, cursor.ADAPTER, gemini.ADAPTER)}
AGENT_NAMES = tuple(ADAPTERS)
CLAUDE_EVENTS = ("Stop", "SubagentStop", "SessionStart")


class UnreadPayload(Exception):
    """The hook input could not be read; ``adapter``: the agent to answer, if known;
    ``not_a_stop``: it was read, and is an event that is no stop."""

    def __init__(self, message: str, adapter: Adapter | None, not_a_stop: bool = False) -> None:
        super().__init__(message)
        self.adapter = adapter
        self.not_a_stop = not_a_stop


def detect(data: Mapping[str, Any]) -> Adapter | None:
    """The agent whose hook payload ``data`` is; None when it is none of theirs."""
    event = data.get("hook_event_name")
    if event == "AfterAgent":
        return gemini.ADAPTER
    if event == "stop" or (event is None and ("conversation_id" in data
                                              or "loop_count" in data)):
        return cursor.ADAPTER
    if event in CLAUDE_EVENTS:
        if event == "SessionStart" and "timestamp" in data:
            return gemini.ADAPTER
        if "turn_id" in data or (event == "SessionStart" and _codex_transcript(data)):
            return codex.ADAPTER
        return claude.ADAPTER
    if event is None and "session_id" in data:
        return claude.ADAPTER
    return None


def _codex_transcript(data: Mapping[str, Any]) -> bool:
    """Whether a ``SessionStart``'s transcript is Codex's: none yet (null), or its session
    file, ``rollout-<time>-<id>.jsonl``; Claude Code's is always a path of its own."""
    path = data.get("transcript_path", "")
    return path is None or (isinstance(path, str)
                            and os.path.basename(path).startswith("rollout-"))


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
            "for Stop/SessionStart, Cursor's stop or Gemini CLI's AfterAgent/SessionStart, "
            "or name the agent with --agent)", None, not_a_stop=isinstance(event, str))
    try:
        return adapter, adapter.parse(data)
    except NotAStop as exc:
        raise UnreadPayload(f"{adapter.title} hook input: {exc}", adapter, True) from None
    except PayloadError as exc:
        # A SessionStart is no stop, even malformed: a warning, never a block.
        raise UnreadPayload(f"malformed {adapter.title} hook input: {exc}", adapter,
                            data.get("hook_event_name") == "SessionStart") from None
