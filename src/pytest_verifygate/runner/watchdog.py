"""The watchdog: one process per run that ends a gate's tree after its deadline, or at once when
the run dies (even by SIGKILL: the kernel closes the stdin the run tells it of each gate on).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
from typing import TYPE_CHECKING

from pytest_verifygate.runner.tree import (
    GateTree,
    first_marked,
    monotonic,
    read_proc,
    wait_until,
)

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterable

# Past the run's own SIGTERM, grace and SIGKILL (3.5 s): a live run ends its gates itself.
AFTER_DEADLINE_SECONDS = 5.0
GRACE_SECONDS = 1.0
REAPER_THREAD = "verifygate-watchdog-reaper"


class Watchdog:
    """The run's side: starts the watchdog with the first gate, tells it of each, and closes
    its stdin when the run ends."""

    def __init__(self) -> None:
        import threading  # not in the watchdog process: it starts faster without

        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def expecting(self, mark: str) -> None:
        """A command carrying ``mark`` is about to be spawned: should the run die before saying
        ``started``, the watchdog finds its processes by the mark."""
        self._send(f"expect {mark}\n", start=True)

    def started(self, leader: int, mark: str, deadline: float) -> None:
        """A gate's first process started, its tree to end at ``deadline`` (monotonic)."""
        self._send(f"start {leader} {mark} {deadline!r}\n", start=True)

    def forget(self, mark: str) -> None:
        """The command carrying ``mark`` could not be spawned: there is nothing to look for."""
        self._send(f"forget {mark}\n", start=False)

    def ended(self, leader: int) -> None:
        """The run ended the gate of ``leader`` (said before the reap, so that the watchdog
        never holds an id given to another process)."""
        self._send(f"end {leader}\n", start=False)

    def close(self) -> None:
        """No gate will start: the watchdog ends what is left and exits."""
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        with contextlib.suppress(OSError):  # it is gone already
            process.stdin.close()
        import threading

        # Reaped in the background: the run does not wait for the watchdog to exit.
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
    """The watchdog process, or None (the run still supervises its gates, as it always does)."""
    import subprocess

    # Started where this package lives, so that ``-m`` finds it (not one of the same name in
    # the project checked); it needs only the standard library: no site, no PYTHON* variables.
    home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        # Out of the run's process group: a Ctrl-C or a kill of that group spares it.
        return subprocess.Popen([sys.executable, "-S", "-E", "-m", __name__], cwd=home,
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None


def main() -> None:
    """Read the run's messages, ending trees past their deadline; at end of file, end the rest."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        # Whoever stops the run must not stop what cleans up after it.
        signal.signal(signum, signal.SIG_IGN)
    gates: dict[int, tuple[GateTree, float]] = {}  # leader -> its tree, when to end it
    expected: set[str] = set()  # marks of commands being spawned, not yet said started
    stdin = sys.stdin.fileno()
    pending = b""
    while True:
        now = monotonic()
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
    orphans = [GateTree(pid, mark) for mark in expected if (pid := first_marked(mark)) is not None]
    _end([*(tree for tree, _ in gates.values()), *orphans])


def _apply(lines: Iterable[bytes], gates: dict[int, tuple[GateTree, float]],
           expected: set[str]) -> None:
    for line in lines:
        words = line.decode("ascii", "replace").split()
        if len(words) == 2 and words[0] == "expect":
            expected.add(words[1])
        elif len(words) == 2 and words[0] == "forget":
            expected.discard(words[1])
        elif len(words) == 4 and words[0] == "start":
            leader, mark, deadline = int(words[1]), words[2], float(words[3])
            expected.discard(mark)
            tree = GateTree(leader, mark)
            if not tree.traceable and read_proc(os.getpid()) is not None:
                # Reaped by the run, its "end" on the way: the id may be another process's now.
                continue
            gates[leader] = (tree, deadline + AFTER_DEADLINE_SECONDS)
        elif len(words) == 2 and words[0] == "end":
            gates.pop(int(words[1]), None)


def _end(trees: list[GateTree]) -> None:
    """SIGTERM to all ``trees``, the grace, then SIGKILL until none is left."""
    for tree in trees:
        tree.signal(signal.SIGTERM)
    wait_until(lambda: not any(tree.members() for tree in trees), GRACE_SECONDS)
    for tree in trees:
        tree.end(0.0)


if __name__ == "__main__":
    main()
