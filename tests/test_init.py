"""``verifygate init``: a starter contract from the tools a project uses; never overwrites."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

from conftest import verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PYPROJECT = """\
[project]
name = "demo"

[tool.ruff]
line-length = 100

[tool.mypy]
files = ["src"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""


def test_init_writes_gates_for_the_tools_found(repo: Path) -> None:
    write(repo / "pyproject.toml", PYPROJECT)
    write(repo / "docs" / "conf.py", "")
    write(repo / "uv.lock", "")
    write(repo / "tox.ini", "[tox]\nenvlist = py3{10,11}-django, lint, docs\n")
    write(repo / "noxfile.py", "import nox\n\n@nox.session\ndef tests(session):\n    pass\n")
    done = verifygate("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("verifygate: wrote verify.toml: 5 gate(s) (ruff, ruff "
                                  "format, mypy, pytest, sphinx)")
    text = (repo / "verify.toml").read_text()
    assert "#:schema" not in text  # no URL that does not load (docs: Contract keys)
    assert "# tox environments: lint, docs:" in text and "# nox sessions: tests:" in text
    gates = {gate["name"]: gate for gate in tomllib.loads(text)["gate"]}
    assert gates["ruff"]["command"] == ["uv", "run", "ruff", "check", "--force-exclude",
                                        "{files}"]
    assert gates["ruff"]["types_or"] == ["python", "pyi"]
    # Passes of programs that read only files and config are cached; not of those that read
    # what is installed (README, "Result cache").
    assert [name for name, gate in gates.items() if gate.get("cache")] == ["ruff", "ruff-format"]
    assert gates["mypy"]["command"] == ["uv", "run", "mypy"]  # its config names the files
    assert "**/*.py" in gates["pytest"]["when_changed"]
    assert gates["docs"]["when_changed"][0] == "docs/**"
    listed = verifygate("list", "--files", "README.md", cwd=repo)
    assert listed.returncode == 0 and "0 of 5 gate(s) selected" in listed.stdout


def test_init_never_overwrites(repo: Path) -> None:
    write(repo / "pyproject.toml", PYPROJECT)
    write(repo / "verify.toml", "# mine\n")
    done = verifygate("init", cwd=repo)
    assert (done.returncode, done.stderr) == (2, "verifygate: error: verify.toml already "
                                                 "exists: not overwritten (verifygate list "
                                                 "shows its gates)\n")
    assert (repo / "verify.toml").read_text() == "# mine\n"
    (repo / "verify.toml").unlink()
    first = verifygate("init", "--pyproject", cwd=repo)
    assert first.returncode == 0, first.stderr
    data = tomllib.loads((repo / "pyproject.toml").read_text())
    assert data["tool"]["ruff"] == {"line-length": 100}  # the rest is kept as it was
    assert [gate["name"] for gate in data["tool"]["verifygate"]["gate"]] == [
        "ruff", "ruff-format", "mypy", "pytest"]
    again = verifygate("init", "--pyproject", cwd=repo)
    assert again.stderr == ("verifygate: error: pyproject.toml already has [tool.verifygate]: "
                            "not overwritten\n")
    assert verifygate("list", cwd=repo).returncode == 0


def test_init_with_nothing_to_find_says_what_to_do(repo: Path) -> None:
    done = verifygate("init", cwd=repo)
    assert done.returncode == 2
    assert done.stderr.startswith("verifygate: error: found no tool to make a gate of")
    assert not (repo / "verify.toml").exists()
