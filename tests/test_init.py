"""``verifygate init``: a starter contract from the tools a project uses; never overwrites."""

from __future__ import annotations

import os
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


def installed(where: Path, *programs: str) -> dict[str, str]:
    """An environment whose PATH finds ``programs`` (stand-ins that do nothing) first."""
    where.mkdir(exist_ok=True)
    for program in programs:
        write(where / program, "#!/bin/sh\n")
        (where / program).chmod(0o755)
    return {"PATH": f"{where}{os.pathsep}{os.environ['PATH']}"}


def test_init_writes_gates_for_the_tools_found(repo: Path, tmp_path: Path) -> None:
    write(repo / "pyproject.toml", PYPROJECT)
    write(repo / "README.md", "# project\n")
    write(repo / "docs" / "conf.py", "")
    write(repo / "uv.lock", "")
    write(repo / "tox.ini", "[tox]\nenvlist = py3{10,11}-django, lint, docs\n")
    write(repo / "noxfile.py", "import nox\n\n@nox.session\ndef tests(session):\n    pass\n")
    # uv installed, the project's .venv not made yet: uv run makes it with every tool.
    done = verifygate("init", cwd=repo, env=installed(tmp_path / "bin", "uv"))
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


def test_init_never_overwrites(repo: Path, tmp_path: Path) -> None:
    env = installed(tmp_path / "bin", "ruff", "mypy", "pytest")
    write(repo / "pyproject.toml", PYPROJECT)
    write(repo / "verify.toml", "# mine\n")
    done = verifygate("init", cwd=repo)
    assert (done.returncode, done.stderr) == (2, "verifygate: error: verify.toml already "
                                                 "exists: not overwritten (verifygate list "
                                                 "shows its gates; verifygate migrate adds a "
                                                 "pre-commit config's)\n")
    assert (repo / "verify.toml").read_text() == "# mine\n"
    (repo / "verify.toml").unlink()
    first = verifygate("init", "--pyproject", cwd=repo, env=env)
    assert first.returncode == 0, first.stderr
    data = tomllib.loads((repo / "pyproject.toml").read_text())
    assert data["tool"]["ruff"] == {"line-length": 100}  # the rest is kept as it was
    assert [gate["name"] for gate in data["tool"]["verifygate"]["gate"]] == [
        "ruff", "ruff-format", "mypy", "pytest"]
    again = verifygate("init", "--pyproject", cwd=repo)
    assert again.stderr == ("verifygate: error: pyproject.toml already has [tool.verifygate]: "
                            "not overwritten (verifygate list shows its gates; verifygate "
                            "migrate adds a pre-commit config's)\n")
    assert verifygate("list", cwd=repo).returncode == 0


def test_init_with_nothing_to_find_says_what_to_do(repo: Path) -> None:
    done = verifygate("init", cwd=repo)
    assert done.returncode == 2
    assert done.stderr.startswith("verifygate: error: found no tool to make a gate of")
    assert not (repo / "verify.toml").exists()


def test_init_writes_only_commands_that_resolve_here(repo: Path, tmp_path: Path) -> None:
    write(repo / "pyproject.toml", PYPROJECT)
    write(repo / "uv.lock", "")
    write(repo / "docs" / "conf.py", "")
    # uv.lock, but no uv: the tools on PATH run as they are; mypy and sphinx are not there.
    env = installed(tmp_path / "bin", "ruff", "pytest")
    done = verifygate("init", cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("verifygate: wrote verify.toml: 3 gate(s) (ruff, ruff "
                                  "format, pytest)")
    assert done.stderr.splitlines() == [
        "verifygate: init: uv.lock: uv is not on PATH here: the gates run the tools from PATH",
        "verifygate: init: not written: gate 'mypy': mypy is not installed here (it is in the "
        "file as a comment: install it, then uncomment it)",
        "verifygate: init: not written: gate 'docs': sphinx-build is not installed here (it is "
        "in the file as a comment: install it, then uncomment it)"]
    text = (repo / "verify.toml").read_text()
    gates = {gate["name"]: gate["command"] for gate in tomllib.loads(text)["gate"]}
    assert gates["ruff"][:2] == ["ruff", "check"]
    assert "# [[gate]]\n# name = 'mypy'\n# command = ['mypy']\n" in text
    check = verifygate("check", cwd=repo, env=env)
    assert "0 error(s)" in check.stdout, check.stdout + check.stderr
    # uv installed and the project's .venv made: what .venv/bin lacks is not written.
    (repo / "verify.toml").unlink()
    write(repo / ".venv" / "bin" / "mypy", "")
    done = verifygate("init", cwd=repo, env=installed(tmp_path / "bin", "uv"))
    gates = {gate["name"]: gate["command"] for gate in
             tomllib.loads((repo / "verify.toml").read_text())["gate"]}
    assert gates == {"ruff": ["uv", "run", "ruff", "check", "--force-exclude", "{files}"],
                     "ruff-format": ["uv", "run", "ruff", "format", "--check",
                                     "--force-exclude", "{files}"],
                     "mypy": ["uv", "run", "mypy"],
                     "pytest": ["uv", "run", "python", "-m", "pytest", "-q"]}
    assert "gate 'docs': sphinx-build is not installed here" in done.stderr
    # Nothing installed at all: an error, not a contract of gates that cannot start.
    (repo / "verify.toml").unlink()
    done = verifygate("init", cwd=repo, env={"PATH": str(tmp_path / "empty")})
    assert (done.returncode, done.stderr) == (2, (
        "verifygate: error: found ruff, ruff-format, mypy, pytest, docs, but none is installed "
        "here: install the project's tools (or activate its virtualenv), then run verifygate "
        "init again\n"))


def test_init_names_the_environments_of_tox_4s_toml(repo: Path, tmp_path: Path) -> None:
    write(repo / "pyproject.toml", PYPROJECT + '\n[tool.tox]\nenv_list = ["py3.13", "pypy311", '
          '"style", "typing"]\n')
    done = verifygate("init", cwd=repo, env=installed(tmp_path / "bin", "ruff", "mypy", "pytest"))
    assert done.returncode == 0, done.stderr
    assert "# tox environments: style, typing: a gate per environment to check, e.g. " \
        'command = "tox -e style".' in (repo / "verify.toml").read_text()
