"""Color as pytest does it, and the closing "slowest gates" / "failed gates" summary.

``verifygate run`` colors its gate lines and verdict on a terminal (a real pseudo-terminal
here) and nowhere else: not in pipes, files, JSON, JUnit or the agent digest. ``--color``
and the ``PY_COLORS`` / ``NO_COLOR`` / ``FORCE_COLOR`` variables decide as they do for pytest.
Under pytest, the plugin's summary lines use pytest's own markup, so pytest's ``--color``
decides.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plugin_support import QUIET_PLUGINS, init_repo, write_contract
from pytest_verifygate.report.terminal import color_wanted

from conftest import verifygate, write

PY = sys.executable
ESC = "\x1b["
COLOR_VARIABLES = ("NO_COLOR", "FORCE_COLOR", "PY_COLORS", "TERM")
GREEN_PASS = f"{ESC}32mPASS{ESC}0m"
RED_FAIL = f"{ESC}31mFAIL{ESC}0m"


def gates(repo: Path, *, failing: bool = True) -> None:
    write(repo / "verify.toml",
          f'[[gate]]\nname = "lint"\ncommand = ["{PY}", "-c", "print(1)"]\n'
          f'[[gate]]\nname = "slow"\ncommand = ["{PY}", "-c", "import time; time.sleep(0.3)"]\n'
          + (f'[[gate]]\nname = "types"\ncommand = ["{PY}", "-c", '
             '"import sys; print(\'a.py:1: error\'); sys.exit(3)"]\n' if failing else ""))


@pytest.fixture(autouse=True)
def _no_color_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what a test sets decides on color, not the settings of whoever runs the tests."""
    for name in COLOR_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def environment(**values: str) -> dict[str, str]:
    return {**os.environ, "TERM": "xterm-256color", **values}


def in_terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``argv`` with stdout and stderr on a new pseudo-terminal; its status and output."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               stdout=terminal, stderr=terminal, close_fds=True)
    os.close(terminal)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.5)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: every writer to the terminal has closed it
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(controller)
        status = process.wait(timeout=30)
    return status, b"".join(chunks).decode("utf-8", "replace")


# -- the decision, as pytest's ------------------------------------------------------------


class Terminal:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(("choice", "tty", "env", "expected"), [
    ("auto", True, {}, True),
    ("auto", False, {}, False),
    ("auto", True, {"TERM": "dumb"}, False),
    ("auto", True, {"NO_COLOR": "1"}, False),
    ("auto", True, {"NO_COLOR": ""}, True),  # empty: not set
    ("auto", False, {"FORCE_COLOR": "1"}, True),
    ("auto", True, {"NO_COLOR": "1", "FORCE_COLOR": "1"}, False),
    ("auto", True, {"PY_COLORS": "0"}, False),
    ("auto", False, {"PY_COLORS": "1"}, True),
    ("auto", True, {"PY_COLORS": "1", "NO_COLOR": "1"}, True),
    ("auto", False, {"PY_COLORS": "0", "FORCE_COLOR": "1"}, False),
    ("yes", False, {"PY_COLORS": "0", "NO_COLOR": "1"}, True),
    ("no", True, {"PY_COLORS": "1", "FORCE_COLOR": "1"}, False),
])
def test_color_is_decided_as_pytest_decides(choice: str, tty: bool, env: dict[str, str],
                                            expected: bool) -> None:
    assert color_wanted(choice, Terminal(tty), env) is expected


# -- verifygate run ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_terminal_gets_color(repo: Path) -> None:
    gates(repo)
    status, output = in_terminal([PY, "-m", "pytest_verifygate.cli", "run", "--all"], repo,
                                 environment())
    assert status == 1, output
    assert GREEN_PASS in output and RED_FAIL in output, output
    verdict = next(line for line in output.splitlines() if "verdict: failed" in line)
    assert verdict.startswith(f"{ESC}31m"), verdict


@pytest.mark.slow
def test_a_pipe_gets_no_color(repo: Path) -> None:
    gates(repo)
    done = verifygate("run", "--all", env=environment(), cwd=repo)
    assert done.returncode == 1, done.stderr
    assert "FAIL" in done.stdout and ESC not in done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("env", "colored"), [
    ({"NO_COLOR": "1"}, False),
    ({"PY_COLORS": "0"}, False),
    ({"TERM": "dumb"}, False),
    ({"PY_COLORS": "1", "NO_COLOR": "1"}, True),
])
def test_the_environment_decides_on_a_terminal(repo: Path, env: dict[str, str],
                                               colored: bool) -> None:
    gates(repo, failing=False)
    status, output = in_terminal([PY, "-m", "pytest_verifygate.cli", "run", "--all"], repo,
                                 environment(**env))
    assert status == 0, output
    assert (GREEN_PASS in output) is colored, output
    if not colored:
        # The live status line still redraws itself on a terminal; nothing else is escaped.
        assert ESC + "3" not in output and ESC + "1m" not in output, output


@pytest.mark.slow
def test_color_no_wins_on_a_terminal(repo: Path) -> None:
    gates(repo, failing=False)
    status, output = in_terminal([PY, "-m", "pytest_verifygate.cli", "run", "--all",
                                  "--color=no"], repo, environment(PY_COLORS="1"))
    assert status == 0 and "PASS" in output and GREEN_PASS not in output, output


@pytest.mark.slow
@pytest.mark.parametrize(("args", "env"), [
    (("--color=yes",), {}),
    ((), {"FORCE_COLOR": "1"}),
    ((), {"PY_COLORS": "1"}),
])
def test_a_pipe_gets_color_when_asked(repo: Path, args: tuple[str, ...],
                                      env: dict[str, str]) -> None:
    gates(repo)
    done = verifygate("run", "--all", *args, env=environment(**env), cwd=repo)
    assert GREEN_PASS in done.stdout and RED_FAIL in done.stdout, done.stdout


@pytest.mark.slow
def test_reports_digests_and_json_never_get_color(repo: Path) -> None:
    gates(repo)
    env = environment(FORCE_COLOR="1")
    done = verifygate("run", "--all", "--color=yes", "--json", "report.json", "--junit",
                      "junit.xml", env=env, cwd=repo)
    assert RED_FAIL in done.stdout  # the text on stdout is colored, as asked
    for name in ("report.json", "junit.xml"):
        assert ESC not in (repo / name).read_text(), name
    as_json = verifygate("run", "--all", "--color=yes", "--format", "json", env=env, cwd=repo)
    assert ESC not in as_json.stdout
    assert json.loads(as_json.stdout)["verdict"] == "failed"
    digest = verifygate("run", "--all", "--color=yes", "--format", "agent", env=env, cwd=repo)
    assert "types" in digest.stdout and ESC not in digest.stdout


# -- the closing summary ------------------------------------------------------------------


def closing(output: str) -> list[str]:
    lines = output.splitlines()
    return lines[lines.index("slowest gates:"):]


@pytest.mark.slow
def test_a_failed_run_ends_with_the_slowest_and_the_failed_gates(repo: Path) -> None:
    gates(repo)
    done = verifygate("run", "--all", env=environment(), cwd=repo)
    assert done.returncode == 1
    tail = closing(done.stdout)
    slowest = tail[1:tail.index("failed gates:")]
    assert sorted(line.split()[1] for line in slowest) == ["lint", "slow", "types"], tail
    seconds = [float(line.split()[0].rstrip("s")) for line in slowest]
    assert seconds == sorted(seconds, reverse=True), tail
    failed = tail[tail.index("failed gates:") + 1:-1]
    assert [line.split() for line in failed] == [
        ["FAIL", "types", "[command_failed]", "exit", "status", "3"]], tail
    assert tail[-1].startswith("verdict: failed"), tail


@pytest.mark.slow
def test_a_passing_run_has_no_closing_summary(repo: Path) -> None:
    gates(repo, failing=False)
    done = verifygate("run", "--all", env=environment(), cwd=repo)
    assert done.returncode == 0
    assert "slowest gates" not in done.stdout and "failed gates" not in done.stdout


# -- pytest --------------------------------------------------------------------------------


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    for name in COLOR_VARIABLES:  # pytester sets PY_COLORS=0 for its runs
        monkeypatch.delenv(name, raising=False)
    return pytester


def summary_section(lines: list[str]) -> list[str]:
    start = next(index for index, line in enumerate(lines) if " verifygate " in line)
    end = next(index for index, line in enumerate(lines) if "verdict: " in line)
    return lines[start:end + 1]


def pytest_contract(root: Path) -> None:
    write_contract(root, {"name": "lint", "command": [PY, "-c", "print(1)"]},
                   {"name": "types", "command": [PY, "-c", "import sys; sys.exit(3)"]})


@pytest.mark.slow
def test_pytest_s_color_option_colors_the_summary(project: pytest.Pytester) -> None:
    pytest_contract(project.path)
    colored = project.runpytest_subprocess("--verify-contract", "--color=yes")
    section = summary_section(colored.outlines)
    verdict = section[-1]
    assert f"{ESC}31m" in verdict and "verdict: failed" in verdict, section
    assert any(f"{ESC}32m" in line and "lint" in line for line in section), section
    plain = project.runpytest_subprocess("--verify-contract", "--color=no")
    assert not any(ESC in line for line in summary_section(plain.outlines))


@pytest.mark.slow
def test_pytest_s_summary_names_the_slowest_and_the_failed_gates(
    project: pytest.Pytester,
) -> None:
    pytest_contract(project.path)
    result = project.runpytest("--verify-contract")
    result.assert_outcomes(passed=1, failed=1)
    section = summary_section(result.outlines)
    titles = [line.strip("- ") for line in section if line.startswith("-")]
    assert titles[-2:] == ["slowest gates", "failed gates"], section
    assert any(line.split()[:3] == ["FAIL", "types", "[command_failed]"] for line in section)


@pytest.mark.slow
def test_pytest_in_a_terminal_colors_the_summary(project: pytest.Pytester) -> None:
    pytest_contract(project.path)
    env = environment(PYTEST_ADDOPTS=QUIET_PLUGINS)
    status, output = in_terminal([PY, "-m", "pytest", "--verify-contract", "-p",
                                  "no:cacheprovider"], project.path, env)
    assert status == 1, output
    verdict = next(line for line in output.splitlines() if "verdict: failed" in line)
    assert verdict.startswith(f"{ESC}31m"), verdict
