"""The parsed-contract cache: a contract file's parsed data, kept for the next run.

Parsing TOML means importing tomllib (with datetime and string): a few milliseconds of every
commit's start-up for a file that rarely changes. An entry is keyed by the file's full text
and the parser that read it, so it cannot go stale: the same text parses to the same data.
An entry also carries pathspec's translations of the contract's patterns (``patterns.py``),
keyed by the installed pathspec, so that a run imports neither tomllib nor pathspec.

The parse decides which commands run, so the cache lives where only this user can write: the
private state directory (``integrity.user_state_dir``: ``~/.local/state/verifygate``, 0700),
one file per repository (``contracts/<name>-<checksum of its path>.marshal``); never under
``.git``, where anything that can write the work tree could plant a parse whose text matches
and whose commands do not. Sealing it with a MAC instead would import hashlib (about 3 ms,
near a tenth of a commit's run); the location is the reason to trust it, at no cost. A
checksum over the data catches a damaged file before ``marshal`` reads it (a few damaged bytes
can ask ``marshal`` for gigabytes); it is computed with builtins only (``zlib`` is a shared
library to load: more than the whole lookup). The file is read like every state file
(``integrity.read_state_file``: regular, bounded, non-blocking).

The file is in Python's ``marshal`` format (the one of ``.pyc`` files): reading it needs no
import, where ``json`` would cost more than the lookup saves. It is private to this Python and
this version of pytest-verifygate, and only an optimisation: a cache that cannot be read or
written is ignored, and validation still runs on the data every time. Outside a git
repository there is no cache.

PYTEST_DONT_REWRITE
"""

import contextlib
import marshal
import os
import re
import sys
from pathlib import Path
from typing import Any, NamedTuple

from pytest_verifygate import __version__
from pytest_verifygate.integrity import StateFileError, read_state_file, user_state_dir
from pytest_verifygate.patterns import Translation
from pytest_verifygate.storage import git_state_dir, is_file_name_safe, prune_own_files, write_atomic

# Entries kept, most recently stored first: one per contract file a repository's runs name.
MAX_ENTRIES = 8
# Repositories kept (one file each), the most recently stored.
MAX_REPOSITORIES = 64
# A file larger than this is neither read nor written (a contract of 10,000 gates is ~2 MiB).
MAX_FILE_BYTES = 16 << 20
DIRECTORY = "contracts"
# Where the cache was before it moved to the private directory: removed when seen.
LEGACY_FILE_NAME = "contracts.marshal"
_MAGIC = b"verifygate-contracts-1\n"
_CHECK_BYTES = 4
# The largest prime below 2**30: the remainder fits one digit of Python's integers, the
# fastest division there is. A damaged file passes with a chance of one in a billion.
_CHECK_PRIME = 1_073_741_789
# Written with the file: a cache from another format, Python or pytest-verifygate (whose
# translations of patterns may differ) is not read.
FORMAT = f"verifygate {__version__} contract cache 1, Python {sys.version.split()[0]}"


class CachedParse(NamedTuple):
    """What an earlier run parsed from the same text."""

    data: Any
    # pathspec's translations of the contract's patterns; empty when the installed pathspec
    # is not the one that made them.
    translations: dict[str, Translation]


def read(repo_root: Path) -> dict[str, Any]:
    """The cached entries of this repository (none outside git, or when unreadable)."""
    path = cache_path(repo_root)
    if path is None:
        return {}
    try:
        content = read_state_file(path, MAX_FILE_BYTES)
    except StateFileError:
        return {}  # replaced by the next store
    payload = _checked(content) if content is not None else None
    if payload is None:
        return {}
    try:
        data = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):  # foreign, or from another Python
        return {}
    if not (isinstance(data, tuple) and len(data) == 2 and data[0] == FORMAT
            and isinstance(data[1], dict)):
        return {}
    entries: dict[str, Any] = data[1]
    return entries


def checksum(data: bytes) -> int:
    """A checksum of ``data`` that needs no import: its bytes as a number, modulo a prime."""
    return int.from_bytes(data, "little") % _CHECK_PRIME


def _checked(content: bytes) -> bytes | None:
    """The marshal data of a cache file, if its checksum holds."""
    header = len(_MAGIC) + _CHECK_BYTES
    if not content.startswith(_MAGIC) or len(content) < header:
        return None
    payload = content[header:]
    expected = int.from_bytes(content[len(_MAGIC):header], "big")
    return payload if checksum(payload) == expected else None


def lookup(entries: dict[str, Any], contract_path: Path, text: str, pathspec: str | None
           ) -> CachedParse | None:
    """The cached parse of ``text`` for this contract file, if an earlier run stored one.

    Entries are checked here, where they come in: a damaged one is not used.
    """
    entry = entries.get(str(contract_path))
    if not isinstance(entry, dict) or entry.get("text") != text:
        return None
    if not isinstance(entry.get("data"), dict):
        return None  # every format parses to a table; anything else is not ours to trust
    translations: dict[str, Translation] = {}
    stored = entry.get("translations")
    if pathspec is not None and entry.get("pathspec") == pathspec and isinstance(stored, dict):
        translations = {pattern: Translation(*item) for pattern, item in stored.items()
                        if _is_translation(item)}
    return CachedParse(entry["data"], translations)


def store(repo_root: Path, entries: dict[str, Any], contract_path: Path, text: str, data: Any,
          pathspec: str | None, translations: dict[str, Translation]) -> None:
    """Keep this parse for the next run (best effort: any failure leaves the cache as it was).

    ``entries`` is what ``read`` returned at the start of this load.
    """
    others = [(path, entry) for path, entry in entries.items() if path != str(contract_path)]
    entry = {"text": text, "data": data, "pathspec": pathspec,
             "translations": {pattern: list(t) for pattern, t in translations.items()}}
    kept = dict([(str(contract_path), entry), *others[:MAX_ENTRIES - 1]])
    try:
        # marshal has no form for TOML's dates and times: such a contract is not cached.
        payload = marshal.dumps((FORMAT, kept))
    except ValueError:
        return
    path = cache_path(repo_root)
    if path is None or len(payload) > MAX_FILE_BYTES - len(_MAGIC) - _CHECK_BYTES:
        return
    with contextlib.suppress(OSError):  # best effort: the next run parses again
        with contextlib.suppress(FileExistsError):
            os.mkdir(path.parent, 0o700)
        write_atomic(path, _MAGIC + checksum(payload).to_bytes(_CHECK_BYTES, "big") + payload)
        prune_own_files(path.parent, lambda name: name.endswith(".marshal"), MAX_REPOSITORIES)
    state = git_state_dir(repo_root)
    if state is not None:  # an old, untrusted cache: never read, removed
        with contextlib.suppress(OSError):
            os.unlink(state / LEGACY_FILE_NAME)


def _is_translation(item: object) -> bool:
    return (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)
            and (item[1] is None or isinstance(item[1], bool)))


def cache_path(repo_root: Path) -> Path | None:
    """This repository's cache file in the private state directory; None outside git, or
    when there is no private directory."""
    if git_state_dir(repo_root) is None:
        return None
    directory = user_state_dir()
    if directory is None:
        return None
    name = repo_root.name
    if not is_file_name_safe(name):
        name = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    name = name[:40]
    return directory / DIRECTORY / f"{name}-{checksum(os.fsencode(repo_root)):08x}.marshal"
