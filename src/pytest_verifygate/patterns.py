"""Gitignore-style patterns (``when_changed``, ``when_changed_all``, ``inputs``): what a
contract's pattern may be (``check_pattern``), and the files a list of patterns matches, with
pathspec's ``GitIgnoreSpec`` and google-re2 as its engine where that is installed.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

# Bounds on one pattern. Python's ``re`` (pathspec without google-re2) takes time polynomial in
# a path's length, of a degree that grows with the wildcards a failed match backtracks through:
# ``*`` within one name, ``**`` across directories. These keep that degree small, and are far
# above what a real pattern needs (``src/**/tests/**/test_*.py`` has two of each).
MAX_PATTERN_LENGTH = 1024
MAX_STARS_PER_NAME = 3
MAX_DOUBLE_STARS = 3


class PatternError(ValueError):
    """A pattern a contract may not hold: ``problem`` says why, ``fix`` how to fix it."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem} ({fix})")
        self.problem = problem
        self.fix = fix


def check_pattern(pattern: str, roots: Iterable[str] = ()) -> None:
    """Raise ``PatternError`` if ``pattern`` is invalid (pathspec rejects it), can never
    match a path (``./src/**``, ``src/../x``, the absolute path of one of ``roots``: paths
    are matched relative to the project root, without ``.`` or ``..``), or is beyond the
    bounds on length and wildcards."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"is {len(pattern)} characters long; at most {MAX_PATTERN_LENGTH}",
                           "split it into shorter patterns")
    body = pattern[1:] if pattern.startswith("!") else pattern
    body = body.rstrip("/") if body.strip("/") else body
    for root in roots:
        root = root.rstrip("/")
        if root and (body == root or body.startswith(root + "/")):
            relative = body[len(root):].lstrip("/") or "**"
            raise PatternError("is an absolute path and can never match: patterns are "
                               "relative to the project root", f"write {relative!r}")
    names = body.lstrip("/").split("/")
    if names[0] == "." and len(names) > 1:
        raise PatternError("can never match: changed paths never start with './'",
                           f"write {'/'.join(names[1:])!r}")
    if "." in names or ".." in names:
        raise PatternError("can never match: changed paths hold no '.' or '..' directory",
                           "name the path from the project root without them")
    double = sum(1 for name in names if name == "**")
    if double > MAX_DOUBLE_STARS:
        raise PatternError(f"has {double} '**'; at most {MAX_DOUBLE_STARS}",
                           "match fewer directory levels in one pattern")
    for name in names:
        stars = _star_runs(name) if name != "**" else 0
        if stars > MAX_STARS_PER_NAME:
            raise PatternError(f"has {stars} '*' in one name ({name!r}); at most "
                               f"{MAX_STARS_PER_NAME}", "use fewer wildcards in one name")
    if "[" not in pattern and "\\" not in pattern and pattern.rstrip() != "!":
        # pathspec rejects only a bracket expression ("[z-a]"), a backslash escaping nothing
        # and a "!" negating nothing: other patterns are checked without importing it.
        return
    from pathspec import GitIgnoreSpec

    try:
        GitIgnoreSpec.from_lines([pattern], backend=backend())
    except (ValueError, re.error) as error:
        raise PatternError(f"is not a valid gitignore-style pattern ({error})",
                           "see the documentation: The contract, Patterns") from None


def _star_runs(name: str) -> int:
    """The ``*`` wildcards in one name; a run of them is one (gitignore reads ``a**b`` as
    ``a*b``), an escaped ``\\*`` none."""
    runs, escaped, previous = 0, False, ""
    for char in name:
        if escaped:
            escaped, previous = False, ""
            continue
        if char == "\\":
            escaped = True
        elif char == "*" and previous != "*":
            runs += 1
        previous = char
    return runs


@functools.lru_cache(maxsize=1024)
def _spec(patterns: tuple[str, ...]) -> GitIgnoreSpec:
    # Imported here: a run with nothing to match (no patterns, or no change filtering) never
    # pays for pathspec's import.
    from pathspec import GitIgnoreSpec

    return GitIgnoreSpec.from_lines(patterns, backend=backend())


@functools.lru_cache(maxsize=1)
def backend() -> Literal["re2", "simple"]:
    """The engine pathspec matches with: re2 where google-re2 is installed (a dependency
    wherever it has wheels; linear in a path's length whatever the pattern), else Python's
    ``re``, which backtracks (hence the bounds above). Named, not left to pathspec's "best":
    that would take hyperscan when installed, a third engine whose edge cases may differ."""
    try:
        import re2  # noqa: F401
    except ImportError:
        return "simple"
    return "re2"


# Include patterns matched together: a search giving the indices of the regexes found in a
# path (or None), and each regex's pattern, by its place in the list.
_Union = tuple[Callable[[str], Sequence[int] | None], tuple[int, ...]]


@functools.lru_cache(maxsize=64)
def _union(patterns: tuple[str, ...]) -> _Union:
    """Include patterns (none starting with "!") matched together. An include pattern alone
    matches a path exactly when its regex (pathspec's public translation) is found in it, so
    one set of regexes answers for all of them: one C call per path with re2."""
    from pathspec import GitIgnoreSpec

    # Each pattern translated alone: from_lines drops blank lines, which would shift places.
    sources = [(position, pattern.regex.pattern) for position, text in enumerate(patterns)
               for pattern in GitIgnoreSpec.from_lines([text]).patterns
               if pattern.include and pattern.regex is not None]
    positions = tuple(position for position, _ in sources)
    if backend() == "re2":
        import re2

        options = re2.Options()
        options.never_capture = True
        options.log_errors = False
        regex_set = re2.Set.SearchSet(options)
        for _, source in sources:
            regex_set.Add(source)
        regex_set.Compile()
        return regex_set.Match, positions
    regexes = [re.compile(source) for _, source in sources]
    return (lambda path: [index for index, regex in enumerate(regexes)
                          if regex.search(path)] or None), positions


def matching_any(patterns: Sequence[str], paths: Iterable[str]) -> list[str]:
    """The ``paths`` that match at least one of ``patterns``, all include patterns."""
    search, _ = _union(tuple(patterns))
    return [path for path in paths
            if search(path if path.isascii() and not path.startswith(_LEADS)
                      else _normalized(path))]


def unmatched(patterns: Sequence[str], paths: Iterable[str]) -> list[str]:
    """The ``patterns`` (include patterns) that match none of ``paths``, in order; one pass
    over ``paths``, which ends once every pattern has matched."""
    search, positions = _union(tuple(patterns))
    left = set(range(len(patterns)))
    for path in paths:
        if not left:
            break
        left.difference_update(positions[index] for index in search(_normalized(path)) or ())
    return [pattern for position, pattern in enumerate(patterns) if position in left]


# What GitIgnoreSpec drops from the start of a path before matching.
_LEADS = ("/", "./")


def _normalized(path: str) -> str:
    # As GitIgnoreSpec normalises a path before matching: one leading "/" or "./" dropped.
    if path.startswith("/"):
        path = path[1:]
    elif path.startswith("./"):
        path = path[2:]
    if path.isascii():
        return path
    # A name that is not UTF-8 reaches us with each undecodable byte as a lone surrogate
    # (``os.fsdecode``), which re2 cannot take: each becomes U+FFFD, one character for one,
    # which every wildcard matches as it matched the byte (a pattern holds no surrogate).
    return path.translate(_SURROGATES)


_SURROGATES = {code: "\ufffd" for code in range(0xD800, 0xE000)}


def match_files(patterns: Sequence[str], paths: Iterable[str]) -> list[str]:
    """The ``paths`` (POSIX, relative to the project root) that ``patterns`` match, in
    order."""
    if not patterns:
        return []
    if not any(pattern.startswith("!") for pattern in patterns):
        # Without a negation, the list matches what any of its patterns matches.
        return matching_any(patterns, paths)
    spec = _spec(tuple(patterns))
    return [path for path in paths if spec.match_file(_normalized(path))]


def matches_any(patterns: Sequence[str], paths: Iterable[str]) -> bool:
    """Whether ``patterns`` match one of ``paths`` at least (stops at the first)."""
    if not patterns:
        return False
    if not any(pattern.startswith("!") for pattern in patterns):
        search, _ = _union(tuple(patterns))
        return any(search(_normalized(path)) for path in paths)
    spec = _spec(tuple(patterns))
    return any(spec.match_file(_normalized(path)) for path in paths)
