"""Shared fixtures: real git repositories in temporary directories."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest


def git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """Run git in ``repo`` (with ``env``, else ours) and return its stdout; a failure is an
    AssertionError that shows git's output."""
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} exited {done.returncode} in {repo}:\n"
                             f"{done.stdout}\n{done.stderr}")
    return done.stdout


def init_repo(path: Path) -> Path:
    """Make ``path`` a git repository on ``main`` with an identity and unsigned commits."""
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "test@example.invalid")
    git(path, "config", "user.name", "Test")
    git(path, "config", "commit.gpgsign", "false")
    return path


# What makes verifygate speak to CI (change base, annotations, step summary). This suite may run
# on GitHub Actions or GitLab CI itself: no test sees them unless it sets them.
CI_VARIABLES = ("GITHUB_ACTIONS", "GITHUB_BASE_REF", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT",
                "CI_MERGE_REQUEST_DIFF_BASE_SHA")


@pytest.fixture(autouse=True)
def _private_state_home(tmp_path_factory: pytest.TempPathFactory,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    """verifygate's per-user state (session records, round counts, cached passes) goes to a
    directory of this test, never to the home of whoever runs the tests: tests reuse session
    ids, and each is a session of its own."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))


@pytest.fixture(autouse=True)
def _no_ci_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CI_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty git repository with an identity, as the current directory."""
    path = tmp_path / "repo"
    path.mkdir()
    init_repo(path)
    monkeypatch.chdir(path)
    for name in ("PRE_COMMIT", "PRE_COMMIT_FROM_REF", "PRE_COMMIT_TO_REF",
                 "VERIFYGATE_CHANGED_FROM", *CI_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def commit_all(repo: Path, message: str = "commit") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


# A gate's script that logs when it starts and ends (the order and overlap of gates):
# argv[1]: the log, argv[2]: the gate's name, argv[3]: seconds between start and end.
LOGGING = """\
import os, sys, time
def log(word):
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"{word} {sys.argv[2]}\\n".encode())
    os.close(fd)
log("start")
time.sleep(float(sys.argv[3]))
log("end")
"""


PYTHON = os.environ.get("PYTHON_FOR_GATES", "python3")


def verifygate(*args: str, cwd: Path, stdin: str | None = None,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The ``verifygate`` command line run by a Python of its own, in ``cwd``."""
    import sys

    return subprocess.run(
        [sys.executable, "-m", "pytest_verifygate", *args],
        cwd=cwd, capture_output=True, text=True, input=stdin,
        env={**os.environ, **(env or {})},
    )


# pytest's xunit2 schema (its default junit_family), vendored: see tests/data/README.md.
JUNIT_SCHEMA = Path(__file__).parent / "data" / "junit-10.xsd"
SUREFIRE_SCHEMA = Path(__file__).parent / "data" / "surefire-test-report.xsd"


def validate_junit(path: Path) -> None:
    """Fail unless the JUnit file at ``path`` is valid against pytest's ``junit-10.xsd``."""
    import xmlschema

    xmlschema.XMLSchema(str(JUNIT_SCHEMA)).validate(str(path))


def validate_surefire(path: Path) -> None:
    """Fail unless each ``<testsuite>`` of the JUnit file at ``path`` is valid against Maven
    Surefire's ``surefire-test-report.xsd`` (whose files hold one suite each)."""
    import xml.etree.ElementTree as ET

    import xmlschema

    schema = xmlschema.XMLSchema(str(SUREFIRE_SCHEMA))
    for suite in ET.parse(path).getroot().iter("testsuite"):
        schema.validate(suite)


def read_output_file(path: Path) -> dict[str, str]:
    """``$GITHUB_OUTPUT`` as the runner reads it: ``name=value`` and ``name<<DELIMITER``."""
    outputs: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").splitlines()) if path.exists() else iter(())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value: list[str] = []
            for part in lines:
                if part == delimiter:
                    break
                value.append(part)
            else:
                raise AssertionError(f"{name}: no closing delimiter")
            outputs[name] = "\n".join(value)
        elif line:
            name, value_text = line.split("=", 1)
            outputs[name] = value_text
    return outputs


def work_state(repo: Path) -> dict[str, object]:
    """Everything of the user's a check must leave as it found it: each path of the work tree
    (``.git`` and ``__pycache__`` aside) with its kind, mode and bytes or link target, empty
    directories included; the index's entries; the stash list."""
    import stat

    files: dict[str, object] = {}
    for directory, subdirs, names in os.walk(repo):
        # Bytecode a gate writes when it imports the project is ignored: the environment.
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__"
                            and not (directory == str(repo) and d == ".git"))
        for name in [*subdirs, *names]:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            key = os.path.relpath(path, repo)
            if stat.S_ISLNK(info.st_mode):
                files[key] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                files[key] = ("dir", stat.S_IMODE(info.st_mode))
            else:
                files[key] = ("file", stat.S_IMODE(info.st_mode), Path(path).read_bytes())
    # What the index holds and how each entry is flagged; ``git commit`` itself rewrites its
    # bytes (refreshed file stamps), even when a hook refuses the commit.
    return {"files": files, "index": git(repo, "ls-files", "-s", "-v"),
            "stash": git(repo, "stash", "list")}
