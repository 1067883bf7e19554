"""Gitignore-style patterns (``when_changed``, ``when_changed_all``, ``inputs``) without
importing pathspec on every run.

pathspec stays the authority on what a pattern means: its ``GitIgnoreSpec`` translates each
pattern into a regular expression and an include/exclude flag. Importing pathspec costs about
15 ms, more than the rest of a commit's run, so this module has its own matcher (``Matcher``)
that applies those translations by ``GitIgnoreSpec``'s own rules, and keeps the translations
in a table that a persisted cache can seed (``remember``), keyed by ``pathspec_identity``.
pathspec is imported only to translate a pattern the table does not hold.

Everything this module asks of pathspec is in ``_translate``, through its public API only
(``GitIgnoreSpec.from_lines``, the spec's ``patterns``, each pattern's ``regex`` and
``include``). The matching rules are a copy of pathspec's, so tests/test_patterns.py compares
``Matcher`` with ``GitIgnoreSpec.match_file`` on many patterns and paths: a pathspec whose
meaning changes fails there, not silently in a user's selection.

PYTEST_DONT_REWRITE
"""

import functools
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

# Our name for the group that marks a match "as a directory" (the "/" after a directory name
# in the path). pathspec's own name for it is private, so ``_translate`` renames it.
DIR_MARK = "vg_dir"
DIR_MARK_GROUP = f"(?P<{DIR_MARK}>/)"
# The separators pathspec's GitIgnoreSpec.match_file turns into "/": none on POSIX.
_SEPARATORS = tuple(sep for sep in (os.sep, os.altsep) if sep and sep != "/")


class Translation(NamedTuple):
    """pathspec's meaning of one pattern: a regex searched in a normalised path, and whether a
    match includes (True) or excludes (False) it. ``include`` None is a no-op (a blank line, a
    comment, a range Git discards), whose ``regex`` is empty and never used.

    JSON-friendly: ``Translation(*json.loads(json.dumps(t)))`` is ``t``.
    """

    regex: str
    include: bool | None


class PatternError(ValueError):
    """A pattern that pathspec rejects ("!", a trailing backslash, "[z-a]", ...)."""


_table: dict[str, Translation] = {}


def translations(patterns: Iterable[str]) -> dict[str, Translation]:
    """Each pattern's translation: remembered, else computed by pathspec and remembered.

    Raises ``PatternError`` for an invalid pattern.
    """
    found: dict[str, Translation] = {}
    for pattern in patterns:
        translation = _table.get(pattern)
        if translation is None:
            translation = _table[pattern] = _translate(pattern)
        found[pattern] = translation
    return found


def _translate(pattern: str) -> Translation:
    """pathspec's translation of one pattern: the one place that uses pathspec."""
    # Imported here: a run whose translations were remembered never pays for pathspec's import.
    from pathspec import GitIgnoreSpec

    try:
        compiled = GitIgnoreSpec.from_lines([pattern]).patterns
    except (ValueError, re.error) as error:
        raise PatternError(f"{pattern!r} is not a valid gitignore-style pattern: {error}"
                           ) from error
    if len(compiled) > 1:
        # One line has always been one pattern; a pathspec that splits it needs this module
        # updated, not half of it used.
        raise RuntimeError(f"pathspec translated {pattern!r} into {len(compiled)} patterns")
    # from_lines skips an empty line altogether: that is a no-op too.
    if not compiled or compiled[0].include is None or compiled[0].regex is None:
        return Translation("", None)
    source = compiled[0].regex.pattern
    if not isinstance(source, str):  # pragma: no cover - str patterns give str regexes
        raise TypeError(f"pathspec translated {pattern!r} to {source!r}")
    # pathspec marks the "/" after a directory's name with a named group, whose name is
    # private: it is found by its shape (a named group capturing just "/", which a user's glob
    # never produces, since there "/" only separates segments) and given ours.
    regex = re.sub(r"\(\?P<\w+>/\)", lambda _: DIR_MARK_GROUP, source)
    if set(re.compile(regex).groupindex) - {DIR_MARK}:
        # A pathspec whose regexes name other groups needs this module updated, not guessed.
        raise RuntimeError(f"unexpected named group in pathspec's regex {source!r}")
    return Translation(regex, compiled[0].include)


def remember(table: Mapping[str, Translation]) -> None:
    """Seed the translations table (from a cache made with the same ``pathspec_identity``).

    The cache checks its entries' types; a regex that still does not compile is translated
    again when a matcher needs it.
    """
    _table.update(table)


def pathspec_identity() -> str | None:
    """The installed pathspec, cheaply and without importing it (None: not installed).

    The path of its ``__init__.py``, with that file's and its directory's modification time
    and size: an upgrade rewrites the package, so translations keyed by this are recomputed.
    """
    spec = _find_spec("pathspec")
    origin = getattr(spec, "origin", None)
    if not origin:
        return None
    try:
        file = os.stat(origin)
        directory = os.stat(os.path.dirname(origin))
    except OSError:
        return None
    return (f"{origin}:{file.st_mtime_ns}:{file.st_size}"
            f":{directory.st_mtime_ns}:{directory.st_size}")


def _find_spec(name: str) -> object:
    # importlib.util.find_spec without importing importlib.util (and contextlib): for a
    # top-level name, ask the import system's finders; none of them executes the package.
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__spec__", None)
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        spec = find_spec(name, None) if find_spec is not None else None
        if spec is not None:
            return spec
    return None


class Matcher:
    """A gitignore-style pattern list, matched as ``GitIgnoreSpec`` matches it."""

    def __init__(self, translated: Sequence[Translation]) -> None:
        rules = [t for t in translated if t.include is not None]  # no-ops never match
        # The regex sources of the include patterns: a path matches the list only if it
        # matches one of these (what a prefilter can test first).
        self.include_regexes: tuple[str, ...] = tuple(t.regex for t in rules if t.include)
        # Last pattern first, as pathspec's simple backend walks them.
        compiled = [(re.compile(t.regex), bool(t.include)) for t in reversed(rules)]
        self._rules = [(regex.search, include, DIR_MARK in regex.groupindex)
                       for regex, include in compiled]

    def match_file(self, path: str) -> bool:
        """Whether the list matches ``path`` (a POSIX path relative to the root)."""
        file = _normalize(path)
        # SimpleGiBackend.match_file, GitIgnoreSpec's default, walking the patterns last to
        # first: the last pattern that matches the path as a file wins; failing that, the last
        # one that matches it as under a directory (its DIR_MARK group caught the "/" after a
        # parent's name). Unlike git, a later include directory pattern does not outrank an
        # earlier exclude file pattern here (pathspec issue #134); we agree with pathspec.
        as_directory: bool | None = None
        for search, include, has_mark in self._rules:
            match = search(file)
            if match is None:
                continue
            if not (has_mark and match.group(DIR_MARK)):
                return include
            if as_directory is None:
                as_directory = include
        return bool(as_directory)

    def match_files(self, paths: Iterable[str]) -> Iterator[str]:
        """The paths the list matches, in order, as given."""
        for path in paths:
            if self.match_file(path):
                yield path


def matcher(patterns: Sequence[str]) -> Matcher:
    """The matcher of ``patterns``, built once per distinct list."""
    return _matcher(tuple(patterns))


@functools.lru_cache(maxsize=1024)
def _matcher(patterns: tuple[str, ...]) -> Matcher:
    table = translations(patterns)
    try:
        return Matcher([table[pattern] for pattern in patterns])
    except re.error:
        # Only a remembered translation can fail to compile (pathspec's own always do): it
        # came from a damaged cache, so ask pathspec again.
        for pattern in patterns:
            _table.pop(pattern, None)
        table = translations(patterns)
        return Matcher([table[pattern] for pattern in patterns])


def _normalize(path: str) -> str:
    # As pathspec normalises a path before matching: native separators to "/", then one
    # leading "/" or "./" dropped.
    for sep in _SEPARATORS:
        path = path.replace(sep, "/")
    if path.startswith("/"):
        return path[1:]
    if path.startswith("./"):
        return path[2:]
    return path
