"""Where run logs live, and that only the last few runs' logs are kept."""

from __future__ import annotations

from pathlib import Path

from pytest_verifygate.storage import KEEP_LOG_RUNS, new_log_dir, state_dir


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
