"""The outcome of the agent hook's last stop in a repository, for ``verifygate agent-status``:
a headless agent run exits 0 whatever the hook decided, and says nothing when no hook ran.

PYTEST_DONT_REWRITE
"""

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from pytest_verifygate.agents.state import private_path
from pytest_verifygate.state.files import (
    StateFileError,
    read_state_file,
    remove_state_file,
    write_state,
)

MAX_STATUS_BYTES = 64 * 1024

# Outcomes of a stop. Only VERIFIED lets ``agent-status`` exit 0.
VERIFIED = "verified"  # gates pass, only manual gates are pending, none applies, no changes
BLOCKED = "blocked"  # the agent was sent back to work
HANDED_OVER = "handed_over"  # the cap was reached, the stop allowed, a human must review
NOT_CHECKED = "not_checked"  # allowed without a verdict (no contract, a run the user aborted)
OUTCOMES = (VERIFIED, BLOCKED, HANDED_OVER, NOT_CHECKED)


def status_path(repo_root: Path) -> Path | None:
    return private_path("agent-status", os.path.realpath(repo_root), "status.json")


def record_status(repo_root: Path, outcome: str, *, agent: str, session: str, message: str,
                  failed_gates: tuple[str, ...] = ()) -> None:
    """Keep this stop's outcome; a problem is one line on stderr, never an error."""
    record: dict[str, object] = {
        "outcome": outcome, "repository": os.path.realpath(repo_root), "agent": agent,
        "session": session, "time": time.time(),
        "message": message[:2000], "failed_gates": list(failed_gates[:50]),
    }
    path = status_path(repo_root)
    try:
        if path is None:
            raise OSError("no private state directory")
        write_state(path, json.dumps(record, indent=2) + "\n")
    except OSError:
        print("verifygate agent-hook: cannot record this stop's outcome for `verifygate "
              "agent-status`", file=sys.stderr)


def read_status(repo_root: Path) -> dict[str, Any] | None:
    """The last stop's record for this repository, if there is one to believe."""
    path = status_path(repo_root)
    try:
        raw = read_state_file(path, MAX_STATUS_BYTES) if path is not None else None
        data = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (StateFileError, ValueError, RecursionError):
        return None
    if (isinstance(data, dict) and data.get("outcome") in OUTCOMES
            and data.get("repository") == os.path.realpath(repo_root)
            and isinstance(data.get("time"), (int, float))):
        return data
    return None


def clear_status(repo_root: Path) -> None:
    """Forget the last stop (before a new run, so that a run whose hook never ran is told
    from one that was verified)."""
    path = status_path(repo_root)
    if path is not None:
        remove_state_file(path)
