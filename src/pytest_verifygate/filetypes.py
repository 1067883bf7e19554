"""Which files a gate takes by kind and name, with pre-commit's meaning: ``types``, ``types_or``
and ``exclude_types`` (``identify``'s tags), ``files_regex`` and ``exclude_regex`` (Python regexes
searched in the path relative to the project root).

PYTEST_DONT_REWRITE
"""

import os
import re
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Protocol


class FileFilter(Protocol):
    """A gate's keys that pick files by kind and name (``contract.Gate`` has them)."""

    @property
    def types(self) -> tuple[str, ...]: ...

    @property
    def types_or(self) -> tuple[str, ...]: ...

    @property
    def exclude_types(self) -> tuple[str, ...]: ...

    @property
    def files_regex(self) -> str | None: ...

    @property
    def exclude_regex(self) -> str | None: ...

    @property
    def filters_files(self) -> bool: ...


def files_of_gate(gate: FileFilter, root: Path, paths: Sequence[str],
                  deleted: Collection[str] = (),
                  tags: dict[str, frozenset[str]] | None = None) -> tuple[str, ...]:
    """The ``paths`` (relative to ``root``) that ``gate``'s types and regexes let through, in
    order; a path in ``deleted`` has the tags its name gives, plus ``file``. ``tags``: the
    tags found so far, for the gates of one plan (each file is read once)."""
    if not gate.filters_files:
        return tuple(paths)
    include = _finder(gate.files_regex or "")
    exclude = _finder(gate.exclude_regex) if gate.exclude_regex else None
    wanted = frozenset(gate.types), frozenset(gate.types_or), frozenset(gate.exclude_types)
    typed = any(wanted)
    tags = {} if tags is None else tags

    def tagged(path: str) -> frozenset[str]:
        if path not in tags:
            tags[path] = _tags(str(root / path), path in deleted)
        return tags[path]

    return tuple(path for path in paths if include(path)
                 and not (exclude is not None and exclude(path))
                 and (not typed or _tags_match(tagged(path), *wanted)))


def describe_filter(gate: FileFilter) -> str:
    """The gate's file filter in its own keys' words ("types [text]")."""
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


def _finder(pattern: str) -> Callable[[str], bool]:
    r"""Whether ``pattern`` (a Python regex) is found in a path, through google-re2 (linear
    time: Python's ``re`` takes minutes on ``^(a+)+$``) wherever re2 means what ``re`` means.

    That is an ASCII pattern re2 accepts, without POSIX classes or ``{,n}``, on a printable
    ASCII path; or on a path without a newline (a lone surrogate as U+FFFD), when the pattern
    has no class escape (``\w``, ``\b``, ``\d``, ``\s``) and no case folding."""
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
    r"""Whether ``pattern`` holds ``\w``, ``\b``, ``\d`` or ``\s`` (or a negation): Unicode's
    in Python, ASCII's in re2."""
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
