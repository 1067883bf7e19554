"""What the agent hook remembers of a session between stops, and where.

Per session (or subagent) key: ``<git dir>/verifygate/agent/<key>.json`` holds the round count
and the last failure signature, the last report is beside it, and the session's starting point
is under ``starts/`` (``session_start.py``); never in the work tree. Files are written
atomically; the most recent sessions' files are kept. Owns the safe file name of a key.

PYTEST_DONT_REWRITE
"""

import contextlib
import json
import re
import sys
import time
from pathlib import Path
from typing import NamedTuple

from pytest_verifygate.storage import prune_oldest, state_dir, write_atomic

STATE_VERSION = 1
MAX_STATE_BYTES = 64 * 1024
STATE_SEAL = b"agent-state"  # what the state's MAC is for (integrity.signed)
KEEP_SESSIONS = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class SessionState(NamedTuple):
    """What one session's hook remembers between stops."""

    rounds: int = 0
    signature: str | None = None
    failed_gates: tuple[str, ...] = ()

    def to_json(self, key: str) -> str:
        data = {
            "version": STATE_VERSION,
            "key": key,
            "rounds": self.rounds,
            "signature": self.signature,
            "failed_gates": list(self.failed_gates),
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        return json.dumps(data, indent=2) + "\n"


def session_file_stem(key: str) -> str:
    """A file name for a session key: safe characters only, unique for distinct keys."""
    safe = _UNSAFE.sub("_", key).lstrip(".")
    # ".report" would collide with the session's report file (``<stem>.report.json``).
    if safe != key or len(safe) > 64 or not safe or safe.endswith(".report"):
        import hashlib  # only for keys that are not already a safe file name

        tag = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        safe = f"{safe[:48]}-{tag}" if safe else tag
    return safe


def state_path(repo_root: Path, key: str) -> Path:
    """``<git dir>/verifygate/agent/<session>.json`` (``key``: ``HookPayload.state_key``)."""
    return state_dir(repo_root) / "agent" / f"{session_file_stem(key)}.json"


def load_state(path: Path) -> SessionState:
    """The saved state, or a fresh one when there is none, it cannot be read, or it was not
    written by this user's verifygate (a forged round count must not let an agent stop)."""
    from pytest_verifygate.integrity import StateFileError, is_signed, read_state_file

    try:
        raw = read_state_file(path, MAX_STATE_BYTES)  # regular, bounded, never blocks
        if raw is None:
            return SessionState()
        data = json.loads(raw.decode("utf-8"))
    except (StateFileError, ValueError, RecursionError) as exc:
        from pytest_verifygate.storage import blocked

        if not blocked(path):  # a file where a directory should be: said once, for everything
            print(f"verifygate agent-hook: ignoring unreadable state {path} ({exc}); starting "
                  "the round count again", file=sys.stderr)
        return SessionState()
    if not isinstance(data, dict):
        return SessionState()
    if not is_signed(STATE_SEAL, data):
        print(f"verifygate agent-hook: ignoring state {path}: not written by this user's "
              "verifygate (its integrity check failed); starting the round count again",
              file=sys.stderr)
        return SessionState()
    rounds = data.get("rounds")
    signature = data.get("signature")
    gates = data.get("failed_gates")
    return SessionState(
        rounds=rounds if isinstance(rounds, int) and rounds >= 0 else 0,
        signature=signature if isinstance(signature, str) else None,
        failed_gates=tuple(str(g) for g in gates) if isinstance(gates, list) else (),
    )


def save_state(path: Path, key: str, state: SessionState) -> None:
    from pytest_verifygate.integrity import signed

    write_atomic(path, json.dumps(signed(STATE_SEAL, json.loads(state.to_json(key))),
                                  indent=2) + "\n")
    _prune(path.parent)


def _prune(directory: Path) -> None:
    """Keep the most recent sessions' files; old sessions never come back."""
    def remove_session(state: Path) -> None:
        for stale in (state, state.with_suffix(".report.json")):
            with contextlib.suppress(OSError):
                stale.unlink()

    try:
        states = [p for p in directory.glob("*.json") if not p.name.endswith(".report.json")]
    except OSError:
        return
    prune_oldest(states, KEEP_SESSIONS, remove_session)
