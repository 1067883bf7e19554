"""Load: 200 gates, 16 at a time, leave no descriptor, thread, child or zombie behind, and
every line of output lands in the gate that printed it. Runs at the same time share the log
storage without pruning each other's logs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pytest_verifygate.engine import RunRequest, prepare, start, to_report
from pytest_verifygate.git.changes import ChangeRequest
from pytest_verifygate.runner.watchdog import REAPER_THREAD
from pytest_verifygate.state.storage import KEEP_LOG_RUNS, new_log_dir, state_dir

from .support import PY, children_of, open_fds, run_contract, validate

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

GATES = 200
LINES = 100
# Each gate prints its own name on every line, pausing now and then so that the gates'
# outputs interleave in time while 16 of them share the machine.
SCRIPT = ('i=0; while [ $i -lt {lines} ]; do echo \\"{name} line $i\\"; i=$((i+1)); '
          'if [ $((i % 25)) -eq 0 ]; then sleep 0.01; fi; done')


def test_two_hundred_gates_leak_nothing_and_keep_their_own_output(repo: Path) -> None:
    contract = "[settings]\njobs = 16\n" + "".join(
        f'[[gate]]\nname = "gate{index:03d}"\nshell = true\n'
        f'command = "{SCRIPT.format(lines=LINES, name=f"gate{index:03d}")}"\n'
        for index in range(GATES)
    )
    fds_before = open_fds()
    threads_before = threading.active_count()
    assert children_of(os.getpid()) == []

    run = run_contract(repo, contract)
    # The run does not wait for its watchdog to exit (it exits on its own once the run closes
    # its stdin); wait for that here, boundedly, before counting threads and children.
    for thread in threading.enumerate():
        if thread.name == REAPER_THREAD:
            thread.join(timeout=30)

    assert open_fds() == fds_before  # every pipe and log file closed
    assert threading.active_count() == threads_before  # the worker pool is gone
    assert children_of(os.getpid()) == []  # every gate reaped: no child, no zombie
    assert len(run.results) == GATES
    for index, result in enumerate(run.results):
        name = f"gate{index:03d}"
        assert (result.name, result.outcome) == (name, "passed"), result.output_tail
        assert result.output_tail.splitlines() == [f"{name} line {i}" for i in range(LINES)]
    validate(to_report(run))


# The first gate waits (up to a minute) for the test to say go; the second starts after it and
# opens its log only then, in the run's log directory, whatever happened to it meanwhile.
WAIT_THEN_PRINT = ('[settings]\njobs = 1\n'
                   '[[gate]]\nname = "waits"\nshell = true\n'
                   'command = "touch waiting; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do '
                   'sleep 0.1; i=$((i+1)); done; echo waited"\n'
                   '[[gate]]\nname = "after"\ncommand = "echo after"\n')


def _wait_for(path: Path, process: subprocess.Popen[bytes]) -> None:
    end = time.monotonic() + 60
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["other runs prune", "the directory vanishes"])
def test_a_run_keeps_its_logs_while_others_prune(repo: Path, how: str) -> None:
    """More runs than are kept start and end while one run is still going: its log directory
    is in use and is not pruned; and if it vanishes anyway, the run still finishes."""
    (repo / "verify.toml").write_text(WAIT_THEN_PRINT)
    first = subprocess.Popen([PY, "-m", "pytest_verifygate.cli", "run", "--all", "--json",
                              "report.json"], cwd=repo, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        _wait_for(repo / "waiting", first)
        logs = state_dir(repo) / "logs"
        (running,) = list(logs.iterdir())
        if how == "other runs prune":
            for _ in range(KEEP_LOG_RUNS + 2):
                new_log_dir(repo)  # another process's run, each pruning the oldest
            assert running.is_dir()
        else:
            shutil.rmtree(running)
        (repo / "go").touch()
        _, stderr = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, stderr.decode()
    assert b"Traceback" not in stderr
    report = json.loads((repo / "report.json").read_text())
    validate(report)
    gates = {gate["name"]: gate for gate in report["gates"]}
    assert gates["after"]["outcome"] == "passed"
    assert Path(gates["after"]["log_path"]).read_text() == "after\n"
    if how == "other runs prune":
        assert Path(gates["waits"]["log_path"]).read_text() == "waited\n"


def test_a_run_in_this_process_keeps_its_logs_while_this_process_prunes(repo: Path) -> None:
    """The same within one process (an MCP server, a test suite): runs started after one
    that is still going prune around it, never under it."""
    (repo / "verify.toml").write_text(WAIT_THEN_PRINT)
    plan = prepare(RunRequest(start=repo, changes=ChangeRequest(all=True)))
    runner = start(plan)
    try:
        end = time.monotonic() + 60
        while not (repo / "waiting").exists():
            assert time.monotonic() < end
            time.sleep(0.05)
        for _ in range(KEEP_LOG_RUNS + 2):
            new_log_dir(repo)
        (repo / "go").touch()
        results = {result.name: result for result in runner.results()}
    finally:
        (repo / "go").touch()
        runner.close()
    assert {name: result.outcome for name, result in results.items()} == {
        "waits": "passed", "after": "passed"}
    assert Path(results["waits"].log_path or "").read_text() == "waited\n"
    assert Path(results["after"].log_path or "").read_text() == "after\n"
