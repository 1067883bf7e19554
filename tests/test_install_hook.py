"""``verifygate install-agent-hook --agent NAME``: each agent's configuration written, or merged
into a real file of that agent's documented shape, idempotently, never over a file it cannot
parse; its command runs without the virtualenv on PATH.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_verifygate.agents.config import hook_command, repointed, unreachable
from pytest_verifygate.agents.detect import ADAPTERS
from pytest_verifygate.cli.parser import AGENTS
from test_agent_hook import BAD, CHECK, CHECK_GATE, GOOD

from conftest import PAYLOADS, commit_all, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

_SCRIPT = Path(sys.executable).with_name("verifygate")
VERIFYGATE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m",
                                                       "pytest_verifygate.cli"]
FILES = {"claude": ".claude/settings.local.json", "codex": ".codex/hooks.json",
         "cursor": ".cursor/hooks.json", "gemini": ".gemini/settings.json"}


# What the installed command starts with: this interpreter, by its absolute path.
# -E: no PYTHONPATH from the agent's environment; -P (3.11+): the project's directory, where
# agents run hooks, is not searched first.
PROGRAM = shlex.join([sys.executable, "-E", *(["-P"] if sys.version_info >= (3, 11) else []),
                      "-m", "pytest_verifygate"])
# A PATH without the virtualenv: what an agent started outside it has.
BARE_PATH = "/usr/bin:/bin"


def install(cwd: Path, *args: str, status: int = 0,
            name: str = "install-agent-hook") -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*VERIFYGATE, name, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == status, done
    assert "Traceback" not in done.stderr, done.stderr
    return done


def config(repo: Path, agent: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((repo / FILES[agent]).read_text())
    return data


def claude_hook(timeout: int, agent: str = "claude") -> dict[str, Any]:
    return {"hooks": [{"type": "command", "command": hook_command(agent), "timeout": timeout}]}


def gemini_hook(name: str, timeout: int) -> dict[str, Any]:
    return {"matcher": "*", "hooks": [{"name": name, "type": "command",
                                       "command": hook_command("gemini"), "timeout": timeout}]}


# What a new configuration holds: each agent's documented shape.
FRESH = {
    "claude": {"hooks": {"SessionStart": [claude_hook(30)], "Stop": [claude_hook(900)]}},
    "codex": {"hooks": {"SessionStart": [claude_hook(30, "codex")],
                        "Stop": [claude_hook(900, "codex")]}},
    "cursor": {"version": 1, "hooks": {
        "beforeSubmitPrompt": [{"command": hook_command("cursor")}],
        "stop": [{"command": hook_command("cursor"), "loop_limit": 4}]}},
    "gemini": {"hooks": {"SessionStart": [gemini_hook("verifygate-session-start", 30000)],
                         "AfterAgent": [gemini_hook("verifygate", 900000)]}},
}

# Files as each agent's documentation shows them, with hooks and settings of their own.
EXISTING = {
    "claude": {
        "permissions": {"allow": ["Bash(npm run lint)"], "deny": ["Read(./.env)"]},
        "env": {"FOO": "bar"},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "./scripts/guard.sh"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        },
    },
    "codex": {"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": "uvx codhc ruff check --fix", "timeout": 30}]}]}},
    "cursor": {"version": 1, "hooks": {
        "afterFileEdit": [{"command": "./hooks/format.sh"}],
        "stop": [{"command": "./hooks/audit.sh"}],
    }},
    "gemini": {
        "general": {"vimMode": True},
        "tools": {"enableHooks": True},
        "hooks": {
            "BeforeTool": [{"matcher": "write_file|replace", "hooks": [
                {"name": "secret-scanner", "type": "command",
                 "command": "$GEMINI_PROJECT_DIR/.gemini/hooks/scan.sh", "timeout": 5000}]}],
            "disabled": ["secret-scanner"],
        },
    },
}


@pytest.mark.parametrize("agent", AGENTS)
def test_a_new_configuration_has_the_agents_documented_shape(agent: str, repo: Path) -> None:
    done = install(repo, "--agent", agent)
    assert config(repo, agent) == FRESH[agent]
    assert done.stdout.startswith(f"verifygate install-agent-hook: created {FILES[agent]}")
    assert "added" in done.stdout
    assert oct((repo / FILES[agent]).stat().st_mode & 0o777) == oct(0o644 & ~_umask())


# The after-edit event each agent gets with --background (or the contract's setting).
AFTER_EDIT = {"claude": "PostToolUse", "codex": "PostToolUse", "cursor": "afterFileEdit",
              "gemini": "AfterTool"}


@pytest.mark.parametrize("agent", AGENTS)
def test_the_after_edit_hook_is_installed_only_when_asked(agent: str, repo: Path) -> None:
    install(repo, "--agent", agent)
    assert AFTER_EDIT[agent] not in config(repo, agent)["hooks"]
    write(repo / "verify.toml", "[settings]\nverify_while_editing = true\n\n[[gate]]\n"
                                'name = "lint"\ncommand = "true"\n')
    for asked in (["--background"], []):  # the install asks, or the contract does
        (repo / FILES[agent]).unlink()
        install(repo, "--agent", agent, *asked)
        hooks = config(repo, agent)["hooks"]
        assert {**hooks, AFTER_EDIT[agent]: None} == {**FRESH[agent]["hooks"],
                                                       AFTER_EDIT[agent]: None}
        (entry,) = hooks[AFTER_EDIT[agent]]
        command = (entry["hooks"][0] if "hooks" in entry else entry)["command"]
        assert command == hook_command(agent, background=True)


@pytest.mark.parametrize("agent", AGENTS)
def test_merging_keeps_every_existing_entry_and_key(agent: str, repo: Path) -> None:
    path = write(repo / FILES[agent], json.dumps(EXISTING[agent], indent=4))
    path.chmod(0o640)
    install(repo, "--agent", agent)
    merged = config(repo, agent)
    for key, value in EXISTING[agent].items():
        if key != "hooks":
            assert merged[key] == value
    for event, entries in EXISTING[agent]["hooks"].items():
        assert merged["hooks"][event][:len(entries)] == entries  # kept, first, unchanged
    for event, entries in FRESH[agent]["hooks"].items():
        assert merged["hooks"][event][-1] == entries[-1]  # ours, appended
    assert path.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("agent", AGENTS)
def test_installing_twice_is_installing_once(agent: str, repo: Path) -> None:
    write(repo / FILES[agent], json.dumps(EXISTING[agent]))
    install(repo, "--agent", agent)
    once = (repo / FILES[agent]).read_bytes()
    again = install(repo, "--agent", agent)
    assert (repo / FILES[agent]).read_bytes() == once
    assert "nothing changed" in again.stdout
    assert "kept" in again.stdout and "added" not in again.stdout


def test_an_existing_agent_hook_keeps_its_flags_and_gains_the_guard(repo: Path) -> None:
    mine = shlex.join([sys.executable, "-m", "pytest_verifygate.cli", "agent-hook",
                       "--max-rounds", "5"])
    write(repo / FILES["claude"], json.dumps({"hooks": {"Stop": [
        {"hooks": [{"type": "command", "command": mine}]}]}}))
    done = install(repo, "--agent", "claude")
    hooks = config(repo, "claude")["hooks"]
    guarded = repointed(mine, "claude")
    assert guarded.startswith(f"{PROGRAM} agent-hook --max-rounds 5 || ")
    assert [hook["command"] for entry in hooks["Stop"] for hook in entry["hooks"]] == [guarded]
    assert f"Stop: `{mine}` now runs `{guarded}`" in done.stdout
    assert "added  SessionStart" in done.stdout
    done = install(repo, "--agent", "claude")  # guarded: kept as it is
    assert f"kept   Stop: already runs `{guarded}`" in done.stdout


def test_the_round_cap_reaches_the_command_and_cursors_loop_limit(repo: Path) -> None:
    install(repo, "--agent", "cursor", "--max-rounds", "5")
    (stop,) = config(repo, "cursor")["hooks"]["stop"]
    assert stop == {"command": hook_command("cursor", 5),
                    "loop_limit": 6}
    # Asked again with another cap, the installed hook takes it (and nothing else changes).
    installed = config(repo, "cursor")
    installed["hooks"]["stop"][0]["timeout"] = 120
    write(repo / FILES["cursor"], json.dumps(installed))
    done = install(repo, "--agent", "cursor", "--max-rounds", "2")
    (stop,) = config(repo, "cursor")["hooks"]["stop"]
    assert stop == {"command": hook_command("cursor", 2),
                    "loop_limit": 3, "timeout": 120}
    assert f"now runs `{hook_command('cursor', 2)}` (loop_limit 3)" in (
        done.stdout)


@pytest.mark.parametrize("command", ["echo verifygate agent-hook",
                                     "verifygate agent-hook --agent codex",
                                     "verifygate run --format agent"])
def test_a_command_that_only_mentions_the_hook_is_not_taken_for_it(command: str,
                                                                   repo: Path) -> None:
    write(repo / FILES["claude"], json.dumps({"hooks": {"Stop": [
        {"hooks": [{"type": "command", "command": command}]}]}}))
    done = install(repo, "--agent", "claude")
    commands = [hook["command"] for entry in config(repo, "claude")["hooks"]["Stop"]
                for hook in entry["hooks"]]
    assert commands == [command, hook_command("claude")]
    assert "added  Stop" in done.stdout


@pytest.mark.parametrize(("text", "problem"), [
    ('{"hooks": ', "cannot parse it as JSON (Expecting value at line 1 column 11)"),
    ('{\n  // comments are not JSON\n  "hooks": {}\n}', "cannot parse it as JSON"),
    ("[1, 2]", "it holds a JSON list, not an object"),
    ('{"hooks": []}', "'hooks' is not an object"),
    ('{"hooks": {"Stop": {"command": "x"}}}', "'hooks.Stop' is not a list"),
])
def test_a_file_it_cannot_parse_is_refused_and_left_unchanged(text: str, problem: str,
                                                              repo: Path) -> None:
    path = write(repo / FILES["codex"], text)
    done = install(repo, "--agent", "codex", status=2)
    assert path.read_text() == text
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"verifygate: error: install-agent-hook: .codex/hooks.json: "
                                  f"{problem}")
    assert "the file was left unchanged" in done.stderr


def test_it_writes_at_the_repository_root_and_only_in_a_repository(repo: Path,
                                                                   tmp_path: Path) -> None:
    (repo / "sub" / "dir").mkdir(parents=True)
    install(repo / "sub" / "dir", "--agent", "gemini")
    assert (repo / ".gemini" / "settings.json").is_file()
    outside = tmp_path / "plain"
    outside.mkdir()
    done = install(outside, "--agent", "gemini", status=2)
    assert "not in a git repository" in done.stderr
    assert not (outside / ".gemini").exists()


def installed_stop_command(repo: Path, agent: str) -> str:
    data = config(repo, agent)["hooks"]
    event = {"claude": "Stop", "codex": "Stop", "cursor": "stop", "gemini": "AfterAgent"}[agent]
    entry = data[event][-1]
    command: str = (entry["hooks"][0] if "hooks" in entry else entry)["command"]
    return command


def run_as_the_agent(command: str, payload: dict[str, Any], cwd: Path
                     ) -> subprocess.CompletedProcess[str]:
    """``command`` as agents run it: by a POSIX shell, here with a PATH that has neither the
    virtualenv nor ``verifygate``."""
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    return subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload), text=True,
                          capture_output=True, cwd=cwd, timeout=60, check=False,
                          env={**env, "PATH": BARE_PATH})


@pytest.mark.parametrize("agent", AGENTS)
def test_the_installed_command_blocks_without_the_virtualenv_on_path(agent: str,
                                                                    repo: Path) -> None:
    """The command written into the configuration, run as the agent would run it, by a shell
    whose PATH has no ``verifygate`` (where ``verifygate agent-hook`` exits 127, which every
    agent takes for a non-blocking error)."""
    install(repo, "--agent", agent)
    write(repo / "check.py", CHECK)
    write(repo / "verify.toml", CHECK_GATE)
    write(repo / "calc.py", GOOD)
    commit_all(repo)
    write(repo / "calc.py", BAD)
    command = installed_stop_command(repo, agent)
    payload = PAYLOADS[agent](repo, "s")
    assert run_as_the_agent("verifygate agent-hook", payload, repo).returncode == 127
    done = run_as_the_agent(command, payload, repo)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    key = {"claude": "reason", "codex": "reason", "cursor": "followup_message",
           "gemini": "reason"}[agent]
    assert answer[key].startswith("verifygate blocked this stop (round 1 of 3)")


def test_python_dash_m_runs_the_command_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_verifygate", "--version"],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0 and done.stdout.startswith("verifygate ")


def test_a_hook_written_by_earlier_releases_is_pointed_at_this_interpreter(repo: Path) -> None:
    """``verifygate agent-hook`` on PATH (and the SubagentStop hook, no longer installed) as
    earlier releases wrote them: updated, options kept, once."""
    old = "verifygate agent-hook --agent claude --max-rounds 5"
    mine = {"type": "command", "command": "notify-send stopped"}
    write(repo / FILES["claude"], json.dumps({"hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": old, "timeout": 600}]}],
        "SubagentStop": [{"hooks": [{"type": "command", "command": old, "timeout": 900}]},
                         {"hooks": [mine]}],
    }}))
    done = install(repo, "--agent", "claude")
    hooks = config(repo, "claude")["hooks"]
    assert hooks["Stop"] == [{"hooks": [{"type": "command", "timeout": 600, "command":
                                         hook_command("claude", 5)}]}]
    assert hooks["SubagentStop"] == [{"hooks": [mine]}]  # only ours is removed
    assert f"Stop: `{old}` now runs `{hook_command('claude', 5)}`" in (
        done.stdout)
    assert "SubagentStop: removed the agent hook" in done.stdout
    once = (repo / FILES["claude"]).read_bytes()
    assert "nothing changed" in install(repo, "--agent", "claude").stdout
    assert (repo / FILES["claude"]).read_bytes() == once


@pytest.mark.parametrize(("command", "problem"), [
    ("verifygate agent-hook", "`verifygate` is looked up on the agent's PATH"),
    ("python3 -m pytest_verifygate agent-hook", "`python3` is looked up on the agent's PATH"),
    ("/no/such/venv/bin/verifygate agent-hook", "/no/such/venv/bin/verifygate is not there"),
    (hook_command("claude"), None),
    ("$CLAUDE_PROJECT_DIR/.venv/bin/verifygate agent-hook", None),  # only the shell can tell
    ("notify-send done", None),  # not the agent hook at all
])
def test_a_hook_command_that_will_not_start_is_told(command: str, problem: str | None) -> None:
    found = unreachable(command)
    assert found == problem if problem is None else found is not None and problem in found


def test_the_old_name_still_works_and_says_it_is_deprecated(repo: Path) -> None:
    done = install(repo, "--agent", "gemini", name="install-hook")
    assert config(repo, "gemini") == FRESH["gemini"]
    assert "`verifygate install-hook` is deprecated: use `verifygate install-agent-hook`" in (
        done.stderr)


@pytest.mark.parametrize(("agent", "needs"), [
    ("claude", "headless (`claude -p`)"),
    ("codex", "--dangerously-bypass-hook-trust"),
    ("gemini", "GEMINI_CLI_TRUST_WORKSPACE=true"),
    ("cursor", "restart it"),
])
def test_it_says_what_the_agent_needs_before_the_hook_runs(agent: str, needs: str,
                                                          repo: Path) -> None:
    for done in (install(repo, "--agent", agent), install(repo, "--agent", agent)):
        assert needs in done.stdout
    assert "codex_hooks" not in done.stdout and "Enable Hooks" not in done.stdout
    if agent == "codex":  # the project to trust, by its own path
        assert f'[projects."{repo}"] trust_level = "trusted"' in done.stdout


def test_the_parser_knows_every_agent_the_hook_speaks() -> None:
    assert tuple(ADAPTERS) == AGENTS


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def test_claude_code_gets_its_per_user_file_and_the_shared_one_is_named(repo: Path) -> None:
    """The command holds this machine's interpreter path: it goes to the file Claude Code
    keeps per user, and a hook still in the committed file is pointed out."""
    write(repo / ".claude/settings.json", json.dumps({"hooks": {"Stop": [
        {"hooks": [{"type": "command", "command": "verifygate agent-hook"}]}]}}))
    done = install(repo, "--agent", "claude")
    assert (repo / ".claude/settings.local.json").is_file()
    assert ("note   .claude/settings.local.json is this machine's own (Claude Code does not "
            "share it); .claude/settings.json, a file teams commit, runs the hook too: remove "
            "it there") in done.stdout
    done = install(repo, "--agent", "codex")
    assert "note   .codex/hooks.json holds this machine's interpreter path" in done.stdout
