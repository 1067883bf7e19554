"""The helpers every test shares: real git repositories in temporary directories, the
``verifygate`` command line in a process of its own, and the agent hook fed each agent's
payload."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_verifygate.agents.session_start import record_start
from pytest_verifygate.contract import find_repo_root


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


# What else of the environment this suite may run in changes what verifygate does: a pre-commit
# hook, a GitLab shard, a role, a change base.
CALLER_VARIABLES = ("PRE_COMMIT", "PRE_COMMIT_FROM_REF", "PRE_COMMIT_TO_REF", "CI_NODE_INDEX",
                    "CI_NODE_TOTAL", "VERIFYGATE_ROLE", "VERIFYGATE_CHANGED_FROM")


@pytest.fixture(autouse=True)
def _no_ci_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*CI_VARIABLES, *CALLER_VARIABLES):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty git repository with an identity, as the current directory."""
    path = tmp_path / "repo"
    path.mkdir()
    init_repo(path)
    monkeypatch.chdir(path)
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


def verifygate(*args: str, cwd: Path, stdin: str | bytes | None = None,
               env: Mapping[str, str] | None = None, status: int | None = None,
               text: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[Any]:
    """The ``verifygate`` command line run by a Python of its own in ``cwd``, with ``env`` over
    ours and ``stdin`` as its input (else none); its output as text, or bytes (``text=False``).
    ``status``: the exit status it must end with."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest_verifygate", *args], cwd=cwd, capture_output=True,
        text=text, input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
        env={**os.environ, **(env or {})}, timeout=timeout,
    )
    if status is not None:
        assert done.returncode == status, done
    return done


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


# --------------------------------------------------------------------------------------------
# the agent hook

# Where the hook runs unless a test says: some directory outside any git repository (a payload
# that cannot be read is counted in the repository the hook runs in: never a test's).
ELSEWHERE = Path(tempfile.gettempdir())


def begun(cwd: Path, session: str) -> None:
    """Record the session's start in ``cwd`` as its start hook would, unless it has one."""
    root = find_repo_root(cwd)
    if root is not None:
        record_start(cwd, root, session)


# Each agent's hook payload, as its documentation shapes it.

def claude(cwd: Path, session: str, *, active: bool = False, event: str = "Stop",
           **extra: Any) -> dict[str, Any]:
    return {"session_id": session, "transcript_path": "/nonexistent/transcript.jsonl",
            "cwd": str(cwd), "permission_mode": "default", "hook_event_name": event,
            "stop_hook_active": active, **extra}


def codex(cwd: Path, session: str, *, active: bool = False, event: str = "Stop",
          **extra: Any) -> dict[str, Any]:
    # Codex's stop.command.input schema: every key required.
    return {"session_id": session, "turn_id": "turn-7", "transcript_path": None,
            "cwd": str(cwd), "hook_event_name": event, "model": "gpt-5-codex",
            "permission_mode": "default", "stop_hook_active": active,
            "last_assistant_message": "Done: the sign is fixed.", **extra}


def cursor(cwd: Path, session: str, *, loop_count: int = 0, status: str = "completed",
           **extra: Any) -> dict[str, Any]:
    return {"conversation_id": session, "generation_id": "gen-42", "model": "claude-4-sonnet",
            "hook_event_name": "stop", "cursor_version": "1.7.2",
            "workspace_roots": [str(cwd)], "user_email": "dev@example.invalid",
            "status": status, "loop_count": loop_count, **extra}


def gemini(cwd: Path, session: str, *, active: bool = False, event: str = "AfterAgent",
           **extra: Any) -> dict[str, Any]:
    payload = {"session_id": session, "transcript_path": "/nonexistent/session.json",
               "cwd": str(cwd), "hook_event_name": event, "timestamp": "2025-12-01T10:30:00Z"}
    if event == "AfterAgent":
        payload |= {"prompt": "Fix the sign in calc.py", "prompt_response": "Done.",
                    "stop_hook_active": active}
    return payload | extra


PAYLOADS: dict[str, Callable[..., dict[str, Any]]] = {
    "claude": claude, "codex": codex, "cursor": cursor, "gemini": gemini}


@dataclass(frozen=True)
class HookRun:
    """One run of the hook: its exit status, stdout, stderr and how long it took."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def __post_init__(self) -> None:
        assert "Traceback" not in self.stderr, self.stderr
        if self.stdout:  # one JSON object on one line, and nothing else (Gemini CLI requires it)
            assert self.stdout.endswith("\n") and self.stdout.count("\n") == 1, self

    @property
    def json(self) -> dict[str, Any] | None:
        return json.loads(self.stdout) if self.stdout else None

    @property
    def blocked(self) -> bool:
        return self.json is not None and self.json.get("decision") == "block"

    @property
    def reason(self) -> str:
        assert self.json is not None and self.blocked, self
        reason: str = self.json["reason"]
        return reason

    @property
    def message(self) -> str:
        assert self.json is not None and "decision" not in self.json, self
        message: str = self.json["systemMessage"]
        return message


def run_hook(payload: Mapping[str, Any] | bytes, *args: str, cwd: Path = ELSEWHERE,
             env: Mapping[str, str] | None = None, status: int | None = 0,
             timeout: float = 120) -> HookRun:
    """``verifygate agent-hook`` run in ``cwd`` on ``payload`` (an object, sent as JSON, or
    bytes as they are); ``status``: the exit status it must end with."""
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    started = time.monotonic()
    done = verifygate("agent-hook", *args, cwd=cwd, stdin=raw, env=env, status=status,
                      text=False, timeout=timeout)
    return HookRun(done.returncode, done.stdout.decode(), done.stderr.decode(),
                   time.monotonic() - started)


def stop(repo: Path, *args: str, agent: str = "claude", session: str = "s-1",
         begin: bool = True, env: Mapping[str, str] | None = None, timeout: float = 120,
         **fields: Any) -> HookRun:
    """The hook on the stop (or the event ``fields`` name) ``agent`` sends for ``repo``.
    ``begin``: the session's start recorded first, as its start hook would."""
    if begin:
        begun(repo, session)
    return run_hook(PAYLOADS[agent](repo, session, **fields), *args, env=env, timeout=timeout)
