"""An attacker's pass over the newest commands and state: what anything that can write the
work tree or ``.git`` (a gate, an agent) can plant, and what the tool must never do with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_agent_hook import BAD, GOOD, checked_project

from conftest import git, verifygate, write


def test_install_never_writes_through_a_planted_temp_link(repo: Path, tmp_path: Path) -> None:
    # The hook's temp name is predictable: a link there must not lead the write (and the
    # chmod 755) to a file of the user's.
    victim = write(tmp_path / "victim.txt", "the user's file\n")
    victim.chmod(0o600)
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in ("pre-commit", "pre-push"):
        os.symlink(victim, hooks / f".{name}.verifygate-tmp")
    result = verifygate("install", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "the user's file\n"
    assert victim.stat().st_mode & 0o777 == 0o600
    assert "pytest_verifygate run --staged" in (hooks / "pre-commit").read_text()
    assert not (hooks / "pre-commit").is_symlink()


def _claude_stop(cwd: Path, project_dir: Path) -> subprocess.CompletedProcess[str]:
    """The hook as Claude Code runs it: ``CLAUDE_PROJECT_DIR`` names the project, the
    payload's ``cwd`` is wherever the agent's shell was left."""
    payload = {"session_id": "s-1", "transcript_path": "/nonexistent.jsonl", "cwd": str(cwd),
               "hook_event_name": "Stop", "stop_hook_active": False}
    return subprocess.run([sys.executable, "-m", "pytest_verifygate", "agent-hook"],
                          input=json.dumps(payload), capture_output=True, text=True,
                          cwd=project_dir, check=False, timeout=120,
                          env={**os.environ, "CLAUDE_PROJECT_DIR": str(project_dir)})


def test_a_stop_from_a_clean_clone_still_judges_the_project(repo: Path, tmp_path: Path) -> None:
    # The agent leaves the project broken, clones it (clean) and stops from the clone: the
    # project the agent works on is the one to judge, not wherever its shell was left.
    checked_project(repo)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    write(repo / "calc.py", BAD)
    for cwd in (clone, tmp_path):  # another repository; no repository at all
        done = _claude_stop(cwd, repo)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer.get("decision") == "block", answer
        assert "calc.py:1: error: bug found" in answer["reason"]
    write(repo / "calc.py", GOOD.replace("a + b", "b + a"))
    assert _claude_stop(clone, repo).stdout == ""  # fixed: allowed as before


def test_a_stop_from_the_project_or_below_is_judged_where_it_was_made(repo: Path) -> None:
    checked_project(repo)
    write(repo / "calc.py", BAD)
    for cwd in (repo, repo / "pkg", repo / "pkg" / ".." / "pkg"):
        cwd.mkdir(exist_ok=True)
        done = _claude_stop(cwd, repo)
        assert json.loads(done.stdout)["decision"] == "block"
        assert "outside the project's repository" not in done.stderr


def test_agent_status_believes_no_record_replayed_from_another_repository(
        repo: Path, tmp_path: Path) -> None:
    # A sealed "verified" record from another repository (or an earlier clone) copied into
    # this one's state must not make a broken run's caller see a verified stop.
    checked_project(repo)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    write(other / "calc.py", GOOD.replace("a + b", "b + a"))
    assert _claude_stop(other, other).stdout == ""  # verified there
    status = [sys.executable, "-m", "pytest_verifygate", "agent-status"]
    assert subprocess.run(status, cwd=other, check=False).returncode == 0
    (repo / ".git" / "verifygate").mkdir(exist_ok=True)
    (repo / ".git" / "verifygate" / "agent-status.json").write_bytes(
        (other / ".git" / "verifygate" / "agent-status.json").read_bytes())
    replayed = subprocess.run(status, cwd=repo, capture_output=True, text=True, check=False)
    assert replayed.returncode == 1, replayed.stdout
    assert "no stop recorded" in replayed.stdout
