"""The words of a run's outcome (docs: Outcomes, verdict and failure codes): gate outcomes,
verdicts and the stable failure codes.

Exactly these strings appear in reports, JUnit properties and digests, so every module names
them through these constants (and ``Outcome`` / ``Verdict`` / ``Code`` for the type checker)
instead of bare literals. Kept apart from ``classify`` (which compiles its rule table on import)
so that the runner and the command line can name codes without paying for the rules until a
gate actually fails.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import Final, Literal

Outcome = Literal["passed", "failed", "skipped", "pending"]
PASSED: Final = "passed"
FAILED: Final = "failed"
SKIPPED: Final = "skipped"
PENDING: Final = "pending"  # a manual gate awaiting human sign-off
OUTCOMES: Final = (PASSED, FAILED, SKIPPED, PENDING)

# The run's verdict: failed > pending > unverified (no gate ran) > passed.
Verdict = Literal["passed", "failed", "pending", "unverified"]
VERDICT_PASSED: Final = "passed"
VERDICT_FAILED: Final = "failed"
VERDICT_PENDING: Final = "pending"
VERDICT_UNVERIFIED: Final = "unverified"

Code = Literal[
    "command_failed", "missing_script", "missing_make_target", "no_test_files",
    "unsupported_format", "setup_or_bootstrap_issue", "sequence_issue", "timeout", "interrupted",
]

COMMAND_FAILED: Final = "command_failed"
MISSING_SCRIPT: Final = "missing_script"
MISSING_MAKE_TARGET: Final = "missing_make_target"
NO_TEST_FILES: Final = "no_test_files"
UNSUPPORTED_FORMAT: Final = "unsupported_format"
SETUP_OR_BOOTSTRAP_ISSUE: Final = "setup_or_bootstrap_issue"
SEQUENCE_ISSUE: Final = "sequence_issue"
TIMEOUT: Final = "timeout"
INTERRUPTED: Final = "interrupted"

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
# A retry cannot change these: the command, the contract or the order of the gates is wrong.
NOT_RETRIED = MISSING_CODES | {UNSUPPORTED_FORMAT, SEQUENCE_ISSUE, INTERRUPTED}

# The verdict "failed" with no gate failed: files changed but nothing verified them, and the
# contract's settings.fail_when_unverified makes that a failure. Said the same way everywhere.
UNVERIFIED_FAILURE = "files changed but no gate ran, and the contract sets fail_when_unverified"
UNVERIFIED_FIX = "add a gate whose when_changed matches the changes, or change the setting"
