"""The ``verifygate`` command: parse the arguments, run one subcommand (a module of this
package, ``parser.COMMANDS``), exit. It never imports pytest: start-up time matters.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import importlib
import io
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO, cast

from pytest_verifygate.cli.exits import EXIT_FLUSH_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from pytest_verifygate.cli.parser import COMMANDS, build_parser
from pytest_verifygate.errors import VerifyGateError


def main(argv: Sequence[str] | None = None) -> int:
    open_closed_streams()  # first: before anything opens a file that could take fd 1 or 2
    arguments = sys.argv[1:] if argv is None else list(argv)
    named = arguments[0] if arguments and arguments[0] in COMMANDS else None
    args = build_parser(named).parse_args(arguments)  # a usage error exits, as argparse does
    command = importlib.import_module(f"pytest_verifygate.cli.{COMMANDS[args.command]}")
    for stream in (sys.stdout, sys.stderr):
        # A file name the output's encoding cannot hold is shown escaped, never a
        # UnicodeEncodeError halfway through a run.
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="backslashreplace")
    stdout = sys.stdout
    sys.stdout = cast(TextIO, QuietPipe(stdout))
    try:
        code: int = command.main(args)
    except VerifyGateError as exc:
        print(f"verifygate: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("verifygate: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        sys.stdout = stdout
    return code


class QuietPipe:
    """stdout that ends quietly when its reader goes away (``verifygate list | head``).

    The first write or flush that meets a closed pipe points the descriptor at /dev/null, as
    Python's documentation advises for SIGPIPE: the gates still finish, reports are still
    written and the exit status is the verdict's.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            silence(self._stream)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            silence(self._stream)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ...
        return getattr(self._stream, name)


def open_closed_streams() -> None:
    """Give stdout and stderr closed before the command started (``>&-``) a /dev/null of
    their own, on their descriptor: a report or log opened later must never become fd 1 or 2,
    where a program started without redirecting its output would write into it."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        if getattr(sys, name) is None:
            setattr(sys, name, _discarding(fd))


def _discarding(fd: int) -> TextIO:
    """A text stream into /dev/null, on descriptor ``fd`` if that is still closed."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.fstat(fd)
    except OSError:  # closed: take it
        os.dup2(devnull, fd)
        os.close(devnull)
        devnull = fd
    return open(devnull, "w", encoding="utf-8", errors="backslashreplace")


def silence(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at /dev/null: what is still buffered goes nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError):  # no descriptor (a test's StringIO): nothing to point
        pass


def console_main() -> NoReturn:
    """The console script: ``main``, then exit once stdout and stderr are flushed (a reader
    that went away is not an error; lost output is)."""
    status = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # nothing is left to deliver, nor to fail again at exit
            silence(stream)
        except (OSError, ValueError):  # output lost (a full disk): the status says so
            status = status or EXIT_FLUSH_FAILED
    sys.exit(status)
