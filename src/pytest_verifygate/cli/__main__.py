"""``python -m pytest_verifygate.cli``: the ``verifygate`` command.

PYTEST_DONT_REWRITE
"""

from pytest_verifygate.cli import console_main

console_main()
