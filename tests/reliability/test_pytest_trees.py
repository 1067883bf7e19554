"""No process outlives its gate under pytest either: -x, -n 2 (pytest-xdist), Ctrl-C, SIGTERM.

These run real pytest sessions in child processes (the plugin is loaded as installed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .support import kill_all, read_pids, validate, wait_dead

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

# A gate that starts two sleepers (one orphaned at once, still in its group) and records
# every pid, so the test can prove afterwards that nothing survived.
TREE = ("sleep 300 & echo $! >> pids/{name}; (sleep 300 & echo $! >> pids/{name}); "
        "echo $$ >> pids/{name}; wait")
TERM_PROOF = ("trap '' TERM; sleep 300 & echo $! >> pids/{name}; echo $$ >> pids/{name}; "
              "while :; do sleep 0.2; done")


def _contract(root: Path, *, timeout: float = 120, trees: int = 3,
              stubborn: bool = True) -> None:
    (root / "pids").mkdir()
    gates = [("fails", "sleep 0.5; exit 3")]
    gates += [(f"tree{i}", TREE.format(name=f"tree{i}")) for i in range(trees)]
    if stubborn:
        gates += [("stubborn", TERM_PROOF.format(name="stubborn"))]
    (root / "verify.toml").write_text("[settings]\njobs = 5\n" + "".join(
        f'[[gate]]\nname = "{name}"\nshell = true\ntimeout_seconds = {timeout}\n'
        f'command = "{command}"\n' for name, command in gates))


def _pytest(root: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "--verify-contract", "--verify-report", "report.json",
         "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )


def _wait_for_pids(root: Path, count: int, process: subprocess.Popen[bytes]) -> list[int]:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        pids = read_pids(root / "pids")
        if len(pids) >= count:
            return pids
        assert process.poll() is None, process.communicate()[0].decode()
        time.sleep(0.05)
    raise AssertionError(f"only {read_pids(root / 'pids')} started")


class TooSlow(Exception):
    """-x did not stop the gates still running: the run waited for them to end."""


@pytest.mark.parametrize(
    "args",
    [["-x"],
     pytest.param(["-x", "-n", "2"], marks=pytest.mark.xfail(
         strict=True, raises=TooSlow, reason="under xdist, -x waits for the gates already "
         "running on other workers to end (they still end by their timeout, leaving nothing "
         "behind) instead of killing them")),
     ["-n", "2"]],
    ids=["x", "x-xdist", "xdist-timeouts"],
)
def test_pytest_runs_leave_no_process(tmp_path: Path, args: list[str]) -> None:
    exitfirst = "-x" in args
    # With -x the trees are killed by the stop; without it, by their timeout.
    timeout = 10.0 if exitfirst else 1.0
    _contract(tmp_path, timeout=timeout, trees=3 if exitfirst else 1, stubborn=not exitfirst
              or "-n" not in args)
    process = _pytest(tmp_path, *args)
    recorded: list[int] = []
    try:
        output, _ = process.communicate(timeout=120)
        recorded = read_pids(tmp_path / "pids")
        assert process.returncode in (1, 2), output.decode()
        assert b"Traceback" not in output
        report = json.loads((tmp_path / "report.json").read_text())
        validate(report)
        codes = {gate["name"]: gate["code"] for gate in report["gates"]}
        assert codes["fails"] == "command_failed"
        if not exitfirst:
            assert set(codes.values()) == {"command_failed", "timeout"}, codes
        assert recorded and wait_dead(recorded) == []
        # Judged by what ended the gates, not by the clock: killed by the stop, they are
        # "interrupted"; left to run, they reach their timeout.
        timed_out = sorted(name for name, code in codes.items() if code == "timeout")
        if exitfirst and timed_out:
            raise TooSlow(f"{timed_out} ran to their {timeout}s timeout after -x")
    finally:
        kill_all(recorded or read_pids(tmp_path / "pids"))
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.parametrize("how", ["Ctrl-C", "SIGTERM", "SIGHUP", "SIGQUIT"])
@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist"])
def test_signals_to_pytest_leave_no_process(tmp_path: Path, how: str, xdist: bool) -> None:
    _contract(tmp_path)
    process = _pytest(tmp_path, *(["-n", "2"] if xdist else []))
    recorded: list[int] = []
    try:
        # Without xdist all five gates start at once; with it, one per worker at a time.
        recorded = _wait_for_pids(tmp_path, 4 if xdist else 11, process)
        time.sleep(0.3)
        if how == "Ctrl-C":
            os.killpg(process.pid, signal.SIGINT)
        else:
            process.send_signal(getattr(signal, how))
        output, _ = process.communicate(timeout=60)
        recorded = read_pids(tmp_path / "pids")
        assert wait_dead(recorded, seconds=5) == []
        # Every terminating signal ends the session the way Ctrl-C does: a complete report.
        assert process.returncode == 2, output.decode()
        report = json.loads((tmp_path / "report.json").read_text())
        validate(report)
        assert report["interrupted"] is True and report["verdict"] == "failed"
        outcomes = {gate["name"]: (gate["outcome"], gate["code"]) for gate in report["gates"]}
        assert sorted(outcomes) == ["fails", "stubborn", "tree0", "tree1", "tree2"]
        assert outcomes["stubborn"] == ("failed", "interrupted")
    finally:
        kill_all(recorded or read_pids(tmp_path / "pids"))
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_a_signal_during_collection_reports_the_gates_as_interrupted(tmp_path: Path) -> None:
    """SIGTERM while pytest imports a slow test module, before any gate started: the report
    is written, and its gates are interrupted (not "deselected", not "no gate ran")."""
    _contract(tmp_path, trees=1, stubborn=False)
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_slow.py").write_text(
        "import pathlib, time\npathlib.Path('collecting').touch()\ntime.sleep(30)\n"
        "def test_nothing():\n    pass\n")
    process = _pytest(tmp_path, "tests", "verify.toml")
    try:
        end = time.monotonic() + 60
        while not (tmp_path / "collecting").exists() and time.monotonic() < end:
            assert process.poll() is None, process.communicate()[0].decode()
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
        assert process.returncode == 2, output.decode()
        assert b"Traceback" not in output and b"INTERNALERROR" not in output
        report = json.loads((tmp_path / "report.json").read_text())
        validate(report)
        assert (report["interrupted"], report["verdict"]) == (True, "failed"), report
        assert {(gate["name"], gate["code"]) for gate in report["gates"]} == {
            ("fails", "interrupted"), ("tree0", "interrupted")}
        assert report["not_selected"] == []
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
