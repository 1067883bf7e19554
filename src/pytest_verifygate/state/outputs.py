"""The reports the package writes in the work tree, which are never changes: this run's, and
earlier runs' while they stay as written (their size and SHA-256 in a record in the user's
private state directory: a forged record would hide real changes).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from pytest_verifygate.state.files import StateFileError, read_state_file, write_state
from pytest_verifygate.state.storage import private_dir, read_user_file, repository_key

OUTPUTS_RECORD = "outputs"
KEEP_OUTPUTS = 50
MAX_RECORD_BYTES = KEEP_OUTPUTS * 4200
# A larger output is not remembered: it stays a change (reading it back would cost too much).
MAX_OUTPUT_BYTES = 64 << 20


def own_files(root: Path, outputs: Iterable[str | os.PathLike[str]], cwd: Path,
              warnings: list[str]) -> set[str]:
    """The package's own files under ``root``: this run's ``outputs`` (relative to ``cwd``) and
    earlier runs' unedited ones."""
    found = {_under_root(root, cwd / path) for path in outputs} | _remembered(root, warnings)
    return {path for path in found if path is not None}


def in_git_dir(path: str) -> bool:
    return path.startswith(".git/") or "/.git/" in path


def remember_outputs(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Remember files the package just wrote, best effort; return the record's warnings."""
    warnings: list[str] = []
    by_record: dict[Path, list[str]] = {}
    for path in paths:
        absolute = os.path.abspath(path)
        record = record_path(Path(absolute).parent)
        if record is not None:
            by_record.setdefault(record, []).append(absolute)
    for record, written in by_record.items():
        entries = _read_record(record, warnings)
        for path in written:
            entries.pop(path, None)  # re-inserted last: the newest are kept
            stamp = _content_stamp(path)
            if stamp is not None:
                entries[path] = stamp
        kept = list(entries.items())[-KEEP_OUTPUTS:]
        data = b"".join(f"{size} {digest} ".encode() + os.fsencode(path) + b"\0"
                        for path, (size, digest) in kept)
        if len(data) <= MAX_RECORD_BYTES:
            with contextlib.suppress(OSError):
                write_state(record, data)
    return warnings


def _under_root(root: Path, path: Path) -> str | None:
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if relative == ".." or relative.startswith("../") or os.path.isabs(relative):
        return None
    return Path(relative).as_posix()


def record_path(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        if os.path.lexists(directory / ".git"):
            private = private_dir("outputs", repository_key(directory))
            return None if private is None else private / OUTPUTS_RECORD
    return None


def _content_stamp(path: str, limit: int = MAX_OUTPUT_BYTES) -> tuple[int, str] | None:
    """The size and SHA-256 of the regular file ``path`` up to ``limit`` bytes, else None."""
    data = read_user_file(path, limit)
    return None if data is None else (len(data), hashlib.sha256(data).hexdigest())


def _read_record(record: Path, warnings: list[str]) -> dict[str, tuple[int, str]]:
    """The record's absolute paths, each with the size and SHA-256 of what was written."""
    try:
        data = read_state_file(record, MAX_RECORD_BYTES)
    except StateFileError as exc:
        warnings.append(f"warning: ignoring {record}: {exc}")
        return {}
    if data is None:
        return {}
    entries: dict[str, tuple[int, str]] = {}
    for line in data.split(b"\0"):
        size, _, rest = line.partition(b" ")
        digest, _, path = rest.partition(b" ")
        if size.isdigit() and len(digest) == 64 and path:
            entries[os.fsdecode(path)] = (int(size), digest.decode("ascii", "replace"))
    return entries


def _remembered(root: Path, warnings: list[str]) -> set[str | None]:
    """Outputs of earlier runs under ``root`` that are still byte for byte as written."""
    record = record_path(root.absolute())
    if record is None:
        return set()
    found: set[str | None] = set()
    for path, (size, digest) in _read_record(record, warnings).items():
        relative = _under_root(root, Path(path))
        if relative is not None and _content_stamp(path, size) == (size, digest):
            found.add(relative)
    return found
