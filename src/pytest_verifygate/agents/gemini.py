"""Gemini CLI's hook protocol (``AfterAgent`` and ``SessionStart`` in ``.gemini/settings.json``).

Input, a JSON object on stdin: ``session_id``, ``cwd``, ``hook_event_name``, ``timestamp``,
``transcript_path``; ``AfterAgent`` adds ``prompt``, ``prompt_response`` and
``stop_hook_active`` (true while the turn is a retry a hook asked for); ``SessionStart`` adds
``source``. ``timestamp`` is what tells Gemini CLI's ``SessionStart`` from Claude Code's.

Output: stdout must hold only the JSON, at exit status 0. ``{"decision": "deny", "reason":
...}`` rejects the response, and the reason becomes the agent's next prompt;
``{"systemMessage": ...}`` is shown to the user; ``{}`` accepts. Timeouts in the settings are
in milliseconds. Hooks run only while Gemini CLI's hooks system is enabled (``/settings``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import Any

from pytest_verifygate.agents import claude
from pytest_verifygate.agents.protocol import (
    SESSION_START,
    STOP,
    Adapter,
    Decision,
    HookEntry,
    HookPayload,
    command_hook,
    dumps,
    optional_text,
)

EVENTS = {"SessionStart": SESSION_START, "AfterAgent": STOP}


def parse(data: dict[str, Any]) -> HookPayload:
    for key in ("prompt", "prompt_response"):
        optional_text(data, key)
    return claude.parse(data, agent="gemini", events=EVENTS)


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
        ("SessionStart", group("verifygate-session-start", claude.SESSION_START_TIMEOUT)),
        ("AfterAgent", group("verifygate", claude.STOP_TIMEOUT)),
    ]


ADAPTER = Adapter(
    name="gemini", title="Gemini CLI", parse=parse, render=render,
    config_file=".gemini/settings.json", entries=entries,
    setup_note="Gemini CLI runs hooks only while its hooks system is enabled (/settings, "
               "\"Enable Hooks System\")",
)
