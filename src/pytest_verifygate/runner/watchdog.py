"""The watchdog: one small process per run that ends a gate's process tree after the gate's
deadline, or at once when the run is gone (killed with SIGKILL, stopped, ended by ``os._exit``):
the run tells it on its stdin of each gate, and the kernel closes that pipe when the run dies.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from typing import TYPE_CHECKING

from pytest_verifygate.runner.tree import GateTree, first_marked, read_proc, wait_until

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterable

# After the run's own SIGTERM, grace and SIGKILL (``process``, 3.5 s at most): a live run ends
# a gate that timed out itself, and names what it could not kill.
AFTER_DEADLINE_SECONDS = 5.0
# Between SIGTERM and SIGKILL when the watchdog ends a tree.
GRACE_SECONDS = 1.0
# The thread that reaps the watchdog process once the run has closed its stdin.
REAPER_THREAD = "verifygate-watchdog-reaper"


class Watchdog:
    """The run's side: starts the watchdog process with the first gate, tells it of each
    gate, and closes its stdin when the run ends (which ends the watchdog)."""

    def __init__(self) -> None:
        # The run's side only: the watchdog process itself starts without these imports.
        import threading

        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def expecting(self, mark: str) -> None:
        """A gate command carrying ``mark`` is about to be spawned: should the run die before
        it says ``started``, the watchdog still finds the command's processes by their mark."""
        self._send(f"expect {mark}\n", start=True)

    def started(self, leader: int, mark: str, deadline: float) -> None:
        """A gate's first process started, its tree to end at ``deadline`` (monotonic)."""
        self._send(f"start {leader} {mark} {deadline!r}\n", start=True)

    def ended(self, leader: int) -> None:
        """The run ended the gate of ``leader`` itself (said before its first process is
        reaped, so that the watchdog never holds an id given to another process)."""
        self._send(f"end {leader}\n", start=False)

    def close(self) -> None:
        """No gate will start any more: the watchdog ends what is left and exits."""
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        with contextlib.suppress(OSError):  # it is gone already
            process.stdin.close()
        # Reaped in the background: the run does not wait for the watchdog to exit.
        import threading

        threading.Thread(target=process.wait, name=REAPER_THREAD, daemon=True).start()

    def _send(self, message: str, *, start: bool) -> None:
        with self._lock:
            if self._process is None and start:
                self._process = _spawn()
            if self._process is None:
                return
            assert self._process.stdin is not None
            try:
                self._process.stdin.write(message.encode())
                self._process.stdin.flush()
            except OSError:
                # The watchdog is gone (killed): the run still ends its gates itself.
                self._process = None


def _spawn() -> subprocess.Popen[bytes] | None:
    """The watchdog process, or None when it cannot be started (the run then supervises its
    gates alone, as it always does while it lives)."""
    import subprocess

    # Started where the package this run imported lives, so that ``-m`` finds that package
    # (not one of the same name in the project the run checks); it needs nothing else than
    # the standard library, so neither ``site`` nor the environment's PYTHON* variables.
    home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        return subprocess.Popen(
            [sys.executable, "-S", "-E", "-m", __name__],
            cwd=home,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Out of the run's process group: a Ctrl-C or a kill of the run's group does not
            # reach it, so it is still there to end the gates.
            start_new_session=True,
        )
    except OSError:
        return None


# -- the watchdog process ------------------------------------------------------------------


def main() -> None:
    """Read the run's messages until end of file, ending trees whose deadline has passed;
    then end every tree still watched."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        # Whoever stops the run must not stop the one that cleans up after it.
        signal.signal(signum, signal.SIG_IGN)
    gates: dict[int, tuple[GateTree, float]] = {}  # leader -> its tree, when to end it
    expected: set[str] = set()  # marks of commands being spawned, not yet said started
    stdin = sys.stdin.fileno()
    pending = b""
    while True:
        now = time.monotonic()
        due = [leader for leader, (_, end_at) in gates.items() if end_at <= now]
        if due:
            _end([gates.pop(leader)[0] for leader in due])
            continue
        wait = min((end_at for _, end_at in gates.values()), default=now + 3600) - now
        readable, _, _ = select.select([stdin], [], [], max(0.0, wait))
        if not readable:
            continue
        chunk = os.read(stdin, 1 << 16)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        _apply(lines, gates, expected)
    orphans = [GateTree(pid, mark) for mark in expected
               if (pid := first_marked(mark)) is not None]
    _end([*(tree for tree, _ in gates.values()), *orphans])


def _apply(lines: Iterable[bytes], gates: dict[int, tuple[GateTree, float]],
           expected: set[str]) -> None:
    for line in lines:
        words = line.decode("ascii", "replace").split()
        if len(words) == 2 and words[0] == "expect":
            expected.add(words[1])
        elif len(words) == 4 and words[0] == "start":
            leader, mark, deadline = int(words[1]), words[2], float(words[3])
            expected.discard(mark)
            tree = GateTree(leader, mark)
            if not tree.traceable and read_proc(os.getpid()) is not None:
                # /proc works but the first process is gone: the run has reaped it, and its
                # "end" is on its way. Its id may already be another process's.
                continue
            gates[leader] = (tree, deadline + AFTER_DEADLINE_SECONDS)
        elif len(words) == 2 and words[0] == "end":
            gates.pop(int(words[1]), None)


def _end(trees: list[GateTree]) -> None:
    """End ``trees`` together: SIGTERM to all, the grace, then SIGKILL until none is left."""
    for tree in trees:
        tree.signal(signal.SIGTERM)
    wait_until(lambda: not any(tree.members() for tree in trees), GRACE_SECONDS)
    for tree in trees:
        tree.end(0.0)


if __name__ == "__main__":
    main()
