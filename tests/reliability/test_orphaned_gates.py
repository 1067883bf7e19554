"""No gate outlives its deadline whatever happens to the process that started it: killed with
SIGKILL (the OOM killer, an agent tool's hard kill), stopped (SIGSTOP), or a pytest ended by
``os._exit`` from a thread (pytest-timeout's thread method).

Each gate is a shell loop appending to a heartbeat file, with a grandchild doing the same and
a sleeping grandchild; every process carries a marker in its environment, so the tests find
them in /proc wherever they went.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from pytest_verifygate.runner import process, tree
from pytest_verifygate.runner.process import KILL_GRACE_SECONDS
from pytest_verifygate.runner.watchdog import AFTER_DEADLINE_SECONDS, GRACE_SECONDS, Watchdog

from .support import PY, kill_all, marked, wait_unmarked

MARKER_ENV = "VG_ORPHAN_TEST"
# The gate, its looping grandchild and its sleeping grandchild all beat or sleep.
HEARTBEAT = ("sleep 300 & (while :; do echo child >> heartbeat; sleep 0.05; done) & "
             "while :; do echo gate >> heartbeat; sleep 0.05; done")


def _contract(root: Path, marker: str, timeout: float) -> None:
    (root / "verify.toml").write_text(
        '[[gate]]\nname = "beating"\nshell = true\n'
        f'timeout_seconds = {timeout}\ncommand = "{HEARTBEAT}"\n'
        f'env = {{ {MARKER_ENV} = "{marker}" }}\n')


def _wait_for_beats(root: Path, marker: str, parent: subprocess.Popen[bytes]) -> None:
    """Until the gate and both of its grandchildren run and the heartbeat file grows."""
    end = time.monotonic() + 60
    while time.monotonic() < end:
        beats = root / "heartbeat"
        if len(marked(marker)) >= 4 and beats.exists() and b"child" in beats.read_bytes():
            return
        assert parent.poll() is None, parent.communicate()
        time.sleep(0.05)
    raise AssertionError(f"the gate never started: {marked(marker)}")


def _assert_stopped_beating(root: Path, marker: str, seconds: float) -> None:
    """Every process of the gate is gone within ``seconds``, and the heartbeat is still."""
    survivors = wait_unmarked(marker, seconds)
    assert survivors == [], f"gate processes outlived their parent: {survivors}"
    size = (root / "heartbeat").stat().st_size
    time.sleep(0.3)
    assert (root / "heartbeat").stat().st_size == size


def _verifygate_run(root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [PY, "-m", "pytest_verifygate.cli", "run", "--all"], cwd=root,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


@pytest.mark.slow
def test_a_run_killed_with_sigkill_takes_its_gates_with_it(repo: Path) -> None:
    marker = uuid.uuid4().hex
    _contract(repo, marker, timeout=300)
    run = _verifygate_run(repo)
    try:
        _wait_for_beats(repo, marker, run)
        run.kill()
        run.wait()
        # At once: long before the gate's five-minute deadline.
        _assert_stopped_beating(repo, marker, 5)
    finally:
        kill_all(marked(marker))
        run.kill()
        run.wait()


@pytest.mark.slow
def test_a_stopped_run_s_gates_still_end_at_their_deadline(repo: Path) -> None:
    marker = uuid.uuid4().hex
    _contract(repo, marker, timeout=2)
    run = _verifygate_run(repo)
    try:
        started = time.monotonic()
        _wait_for_beats(repo, marker, run)
        # A stopped parent can enforce nothing: its deadline is someone else's to keep.
        run.send_signal(signal.SIGSTOP)
        # Its deadline, the time the run would have taken to end it, the watchdog's grace, and
        # room for two loaded cores (without the watchdog, nothing ever ends it).
        left = 2 + AFTER_DEADLINE_SECONDS + GRACE_SECONDS + 5 - (time.monotonic() - started)
        _assert_stopped_beating(repo, marker, left)
    finally:
        kill_all(marked(marker))
        run.kill()
        run.wait()


# pytest-timeout's thread method: a thread that ends the process with os._exit, no cleanup.
EXIT_FROM_A_THREAD = """\
import os, threading, time

def pytest_configure(config):
    def end():
        while not (os.path.exists("heartbeat") and b"child" in open("heartbeat", "rb").read()):
            time.sleep(0.05)
        time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=end, daemon=True).start()
"""


def test_the_watchdog_waits_for_the_run_to_end_a_gate_that_timed_out() -> None:
    # A live run ends a timed-out gate itself (and records the timeout): the watchdog only
    # steps in once the run's own SIGTERM, grace, SIGKILL and last look have had their time.
    assert AFTER_DEADLINE_SECONDS > (KILL_GRACE_SECONDS + process.LEFTOVER_GRACE_SECONDS
                                     + tree.KILL_WAIT_SECONDS)


@pytest.mark.slow
def test_a_pytest_ended_by_os_exit_from_a_thread_takes_its_gates_with_it(
    tmp_path: Path,
) -> None:
    marker = uuid.uuid4().hex
    _contract(tmp_path, marker, timeout=300)
    (tmp_path / "conftest.py").write_text(EXIT_FROM_A_THREAD)
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--verify-contract", "-p", "no:cacheprovider"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    try:
        assert session.wait(60) == 1
        _assert_stopped_beating(tmp_path, marker, 5)
    finally:
        kill_all(marked(marker))
        if session.poll() is None:
            session.kill()
            session.wait()


@pytest.mark.slow
def test_a_command_whose_run_died_before_saying_it_started_is_ended_by_its_mark() -> None:
    """A run killed right after spawning a gate command, before it could tell the watchdog
    the command's first process: the watchdog, told the mark before the spawn, ends the
    processes carrying it when the run's pipe closes."""
    mark = "vg" + uuid.uuid4().hex
    gate = subprocess.Popen(["sleep", "300"], env={**os.environ, tree.TREE_ENV: mark},
                            start_new_session=True)
    dog = Watchdog()
    try:
        dog.expecting(mark)  # the run dies here: it never says "started"
        dog.close()
        assert wait_unmarked(mark, 10) == [], "the command outlived its run"
        assert gate.wait(10) == -signal.SIGTERM
    finally:
        kill_all([gate.pid])
        gate.wait()


@pytest.mark.slow
def test_a_command_that_could_not_be_spawned_is_not_looked_for() -> None:
    """A spawn that failed is forgotten: at the end the watchdog looks for no process by
    that mark (a scan of every process, for nothing)."""
    mark = "vg" + uuid.uuid4().hex
    bystander = subprocess.Popen(["sleep", "300"], env={**os.environ, tree.TREE_ENV: mark},
                                 start_new_session=True)
    dog = Watchdog()
    try:
        dog.expecting(mark)
        dog.forget(mark)
        process = dog._process
        assert process is not None
        dog.close()
        assert process.wait(10) == 0
        assert bystander.poll() is None, "a forgotten mark was looked for"
    finally:
        kill_all([bystander.pid])
        bystander.wait()
