"""Value checks shared by the ``verifygate`` command and the pytest options (argparse types).

Both front ends take the same ``--phase`` / ``--jobs`` values and must reject them alike, and
decide alike whether to speak to GitHub Actions.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping


def _integer_at_least(text: str, minimum: int, rule: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{text!r} must be {rule}")
    return value


def positive_int(text: str) -> int:
    """A phase, a round count: 1 or more."""
    return _integer_at_least(text, 1, "1 or more")


def jobs(text: str) -> int:
    """How many gates run at once: 0 means one per CPU."""
    return _integer_at_least(text, 0, "0 (one per CPU) or more")


# ``--annotations`` / ``--verify-annotations``: GitHub Actions workflow commands and step summary.
ANNOTATION_CHOICES = ("github", "none")


def github_annotations(choice: str | None, environ: Mapping[str, str]) -> bool:
    """Whether to print GitHub annotations: asked for, or not refused and on GitHub Actions."""
    if choice is not None:
        return choice == "github"
    return environ.get("GITHUB_ACTIONS") == "true"
