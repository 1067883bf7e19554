"""Gate outcomes, verdicts and the stable failure codes (docs: Outcomes, verdict and failure
codes), apart from ``classify`` so that naming a code does not compile the rule table.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final, Literal, get_args

Outcome = Literal["passed", "failed", "skipped", "pending"]
PASSED: Final = "passed"
FAILED: Final = "failed"
SKIPPED: Final = "skipped"
PENDING: Final = "pending"  # a manual gate awaiting human sign-off
OUTCOMES: Final[tuple[Outcome, ...]] = get_args(Outcome)

# The run's verdict: failed > pending > unverified (no gate ran) > passed.
Verdict = Literal["passed", "failed", "pending", "unverified"]
VERDICT_PASSED: Final = "passed"
VERDICT_FAILED: Final = "failed"
VERDICT_PENDING: Final = "pending"
VERDICT_UNVERIFIED: Final = "unverified"


def verdict_of(outcomes: Collection[str], *, unverified_fails: bool = False,
               failed: bool = False) -> Verdict:
    """The verdict of a run whose gates ended with ``outcomes`` (docs: Outcomes, verdict and
    failure codes): failed (a gate, or the run itself: ``failed``) > pending > unverified (no
    gate passed; failed where ``unverified_fails``) > passed."""
    if FAILED in outcomes or failed:
        return VERDICT_FAILED
    if PENDING in outcomes:
        return VERDICT_PENDING
    if PASSED not in outcomes:
        return VERDICT_FAILED if unverified_fails else VERDICT_UNVERIFIED
    return VERDICT_PASSED

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

CODES: Final[tuple[Code, ...]] = get_args(Code)
# Codes that ``on_missing = "skip"`` turns into a skip, and that a retry cannot change.
MISSING_CODES = frozenset({MISSING_SCRIPT, MISSING_MAKE_TARGET, NO_TEST_FILES})
# A retry cannot change these: the command, the contract or the order of the gates is wrong.
NOT_RETRIED = MISSING_CODES | {UNSUPPORTED_FORMAT, SEQUENCE_ISSUE, INTERRUPTED}

# The verdict "failed" with no gate failed: files changed but nothing verified them, and the
# contract's settings.fail_when_unverified makes that a failure. Said the same way everywhere.
UNVERIFIED_FAILURE = "files changed but no gate ran, and the contract sets fail_when_unverified"
UNVERIFIED_FIX = "add a gate whose when_changed matches the changes, or change the setting"
