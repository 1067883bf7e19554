"""Gitignore-style patterns matched from pathspec's translations, exactly as GitIgnoreSpec does.

pathspec is the oracle throughout: every answer here is compared with ``GitIgnoreSpec``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pathspec import GitIgnoreSpec

from pytest_verifygate import patterns
from pytest_verifygate.patterns import (
    DIR_MARK,
    PatternError,
    Translation,
    matcher,
    pathspec_identity,
    remember,
    translations,
)
from reliability.support import examples


@pytest.fixture(autouse=True)
def _fresh_tables(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no remembered translations and no memoised matchers."""
    monkeypatch.setattr(patterns, "_table", {})
    patterns._matcher.cache_clear()
    yield
    patterns._matcher.cache_clear()


def oracle(pattern_list: list[str]) -> GitIgnoreSpec:
    # The simple backend is the default unless re2 or hyperscan is installed, and the one whose
    # rule the Matcher follows (the others can disagree on directory-pattern edge cases).
    return GitIgnoreSpec.from_lines(pattern_list, backend="simple")


def assert_agrees(pattern_list: list[str], paths: list[str]) -> None:
    spec = oracle(pattern_list)
    ours = matcher(pattern_list)
    for path in paths:
        assert ours.match_file(path) == spec.match_file(path), (pattern_list, path)
    assert list(ours.match_files(paths)) == list(spec.match_files(paths)), pattern_list


# --------------------------------------------------------------------------------------------
# agreement with pathspec

# Mostly a few common pieces, so that patterns and paths often meet, and now and then the rest.
COMMON = ["a", "b", "*", "**", "*.py"]
RARE = ["?", "[ab]", "[!a]", "a.py", "a*", "?.py", r"\*", r"\!", r"\#", "#", " ", "[z-a]", "a\\",
        "ü", "."]
SEGMENTS = st.sampled_from(COMMON * 4 + RARE)
PATTERNS = st.builds(
    lambda negate, lead, segments, trail: negate + lead + "/".join(segments) + trail,
    st.sampled_from(["", "", "!", "!", r"\!"]),
    st.sampled_from(["", "", "/", "**/"]),
    st.lists(SEGMENTS, min_size=1, max_size=3),
    st.sampled_from(["", "", "/", "/", "/**", " "]),
)
PATHS = st.builds(
    lambda lead, segments, trail: lead + "/".join(segments) + trail,
    st.sampled_from(["", "", "", "./", "/"]),
    st.lists(st.sampled_from(["a", "b", "a.py"] * 4 + ["c.py", "ab", "*", "!a", "#", " ", "ü",
                                                       "."]),
             min_size=1, max_size=4),
    st.sampled_from(["", "", "/"]),
)


# 500 examples: at 300, a matcher walking the patterns in the wrong order slipped through
# about one run in three; at 500, one in six (the explicit cases below always catch it).
@examples(500)
@given(candidates=st.lists(PATTERNS, min_size=1, max_size=5),
       paths=st.lists(PATHS, min_size=1, max_size=8))
def test_matching_agrees_with_gitignorespec(candidates: list[str], paths: list[str]) -> None:
    pattern_list = []
    for pattern in candidates:  # the invalid ones dropped, so that every example matches
        try:
            oracle([pattern])
        except (ValueError, re.error):
            with pytest.raises(PatternError):
                translations([pattern])
        else:
            pattern_list.append(pattern)
    assert_agrees(pattern_list, paths)


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
                              "docs": False, "a/docs/x": True, "./Makefile": True,
                              "/docs/x": True}),
    (["*", "!*/", "!*.txt"], {"a.txt": False, "a.bin": True, "d/a.bin": True}),
    (["**/", "!**"], {"a": False, "d/a": False}),
    # A file pattern outranks a directory pattern whichever comes first: pathspec's default
    # backend walks last to first (pathspec issue #134; git itself ignores dir/a.py here).
    (["!*.py", "dir/"], {"dir/a.py": False, "dir/a.txt": True}),
    (["dir/", "!*.py"], {"dir/a.py": False, "dir/a.txt": True}),
    (["*.py", "!dir/"], {"dir/a.py": True, "dir/a.txt": False}),
    ([], {"a": False}),
    (["", "#a", "/"], {"a": False, "#a": False}),
])
def test_directory_and_negation_cases(pattern_list: list[str],
                                      expected: dict[str, bool]) -> None:
    ours = matcher(pattern_list)
    assert {path: ours.match_file(path) for path in expected} == expected
    assert_agrees(pattern_list, list(expected))


# A fixed corpus, checked on every run whatever hypothesis draws: patterns as contracts write
# them, and paths that meet them at the top, deeper, as directories and with odd characters.
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
    "tests/test_a.py", "tests/sub/test_b.py", "ü/a.py", "x/ü/a.py", "./a.py", "/a.py",
    "/src/a.py", "a/", "src/", "aXb", "a/b/",
]


def test_matching_agrees_with_gitignorespec_on_a_fixed_corpus() -> None:
    """Every corpus pattern alone, and every ordered pair of them, on every corpus path."""
    translations(CORPUS_PATTERNS)  # every one is valid: none can be silently left out
    pattern_lists = [[pattern] for pattern in CORPUS_PATTERNS]
    pattern_lists += [[first, second] for first in CORPUS_PATTERNS for second in CORPUS_PATTERNS]
    disagreements = []
    for pattern_list in pattern_lists:
        spec = oracle(pattern_list)
        ours = matcher(pattern_list)
        for path in CORPUS_PATHS:
            if ours.match_file(path) != spec.match_file(path):
                disagreements.append((pattern_list, path, spec.match_file(path)))
    assert disagreements == []
    # The corpus means something: both answers occur, and for single patterns too.
    answers = {oracle([pattern]).match_file(path) for pattern in CORPUS_PATTERNS
               for path in CORPUS_PATHS}
    assert answers == {True, False}


def test_pathspec_is_used_in_translate_only_and_by_its_public_api() -> None:
    """The matcher copies pathspec's rules; what it asks of pathspec stays in one place."""
    import ast

    tree = ast.parse(Path(patterns.__file__).read_text(encoding="utf-8"))
    uses = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pathspec"):
                uses.append((function.name, node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                uses += [(function.name, a.name, []) for a in node.names
                         if a.name.startswith("pathspec")]
    assert uses == [("_translate", "pathspec", ["GitIgnoreSpec"])]
    assert not [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
                and "pathspec" in ast.unparse(node)]


def test_the_directory_marker_is_renamed_and_the_include_regexes_exposed() -> None:
    table = translations(["dir/", "a.py", "!b"])
    for translation in table.values():
        assert set(re.compile(translation.regex).groupindex) == {DIR_MARK}
        assert "ps_d" not in translation.regex
    assert (table["dir/"].include, table["a.py"].include, table["!b"].include) == (
        True, True, False)
    ours = matcher(["dir/", "a.py", "!b"])
    assert ours.include_regexes == (table["dir/"].regex, table["a.py"].regex)


def test_no_op_patterns_translate_to_nothing() -> None:
    for pattern in ("", "#comment", "/", "   "):
        assert translations([pattern]) == {pattern: Translation("", None)}
    assert matcher(["#a", "a"]).include_regexes == (translations(["a"])["a"].regex,)


# --------------------------------------------------------------------------------------------
# remembered translations


def test_translations_round_trip_through_json_and_remember() -> None:
    pattern_list = ["src/**/*.py", "!src/vendored/", "docs/", "*.md", "!README.md", "#x", ""]
    paths = ["src/a.py", "src/vendored/b.py", "docs/x.txt", "README.md", "CHANGES.md", "x.py"]
    before = [matcher(pattern_list).match_file(path) for path in paths]
    stored = json.loads(json.dumps(translations(pattern_list)))

    patterns._table.clear()
    patterns._matcher.cache_clear()
    remember({pattern: Translation(*item) for pattern, item in stored.items()})
    assert translations(pattern_list) == {p: Translation(*t) for p, t in stored.items()}

    def no_pathspec(pattern: str) -> Translation:
        raise AssertionError(f"{pattern!r} was translated again")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(patterns, "_translate", no_pathspec)
        assert [matcher(pattern_list).match_file(path) for path in paths] == before
    assert_agrees(pattern_list, paths)


def test_computed_translations_are_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    first = translations(["a/", "b"])
    monkeypatch.setattr(patterns, "_translate", lambda pattern: pytest.fail(pattern))
    assert translations(["b", "a/"]) == first


# --------------------------------------------------------------------------------------------
# invalid patterns


@pytest.mark.parametrize("pattern", ["!", "a\\", "[z-a]", "src/[z-a]/x", "!\\"])
def test_invalid_patterns_raise_pattern_error(pattern: str) -> None:
    with pytest.raises((ValueError, re.error)):
        oracle([pattern])
    with pytest.raises(PatternError, match=re.escape(repr(pattern))) as raised:
        translations(["fine", pattern])
    assert isinstance(raised.value, ValueError)
    assert pattern not in patterns._table
    with pytest.raises(PatternError):
        matcher([pattern])


# --------------------------------------------------------------------------------------------
# the installed pathspec's identity


def test_pathspec_identity_is_stable_and_does_not_import_pathspec() -> None:
    assert pathspec_identity() == pathspec_identity() is not None
    script = ("import sys\n"
              "from pytest_verifygate.patterns import pathspec_identity\n"
              "identity = pathspec_identity()\n"
              "assert 'pathspec' not in sys.modules, 'imported'\n"
              "print(identity)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == pathspec_identity()


def test_pathspec_identity_follows_the_installed_files(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "site" / "pathspec" / "__init__.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("raise AssertionError('executed')\n", encoding="utf-8")
    monkeypatch.delitem(sys.modules, "pathspec", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))

    identity = pathspec_identity()
    assert identity is not None and str(fake) in identity
    assert pathspec_identity() == identity
    assert "pathspec" not in sys.modules  # found, never executed

    stat = fake.stat()
    os.utime(fake, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    touched = pathspec_identity()
    assert touched != identity

    fake.write_text("raise AssertionError('executed, again')\n", encoding="utf-8")
    os.utime(fake, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert pathspec_identity() not in (identity, touched)  # same time, another size

    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty")])
    assert pathspec_identity() is None
