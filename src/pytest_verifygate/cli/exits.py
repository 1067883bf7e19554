"""The ``verifygate`` command's exit statuses (docs: The command line).

PYTEST_DONT_REWRITE
"""

EXIT_OK = 0  # verdict passed, pending or unverified
EXIT_FAILED = 1  # a gate failed (or fail_when_unverified)
EXIT_USAGE = 2  # contract or usage error
EXIT_INTERRUPTED = 130  # Ctrl-C or a terminating signal
EXIT_FLUSH_FAILED = 120  # what Python's own exit gives when flushing stdout fails

# For a coding agent's Stop hook, status 2 means "block and show stderr to the agent": a
# mistyped hook flag must reach the user instead (status 1), never trap the agent.
HOOK_USAGE_STATUS = 1
