"""Where run logs live, and that only the last few runs' logs are kept."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from pytest_verifygate.storage import KEEP_LOG_RUNS, _private_temp_dir, new_log_dir, state_dir


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


def test_pruning_removes_a_log_dir_with_unexpected_contents(repo: Path) -> None:
    first = new_log_dir(repo)
    (first / "nested" / "deeper").mkdir(parents=True)
    (first / "nested" / "deeper" / "x.log").write_text("x\n")
    for _ in range(KEEP_LOG_RUNS):
        new_log_dir(repo)
    assert not first.exists()
    assert len(list((state_dir(repo) / "logs").iterdir())) == KEEP_LOG_RUNS


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
        assert state_dir(project).parent == taken
    finally:
        _private_temp_dir.cache_clear()
