"""Which agent sent a hook payload, told from its fields unless ``--agent`` names it, and
reading the payload.

PYTEST_DONT_REWRITE
"""

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


class UnreadPayload(Exception):
    """The hook input could not be read; ``adapter``: the agent to answer, if known;
    ``not_a_stop``: it was read, and is an event that is no stop."""

    def __init__(self, message: str, adapter: Adapter | None, not_a_stop: bool = False) -> None:
        super().__init__(message)
        self.adapter = adapter
        self.not_a_stop = not_a_stop


def detect(data: Mapping[str, Any]) -> Adapter | None:
    event = data.get("hook_event_name")
    if event == "AfterAgent":
        return gemini.ADAPTER
    if event in ("stop", "beforeSubmitPrompt") or (
            event is None and ("conversation_id" in data or "loop_count" in data)):
        return cursor.ADAPTER
    if event in ("Stop", "SubagentStop", "SessionStart"):
        if event == "SessionStart" and "timestamp" in data:
            return gemini.ADAPTER
        if "turn_id" in data or (event == "SessionStart" and _codex_transcript(data)):
            return codex.ADAPTER
        return claude.ADAPTER
    if event is None and "session_id" in data:
        return claude.ADAPTER  # older releases sent a Stop without an event name
    return None


def _codex_transcript(data: Mapping[str, Any]) -> bool:
    """Whether a ``SessionStart``'s transcript is Codex's (none yet, or its ``rollout-*.jsonl``):
    it has no ``turn_id`` to tell it from Claude Code's."""
    path = data.get("transcript_path", "")
    return path is None or (isinstance(path, str) and os.path.basename(path).startswith("rollout-"))


def read_payload(raw: bytes, agent: str | None = None) -> tuple[Adapter, HookPayload]:
    """The agent's adapter and its payload; else ``UnreadPayload``."""
    adapter = ADAPTERS[agent] if agent is not None else None
    try:
        data = json_object(raw)
    except PayloadError as exc:
        raise UnreadPayload(f"malformed hook input: {exc}", adapter) from None
    adapter = adapter or detect(data)
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
