"""Gemini CLI's hook protocol: ``AfterAgent`` and ``SessionStart`` in ``.gemini/settings.json``
(fields and answers: ``docs/how-to/agents.md``, "The protocol fields").

PYTEST_DONT_REWRITE
"""

import re
from typing import Any

from pytest_verifygate.agents import SESSION_START_TIMEOUT, STOP_TIMEOUT, claude, protocol

EVENTS = {"SessionStart": protocol.SESSION_START, "AfterAgent": protocol.STOP}
# The first line of every block reason (``stop_hook.block_round``).
_QUOTED_ROUND = re.compile(r"verifygate blocked this stop \(round (\d{1,4}) of \d{1,4}\)")


def parse(data: dict[str, Any]) -> protocol.HookPayload:
    prompt = protocol.optional_text(data, "prompt")
    protocol.optional_text(data, "prompt_response")
    payload = claude.parse(data, agent="gemini", events=EVENTS)
    # Its ``stop_hook_active`` is false on retries that used tools, so it counts nothing; but
    # a retry's prompt is the block reason, whose round is a floor when our count is lost.
    quoted = _QUOTED_ROUND.search(prompt[:1000]) if prompt else None
    return payload._replace(retry_round=int(quoted.group(1)) if quoted else None)


def render(decision: protocol.Decision) -> str:
    # Stdout must hold only this JSON; {} accepts.
    return claude.render(decision, block="deny") or protocol.dumps({})


def entries(command: str, max_rounds: int) -> list[protocol.HookEntry]:
    def group(name: str, seconds: int) -> dict[str, Any]:
        # Gemini CLI's timeouts are in milliseconds.
        hook = protocol.command_hook(command, seconds * 1000, name=name)
        return {"matcher": "*", "hooks": [hook]}

    return [
        ("SessionStart", group("verifygate-session-start", SESSION_START_TIMEOUT)),
        ("AfterAgent", group("verifygate", STOP_TIMEOUT)),
    ]


def after_edit(command: str) -> protocol.HookEntry:
    hook = protocol.command_hook(command, SESSION_START_TIMEOUT * 1000,
                                 name="verifygate-after-edit")
    return ("AfterTool", {"matcher": "write_file|replace|run_shell_command", "hooks": [hook]})


ADAPTER = protocol.Adapter(
    name="gemini", title="Gemini CLI", parse=parse, render=render,
    config_file=".gemini/settings.json", entries=entries, after_edit=after_edit,
    setup=("Gemini CLI loads project hooks only in a trusted folder: trust this one when it "
           "asks; hooks are on by default",
           "headless (`gemini -p`): set GEMINI_CLI_TRUST_WORKSPACE=true (`--skip-trust` "
           "disables project hooks without a word); then `verifygate agent-status` exits 1 "
           "unless the last stop was verified (also when no hook ran)"),
)
