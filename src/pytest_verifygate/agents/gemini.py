"""Gemini CLI's hook protocol (``AfterAgent`` and ``SessionStart`` in ``.gemini/settings.json``).

Input, a JSON object on stdin: ``session_id``, ``cwd``, ``hook_event_name``, ``timestamp``,
``transcript_path``; ``AfterAgent`` adds ``prompt``, ``prompt_response`` and
``stop_hook_active`` (true while the turn is a retry a hook asked for); ``SessionStart`` adds
``source``. ``timestamp`` is what tells Gemini CLI's ``SessionStart`` from Claude Code's.

Output: stdout must hold only the JSON, at exit status 0. ``{"decision": "deny", "reason":
...}`` rejects the response, and the reason becomes the agent's next prompt;
``{"systemMessage": ...}`` is shown to the user; ``{}`` accepts. Timeouts in the settings are
in milliseconds. Hooks are on by default, but project hooks load only in a trusted folder.

``stop_hook_active`` is true only when the retry ended without tool calls, so it is no count;
on a retry, ``prompt`` is the reason the hook blocked with, and the round it names is a floor
for the count when ours is lost (``retry_round``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re
from typing import Any

from pytest_verifygate.agents import claude
from pytest_verifygate.agents.protocol import (
    SESSION_START,
    SESSION_START_TIMEOUT,
    STOP,
    STOP_TIMEOUT,
    Adapter,
    Decision,
    HookEntry,
    HookPayload,
    command_hook,
    dumps,
    optional_text,
)

EVENTS = {"SessionStart": SESSION_START, "AfterAgent": STOP}
# The first line of every block reason (``stop_hook.block_round``).
_QUOTED_ROUND = re.compile(r"verifygate blocked this stop \(round (\d{1,4}) of \d{1,4}\)")


def parse(data: dict[str, Any]) -> HookPayload:
    prompt = optional_text(data, "prompt")
    optional_text(data, "prompt_response")
    payload = claude.parse(data, agent="gemini", events=EVENTS)
    quoted = _QUOTED_ROUND.search(prompt[:1000]) if prompt else None
    return payload._replace(retry_round=int(quoted.group(1)) if quoted else None)


def render(decision: Decision) -> str:
    data: dict[str, Any] = {}
    if decision.block_reason is not None:
        data = {"decision": "deny", "reason": decision.block_reason}
    if decision.system_message is not None:
        data["systemMessage"] = decision.system_message
    return dumps(data)


def entries(command: str, max_rounds: int) -> list[HookEntry]:
    def group(name: str, seconds: int) -> dict[str, Any]:
        return {"matcher": "*", "hooks": [command_hook(command, seconds * 1000, name=name)]}

    return [
        ("SessionStart", group("verifygate-session-start", SESSION_START_TIMEOUT)),
        ("AfterAgent", group("verifygate", STOP_TIMEOUT)),
    ]


ADAPTER = Adapter(
    name="gemini", title="Gemini CLI", parse=parse, render=render,
    config_file=".gemini/settings.json", entries=entries,
    setup=("Gemini CLI loads project hooks only in a trusted folder: trust this one when it "
           "asks; hooks are on by default",
           "headless (`gemini -p`): set GEMINI_CLI_TRUST_WORKSPACE=true (`--skip-trust` "
           "disables project hooks without a word); then `verifygate agent-status` exits 1 "
           "unless the last stop was verified (also when no hook ran)"),
)
