"""``python -m pytest_verifygate.cli``: the ``verifygate`` command.

PYTEST_DONT_REWRITE
"""

from pytest_verifygate.console import main

main()
