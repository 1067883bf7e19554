"""What git can be made to say cannot hide a change: each test plays a trick an agent (or
anything that can write the repository) can play, and checks the change set, the agent's stop
and the command line still see the change, or fail with one line.

The rule (README, "The change set"): git answers from the objects and the files themselves,
never from replace refs, grafts, a file system monitor or a stat cache it is told to trust; a
git that fails is an error, never "nothing changed".
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pytest_verifygate.agents.session_start import snapshot
from pytest_verifygate.errors import ChangeSetError
from pytest_verifygate.git.changes import ChangeRequest, compute_changes
from pytest_verifygate.git.inputs import RepoFiles
from pytest_verifygate.gitcmd import head_commit
from test_agent_hook import BAD, GOOD, checked_project

from conftest import commit_all, git, stop, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow


@pytest.fixture
def project(repo: Path) -> Path:
    return checked_project(repo)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def since(repo: Path, ref: str) -> tuple[str, ...]:
    return compute_changes(repo, ChangeRequest(changed_from=ref)).files


def session_start(repo: Path) -> str:
    assert stop(repo, event="SessionStart", begin=False).stdout == ""
    return head(repo)


# --------------------------------------------------------------------------------------------
# history rewritten for git's eyes only


def test_a_replaced_start_commit_does_not_hide_committed_work(project: Path) -> None:
    start = session_start(project)
    write(project / "calc.py", BAD)
    commit_all(project, "broken")
    # A commit with the current tree stands in for the start: diffs against it are empty.
    fake = git(project, "commit-tree", "-m", "same tree", "HEAD^{tree}").strip()
    git(project, "replace", start, fake)
    assert git(project, "diff", "--name-only", start) == ""  # what git says by default
    assert since(project, start) == ("calc.py",)
    assert stop(project).blocked


def test_a_graft_that_makes_the_start_a_descendant_does_not_hide_committed_work(
    project: Path,
) -> None:
    start = session_start(project)
    write(project / "calc.py", BAD)
    commit_all(project, "broken")
    # The start "descends" from the broken commit (made a root): the merge-base is HEAD.
    (project / ".git/info/grafts").write_text(f"{head(project)}\n{start} {head(project)}\n")
    merge_base = git(project, "-c", "advice.graftFileDeprecated=false", "merge-base", start,
                     "HEAD")
    assert merge_base.strip() == head(project)  # what git says by default
    assert since(project, start) == ("calc.py",)
    assert stop(project).blocked


def test_an_orphan_branch_is_every_file_changed_not_nothing(project: Path) -> None:
    start = session_start(project)
    git(project, "checkout", "-q", "--orphan", "fresh")
    write(project / "calc.py", BAD)
    commit_all(project, "a history of its own")
    changes = compute_changes(project, ChangeRequest(changed_from=start))
    assert changes.files == ("calc.py", "check.py", "verify.toml")
    assert changes.warnings == (f"warning: {start!r} and HEAD share no history: every file "
                                "counts as changed",)
    assert stop(project).blocked
    run = stop(project, "--changed-from", "main", session="another")
    assert run.blocked and "calc.py:1: error: bug found" in run.reason
    assert "--changed-from main shares no history with HEAD" in run.stderr
    done = verifygate("run", "--changed-from", "main", cwd=project)
    assert done.returncode == 1, done
    assert "FAIL  check" in done.stdout


# --------------------------------------------------------------------------------------------
# the index told not to look


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_an_edit_git_is_told_not_to_look_at_is_still_a_change(project: Path, flag: str) -> None:
    session_start(project)
    write(project / "calc.py", BAD)
    git(project, "update-index", flag, "calc.py")
    assert git(project, "status", "--porcelain") == ""  # what git says by default
    assert compute_changes(project, ChangeRequest(worktree=True)).files == ("calc.py",)
    assert since(project, "HEAD") == ("calc.py",)
    assert stop(project).blocked
    # Flagged but unedited is not a change; flagged and removed is a deletion.
    write(project / "calc.py", GOOD)
    assert since(project, "HEAD") == ()
    if flag == "--assume-unchanged":
        (project / "calc.py").unlink()
        changes = compute_changes(project, ChangeRequest(changed_from="HEAD"))
        assert (changes.files, changes.deleted) == (("calc.py",), {"calc.py"})


def test_a_sparse_checkout_is_not_a_change_a_hidden_deletion_is(project: Path) -> None:
    git(project, "update-index", "--skip-worktree", "calc.py")
    (project / "calc.py").unlink()
    changes = compute_changes(project, ChangeRequest(changed_from="HEAD"))
    assert (changes.files, changes.deleted) == (("calc.py",), {"calc.py"})
    git(project, "config", "core.sparseCheckout", "true")
    assert since(project, "HEAD") == ()  # what a sparse checkout leaves: the entry, no file


def test_a_file_rewritten_at_the_same_size_and_time_is_a_change(project: Path) -> None:
    # Settings an agent can write that make git trust size and modification time alone.
    git(project, "config", "core.checkStat", "minimal")
    git(project, "config", "core.trustctime", "false")
    calc = project / "calc.py"
    an_hour_ago = calc.stat().st_mtime_ns - 3600 * 10**9
    os.utime(calc, ns=(an_hour_ago, an_hour_ago))
    git(project, "update-index", "--refresh")  # the index now vouches for that time
    time.sleep(1.1)  # git compares change times to the second
    same_size = GOOD.replace("a + b", "a - b")
    assert len(same_size) == len(GOOD)
    calc.write_text(same_size)
    os.utime(calc, ns=(an_hour_ago, an_hour_ago))
    assert git(project, "diff", "--name-only") == ""  # what git says with those settings
    assert since(project, "HEAD") == ("calc.py",)


def test_a_file_system_monitor_that_says_nothing_changed_is_not_asked(project: Path,
                                                                         tmp_path: Path) -> None:
    monitor = write(tmp_path / "monitor.sh", "#!/bin/sh\nprintf 'token\\0'\n")
    monitor.chmod(0o755)  # answers every query with "nothing changed since"
    git(project, "config", "core.fsmonitor", str(monitor))
    git(project, "config", "core.fsmonitorHookVersion", "2")
    git(project, "update-index", "--fsmonitor")
    git(project, "status", "--porcelain")  # the index now trusts the monitor
    write(project / "calc.py", BAD)
    assert git(project, "diff", "--name-only") == ""  # what git says
    assert since(project, "HEAD") == ("calc.py",)


# --------------------------------------------------------------------------------------------
# git pointed at another checkout, or broken


@pytest.fixture
def clean_clone(project: Path, tmp_path: Path) -> Path:
    clone = tmp_path / "clean"
    git(tmp_path, "clone", "-q", str(project), str(clone))
    return clone


def test_core_worktree_pointed_at_a_clean_clone_is_an_error(project: Path,
                                                          clean_clone: Path) -> None:
    session_start(project)
    write(project / "calc.py", BAD)
    git(project, "config", "core.worktree", str(clean_clone))
    assert git(project, "diff", "--name-only") == ""  # git now looks at the clean clone
    for request in (ChangeRequest(worktree=True), ChangeRequest(changed_from="HEAD")):
        with pytest.raises(ChangeSetError, match=r"core.worktree or GIT_WORK_TREE"):
            compute_changes(project, request)
    with pytest.raises(OSError, match=r"core.worktree or GIT_WORK_TREE"):
        RepoFiles(project).digest(None)  # no cache key from another checkout's files
    run = stop(project)
    assert run.blocked and "core.worktree or GIT_WORK_TREE" in run.reason
    done = verifygate("run", "--changed-from", "HEAD", cwd=project)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "core.worktree or GIT_WORK_TREE" in lines[0], lines


def test_git_work_tree_in_the_environment_is_the_same_error(project: Path, clean_clone: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    write(project / "calc.py", BAD)
    monkeypatch.setenv("GIT_DIR", str(project / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(clean_clone))
    with pytest.raises(ChangeSetError, match=r"core.worktree or GIT_WORK_TREE"):
        compute_changes(project, ChangeRequest(changed_from="HEAD"))


def test_a_broken_git_config_is_an_error_everywhere_never_nothing_changed(
    project: Path,
) -> None:
    start = session_start(project)
    write(project / "calc.py", BAD)
    with open(project / ".git/config", "a") as config:
        config.write("this is not a config line\n")
    for request in (ChangeRequest(worktree=True), ChangeRequest(changed_from=start),
                    ChangeRequest(staged=True)):
        with pytest.raises(ChangeSetError, match=r"bad config line"):
            compute_changes(project, request)
    with pytest.raises(ChangeSetError, match=r"bad config line"):
        head_commit(project)  # not "no commit yet"
    with pytest.raises(ChangeSetError, match=r"bad config line"):
        snapshot(project)  # not "no refs": the session's record is not made of an error
    with pytest.raises(OSError, match=r"bad config line"):
        RepoFiles(project).digest(None)
    run = stop(project)
    assert run.blocked and "bad config line" in run.reason
    for args in (("run", "--changed-from", "HEAD"), ("run", "--staged"),
                 ("list", "--changed-from", "HEAD")):
        done = verifygate(*args, cwd=project)
        assert done.returncode == 2, (args, done)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "bad config line" in lines[0], (args, lines)


# --------------------------------------------------------------------------------------------
# files hidden by local exclude files


@pytest.mark.parametrize("where", ["info/exclude", "core.excludesFile"])
def test_a_file_hidden_by_a_local_exclude_file_is_still_a_change(
    project: Path, tmp_path: Path, where: str
) -> None:
    session_start(project)
    write(project / "extra.py", BAD)
    if where == "info/exclude":
        with open(project / ".git/info/exclude", "a") as exclude:
            exclude.write("extra.py\ncalc.py\n")
    else:
        write(tmp_path / "global-ignore", "extra.py\ncalc.py\n")
        git(project, "config", "core.excludesFile", str(tmp_path / "global-ignore"))
    assert "extra.py" not in git(project, "status", "--porcelain")  # hidden from git status
    assert since(project, "HEAD") == ("extra.py",)
    assert stop(project).blocked
    # Tracked, then dropped from the index: on the disk, for the gates to read.
    (project / "extra.py").unlink()
    write(project / "calc.py", BAD)
    git(project, "rm", "-q", "--cached", "calc.py")
    changes = compute_changes(project, ChangeRequest(changed_from="HEAD"))
    assert (changes.files, changes.existing_files) == (("calc.py",), ("calc.py",))
    assert stop(project).blocked


def test_a_file_the_projects_gitignore_ignores_stays_out(project: Path) -> None:
    write(project / ".gitignore", "build/\n")
    commit_all(project, "ignore build")
    write(project / "build/out.py", BAD)
    assert since(project, "HEAD") == ()


# --------------------------------------------------------------------------------------------
# submodules: what changed inside them, not only their path


@pytest.fixture
def with_submodule(repo: Path, tmp_path: Path) -> Path:
    """``repo`` with a submodule ``lib`` (holding ``mod.py``), committed."""
    library = tmp_path / "library"
    library.mkdir()
    git(library, "init", "-q", "-b", "main")
    write(library / "mod.py", GOOD)
    git(library, "add", "-A")
    git(library, "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-q",
        "-m", "library")
    write(repo / "app.py", "import lib.mod\n")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library),
        "lib")
    commit_all(repo, "with a submodule")
    for name, value in (("user.name", "T"), ("user.email", "t@example.invalid"),
                        ("commit.gpgsign", "false")):
        git(repo / "lib", "config", name, value)
    return repo


def test_an_edit_inside_a_submodule_is_its_files_not_only_its_path(with_submodule: Path
                                                                   ) -> None:
    repo = with_submodule
    write(repo / "lib/mod.py", BAD)
    write(repo / "lib/new.py", "x = 1\n")  # untracked inside the submodule
    assert since(repo, "HEAD") == ("lib", "lib/mod.py", "lib/new.py")
    # Committed inside the submodule, not yet recorded by the superproject.
    git(repo / "lib", "add", "-A")
    git(repo / "lib", "commit", "-q", "-m", "inside")
    assert since(repo, "HEAD") == ("lib", "lib/mod.py", "lib/new.py")
    # Recorded (staged), then committed: the staged change and a range see the same.
    git(repo, "add", "lib")
    assert compute_changes(repo, ChangeRequest(staged=True)).files == (
        "lib", "lib/mod.py", "lib/new.py")
    before = head(repo)
    git(repo, "commit", "-q", "-m", "new library")
    ranged = compute_changes(repo, environ={"PRE_COMMIT_FROM_REF": before,
                                            "PRE_COMMIT_TO_REF": "HEAD"})
    assert ranged.files == ("lib", "lib/mod.py", "lib/new.py")
    # Removed inside the submodule: a deletion there.
    (repo / "lib/new.py").unlink()
    changes = compute_changes(repo, ChangeRequest(changed_from="HEAD"))
    assert (changes.files, changes.deleted) == (("lib", "lib/new.py"), {"lib/new.py"})


def test_a_python_gate_sees_an_edit_inside_a_submodule(with_submodule: Path) -> None:
    repo = with_submodule
    write(repo / "verify.toml", contract_with_files())
    commit_all(repo, "contract")
    write(repo / "lib/mod.py", BAD)
    done = verifygate("run", "--changed-from", "HEAD", cwd=repo)
    assert done.returncode == 1, done
    assert "lib/mod.py:1: error: BUG" in done.stdout


def contract_with_files() -> str:
    from test_agent_hook import contract

    return contract('[[gate]]\nname = "py"\nwhen_changed = ["**/*.py"]\n'
                    'command = [PY, "-c", "import sys\\nbad = [p for p in sys.argv[1:] if '
                    '\\"BUG\\" in open(p).read()]\\nfor p in bad: print(f\\"{p}:1: error: '
                    'BUG\\")\\nsys.exit(1 if bad else 0)", "{files}"]\n')


def test_a_flagged_entry_that_is_not_a_file_is_a_change_and_never_opened(project: Path
                                                                           ) -> None:
    os.symlink("calc.py", project / "link.py")
    commit_all(project, "a link")
    for name in ("calc.py", "link.py"):
        git(project, "update-index", "--assume-unchanged", name)
    assert since(project, "HEAD") == ()  # a flagged link, unchanged, is no change
    (project / "calc.py").unlink()
    os.mkfifo(project / "calc.py")  # opening it would block until someone writes
    (project / "link.py").unlink()
    os.symlink("check.py", project / "link.py")
    assert since(project, "HEAD") == ("calc.py", "link.py")


def test_a_submodule_counts_only_where_it_is_not_as_committed(with_submodule: Path) -> None:
    from pytest_verifygate.git.set_aside import commit_target, differences

    repo = with_submodule
    write(repo / "lib/extra.py", BAD)  # untracked in the submodule: its own business
    write(repo / "app.py", "import lib.mod  # staged\n")
    git(repo, "add", "app.py")
    target = commit_target(repo, staged=True)
    assert target is not None and differences(target) == {}
    write(repo / "app.py", "import lib.mod  # and more, unstaged\n")
    assert list(differences(target)) == ["app.py"]
    # A file the submodule tracks, changed: the commit does not hold what the gates would see.
    write(repo / "lib/mod.py", BAD)
    with pytest.raises(ChangeSetError, match="submodule lib is not as the staged content"):
        differences(target)


def test_a_staged_run_before_the_first_commit_checks_the_index(repo: Path) -> None:
    write(repo / "verify.toml", contract_with_files())
    write(repo / "calc.py", BAD)
    git(repo, "add", "-A")
    write(repo / "calc.py", GOOD)  # the fix, unstaged: the first commit would be broken
    done = verifygate("run", "--staged", cwd=repo)
    assert done.returncode == 1, done
    assert "checking the staged content in place: 1 file(s)" in done.stderr
    assert "calc.py:1: error: BUG" in done.stdout
    assert (repo / "calc.py").read_text() == GOOD
    assert git(repo, "status", "--porcelain") == "AM calc.py\nA  verify.toml\n"
