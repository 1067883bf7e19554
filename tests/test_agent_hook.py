"""``verifygate agent-hook``: real Stop-hook payloads, real git repositories, real gates."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_verifygate.agents.state import Rounds, session_file_stem
from pytest_verifygate.contract import find_repo_root
from pytest_verifygate.report.digest import TOTAL_BYTES
from test_digest import code_blocks

from conftest import begun, commit_all, git, run_hook, stop, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

_SCRIPT = Path(sys.executable).with_name("verifygate")
HOOK = ([str(_SCRIPT)] if _SCRIPT.exists() else
        [sys.executable, "-m", "pytest_verifygate.cli"]) + ["agent-hook"]

# The gate: fails while any Python file holds "BUG", printing absolute paths and a timestamp
# (both vary between rounds; the repeated-failure check must see through them).
CHECK = """\
import pathlib, sys, time
if len(sys.argv) > 1:
    with open(sys.argv[1], "a") as marker:
        marker.write("ran\\n")
bad = [p for p in sorted(pathlib.Path(".").rglob("*.py"))
       if p.name != "check.py" and "BUG" in p.read_text()]
for p in bad:
    print(f"{p.resolve()}:1: error: bug found (checked at {time.time()})")
sys.exit(1 if bad else 0)
"""
GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a - b  # BUG\n"


def contract(gates: str) -> str:
    return gates.replace("PY", json.dumps(sys.executable))


CHECK_GATE = contract('[[gate]]\nname = "check"\ncommand = [PY, "check.py"]\n')


def checked_project(repo: Path) -> Path:
    """``repo`` made a project whose one gate, ``check``, fails while ``calc.py`` contains a
    bug (the ``project`` fixture of every agent hook test module)."""
    write(repo / "check.py", CHECK)
    write(repo / "verify.toml", CHECK_GATE)
    write(repo / "calc.py", GOOD)
    commit_all(repo)
    return repo


@pytest.fixture
def project(repo: Path) -> Path:
    return checked_project(repo)


def status(repo: Path) -> list[str]:
    return git(repo, "status", "--porcelain", "--ignored", "--untracked-files=all").splitlines()


def rounds_path(repo: Path, session: str = "s-1") -> Path:
    """Where the hook counts a session's rounds in ``repo``: the user's state directory."""
    path = Rounds.of(session, find_repo_root(repo) or repo).path
    assert path is not None
    return path


def saved_state(repo: Path, session: str = "s-1") -> dict[str, Any]:
    data: dict[str, Any] = json.loads(rounds_path(repo, session).read_text())
    return data


# --------------------------------------------------------------------------------------------
# block and allow


def test_blocks_while_the_bug_is_there_and_allows_once_fixed(project: Path) -> None:
    write(project / "calc.py", BAD)
    first = stop(project)
    assert first.blocked
    reason = first.reason
    assert reason.startswith("verifygate blocked this stop (round 1 of 3)")
    assert "### `check` failed: command_failed, exit status 1" in reason
    assert "Hint: Read the output below" in reason
    (block,) = code_blocks(reason)
    assert block.startswith("calc.py:1: error: bug found")  # relative: deterministic
    assert str(project) not in reason
    assert "identical" not in reason
    assert saved_state(project)["rounds"] == 1

    write(project / "calc.py", GOOD.replace("a + b", "b + a"))  # fixed, still a change
    fixed = stop(project)
    assert fixed.stdout == ""
    assert saved_state(project)["rounds"] == 0


def test_no_changes_allows_without_running_the_gates(project: Path, tmp_path: Path) -> None:
    write(project / "calc.py", BAD)
    write(project / "verify.toml", contract(
        f'[[gate]]\nname = "check"\ncommand = [PY, "check.py", "{tmp_path / "ran"}"]\n'))
    commit_all(project, "the bug is committed, the working tree is clean")
    run = stop(project)
    assert run.stdout == ""
    assert not (tmp_path / "ran").exists()


def test_untracked_files_count_as_changes(project: Path) -> None:
    write(project / "new_module.py", "x = 1  # BUG\n")
    run = stop(project)
    assert run.blocked
    assert "new_module.py:1: error: bug found" in run.reason


def test_changed_from_judges_committed_work_since_the_ref(project: Path) -> None:
    git(project, "switch", "-q", "-c", "feature")
    write(project / "calc.py", BAD)
    commit_all(project, "bug on a branch")
    assert stop(project).stdout == ""  # clean working tree: nothing to verify
    assert stop(project, "--changed-from", "main").blocked


def test_payload_cwd_in_a_subdirectory_finds_the_contract_above(project: Path) -> None:
    write(project / "pkg" / "mod.py", "y = 2  # BUG\n")
    run = stop(project / "pkg")
    assert run.blocked
    assert "pkg/mod.py:1: error: bug found" in run.reason


def test_role_selects_the_gates(project: Path) -> None:
    write(project / "verify.toml", CHECK_GATE + 'roles = ["reviewer"]\n')
    commit_all(project)
    write(project / "calc.py", BAD)
    assert stop(project, "--role", "implementer").stdout == ""  # no gate applies
    assert stop(project, "--role", "reviewer").blocked


def test_repository_without_commits_checks_every_file(repo: Path) -> None:
    write(repo / "check.py", CHECK)
    write(repo / "verify.toml", CHECK_GATE)
    write(repo / "calc.py", BAD)
    run = stop(repo)
    assert run.blocked
    assert "calc.py:1: error: bug found" in run.reason


def test_pending_manual_gate_allows_and_tells_the_user(project: Path) -> None:
    write(project / "verify.toml", CHECK_GATE + '[[gate]]\nname = "design-review"\n'
          'command = "sign off in the tracker"\nkind = "manual"\n')
    commit_all(project)
    write(project / "calc.py", GOOD + "\n")
    run = stop(project)
    assert "awaiting human sign-off: `design-review`" in run.message


# --------------------------------------------------------------------------------------------
# rounds


def test_repeated_failure_is_noted_and_the_cap_hands_over_to_a_human(project: Path) -> None:
    write(project / "calc.py", BAD)
    first = stop(project, "--max-rounds", "2")
    assert "round 1 of 2" in first.reason
    assert "identical" not in first.reason

    second = stop(project, "--max-rounds", "2", active=True)
    assert "round 2 of 2" in second.reason
    assert "identical to the previous round's" in second.reason
    assert "This is the last round" in second.reason

    third = stop(project, "--max-rounds", "2", active=True)
    assert "still fail after 2 round(s)" in third.message
    assert "a human must review" in third.message
    assert "`check`" in third.message
    start = git(project, "rev-parse", "HEAD").strip()
    assert f"verifygate run --changed-from {start[:12]}" in third.message
    assert "human must review" in third.stderr
    report = json.loads(rounds_path(project).with_suffix(".report.json").read_text())
    assert report["verdict"] == "failed"
    assert saved_state(project)["rounds"] == 0

    # The stop was allowed; when a human sends the agent back to work, it gets fresh rounds.
    fourth = stop(project, "--max-rounds", "2")
    assert "round 1 of 2" in fourth.reason


def test_a_different_failure_is_not_called_identical(project: Path) -> None:
    write(project / "calc.py", BAD)
    assert stop(project).blocked
    write(project / "other.py", "z = 3  # BUG\n")
    second = stop(project)
    assert "round 2 of 3" in second.reason
    assert "identical" not in second.reason
    assert "other.py:1: error" in second.reason
    third = stop(project)
    assert "round 3 of 3" in third.reason
    assert "identical to the previous round's" in third.reason


def test_a_passing_round_resets_the_count(project: Path) -> None:
    write(project / "calc.py", BAD)
    assert "round 1 of 3" in stop(project).reason
    assert "round 2 of 3" in stop(project).reason
    write(project / "calc.py", GOOD + "# fixed\n")
    assert stop(project).stdout == ""
    write(project / "calc.py", BAD)
    assert "round 1 of 3" in stop(project).reason


def test_sessions_are_counted_separately(project: Path) -> None:
    write(project / "calc.py", BAD)
    stop(project, session="alpha")
    assert "round 2 of 3" in stop(project, session="alpha").reason
    assert "round 1 of 3" in stop(project, session="beta").reason
    assert "round 3 of 3" in stop(project, session="alpha").reason


def test_state_lives_in_the_private_directory_never_in_the_repository(project: Path) -> None:
    """Rounds, reports and the session's record are kept where an agent confined to the
    workspace cannot write: nothing under the work tree or ``.git``."""
    write(project / "calc.py", BAD)
    before = status(project)
    session = "../../evil/session id\u00e9"
    for _ in range(3):
        assert stop(project, session=session).blocked
    assert status(project) == before == [" M calc.py"]
    assert not (project / ".git" / "verifygate" / "agent").exists()
    stem = session_file_stem(session)
    path = rounds_path(project, session)
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{stem}.json",
                                                             f"{stem}.report.json"]
    assert "/" not in stem and not stem.startswith(".")
    state = saved_state(project, session)
    assert state["key"] == session
    assert state["rounds"] == 3
    assert state["failed_gates"] == ["check"]


def test_a_file_in_place_of_the_git_state_directory_changes_no_count(project: Path) -> None:
    shutil.rmtree(project / ".git" / "verifygate", ignore_errors=True)
    (project / ".git" / "verifygate").write_text("not a directory\n")
    write(project / "calc.py", BAD)
    assert "round 1 of 3" in stop(project).reason
    assert "round 2 of 3" in stop(project).reason  # stop_hook_active false: our count holds


def test_unreadable_state_starts_over(project: Path) -> None:
    write(project / "calc.py", BAD)
    stop(project)
    rounds_path(project).write_text("{not json")
    run = stop(project)
    assert "round 1 of 3" in run.reason
    assert "ignoring unreadable state" in run.stderr


# --------------------------------------------------------------------------------------------
# bounds


def test_megabytes_of_backticks_give_a_bounded_reason(project: Path) -> None:
    write(project / "verify.toml", contract(
        '[[gate]]\nname = "noisy"\ncommand = [PY, "-c", '
        '"import sys; sys.stdout.write((\'`\' * 5000 + \'\\\\n\') * 400 + \'```` last line\\\\n\');'
        ' sys.exit(1)"]\n'))
    commit_all(project)
    write(project / "calc.py", GOOD + "\n")
    run = stop(project)
    assert len(run.reason.encode()) <= TOTAL_BYTES + 1024
    (block,) = code_blocks(run.reason)
    assert block.endswith("```` last line")


# --------------------------------------------------------------------------------------------
# what prevents checking blocks (fail closed), with the reason, never a traceback


@pytest.mark.parametrize(("raw", "expected"), [
    (b"", "malformed hook input: empty input"),
    (b"   \n", "malformed hook input: empty input"),
    (b"{not json", "malformed hook input: input is not JSON"),
    (b"\xff\xfe{}", "malformed hook input: input is not UTF-8"),
    (b'["session_id"]', "malformed hook input: input is JSON list, expected an object"),
    (b'{"cwd": "/"}', "unrecognised hook input: input without a known 'hook_event_name'"),
])
def test_input_of_no_agent_blocks_with_exit_status_2_until_the_cap(raw: bytes, expected: str,
                                                                  project: Path) -> None:
    """No agent's protocol can be spoken: exit status 2 with the reason on stderr is what
    Claude Code, Codex CLI and Gemini CLI all read as a block. Counted per repository."""
    for round_number in (1, 2):
        done = run_hook(raw, "--max-rounds", "2", cwd=project, status=None)
        assert done.returncode == 2, done
        assert done.stdout == ""
        assert f"verifygate blocked this stop (round {round_number} of 2)" in done.stderr
        assert expected in done.stderr
    capped = run_hook(raw, "--max-rounds", "2", cwd=project)
    assert capped.returncode == 0, capped
    assert capped.stdout == ""
    assert "a human must review" in capped.stderr


def test_a_payload_of_another_event_is_no_stop_and_is_let_be() -> None:
    raw = b'{"session_id": "s", "cwd": "/", "hook_event_name": "PreToolUse"}'
    done = run_hook(raw)
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "unrecognised hook input: hook event 'PreToolUse' is not a stop hook payload" in (
        done.stderr)


@pytest.mark.parametrize(("raw", "expected"), [
    (b'{"session_id": 7, "cwd": "/"}', "'session_id' is missing or not a non-empty string"),
    (b'{"session_id": "s"}', "'cwd' is missing"),
    (b'{"session_id": "s", "cwd": "relative/dir"}', "must be an absolute path"),
    (b'{"session_id": "s", "cwd": "/no/such/dir/anywhere"}', "is not a directory"),
    (b'{"session_id": "s", "cwd": "/", "stop_hook_active": "yes"}', "'stop_hook_active'"),
    (b'{"session_id": "s", "cwd": "/", "agent_id": 3}', "'agent_id' is not a string"),
    (b'{"session_id": "s", "cwd": "/", "hook_event_name": "Stop", "agent_id": []}',
     "'agent_id' is not a string"),
])
def test_a_malformed_payload_blocks_with_a_clear_reason(raw: bytes, expected: str,
                                                         tmp_path: Path) -> None:
    run = run_hook(raw, cwd=tmp_path)
    assert "malformed Claude Code hook input" in run.stderr
    assert expected in run.reason
    assert run.reason.startswith("verifygate blocked this stop (round 1 of 3): your work could "
                                 "not be checked")


def test_a_malformed_payload_with_the_agent_named_is_answered_in_its_format(
        tmp_path: Path) -> None:
    run = run_hook(b"{not json", "--agent", "claude", cwd=tmp_path)
    assert "malformed hook input: input is not JSON" in run.reason


def test_contract_error_blocks_the_stop_and_names_the_problem(project: Path) -> None:
    write(project / "verify.toml", CHECK_GATE + "timeout_secnds = 5\n")
    write(project / "calc.py", BAD)
    run = stop(project, "--max-rounds", "1")
    assert run.blocked  # fail closed: an agent that breaks the contract is not let go
    assert "the verify contract cannot be loaded" in run.reason
    assert "timeout_secnds" in run.reason
    assert "contract error" in run.stderr and "timeout_secnds" in run.stderr
    # The round cap holds for it as for failing gates: then a human decides.
    handed_over = stop(project, "--max-rounds", "1")
    assert "still cannot be loaded after 1 round(s)" in handed_over.message
    assert "timeout_secnds" in handed_over.message


def test_missing_contract_allows_the_stop(repo: Path) -> None:
    write(repo / "calc.py", BAD)
    run = stop(repo)
    assert not run.blocked
    assert "no verify contract found" in run.message


def test_outside_git_every_gate_runs(tmp_path: Path) -> None:
    """Without git nothing tells what changed: every gate applies, none is skipped."""
    plain = tmp_path / "plain"
    write(plain / "verify.toml", CHECK_GATE)
    write(plain / "check.py", CHECK)
    write(plain / "calc.py", BAD)
    assert "calc.py:1: error: bug found" in stop(plain).reason
    write(plain / "calc.py", GOOD)
    assert stop(plain).json is None


def test_outside_git_without_a_contract_allows_the_stop(tmp_path: Path) -> None:
    write(tmp_path / "plain" / "calc.py", BAD)
    run = stop(tmp_path / "plain")
    assert "no verify contract found" in run.message


def test_sigterm_while_gates_run_blocks_and_kills_the_gate(project: Path,
                                                           tmp_path: Path) -> None:
    pid_file = tmp_path / "gate.pid"
    write(project / "verify.toml", contract(
        '[[gate]]\nname = "slow"\ncommand = [PY, "-c", "import os, time; '
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)\"]\n"))
    commit_all(project)
    write(project / "calc.py", BAD)
    begun(project, "s")
    payload = json.dumps({"session_id": "s", "cwd": str(project), "stop_hook_active": False})
    payload_file = write(tmp_path / "payload.json", payload)
    with payload_file.open("rb") as stdin:
        hook = subprocess.Popen(HOOK, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    wait_for_gate(pid_file)
    hook.send_signal(signal.SIGTERM)
    out, err = hook.communicate(timeout=20)
    assert hook.returncode == 0
    reason = json.loads(out)["reason"]
    assert reason.startswith("verifygate blocked this stop (round 1 of 3)")
    assert "interrupted by SIGTERM before the gates finished (cut short: `slow`)" in reason
    assert b"interrupted" in err
    assert_gone(int(pid_file.read_text()))


def wait_for_gate(pid_file: Path) -> None:
    deadline = time.monotonic() + 20
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline, "the gate never started"
        time.sleep(0.05)


def assert_gone(pid: int) -> None:
    deadline = time.monotonic() + 5
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "the gate outlived the hook"
        time.sleep(0.05)


def test_session_file_names_are_safe_bounded_and_distinct() -> None:
    ids = ["3f2a9c1d-1111-4a2b-9c3d-123456789abc", "a/b", "a_b", "..", ".hidden", "x.report",
           "é" * 500, "", " "]
    stems = [session_file_stem(session) for session in ids]
    assert stems[0] == ids[0]  # ordinary ids are kept as they are
    assert len(set(stems)) == len(stems)
    for stem in stems:
        assert stem and len(stem) <= 64
        assert not stem.startswith(".") and not stem.endswith(".report")
        assert all(c.isascii() and (c.isalnum() or c in "_.-") for c in stem)


def test_a_mistyped_hook_flag_never_blocks_the_agent(tmp_path: Path) -> None:
    # Exit status 2 would tell the agent harness to block and feed stderr to the agent.
    for flags in (["--max-rounds", "0"], ["--no-such-flag"]):
        done = subprocess.run([*HOOK, *flags], input="{}",
                              capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 1, flags
        assert done.stderr.startswith("verifygate: error:")
