"""``verifygate run NAME...`` / ``list NAME...`` (only the named gates) and ``list -v``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import commit_all, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

CONTRACT = f"""
[[gate]]
name = "lint"
command = ["{sys.executable}", "-c", "import sys; print('lint', *sys.argv[1:])", "{{files}}"]
when_changed = ["**/*.py"]

[[gate]]
name = "unit tests"
command = ["{sys.executable}", "-c", "import sys; sys.exit(3)"]
"""


def test_run_names_only_the_named_gates(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    write(repo / "a.py", "x = 1\n")
    commit_all(repo)
    done = verifygate("run", "lint", "--all", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 of 2 gate(s) selected" in done.stdout
    assert "unit tests" not in done.stdout.split("selected", 1)[1].split("verdict")[0]
    failing = verifygate("run", "unit tests", cwd=repo)
    assert failing.returncode == 1


def test_a_misspelt_name_is_one_line_with_did_you_mean(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    for command in ("run", "list"):
        done = verifygate(command, "lnt", cwd=repo)
        assert done.returncode == 2
        assert done.stderr == ("verifygate: error: verify.toml has no gate named 'lnt' "
                               "(did you mean 'lint'?)\n")


def test_list_names_and_verbose_argv(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    write(repo / "a b.py", "x = 1\n")
    write(repo / "c.txt", "")
    commit_all(repo)
    done = verifygate("list", "-v", "--all", "lint", cwd=repo)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].split()[:2] == ["run", "lint"]
    assert lines[2].strip().startswith("$ ") and lines[2].endswith(" 'a b.py'"), lines[2]
    assert "unit tests" in lines[3] and "not named on the command line" in lines[3]
    assert len(lines) == 4  # a gate that is not run shows no argv
    payload = json.loads(verifygate("list", "-v", "--all", "--format", "json", cwd=repo).stdout)
    argvs = {gate["name"]: gate["argv"] for gate in payload["gates"]}
    assert argvs["lint"] == [[sys.executable, "-c", "import sys; print('lint', *sys.argv[1:])",
                              "a b.py"]]
    assert argvs["unit tests"] == [[sys.executable, "-c", "import sys; sys.exit(3)"]]


def test_a_gate_named_after_files_is_refused_not_taken_for_a_file(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    write(repo / "a.py", "x = 1\n")
    commit_all(repo)
    for command in ("run", "list"):
        done = verifygate(command, "--files", "a.py", "lint", cwd=repo)
        assert (done.returncode, done.stdout) == (2, ""), done.stdout
        assert done.stderr.endswith(
            f"--files lint: 'lint' is a gate, not a file: name gates before --files "
            f"(verifygate {command} lint --files ...), or after the files and -- (--files "
            "F... -- NAME)\n"), done.stderr
    # Both ways out work; a file that has a gate's name is a file.
    assert "1 of 2 gate(s) selected" in verifygate("run", "lint", "--files", "a.py",
                                                   cwd=repo).stdout
    assert "1 of 2 gate(s) selected" in verifygate("run", "--files", "a.py", "--", "lint",
                                                   cwd=repo).stdout
    write(repo / "lint", "")
    assert verifygate("list", "--files", "a.py", "lint", cwd=repo).returncode == 0
