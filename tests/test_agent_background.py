"""Verifying while the agent works: the after-edit hook's background run, with real hook
payloads, real git repositories and real gates. Whatever it does, the stop's verdict is the
one a stop without it gives, and no process of it is left."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from test_agent_hook import BAD, GOOD, HOOK

from conftest import begun, commit_all, run_hook, stop, write

pytestmark = pytest.mark.slow

SECONDS = 2.0  # the gate's run: long enough to be caught running
# The gate: logs its start and end (to argv[1], outside the repository) and fails on "BUG".
GATE = """\
import os, sys, time
def note(word):
    with open(sys.argv[1], "a") as log:
        log.write(f"{word} {os.getpid()}\\n")
note("start")
time.sleep(float(sys.argv[2]))
note("end")
sys.exit("BUG" in open("calc.py").read())
"""


def contract(log: Path, command: list[str] | None = None) -> str:
    command = command or [sys.executable, "gate.py", str(log), str(SECONDS)]
    return ("[settings]\ncache = true\n\n[[gate]]\nname = \"tests\"\n"
            f"command = {json.dumps(command)}\n")


@pytest.fixture
def log(repo: Path) -> Path:
    """The gate's log; the session began on broken work, committed."""
    path = repo.parent / "gate.log"
    write(repo / "gate.py", GATE)
    write(repo / "calc.py", BAD)
    write(repo / "verify.toml", contract(path))
    commit_all(repo)
    begun(repo, "s-1")
    return path


def lines(log: Path, word: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith(word)] \
        if log.exists() else []


def edited(repo: Path, session: str = "s-1") -> float:
    """The after-edit hook, as Claude Code calls it after an edit; how long it took."""
    payload = {"session_id": session, "cwd": str(repo), "hook_event_name": "PostToolUse",
               "tool_name": "Edit", "tool_input": {}, "tool_response": {}}
    run = run_hook(payload, "--agent", "claude", "--background", cwd=repo, timeout=60)
    assert (run.stdout, run.stderr) == ("{}\n", ""), run
    return run.seconds


def ours() -> list[int]:
    """The processes of this test's runs (workers, gates, watchdogs): they carry its private
    state directory in their environment, as this process's own environment does not."""
    mark = f"XDG_STATE_HOME={os.environ['XDG_STATE_HOME']}\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if entry.isdigit() and mark in handle.read() and int(entry) != os.getpid():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def workers() -> list[int]:
    """The background runs going on (their process ids)."""
    found = []
    for pid in ours():
        try:
            if b"--worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def until(done: Callable[[], object], seconds: float = 30.0) -> None:
    end = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_the_stop_reuses_the_background_run_s_pass(repo: Path, log: Path) -> None:
    write(repo / "calc.py", GOOD)
    edited(repo)
    assert lines(log, "end") == []  # the edit is not held up by the gate
    until(lambda: lines(log, "end") and not ours())
    assert not stop(repo).blocked
    assert len(lines(log, "start")) == 1  # the stop ran nothing


@pytest.mark.parametrize("text", [GOOD, BAD + "# another try\n"], ids=["passing", "failing"])
def test_a_stop_while_it_runs_waits_for_it_and_judges_as_ever(repo: Path, log: Path,
                                                              text: str) -> None:
    write(repo / "calc.py", text)
    edited(repo)
    until(lambda: lines(log, "start"))
    assert stop(repo).blocked is (text != GOOD)
    # The same inputs: the stop waited for the pass; a failure is never reused.
    assert len(lines(log, "start")) == (1 if text == GOOD else 2)
    until(lambda: not ours())


@pytest.mark.parametrize("hooked", [False, True], ids=["unseen", "hooked"])
def test_an_edit_during_the_background_run_is_judged_as_the_stop_finds_it(
        repo: Path, log: Path, hooked: bool) -> None:
    write(repo / "calc.py", GOOD)
    edited(repo)
    until(lambda: lines(log, "start"))
    write(repo / "calc.py", BAD + "# undone\n")  # while the gate runs on the good code
    if hooked:
        edited(repo)  # supersedes the run going on
    assert stop(repo).blocked
    until(lambda: not ours())
    write(repo / "calc.py", GOOD)
    runs = len(lines(log, "start"))
    assert not stop(repo).blocked
    # The run on the good code stored no pass: its inputs changed while it ran.
    assert len(lines(log, "start")) == runs + 1


def test_a_contract_edit_does_not_weaken_the_background_run(repo: Path, log: Path) -> None:
    write(repo / "verify.toml", contract(log, ["true"]))  # the agent weakens the gate
    edited(repo)
    until(lambda: lines(log, "end") and not ours())  # it ran the gate as the session began
    assert stop(repo).blocked


def test_a_fixer_never_runs_in_the_background(repo: Path) -> None:
    # A gate that may rewrite files would race the agent's next edit: only the stop runs it.
    log = repo.parent / "gate.log"
    write(repo / "gate.py", GATE)
    write(repo / "calc.py", BAD)
    write(repo / "verify.toml", contract(log) + "fixer = true\n")
    commit_all(repo)
    begun(repo, "session-1")
    write(repo / "calc.py", GOOD)
    edited(repo)
    print("OURS0", ours())
    time.sleep(6)
    print("OURS", ours(), lines(log, "start"), log.exists())
    until(lambda: not ours())
    assert lines(log, "start") == []
    assert not stop(repo).blocked
    assert len(lines(log, "start")) == 1


def test_a_killed_background_run_leaves_no_process_and_no_pass(repo: Path, log: Path) -> None:
    write(repo / "calc.py", GOOD)
    edited(repo)
    until(lambda: lines(log, "start"))
    (worker,) = workers()
    os.kill(worker, signal.SIGKILL)
    until(lambda: not ours(), 15)  # its gate too, ended by the watchdog
    assert not lines(log, "end")
    assert not stop(repo).blocked
    assert len(lines(log, "end")) == 1  # the stop ran the gate itself


def test_the_end_of_the_agent_or_a_new_session_ends_the_background_run(
        repo: Path, log: Path) -> None:
    write(repo / "calc.py", GOOD)
    payload = json.dumps({"session_id": "s-1", "cwd": str(repo),
                          "hook_event_name": "PostToolUse"})
    # An agent that runs the after-edit hook, then thinks: its background run watches it.
    agent = subprocess.Popen([
        sys.executable, "-c", "import subprocess, sys, time; subprocess.run(sys.argv[2:], "
        "input=sys.argv[1].encode(), check=True, capture_output=True); time.sleep(60)",
        payload, *HOOK, "--agent", "claude", "--background"])
    until(workers)
    agent.kill()
    agent.wait()
    until(lambda: not ours(), 15)
    assert not lines(log, "end")
    edited(repo)
    until(lambda: lines(log, "start"))
    again = {"session_id": "session-2", "cwd": str(repo), "hook_event_name": "SessionStart",
             "transcript_path": "/nonexistent.jsonl"}
    subprocess.run([*HOOK, "--agent", "claude"], input=json.dumps(again).encode(), check=True,
                   capture_output=True, timeout=60)
    until(lambda: not ours(), 15)
    assert not lines(log, "end")


def test_the_agent_is_found_past_the_shells_without_proc_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """This process, started by ``sh -c`` twice, finds its agent (the process that ran the
    shells) from ``/proc``, and from ``ps`` where there is no ``/proc``."""
    code = ("import os, sys; from pytest_verifygate.agents import background; "
            "print(background._agent(), os.getppid())")
    runs = {}
    for proc in ("/proc", "/nonexistent"):
        inner = shlex.join([sys.executable, "-c", f"from pytest_verifygate.runner import tree; "
                            f"tree.PROC = {proc!r}; {code}"])
        done = subprocess.run(["sh", "-c", f"sh -c {shlex.quote(inner)}; :"],
                              capture_output=True, text=True, check=True)
        runs[proc] = done.stdout.split()
    assert runs["/proc"][0] == runs["/nonexistent"][0] == str(os.getpid())
