"""``verifygate install`` and ``verifygate uninstall``: the plain git hooks that run the gates
(``githooks``).

PYTEST_DONT_REWRITE
"""

import argparse
import sys
from pathlib import Path

from pytest_verifygate.cli.exits import EXIT_OK
from pytest_verifygate.githooks import HOOKS, hooks_dir, install, uninstall


def main(args: argparse.Namespace) -> int:
    directory = hooks_dir(Path.cwd())
    if args.command == "install":
        done = install(directory, args.hook or HOOKS, sys.executable)
    else:
        done = uninstall(directory, args.hook or HOOKS)
    for line in done:
        print(f"verifygate: {directory}/{line}")
    return EXIT_OK
