"""What the agent hook remembers of a session between stops, and where.

Per session (or subagent) key: ``<git dir>/verifygate/agent/<key>.json`` holds the round count
and the last failure signature, the last report is beside it, and the session's starting point
is under ``starts/`` (``session_start.py``); never in the work tree. Files are written
atomically; the most recent sessions' files are kept. Owns the safe file name of a key.

When the git directory cannot take the count (read-only, a file in place of
``.git/verifygate``), it is kept in the user's state directory instead
(``$XDG_STATE_HOME/verifygate/agent-rounds/<project>/``, ``Rounds``): the round cap must hold
without it, and an agent that can write the work tree cannot reach it there by accident.

PYTEST_DONT_REWRITE
"""

import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import NamedTuple

from pytest_verifygate.state.files import prune_own_files, remove_state_file, write_state
from pytest_verifygate.state.storage import state_dir

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


def fallback_state_path(place: Path, key: str) -> Path | None:
    """``<user state dir>/agent-rounds/<place>/<session>.json``, ``place`` being the project's
    root (its path hashed); None when the user has no state directory either."""
    import hashlib

    from pytest_verifygate.state.integrity import user_state_dir

    base = user_state_dir()
    if base is None:
        return None
    project = hashlib.sha256(str(place).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return base / "agent-rounds" / project / f"{session_file_stem(key)}.json"


class Rounds(NamedTuple):
    """Where a key's rounds are kept: ``primary`` (under the git directory), else
    ``fallback`` (the user's state directory). A count in the fallback is the newer one: a
    save to the primary removes it."""

    key: str
    primary: Path | None
    fallback: Path | None

    @classmethod
    def of(cls, repo_root: Path | None, key: str, place: Path) -> "Rounds":
        return cls(key, None if repo_root is None else state_path(repo_root, key),
                   fallback_state_path(place, key))

    def load(self) -> SessionState:
        if self.fallback is not None and os.path.lexists(self.fallback):
            return load_state(self.fallback)
        return SessionState() if self.primary is None else load_state(self.primary)

    def save(self, state: SessionState) -> bool:
        """Keep ``state``; False (and why, on stderr) when it cannot be kept anywhere."""
        problem = "no git directory"
        if self.primary is not None:
            try:
                save_state(self.primary, self.key, state)
            except OSError as exc:
                problem = f"cannot write {self.primary}: {exc.strerror or exc}"
            else:
                if self.fallback is not None:
                    with contextlib.suppress(OSError):
                        remove_state_file(self.fallback)  # ours, older than the count kept
                return True
        if self.fallback is not None:
            try:
                save_state(self.fallback, self.key, state)
            except OSError as exc:
                problem += f"; cannot write {self.fallback}: {exc.strerror or exc}"
            else:
                return True
        print(f"verifygate agent-hook: cannot record the session's rounds ({problem}); the "
              "round cap cannot count this stop", file=sys.stderr)
        return False


def load_state(path: Path) -> SessionState:
    """The saved state, or a fresh one when there is none, it cannot be read, or it was not
    written by this user's verifygate (a forged round count must not let an agent stop)."""
    from pytest_verifygate.state.integrity import StateFileError, is_signed, read_state_file

    try:
        raw = read_state_file(path, MAX_STATE_BYTES)  # regular, bounded, never blocks
        if raw is None:
            return SessionState()
        data = json.loads(raw.decode("utf-8"))
    except (StateFileError, ValueError, RecursionError) as exc:
        from pytest_verifygate.state.storage import blocked

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
    from pytest_verifygate.state.integrity import signed

    write_state(path, json.dumps(signed(STATE_SEAL, json.loads(state.to_json(key))),
                                 indent=2) + "\n")
    # Keep the most recent sessions' files (old sessions never come back): only files named
    # as ``state_path`` names them, each with its report.
    prune_own_files(path.parent, is_state_name, KEEP_SESSIONS,
                    companions=lambda name: (name[:-len(".json")] + ".report.json",))


def is_state_name(name: str) -> bool:
    """Whether ``name`` is a session's state file, as ``state_path`` names it."""
    stem = name[:-len(".json")]
    return (name.endswith(".json") and not stem.endswith(".report") and stem.isascii()
            and not stem.startswith(".") and not _UNSAFE.search(stem) and len(stem) <= 64)
