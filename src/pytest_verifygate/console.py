"""The ``verifygate`` console script: Python's cyclic garbage collector is paused first.

Start-up makes thousands of objects (modules, classes, functions) that all live until the
exit, and collecting while they are made finds nothing: about 2 ms of a commit's run. So the
collector is paused before anything else is imported (the package's ``__init__`` imports
nothing), for the whole command; a command's own objects are freed by reference counting as
ever, and ``verifygate mcp``, a server that lives on, turns the collector back on once it has
started. ``cli.console_main`` does the rest; ``python -m pytest_verifygate.cli`` comes here too.

PYTEST_DONT_REWRITE
"""

import gc


def main() -> None:
    gc.disable()
    from pytest_verifygate.cli import console_main

    console_main()
