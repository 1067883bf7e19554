"""``python -m pytest_verifygate``: the ``verifygate`` command, also where it is not on PATH
(the agent hook's installed command and the git hooks ``verifygate install`` writes run it so).

PYTEST_DONT_REWRITE
"""

from pytest_verifygate.cli import console_main

console_main()
