"""What the tool reads from git: the changed files, what a push sends, and the work tree's
inputs to a gate.

PYTEST_DONT_REWRITE
"""
