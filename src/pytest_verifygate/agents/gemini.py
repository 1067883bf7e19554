"""Gemini CLI's hook protocol: ``AfterAgent`` and ``SessionStart`` in ``.gemini/settings.json``
(fields and answers: ``docs/how-to/agents.md``, "The protocol fields").

Its ``stop_hook_active`` is true only when a retry ended without tool calls, so it counts
nothing; but on a retry, ``prompt`` is the reason the hook blocked with, and the round it
names is a floor for the count when ours is lost (``retry_round``).

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
    # Stdout must hold only this JSON; {} accepts.
    data: dict[str, Any] = {}
    if decision.block_reason is not None:
        data = {"decision": "deny", "reason": decision.block_reason}
    if decision.system_message is not None:
        data["systemMessage"] = decision.system_message
    return dumps(data)


def entries(command: str, max_rounds: int) -> list[HookEntry]:
    def group(name: str, seconds: int) -> dict[str, Any]:
        # Gemini CLI's timeouts are in milliseconds.
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
