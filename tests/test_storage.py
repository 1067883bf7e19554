"""Where run logs live, and that only the last few runs' logs are kept."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from pytest_verifygate.engine import RunRequest, prepare, run
from pytest_verifygate.git.changes import ChangeRequest
from pytest_verifygate.state.files import prune_own_files
from pytest_verifygate.state.storage import (
    KEEP_LOG_RUNS,
    _private_temp_dir,
    claim_log_dir,
    new_log_dir,
    state_dir,
)

from conftest import commit_all, write


def test_log_dirs_are_pruned_to_the_newest_runs(repo: Path) -> None:
    created = []
    for index in range(KEEP_LOG_RUNS + 3):
        run_dir = new_log_dir(repo)
        (run_dir / "lint.log").write_text(f"run {index}\n")
        (run_dir / "tests.log").write_text("output\n")
        created.append(run_dir)
    logs = state_dir(repo) / "logs"
    left = sorted(logs.iterdir())
    assert left == created[-KEEP_LOG_RUNS:]
    assert (left[-1] / "lint.log").read_text() == f"run {KEEP_LOG_RUNS + 2}\n"


def test_pruning_leaves_whatever_a_run_did_not_write(repo: Path) -> None:
    """Only a run's log files go; a directory someone put in there keeps its run directory."""
    first = new_log_dir(repo)
    (first / "lint.log").write_text("old log\n")
    (first / "nested" / "deeper").mkdir(parents=True)
    (first / "nested" / "deeper" / "x.log").write_text("x\n")
    for _ in range(KEEP_LOG_RUNS):
        new_log_dir(repo)
    assert not (first / "lint.log").exists()
    assert (first / "nested" / "deeper" / "x.log").read_text() == "x\n"
    assert len(list((state_dir(repo) / "logs").iterdir())) == KEEP_LOG_RUNS + 1


def test_pruning_never_follows_a_link_out_of_the_log_directory(repo: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious\n")
    logs = state_dir(repo) / "logs"
    logs.mkdir(parents=True)
    (logs / "00000000-000000.000000000-1").symlink_to(victim)  # sorts as the oldest run
    for _ in range(KEEP_LOG_RUNS + 1):
        new_log_dir(repo)
    assert (victim / "keep.txt").read_text() == "precious\n"


def test_runs_sort_in_time_order_whatever_the_time_zone(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    first = new_log_dir(repo)
    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    second = new_log_dir(repo)
    monkeypatch.undo()
    time.tzset()
    assert first.name < second.name


def test_a_shared_temp_directory_taken_by_someone_else_is_not_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    project = tmp_path / "no-git-project"
    project.mkdir()
    taken = tmp_path / f"verifygate-{os.getuid()}"
    taken.mkdir()
    taken.chmod(0o777)  # writable by anyone: not a place for this user's state
    _private_temp_dir.cache_clear()  # it is chosen once per process
    try:
        fresh = state_dir(project)
        assert not fresh.is_relative_to(taken)
        assert state_dir(project) == fresh  # one fresh directory for the whole run
        taken.chmod(0o700)
        _private_temp_dir.cache_clear()
        assert state_dir(project).parent.parent == taken
    finally:
        _private_temp_dir.cache_clear()


def aged(path: Path, text: str, age_seconds: int) -> Path:
    path.write_text(text)
    then = time.time() - age_seconds
    os.utime(path, (then, then), follow_symlinks=False)
    return path


def own(name: str) -> bool:
    return name.endswith(".json")


def test_pruning_keeps_the_newest_of_its_own_files_by_mtime(tmp_path: Path) -> None:
    entries = tmp_path / "verifygate" / "entries"
    entries.mkdir(parents=True)
    for name, age in (("a", 10), ("b", 40), ("c", 20), ("d", 30)):
        aged(entries / f"{name}.json", name, age)
    aged(entries / "notes.txt", "not ours\n", 99)
    assert prune_own_files(entries, own, 2) == 2
    assert sorted(p.name for p in entries.iterdir()) == ["a.json", "c.json", "notes.txt"]
    assert prune_own_files(entries, own, 2) == 0


def test_pruning_removes_a_link_never_its_target_and_never_a_directory(tmp_path: Path) -> None:
    target = aged(tmp_path / "target.json", "precious\n", 0)
    entries = tmp_path / "verifygate" / "entries"
    entries.mkdir(parents=True)
    link = entries / "old.json"
    link.symlink_to(target)
    os.utime(link, (1, 1), follow_symlinks=False)  # the link is old, its target is new
    (entries / "older.json").mkdir()
    os.utime(entries / "older.json", (1, 1))
    newer = aged(entries / "new.json", "{}", 5)
    assert prune_own_files(entries, own, 0) == 1
    assert link.is_symlink() and (entries / "older.json").is_dir() and not newer.exists()
    assert target.read_text() == "precious\n"


def test_pruning_never_follows_a_linked_directory(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    for index in range(5):
        aged(victim / f"{index}.json", "precious\n", index)
    (tmp_path / "verifygate").mkdir()
    (tmp_path / "verifygate" / "entries").symlink_to(victim)
    assert prune_own_files(tmp_path / "verifygate" / "entries", own, 1) == 0
    assert len(list(victim.iterdir())) == 5


def test_a_claimed_log_dir_is_kept_until_released(repo: Path) -> None:
    """The claim is a lock on the directory: it holds for a run of this very process too,
    whose pid alone would not keep it."""
    first = new_log_dir(repo)
    release = claim_log_dir(first)
    (first / "lint.log").write_text("x\n")
    for _ in range(KEEP_LOG_RUNS + 1):
        new_log_dir(repo)
    assert (first / "lint.log").exists()
    release()
    new_log_dir(repo)
    assert not first.exists()


def test_a_late_pruning_of_an_old_run_never_removes_a_newer_one(repo: Path) -> None:
    """Pruning that runs late for an old run (threads of several runs of one process) keeps
    the newest runs all the same: keeping its own old run must not cost a newer one."""
    from pytest_verifygate.state import storage

    runs = [new_log_dir(repo) for _ in range(KEEP_LOG_RUNS + 2)]
    logs = state_dir(repo) / "logs"
    older = [logs / f"20000101-00000{index}.000000000-999999999" for index in range(3)]
    for run_dir in older:  # older runs, of a process that has ended
        run_dir.mkdir()
    fd = os.open(logs, os.O_RDONLY | os.O_DIRECTORY)
    try:  # the oldest run's pruning, run late: it keeps its own
        storage._prune(fd, older[0].name)
    finally:
        os.close(fd)
    assert sorted(logs.iterdir()) == [older[0], *runs[-KEEP_LOG_RUNS:]]


@pytest.mark.slow
def test_a_run_returns_what_its_state_files_say_and_prints_nothing(
        repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The library hands its warnings to the front end (``RunResult.warnings``), once each,
    and leaves printing to it: the durations file is read twice here (to order, to record)."""
    write(repo / "verify.toml", '[settings]\njobs = 2\n[[gate]]\nname = "a"\ncommand = "true"\n'
          '[[gate]]\nname = "b"\ncommand = "true"\n')
    commit_all(repo)
    durations = write(state_dir(repo) / "durations.json", "[1, 2, 3]\n")
    finished = run(prepare(RunRequest(start=repo, changes=ChangeRequest(all=True))))
    assert capfd.readouterr().err == ""
    (warning,) = finished.warnings
    assert warning.startswith("warning: ") and str(durations) in warning
