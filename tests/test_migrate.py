"""``verifygate migrate``: pre-commit and lefthook configs as contracts that check what the
hooks checked (compared with a real ``pre-commit run --all-files``)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import tomllib

from conftest import commit_all, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

# A hook program that records which files it was given: "<hook id>\t<file>" per file, and
# "<hook id>\t" for a run with none.
RECORDER = """\
import sys
with open(sys.argv[1], "a", encoding="utf-8") as log:
    files = sys.argv[3:]
    for name in files or [""]:
        log.write(f"{sys.argv[2]}\\t{name}\\n")
"""

# Every way a hook chooses its files: types, types_or, exclude_types, files and exclude (a
# verbose (?x) regex among them), top-level exclude, pass_filenames, always_run, stages.
CONFIG = """\
exclude: |
  (?x)^(
    docs/generated\\.py  # written by the docs build
    |vendor/.*
  )$
repos:
- repo: local
  hooks:
  - id: python
    name: python
    entry: {record} python
    language: system
    types: [python]
    exclude: ^tests/
  - id: text-fixer
    name: text fixer
    entry: {record} text-fixer
    language: system
    types: [text]
    files: |
      (?x)^(
        docs/|      # the docs
        a\\.py       # and one module
      )
  - id: every-file
    name: every file
    entry: {record} every-file
    language: system
  - id: python-or-markdown
    name: python or markdown
    entry: {record} python-or-markdown
    language: system
    types_or: [python, markdown]
    exclude_types: [pyi]
  - id: whole-docs
    name: whole docs
    entry: {record} whole-docs
    language: system
    files: ^docs/
    pass_filenames: false
  - id: manual-only
    name: manual only
    entry: {record} manual-only
    language: system
    stages: [manual]
  - id: executables
    name: executables
    entry: {record} executables
    language: system
    types: [text, executable]
"""


def _project(repo: Path) -> Path:
    log = repo.parent / "calls.log"
    write(repo.parent / "record.py", RECORDER)
    record = f"{shlex.quote(sys.executable)} {shlex.quote(str(repo.parent / 'record.py'))} " \
             f"{shlex.quote(str(log))}"
    write(repo / ".pre-commit-config.yaml", CONFIG.format(record=record))
    for name, text in {"a.py": "x = 1\n", "b.pyi": "x: int\n", "tests/test_a.py": "",
                       "docs/index.md": "# Docs\n", "docs/generated.py": "",
                       "docs/conf.py": "", "vendor/v.py": "", "setup.cfg": "[x]\n",
                       "name with space.py": ""}.items():
        write(repo / name, text)
    (repo / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x02")
    write(repo / "run.sh", "#!/bin/sh\necho hi\n").chmod(0o755)
    (repo / "link.py").symlink_to("a.py")
    commit_all(repo)
    return log


def _calls(log: Path) -> dict[str, set[str]]:
    calls: dict[str, set[str]] = defaultdict(set)
    for line in log.read_text(encoding="utf-8").splitlines():
        hook, _, name = line.partition("\t")
        calls[hook].add(name)
    log.unlink()
    return dict(calls)


def test_run_all_checks_what_pre_commit_run_all_files_checked(repo: Path,
                                                              tmp_path: Path) -> None:
    log = _project(repo)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
           "PRE_COMMIT_COLOR": "never"}
    done = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"],
                          cwd=repo, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    by_pre_commit = _calls(log)

    migrated = verifygate("migrate", cwd=repo)
    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout == "verifygate: wrote verify.toml: 7 gate(s) from " \
                              ".pre-commit-config.yaml\n"
    ran = verifygate("run", "--all", cwd=repo)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    by_verifygate = _calls(log)

    assert by_verifygate == by_pre_commit
    # What the comparison covers, checked against pre-commit's own answer.
    assert by_pre_commit["python"] == {"a.py", "docs/conf.py", "name with space.py"}
    assert by_pre_commit["text-fixer"] == {"a.py", "docs/conf.py", "docs/index.md"}
    assert "photo.jpg" in by_pre_commit["every-file"]  # types: [file], binaries too
    assert "link.py" not in by_pre_commit["every-file"]
    assert by_pre_commit["whole-docs"] == {""}
    assert by_pre_commit["executables"] == {"run.sh"}
    assert "manual-only" not in by_pre_commit
    manual = verifygate("run", "--all", "--role", "manual", "manual-only", cwd=repo)
    assert manual.returncode == 0, manual.stdout + manual.stderr
    assert _calls(log)["manual-only"] == {".pre-commit-config.yaml", "a.py", "b.pyi",
                                          "docs/conf.py", "docs/index.md", "name with space.py",
                                          "photo.jpg", "run.sh", "setup.cfg", "tests/test_a.py"}


WELL_KNOWN = """\
exclude: 'docs/|ext/'
repos:
- repo: https://github.com/pre-commit/pre-commit-hooks
  rev: v6.0.0
  hooks:
  - id: check-yaml
  - id: trailing-whitespace
  - id: mixed-line-ending
    args: [--fix=auto]
- repo: https://github.com/astral-sh/ruff-pre-commit
  rev: v0.16.0
  hooks:
    - id: ruff-check
      args: [--fix]
    - id: ruff-format
      exclude: tests/test_lowlevel.py
- repo: https://github.com/pre-commit/mirrors-mypy
  rev: v2.3.0
  hooks:
  - id: mypy
    additional_dependencies: [types-requests]
- repo: https://github.com/codespell-project/codespell
  rev: 2ccb47ff45ad361a21071a7eedda4c37e6ae8c5a  # frozen: v2.4.2
  hooks:
  - id: codespell
- repo: https://github.com/pre-commit/pygrep-hooks
  rev: v1.10.0
  hooks:
  - id: python-no-eval
- repo: https://github.com/rhysd/actionlint
  rev: v1.7.12
  hooks:
  - id: actionlint
- repo: local
  hooks:
  - id: lint
    name: lint
    entry: ruff check
    language: system
    types: [python]
    require_serial: true
  - id: commit-message
    name: commit message
    entry: ./check-message
    language: script
    stages: [commit-msg]
"""


def test_well_known_hooks_become_gates_and_the_rest_is_listed(repo: Path) -> None:
    write(repo / ".pre-commit-config.yaml", WELL_KNOWN)
    done = verifygate("migrate", "--output", "-", cwd=repo)
    assert done.returncode == 0, done.stderr
    contract = tomllib.loads(done.stdout)
    gates = {gate["name"]: gate for gate in contract["gate"]}
    assert contract["settings"] == {"jobs": 1}
    assert list(gates) == ["check-yaml", "trailing-whitespace", "mixed-line-ending",
                           "ruff-check", "ruff-format", "mypy", "codespell", "python-no-eval",
                           "lint"]
    assert gates["python-no-eval"]["command"] == [
        "python", "-m", "pre_commit.languages.pygrep", r"\beval\(", "{files}"]
    assert gates["trailing-whitespace"] == {
        "name": "trailing-whitespace", "command": ["trailing-whitespace-fixer", "{files}"],
        "exclude_regex": "docs/|ext/", "types": ["text"], "fixer": True}
    assert gates["ruff-check"]["command"] == ["ruff", "check", "--force-exclude", "--fix",
                                              "{files}"]
    assert gates["ruff-check"]["types_or"] == ["python", "pyi", "jupyter"]
    assert [name for name, gate in gates.items() if gate.get("cache")] == [
        "ruff-check", "ruff-format", "codespell"]  # not mypy: it reads what is installed
    # pre-commit's require_serial, the config's or the manifest's: never split into chunks.
    assert [name for name, gate in gates.items() if gate.get("serial")] == [
        "ruff-check", "ruff-format", "mypy", "lint"]
    # pre-commit's fixers (and ruff given --fix): never run while an agent edits.
    assert [name for name, gate in gates.items() if gate.get("fixer")] == [
        "trailing-whitespace", "mixed-line-ending", "ruff-check", "ruff-format"]
    assert gates["ruff-format"]["exclude_regex"] == "(?:docs/|ext/)|(?:tests/test_lowlevel.py)"
    assert gates["mypy"]["command"] == ["mypy", "--ignore-missing-imports", "--scroll-output",
                                        "{files}"]
    notes = done.stderr.splitlines()
    assert any("'actionlint' of https://github.com/rhysd/actionlint: not a hook verifygate "
               "knows" in note for note in notes)
    assert any("'commit-message' runs at stages [commit-msg]: not carried over" in note
               for note in notes)
    assert any("'mypy': its additional_dependencies" in note and "types-requests" in note
               for note in notes)
    assert any("'lint': ruff given file names" in note and "--force-exclude" in note
               for note in notes)
    # pygrep-hooks' rev is no version of pre-commit, whose grep its gates run.
    # A frozen rev (a commit) pins the version its comment names.
    assert any(note.endswith("pip install pre-commit-hooks==6.0.0 ruff==0.16.0 mypy==2.3.0 "
                             "codespell==2.4.2 pre-commit") for note in notes)
    assert all(f"# - {note.removeprefix('verifygate: migrate: ')}" in done.stdout
               for note in notes)  # and written into the contract


def test_migrate_never_overwrites_and_bad_input_is_one_line(repo: Path) -> None:
    write(repo / ".pre-commit-config.yaml", WELL_KNOWN)
    write(repo / "verify.toml", "# mine\n")
    done = verifygate("migrate", "--output", "verify.toml", cwd=repo)
    assert (done.returncode, done.stderr) == (2, (
        "verifygate: error: verify.toml already exists: not overwritten (write elsewhere "
        "with --output PATH, or - for stdout)\n"))
    assert (repo / "verify.toml").read_text() == "# mine\n"
    write(repo / ".pre-commit-config.yaml", "repos: [\n")
    done = verifygate("migrate", "-o", "-", cwd=repo)
    assert done.returncode == 2
    assert done.stderr.startswith("verifygate: error: .pre-commit-config.yaml: not valid YAML")
    assert len(done.stderr.splitlines()) == 1
    write(repo / ".pre-commit-config.yaml", "hooks: []\n")
    done = verifygate("migrate", "-o", "-", cwd=repo)
    assert done.stderr == ("verifygate: error: .pre-commit-config.yaml: not a pre-commit "
                           "config (no 'repos' list)\n")
    done = verifygate("migrate", "nowhere.yaml", cwd=repo)
    assert done.stderr == "verifygate: error: nowhere.yaml: no such file\n"


def test_migrate_adds_to_the_contract_init_wrote(repo: Path) -> None:
    write(repo / ".pre-commit-config.yaml", WELL_KNOWN)
    mine = ('# mine\n[settings]\njobs = 4\n\n[[gate]]\nname = "mypy"\ncommand = ["uv", "run", '
            '"mypy"]\n')
    write(repo / "verify.toml", mine)
    done = verifygate("migrate", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("verifygate: added 8 gate(s) from .pre-commit-config.yaml to "
                           "verify.toml\n")
    assert "verifygate: migrate: gate 'mypy' is in verify.toml already: kept as it is" in \
        done.stderr
    text = (repo / "verify.toml").read_text()
    assert text.startswith(mine)  # what was there stays, byte for byte
    contract = tomllib.loads(text)
    assert contract["settings"] == {"jobs": 4}  # its own settings win
    names = [gate["name"] for gate in contract["gate"]]
    assert names[:2] == ["mypy", "check-yaml"] and names.count("mypy") == 1
    assert contract["gate"][0]["command"] == ["uv", "run", "mypy"]
    # A [tool.verifygate] table in pyproject.toml is added to the same way.
    (repo / "verify.toml").unlink()
    write(repo / "pyproject.toml", '[project]\nname = "x"\n\n[[tool.verifygate.gate]]\n'
          'name = "lint"\ncommand = "true"\n\n[tool.ruff]\nline-length = 99\n')
    done = verifygate("migrate", cwd=repo)
    assert done.returncode == 0, done.stderr
    data = tomllib.loads((repo / "pyproject.toml").read_text())
    assert data["tool"]["ruff"] == {"line-length": 99}
    assert data["tool"]["verifygate"]["settings"] == {"jobs": 1}
    gates = [gate["name"] for gate in data["tool"]["verifygate"]["gate"]]
    assert gates[0] == "lint" and gates.count("lint") == 1 and "mypy" in gates
    assert not (repo / "verify.toml").exists()
    assert verifygate("list", cwd=repo).returncode == 0


def test_lefthook(repo: Path) -> None:
    write(repo / "lefthook.yml", """\
pre-commit:
  parallel: true
  commands:
    lint:
      glob: "*.{py,pyi}"
      run: ruff check --force-exclude {staged_files}
    types:
      root: "src/"
      run: mypy .
    prettier:
      glob: "*.md"
      run: prettier --write {staged_files} && git add {staged_files}
pre-push:
  commands:
    tests:
      run: pytest -q
    lint:
      run: ruff check .
commit-msg:
  commands:
    message:
      run: grep -q . {1}
""")
    write(repo / "src" / "a.py", "")
    done = verifygate("migrate", cwd=repo)
    assert done.returncode == 0, done.stderr
    gates = {gate["name"]: gate for gate in tomllib.loads(
        (repo / "verify.toml").read_text())["gate"]}
    assert gates == {
        "lint": {"name": "lint", "command": "ruff check --force-exclude {files}",
                 "shell": True, "when_changed": ["*.py", "*.pyi"]},
        "types": {"name": "types", "command": "mypy .", "shell": True, "cwd": "src"},
        "prettier": {"name": "prettier", "command": "prettier --write {files} && git add "
                     "{files}", "shell": True, "when_changed": ["*.md"]},
        "tests": {"name": "tests", "command": "pytest -q", "shell": True,
                  "roles": ["pre-push"]},
        "pre-push-lint": {"name": "pre-push-lint", "command": "ruff check .", "shell": True,
                          "roles": ["pre-push"]},
    }
    assert "pre-commit 'prettier' stages what it fixed (git add / stage_fixed)" in done.stderr
    assert "commit-msg: only pre-commit and pre-push carry over" in done.stderr


@pytest.mark.parametrize("regex", ["(?x)^a\\.py  # the one", "(?i)^A", "^docs/"])
def test_grouped_regexes_keep_their_meaning(regex: str) -> None:
    import re

    from pytest_verifygate.migrate.precommit import _group

    for path in ("a.py", "A.py", "docs/x", "b.py"):
        assert bool(re.search(_group(regex), path)) == bool(re.search(regex, path))
