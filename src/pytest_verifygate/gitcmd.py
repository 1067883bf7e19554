"""How the package runs git: ``git_output`` with the flags that make git answer from the
objects and files alone, and a one-line ``ChangeSetError`` when git cannot or fails, never an
empty answer; and the plain answers every layer asks (HEAD, the empty tree).

PYTEST_DONT_REWRITE
"""

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_verifygate.errors import ChangeSetError

# Whatever the repository's configuration says, git answers from the objects and files: no
# replace refs or grafts (a commit swapped for one with the current tree), no fsmonitor (a
# command that says what changed), no stat shortcut blind to a file rewritten at its old size
# and mtime.
GIT = ("git", "--no-replace-objects", "-c", "core.fsmonitor=false", "-c",
       "core.checkStat=default", "-c", "core.trustctime=true", "-c",
       "advice.graftFileDeprecated=false")

def git_output(root: Path, *args: str, environ: Mapping[str, str] | None = None,
               stdin: bytes | None = None) -> bytes:
    """What ``git <args>`` run in ``root`` prints (``stdin``: its input); ``ChangeSetError``
    when it cannot or fails."""
    return _checked(root, args, _run_git(root, args, environ, stdin))


def git_answer(root: Path, *args: str) -> bytes | None:
    """``git_output``, or None when git says no without an error (exit status 1, nothing on
    stderr: ``rev-parse --verify --quiet`` of a missing ref); other failures raise."""
    process = _run_git(root, args)
    if process.returncode == 1 and not process.stderr.strip():
        return None
    return _checked(root, args, process)


def _run_git(root: Path, args: Sequence[str], environ: Mapping[str, str] | None = None,
             stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    # Grafts and replace refs make git show other commits than those recorded: a ``git
    # replace`` would make a broken commit look like the one before it.
    env = {**os.environ, "GIT_GRAFT_FILE": os.devnull, "GIT_NO_REPLACE_OBJECTS": "1",
           **(environ or {})}
    try:
        return subprocess.run([*GIT, *args], cwd=root, capture_output=True, env=env,
                              input=stdin if stdin is not None else b"", check=False)
    except FileNotFoundError:
        raise ChangeSetError("git is not installed or not on PATH") from None
    except OSError as exc:  # not executable, no such directory: still one line, not a trace
        raise ChangeSetError(f"cannot run git in {root}: {exc.strerror or exc}") from None


def _checked(root: Path, args: Sequence[str], process: subprocess.CompletedProcess[bytes]
             ) -> bytes:
    if process.returncode == 0:
        return process.stdout
    stderr = process.stderr.decode("utf-8", "replace")
    message = stderr.strip().splitlines()
    first = message[0] if message else f"exit status {process.returncode}"
    # Outside a repository, ``git diff`` turns into ``git diff --no-index`` and rejects
    # the options that need one instead of saying so.
    if "not a git repository" in first or "usage: git diff --no-index" in stderr:
        raise ChangeSetError(
            f"{root} is not in a git repository, so no change set can be computed "
            "(verifygate run and pytest take explicit files or all gates instead)"
        )
    words = list(args)
    while words[:1] == ["-c"]:  # a setting for this call: the command comes after
        words = words[2:]
    command = words[0] if words else "git"
    raise ChangeSetError(f"git {command!s} failed: {first}")


def empty_tree(root: Path) -> str:
    """The id of the empty tree in this repository's hash (SHA-1 or SHA-256)."""
    return git_output(root, "hash-object", "-t", "tree", "/dev/null").decode().strip()


def head_commit(root: Path) -> str | None:
    """HEAD's commit id, or None before the first commit."""
    head = git_answer(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    return None if head is None else head.decode().strip()
