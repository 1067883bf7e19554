"""Hostile patterns and file names: selection does bounded work whatever a contract's patterns
and the file system's names are, and a pattern that cannot do its job is said, not silent.

- openTiger's ``{a,b}`` braces multiply: five groups of ten options were 100,000 patterns
  (over 120 s and 2.8 GB); a glob past the bound is one contract error.
- a pattern's wildcards against long names and deep paths: Python's backtracking ``re`` took
  seconds per path (``**/*a*a*a*a*a*a*a*a*a*a*b`` against one 60-character name kept ``list``
  busy past 20 s); pathspec matches with google-re2 (linear time), and patterns are bounded.
- a pattern that can never match (``./src/**``, ``..``, the project's absolute path) is a
  contract error with a fix; one that matches no tracked file (``scr/**/*.py``) a warning.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_verifygate.contract import load_contract
from pytest_verifygate.contract.opentiger import MAX_EXPANSIONS, expand_braces
from pytest_verifygate.errors import ContractError
from pytest_verifygate.selection import pattern_warnings

from conftest import commit_all, git, verifygate, write

# Generous for two shared cores: what these tests guard against took minutes, or forever.
SECONDS = 20


def _opentiger(repo: Path, globs: list[str]) -> Path:
    return write(repo / ".opentiger" / "verify.contract.json", json.dumps({
        "commands": ["true"],
        "rules": [{"whenChangedAny": globs, "commands": ["echo changed"]}],
    }))


def _one_line_error(repo: Path, *args: str) -> str:
    begun = time.monotonic()
    done = verifygate("list", *args, cwd=repo, timeout=SECONDS)
    assert time.monotonic() - begun < SECONDS
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# --------------------------------------------------------------------------------------------
# openTiger's braces


@pytest.mark.slow
def test_braces_that_multiply_past_the_bound_are_one_contract_error(repo: Path) -> None:
    options = ",".join(f"o{index}" for index in range(10))
    _opentiger(repo, ["src/*.ts", "/".join([f"{{{options}}}"] * 5) + "/*.ts"])
    line = _one_line_error(repo)
    assert "verify.contract.json" in line and "rules[0].whenChangedAny" in line
    assert f"more than {MAX_EXPANSIONS} patterns" in line
    assert "{a,b}" in line  # the fix


@pytest.mark.slow
@pytest.mark.parametrize("glob", [
    "{a,b}" * 200,  # two hundred groups: the expansion recursed once per group
    "x{" + ",".join(["a"] * 300) + "}",
    "{" * 2000 + "a,b" + "}" * 2000,  # longer than a pattern may be
])
def test_hostile_braces_are_bounded_and_never_a_traceback(repo: Path, glob: str) -> None:
    _opentiger(repo, [glob])
    line = _one_line_error(repo)
    assert "verify.contract.json" in line and "rules[0].whenChangedAny" in line
    assert "Traceback" not in line


def test_deeply_nested_braces_within_the_bound_load(repo: Path) -> None:
    _opentiger(repo, ["{" * 300 + "a,b" + "}" * 300])
    begun = time.monotonic()
    contract = load_contract(repo / ".opentiger" / "verify.contract.json")
    assert time.monotonic() - begun < SECONDS
    assert [len(gate.when_changed or ()) for gate in contract.gates] == [0, 2]


def test_braces_expand_innermost_first_in_order() -> None:
    assert expand_braces("src/{a,b{c,d}}/x.{ts,js}") == [
        "src/a/x.ts", "src/a/x.js", "src/bc/x.ts", "src/bc/x.js", "src/bd/x.ts", "src/bd/x.js",
    ]
    assert expand_braces("{a}/{,b}") == ["{a}/", "{a}/b"]  # no comma: no group
    assert expand_braces("a{b") == ["a{b"]
    nested = "{" * 100 + "a,b" + "}" * 100
    assert expand_braces(nested) == ["{" * 99 + "a" + "}" * 99, "{" * 99 + "b" + "}" * 99]
    assert len(expand_braces("{a,b}" * 8)) == 256 == MAX_EXPANSIONS


def test_braces_within_the_bound_still_select(repo: Path) -> None:
    _opentiger(repo, ["src/{a,b}/{c,d}/*.ts"])
    contract = load_contract(repo / ".opentiger" / "verify.contract.json")
    (gate,) = [gate for gate in contract.gates if gate.when_changed]
    assert gate.when_changed == ("/src/a/c/*.ts", "/src/a/d/*.ts", "/src/b/c/*.ts",
                                 "/src/b/d/*.ts")


# --------------------------------------------------------------------------------------------
# wildcards against long names and deep paths


@pytest.mark.slow
def test_too_many_wildcards_are_one_contract_error(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "lint"\ncommand = "true"\n'
                                'when_changed = ["**/*a*a*a*a*a*a*a*a*a*a*b"]\n')
    line = _one_line_error(repo)
    assert line.startswith("verifygate: error: verify.toml: gate 'lint': key 'when_changed':")
    assert "'*' in one name" in line and "use fewer wildcards" in line


@pytest.mark.slow
def test_hostile_file_names_against_the_worst_patterns_allowed_stay_linear(repo: Path) -> None:
    """Patterns at the bounds (three ``**``, three ``*`` in one name) against thousands of
    long names and deep paths built to make a backtracking engine try every split."""
    write(repo / "verify.toml", "".join(
        f'[[gate]]\nname = "g{index}"\ncommand = "true"\nwhen_changed = ["{pattern}"]\n'
        for index, pattern in enumerate([
            "a/**/a/**/a/**/b", "**/*a*a*b", "**/a*/**/a*/**/b", "src/**/tests/**/*a*a*.py",
        ])))
    deep = "/".join(["a"] * 1000) + "/c"  # 2,001 characters, 1,000 directories
    paths = [f"{deep}{index}" for index in range(200)]
    paths += [f"x{index}/" + "a" * 250 for index in range(5000)]  # names of 250 characters
    paths += ["src/" + "/".join(["tests"] * 300) + f"/{'a' * 200}{index}.py"
              for index in range(200)]
    write(repo / "paths.txt", "\n".join(paths) + "\n")
    # Named files must be in the work tree or the index: these are in the index only.
    empty_blob = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    subprocess.run(["git", "update-index", "--add", "--index-info"], cwd=repo, check=True,
                   input="".join(f"100644 {empty_blob}\t{path}\n" for path in paths).encode())
    begun = time.monotonic()
    done = verifygate("list", "--files-from", "paths.txt", "--format", "json", cwd=repo,
                      timeout=120)
    elapsed = time.monotonic() - begun
    assert done.returncode == 0, done.stderr
    assert elapsed < SECONDS, f"selection took {elapsed:.1f} s"
    listed = json.loads(done.stdout)
    selected = {gate["name"] for gate in listed["gates"] if gate["selected"]}
    assert selected == {"g3"}  # the Python files under src/tests: nothing else matches


# --------------------------------------------------------------------------------------------
# patterns that cannot do their job


@pytest.mark.slow
@pytest.mark.parametrize(("pattern", "fix"), [
    ("./src/**", "write 'src/**'"),
    ("src/../lib/**", "without them"),
    ("{root}/src/**", "write 'src/**'"),
])
def test_a_pattern_that_can_never_match_is_a_contract_error_with_a_fix(
    repo: Path, pattern: str, fix: str
) -> None:
    pattern = pattern.format(root=repo.resolve())
    write(repo / "verify.toml", '[[gate]]\nname = "lint"\ncommand = "true"\n'
                                f'when_changed = ["src/**/*.py", "{pattern}"]\n')
    line = _one_line_error(repo)
    assert line.startswith("verifygate: error: verify.toml: gate 'lint': key 'when_changed':")
    assert "can never match" in line and fix in line


@pytest.mark.slow
def test_a_pattern_matching_no_tracked_file_is_a_warning_in_every_run(repo: Path) -> None:
    """A mistyped ``when_changed`` on the tests gate let every commit pass with the tests
    left out, and only ``verifygate check`` said so."""
    contract = ('[[gate]]\nname = "lint"\ncommand = "true"\nwhen_changed = ["scr/**/*.py"]\n'
                '[[gate]]\nname = "docs"\ncommand = "true"\nwhen_changed = ["docs/**"]\n')
    write(repo / "verify.toml", contract)
    write(repo / "src" / "app.py", "x = 1\n")
    write(repo / "docs" / "index.md", "docs\n")
    commit_all(repo)
    write(repo / "src" / "app.py", "x = 2\n")
    git(repo, "add", "src/app.py")
    warning = ("verify.toml: gate 'lint': key 'when_changed': 'scr/**/*.py' matches no "
               "tracked file")

    def stderr(*args: str) -> str:
        return verifygate(*args, cwd=repo, timeout=SECONDS).stderr

    for args in (["run", "--staged"], ["run", "--staged"], ["list", "--staged"],
                 ["list", "--files", "src/app.py"], ["run", "--changed-from", "HEAD"]):
        shown = stderr(*args)
        assert shown.count(warning) == 1, (args, shown)
        assert "'docs/**'" not in shown  # it matches a tracked file: nothing to say
    # A run that selects every gate has nothing to warn about.
    for args in (["run", "--all"], ["list"]):
        assert warning not in stderr(*args)


@pytest.mark.slow
def test_patterns_that_all_match_are_not_matched_again_for_the_same_contract_and_index(
        repo: Path, tmp_path: Path) -> None:
    real_git = shutil.which("git")
    assert real_git is not None
    calls = tmp_path / "git-calls"
    write(tmp_path / "shims" / "git",
          f'#!/bin/sh\necho "$*" >> "{calls}"\nexec "{real_git}" "$@"\n')
    (tmp_path / "shims" / "git").chmod(0o755)
    path = f"{tmp_path / 'shims'}{os.pathsep}{os.environ['PATH']}"
    two_gates = ('[[gate]]\nname = "py"\ncommand = "true"\nwhen_changed = ["*.py"]\n'
                 '[[gate]]\nname = "docs"\ncommand = "true"\nwhen_changed = ["docs/**"]\n')
    write(repo / "verify.toml", two_gates)
    write(repo / "a.py", "x = 1\n")
    write(repo / "docs" / "index.md", "docs\n")
    commit_all(repo)
    listings = []
    for _ in range(2):
        write(repo / "a.py", f"x = {len(listings)}\n")
        calls.unlink(missing_ok=True)
        done = subprocess.run([sys.executable, "-m", "pytest_verifygate.cli", "run",
                               "--changed-from", "HEAD"], cwd=repo, capture_output=True,
                              text=True, env={**os.environ, "PATH": path})
        assert done.returncode == 0 and "matches no tracked file" not in done.stderr, done
        listings.append(calls.read_text().count("ls-files -z --cached -- ."))
    assert listings == [1, 0]  # the second run answered from what the first one found
    write(repo / "verify.toml", two_gates.replace("docs/**", "dcos/**"))
    git(repo, "add", "verify.toml")
    git(repo, "commit", "-q", "-m", "a typo")
    done = verifygate("run", "--changed-from", "HEAD", cwd=repo, timeout=SECONDS)
    assert "'dcos/**' matches no tracked file" in done.stderr


@pytest.mark.slow
def test_pattern_warnings_name_every_pattern_that_matches_no_tracked_file(repo: Path) -> None:
    write(repo / "verify.toml",
          '[[gate]]\nname = "lint"\ncommand = "true"\n'
          'when_changed = ["scr/**/*.py", "src/**/*.py", "!src/gen/**"]\n'
          'when_changed_all = ["tests/**"]\n'
          '[[gate]]\nname = "always"\ncommand = "true"\n')
    write(repo / "src" / "app.py", "x = 1\n")
    commit_all(repo)
    contract = load_contract(repo / "verify.toml")
    warnings = pattern_warnings(contract)
    assert [warning.split(": ")[1:3] for warning in warnings] == [
        ["gate 'lint'", "key 'when_changed'"], ["gate 'lint'", "key 'when_changed_all'"]]
    assert "'scr/**/*.py'" in warnings[0] and "'tests/**'" in warnings[1]
    assert pattern_warnings(contract, tracked=["scr/a.py", "src/b.py", "tests/c.py"]) == []


def test_a_contract_error_for_patterns_is_never_a_traceback(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "lint"\ncommand = "true"\n'
                                'when_changed = ["src/[z-a]/*.py"]\n')
    with pytest.raises(ContractError, match="not a valid gitignore-style pattern"):
        load_contract(repo / "verify.toml")
