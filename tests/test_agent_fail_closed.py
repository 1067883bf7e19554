"""``verifygate agent-hook`` fails closed: what keeps it from checking a stop blocks the stop
(bounded by the round cap), never lets it through as verified. Real git repositories, the real
hook subprocess, payloads as the agents send them; and ``verifygate agent-status``, which tells
a caller of a headless agent run how its last stop ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_verifygate.agents import DEFAULT_BUDGET, STOP_TIMEOUT, config
from pytest_verifygate.agents.protocol import MAX_PAYLOAD_BYTES
from pytest_verifygate.agents.status import status_path
from pytest_verifygate.cli.parser import build_parser
from test_agent_hook import (
    BAD,
    CHECK_GATE,
    GOOD,
    assert_gone,
    checked_project,
    contract,
    wait_for_gate,
)
from test_install_hook import FRESH, VERIFYGATE

from conftest import PAYLOADS, HookRun, begun, commit_all, git, run_hook, stop, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow


@pytest.fixture
def project(repo: Path) -> Path:
    return checked_project(repo)


def reason(agent: str, answer: HookRun) -> str:
    """The reason ``answer`` blocks with, in exactly the agent's format."""
    assert answer.returncode == 0 and answer.json is not None, answer
    key = {"claude": "reason", "codex": "reason", "gemini": "reason"}[agent]
    decision = {"claude": "block", "codex": "block", "gemini": "deny"}[agent]
    assert set(answer.json) == {"decision", key} and answer.json["decision"] == decision, answer
    text: str = answer.json[key]
    return text


def handed_over(answer: HookRun) -> str:
    assert answer.returncode == 0 and answer.json is not None, answer
    assert set(answer.json) == {"systemMessage"}, answer
    message: str = answer.json["systemMessage"]
    assert "a human must review" in message.lower()
    return message


def agent_status(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VERIFYGATE, "agent-status", *args], cwd=repo, capture_output=True,
                          text=True, timeout=60, check=False)


# --------------------------------------------------------------------------------------------
# the hook's own time budget


def test_a_gate_that_outlasts_the_budget_is_stopped_and_the_stop_blocked(
        project: Path, tmp_path: Path) -> None:
    """A gate added with a timeout of a year: the hook stops it within its budget and
    blocks, instead of waiting for the agent's hook timeout (whose interrupted run the agent
    lets through)."""
    pid_file = tmp_path / "gate.pid"
    write(project / "verify.toml", CHECK_GATE + contract(
        '[[gate]]\nname = "slow"\ntimeout_seconds = 31536000\ncommand = [PY, "-c", '
        f"\"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
        'time.sleep(600)"]\n'))
    write(project / "calc.py", GOOD + "\n")
    answer = stop(project, "--budget", "3")
    wait_for_gate(pid_file)
    assert answer.seconds < 30
    text = reason("claude", answer)
    assert text.startswith("verifygate blocked this stop (round 1 of 3): your work could not "
                           "be checked")
    assert "did not finish within the hook's time budget of 3 s" in text
    assert "(cut short: `slow`)" in text
    assert_gone(int(pid_file.read_text()))


def test_the_default_budget_is_below_the_installed_timeout() -> None:
    assert build_parser("agent-hook").parse_args(["agent-hook"]).budget == DEFAULT_BUDGET
    assert DEFAULT_BUDGET < STOP_TIMEOUT
    stop_hook = FRESH["claude"]["hooks"]["Stop"][0]["hooks"][0]
    assert stop_hook["timeout"] == STOP_TIMEOUT
    gemini = FRESH["gemini"]["hooks"]["AfterAgent"][0]["hooks"][0]
    assert gemini["timeout"] == STOP_TIMEOUT * 1000  # milliseconds


def test_a_payload_that_never_ends_blocks_at_the_budget(project: Path) -> None:
    """stdin left open: the budget ends the wait too."""
    hook = subprocess.Popen([*VERIFYGATE, "agent-hook", "--agent", "claude", "--budget", "2"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=project)
    assert hook.stdout is not None and hook.stderr is not None
    try:
        hook.wait(timeout=30)  # stdin stays open: only the budget can end the read
    finally:
        hook.kill()
    out, err = hook.stdout.read(), hook.stderr.read()
    assert hook.returncode == 0, err
    assert "did not arrive within its time budget of 2 s" in json.loads(out)["reason"]


# --------------------------------------------------------------------------------------------
# internal errors and git errors


def crashing_plugin(tmp_path: Path, project: Path) -> dict[str, str]:
    """A plugin of the project's contract whose report hook raises: an internal error in the
    hook's run."""
    site = tmp_path / "site"
    write(site / "vg_crash.py", "import pytest\n\n@pytest.hookimpl\n"
                                "def pytest_verifygate_modifyreport(report):\n"
                                "    raise RuntimeError('the plugin broke')\n")
    contract = project / "verify.toml"
    write(contract, contract.read_text() + '\n[settings]\nplugins = ["vg_crash"]\n')
    commit_all(project)  # a plugin binds once committed, as the gates do
    return {"PYTHONPATH": str(site)}


@pytest.mark.parametrize("agent", ["claude", "gemini"])
def test_an_internal_error_blocks_until_the_cap(agent: str, project: Path,
                                                tmp_path: Path) -> None:
    env = crashing_plugin(tmp_path, project)
    write(project / "calc.py", BAD)
    text = reason(agent, stop(project, "--max-rounds", "2", env=env, agent=agent))
    assert "an internal error stopped the check (RuntimeError: the plugin broke)" in text
    assert "round 2 of 2" in reason(agent, stop(project, "--max-rounds", "2", env=env, agent=agent))
    capped = stop(project, "--max-rounds", "2", env=env, agent=agent)
    assert "still cannot be checked after 2 round(s)" in handed_over(capped)
    assert "Traceback" not in capped.stderr


def test_a_plugin_that_cannot_load_is_a_contract_error(project: Path) -> None:
    """Not an internal error: the contract names what the environment lacks."""
    contract = project / "verify.toml"
    write(contract, contract.read_text() + '\n[settings]\nplugins = ["vg_missing"]\n')
    commit_all(project)
    write(project / "calc.py", BAD)
    text = reason("codex", stop(project, agent="codex"))
    assert "cannot load plugin 'vg_missing'" in text and "settings.plugins" in text
    assert "internal error" not in text


def test_a_git_error_blocks(project: Path) -> None:
    """One bad line in .git/config: every git command fails, and so does the check."""
    write(project / "calc.py", BAD)
    begun(project, "s-1")
    with (project / ".git" / "config").open("a") as config:
        config.write("[broken\n")
    text = reason("codex", stop(project, agent="codex"))
    assert text.startswith("verifygate blocked this stop (round 1 of 3): your work could not "
                           "be checked")
    assert "config" in text


# --------------------------------------------------------------------------------------------
# payloads: long, huge, unreadable


def test_a_gemini_answer_over_a_mebibyte_is_read(project: Path) -> None:
    write(project / "calc.py", BAD)
    long_answer = "I fixed it. " * (300 * 1024)  # 3.6 MB of the agent's own answer
    text = reason("gemini", stop(project, prompt_response=long_answer, agent="gemini"))
    assert "### `check` failed" in text


def test_a_payload_too_large_to_read_is_no_escape(project: Path) -> None:
    write(project / "calc.py", BAD)
    payload = PAYLOADS["gemini"](project, "huge", prompt_response="x" * MAX_PAYLOAD_BYTES)
    answer = run_hook(payload, "--agent", "gemini", cwd=project)
    text = reason("gemini", answer)
    assert "too large to read" in text and "round 1 of 3" in text


# --------------------------------------------------------------------------------------------
# the round cap without any state


def nothing_writable(project: Path, tmp_path: Path) -> dict[str, str]:
    """No place at all for the rounds (nor the session's start): a file where the user's
    state directory would be made."""
    blocker = write(tmp_path / "state-blocker", "a file\n")
    return {"XDG_STATE_HOME": str(blocker / "state")}


def test_gemini_retries_that_quote_the_round_keep_the_cap(project: Path,
                                                          tmp_path: Path) -> None:
    """Gemini CLI says stop_hook_active false on retries that used tools; its retry's prompt
    is the reason the hook gave, whose round bounds the count when nothing can be kept."""
    env = nothing_writable(project, tmp_path)
    write(project / "calc.py", BAD)
    prompt = "Fix the sign in calc.py"
    for round_number in (1, 2, 3):
        answer = stop(project, env=env, prompt=prompt, active=False, agent="gemini")
        prompt = reason("gemini", answer)
        assert f"round {round_number} of 3" in prompt
    # Nothing could record the session's start either: each round says so.
    assert "cannot be checked after 3 round(s) (no start was recorded" in handed_over(
        stop(project, env=env, prompt=prompt, active=False, agent="gemini"))


def test_without_any_state_a_stop_already_sent_back_is_handed_over(project: Path,
                                                                   tmp_path: Path) -> None:
    env = nothing_writable(project, tmp_path)
    write(project / "calc.py", BAD)
    first = stop(project, env=env)
    assert "round 1 of 3" in reason("claude", first)
    assert "the round cap cannot count this stop" in first.stderr
    handed_over(stop(project, env=env, active=True))


def test_gemini_rounds_are_counted_outside_the_repository(project: Path) -> None:
    """.git/verifygate unwritable, stop_hook_active false on every retry: the count kept in
    the user's state directory ends the rounds at the cap."""
    (project / ".git" / "verifygate").write_text("in the way\n")
    write(project / "calc.py", BAD)
    for round_number in (1, 2, 3):
        assert f"round {round_number} of 3" in reason(
            "gemini", stop(project, prompt="go on", active=False, agent="gemini"))
    handed_over(stop(project, prompt="go on", active=False, agent="gemini"))


# --------------------------------------------------------------------------------------------
# verifygate agent-status


def test_agent_status_tells_how_the_last_stop_ended(project: Path) -> None:
    none = agent_status(project)
    assert none.returncode == 1 and "no stop recorded" in none.stdout
    write(project / "calc.py", BAD)
    reason("codex", stop(project, "--max-rounds", "1", agent="codex"))
    blocked = agent_status(project)
    assert blocked.returncode == 1
    assert blocked.stdout.startswith("verifygate agent-status: blocked (codex session s-1")
    handed_over(stop(project, "--max-rounds", "1", agent="codex"))
    capped = agent_status(project)
    assert capped.returncode == 1
    assert "handed over" in capped.stdout and "`check`" in capped.stdout
    write(project / "calc.py", GOOD + "# fixed\n")
    assert stop(project, agent="codex").stdout == ""
    verified = agent_status(project)
    assert verified.returncode == 0, verified
    assert verified.stdout.startswith("verifygate agent-status: verified (codex session s-1")
    cleared = agent_status(project, "--clear")
    assert cleared.returncode == 0
    assert agent_status(project).returncode == 1  # a run whose hook never ran is not verified


def test_agent_status_believes_no_record_of_another_repository(project: Path) -> None:
    write(project / "calc.py", BAD)
    reason("claude", stop(project))
    path = status_path(project)
    assert path is not None
    record = json.loads(path.read_text())
    record["outcome"] = "verified"
    record["repository"] = "/elsewhere"
    path.write_text(json.dumps(record))
    assert agent_status(project).returncode == 1


def test_agent_status_outside_git_is_a_usage_error(tmp_path: Path) -> None:
    done = agent_status(tmp_path)
    assert done.returncode == 2
    assert "not in a git repository" in done.stderr


def test_a_subagent_stop_records_no_status(project: Path) -> None:
    write(project / "calc.py", BAD)
    reason("claude", stop(project))
    stop(project, event="SubagentStop", agent_id="a-1", agent_type="Explore")
    assert agent_status(project).stdout.startswith("verifygate agent-status: blocked")


def test_sigterm_blocks_even_while_git_runs(project: Path, tmp_path: Path) -> None:
    """A signal before any gate started (the change set being computed) blocks too."""
    slow_git = write(tmp_path / "bin" / "git", "#!/bin/sh\nsleep 5\nexec /usr/bin/git \"$@\"\n")
    slow_git.chmod(0o755)
    write(project / "calc.py", BAD)
    git(project, "status")
    begun(project, "sig")
    payload = json.dumps(PAYLOADS["claude"](project, "sig")).encode()
    hook = subprocess.Popen([*VERIFYGATE, "agent-hook"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=project,
                            env={**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert hook.stdin is not None
    hook.stdin.write(payload)
    hook.stdin.close()
    time.sleep(2)
    hook.send_signal(signal.SIGTERM)
    assert hook.stdout is not None and hook.stderr is not None
    hook.wait(timeout=60)
    out, err = hook.stdout.read(), hook.stderr.read()
    assert hook.returncode == 0, err
    assert "interrupted by SIGTERM" in json.loads(out)["reason"]


def deep_durations(repo: Path) -> None:
    write(repo / ".git" / "verifygate" / "durations.json", "[" * 100_000 + "]" * 100_000)


def needs_chain(repo: Path) -> None:
    write(repo / "verify.toml", "".join(
        f'[[gate]]\nname = "g{i}"\ncommand = ["true"]\n' + (f'needs = ["g{i - 1}"]\n' if i else "")
        for i in range(500)))
    commit_all(repo)


@pytest.mark.parametrize("hostile", [deep_durations, needs_chain])
def test_hostile_state_or_contracts_never_let_an_unchecked_stop_through(hostile: Any,
                                                                        project: Path) -> None:
    """Whatever the engine makes of them (a RecursionError, or a run), the answer is a block
    or a verified pass: never a stop let through unchecked."""
    hostile(project)
    write(project / "calc.py", GOOD + "# touched\n")
    answer = stop(project)
    if answer.stdout:
        assert "your work could not be checked" in reason("claude", answer)
        assert agent_status(project).returncode == 1
    else:
        assert agent_status(project).returncode == 0  # checked, and verified


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P is new in Python 3.11")
@pytest.mark.parametrize("planted", ["pytest_verifygate/__main__.py", "vg_ok.py"])
def test_a_module_the_agent_writes_in_the_project_is_not_imported(
        project: Path, tmp_path: Path, planted: str) -> None:
    """Agents run hooks in the project's directory: a file written there must not stand in
    for this package, nor for a plugin the contract names that is installed elsewhere."""
    site = tmp_path / "site"
    write(site / "vg_ok.py", "")
    contract = project / "verify.toml"
    write(contract, contract.read_text() + '\n[settings]\nplugins = ["vg_ok"]\n')
    commit_all(project)
    write(project / "calc.py", BAD)
    if planted.startswith("pytest_verifygate/"):
        write(project / "pytest_verifygate" / "__init__.py", "")
    write(project / planted,
          "import json, sys\n"
          "def pytest_verifygate_modifyreport(report):\n"
          "    report['verdict'] = 'passed'\n"
          "if __name__ == '__main__':\n"
          "    print(json.dumps({})); sys.exit(0)\n")
    command = config.hook_command("claude")
    done = subprocess.run(command, shell=True, cwd=project, capture_output=True, text=True,
                          input=json.dumps(PAYLOADS["claude"](project, "s-1")), timeout=120,
                          env={**os.environ, "PYTHONPATH": str(site)})
    answer = json.loads(done.stdout)
    assert answer.get("decision") == "block", (done.stdout, done.stderr)


# --------------------------------------------------------------------------------------------
# a hook that cannot start


def installed_answer(agent: str, project: Path, command: str,
                     env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run an installed hook ``command`` as the agents do (``sh -c``, payload on stdin)."""
    done = subprocess.run(["/bin/sh", "-c", command], cwd=project, capture_output=True,
                          text=True, input=json.dumps(PAYLOADS[agent](project, "s-1")),
                          timeout=120, env=env)
    return done.returncode, done.stdout, done.stderr


def assert_blocked_by_the_guard(agent: str, answer: tuple[int, str, str]) -> None:
    """The agent's own block, naming the problem and the repair in one line."""
    status, stdout, stderr = answer
    if agent == "cursor":
        assert status == 0, answer
        reason_text = json.loads(stdout)["followup_message"]
    else:  # exit status 2 blocks, with stderr as the reason
        assert status == 2, answer
        reason_text = stderr.strip().splitlines()[-1]
    assert reason_text.startswith("verifygate agent-hook could not run (exit status "), answer
    assert f"run 'verifygate install-agent-hook --agent {agent}' again" in reason_text


def no_package(tmp_path: Path) -> str:
    """An interpreter without this package: a virtualenv it was never installed in."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True, timeout=120)
    return str(tmp_path / "bare" / "bin" / "python")


@pytest.mark.parametrize("broken", ["interpreter removed", "package missing"])
@pytest.mark.parametrize("agent", ["claude", "codex", "cursor", "gemini"])
def test_a_hook_that_cannot_start_blocks_in_the_agents_protocol(
        agent: str, broken: str, project: Path, tmp_path: Path) -> None:
    """``rm -rf .venv`` (exit 127 from sh) or a package gone from it (exit 1 from Python):
    every agent takes such exits for a hook error and lets the stop through. The installed
    command answers with the agent's own block instead."""
    write(project / "calc.py", BAD)
    python = (str(tmp_path / "gone" / "bin" / "python") if broken == "interpreter removed"
              else no_package(tmp_path))
    command = config.hook_command(agent).replace(sys.executable, python, 1)
    assert command != config.hook_command(agent)
    assert_blocked_by_the_guard(agent, installed_answer(agent, project, command))


@pytest.mark.parametrize("agent", ["claude", "cursor"])
def test_python_variables_from_the_agents_environment_do_not_pick_the_code(
        agent: str, project: Path, tmp_path: Path) -> None:
    """A ``PYTHONPATH`` to a stand-in package that allows every stop, or a ``PYTHONHOME``
    that stops Python from starting (what a project ``.env`` an agent CLI loads could set):
    the installed command runs this package, whose gates still judge the broken work (here
    they fail under that PYTHONHOME too: the gates get the agent's environment as it is)."""
    fake = write(tmp_path / "site" / "pytest_verifygate" / "__main__.py", "print('{}')\n")
    write(fake.with_name("__init__.py"), "")
    write(project / "calc.py", BAD)
    begun(project, "s-1")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "PYTHONHOME": "/nonexistent"}
    status_code, stdout, stderr = installed_answer(agent, project, config.hook_command(agent), env)
    assert status_code == 0, stderr
    answer = json.loads(stdout)
    text = answer.get("reason") or answer["followup_message"]
    assert "the verify contract's gates fail on your changes" in text
