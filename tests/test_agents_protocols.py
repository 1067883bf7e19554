"""``verifygate agent-hook`` in each agent's own protocol: Claude Code, Codex CLI, Cursor and
Gemini CLI payloads, as their documentation shapes them, on real repositories with real gates.

Every agent gets the same policy: the same gates and digest for the same change, the same round
cap and hand-over to a human, the same fail-closed contract errors; only the wire format
differs (``block``/``reason``, ``followup_message``, ``deny``/``reason``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pytest_verifygate.agents.detect import ADAPTERS, detect
from test_agent_hook import (
    BAD,
    CHECK_GATE,
    GOOD,
    HOOK,
    checked_project,
    contract,
)

from conftest import PAYLOADS, HookRun, claude, commit_all, git, run_hook, stop, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

# A failing gate whose output is the same on every run: the digests of two agents can be
# compared byte for byte.
STEADY_GATE = contract('[[gate]]\nname = "steady"\ncommand = [PY, "-c", '
                       '"import sys; print(\'calc.py:2: error: wrong sign\'); sys.exit(1)"]\n'
                       'when_changed = ["*.py"]\n')


AGENTS = list(PAYLOADS)
TITLES = {"claude": "Claude Code", "codex": "Codex CLI", "cursor": "Cursor", "gemini": "Gemini CLI"}


def blocking_reason(agent: str, answer: HookRun) -> str:
    """The reason an answer blocks with, checking the exact fields of the agent's format."""
    data = answer.json
    assert data is not None, answer
    if agent in ("claude", "codex"):
        assert set(data) == {"decision", "reason"} and data["decision"] == "block", data
    elif agent == "gemini":
        assert set(data) == {"decision", "reason"} and data["decision"] == "deny", data
    else:
        assert set(data) == {"followup_message"}, data
        return str(data["followup_message"])
    return str(data["reason"])


def assert_allowed_silently(agent: str, answer: HookRun) -> None:
    if agent in ("claude", "codex"):
        assert answer.stdout == "", answer
    else:
        assert answer.json == {}, answer


@pytest.fixture
def project(repo: Path) -> Path:
    return checked_project(repo)


# --------------------------------------------------------------------------------------------
# failing, passing and capped rounds, in each agent's format


@pytest.mark.parametrize("agent", AGENTS)
def test_a_failing_round_blocks_in_the_agents_format(agent: str, project: Path) -> None:
    write(project / "calc.py", BAD)
    reason = blocking_reason(agent, stop(project, agent=agent))
    assert reason.startswith("verifygate blocked this stop (round 1 of 3): the verify contract's "
                             "gates fail on your changes.")
    assert "### `check` failed: command_failed, exit status 1" in reason
    assert "calc.py:1: error: bug found" in reason


@pytest.mark.parametrize("agent", AGENTS)
def test_a_passing_round_lets_the_agent_stop(agent: str, project: Path) -> None:
    write(project / "calc.py", GOOD + "# reviewed\n")
    answer = stop(project, agent=agent)
    assert_allowed_silently(agent, answer)


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_the_cap_hands_the_work_to_a_human(agent: str, project: Path) -> None:
    write(project / "calc.py", BAD)
    first = stop(project, "--max-rounds", "2", agent=agent)
    assert "round 1 of 2" in blocking_reason(agent, first)
    second = stop(project, "--max-rounds", "2", active=True, agent=agent)
    assert "round 2 of 2" in blocking_reason(agent, second)
    capped = stop(project, "--max-rounds", "2", active=True, agent=agent)
    assert capped.json is not None and set(capped.json) == {"systemMessage"}, capped
    message = capped.json["systemMessage"]
    assert "gates still fail after 2 round(s) of fixes (`check`)" in message
    assert "a human must review" in message
    assert "a human must review" in capped.stderr
    # A human sends the agent back: a fresh set of rounds.
    assert "round 1 of 2" in blocking_reason(agent, stop(project, "--max-rounds", "2", agent=agent))


def test_cursor_counts_the_rounds_with_loop_count(project: Path) -> None:
    write(project / "calc.py", BAD)
    first = stop(project, "--max-rounds", "2", loop_count=0, agent="cursor")
    assert "round 1 of 2" in blocking_reason("cursor", first)
    # Cursor's own count decides, whatever this conversation's state says: a conversation
    # the hook never saw, one follow-up into its run, is in its second round.
    other = stop(project, "--max-rounds", "2", session="s-2", loop_count=1, agent="cursor")
    assert "round 2 of 2" in blocking_reason("cursor", other)
    assert "This is the last round" in blocking_reason("cursor", other)
    # At the cap the hand-over goes to the agent, to relay: the stop hook's only channel.
    capped = stop(project, "--max-rounds", "2", loop_count=2, agent="cursor")
    handed_over = blocking_reason("cursor", capped)
    assert handed_over.startswith("verifygate: gates still fail after 2 round(s) of fixes")
    assert "a human must review" in handed_over
    assert "Do not try another fix for these failures. Stop now, and tell the user" in handed_over
    # The agent relays it and stops again: let it go, without running the gates again.
    write(project / "verify.toml", CHECK_GATE.replace('"check.py"', '"check.py", "ran.txt"'))
    after = stop(project, "--max-rounds", "2", loop_count=3, agent="cursor")
    assert after.json == {}
    assert "already sent back 3 time(s) in this run" in after.stderr
    assert not (project / "ran.txt").exists()
    # The user prompts again (Cursor's count restarts): fresh rounds.
    assert "round 1 of 2" in blocking_reason(
        "cursor", stop(project, "--max-rounds", "2", loop_count=0, agent="cursor"))


@pytest.mark.parametrize("status", ["aborted", "error"])
def test_cursor_never_overrules_a_stop_the_user_aborted(status: str, project: Path) -> None:
    write(project / "calc.py", BAD)
    write(project / "verify.toml", CHECK_GATE.replace('"check.py"', '"check.py", "ran.txt"'))
    answer = stop(project, status=status, agent="cursor")
    assert answer.json == {}
    assert f"status {status!r}" in answer.stderr
    assert not (project / "ran.txt").exists()


def test_every_agent_gets_the_same_digest_for_the_same_change(repo: Path) -> None:
    write(repo / "verify.toml", STEADY_GATE)
    write(repo / "calc.py", GOOD)
    commit_all(repo)
    write(repo / "calc.py", BAD)
    reasons = {agent: blocking_reason(agent, stop(repo, session=f"same-{agent}", agent=agent))
               for agent in AGENTS}
    assert len(set(reasons.values())) == 1, reasons
    assert "calc.py:2: error: wrong sign" in reasons["claude"]


# --------------------------------------------------------------------------------------------
# fail closed, and what is not a payload


@pytest.mark.parametrize("agent", AGENTS)
def test_an_unreadable_contract_blocks_every_agent(agent: str, project: Path) -> None:
    write(project / "verify.toml", CHECK_GATE + "timeout_secnds = 5\n")
    reason = blocking_reason(agent, stop(project, agent=agent))
    assert "the verify contract cannot be loaded" in reason
    assert "timeout_secnds" in reason


@pytest.mark.parametrize("raw", [
    b'{"event": "stop", "id": 3}',
    b"[1, 2]",
    b"not json at all",
    b"",
])
def test_an_unknown_payload_blocks_with_exit_status_2(raw: bytes, tmp_path: Path) -> None:
    """No protocol to answer in: exit status 2 with the reason on stderr, which Claude Code,
    Codex CLI and Gemini CLI read as a block."""
    done = subprocess.run(HOOK, input=raw, capture_output=True, timeout=120, cwd=tmp_path,
                          check=False)
    assert done.returncode == 2, done
    assert done.stdout == b""
    assert b"verifygate blocked this stop (round 1 of 3)" in done.stderr
    assert b"Traceback" not in done.stderr


def test_the_unknown_event_is_named(tmp_path: Path) -> None:
    answer = run_hook({"hook_event_name": "PreToolUse", "session_id": "s", "cwd": str(tmp_path)})
    assert "unrecognised hook input: hook event 'PreToolUse'" in answer.stderr


@pytest.mark.parametrize(("agent", "payload", "expected"), [
    ("cursor", b'{"conversation_id": "c", "loop_count": -1}', "'loop_count' is not a count"),
    ("cursor", b'{"hook_event_name": "stop", "loop_count": 0}', "'conversation_id' is missing"),
    ("gemini", b'{"hook_event_name": "AfterAgent", "session_id": "s", "cwd": "/", '
               b'"prompt_response": 7}', "'prompt_response' is not a string"),
    ("codex", b'{"hook_event_name": "Stop", "turn_id": "t", "cwd": "/"}',
     "'session_id' is missing"),
])
def test_a_malformed_payload_of_a_known_agent_blocks_in_its_format(
        agent: str, payload: bytes, expected: str, tmp_path: Path) -> None:
    answer = run_hook(payload, cwd=tmp_path)
    assert f"malformed {TITLES[agent]} hook input: {expected}" in answer.stderr
    reason = blocking_reason(agent, answer)
    assert reason.startswith("verifygate blocked this stop (round 1 of 3): your work could not "
                             "be checked")
    assert expected in reason


# --------------------------------------------------------------------------------------------
# recognising the agent, and --agent


def test_agent_overrides_what_the_payload_looks_like(project: Path) -> None:
    write(project / "calc.py", BAD)
    # A Claude-shaped payload, answered as Gemini CLI expects because the hook was told so.
    answer = run_hook(claude(project, "told", event="AfterAgent"), "--agent", "gemini")
    assert blocking_reason("gemini", answer).startswith("verifygate blocked this stop")
    # A Cursor payload without an event name.
    bare = {"conversation_id": "bare", "workspace_roots": [str(project)], "loop_count": 0}
    assert "round 1 of 3" in blocking_reason("cursor", run_hook(bare, "--agent", "cursor"))


def test_cursor_payload_with_a_byte_order_mark_and_no_roots(project: Path) -> None:
    write(project / "calc.py", BAD)
    payload = {"conversation_id": "bom", "hook_event_name": "stop", "status": "completed",
               "loop_count": 0}
    # Cursor runs project hooks from the project root: that is the repository then.
    answer = run_hook(b"\xef\xbb\xbf" + json.dumps(payload).encode(), cwd=project)
    assert "round 1 of 3" in blocking_reason("cursor", answer)


START_EVENTS = {"claude": {"event": "SessionStart", "source": "startup"},
                "codex": {"event": "SessionStart", "source": "startup"},
                "gemini": {"event": "SessionStart", "source": "startup"},
                # Cursor has no session start hook: the conversation's first prompt is its start.
                "cursor": {"hook_event_name": "beforeSubmitPrompt", "prompt": "Fix calc.py"}}


@pytest.mark.parametrize("agent", AGENTS)
def test_session_start_records_the_start_in_each_protocol(agent: str, project: Path) -> None:
    head = git(project, "rev-parse", "HEAD").strip()
    started = run_hook(PAYLOADS[agent](project, "s-1", **START_EVENTS[agent]))
    if agent == "gemini":
        assert started.json == {}  # stdout holds only JSON
    elif agent == "cursor":
        assert started.json == {"continue": True}  # the prompt goes on
    else:
        assert started.stdout == ""  # it would become the agent's context
    write(project / "calc.py", BAD)
    commit_all(project, "the agent commits broken work")
    # A later prompt of the same conversation keeps the start.
    run_hook(PAYLOADS[agent](project, "s-1", **START_EVENTS[agent]))
    reason = blocking_reason(agent, run_hook(PAYLOADS[agent](project, "s-1")))
    assert f"every change since HEAD when the session began ({head[:12]})" in reason


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_subagent_stop_is_not_gated(agent: str, project: Path) -> None:
    """A read-only subagent is never sent back for its parent's unfinished work, nor uses up
    the parent's rounds: the parent's own stop checks everything, the subagent's work too."""
    write(project / "verify.toml", CHECK_GATE.replace('"check.py"', '"check.py", "ran.txt"'))
    commit_all(project)
    write(project / "calc.py", BAD)
    assert "round 1 of 3" in blocking_reason(agent, stop(project, agent=agent))
    for _ in range(4):
        sub = stop(project, event="SubagentStop", agent_id="explore-1",
                   agent_type="Explore", agent_transcript_path=None, agent=agent)
        assert sub.stdout == "" and sub.stderr == "", sub
    assert (project / "ran.txt").read_text().count("ran") == 1  # no gate ran for them
    assert "round 2 of 3" in blocking_reason(agent, stop(project, agent=agent))


@pytest.mark.parametrize(("transcript", "agent"), [
    (None, "codex"),
    ("/home/u/.codex/sessions/2026/01/01/rollout-2026-01-01T00-00-00-0199.jsonl", "codex"),
    ("/home/u/.claude/projects/-repo/3f2a9c1d.jsonl", "claude"),
])
def test_a_session_start_without_turn_id_is_told_apart(transcript: str | None, agent: str,
                                                      project: Path) -> None:
    """Codex's SessionStart has no turn_id: a null transcript or Codex's rollout file tells
    it; either way it is answered with nothing, and the start is recorded."""
    payload = {"session_id": f"start-{agent}", "transcript_path": transcript,
               "cwd": str(project), "hook_event_name": "SessionStart", "model": "m",
               "permission_mode": "default", "source": "startup"}
    assert detect(payload) is ADAPTERS[agent]
    started = run_hook(payload)
    assert started.stdout == "" and started.stderr == ""
    write(project / "calc.py", BAD)
    commit_all(project)
    reason = blocking_reason(agent, stop(project, session=f"start-{agent}", agent=agent))
    assert "every change since HEAD when the session began" in reason


def test_the_agent_flag_takes_only_known_agents(tmp_path: Path) -> None:
    done = subprocess.run([*HOOK, "--agent", "copilot"], input=b"{}", capture_output=True,
                          cwd=tmp_path, check=False)
    assert done.returncode == 1  # a usage error the user sees, never a block
    assert b"invalid choice: 'copilot'" in done.stderr
