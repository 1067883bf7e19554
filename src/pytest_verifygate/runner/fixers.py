"""Catching a gate that changes the files it was given (a formatter, ``--fix``), which fails it
as pre-commit fails such a hook. A stamp is a file's size, mtime and inode (``os.lstat``), so a
rewrite with the same bytes counts, and so does a file that appears or disappears.

PYTEST_DONT_REWRITE
"""

import os
from collections.abc import Sequence
from pathlib import Path

Stamps = dict[str, tuple[int, int, int] | None]


def stamps(root: Path | None, files: Sequence[str]) -> Stamps:
    """Each file's stamp (None: missing), keyed by its path relative to ``root``."""
    if root is None:
        return {}
    return {path: _stamp(root / path) for path in files}


def modified(root: Path | None, before: Stamps) -> tuple[str, ...]:
    """The files whose stamp is not what it was."""
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
