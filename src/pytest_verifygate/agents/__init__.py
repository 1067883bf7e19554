"""Coding-agent front ends: verify-on-stop hooks, one policy for every agent.

PYTEST_DONT_REWRITE
"""

# Seconds: the timeouts the installer writes, and the stop hook's own budget below the stop's
# (its answer still needs time after the gates are stopped: killing them, the report). Here,
# not in ``protocol``: the command line's help shows them, and every command builds it.
SESSION_START_TIMEOUT = 30  # recording HEAD takes one git call
STOP_TIMEOUT = 900  # above the slowest gate
BUDGET_MARGIN = 60
DEFAULT_BUDGET = STOP_TIMEOUT - BUDGET_MARGIN
