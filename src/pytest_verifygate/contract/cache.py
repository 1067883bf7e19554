"""The parsed-contract cache: a contract file's parsed data, kept for the next run.

Parsing TOML means importing tomllib (with datetime and string): a few milliseconds of every
commit's start-up for a file that rarely changes. An entry is keyed by the file's full text
and the parser that read it, so it cannot go stale: the same text parses to the same data.
An entry also carries pathspec's translations of the contract's patterns (``patterns.py``),
keyed by the installed pathspec, so that a run imports neither tomllib nor pathspec.

The cache is ``<git dir>/verifygate/contracts.marshal``, in Python's ``marshal`` format (the
one of ``.pyc`` files): reading it needs no import at all, where ``json`` would cost more than
the lookup saves. It is private to this repository, this Python and this version of
pytest-verifygate, and only an optimisation: a cache that cannot be read or written is
ignored, and validation still runs on the data every time. Outside a git repository there is
no cache: the only place left would be a temp directory, and a parse is what decides which
commands run.
"""

import contextlib
import marshal
import sys
from pathlib import Path
from typing import Any, NamedTuple

from pytest_verifygate import __version__
from pytest_verifygate.patterns import Translation
from pytest_verifygate.storage import git_state_dir, write_atomic

# Entries kept, most recently stored first: one per contract file a repository's runs name.
MAX_ENTRIES = 8
FILE_NAME = "contracts.marshal"
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
    path = _cache_path(repo_root)
    if path is None:
        return {}
    try:
        with open(path, "rb") as handle:
            content = marshal.load(handle)
    except (OSError, EOFError, ValueError, TypeError):  # missing, truncated or foreign
        return {}
    if not (isinstance(content, tuple) and len(content) == 2 and content[0] == FORMAT
            and isinstance(content[1], dict)):
        return {}
    entries: dict[str, Any] = content[1]
    return entries


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
    path = _cache_path(repo_root)
    if path is not None:
        with contextlib.suppress(OSError):  # best effort: the next run parses again
            write_atomic(path, payload)


def _is_translation(item: object) -> bool:
    return (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)
            and (item[1] is None or isinstance(item[1], bool)))


def _cache_path(repo_root: Path) -> Path | None:
    found = git_state_dir(repo_root)
    return None if found is None else found / FILE_NAME
