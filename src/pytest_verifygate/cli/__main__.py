"""``python -m pytest_verifygate.cli``: the ``verifygate`` command."""

from pytest_verifygate.cli import console_main

console_main()
