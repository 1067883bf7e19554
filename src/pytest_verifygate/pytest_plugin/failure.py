"""How a failed gate item reads in pytest: its headline, then ``report.junit.failure_text``.

The amount of output follows pytest's verbosity (``-v`` shows more, ``-vv`` all that was
kept); the whole output is always in the gate's log file.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import Any

from pytest_verifygate.report.junit import failure_text
from pytest_verifygate.runner.records import GateResult


def failure_repr(result: GateResult, head: str, *, path: str, verbosity: int,
                 lineno: int = 1) -> Any:
    """The failure as pytest shows it: the headline, then ``failure_text``.

    An exception-style repr rather than a plain string: its ``reprcrash`` message (the
    headline) becomes the short summary line and JUnit's ``message=``, and it survives
    pytest-xdist's report serialisation. pytest builds such reprs only from Python
    tracebacks and exports no public constructor for them, so this is the one place the
    package uses pytest's private ``_pytest._code.code``; ``test_plugin.py`` fails loudly if
    those classes change (a plain string would be the fallback, losing the short headline).
    """
    from _pytest._code.code import (
        ExceptionChainRepr,
        ReprFileLocation,
        ReprTracebackNative,
    )

    from pytest_verifygate.text import terminal_safe

    # Gate output is untrusted: no escape sequence, control or bidi character reaches the
    # terminal (an OSC 52 clipboard write, a title, a query answered into the input).
    head = terminal_safe(head)
    text = terminal_safe(failure_text(result._asdict(), head, verbosity=verbosity))
    crash = ReprFileLocation(path=path, lineno=lineno, message=head)
    return ExceptionChainRepr([(ReprTracebackNative([text + "\n"]), crash, None)])
