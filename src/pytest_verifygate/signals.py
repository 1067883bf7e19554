"""Signals as interruptions: every terminating signal ends a run the way Ctrl-C does, so gates
die and reports are written; once the gates are done (``hold_interrupts``), a signal is noted
instead of raised, so the report is written whole and the run still exits as interrupted.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

# Ctrl-C and Ctrl-\, a closed terminal or ssh session, a service or CI runner stopping the job.
TERMINATING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

# The guards entered in the main thread, innermost last.
_active: list[Interruptible] = []


class Interruptible:
    """While entered in the main thread, the first of ``signals`` raises KeyboardInterrupt;
    later ones are ignored so cleanup is not cut short. ``keep_others``: leave a handler
    someone else installed (pytest's SIGINT); the default ones would kill pytest outright."""

    def __init__(self, signals: tuple[int, ...] = TERMINATING_SIGNALS, *,
                 keep_others: bool = False) -> None:
        self.signals = signals
        self.keep_others = keep_others
        self.previous: dict[int, Any] = {}
        self.fired = False
        self.received: int | None = None  # the first signal that arrived
        self.holding = False

    def __enter__(self) -> Interruptible:
        if threading.current_thread() is threading.main_thread():
            _active.append(self)
            for signum in self.signals:
                if self.keep_others and signal.getsignal(signum) is not signal.SIG_DFL:
                    continue
                self._take(signum)
        return self

    def _take(self, signum: int) -> None:
        try:
            previous = signal.signal(signum, self._handle)
        except (OSError, ValueError):  # not a signal this platform lets anyone handle
            return
        self.previous.setdefault(signum, previous)

    def hold(self) -> None:
        """Until exit, a signal is noted (``fired``, ``received``), never raised, so the report
        is written whole; signals left to others are taken too (pytest's Ctrl-C included)."""
        if self not in _active:  # not entered, or outside the main thread
            return
        self.holding = True
        for signum in self.signals:
            if signum not in self.previous:
                self._take(signum)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.fired:
            return
        self.fired = True
        self.received = signum
        if self.holding:
            return
        raise KeyboardInterrupt

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}
        if self in _active:
            _active.remove(self)


def hold_interrupts() -> None:
    """Tell the innermost guard the gates are done: a signal is noted from now, not raised.
    Only from the main thread: a run ending in another thread says nothing of the main one's."""
    if _active and threading.current_thread() is threading.main_thread():
        _active[-1].hold()
