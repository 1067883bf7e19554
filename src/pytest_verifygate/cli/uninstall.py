"""``verifygate uninstall``: remove the git hooks ``verifygate install`` wrote (``githooks``).

PYTEST_DONT_REWRITE
"""

import argparse
from pathlib import Path

from pytest_verifygate.cli.exits import EXIT_OK
from pytest_verifygate.githooks import HOOKS, hooks_dir, uninstall


def main(args: argparse.Namespace) -> int:
    directory = hooks_dir(Path.cwd())
    for line in uninstall(directory, args.hook or HOOKS):
        print(f"verifygate: {directory}/{line}")
    return EXIT_OK
