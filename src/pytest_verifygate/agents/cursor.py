"""Cursor's hook protocol: the ``stop`` hook of ``.cursor/hooks.json`` (fields and answers:
``docs/how-to/agents.md``, "The protocol fields").

PYTEST_DONT_REWRITE
"""

from pathlib import Path
from typing import Any

from pytest_verifygate.agents import protocol

RELAY = ("\n\nDo not try another fix for these failures. Stop now, and tell the user that a "
         "human must review the work, quoting the message above.")


# Cursor has no session start hook that its releases accept: the start is recorded at the
# conversation's first prompt (later prompts keep it).
EVENTS = {"stop": protocol.STOP, "beforeSubmitPrompt": protocol.SESSION_START}


def parse(data: dict[str, Any]) -> protocol.HookPayload:
    event = protocol.event_of(data, EVENTS, "stop")
    key = "conversation_id" if "conversation_id" in data else "session_id"
    if key not in data:
        raise protocol.PayloadError("'conversation_id' is missing")
    session_id = protocol.session_text(data, key)
    loop_count = data.get("loop_count")
    if loop_count is not None and (isinstance(loop_count, bool)
                                   or not isinstance(loop_count, int) or loop_count < 0):
        raise protocol.PayloadError("'loop_count' is not a count (a whole number, 0 or more)")
    status = protocol.optional_text(data, "status")
    skip = None
    if status in ("aborted", "error"):
        skip = (f"the agent's run ended with status {status!r}: the stop is allowed without "
                "checking (sending it back to work would overrule the user)")
    return protocol.HookPayload(session_id=session_id, cwd=_cwd(data), agent="cursor",
                                event=event, loop_count=loop_count, skip_reason=skip)


def _cwd(data: dict[str, Any]) -> Path:
    """The payload's ``cwd``, else its first workspace root, else the project root (where
    Cursor runs project hooks)."""
    if "cwd" in data:
        return protocol.directory(data["cwd"])
    roots = data.get("workspace_roots")
    if roots is not None:
        if not isinstance(roots, list) or not all(isinstance(root, str) for root in roots):
            raise protocol.PayloadError("'workspace_roots' is not a list of paths")
        if roots:
            return protocol.directory(roots[0], "workspace_roots[0]")
    return Path.cwd()


def render(decision: protocol.Decision) -> str:
    # A stop hook has no channel to the user: the hand-over goes to the agent as one last
    # follow-up to relay (``loop_limit`` is the cap plus one for it); notes go to stderr.
    if decision.block_reason is not None:
        return protocol.dumps({"followup_message": decision.block_reason})
    if decision.human_review and decision.system_message is not None:
        return protocol.dumps({"followup_message": decision.system_message + RELAY})
    if decision.status is None:  # no stop (every stop has an outcome): a prompt goes on
        return protocol.dumps({"continue": True})
    return protocol.dumps({})


def entries(command: str, max_rounds: int) -> list[protocol.HookEntry]:
    return [("beforeSubmitPrompt", {"command": command}),
            ("stop", {"command": command, "loop_limit": max_rounds + 1})]


ADAPTER = protocol.Adapter(
    name="cursor", title="Cursor", parse=parse, render=render,
    config_file=".cursor/hooks.json", entries=entries, top_level={"version": 1},
    after_edit=lambda command: ("afterFileEdit", {"command": command}),
    setup=("Cursor reads .cursor/hooks.json when it starts: restart it; its hooks output shows "
           "the hook's notes",),
)
