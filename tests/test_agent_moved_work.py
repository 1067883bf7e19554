"""``verifygate agent-hook`` judges the session's work wherever the agent puts it: on another
branch, reset away, stashed, in another worktree, under a rewritten start, from another
directory of a monorepo; and a session whose start was never recorded is not verified.

Real payloads of each agent, real git repositories, real gates.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from test_agent_hook import BAD, GOOD, checked_project, contract
from test_agents_protocols import (
    AGENTS,
    assert_allowed_silently,
    blocking_reason,
)

from conftest import PAYLOADS, begun, commit_all, git, run_hook, stop, write

pytestmark = pytest.mark.slow


@pytest.fixture
def project(repo: Path) -> Path:
    return checked_project(repo)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def committed_broken_work(repo: Path, branch: str | None = "feat") -> str:
    """The session begins, then commits broken work (on a new ``branch``): its commit."""
    begun(repo, "s-1")
    if branch is not None:
        git(repo, "switch", "-q", "-c", branch)
    write(repo / "calc.py", BAD)
    commit_all(repo, "broken")
    return head(repo)


def cannot_check(agent: str, repo: Path) -> str:
    reason = blocking_reason(agent, stop(repo, agent=agent))
    assert "your work could not be checked" in reason, reason
    return reason


@pytest.mark.parametrize("agent", AGENTS)
def test_switching_away_from_the_branch_of_a_blocked_stop_blocks(agent: str,
                                                                  project: Path) -> None:
    work = committed_broken_work(project)
    assert "calc.py:1: error: bug found" in blocking_reason(agent, stop(project, agent=agent))
    git(project, "switch", "-q", "main")
    reason = cannot_check(agent, project)
    assert f"your commits on refs/heads/feat ({work[:12]}) are not checked out here" in reason
    git(project, "merge", "-q", "feat")  # the work checked out: judged by the gates again
    assert "calc.py:1: error: bug found" in blocking_reason(agent, stop(project, agent=agent))


def reset_to_start(repo: Path) -> None:
    git(repo, "reset", "-q", "--hard", "HEAD~1")


def branch_deleted(repo: Path) -> None:
    git(repo, "switch", "-q", "main")
    git(repo, "branch", "-q", "-D", "feat")


def ref_deleted(repo: Path) -> None:
    git(repo, "switch", "-q", "main")
    git(repo, "update-ref", "-d", "refs/heads/feat")


def reflog_expired_too(repo: Path) -> None:
    """Reset away, and HEAD's reflog emptied: the stop that saw the commit remembers it."""
    reset_to_start(repo)
    git(repo, "reflog", "expire", "--expire=now", "--all")


@pytest.mark.parametrize("discard", [reset_to_start, branch_deleted, ref_deleted,
                                     reflog_expired_too])
@pytest.mark.parametrize("agent", AGENTS)
def test_commits_discarded_with_nothing_in_their_place_block(
        agent: str, discard: Callable[[Path], None], project: Path) -> None:
    work = committed_broken_work(project)
    blocking_reason(agent, stop(project, agent=agent))
    discard(project)
    assert git(project, "status", "--porcelain") == ""
    reason = cannot_check(agent, project)
    assert f"the session's commits ({work[:12]}) are on nothing checked out" in reason


@pytest.mark.parametrize("agent", AGENTS)
def test_a_reverted_commit_and_an_amended_fix_are_let_through(agent: str,
                                                             project: Path) -> None:
    committed_broken_work(project, branch=None)
    git(project, "revert", "--no-edit", "HEAD")  # undone in the open: nothing changed
    assert_allowed_silently(agent, stop(project, agent=agent))
    write(project / "calc.py", BAD)
    commit_all(project, "broken again")
    blocking_reason(agent, stop(project, agent=agent))
    write(project / "calc.py", GOOD.replace("a + b", "b + a"))
    git(project, "commit", "-q", "-a", "--amend", "--no-edit")  # agents amend all the time
    assert_allowed_silently(agent, stop(project, agent=agent))


@pytest.mark.parametrize("agent", AGENTS)
def test_a_start_rewritten_out_of_the_repository_blocks(agent: str, project: Path) -> None:
    """The agent amends the commit the session began at, expires the reflog and prunes: the
    start is gone, and nothing tells what the session changed. Never "fall back to HEAD"."""
    begun(project, "s-1")
    start = head(project)
    write(project / "calc.py", BAD)
    git(project, "commit", "-q", "-a", "--amend", "--no-edit")
    git(project, "reflog", "expire", "--expire=now", "--all")
    git(project, "gc", "-q", "--prune=now")
    gone = subprocess.run(["git", "cat-file", "-e", start], cwd=project, check=False)
    assert gone.returncode != 0
    reason = cannot_check(agent, project)
    assert f"the commit the session began at ({start[:12]}) is no longer" in reason


@pytest.mark.parametrize("agent", AGENTS)
def test_broken_work_stashed_blocks(agent: str, project: Path) -> None:
    begun(project, "s-1")
    write(project / "calc.py", BAD)
    git(project, "stash", "-q")
    assert "your commits on refs/stash" in cannot_check(agent, project)


def test_broken_work_committed_in_another_worktree_blocks(project: Path, tmp_path: Path
                                                          ) -> None:
    begun(project, "s-1")
    elsewhere = tmp_path / "elsewhere"
    git(project, "worktree", "add", "-q", "--detach", str(elsewhere))
    write(elsewhere / "calc.py", BAD)
    commit_all(elsewhere, "broken, on a detached HEAD elsewhere")
    reason = cannot_check("claude", project)
    assert f"the HEAD of the worktree {elsewhere}" in reason
    # Stopping from there changes nothing: the session is judged where it began.
    assert "the HEAD of the worktree" in cannot_check("codex", elsewhere)


def test_a_worktree_removed_after_a_blocked_stop_still_blocks(project: Path,
                                                              tmp_path: Path) -> None:
    """The worktree's HEAD and its reflog go with it; the stop that saw the commit keeps it."""
    begun(project, "s-1")
    elsewhere = tmp_path / "elsewhere"
    git(project, "worktree", "add", "-q", "--detach", str(elsewhere))
    write(elsewhere / "calc.py", BAD)
    commit_all(elsewhere, "broken, on a detached HEAD elsewhere")
    work = head(elsewhere)
    cannot_check("claude", project)
    git(project, "worktree", "remove", "--force", str(elsewhere))
    assert f"the session's commits ({work[:12]})" in cannot_check("claude", project)


def test_a_tag_on_broken_work_reset_away_blocks_and_notes_do_not(project: Path) -> None:
    work = committed_broken_work(project, branch=None)
    git(project, "notes", "add", "-m", "reviewed")  # notes are no work checked out
    assert "calc.py:1: error: bug found" in blocking_reason("codex", stop(project, agent="codex"))
    git(project, "tag", "keep")
    reset_to_start(project)
    assert f"refs/tags/keep ({work[:12]})" in cannot_check("codex", project)
    git(project, "tag", "-d", "keep")
    assert "are on nothing checked out" in cannot_check("codex", project)


def test_a_replaced_commit_is_seen_as_it_is(project: Path) -> None:
    """``git replace`` makes git show the start in place of the broken commit; the hook reads
    the objects as recorded."""
    start = head(project)
    work = committed_broken_work(project, branch=None)
    git(project, "replace", work, start)
    assert git(project, "diff", "--stat", start, "HEAD") == ""  # git itself is fooled
    assert "calc.py:1: error: bug found" in blocking_reason("claude", stop(project))


def test_an_orphan_branch_after_a_blocked_stop_blocks(project: Path) -> None:
    work = committed_broken_work(project, branch=None)
    blocking_reason("gemini", stop(project, agent="gemini"))
    git(project, "checkout", "-q", "--orphan", "fresh")
    git(project, "rm", "-q", "-r", "-f", ".")
    write(project / "notes.txt", "nothing to check\n")
    commit_all(project, "a history of its own")
    assert f"refs/heads/main ({work[:12]})" in cannot_check("gemini", project)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_stop_without_a_recorded_start_blocks(agent: str, project: Path,
                                                tmp_path: Path) -> None:
    """No start recorded (Cursor before its first prompt was seen, a start hook missing): the
    stop is not judged from an upstream the agent can move, it is blocked."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(project, "remote", "add", "origin", str(remote))
    git(project, "push", "-q", "-u", "origin", "main")
    write(project / "calc.py", BAD)
    commit_all(project, "broken")
    git(project, "update-ref", "refs/remotes/origin/main", "HEAD")  # "nothing to push"
    reason = blocking_reason(agent, run_hook(PAYLOADS[agent](project, "never-begun")))
    assert "no start was recorded for this session" in reason
    assert "--changed-from" in reason  # the explicit override stays
    answer = run_hook(PAYLOADS[agent](project, "never-begun"), "--changed-from", "HEAD~1")
    assert "calc.py:1: error: bug found" in blocking_reason(agent, answer)


MONOREPO_ROOT = contract('[[gate]]\nname = "check"\ncommand = [PY, "check.py"]\n'
                         'when_changed = ["packages/**"]\n')
LENIENT = contract('[[gate]]\nname = "quick"\ncommand = [PY, "-c", "pass"]\n')


@pytest.mark.parametrize("agent", AGENTS)
def test_a_monorepo_session_is_judged_from_where_it_began(agent: str, repo: Path) -> None:
    checked_project(repo)
    write(repo / "verify.toml", MONOREPO_ROOT)
    write(repo / "packages/a/verify.toml", LENIENT)
    write(repo / "packages/a/mod.py", GOOD)
    write(repo / "packages/b/mod.py", GOOD)
    commit_all(repo, "a monorepo")
    begun(repo, "s-1")  # the session begins at the root
    write(repo / "packages/b/mod.py", BAD)
    reason = blocking_reason(agent, stop(repo / "packages/a", agent=agent))  # then `cd packages/a`
    assert "packages/b/mod.py:1: error: bug found" in reason
