"""Sealed state files: whatever can write the work tree can write ``.git``, so a file that
decides whether a gate runs or an agent may stop carries a BLAKE2b MAC keyed by a per-user
secret outside every repository; without the key, sealed files are neither written nor read.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import os
import time
from pathlib import Path

from pytest_verifygate.state.files import (
    StateFileError,
    read_bounded,
    read_state_file,
)
from pytest_verifygate.state.storage import blocker, user_state_dir

KEY_BYTES = 32
MAC_BYTES = 32
_SEAL = b"verifygate-sealed-1 "  # then the MAC in hex, a newline, and the data


def user_key() -> bytes | None:
    """This user's key for sealing state files, made on first use; None when unusable."""
    directory = user_state_dir()
    return None if directory is None else _key_in(str(directory))


@functools.lru_cache(maxsize=4)
def _key_in(directory: str) -> bytes | None:
    path = os.path.join(directory, "key")
    key = _read_key(path)
    if key is not None:
        return key
    fresh = os.urandom(KEY_BYTES)
    temp = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(fresh)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, path)  # never replaces a key another run made meanwhile
        except FileExistsError:
            existing = _read_key(path)
            if existing is not None:
                return existing
            os.replace(temp, path)  # a damaged or exposed key: a fresh one replaces it
        except OSError:  # a file system without hard links: a rename, racing at worst once
            os.replace(temp, path)
        return fresh
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _read_key(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        # Only a key nobody else could have read or planted is a secret.
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None
        key = read_bounded(fd, KEY_BYTES)
    except (OSError, StateFileError):
        return None
    finally:
        os.close(fd)
    return key if len(key) == KEY_BYTES else None


def _mac(key: bytes, purpose: bytes, data: bytes) -> bytes:
    # ``person`` separates purposes: a sealed cache entry is never a valid agent state.
    return hashlib.blake2b(data, key=key, person=purpose[:16], digest_size=MAC_BYTES).digest()


def seal(purpose: bytes, data: bytes) -> bytes | None:
    """``data`` with a MAC that only this user's key makes; None when there is no key."""
    key = user_key()
    if key is None:
        return None
    return _SEAL + _mac(key, purpose, data).hex().encode() + b"\n" + data


def unseal(purpose: bytes, sealed: bytes) -> bytes | None:
    """The data ``seal`` sealed for ``purpose`` with this user's key; None for anything else."""
    key = user_key()
    header, newline, data = sealed.partition(b"\n")
    if key is None or not newline or not header.startswith(_SEAL):
        return None
    expected = _mac(key, purpose, data).hex().encode()
    return data if hmac.compare_digest(header[len(_SEAL):], expected) else None


def read_sealed(path: Path, purpose: bytes, limit: int, warnings: list[str]) -> bytes | None:
    """The sealed data in ``path``; None if missing, or with a warning if not to be believed."""
    try:
        sealed = read_state_file(path, limit + len(_SEAL) + 2 * MAC_BYTES + 1)
    except StateFileError as exc:
        # A file in place of its directory: one warning naming it stands for every file.
        warnings.append(blocker(path) or f"warning: ignoring {path}: {exc}")
        return None
    if sealed is None:
        return None
    data = unseal(purpose, sealed)
    if data is None and user_key() is not None:
        warnings.append(f"warning: ignoring {path}: not written by this user's verifygate "
                        "(its integrity check failed); it will be replaced")
    return data


def signed(purpose: bytes, record: dict[str, object]) -> dict[str, object]:
    """``record`` (a JSON object) with the ``"mac"`` of this user's key, if there is one."""
    key = user_key()
    return record if key is None else {**_body(record), "mac": _record_mac(key, purpose, record)}


def is_signed(purpose: bytes, record: dict[str, object]) -> bool:
    """Whether ``record`` carries the ``"mac"`` that ``signed`` gave it; without a key, a
    record without a MAC is taken as it is."""
    key = user_key()
    if key is None:
        return "mac" not in record
    claimed = record.get("mac")
    if not isinstance(claimed, str):
        return False
    expected = _record_mac(key, purpose, record)
    return hmac.compare_digest(claimed.encode("utf-8", "surrogatepass"), expected.encode())


def _body(record: dict[str, object]) -> dict[str, object]:
    return {name: value for name, value in record.items() if name != "mac"}


def _record_mac(key: bytes, purpose: bytes, record: dict[str, object]) -> str:
    canonical = json.dumps(_body(record), sort_keys=True, separators=(",", ":"),
                           ensure_ascii=True)
    return _mac(key, purpose, canonical.encode()).hex()
