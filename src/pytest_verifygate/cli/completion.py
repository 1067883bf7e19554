"""``verifygate completion SHELL``: the shell completion script, made by shtab from the parser.

PYTEST_DONT_REWRITE
"""

import argparse
import sys

from pytest_verifygate.cli.exits import EXIT_OK
from pytest_verifygate.errors import UsageError


def main(args: argparse.Namespace) -> int:
    try:
        import shtab
    except ImportError:
        raise UsageError("shell completion needs shtab: pip install "
                         "'pytest-verifygate[completion]' (or pip install shtab)") from None
    from pytest_verifygate.cli.parser import build_parser

    sys.stdout.write(shtab.complete(build_parser(), shell=args.shell))
    return EXIT_OK
