"""The one channel for what the package has to tell the user beside its results (a state file
it cannot trust, logs kept elsewhere): ``warn`` where it is found, ``collecting`` around a stage
of a run, each message once. Only front ends print what was collected; with no stage
collecting, a message goes to stderr at once.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from contextvars import ContextVar


class Notices:
    """What was said in a stage, each message once, in the order first said."""

    def __init__(self) -> None:
        self.said: dict[str, None] = {}

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.said))


_collecting: ContextVar[Notices | None] = ContextVar("verifygate_notices", default=None)


def warn(message: str) -> None:
    notices = _collecting.get()
    if notices is None:
        print(f"verifygate: {message}", file=sys.stderr)
    else:
        notices.said.setdefault(message)


@contextlib.contextmanager
def collecting(notices: Notices | None = None) -> Iterator[Notices]:
    """While entered, what is said (in this thread) goes to ``notices`` (default: new ones)."""
    notices = Notices() if notices is None else notices
    token = _collecting.set(notices)
    try:
        yield notices
    finally:
        _collecting.reset(token)
