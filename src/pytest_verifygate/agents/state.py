"""What the agent hook remembers of a session between stops (its rounds), in the user's
private state directory, where an agent confined to the workspace cannot write.

PYTEST_DONT_REWRITE
"""

import contextlib
import hashlib
import json
import re
import sys
import time
from pathlib import Path
from typing import NamedTuple

from pytest_verifygate.state.files import (
    StateFileError,
    prune_own_files,
    read_state_file,
    write_state,
)
from pytest_verifygate.state.storage import private_dir

STATE_VERSION = 1
MAX_STATE_BYTES = 64 * 1024
KEEP_SESSIONS = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class SessionState(NamedTuple):
    """What one session's hook remembers between stops."""

    rounds: int = 0
    signature: str | None = None
    failed_gates: tuple[str, ...] = ()


def session_file_stem(key: str) -> str:
    """A file name for a session key: safe characters only, unique for distinct keys."""
    safe = _UNSAFE.sub("_", key).lstrip(".")
    # ".report" would collide with the session's report file (``<stem>.report.json``).
    if safe != key or len(safe) > 64 or not safe or safe.endswith(".report"):
        tag = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        safe = f"{safe[:48]}-{tag}" if safe else tag
    return safe


def is_state_name(name: str) -> bool:
    """Whether ``name`` is a session's file, as ``session_file_stem`` names it."""
    stem = name[:-len(".json")]
    return (name.endswith(".json") and not stem.endswith(".report") and stem.isascii()
            and not stem.startswith(".") and not _UNSAFE.search(stem) and len(stem) <= 64)


def private_path(folder: str, project: Path | str, name: str) -> Path | None:
    """``name`` in the private directory of ``project`` (``storage.private_dir``)."""
    directory = private_dir(folder, project)
    return None if directory is None else directory / name


class Rounds(NamedTuple):
    """Where a key's rounds are kept (``path`` None: nowhere)."""

    key: str
    path: Path | None

    @classmethod
    def of(cls, key: str, place: Path) -> "Rounds":
        return cls(key, private_path("agent-rounds", place, f"{session_file_stem(key)}.json"))

    def load(self) -> SessionState:
        return SessionState() if self.path is None else load_state(self.path)

    def save(self, state: SessionState) -> bool:
        """Keep ``state``; False (and why, on stderr) when it cannot be kept."""
        record: dict[str, object] = {
            "version": STATE_VERSION, "key": self.key, "rounds": state.rounds,
            "signature": state.signature, "failed_gates": list(state.failed_gates),
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        try:
            if self.path is None:
                raise OSError("no private state directory (set HOME or XDG_STATE_HOME)")
            write_state(self.path, json.dumps(record, indent=2) + "\n")
        except OSError as exc:
            print(f"verifygate agent-hook: cannot record the session's rounds "
                  f"({exc.strerror or exc}); the round cap cannot count this stop",
                  file=sys.stderr)
            return False
        # Old sessions never come back: keep the newest sessions' files (each with its report).
        # Tidying up never fails a stop whose rounds were kept.
        with contextlib.suppress(OSError):
            prune_own_files(self.path.parent, is_state_name, KEEP_SESSIONS,
                            companions=lambda name: (name[:-len(".json")] + ".report.json",))
        return True


def load_state(path: Path) -> SessionState:
    """The saved state; a fresh one when it cannot be read."""
    try:
        raw = read_state_file(path, MAX_STATE_BYTES)  # regular, bounded, never blocks
        if raw is None:
            return SessionState()
        data = json.loads(raw.decode("utf-8"))
    except (StateFileError, ValueError, RecursionError) as exc:
        print(f"verifygate agent-hook: ignoring unreadable state {path} ({exc}); starting "
              "the round count again", file=sys.stderr)
        return SessionState()
    if not isinstance(data, dict):
        return SessionState()
    rounds = data.get("rounds")
    signature = data.get("signature")
    gates = data.get("failed_gates")
    return SessionState(
        rounds=rounds if isinstance(rounds, int) and rounds >= 0 else 0,
        signature=signature if isinstance(signature, str) else None,
        failed_gates=tuple(str(g) for g in gates) if isinstance(gates, list) else (),
    )
