"""``verifygate install`` / ``uninstall``: plain git hooks, run by real git commits and pushes
with a PATH that has no virtualenv on it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import commit_all, git, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

# Fails when a staged or pushed file says "bad".
NO_BAD = "import sys; sys.exit(any('bad' in open(f).read() for f in sys.argv[1:]))"
CONTRACT = f"""
[[gate]]
name = "no-bad"
command = ["{sys.executable}", "-c", "{NO_BAD}", "{{files}}"]
when_changed = ["*.txt"]
"""

# git and sh only: the hooks must not need the virtualenv on PATH.
BARE_PATH = "/usr/bin:/bin"


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": BARE_PATH}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True,
                          check=False)


def test_install_is_idempotent_chains_and_uninstall_restores(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    commit_all(repo)
    hooks = repo / ".git" / "hooks"
    write(hooks / "pre-commit", f"#!/bin/sh\necho earlier >> {repo.parent / 'earlier.log'}\n")
    (hooks / "pre-commit").chmod(0o755)
    first = verifygate("install", cwd=repo)
    assert first.returncode == 0, first.stderr
    assert "pre-commit: installed; the hook that was there runs first " \
           "(pre-commit.verifygate-chained)" in first.stdout
    second = verifygate("install", cwd=repo)
    assert second.stdout.count("already installed") == 2
    safe_path = " -P" if sys.version_info >= (3, 11) else ""
    assert f"exec {sys.executable}{safe_path} -m pytest_verifygate run --staged" in \
        (hooks / "pre-commit").read_text()

    if safe_path:  # a package of that name at the work tree's top, where git runs hooks
        write(repo / "pytest_verifygate" / "__init__.py", "")
        write(repo / "pytest_verifygate" / "__main__.py", "raise SystemExit(0)\n")
    write(repo / "a.txt", "bad\n")
    git(repo, "add", "a.txt")
    blocked = _git(repo, "commit", "-qm", "bad")
    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    assert "FAIL  no-bad" in blocked.stderr  # git shows a commit hook's output on stderr
    shutil.rmtree(repo / "pytest_verifygate", ignore_errors=True)
    write(repo / "a.txt", "good\n")
    git(repo, "add", "a.txt")
    allowed = _git(repo, "commit", "-qm", "good")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert (repo.parent / "earlier.log").read_text() == "earlier\nearlier\n"

    removed = verifygate("uninstall", cwd=repo)
    assert "pre-commit: removed; the earlier hook is back" in removed.stdout
    assert "pre-push: removed" in removed.stdout
    assert (hooks / "pre-commit").read_text().startswith("#!/bin/sh\necho earlier")
    assert not (hooks / "pre-push").exists()
    write(hooks / "pre-push", "#!/bin/sh\nexit 0\n")
    assert "pre-push: not written by verifygate install: left as it is" in verifygate(
        "uninstall", cwd=repo).stdout


def test_core_hooks_path_and_the_pushed_range(repo: Path, tmp_path: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    write(repo / "a.txt", "good\n")
    commit_all(repo)
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "config", "core.hooksPath", "githooks")
    done = verifygate("install", "--hook", "pre-push", cwd=repo)
    assert done.returncode == 0 and (repo / "githooks" / "pre-push").is_file()
    assert not (repo / "githooks" / "pre-commit").exists()
    first = _git(repo, "push", "-q", "origin", "main")  # a first push: every gate
    assert first.returncode == 0, first.stdout + first.stderr
    assert "changes: all" in first.stdout
    write(repo / "a.txt", "bad\n")
    commit_all(repo, "bad")
    pushed = _git(repo, "push", "-q", "origin", "main")
    assert pushed.returncode == 1, pushed.stdout + pushed.stderr
    bad = git(repo, "rev-parse", "HEAD").strip()
    assert "FAIL  no-bad" in pushed.stdout and f"...{bad}" in pushed.stdout
    assert git(remote, "log", "--format=%s", "-1", "main").strip() == "commit"


def test_install_outside_a_repository_is_one_line(tmp_path: Path) -> None:
    done = verifygate("install", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, "verifygate: error: not in a git repository: "
                                                 "run it in the repository to hook\n")


def test_the_hooks_run_the_gates_with_the_installing_environment_on_path(repo: Path) -> None:
    # A GUI client, or a shell without the virtualenv: the gates find its tools all the same.
    write(repo / "verify.toml", '[[gate]]\nname = "tool"\ncommand = ["pytest", "--version"]\n')
    commit_all(repo)
    assert verifygate("install", "--hook", "pre-commit", cwd=repo).returncode == 0
    write(repo / "a.txt", "one\n")
    git(repo, "add", "a.txt")
    done = _git(repo, "commit", "-qm", "a")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  tool" in done.stderr
