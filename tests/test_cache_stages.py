"""The result cache across stages and per file: the same content is never checked twice.

Real git repositories, real hooks, a gate program that records the files it was given.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from plugin_support import QUIET_PLUGINS, init_repo, python, write_contract

from conftest import commit_all, git, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

# A gate program that appends the files it was given, one run per line, to ``argv[1]``, and
# fails if any of them starts with the word "broken"; options are not recorded.
RECORDING = (
    "import sys; files = [arg for arg in sys.argv[2:] if not arg.startswith('-')]; "
    "open(sys.argv[1], 'a').write(' '.join(files) + '\\n'); "
    "sys.exit(1 if any(open(f).read().startswith('broken') for f in files) else 0)"
)


def gate_report(repo: Path, *args: str, status: int = 0) -> dict[str, Any]:
    """``verifygate run ARGS``: the report's only gate."""
    path = repo.parent / "report.json"
    done = verifygate("run", "--json", str(path), *args, cwd=repo)
    assert done.returncode == status, done.stdout + done.stderr
    gates: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["gates"]
    assert len(gates) == 1, gates
    return gates[0]


def runs(record: Path) -> list[list[str]]:
    """What each run of the gate was given."""
    if not record.exists():
        return []
    return [line.split() for line in record.read_text().splitlines()]


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "record"


def lint_contract(repo: Path, record: Path, **gate: Any) -> None:
    # serial: one process a run, whatever the cores (each run is one line of the record).
    write_contract(repo, {"name": "lint", "command": [*python(RECORDING, str(record)), "{files}"],
                          "when_changed": ["src/**/*.py"], "cache": True, "serial": True, **gate})


@pytest.mark.parametrize("change", ["deletion", "rename"])
def test_a_work_tree_change_keys_the_same_once_staged(repo: Path, record: Path,
                                                      change: str) -> None:
    lint_contract(repo, record)
    for index in range(3):
        write(repo / "src" / f"m{index}.py", f"x = {index}\n")
    commit_all(repo)
    write(repo / "src" / "m0.py", "x = 10\n")  # an edit, so that {files} is not empty
    if change == "deletion":
        (repo / "src" / "m1.py").unlink()  # deleted in the work tree only
    else:
        (repo / "src" / "m1.py").rename(repo / "src" / "moved.py")  # untracked new name
    first = gate_report(repo, "--changed-from", "HEAD")
    assert first["outcome"] == "passed" and first["cached"] is False
    git(repo, "add", "-A")
    second = gate_report(repo, "--staged")
    assert second["outcome"] == "passed" and second["cached"] is True, second
    assert len(runs(record)) == 1


def test_the_same_content_is_checked_once_from_edit_to_push(repo: Path, record: Path,
                                                            tmp_path: Path) -> None:
    lint_contract(repo, record)
    for index in range(3):
        write(repo / "src" / f"m{index}.py", f"x = {index}\n")
    commit_all(repo)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")
    assert verifygate("install", "--hook", "pre-push", cwd=repo).returncode == 0
    # The agent's stop: edits, a deletion and a rename, nothing staged.
    write(repo / "src" / "m0.py", "x = 10\n")
    (repo / "src" / "m1.py").unlink()
    (repo / "src" / "m2.py").rename(repo / "src" / "n2.py")
    write(repo / "src" / "new.py", "y = 1\n")
    stop = gate_report(repo, "--changed-from", "HEAD")
    assert (stop["outcome"], stop["cached"]) == ("passed", False)
    git(repo, "add", "-A")
    assert gate_report(repo, "--staged")["cached"] is True  # the commit's pre-commit hook
    git(repo, "commit", "-q", "-m", "work")
    assert gate_report(repo, "--changed-from", "HEAD~1")["cached"] is True  # the commit
    pushed = subprocess.run(["git", "push", "origin", "main"], cwd=repo, capture_output=True,
                            text=True)
    assert pushed.returncode == 0, pushed.stderr
    assert re.search(r"PASS  lint\s+cached", pushed.stdout), pushed.stdout
    assert len(runs(record)) == 1, runs(record)


def ten_files(repo: Path) -> list[str]:
    names = [f"src/m{index}.py" for index in range(10)]
    for name in names:
        write(repo / name, f"x = {name!r}\n")
    write(repo / "pyproject.toml", "[tool.lint]\nstrict = true\n")
    commit_all(repo)
    return names


def test_a_second_round_checks_only_the_file_that_changed(repo: Path, record: Path) -> None:
    lint_contract(repo, record)
    names = ten_files(repo)
    assert gate_report(repo, "--all")["cached"] is False
    assert sorted(runs(record)[-1]) == names
    write(repo / "src" / "m4.py", "x = 'edited'\n")
    second = gate_report(repo, "--all")
    assert (second["outcome"], second["cached"]) == ("passed", False)
    assert runs(record)[-1] == ["src/m4.py"]
    third = gate_report(repo, "--all")  # every file passed before: nothing is spawned
    assert (third["outcome"], third["cached"]) == ("passed", True)
    assert len(runs(record)) == 2
    git(repo, "checkout", "--", "src/m4.py")  # content that passed in the first round
    assert gate_report(repo, "--all")["cached"] is True
    assert len(runs(record)) == 2


def test_a_changed_context_file_checks_every_file_again(repo: Path, record: Path) -> None:
    lint_contract(repo, record)
    names = ten_files(repo)
    gate_report(repo, "--all")
    write(repo / "pyproject.toml", "[tool.lint]\nstrict = false\n")  # not in when_changed
    write(repo / "src" / "m4.py", "x = 'edited'\n")  # so that the whole gate's key changes
    gate_report(repo, "--all")
    assert len(runs(record)) == 2 and sorted(runs(record)[-1]) == names


def test_a_failing_file_is_checked_every_time(repo: Path, record: Path) -> None:
    lint_contract(repo, record)
    ten_files(repo)
    gate_report(repo, "--all")
    write(repo / "src" / "m3.py", "broken\n")
    for _ in range(2):
        failed = gate_report(repo, "--all", status=1)
        assert (failed["outcome"], failed["cached"]) == ("failed", False)
        assert runs(record)[-1] == ["src/m3.py"]
    assert len(runs(record)) == 3


def test_a_changed_command_or_tool_checks_every_file_again(repo: Path, record: Path,
                                                           tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "lint-tool"
    write(tool, f"#!{sys.executable}\n{RECORDING.replace('; ', chr(10))}\n")
    tool.chmod(0o755)
    write_contract(repo, {"name": "lint", "command": [str(tool), str(record), "{files}"],
                          "when_changed": ["src/**/*.py"], "cache": True, "serial": True})
    names = ten_files(repo)
    gate_report(repo, "--all")
    gate_report(repo, "--all")
    assert len(runs(record)) == 1
    write(tool, tool.read_text() + "# upgraded\n")  # a new version of the tool
    gate_report(repo, "--all")
    assert len(runs(record)) == 2 and sorted(runs(record)[-1]) == names
    write_contract(repo, {"name": "lint", "command": [str(tool), str(record), "-v", "{files}"],
                          "when_changed": ["src/**/*.py"], "cache": True, "serial": True})
    gate_report(repo, "--all")
    assert len(runs(record)) == 3 and sorted(runs(record)[-1]) == names


def test_gates_without_when_changed_are_not_reused_per_file(repo: Path, record: Path) -> None:
    write_contract(repo, {"name": "lint", "command": [*python(RECORDING, str(record)), "{files}"],
                          "cache": True, "serial": True})
    names = ten_files(repo)
    gate_report(repo, "--all")
    write(repo / "src" / "m4.py", "x = 'edited'\n")
    gate_report(repo, "--all")
    assert sorted(runs(record)[-1]) == sorted([*names, "pyproject.toml", "verify.toml"])
    assert not list((repo / ".git" / "verifygate" / "cache").glob("f-*.json"))


@pytest.mark.parametrize("when_changed", [None, ["src/**"]])
def test_a_gate_by_file_type_is_reused_per_file(repo: Path, record: Path,
                                                when_changed: list[str] | None) -> None:
    """As ``verifygate init`` writes ruff's gate: file types, no ``when_changed``; or with a
    ``when_changed`` that also matches files of other types, which are its context."""
    gate: dict[str, Any] = {"name": "lint", "types": ["python"], "cache": True, "serial": True,
                            "command": [*python(RECORDING, str(record)), "{files}"]}
    write_contract(repo, gate if when_changed is None else {**gate, "when_changed": when_changed})
    names = ten_files(repo)
    write(repo / "src" / "settings.cfg", "[lint]\n")
    commit_all(repo)
    gate_report(repo, "--all")
    write(repo / "src" / "m4.py", "x = 'edited'\n")
    gate_report(repo, "--all")
    assert runs(record)[-1] == ["src/m4.py"]
    write(repo / "src" / "settings.cfg", "[lint]\nstrict = 1\n")  # not a python file
    write(repo / "src" / "m4.py", "x = 'edited again'\n")
    gate_report(repo, "--all")
    assert len(runs(record)) == 3 and sorted(runs(record)[-1]) == names


def test_a_run_answered_from_the_cache_makes_no_log_directory(repo: Path, record: Path) -> None:
    lint_contract(repo, record)
    ten_files(repo)
    logs = repo / ".git" / "verifygate" / "logs"
    gate_report(repo, "--all")
    kept = sorted(logs.iterdir())
    assert len(kept) == 1
    assert gate_report(repo, "--all")["cached"] is True
    assert sorted(logs.iterdir()) == kept  # the log of the run that ran is still there


def test_a_new_judged_file_checks_every_file_again(repo: Path, record: Path) -> None:
    """A tool that judges each file may look for the others (isort and ruff's first-party
    modules: ``import foo`` sorts differently once ``foo.py`` exists)."""
    lint_contract(repo, record)
    names = ten_files(repo)
    gate_report(repo, "--all")
    write(repo / "src" / "foo.py", "z = 1\n")
    git(repo, "add", "src/foo.py")
    gate_report(repo, "--all")
    assert sorted(runs(record)[-1]) == sorted([*names, "src/foo.py"])
    assert gate_report(repo, "--all")["cached"] is True


# --------------------------------------------------------------------------------------------
# A real tool whose configuration is among the files it judges: codespell with types = ["text"],
# as verifygate migrate writes it, reads pyproject.toml and checks its spelling too.


@pytest.fixture
def codespell(monkeypatch: pytest.MonkeyPatch) -> None:
    """codespell on PATH, as a project's environment has it."""
    found = shutil.which("codespell", path=os.path.dirname(sys.executable))
    if found is None:
        pytest.skip("codespell is not installed (pip install -e '.[test]')")
    monkeypatch.setenv("PATH", f"{os.path.dirname(found)}{os.pathsep}{os.environ['PATH']}")


CODESPELL_HOOK = """\
repos:
  - repo: https://github.com/codespell-project/codespell
    rev: v2.4.1
    hooks:
      - id: codespell
"""


def codespell_project(repo: Path, config: str) -> None:
    """codespell's gate as ``verifygate migrate`` writes it: ``types = ["text"]``, cached."""
    write(repo / "pyproject.toml", f"[tool.codespell]\n{config}\n")
    write(repo / ".pre-commit-config.yaml", CODESPELL_HOOK)
    assert verifygate("migrate", cwd=repo).returncode == 0
    assert 'cache = true' in (repo / "verify.toml").read_text()
    write(repo / "notes.txt", "teh cat\n")
    for index in range(3):
        write(repo / "docs" / f"page{index}.md", f"page {index}\n")
    commit_all(repo)


@pytest.mark.usefixtures("codespell")
def test_a_configuration_the_gate_also_judges_checks_every_file_again(repo: Path) -> None:
    codespell_project(repo, 'ignore-words-list = "teh"')
    assert gate_report(repo, "--all")["outcome"] == "passed"
    write(repo / "pyproject.toml", '[tool.codespell]\nignore-words-list = "zzz"\n')
    failed = gate_report(repo, "--all", status=1)
    assert "notes.txt:1: teh ==> the" in failed["output_tail"]


@pytest.mark.usefixtures("codespell")
def test_a_file_the_configuration_names_checks_every_file_again(repo: Path) -> None:
    write(repo / "words.txt", "teh\n")  # a text file codespell judges, and its word list
    codespell_project(repo, 'ignore-words = "words.txt"')
    assert gate_report(repo, "--all")["outcome"] == "passed"
    write(repo / "words.txt", "zzz\n")
    failed = gate_report(repo, "--all", status=1)
    assert "notes.txt:1: teh ==> the" in failed["output_tail"]


@pytest.mark.usefixtures("codespell")
def test_pytest_items_see_a_changed_configuration(pytester: pytest.Pytester,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    # pytester's own output, written into the project while it runs
    write(pytester.path / ".gitignore", "runpytest-*\nstdout\nstderr\n")
    codespell_project(pytester.path, 'ignore-words-list = "teh"')
    args = ("--verify-contract", "-p", "no:cacheprovider", "-v")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    pytester.runpytest_subprocess(*args).stdout.fnmatch_lines(["*PASSED (cached)*"])
    write(pytester.path / "pyproject.toml", '[tool.codespell]\nignore-words-list = "zzz"\n')
    failed = pytester.runpytest_subprocess(*args)
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*notes.txt:1: teh ==> the*"])


# --------------------------------------------------------------------------------------------
# A file changed while the gate reads it and put back: same content, same size and mtime.

SWAPPING = (
    "import os, sys\n"
    "marker, path = sys.argv[1], sys.argv[2]\n"
    "if os.path.exists(marker):\n"
    "    os.remove(marker)\n"
    "    data, info = open(path, 'rb').read(), os.stat(path)\n"
    "    open(path, 'r+b').write(b'clean'.ljust(len(data)))\n"
    "    ok = not open(path, 'rb').read().startswith(b'broken')\n"
    "    open(path, 'r+b').write(data)\n"
    "    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))\n"
    "else:\n"
    "    ok = not open(path, 'rb').read().startswith(b'broken')\n"
    "sys.exit(0 if ok else 1)\n"
)


@pytest.mark.parametrize("per_file", [False, True], ids=["whole", "per-file"])
def test_a_file_put_back_while_the_gate_ran_is_not_stored(repo: Path, tmp_path: Path,
                                                          per_file: bool) -> None:
    marker = write(tmp_path / "swap-once", "")
    target = "{files}" if per_file else "src/m0.py"
    write_contract(repo, {"name": "lint", "command": [*python(SWAPPING, str(marker)), target],
                          "when_changed": ["src/m0.py"], "cache": True})
    write(repo / "src" / "m0.py", "broken = True\n")
    commit_all(repo)
    before = os.stat(repo / "src" / "m0.py")
    # The gate read a clean file: it passed, and the broken one is back as it was.
    assert gate_report(repo, "--all")["outcome"] == "passed"
    after = os.stat(repo / "src" / "m0.py")
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size, before.st_mtime_ns, before.st_ino)
    again = gate_report(repo, "--all", status=1)
    assert (again["outcome"], again["cached"]) == ("failed", False)
