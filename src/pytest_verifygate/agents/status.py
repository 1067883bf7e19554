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

from pytest_verifygate.agents.state import private_path, write_either
from pytest_verifygate.state.files import StateFileError, read_state_file, remove_state_file
from pytest_verifygate.state.integrity import is_signed
from pytest_verifygate.state.storage import state_dir

STATUS_SEAL = b"agent-status"  # what the record's MAC is for (integrity.signed)
MAX_STATUS_BYTES = 64 * 1024

# Outcomes of a stop. Only VERIFIED lets ``agent-status`` exit 0.
VERIFIED = "verified"  # gates pass, only manual gates are pending, none applies, no changes
BLOCKED = "blocked"  # the agent was sent back to work
HANDED_OVER = "handed_over"  # the cap was reached, the stop allowed, a human must review
NOT_CHECKED = "not_checked"  # allowed without a verdict (no contract, a run the user aborted)
OUTCOMES = (VERIFIED, BLOCKED, HANDED_OVER, NOT_CHECKED)


def status_paths(repo_root: Path) -> tuple[Path, Path | None]:
    private = private_path("agent-status", repo_root, "status.json")
    return state_dir(repo_root) / "agent-status.json", private


def record_status(repo_root: Path, outcome: str, *, agent: str, session: str, message: str,
                  failed_gates: tuple[str, ...] = ()) -> None:
    """Keep this stop's outcome; a problem is one line on stderr, never an error."""
    record: dict[str, object] = {
        "outcome": outcome, "repository": os.path.realpath(repo_root), "agent": agent,
        "session": session, "time": time.time(),
        "message": message[:2000], "failed_gates": list(failed_gates[:50]),
    }
    if write_either(*status_paths(repo_root), STATUS_SEAL, record)[0] is None:
        print("verifygate agent-hook: cannot record this stop's outcome for `verifygate "
              "agent-status`", file=sys.stderr)


def read_status(repo_root: Path) -> dict[str, Any] | None:
    """The last stop's record that this user's verifygate wrote for this repository (a forged
    record, or one copied from a clone whose stop was verified, must not pass)."""
    newest: dict[str, Any] | None = None
    for path in status_paths(repo_root):
        if path is None:
            continue
        try:
            raw = read_state_file(path, MAX_STATUS_BYTES)
            data = json.loads(raw.decode("utf-8")) if raw is not None else None
        except (StateFileError, ValueError, RecursionError):
            continue
        if (isinstance(data, dict) and is_signed(STATUS_SEAL, data)
                and data.get("outcome") in OUTCOMES
                and data.get("repository") == os.path.realpath(repo_root)
                and isinstance(data.get("time"), (int, float))
                and (newest is None or data["time"] > newest["time"])):
            newest = data
    return newest


def clear_status(repo_root: Path) -> None:
    """Forget the last stop (before a new run, so that a run whose hook never ran is told
    from one that was verified)."""
    for path in status_paths(repo_root):
        if path is not None:
            remove_state_file(path)
