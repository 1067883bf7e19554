"""No process outlives its gate: not after a timeout, not after Ctrl-C or SIGTERM.

tests/test_runner.py covers a timed-out tree with a double-forked daemon and a grandchild
holding the output pipe; tests/test_cli.py covers one signal with jobs = 2. Here: gates that
ignore SIGTERM, many gates at once under both signals, daemons that closed their output, and
a second signal while the first is being handled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pytest_verifygate.runner.process import KILL_GRACE_SECONDS

from .support import PY, kill_all, read_pids, run_contract, validate, wait_dead

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


GATE_COUNT = 10
JOBS = 4


def _many_gates(repo: Path) -> None:
    (repo / "pids").mkdir()
    gates = []
    for index in range(GATE_COUNT):
        pids = repo / "pids" / f"g{index}"
        if index == 1:
            command = TERM_PROOF.format(pids=pids)
        else:
            command = (f"sleep 300 & echo $! >> {pids}; (sleep 300 & echo $! >> {pids}); "
                       f"echo $$ >> {pids}; wait")
        gates.append(f'[[gate]]\nname = "g{index}"\nshell = true\ncommand = "{command}"\n')
    (repo / "verify.toml").write_text(f"[settings]\njobs = {JOBS}\n" + "".join(gates))


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C", "SIGTERM twice"])
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
