"""No process outlives its gate: not after a timeout, not after Ctrl-C or SIGTERM.

tests/test_runner.py covers a timed-out tree with a double-forked daemon and a grandchild
holding the output pipe; tests/test_cli.py covers one signal with jobs = 2. Here: gates that
ignore SIGTERM, many gates at once under every terminating signal, daemons that closed their
output, gates that close their own output or leave their process group (``setsid``), and a
second signal while the first is being handled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from pytest_verifygate.runner import tree, watchdog
from pytest_verifygate.runner.process import KILL_GRACE_SECONDS

from .support import (
    PY,
    kill_all,
    marked,
    read_pids,
    run_contract,
    validate,
    wait_dead,
    wait_unmarked,
)

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

# sh ignores TERM, and so does every command it starts: an ignored signal stays ignored
# across exec. Only SIGKILL ends this gate.
TERM_PROOF = (
    "trap '' TERM; "
    "sleep 300 & echo $! >> {pids}; "
    "(sleep 300 & echo $! >> {pids}); "  # orphaned at once, still in the gate's group
    "echo $$ >> {pids}; echo ready; "
    "while :; do sleep 0.2; done"
)


def test_a_gate_ignoring_sigterm_is_killed_after_the_grace(repo: Path) -> None:
    (repo / "pids").mkdir()
    pids = repo / "pids" / "stubborn"
    contract = ('[[gate]]\nname = "stubborn"\nshell = true\ntimeout_seconds = 1\n'
                f'command = "{TERM_PROOF.format(pids=pids)}"\n')
    outcome: dict[str, object] = {}
    # In a thread, so a runner that never escalates to SIGKILL fails the test, not hangs it.
    worker = threading.Thread(target=lambda: outcome.update(run=run_contract(repo, contract)))
    started = time.monotonic()
    worker.start()
    worker.join(30)
    elapsed = time.monotonic() - started
    recorded = read_pids(repo / "pids")
    try:
        assert not worker.is_alive(), "the gate survived its timeout: SIGKILL never came"
        (result,) = outcome["run"].results  # type: ignore[attr-defined]
        assert (result.outcome, result.code) == ("failed", "timeout")
        assert "ready" in result.output_tail
        # It took the grace (TERM really was ignored) and not much more.
        assert 1 + KILL_GRACE_SECONDS * 0.9 <= elapsed < 1 + KILL_GRACE_SECONDS + 10
        assert len(recorded) == 3
        assert wait_dead(recorded) == []
    finally:
        kill_all(recorded)


def test_a_term_proof_daemon_that_closed_its_output_dies_with_the_gate(repo: Path) -> None:
    """The gate exits at once; its daemon closed stdout (no pipe keeps the run waiting) and
    ignores TERM. It must still be gone when the run returns."""
    contract = ('[[gate]]\nname = "daemon"\nshell = true\ntimeout_seconds = 60\ncommand = '
                '"(trap \'\' TERM; exec sleep 300) >/dev/null 2>&1 & echo $! > daemon.pid; '
                'echo done"\n')
    started = time.monotonic()
    (result,) = run_contract(repo, contract).results
    pid = int((repo / "daemon.pid").read_text())
    try:
        assert result.outcome == "passed" and "done" in result.output_tail
        assert time.monotonic() - started < 20
        assert wait_dead([pid], seconds=1.0) == []  # dead when the run returned, not later
    finally:
        kill_all([pid])


# Gates that escape a supervisor watching only their output pipe or their process group. Each
# records the pids it starts; {pids} is that file. The first closes its stdout and stderr and
# keeps running (no end of file ever tells the runner anything); the others also start
# processes in sessions of their own, one keeping the environment (and so the gate's marks),
# one started with an empty environment (reachable only through its parent).
ESCAPES = {
    "closed-output": "echo $$ >> {pids}; exec >/dev/null 2>&1; sleep 25 & echo $! >> {pids}; wait",
    "setsid": ("setsid sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; "
               "exec >/dev/null 2>&1; sleep 25"),
    "setsid-empty-env": ("setsid env -i sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; "
                         "exec >/dev/null 2>&1; sleep 25"),
}


def _escape_gate(name: str, command: str, *, marker: str, timeout: float = 60) -> str:
    return (f'[[gate]]\nname = "{name}"\nshell = true\ntimeout_seconds = {timeout}\n'
            f'env = {{ ESCAPE_PROOF = "{marker}" }}\ncommand = "{command}"\n')


@pytest.mark.parametrize("escape", list(ESCAPES))
def test_a_gate_cannot_escape_its_timeout(repo: Path, escape: str) -> None:
    """Closing the output pipe or leaving the process group does not outrun the deadline:
    the gate times out, and none of its processes is left."""
    (repo / "pids").mkdir()
    marker = uuid.uuid4().hex
    contract = _escape_gate("escape", ESCAPES[escape].format(pids=repo / "pids" / "escape"),
                            marker=marker, timeout=1)
    outcome: dict[str, Any] = {}
    # In a thread: a runner that waits for the sleep instead of the deadline fails the test
    # (the gate would pass after 25 s), it does not hang it.
    worker = threading.Thread(target=lambda: outcome.update(run=run_contract(repo, contract)))
    worker.start()
    worker.join(20)
    recorded = read_pids(repo / "pids")
    try:
        assert not worker.is_alive(), "the gate outlived its timeout"
        (result,) = outcome["run"].results
        assert (result.outcome, result.code) == ("failed", "timeout"), result
        assert len(recorded) == 2
        assert wait_dead(recorded) == []
        assert wait_unmarked(marker) == []
    finally:
        worker.join(30)
        kill_all(recorded + marked(marker))


def test_a_daemon_that_left_the_group_dies_with_the_gate(repo: Path) -> None:
    """The gate exits at once and passes; the daemon it started in a session of its own
    closed its output (nothing keeps the run waiting). It must be gone when the run returns."""
    marker = uuid.uuid4().hex
    # The daemon writes its pid once it is in its own session; the gate waits for that, so
    # the daemon has really left the group when the gate exits.
    command = ("setsid sh -c 'echo $$ > daemon.pid; exec >/dev/null 2>&1; exec sleep 300' & "
               "i=0; while [ ! -s daemon.pid ] && [ $i -lt 1000 ]; do sleep 0.01; "
               "i=$((i+1)); done; echo done")
    (result,) = run_contract(repo, _escape_gate("daemon", command, marker=marker)).results
    pid = int((repo / "daemon.pid").read_text())
    try:
        assert (result.outcome, result.output_tail) == ("passed", "done\n")
        assert wait_dead([pid], seconds=1.0) == []  # dead when the run returned, not later
        assert marked(marker) == []
    finally:
        kill_all([pid, *marked(marker)])


def test_processes_that_cannot_be_killed_are_named_in_the_output(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process the runner finds but may not signal (another user's, after a setuid
    program) cannot be made here by a test running as any user, root included: the runner's
    signal call is refused for one pid instead. The gate's output names it."""
    marker = uuid.uuid4().hex
    command = "setsid sleep 300 & echo $! > survivor.pid; exec >/dev/null 2>&1; sleep 25"
    refused: list[int] = []
    real_send = tree.send_signal

    def send_signal(pid: int, signum: int) -> None:
        survivor = repo / "survivor.pid"
        if survivor.exists() and survivor.read_text().strip() == str(pid):
            refused.append(pid)
            raise PermissionError(1, "Operation not permitted")
        real_send(pid, signum)

    real_group_send = tree.send_group_signal

    def send_group_signal(pgid: int, signum: int) -> None:
        survivor = repo / "survivor.pid"  # ``setsid``: the survivor leads a group of its own
        if not (survivor.exists() and survivor.read_text().strip() == str(pgid)):
            real_group_send(pgid, signum)

    monkeypatch.setattr(tree, "send_signal", send_signal)
    monkeypatch.setattr(tree, "send_group_signal", send_group_signal)
    # The refusal is made in this process only: the watchdog, a process of its own, would
    # kill the survivor that no process of the same user can be refused.
    monkeypatch.setattr(watchdog, "_spawn", lambda: None)
    try:
        (result,) = run_contract(repo, _escape_gate("survivor", command, marker=marker,
                                                    timeout=1)).results
        pid = int((repo / "survivor.pid").read_text())
        assert (result.outcome, result.code) == ("failed", "timeout")
        assert refused and set(refused) == {pid}
        assert f"could not be killed: {pid} (sleep)" in result.output_tail
    finally:
        monkeypatch.undo()
        kill_all(marked(marker))


GATE_COUNT = 10
JOBS = 4


def _many_gates(repo: Path) -> None:
    (repo / "pids").mkdir()
    gates = []
    for index in range(GATE_COUNT):
        pids = repo / "pids" / f"g{index}"
        if index == 1:
            command = TERM_PROOF.format(pids=pids)
        elif index == 2:  # closed its output: no end of file ever wakes the runner
            command = (f"exec >/dev/null 2>&1; sleep 300 & echo $! >> {pids}; "
                       f"(sleep 300 & echo $! >> {pids}); echo $$ >> {pids}; wait")
        elif index == 3:  # children in sessions of their own, one of them orphaned at once
            command = (f"setsid sleep 300 & echo $! >> {pids}; "
                       f"(setsid sleep 300 & echo $! >> {pids}); echo $$ >> {pids}; wait")
        else:
            command = (f"sleep 300 & echo $! >> {pids}; (sleep 300 & echo $! >> {pids}); "
                       f"echo $$ >> {pids}; wait")
        gates.append(f'[[gate]]\nname = "g{index}"\nshell = true\ncommand = "{command}"\n')
    (repo / "verify.toml").write_text(f"[settings]\njobs = {JOBS}\n" + "".join(gates))


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C", "SIGTERM twice", "SIGHUP", "SIGQUIT"])
def test_signals_to_the_cli_leave_no_process_and_a_complete_report(repo: Path, how: str) -> None:
    _many_gates(repo)
    cli = subprocess.Popen(
        [PY, "-m", "pytest_verifygate.cli", "run", "--all", "--json", "report.json"],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        # Its own session, so "Ctrl-C" can go to its whole process group like a terminal's.
        start_new_session=True,
    )
    recorded: list[int] = []
    try:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            recorded = read_pids(repo / "pids")
            if len(recorded) >= 3 * JOBS:  # every running gate has started its children
                break
            time.sleep(0.05)
        assert len(recorded) == 3 * JOBS, recorded
        if how == "Ctrl-C":
            os.killpg(cli.pid, signal.SIGINT)
        elif how in ("SIGHUP", "SIGQUIT"):
            cli.send_signal(getattr(signal, how))
        else:
            cli.send_signal(signal.SIGTERM)
            if how == "SIGTERM twice":
                time.sleep(0.1)
                cli.send_signal(signal.SIGTERM)
        _, stderr = cli.communicate(timeout=60)
        assert cli.returncode == 130, stderr
        assert b"Traceback" not in stderr
        report = json.loads((repo / "report.json").read_text())
        validate(report)
        assert report["interrupted"] is True and report["verdict"] == "failed"
        gates = report["gates"]
        assert [g["name"] for g in gates] == [f"g{i}" for i in range(GATE_COUNT)]
        assert {(g["outcome"], g["code"]) for g in gates} == {("failed", "interrupted")}
        assert sum(g["attempts"] for g in gates) == JOBS  # the waiting ones never started
        recorded = read_pids(repo / "pids")
        assert wait_dead(recorded) == []
    finally:
        kill_all(recorded)
        if cli.poll() is None:
            cli.kill()
            cli.wait()


def test_an_unreachable_process_holding_the_output_is_reported(repo: Path) -> None:
    """Out of the group, with an empty environment, orphaned at once: nothing but the kernel
    can find it. The gate still ends (its output is given up on after the grace) and its
    output says that something it started was left running."""
    command = ("(setsid env -i sh -c 'echo $$ > orphan.pid; exec sleep 300' &); "
               "i=0; while [ ! -s orphan.pid ] && [ $i -lt 1000 ]; do sleep 0.01; "
               "i=$((i+1)); done; echo started")
    (result,) = run_contract(repo, _escape_gate("orphan", command, marker=uuid.uuid4().hex,
                                                timeout=30)).results
    pid = int((repo / "orphan.pid").read_text())
    try:
        assert result.outcome == "passed"
        assert result.output_tail.startswith("started\n")
        assert "holds its output open and is out of reach" in result.output_tail
        assert result.reason is not None and "left running" in result.reason  # on its line
    finally:
        kill_all([pid])


HOPPER = """
import os, sys, time
if os.fork():
    print("started", flush=True)
    time.sleep(300)
    sys.exit(0)
os.setsid()
with open("hopper.pgid", "w") as handle:
    handle.write(str(os.getpgrp()))
while True:  # a new pid at once, again and again: gone before /proc is read and a kill sent
    if os.fork():
        os._exit(0)
    with open("hopper.last", "w") as handle:  # who hops now: how a test tells it lives
        handle.write(str(os.getpid()))
"""


def _hopping(repo: Path, seconds: float = 0.3) -> bool:
    """Whether the hopper still hops: /proc cannot tell (no pid of it lives long enough to
    be seen), the pid it writes each time it hops can."""
    last = repo / "hopper.last"
    before = last.read_text() if last.exists() else ""
    time.sleep(seconds)
    return (last.read_text() if last.exists() else "") != before


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finding a hopper needs /proc")
def test_a_hopper_that_left_the_group_dies_with_its_gate(repo: Path) -> None:
    """A process in a session of its own that forks and exits at once, again and again, is
    never at one pid long enough to be killed by pid: its process group is signalled whole."""
    (repo / "hopper.py").write_text(HOPPER)
    contract = (f'[[gate]]\nname = "hopper"\ntimeout_seconds = 1\n'
                f'command = [{json.dumps(PY)}, "hopper.py"]\n')
    try:
        (result,) = run_contract(repo, contract).results
        assert (result.outcome, result.code) == ("failed", "timeout")
        assert not _hopping(repo)
    finally:
        if (repo / "hopper.pgid").exists():  # never leave a hopper behind, pass or fail
            pgid = int((repo / "hopper.pgid").read_text())
            end = time.monotonic() + 10
            while time.monotonic() < end:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)
                if not _hopping(repo, 0.05):
                    break


@pytest.mark.parametrize("timeout", [None, 1], ids=["exits", "times-out"])
def test_without_proc_the_process_group_is_still_ended(
    repo: Path, monkeypatch: pytest.MonkeyPatch, timeout: int | None
) -> None:
    """Where there is no ``/proc`` (not Linux) only the process group can be reached: what a
    gate left in it is killed when the gate exits or times out. The watchdog, a process of its
    own with the real ``/proc``, is kept out of it."""
    monkeypatch.setattr(tree, "PROC", str(repo / "no-proc"))
    monkeypatch.setattr(watchdog, "_spawn", lambda: None)
    wait = "; sleep 300" if timeout else ""
    limit = f"timeout_seconds = {timeout}\n" if timeout else ""
    contract = ('[[gate]]\nname = "group"\nshell = true\n' + limit
                + f'command = "sleep 300 >/dev/null 2>&1 & echo $! > left.pid{wait}"\n')
    (result,) = run_contract(repo, contract).results
    pid = int((repo / "left.pid").read_text())
    try:
        expected = ("failed", "timeout") if timeout else ("passed", None)
        assert (result.outcome, result.code) == expected
        assert wait_dead([pid], seconds=1.0) == []
    finally:
        kill_all([pid])
