"""Longest gates first: the start order made from the durations earlier runs recorded.

With more than one job, the gates that took longest before start first, so that no long gate
is left to start last while the others are done; ``needs`` and ``exclusive`` hold as always,
and with ``jobs = 1`` the declared order is kept. Gates log ``start NAME`` / ``end NAME`` lines
to one shared file (appends of one short line are atomic): the tests read the order from it,
never from timings. With two jobs, a gate made with ``together=2`` waits after its start until
two gates have started, so the first two lines are the first two gates spawned however slowly
each process starts (a quick first gate cannot end, and let a third start, before the second
has logged).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from plugin_support import QUIET_PLUGINS, init_repo
from pytest_verifygate.state import durations

from conftest import LOGGING, commit_all, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PY = sys.executable


# conftest's LOGGING, waiting after its start until the log holds ``sys.argv[4]`` starts.
PAIRED = LOGGING.replace(
    'log("start")\n',
    'log("start")\n'
    'end = time.monotonic() + 60\n'
    'while len(sys.argv) > 4 and time.monotonic() < end and open(sys.argv[1]).read()'
    '.count("start ") < int(sys.argv[4]):\n'
    '    time.sleep(0.01)\n',
)


def gate(name: str, seconds: float = 0.3, together: int = 1, **keys: object) -> str:
    command = f"{PY} logging.py events.log {name} {seconds} {together}"
    extra = "".join(f"{key} = {json.dumps(value)}\n" for key, value in keys.items())
    return f"[[gate]]\nname = {json.dumps(name)}\ncommand = {json.dumps(command)}\n{extra}"


def contract(repo: Path, *gates: str, jobs: int | None = None) -> None:
    write(repo / "logging.py", PAIRED)
    settings = f"[settings]\njobs = {jobs}\n\n" if jobs is not None else ""
    write(repo / "verify.toml", settings + "\n".join(gates))


def record(repo: Path, seconds: dict[str, float]) -> None:
    assert durations.record_durations(repo, "verify.toml", seconds, None)


def starts(repo: Path) -> list[str]:
    lines = (repo / "events.log").read_text().splitlines()
    return [line.split(" ", 1)[1] for line in lines if line.startswith("start ")]


def events(repo: Path) -> list[str]:
    return (repo / "events.log").read_text().splitlines()


def test_the_gate_that_took_longest_starts_first(repo: Path) -> None:
    contract(repo, *(gate(name, together=2) for name in ("a", "b", "c", "d", "long")))
    record(repo, {"a": 0.3, "b": 0.3, "c": 0.3, "d": 0.3, "long": 9.0})
    verifygate("run", "--all", "--jobs", "2", cwd=repo, status=0)
    # Two start at once; declared last, "long" is one of them (the other is "a").
    assert set(starts(repo)[:2]) == {"long", "a"}, events(repo)


def test_a_run_records_durations_and_the_next_run_uses_them(repo: Path) -> None:
    contract(repo, *(gate(name, 0.05, together=2) for name in ("a", "b", "c")),
             gate("long", 0.6, together=2))
    verifygate("run", "--all", "--jobs", "2", cwd=repo, status=0)
    assert set(starts(repo)[:2]) == {"a", "b"}, events(repo)  # nothing recorded: declared
    recorded, warning = durations.read_durations(repo, "verify.toml")
    assert warning is None and set(recorded) == {"a", "b", "c", "long"}, recorded
    assert recorded["long"] > max(recorded["a"], recorded["b"], recorded["c"]), recorded
    (repo / "events.log").unlink()
    verifygate("run", "--all", "--jobs", "2", cwd=repo, status=0)
    assert "long" in starts(repo)[:2], events(repo)


def test_with_one_job_the_declared_order_is_kept(repo: Path) -> None:
    contract(repo, *(gate(name, 0) for name in ("a", "b", "long")), jobs=1)
    record(repo, {"a": 0.1, "b": 0.1, "long": 9.0})
    verifygate("run", "--all", cwd=repo, status=0)
    assert starts(repo) == ["a", "b", "long"], events(repo)


def test_middle_gates_keep_their_declared_order(repo: Path) -> None:
    write(repo / "logging.py", PAIRED)
    write(repo / ".middle" / "verify.toml", "".join(
        f'[[gate]]\nname = "{name}"\ncommand = "{PY} logging.py events.log {name} 0"\n'
        for name in ("a", "b", "long")))
    assert durations.record_durations(repo, ".middle/verify.toml",
                                      {"a": 0.1, "b": 0.1, "long": 9.0}, None)
    verifygate("run", "--all", cwd=repo, status=0)
    assert starts(repo) == ["a", "b", "long"], events(repo)


def test_gates_never_start_before_an_exclusive_gate_declared_before_them(repo: Path) -> None:
    contract(repo, gate("a"), gate("fmt", 0.1, exclusive=True), gate("b"), gate("long"),
             jobs=2)
    record(repo, {"a": 0.1, "fmt": 0.1, "b": 0.1, "long": 9.0})
    verifygate("run", "--all", cwd=repo, status=0)
    log = events(repo)
    assert log[:4] == ["start a", "end a", "start fmt", "end fmt"], log
    assert set(starts(repo)[2:]) == {"long", "b"}, log


def test_a_gate_needed_by_a_long_gate_starts_first(repo: Path) -> None:
    # "build" is quick, but "e2e" (the longest) cannot start before it passed: build first.
    contract(repo, *(gate(name, together=2) for name in ("a", "b", "c")),
             gate("e2e", 0.3, together=2, needs=["build"]), gate("build", 0.05, together=2),
             jobs=2)
    record(repo, {"a": 0.3, "b": 0.3, "c": 0.3, "e2e": 9.0, "build": 0.05})
    verifygate("run", "--all", cwd=repo, status=0)
    log = events(repo)
    assert "build" in starts(repo)[:2], log
    assert log.index("end build") < log.index("start e2e"), log
    assert starts(repo).index("e2e") <= 2, log


def test_pytest_starts_the_longest_gate_first(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    contract(pytester.path, *(gate(name, together=2) for name in ("a", "b", "c", "long")))
    commit_all(pytester.path)
    record(pytester.path, {"a": 0.3, "b": 0.3, "c": 0.3, "long": 9.0})
    pytester.runpytest("--verify-contract", "--verify-jobs", "2").assert_outcomes(passed=4)
    assert set(starts(pytester.path)[:2]) == {"long", "a"}, events(pytester.path)
    # The items still report in contract order, and the run recorded what it measured.
    recorded, _ = durations.read_durations(pytester.path, "verify.toml")
    assert recorded["long"] < 9.0, recorded


def test_longest_first_puts_a_gate_before_the_long_gates_that_need_it() -> None:
    recorded = {"a": 1.0, "e2e": 9.0, "build": 0.5, "b": 2.0}
    needs = {"e2e": ("build",)}
    assert durations.longest_first(["a", "b", "e2e", "build"], recorded, needs) == [
        "build", "e2e", "b", "a"]
    # Without needs: by their own durations alone.
    assert durations.longest_first(["a", "b", "e2e", "build"], recorded) == [
        "e2e", "b", "a", "build"]


def test_a_run_answered_from_the_cache_reads_no_durations(repo: Path) -> None:
    # Gates that start no process have no order to choose: a cached run does not read the
    # file (a garbage one is warned about only by a run that starts two gates).
    contract(repo, *(gate(name, 0, cache=True, inputs=["logging.py"]) for name in "ab"))
    commit_all(repo)
    verifygate("run", "--all", "--jobs", "2", cwd=repo, status=0)
    path = durations.durations_path(repo)
    assert path is not None
    path.write_text("not json")
    ran = verifygate("run", "--all", "--jobs", "2", "--no-cache", cwd=repo, status=0)
    assert "this file of gate durations" in ran.stdout + ran.stderr, ran.stdout + ran.stderr
    path.write_text("not json")
    cached = verifygate("run", "--all", "--jobs", "2", cwd=repo, status=0)
    assert cached.stdout.count("cached") == 2, cached.stdout
    assert "gate durations" not in cached.stdout + cached.stderr, cached.stdout + cached.stderr
