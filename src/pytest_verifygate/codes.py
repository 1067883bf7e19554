"""The stable failure codes (SPEC 5): exactly these strings, and which of them behave alike.

Kept apart from ``classify`` (which compiles its rule table on import) so that the runner and
the command line can name codes without paying for the rules until a gate actually fails.
"""

from __future__ import annotations

COMMAND_FAILED = "command_failed"
MISSING_SCRIPT = "missing_script"
MISSING_MAKE_TARGET = "missing_make_target"
NO_TEST_FILES = "no_test_files"
UNSUPPORTED_FORMAT = "unsupported_format"
SETUP_OR_BOOTSTRAP_ISSUE = "setup_or_bootstrap_issue"
SEQUENCE_ISSUE = "sequence_issue"
TIMEOUT = "timeout"
INTERRUPTED = "interrupted"

CODES = (
    COMMAND_FAILED,
    MISSING_SCRIPT,
    MISSING_MAKE_TARGET,
    NO_TEST_FILES,
    UNSUPPORTED_FORMAT,
    SETUP_OR_BOOTSTRAP_ISSUE,
    SEQUENCE_ISSUE,
    TIMEOUT,
    INTERRUPTED,
)
# Codes that ``on_missing = "skip"`` turns into a skip, and that a retry cannot change.
MISSING_CODES = frozenset({MISSING_SCRIPT, MISSING_MAKE_TARGET, NO_TEST_FILES})
NOT_RETRIED = MISSING_CODES | {UNSUPPORTED_FORMAT, INTERRUPTED}

# The verdict "failed" with no gate failed: files changed but nothing verified them, and the
# contract's settings.fail_when_unverified makes that a failure. Said the same way everywhere.
UNVERIFIED_FAILURE = "files changed but no gate ran, and the contract sets fail_when_unverified"
UNVERIFIED_FIX = "add a gate whose when_changed matches the changes, or change the setting"
