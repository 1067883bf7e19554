"""The outcome of the agent hook's last stop in a repository: what ``verifygate agent-status``
reads.

A headless agent run (``claude -p``, ``codex exec``, ``gemini -p``) exits 0 when the hook hands
the work over to a human after the round cap, and shows nothing of it; nor does it say when it
ran no hook at all. So every stop the hook judges records its outcome in
``<git dir>/verifygate/agent-status.json`` (in the user's state directory when the git
directory cannot take it), sealed with the user's key like the round counts, and
``agent-status`` exits 0 only when the last stop was verified.

PYTEST_DONT_REWRITE
"""

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from pytest_verifygate.state.files import remove_state_file, write_state
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
    """The record under the git directory, and its place in the user's state directory."""
    import hashlib

    from pytest_verifygate.state.integrity import user_state_dir

    primary = state_dir(repo_root) / "agent-status.json"
    base = user_state_dir()
    if base is None:
        return primary, None
    project = hashlib.sha256(str(repo_root).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return primary, base / "agent-status" / f"{project}.json"


def record_status(repo_root: Path, outcome: str, *, agent: str, session: str, message: str,
                  failed_gates: tuple[str, ...] = ()) -> None:
    """Keep the outcome of this stop; a problem is one line on stderr, never an error."""
    from pytest_verifygate.state.integrity import signed

    record: dict[str, object] = {
        "outcome": outcome, "repository": _repository(repo_root), "agent": agent,
        "session": session, "time": time.time(),
        "message": message[:2000], "failed_gates": list(failed_gates[:50]),
    }
    text = json.dumps(signed(STATUS_SEAL, record), indent=2) + "\n"
    primary, fallback = status_paths(repo_root)
    for path in (primary, fallback):
        if path is None:
            continue
        try:
            write_state(path, text)  # through no planted link
        except OSError:
            continue
        if path == primary and fallback is not None:
            with contextlib.suppress(OSError):
                remove_state_file(fallback)  # ours, and older than the record just written
        return
    print("verifygate agent-hook: cannot record this stop's outcome for `verifygate "
          "agent-status`", file=sys.stderr)


def read_status(repo_root: Path) -> dict[str, Any] | None:
    """The last stop's record, or None: none was recorded, or none that this user's
    verifygate wrote for this repository (a forged or replayed "verified" must not pass)."""
    from pytest_verifygate.state.integrity import StateFileError, is_signed, read_state_file

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
                and data.get("repository") == _repository(repo_root)
                and isinstance(data.get("time"), (int, float))
                and (newest is None or data["time"] > newest["time"])):
            newest = data
    return newest


def _repository(repo_root: Path) -> str:
    """The repository a record is of, sealed in it: a sealed record copied from another
    repository (a clone whose stop was verified) is not this one's."""
    import os

    return os.path.realpath(repo_root)


def clear_status(repo_root: Path) -> None:
    """Forget the last stop (before a new run, so that a run whose hook never ran is told
    from one that was verified)."""
    for path in status_paths(repo_root):
        if path is not None:
            remove_state_file(path)
