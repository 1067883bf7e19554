"""Gate keys ``types``, ``types_or``, ``exclude_types``, ``files_regex`` and ``exclude_regex``:
pre-commit's meaning, in the contract, in selection and in ``{files}``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import commit_all, git, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

ECHO = f'["{sys.executable}", "-c", "import sys; print(sorted(sys.argv[1:]))", "{{files}}"]'
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(range(256))


def _project(repo: Path, keys: str) -> None:
    write(repo / "verify.toml", f'[[gate]]\nname = "fix"\ncommand = {ECHO}\n{keys}\n')
    write(repo / "a.py", "x = 1\n")
    write(repo / "docs" / "b.md", "text\n")
    (repo / "docs" / "photo.jpg").write_bytes(JPEG)
    write(repo / "setup.cfg", "[x]\n")
    commit_all(repo)


def _argv(repo: Path, *flags: str) -> list[list[str]]:
    done = verifygate("list", "-v", "--format", "json", *flags, cwd=repo)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["gates"][0]["argv"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("keys", "expected"), [
    ('types = ["text"]', ["a.py", "docs/b.md", "setup.cfg", "verify.toml"]),
    ('types = ["binary"]', ["docs/photo.jpg"]),
    ('types_or = ["python", "markdown"]', ["a.py", "docs/b.md"]),
    ('exclude_types = ["binary", "python"]', ["docs/b.md", "setup.cfg", "verify.toml"]),
    ('files_regex = "^docs/"', ["docs/b.md", "docs/photo.jpg"]),
    ('files_regex = "^docs/"\nexclude_regex = "\\\\.jpg$"', ["docs/b.md"]),
    ('when_changed = ["docs/**"]\ntypes = ["text"]', ["docs/b.md"]),
])
def test_all_files_expand_to_the_files_of_the_gate_s_types(repo: Path, keys: str,
                                                          expected: list[str]) -> None:
    _project(repo, keys)
    assert _argv(repo, "--all")[0][3:] == expected


def test_selection_by_changed_files_honours_types(repo: Path) -> None:
    _project(repo, 'types = ["text"]')
    done = verifygate("list", "--files", "docs/photo.jpg", cwd=repo)
    assert "skip  fix" in done.stdout and "no changed file matches types [text]" in done.stdout
    (repo / "docs" / "photo.jpg").write_bytes(JPEG + b"\x00")
    write(repo / "a.py", "x = 2\n")
    ran = verifygate("run", "--changed-from", "HEAD", "--format", "json", cwd=repo)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # The JPEG changed too, but is never handed to a gate that takes text.
    assert json.loads(ran.stdout)["gates"][0]["output_tail"] == "['a.py']\n"


def test_a_deleted_file_selects_by_the_type_its_name_gives(repo: Path) -> None:
    _project(repo, 'types = ["python"]')
    (repo / "a.py").unlink()
    done = verifygate("list", "--changed-from", "HEAD", cwd=repo)
    # Selected (a deletion can break what is left), with nothing for {files} to name.
    assert "changed 'a.py' (deleted) matches types [python]" in done.stdout
    git(repo, "checkout", "a.py")
    (repo / "docs" / "b.md").unlink()
    done = verifygate("list", "--changed-from", "HEAD", cwd=repo)
    assert "skip  fix  no changed file matches types [python]" in done.stdout


@pytest.mark.parametrize(("keys", "message"), [
    ('types = ["pyhton"]', "gate 'fix': key 'types': 'pyhton' is not a file type identify "
                           "knows (did you mean 'python'?)"),
    ('types_or = []', "gate 'fix': key 'types_or': must not be an empty list"),
    ('exclude_types = "binary"', "gate 'fix': key 'exclude_types': must be a list of strings"),
    ('files_regex = "(unclosed"', "gate 'fix': key 'files_regex': is not a valid Python "
                                  "regular expression: missing ), unterminated subpattern"),
    ('exclude_regex = 3', "gate 'fix': key 'exclude_regex': must be a string, not an integer"),
])
def test_bad_types_and_regexes_are_one_line_contract_errors(repo: Path, keys: str,
                                                            message: str) -> None:
    _project(repo, keys)
    done = verifygate("list", cwd=repo)
    assert done.returncode == 2
    assert done.stderr.startswith(f"verifygate: error: verify.toml: {message}"), done.stderr
    assert len(done.stderr.splitlines()) == 1
