"""Claude Code's hook protocol, which Codex CLI shares (``docs/how-to/agents.md``, "The
protocol fields").

PYTEST_DONT_REWRITE
"""

from typing import Any

from pytest_verifygate.agents import SESSION_START_TIMEOUT, STOP_TIMEOUT, protocol

EVENTS = {"SessionStart": protocol.SESSION_START, "Stop": protocol.STOP,
          "SubagentStop": protocol.SUBAGENT_STOP}


def parse(data: dict[str, Any], *, agent: str = "claude",
          events: dict[str, str] = EVENTS) -> protocol.HookPayload:
    session_id = protocol.session_text(data, "session_id")
    cwd = protocol.directory(data.get("cwd"))
    active = data.get("stop_hook_active", False)
    if not isinstance(active, bool):
        raise protocol.PayloadError("'stop_hook_active' is not true or false")
    # Without ``hook_event_name``: a Stop, as older releases sent it.
    event = protocol.event_of(data, events, "Stop")
    agent_id = protocol.optional_text(data, "agent_id")
    return protocol.HookPayload(session_id=session_id, cwd=cwd, agent=agent, event=event,
                                stop_hook_active=active, agent_id=agent_id)


def render(decision: protocol.Decision, *, block: str = "block") -> str:
    # Always exit status 0: 2 would also block, any other is shown as a hook error. Nothing at
    # all lets the agent stop, and is what a SessionStart gets (its output becomes context).
    data: dict[str, Any] = {}
    if decision.block_reason is not None:
        data = {"decision": block, "reason": decision.block_reason}
    if decision.system_message is not None:
        data["systemMessage"] = decision.system_message
    return protocol.dumps(data) if data else ""


def entries(command: str, max_rounds: int) -> list[protocol.HookEntry]:
    # No SubagentStop hook: a subagent's stop is not gated (``stop_hook.py``).
    return [
        ("SessionStart",
         {"hooks": [protocol.command_hook(command, SESSION_START_TIMEOUT)]}),
        ("Stop", {"hooks": [protocol.command_hook(command, STOP_TIMEOUT)]}),
    ]


def after_edit(command: str) -> protocol.HookEntry:
    # Agents edit through the shell too.
    return ("PostToolUse", {"matcher": "Edit|MultiEdit|Write|NotebookEdit|Bash",
                            "hooks": [protocol.command_hook(command, SESSION_START_TIMEOUT)]})


ADAPTER = protocol.Adapter(
    name="claude", title="Claude Code", parse=parse, render=render,
    # The command holds this machine's interpreter path: Claude Code's per-user file, which
    # is not committed, rather than the shared one.
    config_file=".claude/settings.local.json", shared_file=".claude/settings.json",
    entries=entries, retired=("SubagentStop",), after_edit=after_edit,
    setup=("Claude Code reads project hooks when a session starts: restart running sessions "
           "(a changed hook is reviewed in /hooks); the project's trust prompt must be "
           "accepted once",
           "headless (`claude -p`): nothing more; then `verifygate agent-status` exits 1 "
           "unless the last stop was verified"),
)
