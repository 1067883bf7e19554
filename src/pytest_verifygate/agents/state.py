"""What the agent hook remembers of a session between stops, and where: under the git
directory, else the user's state directory (the round cap must hold without the former).

PYTEST_DONT_REWRITE
"""

import contextlib
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import NamedTuple

from pytest_verifygate.state.files import (
    StateFileError,
    prune_own_files,
    read_state_file,
    remove_state_file,
    write_state,
)
from pytest_verifygate.state.integrity import is_signed, signed, user_state_dir
from pytest_verifygate.state.storage import blocker, state_dir

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


def state_path(repo_root: Path, key: str) -> Path:
    """``<git dir>/verifygate/agent/<session>.json`` (``key``: ``HookPayload.state_key``)."""
    return state_dir(repo_root) / "agent" / f"{session_file_stem(key)}.json"


def private_path(folder: str, project: Path | str, name: str) -> Path | None:
    """``<user state dir>/<folder>/<project, hashed>/<name>``: out of reach of an agent
    confined to the project. None when the user has no state directory."""
    base = user_state_dir()
    if base is None:
        return None
    tag = hashlib.sha256(str(project).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return base / folder / tag / name


def write_signed(path: Path, seal: bytes, record: dict[str, object]) -> None:
    """Write ``record`` with this user's signature, never through a planted link."""
    write_state(path, json.dumps(signed(seal, record), indent=2) + "\n")


def write_either(primary: Path | None, fallback: Path | None, seal: bytes,
                 record: dict[str, object]) -> tuple[Path | None, str]:
    """Keep ``record`` in ``primary``, else in ``fallback``: where it went, and why not
    elsewhere."""
    problems = [] if primary is not None else ["no git directory"]
    for path in (primary, fallback):
        if path is None:
            continue
        try:
            write_signed(path, seal, record)
        except OSError as exc:
            problems.append(f"cannot write {path}: {exc.strerror or exc}")
            continue
        if path == primary and fallback is not None:
            with contextlib.suppress(OSError):
                remove_state_file(fallback)  # ours, and older than the record just written
        return path, ""
    return None, "; ".join(problems)


class Rounds(NamedTuple):
    """Where a key's rounds are kept: under the git directory, else the user's state one."""

    key: str
    primary: Path | None
    fallback: Path | None

    @classmethod
    def of(cls, repo_root: Path | None, key: str, place: Path) -> "Rounds":
        return cls(key, None if repo_root is None else state_path(repo_root, key),
                   private_path("agent-rounds", place, f"{session_file_stem(key)}.json"))

    def load(self) -> SessionState:
        # A count in the fallback is the newer one: a save to the primary removes it.
        if self.fallback is not None and os.path.lexists(self.fallback):
            return load_state(self.fallback)
        return SessionState() if self.primary is None else load_state(self.primary)

    def save(self, state: SessionState) -> bool:
        """Keep ``state``; False (and why, on stderr) when it cannot be kept anywhere."""
        record: dict[str, object] = {
            "version": STATE_VERSION, "key": self.key, "rounds": state.rounds,
            "signature": state.signature, "failed_gates": list(state.failed_gates),
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        path, problem = write_either(self.primary, self.fallback, STATE_SEAL, record)
        if path is None:
            print(f"verifygate agent-hook: cannot record the session's rounds ({problem}); the "
                  "round cap cannot count this stop", file=sys.stderr)
            return False
        # Old sessions never come back: keep the newest sessions' files (each with its report).
        # Tidying up never fails a stop whose rounds were kept.
        with contextlib.suppress(OSError):
            prune_own_files(path.parent, is_state_name, KEEP_SESSIONS,
                            companions=lambda name: (name[:-len(".json")] + ".report.json",))
        return True


def load_state(path: Path) -> SessionState:
    """The saved state; a fresh one unless this user's verifygate wrote it (a forged round
    count must not let an agent stop)."""
    try:
        raw = read_state_file(path, MAX_STATE_BYTES)  # regular, bounded, never blocks
        if raw is None:
            return SessionState()
        data = json.loads(raw.decode("utf-8"))
    except (StateFileError, ValueError, RecursionError) as exc:
        if blocker(path) is None:  # a file where a directory should be: the run says so
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
