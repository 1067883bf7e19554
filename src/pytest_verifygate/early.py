"""Git reads started at launch, while the rest of the program is still being imported.

A commit's ``verifygate run`` waits for ``git diff --cached`` (and, for its warning, the
unstaged diff). Started when the command line is first looked at, git runs on another core
while Python imports the engine, about two thirds of a commit's run, and its output is
ready when the change set is computed. ``changes`` claims a read by its arguments and
directory: a read is used only for exactly the git command ``changes`` would run, in the
same directory, so a wrong guess costs one unused git process and never a wrong answer.
Unclaimed reads are killed and reaped by ``discard``, which ``cli.main`` calls on every way
out.

Imports nothing beyond what the interpreter has loaded by then (``signal`` only when a read
starts): that is the point.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import TracebackType

# How the package runs git, every time: whatever the repository's configuration or an agent
# writing it says, git answers from the objects and the files themselves. No replace refs (a
# commit swapped for one with the current tree), no grafts (``GIT_ENVIRONMENT``), no file
# system monitor (a command that says what changed), and no stat shortcut that ignores the
# change time (a file rewritten at the same size with its modification time put back).
GIT = ("git", "--no-replace-objects", "-c", "core.fsmonitor=false", "-c",
       "core.checkStat=default", "-c", "core.trustctime=true", "-c",
       "advice.graftFileDeprecated=false")
GIT_ENVIRONMENT = {"GIT_GRAFT_FILE": os.devnull}

# ``changes``' diff of a change set (raw: with modes, to find submodules), and the reads of a
# staged run: the staged diff, the unstaged names, and the entries git is told not to look at.
DIFF = ("diff", "--raw", "-z", "--no-abbrev", "--no-renames", "--relative",
        "--ignore-submodules=none")
STAGED_DIFF = (*DIFF, "--cached", "--")
# Submodules aside, as pre-commit's stash leaves them: a checkout of the index has none of
# their content, so the gates read them as they are.
UNSTAGED_NAMES = ("diff", "--name-only", "-z", "--no-renames", "--relative",
                  "--ignore-submodules=all", "--")
FLAGGED = ("ls-files", "-z", "-v")
TOP_LEVEL = ("rev-parse", "--show-toplevel", "--show-prefix")


def git_environment() -> dict[str, str]:
    """The environment every git of the package runs with: this one, without grafts."""
    return {**os.environ, **GIT_ENVIRONMENT}


class EarlyRead:
    """One ``git`` started in the current directory, with stdout and stderr each piped and
    stdin from /dev/null; read as ``subprocess.Popen.communicate`` reads (the part of
    ``Popen`` that ``changes`` uses)."""

    def __init__(self, args: tuple[str, ...]) -> None:
        import signal  # here: ``verifygate --version`` and the agent hook never start a read

        self.args = [*GIT, *args]
        self.returncode: int | None = None
        self._here = _identity(".")
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        try:
            self.pid = os.posix_spawnp(
                "git", self.args, git_environment(),
                file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                              (os.POSIX_SPAWN_DUP2, out_write, 1),
                              (os.POSIX_SPAWN_DUP2, err_write, 2)],
                # As subprocess does: Python ignores SIGPIPE, git must not inherit that.
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
        except BaseException:
            for fd in (out_read, err_read):
                os.close(fd)
            raise
        finally:
            os.close(out_write)
            os.close(err_write)
        self._pipes = {out_read: bytearray(), err_read: bytearray()}
        self._stdout, self._stderr = out_read, err_read
        self._open = True  # the pipes: closed once, never a descriptor reused since

    def made_in(self, directory: str | os.PathLike[str]) -> bool:
        """Whether this read runs in ``directory`` (the same directory, however named)."""
        return self._here is not None and _identity(directory) == self._here

    def communicate(self) -> tuple[bytes, bytes]:
        """Everything git wrote on stdout and stderr, once it exited."""
        import selectors

        with selectors.DefaultSelector() as selector:
            for fd in self._pipes:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                for key, _ in selector.select():
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        self._pipes[key.fd] += chunk
                    else:
                        selector.unregister(key.fd)
        self._close_pipes()
        self._reap()
        return bytes(self._pipes[self._stdout]), bytes(self._pipes[self._stderr])

    def kill(self) -> None:
        """End the read unread: git is killed and reaped."""
        self._close_pipes()
        if self.returncode is None:
            import signal

            os.kill(self.pid, signal.SIGKILL)  # unreaped, its pid is still its own
            self._reap()

    def _reap(self) -> None:
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)

    def _close_pipes(self) -> None:
        if self._open:
            self._open = False
            os.close(self._stdout)
            os.close(self._stderr)

    def __enter__(self) -> EarlyRead:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.kill()


_started: list[EarlyRead] = []


def staged_reads(staged: bool, every_file: bool, environ: Mapping[str, str]
                 ) -> tuple[tuple[str, ...], ...]:
    """The reads a run with these flags will likely make: for ``--staged`` and pre-commit's
    commit hook, where git's work tree is and what in it differs from the index (``pushed``:
    whether to check the index in a checkout) and the staged diff (``changes._compute``).
    Only a guess: a read nobody claims is discarded."""
    if staged or (not every_file and environ.get("PRE_COMMIT") == "1"
                  and not environ.get("PRE_COMMIT_FROM_REF")
                  and not environ.get("PRE_COMMIT_REMOTE_BRANCH")):
        return (TOP_LEVEL, UNSTAGED_NAMES, FLAGGED, STAGED_DIFF)
    return ()


def start(*reads: tuple[str, ...]) -> None:
    """Start ``git <args>`` for each of ``reads`` in the current directory, to be claimed.

    Where git cannot be started this way (no ``posix_spawnp``, no git), nothing is started:
    ``changes`` then runs git itself and reports what is wrong.
    """
    if not hasattr(os, "posix_spawnp"):
        return
    for args in reads:
        try:
            _started.append(EarlyRead(args))
        except OSError:
            return


def claim(directory: str | os.PathLike[str], args: tuple[str, ...]) -> EarlyRead | None:
    """The read of ``git <args>`` started in ``directory``, taken off the list; None if there
    is none (the caller runs git itself)."""
    for read in _started:
        if tuple(read.args[len(GIT):]) == args and read.made_in(directory):
            _started.remove(read)
            return read
    return None


def discard() -> None:
    """Kill and reap every read nobody claimed."""
    while _started:
        _started.pop().kill()


def _identity(directory: str | os.PathLike[str]) -> tuple[int, int] | None:
    try:
        found = os.stat(directory)
    except OSError:
        return None
    return found.st_dev, found.st_ino
