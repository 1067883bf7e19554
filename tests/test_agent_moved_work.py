"""``verifygate agent-hook`` judges the session's work wherever the agent puts it: on another
branch, reset away, stashed, in another worktree, under a rewritten start, from another
directory of a monorepo, behind git's clean filters; and a session whose start was never
recorded is not verified.

Real payloads of each agent, real git repositories, real gates.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_verifygate.agents.session_start import record_path
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


# --------------------------------------------------------------------------------------------
# the session's commits are accounted for, whatever else changed


@pytest.fixture
def published(project: Path, tmp_path: Path) -> Path:
    """``project`` with a bare remote ``origin`` that has its ``main``."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(project, "remote", "add", "origin", str(remote))
    git(project, "push", "-q", "-u", "origin", "main")
    return project


def a_harmless_change(repo: Path) -> None:
    """What the gates pass: a change of its own for the stop to be judged on."""
    write(repo / "notes.txt", "nothing to check\n")


@pytest.mark.parametrize("pushed", [False, True], ids=["in-the-reflog", "pushed"])
@pytest.mark.parametrize("agent", AGENTS)
def test_commits_reset_away_behind_a_harmless_change_block(agent: str, pushed: bool,
                                                           published: Path) -> None:
    """Broken work committed (and pushed), reset away, then some other change: the stop is
    not judged on the other change alone."""
    work = committed_broken_work(published, branch=None)
    if pushed:
        git(published, "push", "-q", "origin", "main")
    reset_to_start(published)
    a_harmless_change(published)
    reason = cannot_check(agent, published)
    if pushed:
        assert (f"the session's commits ({work[:12]}) were pushed "
                "(refs/remotes/origin/main) but are not in what is checked out") in reason
    else:
        assert (f"the session's commits ({work[:12]}) are on nothing checked out any more "
                "(a reset, a deleted branch), and what they changed (calc.py) is not among "
                "the changes judged") in reason


def test_a_pushed_branch_deleted_here_blocks(published: Path) -> None:
    work = committed_broken_work(published)
    git(published, "push", "-q", "origin", "feat")
    git(published, "switch", "-q", "main")
    git(published, "branch", "-q", "-D", "feat")
    a_harmless_change(published)
    assert (f"the session's commits ({work[:12]}) were pushed (refs/remotes/origin/feat)"
            in cannot_check("claude", published))


def test_a_pushed_commit_amended_here_blocks_until_the_fix_is_pushed(published: Path) -> None:
    """The remote holds the broken commit, HEAD its fix: what was pushed was never judged."""
    work = committed_broken_work(published, branch=None)
    git(published, "push", "-q", "origin", "main")
    write(published / "calc.py", GOOD.replace("a + b", "b + a"))
    git(published, "commit", "-q", "-a", "--amend", "--no-edit")
    reason = cannot_check("codex", published)
    assert f"the session's commits ({work[:12]}) were pushed" in reason
    git(published, "push", "-q", "--force-with-lease", "origin", "main")
    assert_allowed_silently("codex", stop(published, agent="codex"))


def test_work_rewritten_into_what_is_checked_out_is_let_through(published: Path) -> None:
    """Commits squashed into one, rebased, their branch deleted: what they changed is part
    of what is judged, and the result passes."""
    begun(published, "s-1")
    git(published, "switch", "-q", "-c", "feat")
    write(published / "calc.py", BAD)
    commit_all(published, "broken")
    write(published / "calc.py", GOOD.replace("a + b", "b + a"))
    commit_all(published, "fixed")
    git(published, "switch", "-q", "main")
    git(published, "merge", "-q", "--squash", "feat")
    commit_all(published, "squashed")
    git(published, "branch", "-q", "-D", "feat")
    a_harmless_change(published)
    assert_allowed_silently("gemini", stop(published, agent="gemini"))


def test_commits_reset_away_stay_the_sessions_after_their_reflog_expired(project: Path
                                                                         ) -> None:
    """A stop that found the commits in HEAD's reflog keeps them: expiring it changes
    nothing."""
    work = committed_broken_work(project, branch=None)
    reset_to_start(project)
    assert f"the session's commits ({work[:12]})" in cannot_check("cursor", project)
    git(project, "reflog", "expire", "--expire=now", "--all")
    assert f"the session's commits ({work[:12]})" in cannot_check("cursor", project)


# --------------------------------------------------------------------------------------------
# git's clean filters: what decides which files git reports changed


@pytest.fixture
def no_user_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the repository's own configuration: no filter of the user's or the system's."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


# A clean filter that shows git every file as committed: whatever the file holds, unchanged.
HIDING = "git show HEAD:%f"
ATTRIBUTES = "calc.py filter=hide\n"


def info_attributes(repo: Path) -> Path:
    return repo / ".git" / "info" / "attributes"


@pytest.mark.usefixtures("no_user_config")
@pytest.mark.parametrize("during", ["configuration", "attributes"])
@pytest.mark.parametrize("agent", AGENTS)
def test_a_clean_filter_set_up_during_the_session_blocks(agent: str, during: str,
                                                         project: Path) -> None:
    """Broken work hidden from git by a filter the session set up (its command, or the
    attributes that apply it): not "nothing changed"."""
    if during == "configuration":
        write(project / ".gitattributes", ATTRIBUTES)  # names a filter nobody defined yet
        commit_all(project, "attributes")
    else:
        git(project, "config", "filter.hide.clean", HIDING)
    begun(project, "s-1")
    write(project / "calc.py", BAD)
    if during == "configuration":
        git(project, "config", "filter.hide.clean", HIDING)
    else:
        write(info_attributes(project), ATTRIBUTES)
    git(project, "add", "-A")  # the index takes the file's new stat data, and its old content
    assert git(project, "status", "--porcelain") == ""  # git itself is fooled
    reason = cannot_check(agent, project)
    what = ("the `filter.*` configuration" if during == "configuration"
            else ".git/info/attributes")
    assert ("not verified: git's clean filters or .git/info/attributes changed during the "
            f"session ({what}); restore them") in reason
    if during == "configuration":
        git(project, "config", "--unset", "filter.hide.clean")
    else:
        info_attributes(project).unlink()
    # Restored: judged again. (By what the index's stat data then says: `git add` under the
    # filter recorded the broken file's stat data with the old content, see the security
    # model's limits.)
    assert "clean filters" not in stop(project, agent=agent).stdout


@pytest.mark.usefixtures("no_user_config")
def test_a_filter_set_up_before_the_session_is_trusted(project: Path) -> None:
    """A filter and attributes that were there when the session began are the user's: the
    stop is judged by the gates, as without them."""
    git(project, "config", "filter.plain.clean", "cat")
    write(info_attributes(project), "*.py filter=plain\n")
    begun(project, "s-1")
    write(project / "calc.py", BAD)
    reason = blocking_reason("claude", stop(project, agent="claude"))
    assert "calc.py:1: error: bug found" in reason
    assert "clean filters" not in reason


def from_an_earlier_release(session: str) -> None:
    """The session's record as a release that kept no fingerprint of git's filters wrote it."""
    path = record_path(session)
    assert path is not None
    data = json.loads(path.read_text())
    data.pop("filters", None)
    path.write_text(json.dumps(data))


@pytest.mark.usefixtures("no_user_config")
@pytest.mark.parametrize("filters_now", [False, True], ids=["none", "some"])
def test_a_record_without_the_filters_blocks_only_where_filters_are_set(
        filters_now: bool, project: Path) -> None:
    """Where no filter is set now, none can hide a change, whatever happened during the
    session; where one is, the record cannot tell whether it was set before."""
    begun(project, "s-1")
    from_an_earlier_release("s-1")
    write(project / "calc.py", BAD)
    if not filters_now:
        assert "calc.py:1: error: bug found" in blocking_reason("gemini",
                                                                stop(project, agent="gemini"))
        return
    git(project, "config", "filter.hide.clean", HIDING)
    write(info_attributes(project), ATTRIBUTES)
    reason = cannot_check("gemini", project)
    assert ("the session's record was made by an earlier verifygate and does not tell "
            "whether git's clean filters or .git/info/attributes changed during the session"
            ) in reason
