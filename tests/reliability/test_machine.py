"""No traceback, whatever the machine does: a state directory that cannot be used (a file in
its place, a read-only ``.git``), a disk that fills up under the logs, a timeout too large for
any clock. Gates still run, the report is still written, and nothing is left running.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_verifygate.contract import load_contract
from pytest_verifygate.engine import run_gates
from pytest_verifygate.git.changes import ChangeSet
from pytest_verifygate.selection import select_gates

from .support import PY, kill_all, validate, wait_dead
from conftest import commit_all, git, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("timeout", [10**400, 1e308, float("inf")],
                         ids=["400-digit-int", "1e308", "inf"])
def test_a_huge_timeout_is_no_deadline_not_a_crash(repo: Path, timeout: float) -> None:
    """The contract reader rejects such values; the Python API takes a ``Gate`` as given."""
    write(repo / "verify.toml", '[[gate]]\nname = "a"\ncommand = "echo fine"\n')
    contract = load_contract(repo / "verify.toml")
    contract = contract._replace(
        gates=tuple(gate._replace(timeout_seconds=timeout) for gate in contract.gates))
    changes = ChangeSet("all")
    (result,) = run_gates(contract, select_gates(contract, changes), changes).results
    assert (result.outcome, result.output_tail) == ("passed", "fine\n")


@contextlib.contextmanager
def _mounted(*args: str) -> Iterator[None]:
    """``mount ARGS`` for the block (root only: the test is skipped where it cannot)."""
    target = args[-1]
    if os.geteuid() != 0:
        pytest.skip("needs root to mount")
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", target], check=False)


@contextlib.contextmanager
def _unusable_state(repo: Path, how: str) -> Iterator[None]:
    state = repo / ".git" / "verifygate"
    if how == "file":
        write(state, "a file where the state directory should be\n")
        yield
        return
    # Read-only: as root, permission bits stop nothing; a read-only bind mount does.
    if os.geteuid() != 0:
        (repo / ".git").chmod(0o555)
        try:
            yield
        finally:
            (repo / ".git").chmod(0o755)
        return
    git_dir = str(repo / ".git")
    with _mounted("--bind", git_dir, git_dir):
        done = subprocess.run(["mount", "-o", "remount,bind,ro", git_dir],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot remount read-only: {done.stderr.strip()}")
        yield


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if "warning" in line and "log" in line]


@pytest.mark.parametrize("how", ["file", "read-only"])
def test_an_unusable_state_directory_still_runs_gates_and_reports(repo: Path, how: str) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "a"\ncommand = "echo from-the-gate"\n')
    commit_all(repo)
    with _unusable_state(repo, how):
        done = verifygate("run", "--all", "--json", "report.json", cwd=repo)
        plugin = subprocess.run(
            [PY, "-m", "pytest", "--verify-contract", "--verify-report", "pytest.json",
             "-p", "no:cacheprovider", "verify.toml"],
            cwd=repo, capture_output=True, text=True, timeout=120)
    stderr = done.stderr
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert len(_warnings(stderr)) == 1, stderr  # one warning, naming where the logs went
    output = plugin.stdout + plugin.stderr
    assert plugin.returncode == 0, output
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert len(_warnings(output)) == 1, output
    for name in ("report.json", "pytest.json"):
        report = json.loads((repo / name).read_text())
        validate(report)
        (gate,) = report["gates"]
        assert (gate["outcome"], gate["output_tail"]) == ("passed", "from-the-gate\n")


# Prints its pid (to a file outside the full disk), 1 MiB, then a last line.
CHATTY = ("import os, sys; open('gate.pid', 'w').write(str(os.getpid()))\n"
          "for _ in range(1024): sys.stdout.write('x' * 1023 + '\\n')\n"
          "print('the end')")


def test_a_full_disk_under_the_logs_is_a_note_not_a_crash(repo: Path) -> None:
    """The logs live on a 64 KiB file system; the gate prints 1 MiB. Writing the log fails
    midway (ENOSPC): the gate still runs to its end, its result and output tail are right,
    the output says the log is incomplete, and the report is written."""
    write(repo / "verify.toml", f'[[gate]]\nname = "chatty"\n'
          f'command = [{json.dumps(sys.executable)}, "-c", {json.dumps(CHATTY)}]\n')
    state = repo / ".git" / "verifygate"
    state.mkdir()
    pids: list[int] = []
    with _mounted("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(state)):
        try:
            done = verifygate("run", "--all", "--json", "report.json", cwd=repo)
        finally:
            pids = [int((repo / "gate.pid").read_text())] if (repo / "gate.pid").exists() else []
            leftover = wait_dead(pids)
            kill_all(pids)
    stderr = done.stderr
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert pids and leftover == []
    report = json.loads((repo / "report.json").read_text())
    validate(report)
    (gate,) = report["gates"]
    assert gate["outcome"] == "passed" and gate["output_bytes"] >= 1 << 20
    assert "the end\n" in gate["output_tail"]
    assert "No space left on device" in gate["output_tail"]


def test_a_file_in_place_of_the_state_directory_is_one_warning(repo: Path) -> None:
    """The logs, the cached passes, the durations and the record of outputs all live in the
    state directory: a file in its place is one line, whichever of them meets it first."""
    write(repo / "verify.toml", '[[gate]]\nname = "a"\ncommand = "true"\ncache = true\n'
          '[[gate]]\nname = "b"\ncommand = "echo b"\n')
    commit_all(repo)
    write(repo / "new.py", "x = 1\n")
    git(repo, "add", "new.py")  # a change: the record of outputs is read too
    state = write(repo / ".git" / "verifygate", "a file where the state directory should be\n")
    for args in (["--all", "--jobs", "2"], ["--staged", "--jobs", "2"]):
        done = verifygate("run", *args, "--json", "report.json", cwd=repo)
        stderr = done.stderr
        assert done.returncode == 0, stderr
        (line,) = stderr.splitlines()  # nothing else on stderr
        assert line.startswith(f"verifygate: warning: {state} ") and "logs" in line, line
        assert json.loads((repo / "report.json").read_text())["verdict"] == "passed"
    plugin = subprocess.run(
        [PY, "-m", "pytest", "--verify-contract", "--verify-staged", "--verify-report",
         "report.json", "-p", "no:cacheprovider", "verify.toml"],
        cwd=repo, capture_output=True, text=True, timeout=120)
    output = plugin.stdout + plugin.stderr
    assert plugin.returncode == 0, output
    assert [line for line in output.splitlines() if "warning" in line] == [line], output
    # A commit whose check has work to set aside has nowhere to put it: refused, untouched.
    write(repo / "untracked.py", "y = 2\n")
    done = verifygate("run", "--staged", cwd=repo)
    assert done.returncode == 2, done
    assert done.stderr.startswith(
        f"verifygate: error: cannot set aside what the staged content lacks ({state}: ")
    assert (repo / "untracked.py").read_text() == "y = 2\n"
