"""A commit and a push are checked as they will be made, in the user's own environment: a
project installed editable, its untracked and partly staged files, through the git hooks
``verifygate install`` writes, pre-commit, prek and ``pytest --verify-staged``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import git, init_repo, work_state, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
GOOD = "VALUE = 1\n"
BROKEN = "raise ImportError('BROKEN')\n"
PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "demo"
version = "0"
"""


@pytest.fixture(scope="module")
def editable(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A project directory and a virtualenv with it installed editable, as ``pip install -e
    .`` installs a src layout (a ``.pth`` naming ``src``): the gates import the work tree."""
    base = tmp_path_factory.mktemp("editable")
    project, venv = base / "project", base / "venv"
    write(project / "pyproject.toml", PYPROJECT)
    write(project / "src" / "demo" / "__init__.py", "")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--prefix", str(venv),
                    "--no-build-isolation", "--no-deps", "-e", str(project)],
                   check=True, capture_output=True)
    return project, venv / "bin" / "python"


@pytest.fixture
def demo(editable: tuple[Path, Path], tmp_path: Path) -> Iterator[Path]:
    """The editable project as a fresh repository whose gate imports it through the install:
    ``demo.core`` imports ``demo.helper``."""
    project, python = editable
    for entry in project.iterdir():
        if entry.name not in ("pyproject.toml", "src"):
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    shutil.rmtree(project / "src")
    write(project / "src" / "demo" / "__init__.py", "")
    write(project / "src" / "demo" / "core.py", "from demo.helper import VALUE\n")
    write(project / "src" / "demo" / "helper.py", GOOD)
    write(project / ".gitignore", "__pycache__/\n*.egg-info/\n")
    write(project / "verify.toml", f'[[gate]]\nname = "imports"\n'
                                   f'command = ["{python}", "-c", "import demo.core"]\n')
    write(project / ".pre-commit-config.yaml", f"""\
repos:
  - repo: local
    hooks:
      - id: verifygate
        name: verifygate
        entry: {BIN / "verifygate"} run
        language: system
        pass_filenames: false
        always_run: true
        stages: [pre-commit, pre-push]
""")
    init_repo(project)
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "demo")
    yield project


def env_for(tmp_path: Path) -> dict[str, str]:
    """A user's shell without this virtualenv on PATH, and hook managers' homes of its own."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("GIT_", "PRE_COMMIT", "VERIFYGATE_"))}
    return {**env, "PATH": "/usr/bin:/bin", "PRE_COMMIT_HOME": str(tmp_path / "pre-commit"),
            "PREK_HOME": str(tmp_path / "prek")}


def commit(front_end: str, project: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """A commit checked by ``front_end``; for pytest, its check alone."""
    env = env_for(tmp_path)
    if front_end == "pytest":
        return subprocess.run([sys.executable, "-m", "pytest", "--verify-contract",
                               "--verify-staged", "-q", "-p", "no:cacheprovider"],
                              cwd=project, env=env, capture_output=True, text=True)
    if front_end == "hook":
        subprocess.run([sys.executable, "-m", "pytest_verifygate", "install"], cwd=project,
                       check=True, capture_output=True)
    else:
        tool = [sys.executable, "-m", "pre_commit"] if front_end == "pre-commit" \
            else [str(BIN / "prek")]
        subprocess.run([*tool, "install"], cwd=project, env=env, check=True,
                       capture_output=True)
    return subprocess.run(["git", "commit", "-q", "-m", "change"], cwd=project, env=env,
                          capture_output=True, text=True)


def head(project: Path) -> str:
    return git(project, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("front_end", ["hook", "pytest"])
def test_a_partly_staged_commit_is_checked_as_staged_through_the_editable_install(
    demo: Path, tmp_path: Path, front_end: str
) -> None:
    # Staged: broken. The fix, unstaged: what the editable install would import from the
    # work tree, and what the commit does not hold.
    before = head(demo)
    write(demo / "src/demo/helper.py", BROKEN)
    git(demo, "add", "-A")
    write(demo / "src/demo/helper.py", GOOD)
    state = work_state(demo)
    blocked = commit(front_end, demo, tmp_path)
    output = blocked.stdout + blocked.stderr
    assert blocked.returncode != 0, output
    assert "BROKEN" in output
    assert head(demo) == before
    assert work_state(demo) == state
    # The other way round: a good stage under a broken work tree is committed.
    write(demo / "src/demo/helper.py", "VALUE = 2\n")
    git(demo, "add", "-A")
    write(demo / "src/demo/helper.py", BROKEN)
    done = commit(front_end, demo, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (demo / "src/demo/helper.py").read_text() == BROKEN


@pytest.mark.parametrize("front_end", ["hook", "pre-commit", "prek", "pytest"])
def test_a_module_the_commit_lacks_fails_it(demo: Path, tmp_path: Path,
                                            front_end: str) -> None:
    # The staged code imports a module that is on disk, but was never added.
    write(demo / "src/demo/core.py", "from demo.extra import VALUE\n")
    git(demo, "add", "src/demo/core.py")
    write(demo / "src/demo/extra.py", GOOD)
    state = work_state(demo)
    blocked = commit(front_end, demo, tmp_path)
    output = blocked.stdout + blocked.stderr
    assert blocked.returncode != 0, output
    assert "No module named 'demo.extra'" in output
    assert work_state(demo) == state
    git(demo, "add", "src/demo/extra.py")
    done = commit(front_end, demo, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_deletion_staged_with_the_file_left_on_disk_fails_the_commit(
    demo: Path, tmp_path: Path
) -> None:
    git(demo, "rm", "-q", "--cached", "src/demo/helper.py")  # still on disk, untracked
    state = work_state(demo)
    blocked = commit("hook", demo, tmp_path)
    assert blocked.returncode != 0, blocked.stdout + blocked.stderr
    assert "No module named 'demo.helper'" in blocked.stderr
    assert work_state(demo) == state


@pytest.mark.parametrize("front_end", ["pre-commit", "prek"])
def test_a_commit_with_nothing_staged_checks_what_it_records(demo: Path, tmp_path: Path,
                                                             front_end: str) -> None:
    # HEAD imports a module nobody added (committed with --no-verify); the module is on disk,
    # untracked. A message-only commit records HEAD's tree: broken. (pre-commit and prek set
    # unstaged changes aside themselves, never untracked files.)
    write(demo / "src/demo/core.py", "from demo.extra import VALUE\n")
    git(demo, "commit", "-q", "--no-verify", "-am", "broken")
    write(demo / "src/demo/extra.py", GOOD)
    before, state = head(demo), work_state(demo)
    commit(front_end, demo, tmp_path)  # installs the hook; with nothing staged, git refuses
    assert head(demo) == before
    blocked = subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "again"],
                             cwd=demo, env=env_for(tmp_path), capture_output=True, text=True)
    output = blocked.stdout + blocked.stderr
    assert blocked.returncode != 0, output
    assert "No module named 'demo.extra'" in output
    assert head(demo) == before
    assert work_state(demo) == state


def test_a_push_checks_the_pushed_commit_in_place(demo: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(demo, "remote", "add", "origin", str(remote))
    git(demo, "push", "-q", "origin", "main")
    commit("hook", demo, tmp_path)  # installs the hooks; nothing to commit
    env = env_for(tmp_path)

    def push(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "push", "-q", "origin", *args], cwd=demo, env=env,
                              capture_output=True, text=True)

    # Broken, committed past the hook; the fix is only in the work tree.
    write(demo / "src/demo/helper.py", BROKEN)
    git(demo, "commit", "-q", "--no-verify", "-am", "broken")
    write(demo / "src/demo/helper.py", GOOD)
    state = work_state(demo)
    blocked = push("main")
    assert blocked.returncode != 0, blocked.stdout + blocked.stderr
    assert f"checking the pushed commit {head(demo)[:12]} in place" in blocked.stderr
    assert "BROKEN" in blocked.stdout + blocked.stderr
    assert work_state(demo) == state
    git(demo, "commit", "-q", "--no-verify", "-am", "fixed")
    assert push("main").returncode == 0

    # A branch that is not checked out cannot be checked where the gates would see it.
    git(demo, "switch", "-q", "-c", "other")
    write(demo / "notes.txt", "more\n")
    git(demo, "add", "notes.txt")
    git(demo, "commit", "-q", "--no-verify", "-m", "on another branch")
    git(demo, "switch", "-q", "main")
    refused = push("other")
    assert refused.returncode != 0
    assert ("the pushed commit " + git(demo, "rev-parse", "other").strip()[:12]
            + " is not the one checked out") in refused.stderr
    # A tag on a commit the remote has: nothing new to check.
    git(demo, "tag", "v1", "HEAD~2")
    assert push("v1").returncode == 0


def test_the_index_changed_while_the_gates_ran_fails_the_commit(demo: Path,
                                                                tmp_path: Path) -> None:
    # A gate (or anything holding git's environment) stages more during the commit's check:
    # git would commit what nobody checked.
    write(demo / "verify.toml", '[[gate]]\nname = "sneaky"\nshell = true\n'
                                'command = "echo BROKEN > sneaky.txt && git add sneaky.txt"\n')
    git(demo, "add", "verify.toml")
    before = head(demo)
    blocked = commit("hook", demo, tmp_path)
    assert blocked.returncode != 0, blocked.stdout + blocked.stderr
    assert "the index changed while the gates ran" in blocked.stderr
    assert head(demo) == before


def test_an_add_while_a_staged_run_is_checking_fails_it(demo: Path, tmp_path: Path) -> None:
    started = tmp_path / "started"  # this test's own: the project's parent is shared
    write(demo / "verify.toml", '[[gate]]\nname = "slow"\ncommand = ["python3", "-c", '
          f'"import time; open(\'{started}\', \'w\').close(); time.sleep(3)"]\n')
    git(demo, "add", "verify.toml")
    process = subprocess.Popen([sys.executable, "-m", "pytest_verifygate", "run", "--staged"],
                               cwd=demo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    write(demo / "late.txt", "BROKEN\n")
    git(demo, "add", "late.txt")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, out + err
    assert "the index changed while the gates ran" in err
    assert "verdict: failed" in out


def test_a_fixer_with_partial_staging_fails_and_the_users_work_wins(demo: Path,
                                                                     tmp_path: Path) -> None:
    fixer = "import sys\nfor path in sys.argv[1:]:\n    open(path, 'a').write('# fixed\\n')\n"
    write(demo / "tools/fix.py", fixer)
    write(demo / "verify.toml", '[[gate]]\nname = "fix"\n'
                                'command = "python3 tools/fix.py {files}"\n'
                                'when_changed = ["*.txt"]\n')
    write(demo / "a.txt", "one\n")
    write(demo / "b.txt", "one\n")
    git(demo, "add", "-A")
    git(demo, "commit", "-q", "-m", "fixer")
    write(demo / "a.txt", "two\n")
    write(demo / "b.txt", "two\n")
    git(demo, "add", "a.txt", "b.txt")
    write(demo / "a.txt", "two\nthree, unstaged\n")  # partly staged
    done = subprocess.run([sys.executable, "-m", "pytest_verifygate", "run", "--staged"],
                          cwd=demo, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "files were modified by this gate: a.txt, b.txt" in done.stdout
    # Where the user has work set aside, it wins, and what the fixer wrote is kept aside.
    assert (demo / "a.txt").read_text() == "two\nthree, unstaged\n"
    assert "1 file(s) were written while set aside (a.txt)" in done.stderr
    kept = list((demo / ".git/verifygate/aside").glob("*/kept-*/a.txt"))
    assert [path.read_text() for path in kept] == ["two\n# fixed\n"]
    # Where it has none, the fix stays in the work tree for review, as pre-commit leaves it.
    assert (demo / "b.txt").read_text() == "two\n# fixed\n"
    assert git(demo, "diff", "--cached", "--name-only").split() == ["a.txt", "b.txt"]


def test_a_gate_that_changes_a_file_it_was_not_given_fails_the_commit(demo: Path,
                                                                       tmp_path: Path) -> None:
    write(demo / "verify.toml", '[[gate]]\nname = "format"\nshell = true\n'
                                'command = "echo reformatted >> src/demo/core.py"\n')
    git(demo, "add", "verify.toml")
    blocked = commit("hook", demo, tmp_path)
    assert blocked.returncode != 0, blocked.stdout + blocked.stderr
    assert ("files of the staged content were changed while the gates ran "
            "(src/demo/core.py)") in blocked.stderr


def test_pytest_fails_a_check_whose_index_changed_even_with_gates_deselected(
        demo: Path, tmp_path: Path) -> None:
    write(demo / "verify.toml", '[[gate]]\nname = "sneaky"\nshell = true\n'
                                'command = "echo BROKEN > sneaky.txt && git add sneaky.txt"\n'
                                '[[gate]]\nname = "other"\ncommand = ["true"]\n')
    git(demo, "add", "verify.toml")
    done = subprocess.run([sys.executable, "-m", "pytest", "--verify-contract",
                           "--verify-staged", "-k", "sneaky", "-q", "-p", "no:cacheprovider"],
                          cwd=demo, env=env_for(tmp_path), capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the index changed while the gates ran" in done.stdout


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["alone", "xdist"])
def test_pytest_s_own_conftest_sees_the_staged_content(demo: Path, tmp_path: Path,
                                                       workers: list[str]) -> None:
    # conftest.py imports the package before any plugin's configure: the staged content must
    # already be in place then, or the user's tests run against the unstaged fix.
    write(demo / "conftest.py", "import demo.helper\n")
    write(demo / "tests/test_value.py", "import demo.helper\n\n\ndef test_value():\n"
                                        "    assert demo.helper.VALUE == 1\n")
    write(demo / "verify.toml", '[[gate]]\nname = "ok"\ncommand = ["true"]\n')
    git(demo, "add", "-A")
    git(demo, "commit", "-q", "-m", "tests")
    write(demo / "src/demo/helper.py", "VALUE = 2\n")
    git(demo, "add", "-A")
    write(demo / "src/demo/helper.py", GOOD)  # the fix, unstaged
    state = work_state(demo)
    # This pytest, importing the package from the work tree as its editable install does.
    done = subprocess.run([sys.executable, "-m", "pytest", "--verify-contract",
                           "--verify-staged", "-q", "-p", "no:cacheprovider", *workers,
                           "tests"],
                          cwd=demo, env={**env_for(tmp_path), "PYTHONPATH": str(demo / "src")},
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "assert 2 == 1" in done.stdout
    assert work_state(demo) == state


def test_pytest_s_check_is_not_turned_off_by_the_variable_its_workers_inherit(
        demo: Path, tmp_path: Path) -> None:
    # The variable says a controller holds the work set aside; none does: the check runs.
    write(demo / "src/demo/helper.py", BROKEN)
    git(demo, "add", "-A")
    write(demo / "src/demo/helper.py", GOOD)  # the fix, unstaged
    state = work_state(demo)
    done = subprocess.run([sys.executable, "-m", "pytest", "--verify-contract",
                           "--verify-staged", "-q", "-p", "no:cacheprovider"], cwd=demo,
                          env={**env_for(tmp_path), "VERIFYGATE_WORK_SET_ASIDE": str(demo)},
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "BROKEN" in done.stdout
    assert work_state(demo) == state


@pytest.mark.parametrize("ending", ["conftest", "usage"])
def test_pytest_puts_the_work_back_when_it_ends_before_it_begins(demo: Path, tmp_path: Path,
                                                                 ending: str) -> None:
    # The staged conftest.py cannot be imported, or the command line has an unknown option:
    # pytest ends without configuring, and the work it set aside comes back all the same.
    write(demo / "verify.toml", '[[gate]]\nname = "ok"\ncommand = ["true"]\n')
    write(demo / "conftest.py", "raise RuntimeError('BROKEN')\n" if ending == "conftest"
          else "")
    git(demo, "add", "-A")
    write(demo / "conftest.py", "")  # the fix, unstaged
    write(demo / "notes.txt", "untracked work\n")
    state = work_state(demo)
    extra = ["--no-such-option"] if ending == "usage" else []
    done = subprocess.run([sys.executable, "-m", "pytest", "--verify-contract",
                           "--verify-staged", "-q", "-p", "no:cacheprovider", *extra],
                          cwd=demo, env=env_for(tmp_path), capture_output=True, text=True)
    assert done.returncode != 0, done.stdout + done.stderr
    assert ("BROKEN" if ending == "conftest" else "no-such-option") in done.stderr
    assert work_state(demo) == state


def test_work_a_killed_check_set_aside_is_put_back_before_any_run_judges(
        demo: Path, tmp_path: Path) -> None:
    started = tmp_path / "started"  # this test's own: the project's parent is shared
    write(demo / "verify.toml", '[[gate]]\nname = "slow"\ncommand = ["python3", "-c", '
          f'"import time; open(\'{started}\', \'w\').close(); time.sleep(60)"]\n')
    git(demo, "add", "verify.toml")
    write(demo / "notes.txt", "untracked work\n")
    check = subprocess.Popen([sys.executable, "-m", "pytest_verifygate", "run", "--staged"],
                             cwd=demo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert check.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    assert not (demo / "notes.txt").exists()
    # While the check is at work, another run would judge the work tree without the work.
    busy = subprocess.run([sys.executable, "-m", "pytest_verifygate", "list"], cwd=demo,
                          capture_output=True, text=True)
    assert busy.returncode == 2 and "a commit's check is at work" in busy.stderr
    os.killpg(check.pid, 9)
    check.wait()
    # Killed: the next run of any front end puts the work back first (here pytest).
    done = subprocess.run([sys.executable, "-m", "pytest", "--verify-contract", "--co", "-q",
                           "-p", "no:cacheprovider"], cwd=demo, env=env_for(tmp_path),
                          capture_output=True, text=True)
    assert "putting back what a killed run" in done.stderr, done.stdout + done.stderr
    assert (demo / "notes.txt").read_text() == "untracked work\n"
