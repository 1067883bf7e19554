"""Gitignore-style patterns: pathspec's ``GitIgnoreSpec`` matches them, with google-re2 as its
engine where installed; a contract's patterns are checked (valid, able to match, bounded).

pathspec's other engine, Python's ``re`` (``backend="simple"``), is the oracle: on the patterns
contracts write, the engine a user gets must not change what they mean (a machine without
google-re2 selects the same gates). The two differ only on rare mixes of negations and
directories (see the README: The contract).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import subprocess
import sys

import pytest
from pathspec import GitIgnoreSpec

from pytest_verifygate import patterns
from pytest_verifygate.patterns import (
    MAX_DOUBLE_STARS,
    MAX_PATTERN_LENGTH,
    MAX_STARS_PER_NAME,
    PatternError,
    backend,
    check_pattern,
    match_files,
    matches_any,
    matching_any,
    unmatched,
)


def oracle(pattern_list: list[str]) -> GitIgnoreSpec:
    return GitIgnoreSpec.from_lines(pattern_list, backend="simple")


def assert_agrees(pattern_list: list[str], paths: list[str]) -> None:
    expected = list(oracle(pattern_list).match_files(paths))
    assert match_files(pattern_list, paths) == expected, pattern_list
    assert matches_any(pattern_list, paths) == bool(expected)


def test_the_linear_time_engine_is_installed_and_used() -> None:
    """google-re2 is a dependency wherever it has wheels (as where these tests run)."""
    import re2  # noqa: F401  # an ImportError here: the dependency is missing

    assert backend() == "re2"


@pytest.mark.parametrize(("pattern_list", "expected"), [
    (["dir/", "!dir/keep.py"], {"dir/a.py": True, "dir/keep.py": False, "keep.py": False,
                                "dir/sub/keep.py": True, "a/dir/b": True, "dir": False}),
    (["*.py", "!test_*.py", "test_main.py"], {"a.py": True, "test_a.py": False,
                                              "test_main.py": True, "src/test_b.py": False,
                                              "src/test_main.py": True, "a.txt": False}),
    # As in git, re-including a directory does not re-include the files a file pattern
    # matches in it; excluding what is under it does.
    (["src/**/*.py", "!src/vendored/"], {"src/a.py": True, "src/x/y/b.py": True,
                                         "src/vendored/c.py": True, "a.py": False}),
    (["src/**/*.py", "!src/vendored/**"], {"src/a.py": True, "src/vendored/c.py": False}),
    (["/Makefile", "docs/"], {"Makefile": True, "sub/Makefile": False, "docs/x": True,
                              "docs": False, "a/docs/x": True}),
    (["*", "!*/", "!*.txt"], {"a.txt": False, "a.bin": True, "d/a.bin": True}),
    (["**/", "!**"], {"a": False, "d/a": False}),
    # A file pattern outranks a directory pattern whichever comes first (pathspec issue #134;
    # git itself ignores dir/a.py here).
    (["!*.py", "dir/"], {"dir/a.py": False, "dir/a.txt": True}),
    (["dir/", "!*.py"], {"dir/a.py": False, "dir/a.txt": True}),
    (["*.py", "!dir/"], {"dir/a.py": True, "dir/a.txt": False}),
    ([], {"a": False}),
    (["", "#a", "/"], {"a": False, "#a": False}),
])
def test_directory_and_negation_cases(pattern_list: list[str],
                                      expected: dict[str, bool]) -> None:
    assert {path: bool(match_files(pattern_list, [path])) for path in expected} == expected
    assert_agrees(pattern_list, list(expected))


# Patterns as contracts write them, and paths that meet them at the top, deeper, as
# directories and with odd characters.
CORPUS_PATTERNS = [
    "*.py", "/*.py", "*.py/", "src/", "/src/", "src/**", "src/**/*.py", "**/test_*.py",
    "docs/**/*.md", "!src/vendored/", "!*.md", "a/b", "/a/b/", "a/**/b", "a/*/b", "**/a",
    "a/**", "**", "*", "**/", "*/", "?.py", "[ab].py", "[!a].py", "[a-c]*", ".*", ".hidden",
    "Makefile", "/Makefile", "dir/*.txt", r"\#x", r"\!x", "#comment", "", "   ", "x ",
    "x\\ ", "a**b", "***", "a/***/b", "ü/*.py", "src/*", "!src/keep.py", "!**/keep.py",
]
CORPUS_PATHS = [
    "a", "a.py", "b.py", "c.py", "ab.py", "test_a.py", "README.md", "Makefile", "x ",
    "#x", "!x", ".hidden", "a/b", "a/x/b", "a/x/y/b", "a/b/c", "a/b/c.py", "src", "src/a.py",
    "src/keep.py", "src/x/keep.py", "src/vendored/v.py", "src/x/y/z.py", "docs/a.md",
    "docs/x/y.md", "dir/a.txt", "dir/sub/a.txt", "sub/Makefile", "x/.hidden", "x/.hidden/y",
    "tests/test_a.py", "tests/sub/test_b.py", "ü/a.py", "x/ü/a.py", "a/", "src/", "aXb",
    "a/b/",
]


@pytest.mark.slow
def test_matching_agrees_with_python_s_re_on_a_fixed_corpus() -> None:
    """Every corpus pattern alone, and every ordered pair of them, on every corpus path."""
    for pattern in CORPUS_PATTERNS:
        check_pattern(pattern)  # every one is valid: none can be silently left out
    pattern_lists = [[pattern] for pattern in CORPUS_PATTERNS]
    pattern_lists += [[first, second] for first in CORPUS_PATTERNS for second in CORPUS_PATTERNS]
    disagreements = [(pattern_list, path) for pattern_list in pattern_lists
                     for path in CORPUS_PATHS
                     if bool(match_files(pattern_list, [path]))
                     != oracle(pattern_list).match_file(path)]
    assert disagreements == []
    answers = {oracle([pattern]).match_file(path) for pattern in CORPUS_PATTERNS
               for path in CORPUS_PATHS}
    assert answers == {True, False}


# --------------------------------------------------------------------------------------------
# what a contract's pattern may be


@pytest.mark.parametrize("pattern", ["!", "a\\", "[z-a]", "src/[z-a]/x", "!\\"])
def test_invalid_patterns_raise_pattern_error(pattern: str) -> None:
    with pytest.raises((ValueError, re.error)):
        oracle([pattern])
    with pytest.raises(PatternError, match="not a valid gitignore-style pattern"):
        check_pattern(pattern)


@pytest.mark.slow
def test_pathspec_rejects_no_pattern_without_a_bracket_or_a_backslash_but_a_bare_negation(
) -> None:
    """What lets ``check_pattern`` leave pathspec unimported: every pattern of up to four
    characters from an alphabet without "[" and "\\" is valid to both engines, but "!"."""
    alphabet = "a*?/!.# -"
    for length in range(1, 5):
        for pattern in map("".join, itertools.product(alphabet, repeat=length)):
            for engine in ("re2", "simple"):
                try:
                    GitIgnoreSpec.from_lines([pattern], backend=engine)
                except ValueError:
                    assert pattern.rstrip() == "!", (pattern, engine)


@pytest.mark.parametrize(("pattern", "fix"), [
    ("./src/**", "'src/**'"),
    ("!./src/*.py", "'src/*.py'"),
    ("src/../lib/*.py", "without them"),
    ("../lib/**", "without them"),
    ("src/./x.py", "without them"),
    (".", "without them"),
    ("./", "without them"),
    ("/home/me/project/src/**", "'src/**'"),
    ("/home/me/project", "'**'"),
    ("/home/me/project/", "'**'"),
])
def test_patterns_that_can_never_match_raise_with_a_fix(pattern: str, fix: str) -> None:
    with pytest.raises(PatternError, match="can never match") as raised:
        check_pattern(pattern, ["/home/me/project"])
    assert fix in raised.value.fix
    # And pathspec agrees: no path a change set can hold matches it.
    assert not oracle([pattern.lstrip("!")]).match_file("src/x.py")


@pytest.mark.parametrize("pattern", [
    "/src/**", "src/..x/*.py", "a..b", ".github/**", "**/.*", "/home/other/**",
    "src/**/tests/**/test_*.py", "**/*_*_*.py", "a/**/b/**/c/**",
])
def test_patterns_within_the_bounds_pass(pattern: str) -> None:
    check_pattern(pattern, ["/home/me/project"])


@pytest.mark.parametrize(("pattern", "problem"), [
    ("**/*a*a*a*a*a*a*a*a*a*a*b", "'*' in one name"),
    ("*" + "a*" * MAX_STARS_PER_NAME, "'*' in one name"),
    ("/".join(["**", "a"] * (MAX_DOUBLE_STARS + 1)), "'**'"),
    ("a" * (MAX_PATTERN_LENGTH + 1), "characters long"),
])
def test_patterns_beyond_the_bounds_raise(pattern: str, problem: str) -> None:
    with pytest.raises(PatternError, match=re.escape(problem)):
        check_pattern(pattern)


def test_a_run_of_stars_counts_once_and_an_escaped_one_not_at_all() -> None:
    assert MAX_STARS_PER_NAME == 3
    for pattern in ("*a**b*", "***", r"\*\*\*\*a*", "x/*a*b*/y/*c*d*"):
        check_pattern(pattern)
    for pattern in ("*a**b*c*", r"\**a*b*c*", "x/*a*b*c*d"):
        with pytest.raises(PatternError):
            check_pattern(pattern)


@pytest.mark.slow
def test_pathspec_is_imported_only_to_match_or_check() -> None:
    script = ("import sys\n"
              "from pytest_verifygate import patterns\n"
              "assert patterns.match_files([], ['a']) == []\n"
              "patterns.check_pattern('src/**/*.py')\n"
              "assert 'pathspec' not in sys.modules, 'imported'\n"
              "patterns.check_pattern('src/[ab]/*.py')\n"
              "assert 'pathspec' in sys.modules\n"
              "assert patterns.match_files(['*.py'], ['a.py', 'b']) == ['a.py']\n"
              "assert 'pathspec' in sys.modules\n")
    subprocess.run([sys.executable, "-c", script], check=True)


@pytest.mark.parametrize("engine", ["re2", "simple"])
def test_the_union_of_include_patterns_agrees_with_pathspec_on_the_corpus(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``matching_any`` and ``unmatched`` (one pass for many include patterns: the prefilter
    and the warnings) say what each pattern alone says through ``GitIgnoreSpec``, with
    either engine."""
    monkeypatch.setattr(patterns, "backend", lambda: engine)
    patterns._union.cache_clear()
    monkeypatch.setattr(patterns, "_union", functools.lru_cache(maxsize=64)(
        patterns._union.__wrapped__))
    includes = [pattern for pattern in CORPUS_PATTERNS if not pattern.startswith("!")]
    paths = [*CORPUS_PATHS, "./a.py", "/src/a.py"]
    for pattern in includes:
        expected = list(oracle([pattern]).match_files(paths))
        assert matching_any([pattern], paths) == expected, pattern
        assert unmatched([pattern], paths) == ([] if expected else [pattern]), pattern
    expected = [path for path in paths if any(oracle([p]).match_file(path) for p in includes)]
    assert matching_any(includes, paths) == expected
    assert unmatched(["*.rs", "src/", "scr/**", "*.py"], paths) == ["*.rs", "scr/**"]


def test_names_that_are_not_utf8_match_as_any_character() -> None:
    """git names a file that is not UTF-8 with a lone surrogate per undecodable byte
    (``os.fsdecode``); re2 takes no surrogate, and each one is one character still."""
    name = os.fsdecode(b"caf\xe9\xff.py")
    for pattern_list in (["*.py"], ["caf??.py"], ["caf??.py", "!other"]):
        assert match_files(pattern_list, [name, "b.txt"]) == [name], pattern_list
        assert matches_any(pattern_list, [name])
    assert match_files(["caf?.py"], [name]) == []
    assert unmatched(["caf??.py", "x"], [name]) == ["x"]
