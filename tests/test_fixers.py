"""A gate that changes the files it was given (a fixer) fails, naming them, as pre-commit
fails a hook that modifies files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import commit_all, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

# Strips trailing spaces, as pre-commit-hooks' trailing-whitespace-fixer does.
FIXER = """\
import sys
for name in sys.argv[1:]:
    with open(name, encoding="utf-8") as f:
        text = f.read()
    fixed = "".join(line.rstrip() + "\\n" for line in text.splitlines())
    if fixed != text:
        with open(name, "w", encoding="utf-8") as f:
            f.write(fixed)
"""


def test_a_fixer_that_changes_files_fails_and_names_them(repo: Path) -> None:
    write(repo / "fix.py", FIXER)
    write(repo / "verify.toml", f"""
[[gate]]
name = "trailing-whitespace"
command = ["{sys.executable}", "fix.py", "{{files}}"]
when_changed = ["src/**"]
retries = 2
""")
    write(repo / "src" / "clean.txt", "fine\n")
    write(repo / "src" / "dirty.txt", "trailing   \n")
    commit_all(repo)
    done = verifygate("run", "--all", "--format", "json", cwd=repo)
    assert done.returncode == 1, done.stderr
    gate = json.loads(done.stdout)["gates"][0]
    assert (gate["outcome"], gate["code"], gate["exit_code"]) == ("failed", "command_failed", 0)
    assert gate["modified_files"] == ["src/dirty.txt"]
    assert gate["reason"] == "files were modified by this gate: src/dirty.txt"
    assert gate["output_tail"].endswith("verifygate: files were modified by this gate: "
                                        "src/dirty.txt\n")
    assert gate["attempts"] == 1  # a retry would check what the first run fixed
    assert (repo / "src" / "dirty.txt").read_text() == "trailing\n"
    # Every headline says why a gate that exited 0 failed.
    write(repo / "src" / "dirty.txt", "trailing again   \n")
    shown = verifygate("run", "--all", cwd=repo).stdout
    assert "FAIL  trailing-whitespace  [command_failed] modified the files it was given (exit " \
        "status 0)" in shown, shown
    assert "failed: command_failed, modified the files it was given (exit status 0)" in shown
    again = verifygate("run", "--all", cwd=repo)  # fixed now: nothing left to change
    assert again.returncode == 0, again.stdout
    text = verifygate("run", "--files", "src/dirty.txt", cwd=repo)
    assert text.returncode == 0


def test_a_checker_that_only_reads_passes(repo: Path) -> None:
    write(repo / "verify.toml", f"""
[[gate]]
name = "read"
command = ["{sys.executable}", "-c", "import sys; [open(f).read() for f in sys.argv[1:]]",
           "{{files}}"]
""")
    write(repo / "a.txt", "x \n")
    commit_all(repo)
    done = verifygate("run", "--all", "--format", "json", cwd=repo)
    assert done.returncode == 0, done.stdout
    assert "modified_files" not in json.loads(done.stdout)["gates"][0]
