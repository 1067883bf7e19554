"""What every agent's hook protocol shares: the payload, decision and adapter records, reading
the payload, and the hook timeouts.

PYTEST_DONT_REWRITE
"""

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from pytest_verifygate.agents.state import SessionState

# A model's answer (Gemini CLI's ``prompt_response``) can pass 1 MiB, but not this; a larger
# payload is not read, and the stop is blocked.
MAX_PAYLOAD_BYTES = 64 << 20

# The moments the policy knows, whatever each agent calls them.
STOP = "stop"
SUBAGENT_STOP = "subagent_stop"
SESSION_START = "session_start"


class PayloadError(Exception):
    """The hook input is not what the agent's stop hook receives."""


class NotAStop(PayloadError):
    """A well-formed payload of an event that is no stop (``PreToolUse``): nothing to check."""


class HookPayload(NamedTuple):
    """What the policy needs from any agent's hook input. ``loop_count``: the agent's own count
    of rounds in this run (Cursor; None: the count is ours); ``skip_reason``: why this stop is
    not checked (Cursor: the user aborted it); ``retry_round``: the round whose block reason
    the input quotes (Gemini CLI), a floor for our count when it is lost."""

    session_id: str
    cwd: Path
    agent: str = "claude"
    event: str = STOP
    stop_hook_active: bool = False
    agent_id: str | None = None
    loop_count: int | None = None
    skip_reason: str | None = None
    retry_round: int | None = None

    @property
    def state_key(self) -> str:
        """Whose rounds these are: parallel subagents share the session id, and must not use
        up each other's rounds."""
        return self.session_id if self.agent_id is None else f"{self.session_id}/{self.agent_id}"


class Decision(NamedTuple):
    """Block with a reason for the agent, or allow (maybe with a note for the user).
    ``human_review``: the allow that ends the rounds; ``status``: the outcome for
    ``verifygate agent-status`` (None: none)."""

    block_reason: str | None = None
    system_message: str | None = None
    state: SessionState = SessionState()  # immutable, so one shared fresh state is safe
    human_review: bool = False
    status: str | None = None


# (event name in the agent's configuration, the entry to add there): see ``config.py``.
HookEntry = tuple[str, dict[str, Any]]


class Adapter(NamedTuple):
    """One agent's protocol: ``parse`` its payload (or raise ``PayloadError``), ``render`` a
    decision as its stdout, and what ``install-agent-hook`` writes: the ``entries`` for a
    command and a round cap, keys the file must have (``top_level``), events whose hook is
    removed (``retired``), what the agent needs before the hook runs (``setup``), the
    agent's committed file beside a per-user ``config_file`` (``shared_file``) and the
    entry of its after-edit event (``after_edit``)."""

    name: str
    title: str
    parse: Callable[[dict[str, Any]], HookPayload]
    render: Callable[[Decision], str]
    config_file: str
    entries: Callable[[str, int], list[HookEntry]]
    top_level: Mapping[str, Any] = {}
    retired: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    shared_file: str | None = None
    # The entry of the after-edit event for a command (``install-agent-hook --background``).
    after_edit: Callable[[str], HookEntry] | None = None


def read_input(stream: BinaryIO) -> bytes:
    """The hook's input, up to one byte past ``MAX_PAYLOAD_BYTES``; the rest of a larger one is
    drained, so that the agent writing it does not meet a closed pipe."""
    raw = stream.read(MAX_PAYLOAD_BYTES + 1)
    if len(raw) > MAX_PAYLOAD_BYTES:
        while stream.read(1 << 20):
            pass
    return raw


def json_object(raw: bytes) -> dict[str, Any]:
    """The hook input as a JSON object; ``PayloadError`` says what is wrong with it."""
    if not raw.strip():
        raise PayloadError("empty input: expected the hook's JSON object on stdin")
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise PayloadError(f"input larger than {MAX_PAYLOAD_BYTES >> 20} MiB, too large to read")
    try:
        # utf-8-sig: Cursor has been seen to start its payload with a byte-order mark.
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise PayloadError("input is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise PayloadError(f"input is not JSON ({exc.msg} at line {exc.lineno} column "
                           f"{exc.colno})") from None
    except RecursionError:
        raise PayloadError("input is JSON nested too deeply to be a hook payload") from None
    if not isinstance(data, dict):
        raise PayloadError(f"input is JSON {type(data).__name__}, expected an object")
    return data


def dumps(data: Mapping[str, Any]) -> str:
    """One JSON object on one line: what every agent reads from a hook's stdout."""
    return json.dumps(data) + "\n"


def session_text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise PayloadError(f"'{key}' is missing or not a non-empty string")
    return value


def optional_text(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise PayloadError(f"'{key}' is not a string")
    return value or None


def directory(value: object, key: str = "cwd") -> Path:
    if not isinstance(value, str) or not value:
        raise PayloadError(f"'{key}' is missing or not a string")
    if not os.path.isabs(value):
        raise PayloadError(f"'{key}' must be an absolute path, got {value!r}")
    if not os.path.isdir(value):
        raise PayloadError(f"'{key}' is not a directory: {value!r}")
    return Path(value)


def event_of(data: Mapping[str, Any], events: Mapping[str, str], default: str | None) -> str:
    """The policy's event for the payload's ``hook_event_name``, by the agent's ``events``."""
    name = data.get("hook_event_name", default)
    if name is None:
        raise PayloadError("'hook_event_name' is missing")
    if not isinstance(name, str):
        raise PayloadError("'hook_event_name' is not a string")
    if name not in events:
        raise NotAStop(f"hook event {name!r} is not one this hook handles "
                       f"({', '.join(events)}): register it for {', '.join(events)}")
    return events[name]


def command_hook(command: str, timeout: int, **extra: Any) -> dict[str, Any]:
    """A ``{"type": "command", ...}`` hook, the shape Claude Code, Codex and Gemini CLI share."""
    return {**extra, "type": "command", "command": command, "timeout": timeout}
