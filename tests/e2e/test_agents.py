"""Verify-on-stop proven with the real agent CLIs: Claude Code, Codex CLI and Gemini CLI,
each run headless in a throwaway repository whose hooks ``verifygate install-agent-hook``
wrote, against a scripted model on 127.0.0.1 that plays the agent (``models.py``). Every model
request and every hook call is logged (``harness.py``); the assertions are on them.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from .harness import (
    AGENTS,
    BREAK,
    BROKEN,
    CLAUDE,
    CODEX,
    FIX,
    FIXED,
    GEMINI,
    AgentCLI,
    Project,
    Session,
    agent_status,
    install_hook,
    installed_commands,
    make_project,
    run_agent,
    write_file,
)
from .models import SUBAGENT, Delegate, Say, Script, Shell

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EVERY_AGENT = pytest.mark.parametrize("agent", list(AGENTS.values()), ids=list(AGENTS))
BLOCK_THEN_FIX = (Shell(BREAK), Say("Done."), Shell(FIX), Say("Fixed."))
# A model that keeps trying and never fixes it: a command, then the end of its turn. Its
# retries carry tool calls, so Gemini CLI never sets stop_hook_active on them.
NEVER_FIXES = (Shell("cat calc.py"), Say("I could not fix it."))


def check_block_then_fix(session: Session) -> None:
    """The first stop is blocked with a reason naming the failing gate, the next model
    request carries that reason, the agent fixes the code, the second stop is allowed, and
    the CLI exits 0."""
    stops = session.stops()
    assert session.exit_code == 0, session.describe()
    assert [stop.decision for stop in stops] == ["block", "allow"], session.describe()
    reason = stops[0].reason
    assert "`tests`" in reason and "round 1 of 3" in reason, reason
    after = session.request_after(stops[0])
    assert after is not None, session.describe()
    assert after.says(reason.splitlines()[0]), "the next model request lacks the reason"
    assert after.says("### `tests` failed: command_failed"), "the next request lacks the digest"
    assert len(session.conversation()) == len(BLOCK_THEN_FIX), session.describe()
    assert session.project.read("calc.py") == FIXED


# --------------------------------------------------------------------------------------------
# block, then fix


@EVERY_AGENT
def test_a_failing_stop_is_blocked_and_the_fix_is_let_through(
        project: Project, agent: AgentCLI, record_property: pytest.RecordProperty) -> None:
    install_hook(project, agent)
    session = run_agent(project, agent, Script(BLOCK_THEN_FIX))
    check_block_then_fix(session)
    start = [call for call in session.hook_calls if call.event == "SessionStart"]
    assert len(start) == 1 and not start[0].stdout.strip("{} \n"), session.describe()
    record_property(f"e2e: {agent.name} hook time at SessionStart (s)", round(start[0].seconds, 3))
    record_property(f"e2e: {agent.name} hook time at a blocked stop (s)",
                    round(session.stops()[0].seconds, 3))
    status = agent_status(project)
    assert status.returncode == 0, status.stdout + status.stderr


def test_negative_control_a_hook_that_always_allows_fails_the_check(project: Project) -> None:
    """The suite can fail: with a hook command that lets every stop through, the block-then-
    fix check fails, though the CLI ran the hook at each stop."""
    install_hook(project, CLAUDE, replace_command="true")
    session = run_agent(project, CLAUDE, Script(BLOCK_THEN_FIX))
    assert session.exit_code == 0, session.describe()
    assert session.stops() and all(stop.decision == "allow" for stop in session.stops())
    with pytest.raises(AssertionError):
        check_block_then_fix(session)


# --------------------------------------------------------------------------------------------
# the round cap


@EVERY_AGENT
def test_the_round_cap_ends_the_session(project: Project, agent: AgentCLI,
                                        record_property: pytest.RecordProperty) -> None:
    install_hook(project, agent, "--max-rounds", "2")
    session = run_agent(project, agent, Script((Shell(BREAK), Say("Done.")), then=NEVER_FIXES))
    assert session.exit_code == 0, session.describe()
    assert not session.refused(), session.describe()
    assert [stop.decision for stop in session.stops()] == ["block", "block", "allow"], (
        session.describe())
    assert "round 2 of 2" in session.stops()[1].reason
    assert "a human must review" in session.stops()[2].message, session.describe()
    # The break and its end, then a command and an end for each of the two blocks.
    assert len(session.conversation()) == 2 + 2 * 2, session.describe()
    record_property(f"e2e: {agent.name} model requests up to the cap of 2",
                    len(session.conversation()))
    # The CLI exited 0 and printed nothing of the hand-over: the recorded status tells.
    status = agent_status(project)
    assert status.returncode == 1 and status.stdout.strip(), status.stdout + status.stderr


@pytest.mark.parametrize("agent", [CODEX, GEMINI], ids=["codex", "gemini"])
def test_a_hook_the_agent_skips_is_told_by_agent_status(project: Project,
                                                        agent: AgentCLI) -> None:
    """Without what it needs for project hooks (Codex CLI: hook trust; Gemini CLI: a trusted
    folder, here with its --skip-trust), the agent skips the hook without a word and exits 0
    over broken work. agent-status, cleared before the run, tells the caller."""
    install_hook(project, agent)
    cleared = agent_status(project, "--clear")
    assert cleared.returncode == 0, cleared.stdout + cleared.stderr
    session = run_agent(project, agent, Script((Shell(BREAK), Say("Done."))), trusted=False)
    assert session.exit_code == 0, session.describe()
    assert session.hook_calls == [], session.describe()
    status = agent_status(project)
    assert status.returncode == 1, status.stdout + status.stderr
    assert "no stop recorded" in status.stdout


# --------------------------------------------------------------------------------------------
# committed work, clean stops, the contract


@EVERY_AGENT
def test_committed_broken_work_still_blocks(project: Project, agent: AgentCLI) -> None:
    install_hook(project, agent)
    head = project.git("rev-parse", "HEAD")
    session = run_agent(project, agent, Script((
        Shell(f"{BREAK} && git commit -qam 'change add'"), Say("Committed."),
        Shell(f"{FIX} && git commit -qam 'fix add'"), Say("Fixed and committed."))))
    assert [stop.decision for stop in session.stops()] == ["block", "allow"], (
        session.describe())
    assert "`tests`" in session.stops()[0].reason
    assert "committed or not" in session.stops()[0].reason
    assert project.git("status", "--porcelain") == ""
    assert project.git("rev-list", "--count", f"{head.strip()}..HEAD").strip() == "2"
    assert session.exit_code == 0, session.describe()


@EVERY_AGENT
def test_a_clean_stop_is_allowed_at_once(project: Project, agent: AgentCLI,
                                         record_property: pytest.RecordProperty) -> None:
    install_hook(project, agent)
    good = FIXED + "\n\ndef mul(a, b):\n    return a * b\n"
    session = run_agent(project, agent, Script((Shell(write_file("calc.py", good)),
                                                Say("Added mul."))))
    assert session.exit_code == 0, session.describe()
    stops = session.stops()
    assert [stop.decision for stop in stops] == ["allow"], session.describe()
    assert stops[0].reason == "" and "verifygate" not in stops[0].message, session.describe()
    assert len(session.conversation()) == 2, session.describe()
    last_answer = session.conversation()[-1].at
    record_property(f"e2e: {agent.name} hook time at a passing stop (s)",
                    round(stops[0].seconds, 3))
    record_property(f"e2e: {agent.name} last model answer to exit, hook included (s)",
                    round(session.ended - last_answer, 3))
    record_property(f"e2e: {agent.name} whole session (s)", round(session.seconds, 2))


@EVERY_AGENT
def test_an_agent_that_weakens_the_contract_is_still_held_to_it(project: Project,
                                                                agent: AgentCLI) -> None:
    install_hook(project, agent)
    weakened = '[[gate]]\nname = "tests"\ncommand = ["true"]\n'
    session = run_agent(project, agent, Script((
        Shell(f"{BREAK} && {write_file('verify.toml', weakened)}"), Say("Done."),
        Shell(FIX), Say("Fixed."))))
    stops = session.stops()
    assert [stop.decision for stop in stops] == ["block", "allow"], session.describe()
    assert "`tests`" in stops[0].reason
    assert "the contract changed since" in stops[0].reason, stops[0].reason
    assert "the contract changed since" in stops[1].message, session.describe()
    assert session.exit_code == 0, session.describe()


# --------------------------------------------------------------------------------------------
# the hook's command, subagents, state it cannot write


@EVERY_AGENT
def test_the_hook_runs_without_the_virtualenv_on_path(project: Project,
                                                      agent: AgentCLI) -> None:
    """The user installs the hook from the activated virtualenv and later starts the agent
    from a shell without it: the installed command must still start (exit 127 is a
    non-blocking error to every agent, which would let the broken work stop)."""
    install_hook(project, agent)
    session = run_agent(project, agent, Script(BLOCK_THEN_FIX), venv=False)
    assert all(call.status != 127 for call in session.hook_calls), (
        f"the installed hook command did not start without the virtualenv on PATH: "
        f"{installed_commands(project)}\n{session.describe()}")
    check_block_then_fix(session)


def test_a_read_only_subagent_is_not_blocked_for_its_parents_work(project: Project) -> None:
    """Claude Code: the agent breaks the code, then asks a read-only Explore subagent a
    question. The subagent changed nothing: its stop is not blocked for the parent's
    unfinished work (whether its SubagentStop is judged on what it changed or not gated at
    all), and the parent's rounds are untouched: the parent's stop is blocked at round 1."""
    install_hook(project, CLAUDE)
    session = run_agent(project, CLAUDE, Script(
        (Shell(BREAK), Delegate("Read calc.py and say what add does.", "Explore"),
         Say("Done."), Shell(FIX), Say("Fixed.")),
        subagent=(Shell("cat calc.py"), Say("add subtracts."))))
    # The subagent read the file and answered once: never sent back to work.
    assert len(session.conversation(SUBAGENT)) == 2, session.describe()
    assert all(stop.decision == "allow" for stop in session.subagent_stops()), (
        session.describe())
    stops = session.stops()
    assert [stop.decision for stop in stops] == ["block", "allow"], session.describe()
    assert "round 1 of 3" in stops[0].reason, stops[0].reason
    assert session.exit_code == 0, session.describe()


@EVERY_AGENT
def test_the_cap_holds_when_rounds_cannot_be_recorded(project: Project,
                                                      agent: AgentCLI) -> None:
    """A file where the user's state directory goes: neither the session's start nor its
    rounds can be recorded (root included). The stop still blocks (no start: not verified),
    and the session still ends within the cap, though the model's retries carry tool calls
    (Gemini CLI then sends stop_hook_active: false)."""
    install_hook(project, agent, "--max-rounds", "2")
    state = project.home / ".local" / "state"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text("not a directory\n", encoding="utf-8")
    state.chmod(stat.S_IRUSR)
    session = run_agent(project, agent, Script((Shell(BREAK), Say("Done.")), then=NEVER_FIXES))
    stops = session.stops()
    assert not session.refused(), ("the hook sent the agent back until the model's runaway "
                                   "limit:\n" + session.describe())
    assert stops and stops[0].decision == "block", session.describe()
    assert "no start was recorded for this session" in stops[0].reason
    # Gemini CLI's retries quote neither the round nor (until its own fifth retry) a
    # stop_hook_active: with nothing writable, its own retry limit ends the rounds.
    assert len(stops) <= (6 if agent is GEMINI else 3), session.describe()
    assert stops[-1].decision == "allow", session.describe()
    assert "human must review" in stops[-1].message, session.describe()
    assert all("Traceback" not in call.stderr for call in session.hook_calls)
    assert session.exit_code == 0, session.describe()


# --------------------------------------------------------------------------------------------
# the session's work wherever the agent puts it; a hook that cannot start


@EVERY_AGENT
def test_switching_branch_after_a_blocked_stop_still_blocks(project: Project,
                                                            agent: AgentCLI) -> None:
    """Broken work committed on a new branch is blocked; the agent then switches back to
    main, where nothing changed: still blocked (its commits are not checked out). Merged and
    fixed, the stop is let through."""
    install_hook(project, agent)
    session = run_agent(project, agent, Script((
        Shell(f"git switch -q -c feat && {BREAK} && git commit -qam broken"), Say("Done."),
        Shell("git switch -q main"), Say("Back on main, nothing changed."),
        Shell(f"git merge -q feat && {FIX} && git commit -qam fixed"), Say("Fixed."))))
    stops = session.stops()
    assert [stop.decision for stop in stops] == ["block", "block", "allow"], session.describe()
    assert "`tests`" in stops[0].reason
    assert "your commits on refs/heads/feat" in stops[1].reason, stops[1].reason
    assert "round 2 of 3" in stops[1].reason
    assert session.exit_code == 0, session.describe()


@EVERY_AGENT
def test_a_hook_whose_environment_was_removed_blocks(project: Project,
                                                     agent: AgentCLI) -> None:
    """The virtualenv the hook was installed from is gone (``rm -rf .venv``): the installed
    command cannot start, and the stop is blocked in the agent's protocol, with the repair in
    the reason the model reads, instead of exit 127 letting it through."""
    install_hook(project, agent)
    for name in (".claude/settings.local.json", ".codex/hooks.json", ".gemini/settings.json"):
        path = project.root / name
        if path.exists():
            path.write_text(path.read_text(encoding="utf-8").replace(
                sys.executable, str(project.home / "removed-venv" / "bin" / "python")),
                encoding="utf-8")
    session = run_agent(project, agent, Script((Shell(BREAK), Say("Done.")),
                                               then=(Say("Still done."),), limit=3))
    stops = session.stops()
    assert stops and all(stop.status == 2 for stop in stops), session.describe()
    assert "verifygate agent-hook could not run (exit status 127)" in stops[0].stderr
    after = session.request_after(stops[0])
    assert after is not None and after.says("verifygate agent-hook could not run"), (
        session.describe())


@EVERY_AGENT
def test_a_monorepo_session_is_judged_from_where_it_began(project: Project,
                                                          agent: AgentCLI) -> None:
    """The session begins at the root, whose contract checks calc.py; the agent changes
    directory into a package with a lenient contract of its own, breaks calc.py from there
    and stops: the root's contract still judges it."""
    lenient = '[[gate]]\nname = "quick"\ncommand = ["true"]\n'
    (project.root / "packages" / "a").mkdir(parents=True)
    (project.root / "packages" / "a" / "verify.toml").write_text(lenient, encoding="utf-8")
    project.git("add", "-A")
    project.git("commit", "-q", "-m", "a package with a lenient contract")
    install_hook(project, agent)
    calc = str(project.root / "calc.py")
    session = run_agent(project, agent, Script((
        Shell(f"cd packages/a && {write_file(calc, BROKEN)}"), Say("Done."),
        Shell(write_file(calc, FIXED)), Say("Fixed."))))
    stops = session.stops()
    assert [stop.decision for stop in stops] == ["block", "allow"], session.describe()
    assert "`tests`" in stops[0].reason, stops[0].reason
    assert session.exit_code == 0, session.describe()


# --------------------------------------------------------------------------------------------
# verifying while the agent works

GATE_SECONDS = 3
THINK_SECONDS = 6  # past the edits' settling (1 s) and the gate's run


def test_a_stop_after_the_agent_thought_finds_its_work_verified(
        tmp_path: Path, node_tools: None, record_property: pytest.RecordProperty) -> None:
    """The agent fixes a failing test, thinks for seconds and stops, with a gate that takes
    seconds: with --background the gate ran while it thought, and the stop reuses its pass;
    without, the stop runs it. The verdicts are the same; no process is left."""
    seconds = {}
    for background in (False, True):
        project = make_project(tmp_path / ("with" if background else "without"))
        log = project.logs / "gate.log"
        gate = [sys.executable, "-B", "-c", "import sys, time, calc; open(sys.argv[1], 'a')"
                f".write('ran\\n'); time.sleep({GATE_SECONDS}); assert calc.add(2, 2) == 4",
                str(log)]
        (project.root / "verify.toml").write_text(
            "[settings]\ncache = true\n\n[[gate]]\nname = \"tests\"\n"
            f"command = {json.dumps(gate)}\n", encoding="utf-8")
        (project.root / "calc.py").write_text(BROKEN, encoding="utf-8")
        project.git("commit", "-qam", "a failing test, a slow gate")
        install_hook(project, CLAUDE, *(["--background"] if background else []))
        session = run_agent(project, CLAUDE, Script((Shell(FIX),
                                                     Say("Fixed.", think=THINK_SECONDS))))
        (stop,) = session.stops()
        assert stop.decision == "allow" and session.exit_code == 0, session.describe()
        assert log.read_text() == "ran\n"  # once: by the background run, or by the stop
        deadline = time.monotonic() + 5
        while left_in(project.root) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left_in(project.root), session.describe()
        seconds[background] = round(stop.seconds, 3)
    record_property("e2e: claude stop after thinking, gate of 3 s, without --background (s)",
                    seconds[False])
    record_property("e2e: claude stop after thinking, gate of 3 s, with --background (s)",
                    seconds[True])
    assert seconds[False] >= GATE_SECONDS > seconds[True], seconds


def left_in(root: Path) -> list[str]:
    """The processes still working in ``root`` (a background run, its gates)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and Path(os.readlink(entry / "cwd")).is_relative_to(root):
                found.append((entry / "cmdline").read_bytes().decode(errors="replace"))
    return found
