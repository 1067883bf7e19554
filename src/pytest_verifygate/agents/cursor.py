"""Cursor's hook protocol (the ``stop`` hook of ``.cursor/hooks.json``).

Input, a JSON object on stdin (which may start with a byte-order mark): ``hook_event_name``
``"stop"``, ``conversation_id`` (the session), ``generation_id``, ``workspace_roots``,
``status`` (``completed``, ``aborted`` or ``error``) and ``loop_count``: how many times a stop
hook already sent the agent back to work in this run. There is no ``cwd`` (the project's first
workspace root is used, else the directory Cursor runs project hooks in, the project root) and
no ``stop_hook_active``: the round cap counts with ``loop_count``.

Output on stdout: ``{"followup_message": ...}`` is submitted as the next user message, which
keeps the agent working; ``{}`` lets it stop. Cursor sends at most ``loop_limit`` follow-ups
in a run (the hook's entry sets it; 5 when absent). A stop hook has no channel to the user, so
the message that hands the work to a human at the cap goes to the agent as one last
follow-up, to relay (``loop_limit`` is the cap plus one for it); notes go to stderr, which
Cursor shows in its hooks output. A stop the user aborted, or one that ended in an error, is
not checked: sending the agent back to work would overrule the user.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_verifygate.agents.protocol import (
    STOP,
    Adapter,
    Decision,
    HookEntry,
    HookPayload,
    PayloadError,
    directory,
    dumps,
    event_of,
    session_text,
)

EVENTS = {"stop": STOP}
STATUSES = ("completed", "aborted", "error")
RELAY = ("\n\nDo not try another fix for these failures. Stop now, and tell the user that a "
         "human must review the work, quoting the message above.")


def parse(data: dict[str, Any]) -> HookPayload:
    event = event_of(data, EVENTS, "stop", "stop")
    key = "conversation_id" if "conversation_id" in data else "session_id"
    if key not in data:
        raise PayloadError("'conversation_id' is missing")
    session_id = session_text(data, key)
    loop_count = data.get("loop_count")
    if loop_count is not None and (isinstance(loop_count, bool)
                                   or not isinstance(loop_count, int) or loop_count < 0):
        raise PayloadError("'loop_count' is not a count (a whole number, 0 or more)")
    status = data.get("status", "completed")
    if not isinstance(status, str):
        raise PayloadError("'status' is not a string")
    skip = None
    if status in ("aborted", "error"):
        skip = (f"the agent's run ended with status {status!r}: the stop is allowed without "
                "checking (sending it back to work would overrule the user)")
    return HookPayload(session_id=session_id, cwd=_cwd(data), agent="cursor", event=event,
                       loop_count=loop_count, skip_reason=skip)


def _cwd(data: dict[str, Any]) -> Path:
    if "cwd" in data:
        return directory(data["cwd"])
    roots = data.get("workspace_roots")
    if roots is not None:
        if not isinstance(roots, list) or not all(isinstance(root, str) for root in roots):
            raise PayloadError("'workspace_roots' is not a list of paths")
        if roots:
            return directory(roots[0], "workspace_roots[0]")
    return Path.cwd()


def render(decision: Decision) -> str:
    if decision.block_reason is not None:
        return dumps({"followup_message": decision.block_reason})
    if decision.human_review and decision.system_message is not None:
        return dumps({"followup_message": decision.system_message + RELAY})
    return dumps({})


def entries(command: str, max_rounds: int) -> list[HookEntry]:
    return [("stop", {"command": command, "loop_limit": max_rounds + 1})]


ADAPTER = Adapter(
    name="cursor", title="Cursor", parse=parse, render=render,
    config_file=".cursor/hooks.json", entries=entries, nested=False, top_level={"version": 1},
    setup=("Cursor reads .cursor/hooks.json when it starts: restart it; its hooks output shows "
           "the hook's notes",),
)
