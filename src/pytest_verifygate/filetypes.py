"""Which files a gate takes by their kind and name, with pre-commit's meaning: ``types``,
``types_or`` and ``exclude_types`` (the tags of ``identify``, the library pre-commit uses) and
``files_regex`` / ``exclude_regex`` (pre-commit's ``files`` / ``exclude``: Python regexes
searched in the path relative to the project root).

A gate without these keys takes every file (``when_changed`` alone decides); this module is
imported only for a gate with them (``Gate.filters_files``), ``identify`` only when one names a
type.

PYTEST_DONT_REWRITE
"""

import os
import re
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from pytest_verifygate.contract.model import Gate


def files_of_gate(gate: Gate, root: Path, paths: Sequence[str],
                  deleted: Collection[str] = ()) -> tuple[str, ...]:
    """The ``paths`` (relative to ``root``) that ``gate``'s types and regexes let through, in
    order, as pre-commit's ``Classifier`` filters a hook's files.

    A path in ``deleted`` has no file left to look at: its tags are those its name gives,
    plus ``file`` (a deletion of ``a.py`` still concerns a gate with ``types = ["python"]``).
    """
    if not gate.filters_files:
        return tuple(paths)
    keep = _name_test(gate.files_regex, gate.exclude_regex)
    wanted = frozenset(gate.types), frozenset(gate.types_or), frozenset(gate.exclude_types)
    typed = any(wanted)
    kept = []
    for path in paths:
        if not keep(path):
            continue
        if typed and not _tags_match(_tags(str(root / path), path in deleted), *wanted):
            continue
        kept.append(path)
    return tuple(kept)


def describe_filter(gate: Gate) -> str:
    """The gate's file filter in its own keys' words, for reasons ("types [text]")."""
    parts = [f"{key} [{', '.join(value)}]" for key, value in (
        ("types", gate.types), ("types_or", gate.types_or),
        ("exclude_types", gate.exclude_types)) if value]
    parts += [f"{key} {value!r}" for key, value in (
        ("files_regex", gate.files_regex), ("exclude_regex", gate.exclude_regex)) if value]
    return ", ".join(parts)


def known_tags() -> frozenset[str]:
    """Every tag ``identify`` knows (what ``types`` may name)."""
    from identify.identify import ALL_TAGS

    return frozenset(ALL_TAGS)


def _tags_match(tags: frozenset[str], types: frozenset[str], types_or: frozenset[str],
                exclude_types: frozenset[str]) -> bool:
    return tags >= types and (not types_or or bool(tags & types_or)) and not tags & exclude_types


def _tags(path: str, deleted: bool) -> frozenset[str]:
    from identify.identify import tags_from_filename, tags_from_path

    if deleted or not os.path.lexists(path):
        return frozenset(tags_from_filename(os.path.basename(path)) | {"file"})
    return frozenset(tags_from_path(path))


def _name_test(files_regex: str | None, exclude_regex: str | None) -> Callable[[str], bool]:
    include = _finder(files_regex or "")
    exclude = _finder(exclude_regex) if exclude_regex else None
    return lambda path: include(path) and (exclude is None or not exclude(path))


def _finder(pattern: str) -> Callable[[str], bool]:
    r"""Whether ``pattern`` (a Python regex) is found in a path, in time linear in the path's
    length wherever that keeps Python's meaning.

    Python's ``re`` backtracks: ``^(a+)+$`` takes minutes on a name of 40 characters. re2
    (google-re2, as ``patterns.py`` uses it) is linear, and means what ``re`` means for an
    ASCII pattern it accepts (no lookaround, backreference or ``\Z``), but for POSIX classes
    (``[[:alpha:]]``, a set in Python) and ``{,n}`` (literal in re2), on a printable ASCII
    path (``\w``, ``\d``, ``\s`` and case folding are ASCII's there, and ``$`` has no
    newline to stop before); on any other path without a newline, when the pattern has no
    class escape (``\w``, ``\b``, ``\d``, ``\s`` and their negations) and no
    case folding, each character matched as one (a lone surrogate, which re2 cannot take, as
    U+FFFD, one for one). Anything else keeps Python's ``re``, with its costs."""
    compiled = re.compile(pattern)
    python = compiled.search
    fast = _re2_search(pattern)
    if fast is None:
        return lambda path: python(path) is not None
    any_text = not (compiled.flags & re.IGNORECASE or _class_escape(pattern))

    def find(path: str) -> bool:
        if path.isascii() and path.isprintable():
            return fast(path) is not None
        if any_text and "\n" not in path:
            return fast(path.translate(_SURROGATES)) is not None
        return python(path) is not None

    return find


_SURROGATES = {code: "\ufffd" for code in range(0xD800, 0xE000)}


def _class_escape(pattern: str) -> bool:
    r"""Whether ``pattern`` holds ``\w``, ``\b``, ``\d`` or ``\s`` (or a negation), which
    mean Unicode's classes in Python and ASCII's in re2."""
    escaped = False
    for char in pattern:
        if escaped and char in "wWbBdDsS":
            return True
        escaped = not escaped and char == "\\"
    return False


def _re2_search(pattern: str) -> Callable[[str], object] | None:
    if not pattern.isascii() or "[:" in pattern or "{," in pattern:
        return None
    try:
        import re2
    except ImportError:
        return None
    options = re2.Options()
    options.log_errors = False  # a pattern it does not take is Python's, not an error
    try:
        search: Callable[[str], object] = re2.compile(pattern, options).search
    except re2.error:
        return None
    return search
