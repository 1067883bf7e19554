"""A gate that changes the files it was given fails, as in pre-commit; a stamp (``lstat``'s size,
mtime and inode) also catches a rewrite of the same bytes.

PYTEST_DONT_REWRITE
"""

import os
from collections.abc import Sequence
from pathlib import Path

Stamps = dict[str, tuple[int, int, int] | None]


def stamps(root: Path | None, files: Sequence[str]) -> Stamps:
    if root is None:
        return {}
    return {path: _stamp(root / path) for path in files}


def modified(root: Path | None, before: Stamps) -> tuple[str, ...]:
    if root is None:
        return ()
    return tuple(path for path, stamp in before.items() if _stamp(root / path) != stamp)


def describe(paths: Sequence[str], limit: int = 20) -> str:
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return f"files were modified by this gate: {', '.join(paths[:limit])}{more}"


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        status = os.lstat(path)
    except OSError:
        return None
    return status.st_size, status.st_mtime_ns, status.st_ino
