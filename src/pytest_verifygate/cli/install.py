"""``verifygate install``: plain git hooks that run the gates (``githooks``).

PYTEST_DONT_REWRITE
"""

import argparse
import sys
from pathlib import Path

from pytest_verifygate.cli.exits import EXIT_OK
from pytest_verifygate.githooks import HOOKS, hooks_dir, install


def main(args: argparse.Namespace) -> int:
    directory = hooks_dir(Path.cwd())
    for line in install(directory, args.hook or HOOKS, sys.executable):
        print(f"verifygate: {directory}/{line}")
    return EXIT_OK
