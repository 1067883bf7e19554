"""The tool's own state, planted by whatever can write the repository, never costs user data.

A gate or an agent can write ``.git``: it can put a symbolic link where a state directory of
ours should be, or its own files beside ours. Each test plants that, runs the real command line
(or agent hook), and checks that nothing outside the tool's own files was removed or written,
and that the run itself still says the truth.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pytest_verifygate.result_cache import cache_dir
from pytest_verifygate.state.storage import state_dir

from .support import PY
from conftest import commit_all, stop, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PASSING = '[[gate]]\nname = "lint"\ncommand = "true"\ncache = true\n'
FAILING = f'[[gate]]\nname = "check"\ncommand = [{json.dumps(PY)}, "-c", "raise SystemExit(1)"]\n'


def snapshot(directory: Path) -> dict[str, str]:
    """Every entry under ``directory`` (links not followed), with a file's content."""
    found: dict[str, str] = {}
    for path in sorted(directory.rglob("*")):
        relative = str(path.relative_to(directory))
        found[relative] = path.read_text() if path.is_file() and not path.is_symlink() else "dir"
    return found


def victim_with(tmp_path: Path, *, dirs: int = 0, files: int = 0, suffix: str = ".json") -> Path:
    """A directory of the user's that a planted link points at: subdirectories with files in
    them, and files named like the tool's entries."""
    victim = tmp_path / "precious"
    victim.mkdir()
    for index in range(dirs):
        write(victim / f"project-{chr(97 + index)}" / "notes.txt", f"work {index}\n")
    for index in range(files):
        write(victim / f"{index:064x}{suffix}", f"data {index}\n")
    return victim


def plant_link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_dir() and not link.is_symlink():
        link.rmdir()
    link.symlink_to(target, target_is_directory=True)


def run_passes(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    done = verifygate("run", "--all", "--format", "json", *args, cwd=repo, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0 and json.loads(done.stdout)["verdict"] == "passed", done.stderr
    return done


@pytest.mark.parametrize("where", ["logs", "state root"])
def test_a_linked_logs_directory_is_neither_pruned_nor_written(
        repo: Path, tmp_path: Path, where: str) -> None:
    """Pruning followed the link and removed all but the newest ten of the target's
    subdirectories, and wrote a run directory there."""
    write(repo / "verify.toml", PASSING)
    commit_all(repo)
    victim = victim_with(tmp_path, dirs=14, files=3)
    before = snapshot(victim)
    root = state_dir(repo)
    plant_link(root / "logs" if where == "logs" else root, victim)
    for _ in range(2):
        run_passes(repo)
    assert snapshot(victim) == before


def test_a_linked_cache_directory_is_neither_pruned_nor_written(
        repo: Path, tmp_path: Path) -> None:
    """The result cache pruned the target to 512 ``*.json`` files."""
    write(repo / "verify.toml", PASSING)
    commit_all(repo)
    victim = victim_with(tmp_path, files=530)
    before = snapshot(victim)
    directory = cache_dir(repo)
    assert directory is not None
    plant_link(directory, victim)
    for _ in range(2):
        report = json.loads(run_passes(repo).stdout)
        assert report["gates"][0]["cached"] is False  # no cache through a link: the gate runs
    assert snapshot(victim) == before


@pytest.mark.parametrize("linked", ["agent", "agent/starts"])
def test_linked_agent_directories_are_neither_pruned_nor_written(
        repo: Path, tmp_path: Path, linked: str) -> None:
    """The session starts were pruned to 200 ``*.json``, the sessions to 100."""
    write(repo / "verify.toml", FAILING)
    write(repo / "a.py", "x = 1\n")
    commit_all(repo)
    write(repo / "a.py", "x = 2\n")
    victim = victim_with(tmp_path, files=260)
    before = snapshot(victim)
    plant_link(state_dir(repo) / linked, victim)
    assert stop(repo, begin=False, timeout=60).blocked
    assert stop(repo, session="t", begin=False, timeout=60).blocked
    assert snapshot(victim) == before


def test_pruning_removes_only_entries_the_tool_made(repo: Path) -> None:
    """Directories and files of someone else's beside the tool's own stay, however many."""
    write(repo / "verify.toml", PASSING)
    commit_all(repo)
    root = state_dir(repo)
    foreign = [write(root / "logs" / f"backup-{index:02d}" / "keep.txt", "mine\n")
               for index in range(14)]
    foreign += [write(root / "cache" / f"notes-{index}.json", "mine\n") for index in range(3)]
    foreign += [write(root / "agent" / "starts" / "notes.json", "mine\n")]
    for _ in range(KEEP_RUNS + 2):
        run_passes(repo, "--no-cache")
    assert all(path.read_text() == "mine\n" for path in foreign)
    runs = [path for path in (root / "logs").iterdir() if not path.name.startswith("backup")]
    assert len(runs) == KEEP_RUNS  # the tool's own runs are still pruned


KEEP_RUNS = 10


@pytest.mark.parametrize("command", [("run", "--all"), ("list", "--shard", "1/2")])
def test_a_deeply_nested_durations_file_is_one_warning_not_a_traceback(
        repo: Path, command: tuple[str, ...]) -> None:
    write(repo / "verify.toml", PASSING)
    commit_all(repo)
    path = write(state_dir(repo) / "durations.json", "[" * 200_000)
    done = verifygate(*command, cwd=repo, timeout=60)
    stderr = done.stderr
    assert done.returncode == 0, stderr
    (line,) = [line for line in stderr.splitlines() if line]
    assert line.startswith("verifygate: warning: ") and str(path) in line, stderr
    assert "nested too deeply" in line


def test_a_deeply_nested_durations_file_does_not_let_an_agent_stop(repo: Path) -> None:
    write(repo / "verify.toml", FAILING)
    write(repo / "a.py", "x = 1\n")
    commit_all(repo)
    write(repo / "a.py", "x = 2\n")
    write(state_dir(repo) / "durations.json", '{"version": 1, "durations": ' + "[" * 200_000)
    assert stop(repo, begin=False, timeout=60).blocked


def test_a_report_overwritten_at_the_same_size_and_mtime_is_a_change(repo: Path) -> None:
    """The tool's own outputs were known by size and mtime: broken code written back in
    place of a report, at its size and mtime, was left out of every change set."""
    write(repo / "verify.toml", '[[gate]]\nname = "run it"\nwhen_changed = ["src/**/*.py"]\n'
          f'command = [{json.dumps(PY)}, "src/new.py"]\n')
    write(repo / "src" / "old.py", "x = 1\n")
    commit_all(repo)
    report = repo / "src" / "new.py"
    verifygate("run", "--all", "--json", "src/new.py", cwd=repo, timeout=60)
    assert json.loads(report.read_text())["version"] == 1
    before = report.stat()
    broken = "raise SystemExit(1)\n"
    report.write_text(broken + "#" * (before.st_size - len(broken) - 1) + "\n")
    os.utime(report, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (report.stat().st_size, report.stat().st_mtime_ns) == (before.st_size,
                                                                    before.st_mtime_ns)
    done = verifygate("run", "--changed-from", "HEAD", "--format", "json", cwd=repo, timeout=60)
    result = json.loads(done.stdout)
    assert "src/new.py" in result["changes"]["files"], result["changes"]
    assert done.returncode == 1 and result["verdict"] == "failed", result
    assert stop(repo, begin=False, timeout=60).blocked  # the agent's stop, likewise


def test_an_unedited_report_is_still_not_a_change(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "lint"\nwhen_changed = ["*.json"]\n'
          'command = "false"\n')
    commit_all(repo)
    verifygate("run", "--all", "--json", "report.json", cwd=repo, timeout=60)
    done = verifygate("run", "--changed-from", "HEAD", "--format", "json", cwd=repo, timeout=60)
    assert json.loads(done.stdout)["changes"]["files"] == [], done.stdout


def plant(path: Path, what: str, tmp_path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if what == "fifo":
        os.mkfifo(path)
    elif what == "file":
        path.write_bytes(b"\0" * 4096)
    else:  # a link to nowhere: made, it would be a directory elsewhere
        path.symlink_to(tmp_path / "nowhere")


@pytest.mark.parametrize("what", ["fifo", "file", "dangling link"])
@pytest.mark.parametrize("where", ["", "logs", "cache", "agent", "agent/starts"])
def test_anything_in_place_of_a_state_directory_never_hangs_or_passes(
        repo: Path, tmp_path: Path, where: str, what: str) -> None:
    """Where the tool expects a directory of its own: a FIFO, a file, a link to nowhere.
    The run and the agent's stop still say the truth, in time, without a traceback, and
    nothing is made through the link."""
    write(repo / "verify.toml", FAILING.replace("[[gate]]", "[[gate]]\ncache = true"))
    write(repo / "a.py", "x = 1\n")
    commit_all(repo)
    write(repo / "a.py", "x = 2\n")
    root = state_dir(repo)
    plant(root / where if where else root, what, tmp_path)
    done = verifygate("run", "--all", "--format", "json", cwd=repo, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1 and json.loads(done.stdout)["verdict"] == "failed"
    assert stop(repo, begin=False, timeout=60).blocked
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("name", ["durations.json", "outputs", "agent/s-1.json",
                                  "agent/s-1.report.json"])
def test_a_linked_state_file_is_neither_read_nor_written_through(
        repo: Path, tmp_path: Path, name: str) -> None:
    write(repo / "verify.toml", FAILING)
    write(repo / "a.py", "x = 1\n")
    commit_all(repo)
    write(repo / "a.py", "x = 2\n")
    victim = write(tmp_path / "victim.txt", '{"version": 1, "durations": []}\n')
    link = state_dir(repo) / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)
    done = verifygate("run", "--changed-from", "HEAD", "--json", "r.json", cwd=repo, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert stop(repo, begin=False, timeout=60).blocked
    assert victim.read_text() == '{"version": 1, "durations": []}\n'
