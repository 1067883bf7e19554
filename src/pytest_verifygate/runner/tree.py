"""A gate's process tree, found by process group and, with ``/proc``, by the mark its environment
inherits and by descent; a process is known by pid and start time, so a reused pid is never
signalled.

PYTEST_DONT_REWRITE
"""

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

# Space-separated marks: a run inside a gate adds its own, so the outer run finds its gates.
TREE_ENV = "VERIFYGATE_TREE"
PROC = "/proc"
# After SIGKILL, until the processes left count as survivors.
KILL_WAIT_SECONDS = 1.0
POLL_SECONDS = 0.02


class Proc(NamedTuple):
    """One process as ``/proc/<pid>/stat`` shows it."""

    pid: int
    ppid: int
    pgrp: int
    start: int  # clock ticks after boot: with the pid, who the process is
    running: bool  # not a zombie, not dead
    name: str


def read_proc(pid: int | str) -> Proc | None:
    """The process ``pid`` from ``/proc``; None if it is gone (or there is no ``/proc``)."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    # The name is in parentheses and may hold anything, ")" and spaces included.
    open_paren, close_paren = data.find(b"("), data.rfind(b")")
    fields = data[close_paren + 2:].split()
    try:
        return Proc(int(pid), int(fields[1]), int(fields[2]), int(fields[19]),
                    fields[0] not in (b"Z", b"X", b"x"),
                    data[open_paren + 1:close_paren].decode("utf-8", "replace"))
    except (IndexError, ValueError):
        return None


def _processes(since: int) -> list[Proc]:
    """Every process started at ``since`` (clock ticks) or later, this one excluded."""
    try:
        entries = os.listdir(PROC)
    except OSError:
        return []
    me = str(os.getpid())
    found = (read_proc(entry) for entry in entries if entry.isdigit() and entry != me)
    return [proc for proc in found if proc is not None and proc.start >= since]


def first_marked(mark: str) -> int | None:
    """The earliest started running process carrying ``mark`` (None: there is none)."""
    carriers = [proc for proc in _processes(0)
                if proc.running and _carries(proc.pid, mark.encode())]
    return min(carriers, key=lambda proc: proc.start).pid if carriers else None


def _carries(pid: int, mark: bytes) -> bool:
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as handle:
            return mark in handle.read()
    except OSError:  # gone, or another user's
        return False


def send_signal(pid: int, signum: int) -> None:
    os.kill(pid, signum)


def send_group_signal(pgid: int, signum: int) -> None:
    """``killpg``, passing over a group gone or none of it ours to signal."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or a reused id someone else owns
        return False
    return True


class GateTree:
    """The processes of one gate command, from its first process (the group leader) on."""

    def __init__(self, leader: int, mark: str) -> None:
        self.leader = leader
        self.mark = mark.encode()
        found = read_proc(leader)
        self.traceable = found is not None
        self.since = found.start if found is not None else 0
        self.known: dict[int, int] = {}  # pid -> start of every process found so far
        self.groups: set[int] = set()  # those members made of their own

    def members(self) -> list[Proc]:
        """The gate's processes still running (not zombies)."""
        if not self.traceable:
            return []
        candidates = {proc.pid: proc for proc in _processes(self.since)}
        found = {pid for pid, proc in candidates.items()
                 if proc.pgrp == self.leader or pid == self.leader
                 or self.known.get(pid) == proc.start}
        found.update(pid for pid in candidates.keys() - found if _carries(pid, self.mark))
        children: dict[int, list[int]] = {}
        for proc in candidates.values():
            children.setdefault(proc.ppid, []).append(proc.pid)
        pending = list(found)
        while pending:
            for child in children.get(pending.pop(), ()):
                if child not in found:
                    found.add(child)
                    pending.append(child)
        self.known.update((pid, candidates[pid].start) for pid in found)
        # Exited members (zombies) count too: their group lives on in what they started.
        self.groups.update(candidates[pid].pgrp for pid in found)
        self.groups -= {self.leader, os.getpgrp(), 0, 1}
        return [candidates[pid] for pid in sorted(found) if candidates[pid].running]

    def signal(self, signum: int) -> list[Proc]:
        """Send ``signum`` to the gate's group, each group a member made, and each member; return
        the members. A whole group reaches a process forking faster than ``/proc`` is read."""
        members = self.members()
        for group in (self.leader, *sorted(self.groups)):
            send_group_signal(group, signum)
        for proc in members:
            # Signalled again by itself: that tells a process that refuses signals.
            if proc.pgrp != self.leader:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    send_signal(proc.pid, signum)
        return members

    def end(self, grace: float) -> list[Proc]:
        """SIGTERM, ``grace`` seconds, then SIGKILL until nothing is left (for
        ``KILL_WAIT_SECONDS`` at most); returns the processes still running."""
        if not self.traceable:  # no /proc: only the process group can be reached
            if _group_alive(self.leader):
                send_group_signal(self.leader, signal.SIGTERM)
                if not wait_until(lambda: not _group_alive(self.leader), grace):
                    send_group_signal(self.leader, signal.SIGKILL)
            return []
        if not self.members():
            return []
        self.signal(signal.SIGTERM)
        if wait_until(lambda: not self.members(), grace):
            return []
        # Signalled on every look: a process that forks while being killed leaves children.
        if wait_until(lambda: not self.signal(signal.SIGKILL), KILL_WAIT_SECONDS):
            return []
        return self.members()


def monotonic() -> float:
    """The monotonic clock every deadline of a run is read from, in this process and the
    watchdog's. Not ``time.monotonic``: a test that freezes time (freezegun replaces
    ``time.monotonic`` in every module) runs while the gates do, in the same process."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def wait_until(done: Callable[[], bool], seconds: float) -> bool:
    """Poll ``done()`` until it is true (True) or ``seconds`` passed (False)."""
    end = monotonic() + seconds
    while True:
        if done():
            return True
        if monotonic() >= end:
            return False
        time.sleep(POLL_SECONDS)


def describe(survivors: Iterable[Proc]) -> str:
    """A note for the gate's output naming the processes that could not be killed."""
    listed = list(survivors)
    names = ", ".join(f"{proc.pid} ({proc.name})" for proc in listed[:20])
    more = f" and {len(listed) - 20} more" if len(listed) > 20 else ""
    return (f"verifygate: {len(listed)} process(es) this gate started could not be killed: "
            f"{names}{more}; they may still be running\n")
