"""Signals as interruptions: SIGTERM ends a run the way Ctrl-C does, so gates die and reports
are written. Used by the command line, the agent hook and the pytest plugin.
"""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any


class Interruptible:
    """While entered, ``signals`` (SIGINT and SIGTERM by default) raise KeyboardInterrupt,
    once: a second one while shutting down is ignored, so cleanup is not cut short.

    ``keep_others``: a signal whose handler someone else installed is left alone (the pytest
    plugin: pytest dies on SIGTERM, and the gates, in sessions of their own, would live on).
    Outside the main thread nothing changes: Python allows handlers only there.
    """

    def __init__(self, signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM), *,
                 keep_others: bool = False) -> None:
        self.signals = signals
        self.keep_others = keep_others
        self.previous: dict[int, Any] = {}
        self.fired = False

    def __enter__(self) -> Interruptible:
        import threading

        if threading.current_thread() is threading.main_thread():
            for signum in self.signals:
                if self.keep_others and signal.getsignal(signum) is not signal.SIG_DFL:
                    continue
                self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.fired:
            return
        self.fired = True
        raise KeyboardInterrupt

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}
