"""What a commit's check sets aside comes back byte for byte: odd content, thousands of files,
a nested repository, a kill or Ctrl-C at every step of setting aside and putting back, a
second run, a planted link (docs: pre-commit and git hooks, "What the gates see")."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import commit_all, git, work_state, write

pytestmark = pytest.mark.slow

# Passes only when the work tree is exactly the index: nothing untracked, nothing modified,
# not even behind git's back. (``git diff`` refreshes the index it reads: a copy of it here.)
EXACT = """\
[[gate]]
name = "exact"
shell = true
command = '''cp .git/index "$TMPDIR/index.$$" && GIT_INDEX_FILE="$TMPDIR/index.$$" \\
  git diff --exit-code && test -z "$(git ls-files -o --exclude-standard)" \\
  && grep -q committed hidden.txt'''
"""


def odd_work(repo: Path, untracked: int = 20) -> None:
    """A repository whose work tree differs from its index in every way git knows of."""
    write(repo / "verify.toml", EXACT)
    write(repo / ".gitignore", "ignored/\n")
    write(repo / "text.txt", "one\n")
    (repo / "binary.bin").write_bytes(b"\x00\x01\xff" * 100)
    write(repo / "crlf.txt", "a\r\nb\r\n")
    write(repo / "script.sh", "#!/bin/sh\n")
    os.symlink("text.txt", repo / "link")
    write(repo / "gone.txt", "deleted in the work tree only\n")
    write(repo / "hidden.txt", "committed\n")
    write(repo / "uncached.txt", "staged for deletion, still on disk\n")
    commit_all(repo)
    # Staged changes, then more on top of them.
    write(repo / "text.txt", "two\n")
    git(repo, "add", "text.txt")
    write(repo / "text.txt", "two\nthree, unstaged\n")
    (repo / "binary.bin").write_bytes(b"\x00\xfe" * 300)
    write(repo / "crlf.txt", "a\r\nb\r\nc\r\n")
    (repo / "script.sh").chmod(0o755)  # a mode change alone
    (repo / "link").unlink()
    os.symlink("crlf.txt", repo / "link")
    (repo / "gone.txt").unlink()
    git(repo, "update-index", "--assume-unchanged", "hidden.txt")
    write(repo / "hidden.txt", "edited behind git's back\n")
    git(repo, "rm", "-q", "--cached", "uncached.txt")
    # Untracked: files, a name with a newline and spaces, a link, empty and nested directories,
    # a nested repository; ignored files stay where they are.
    write(repo / "new" / "package" / "__init__.py", "")
    write(repo / "we ird\nname é.txt", "odd\n")
    os.symlink("/nonexistent", repo / "dangling")
    (repo / "empty" / "inside").mkdir(parents=True)
    write(repo / "nested" / "file.txt", "nested\n")
    git(repo / "nested", "init", "-q")
    write(repo / "ignored" / "cache.bin", "environment\n")
    # A directory of untracked files alone, with the modes a mkdir under a umask loses.
    write(repo / "shared" / "notes.txt", "ours\n")
    (repo / "shared").chmod(0o2777)
    for number in range(untracked):
        write(repo / "many" / f"{number % 10}" / f"file{number}.txt", f"{number}\n")


def staged_run(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_verifygate", "run", "--staged"],
                          cwd=repo, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TMPDIR": str(repo.parent)})


def test_the_gates_see_the_index_and_everything_comes_back(repo: Path) -> None:
    odd_work(repo, untracked=3000)
    state, index = work_state(repo), (repo / ".git" / "index").read_bytes()
    done = staged_run(repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "set aside until the gates are done" in done.stderr
    assert work_state(repo) == state
    assert (repo / ".git" / "index").read_bytes() == index
    assert not list((repo / ".git" / "verifygate" / "aside").glob("*/run-*"))
    # A failing gate puts everything back too.
    write(repo / "ignored" / "fail", "")
    write(repo / "verify.toml", EXACT + '\n[[gate]]\nname = "fails"\ncommand = ["false"]\n')
    git(repo, "add", "verify.toml")
    state = work_state(repo)
    done = staged_run(repo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PASS  exact" in done.stdout and "FAIL  fails" in done.stdout
    assert work_state(repo) == state


# Sets work aside as a commit's check does, stopping at the Nth step of it (a move, a journal
# write, a git call): killed, or interrupted as by Ctrl-C while work is being set aside.
DRIVER = """\
import os, signal, sys
from pathlib import Path
from pytest_verifygate.git import set_aside

stop_at, how = int(sys.argv[1]), sys.argv[2]
steps = 0
finishing = False

def step(real):
    def stepped(*args, **kwargs):
        global steps
        steps += 1
        if steps == stop_at and not (finishing and how == "interrupt"):
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    return stepped

set_aside._move = step(set_aside._move)
set_aside.git_output = step(set_aside.git_output)
set_aside.SetAside._save = step(set_aside.SetAside._save)
try:
    target = set_aside.commit_target(Path.cwd(), staged=True)
    with set_aside.SetAside(target, print) as aside:
        finishing = True
        aside.finish()
except KeyboardInterrupt:
    print("interrupted")
print("steps", steps)
"""


@pytest.mark.parametrize("how", ["kill", "interrupt"])
def test_a_check_stopped_at_any_step_loses_nothing(repo: Path, how: str) -> None:
    odd_work(repo, untracked=2)
    state = work_state(repo)
    index = (repo / ".git" / "index").read_bytes()

    def drive(stop_at: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", DRIVER, str(stop_at), how], cwd=repo,
                              capture_output=True, text=True, timeout=120)

    whole = drive(0)
    assert whole.returncode == 0, whole.stderr
    steps = int(whole.stdout.split("steps ")[-1])
    assert steps > 10
    for stop_at in range(1, steps + 1):
        stopped = drive(stop_at)
        if how == "kill":
            assert stopped.returncode == -9, stopped
            # The next run of any kind puts back what the killed one had set aside.
            again = subprocess.run([sys.executable, "-m", "pytest_verifygate", "run", "--all"],
                                   cwd=repo, capture_output=True, text=True, timeout=120)
            assert "Traceback" not in again.stderr, again.stderr
        else:
            assert stopped.returncode == 0 and "Traceback" not in stopped.stderr, stopped
        assert work_state(repo) == state, f"stopped at step {stopped} of {steps}"
        assert (repo / ".git" / "index").read_bytes() == index
        assert not list((repo / ".git" / "verifygate" / "aside").glob("*/kept-*")), stop_at


def test_a_second_check_waits_for_none_and_touches_nothing(repo: Path) -> None:
    odd_work(repo)
    started = repo.parent / "started"
    write(repo / "verify.toml", f'[[gate]]\nname = "slow"\ncommand = ["python3", "-c", '
          f'"import time; open(\'{started}\', \'w\').close(); time.sleep(2)"]\n')
    git(repo, "add", "verify.toml")
    state = work_state(repo)
    first = subprocess.Popen([sys.executable, "-m", "pytest_verifygate", "run", "--staged"],
                             cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    while not started.exists():
        assert first.poll() is None, first.communicate()
    second = staged_run(repo)
    assert second.returncode == 2, second.stdout + second.stderr
    assert second.stderr == ("verifygate: error: another verifygate run is checking a commit "
                             "in this work tree: wait for it to finish, then try again\n")
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, out + err
    assert work_state(repo) == state


def test_a_planted_link_for_the_aside_directory_is_never_followed(repo: Path,
                                                                   tmp_path: Path) -> None:
    odd_work(repo)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / ".git" / "verifygate").mkdir()
    os.symlink(elsewhere, repo / ".git" / "verifygate" / "aside")
    state = work_state(repo)
    done = staged_run(repo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("verifygate: error: cannot set aside what the staged "
                                  "content lacks (")
    assert "nothing was checked" in done.stderr and "Traceback" not in done.stderr
    assert work_state(repo) == state
    assert list(elsewhere.iterdir()) == []


def test_an_untracked_virtualenv_the_check_runs_in_is_never_moved(repo: Path,
                                                                  tmp_path: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "ok"\ncommand = ["true"]\n')
    commit_all(repo)
    venv = repo / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # This package and what it needs, in the virtualenv of the repository's own project.
    here = [str(Path(__file__).resolve().parents[2] / "src"),
            *(path for path in sys.path if path.endswith("site-packages"))]
    (venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
     / "here.pth").write_text("\n".join(here) + "\n")
    write(repo / "a.txt", "x\n")
    git(repo, "add", "a.txt")
    state = work_state(repo)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest_verifygate", "run",
                           "--staged"], cwd=repo, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == ("verifygate: error: the virtualenv .venv/ this runs in is neither "
                           "committed nor ignored: add it to .gitignore, then try again\n")
    assert work_state(repo) == state


def test_a_hard_linked_file_is_never_parted_from_its_links(tmp_path: Path) -> None:
    # The work tree on another file system than its git directory: a file set aside there
    # would be copied, and its other links would keep the old content. The check refuses.
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on a file system of its own")
    work = Path(tempfile.mkdtemp(dir=shm))
    try:
        git(tmp_path, "init", "-q", f"--separate-git-dir={tmp_path / 'git'}", str(work))
        git(work, "config", "user.email", "t@example.com")
        git(work, "config", "user.name", "t")
        write(work / "verify.toml", '[[gate]]\nname = "ok"\ncommand = ["true"]\n')
        commit_all(work)
        write(work / "draft.txt", "untracked\n")
        os.link(work / "draft.txt", work / "draft-link.txt")
        write(work / "verify.toml", '[[gate]]\nname = "ok"\ncommand = ["python3", "-V"]\n')
        git(work, "add", "verify.toml")
        state = work_state(work)
        done = staged_run(work)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "has other hard links" in done.stderr and "Traceback" not in done.stderr
        assert work_state(work) == state
        assert os.stat(work / "draft.txt").st_ino == os.stat(work / "draft-link.txt").st_ino
    finally:
        shutil.rmtree(work)
