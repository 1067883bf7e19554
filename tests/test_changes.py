"""Change sets from real git repositories: staged, since a ref, ranges, odd names, errors."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytest_verifygate.errors import ChangeSetError
from pytest_verifygate.git.changes import ChangeRequest, ChangeSet, all_files, compute_changes
from pytest_verifygate.gitcmd import git_output

from conftest import commit_all, git, verifygate, write

ODD_NAMES = ["with space.py", "quote'\".py", "uni-ß-✓.py", "$(touch pwned).py", "-rf",
             "new\nline.py", "semi;colon.py"]


@pytest.mark.slow
def test_staged_includes_deletions_and_both_sides_of_a_rename(repo: Path) -> None:
    write(repo / "keep.py", "a\n")
    write(repo / "gone.py", "b\n")
    write(repo / "old.py", "c = 1\n" * 20)
    commit_all(repo)
    git(repo, "rm", "-q", "gone.py")
    git(repo, "mv", "old.py", "new.py")
    write(repo / "keep.py", "changed\n")
    write(repo / "unstaged.py", "x\n")
    changes = compute_changes(repo, ChangeRequest(staged=True))
    assert changes.source == "staged"
    assert changes.files == ("gone.py", "new.py", "old.py")
    assert changes.deleted == {"gone.py", "old.py"}
    assert changes.existing_files == ("new.py",)


@pytest.mark.slow
def test_staged_in_a_repository_without_commits(repo: Path) -> None:
    write(repo / "first.py", "x\n")
    git(repo, "add", "first.py")
    assert compute_changes(repo, ChangeRequest(staged=True)).files == ("first.py",)


@pytest.mark.slow
def test_changed_from_uses_the_merge_base_and_untracked_files(repo: Path) -> None:
    write(repo / "base.py", "0\n")
    commit_all(repo, "base")
    git(repo, "branch", "feature")
    write(repo / "main-only.py", "m\n")
    commit_all(repo, "main moves on")
    git(repo, "checkout", "-q", "feature")
    write(repo / "feature.py", "f\n")
    commit_all(repo, "feature work")
    write(repo / "base.py", "edited, not staged\n")
    write(repo / "untracked.py", "u\n")
    write(repo / ".gitignore", "ignored.py\n")
    write(repo / "ignored.py", "i\n")
    changes = compute_changes(repo, ChangeRequest(changed_from="main"))
    # main-only.py is on main after the merge-base: not part of this branch's change.
    assert changes.files == (".gitignore", "base.py", "feature.py", "untracked.py")
    assert (changes.source, changes.ref) == ("ref", "main")


@pytest.mark.slow
def test_pre_commit_range_from_the_environment(repo: Path) -> None:
    write(repo / "a.py", "1\n")
    commit_all(repo)
    start = git(repo, "rev-parse", "HEAD").strip()
    write(repo / "b.py", "2\n")
    commit_all(repo)
    git(repo, "rm", "-q", "a.py")
    commit_all(repo)
    end = git(repo, "rev-parse", "HEAD").strip()
    env = {"PRE_COMMIT_FROM_REF": start, "PRE_COMMIT_TO_REF": end}
    changes = compute_changes(repo, environ=env)
    assert changes.source == "pre-commit"
    assert changes.files == ("a.py", "b.py") and changes.deleted == {"a.py"}
    # Under pre-commit without a range: the staged change.
    write(repo / "c.py", "3\n")
    git(repo, "add", "c.py")
    assert compute_changes(repo, environ={"PRE_COMMIT": "1"}).files == ("c.py",)


@pytest.mark.slow
def test_settings_and_environment_refs(repo: Path) -> None:
    write(repo / "a.py", "1\n")
    commit_all(repo)
    write(repo / "b.py", "2\n")
    from_settings = compute_changes(repo, settings_changed_from="HEAD", environ={})
    assert from_settings.source == "ref" and from_settings.files == ("b.py",)
    from_env = compute_changes(repo, environ={"VERIFYGATE_CHANGED_FROM": "HEAD"})
    assert from_env.files == ("b.py",)
    nothing = compute_changes(repo, environ={})
    assert nothing.source == "all" and not nothing.filtering


@pytest.mark.slow
def test_odd_file_names_survive(repo: Path) -> None:
    write(repo / "seed", "s\n")
    commit_all(repo)
    for name in ODD_NAMES:
        write(repo / name, "x\n")
    git(repo, "add", "-A")
    changes = compute_changes(repo, ChangeRequest(staged=True))
    assert set(changes.files) == set(ODD_NAMES)
    assert not (repo / "pwned").exists()


@pytest.mark.slow
def test_non_utf8_file_names(repo: Path) -> None:
    raw = b"caf\xe9.py"
    (repo / os.fsdecode(raw)).write_text("x\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    changes = compute_changes(repo, ChangeRequest(staged=True))
    assert [os.fsencode(name) for name in changes.files] == [raw]


def test_explicit_files_relative_to_cwd_and_root(repo: Path) -> None:
    project = repo / "proj"
    write(project / "src" / "a.py", "x\n")
    write(project / "b.py", "x\n")
    changes = compute_changes(
        project,
        ChangeRequest(files=["proj/src/a.py", "./proj/b.py", "outside.py",
                             str(project / "src" / "a.py")]),
        cwd=repo,
    )
    assert changes.files == ("b.py", "src/a.py")


@pytest.mark.slow
def test_a_named_file_neither_on_disk_nor_in_the_index_is_an_error(
        repo: Path, pytester: pytest.Pytester) -> None:
    """From a subdirectory, a path written from the project root named nothing: nothing ran
    and the verdict said passed."""
    import sys

    write(repo / "verify.toml", '[[gate]]\nname = "lint"\nwhen_changed = ["src/**"]\n'
                                f'command = ["{sys.executable}", "-c", "raise SystemExit(1)"]\n')
    write(repo / "src" / "attr" / "_make.py", "x = 1\n")
    write(repo / "src" / "attr" / "gone.py", "x = 1\n")
    write(repo / "src" / "attr" / "unstaged.py", "x = 1\n")
    commit_all(repo)
    git(repo, "rm", "-q", "src/attr/gone.py")  # a staged deletion
    (repo / "src" / "attr" / "unstaged.py").unlink()  # deleted, still in the index
    here = repo / "src"

    fix = ("named files are relative to the current directory; a deletion is found by "
           "--changed-from REF)")
    meant = f"src/attr/_make.py: no such file in the work tree or the index (did you mean " \
            f"attr/_make.py? {fix}"
    for done in (verifygate("run", "--files", "src/attr/_make.py", cwd=here),
                 verifygate("run", "--files-from", "-", stdin="src/attr/_make.py\n", cwd=here)):
        assert (done.returncode, done.stdout) == (2, ""), done
        assert done.stderr.splitlines() == [f"verifygate: error: {meant}"]
    gone = verifygate("list", "--files", "attr/gone.py", cwd=here)
    assert gone.returncode == 2 and gone.stderr.splitlines() == [
        f"verifygate: error: attr/gone.py: no such file in the work tree or the index ({fix}"]
    for named in ("attr/_make.py", "attr/unstaged.py"):  # on disk, or in the index
        assert verifygate("run", "--files", named, cwd=here).returncode == 1
    pytester.chdir()
    result = pytester.runpytest_subprocess("--verify-contract", str(repo / "verify.toml"),
                                           "--verify-files", str(repo / "src" / "x.py"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*src/x.py: no such file in the work tree or the index*"])


@pytest.mark.slow
def test_paths_are_relative_to_a_project_in_a_subdirectory(repo: Path) -> None:
    write(repo / "proj" / "verify.toml", "")
    write(repo / "other.py", "")
    commit_all(repo)
    write(repo / "proj" / "src" / "a.py", "x\n")
    write(repo / "elsewhere.py", "y\n")
    git(repo, "add", "-A")
    changes = compute_changes(repo / "proj", ChangeRequest(staged=True))
    assert changes.files == ("src/a.py",)
    assert all_files(repo / "proj") == ("src/a.py", "verify.toml")  # the index counts
    write(repo / "proj" / "new.py", "untracked\n")
    write(repo / "untracked-elsewhere.py", "untracked\n")
    since_head = compute_changes(repo / "proj", ChangeRequest(changed_from="HEAD"))
    assert since_head.files == ("new.py", "src/a.py")
    commit_all(repo)
    git(repo, "rm", "-q", "proj/src/a.py", "other.py")
    since_commit = compute_changes(repo / "proj", ChangeRequest(changed_from="HEAD"))
    assert (since_commit.files, since_commit.deleted) == (("src/a.py",), {"src/a.py"})


@pytest.mark.slow
def test_unknown_ref_and_no_repository(repo: Path, tmp_path: Path) -> None:
    write(repo / "a.py", "1\n")
    commit_all(repo)
    with pytest.raises(ChangeSetError, match=r"unknown git ref 'origin/nope'.*git fetch"):
        compute_changes(repo, ChangeRequest(changed_from="origin/nope"))
    with pytest.raises(ChangeSetError, match="cannot start with '-'"):
        compute_changes(repo, ChangeRequest(changed_from="--output=x"))
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ChangeSetError, match="not in a git repository"):
        compute_changes(plain, ChangeRequest(staged=True))


@pytest.mark.slow
def test_git_output_is_git_stdout_or_one_line_saying_why_not(repo: Path, tmp_path: Path) -> None:
    write(repo / "a.py", "1\n")
    commit_all(repo)
    head = git(repo, "rev-parse", "HEAD")
    assert git_output(repo, "rev-parse", "HEAD") == head.encode()
    with pytest.raises(ChangeSetError, match=r"^git rev-parse failed: fatal: ") as failed:
        git_output(repo, "rev-parse", "--verify", "no-such-ref")
    assert "\n" not in str(failed.value)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ChangeSetError, match="is not in a git repository, so no change set"):
        git_output(plain, "diff", "--name-only")


@pytest.mark.slow
def test_shallow_clone_without_merge_base_says_how_to_fix(repo: Path, tmp_path: Path) -> None:
    write(repo / "a.py", "1\n")
    commit_all(repo, "one")
    git(repo, "branch", "base")
    for index in range(3):
        write(repo / f"f{index}.py", f"{index}\n")
        commit_all(repo, f"c{index}")
    git(repo, "checkout", "-q", "-b", "side", "base")
    write(repo / "side.py", "s\n")
    commit_all(repo, "side")
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--no-single-branch",
                    f"file://{repo}", str(clone)], check=True)
    git(clone, "checkout", "-q", "main")
    with pytest.raises(ChangeSetError, match=r"shallow clone: fetch more history"):
        compute_changes(clone, ChangeRequest(changed_from="origin/side"))


def test_change_set_round_trips_through_a_dict() -> None:
    changes = ChangeSet("staged", files=("a", "b"), deleted=frozenset({"b"}), ref=None)
    assert ChangeSet.from_dict(changes.to_dict()) == changes


@pytest.mark.slow
def test_files_the_package_writes_are_never_changes(repo: Path) -> None:
    import json

    from pytest_verifygate.engine import RunRequest, prepare

    write(repo / "verify.toml", '[[gate]]\nname = "everything"\ncommand = ["true"]\n'
                                'when_changed = ["**"]\n')
    commit_all(repo)

    def selected(**request: object) -> list[str]:
        plan = prepare(RunRequest(start=repo, changes=ChangeRequest(**request)))  # type: ignore[arg-type]
        return [s.gate.name for s in plan.selected]

    write(repo / "src" / "a.py", "x = 1\n")
    first = verifygate("run", "--changed-from", "HEAD", "--json", "out/report.json",
                       "--junit", "out/junit.xml", cwd=repo)
    assert first.returncode == 0, first.stderr
    assert json.loads((repo / "out" / "report.json").read_text())["summary"]["passed"] == 1
    git(repo, "add", "src/a.py")
    git(repo, "commit", "-q", "-m", "a")
    # The next run, whatever its source, does not take the report or JUnit file for changes.
    assert selected(worktree=True) == []
    assert compute_changes(repo, ChangeRequest(worktree=True)).files == ()
    listed = verifygate("list", "--changed-from", "HEAD", "--format", "json", cwd=repo)
    assert json.loads(listed.stdout)["gates"][0]["selected"] is False
    git(repo, "add", "-A")  # staged, the reports are part of the commit: a change
    assert selected(staged=True) == ["everything"]
    assert selected(changed_from="HEAD") == ["everything"]
    git(repo, "reset", "-q")
    # The current run's own outputs are left out even before they exist.
    assert selected(files=["out/next.json"], outputs=[repo / "out" / "next.json"]) == []
    # Nothing under .git/ is a change, even when named.
    assert selected(files=[".git/config", "nested/.git/HEAD"]) == []
    # So are the files verifygate merge writes from shard reports.
    shard = verifygate("run", "--all", "--shard", "1/1", "--json", str(repo.parent / "s1.json"),
                       cwd=repo)
    assert shard.returncode == 0, shard.stderr
    merged = verifygate("merge", str(repo.parent / "s1.json"), "--json", "merged/report.json",
                        "--junit", "merged/junit.xml", cwd=repo)
    assert merged.returncode == 0, merged.stderr
    assert selected(worktree=True) == []
    # Edited since it was written, a report is a change like any file.
    write(repo / "out" / "report.json", "{}\n")
    assert selected(worktree=True) == ["everything"]


TRACKED_REPORT = ("{} is a file git tracks: write the report elsewhere (a git-ignored path, "
                  "or outside the work tree)")


@pytest.mark.slow
def test_a_report_over_a_tracked_or_staged_file_is_refused(repo: Path,
                                                           pytester: pytest.Pytester) -> None:
    """Written over a tracked file, a report would replace the user's file and, as the tool's
    own output, be no change for the stop, --changed-from or the commit: the gate judging it
    would never run again."""
    import json

    write(repo / "verify.toml", '[[gate]]\nname = "json"\nwhen_changed = ["*.json", "*.xml"]\n'
                                'command = ["true"]\n')
    write(repo / "config.json", '{"a": 1}\n')
    write(repo / "docs" / "junit.xml", "<x/>\n")
    commit_all(repo)
    write(repo / "staged.json", "{}\n")
    git(repo, "add", "staged.json")
    contents = {path: path.read_bytes() for path in repo.glob("**/*.*") if ".git" not in path.parts}

    for args, named in (
            (("run", "--all", "--json", "config.json"), "config.json"),
            (("run", "--all", "--json", "staged.json"), "staged.json"),
            (("run", "--all", "--junit", "docs/junit.xml"), "docs/junit.xml")):
        done = verifygate(*args, cwd=repo)
        assert (done.returncode, done.stdout) == (2, ""), done
        assert done.stderr.splitlines() == ["verifygate: error: " + TRACKED_REPORT.format(named)]
    shard = verifygate("run", "--all", "--shard", "1/1", "--json", str(repo.parent / "s1.json"),
                       cwd=repo)
    assert shard.returncode == 0, shard.stderr
    for option in ("--json", "--junit"):
        merged = verifygate("merge", str(repo.parent / "s1.json"), option, "config.json", cwd=repo)
        assert (merged.returncode, merged.stderr.splitlines()) == (
            2, ["verifygate: error: " + TRACKED_REPORT.format("config.json")])
    pytester.chdir()
    for option in ("--verify-report", "--verify-digest"):
        result = pytester.runpytest_subprocess(
            "--verify-contract", str(repo / "verify.toml"), "--verify-all", "-p",
            "no:cacheprovider", f"{option}={repo / 'config.json'}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*" + TRACKED_REPORT.format(repo / "config.json")])
    assert {path: path.read_bytes() for path in contents} == contents
    assert json.loads((repo / "config.json").read_text()) == {"a": 1}


@pytest.mark.slow
def test_a_staged_run_asks_git_once_for_each_answer(repo: Path, tmp_path: Path) -> None:
    # A commit waits for these: the work tree's place and its index, what differs from the
    # index (untracked files and hidden edits included), the staged diff, HEAD (what the
    # left-out gates' patterns were last checked against) and at the end what the gates
    # changed. Each answer is one git call; the tracked files a left-out gate's patterns are
    # checked against are listed once per contract and commit.
    import shutil
    import sys

    real_git = shutil.which("git")
    assert real_git is not None
    shims = tmp_path / "shims"
    calls = tmp_path / "git-calls"
    write(shims / "git", f'#!/bin/sh\necho "$*" >> "{calls}"\nexec "{real_git}" "$@"\n')
    (shims / "git").chmod(0o755)
    gates = "".join(f'[[gate]]\nname = "{name}"\ncommand = ["true"]\nwhen_changed = ["{glob}"]\n'
                    for name, glob in (("py", "*.py"), ("md", "*.md"), ("js", "*.js")))
    write(repo / "verify.toml", gates)
    write(repo / "a.py", "1\n")
    write(repo / "b.md", "b\n")
    write(repo / "c.js", "c\n")
    commit_all(repo)
    write(repo / "a.py", "2\n")
    git(repo, "add", "a.py")
    for _ in range(2):
        calls.unlink(missing_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "pytest_verifygate", "run", "--staged"], cwd=repo,
            capture_output=True, text=True,
            env={**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"})
        assert done.returncode == 0, done.stderr
        assert "1 of 3 gate(s) selected" in done.stderr + done.stdout
    commands = [line.split(" -c ")[-1].split(" ", 1)[1] for line in
                calls.read_text().splitlines()]
    assert [command.split(" ")[0] for command in commands] == [
        "rev-parse", "diff-files", "ls-files", "diff", "rev-parse", "diff-files"], commands
