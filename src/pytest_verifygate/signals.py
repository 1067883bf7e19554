"""Signals as interruptions: SIGTERM ends a run the way Ctrl-C does, so gates die and reports
are written. Used by the command line, the agent hook and the pytest plugin.
"""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any


class Interruptible:
    """SIGTERM behaves like Ctrl-C; a second signal while shutting down is ignored."""

    def __enter__(self) -> Interruptible:
        self.previous = {
            signum: signal.signal(signum, self._handle) for signum in (signal.SIGINT,
                                                                       signal.SIGTERM)
        }
        self.fired = False
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.fired:
            return
        self.fired = True
        raise KeyboardInterrupt

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


def sigterm_as_interrupt() -> Any:
    """Make SIGTERM end the session like Ctrl-C, so running gates are killed and reported.

    pytest itself dies on SIGTERM, and the gates, in sessions of their own, would live on.
    A handler someone else installed is left alone. Returns what to restore.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None

    def interrupt(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut cleanup
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)
