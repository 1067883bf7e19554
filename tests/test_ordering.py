"""The order gates start in: seed formats one at a time in declared order, ``needs``,
``exclusive`` gates, and the job count in every format and front end.

Gates log ``start NAME`` and ``end NAME`` lines to one shared file (appends of one short line
are atomic); the tests read the order from it, never from timings. A gate sleeps a little
between its two lines only to give a wrong order the chance to show.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from plugin_support import QUIET_PLUGINS, init_repo, validate_report
from pytest_verifygate import engine
from pytest_verifygate.engine import RunRequest
from pytest_verifygate.git.changes import ChangeRequest

from conftest import LOGGING, commit_all, stop, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PY = sys.executable

# Waits (at most 20 s) until every gate named in argv[2:] has left a marker, then passes; a
# gate that never sees the others fails. Only gates running at the same time can all pass.
MEETING = """\
import pathlib, sys, time
here, others = sys.argv[1], sys.argv[2:]
pathlib.Path(f"{here}.here").touch()
deadline = time.monotonic() + 20
while not all(pathlib.Path(f"{name}.here").exists() for name in others):
    if time.monotonic() > deadline:
        sys.exit(f"{here} never ran together with {others}")
    time.sleep(0.02)
"""


def logging_command(name: str, seconds: float = 0.3) -> str:
    """A gate command (a string: every format has those) logging its start and end."""
    return f"{PY} logging.py events.log {name} {seconds}"


def meeting_command(name: str, *others: str) -> str:
    return " ".join([PY, "meeting.py", name, *others])


def project(repo: Path) -> Path:
    write(repo / "logging.py", LOGGING)
    write(repo / "meeting.py", MEETING)
    return repo


def events(repo: Path) -> list[str]:
    return (repo / "events.log").read_text().splitlines()


def one_at_a_time(names: list[str]) -> list[str]:
    return [line for name in names for line in (f"start {name}", f"end {name}")]


def run_report(repo: Path, *args: str, status: int = 0) -> dict[str, dict[str, Any]]:
    """``verifygate run --all`` (plus ``args``); the report's gates by name."""
    path = repo.parent / "report.json"
    verifygate("run", "--all", "--json", str(path), *args, status=status, cwd=repo)
    report = json.loads(path.read_text(encoding="utf-8"))
    validate_report(report)
    return {gate["name"]: gate for gate in report["gates"]}


def middle_contract(repo: Path, *gates: tuple[str, str], settings: str = "") -> None:
    text = settings + "".join(f"[[gate]]\nname = {json.dumps(name)}\ncommand = "
                              f"{json.dumps(command)}\n" for name, command in gates)
    write(repo / ".middle" / "verify.toml", text)


# -- seed formats run as their home systems do --------------------------------------------


def test_middle_gates_run_one_at_a_time_in_declared_order(repo: Path) -> None:
    project(repo)
    names = ["format", "lint", "unit tests"]
    middle_contract(repo, *((name, logging_command(name.split()[0])) for name in names))
    run_report(repo)
    assert events(repo) == one_at_a_time(["format", "lint", "unit"])


def test_a_middle_formatter_finishes_before_the_gate_that_reads_its_files(repo: Path) -> None:
    # The race a real contract hits: lint reads what format is still rewriting.
    project(repo)
    write(repo / "code.txt", "messy\n")
    middle_contract(
        repo,
        ("format", "sleep 0.5 && printf 'tidy\\n' > code.txt"),
        ("lint", "grep -qx tidy code.txt"),
    )
    gates = run_report(repo)
    assert [gate["outcome"] for gate in gates.values()] == ["passed", "passed"]


def test_opentiger_commands_run_one_at_a_time_in_declared_order(repo: Path) -> None:
    project(repo)
    commands = [logging_command(name) for name in ("build", "lint", "test")]
    write(repo / ".opentiger" / "verify.contract.json", json.dumps({
        "commands": commands[:1], "rules": [{"commands": commands[1:]}]}))
    gates = run_report(repo)
    assert [gate["outcome"] for gate in gates.values()] == ["passed"] * 3
    assert events(repo) == one_at_a_time(["build", "lint", "test"])


@pytest.mark.parametrize("form", ["middle", "opentiger"])
def test_seed_formats_take_a_job_count_from_their_settings(repo: Path, form: str) -> None:
    project(repo)
    names = ["a", "b", "c"]
    commands = [meeting_command(name, *names) for name in names]
    if form == "middle":
        middle_contract(repo, *zip(names, commands, strict=True), settings="[settings]\njobs = 3\n")
    else:
        write(repo / ".opentiger" / "verify.contract.json",
              json.dumps({"commands": commands, "settings": {"jobs": 3}}))
    gates = run_report(repo)
    assert [gate["outcome"] for gate in gates.values()] == ["passed"] * 3


def test_jobs_on_the_command_line_wins_over_the_seed_default(repo: Path) -> None:
    project(repo)
    names = ["a", "b"]
    middle_contract(repo, *((name, meeting_command(name, *names)) for name in names))
    gates = run_report(repo, "--jobs", "2")
    assert [gate["outcome"] for gate in gates.values()] == ["passed"] * 2


# -- needs ----------------------------------------------------------------------------------


NEEDS_CONTRACT = f"""
[settings]
jobs = 4

[[gate]]
name = "check dist"
command = "test -f dist/pkg.whl"
needs = ["build"]

[[gate]]
name = "build"
shell = true
command = "sleep 0.3 && mkdir -p dist && touch dist/pkg.whl"

[[gate]]
name = "lint"
command = ["{PY}", "-c", "pass"]
"""


def test_a_gate_starts_after_the_gates_it_needs_passed(repo: Path) -> None:
    write(repo / "verify.toml", NEEDS_CONTRACT)
    gates = run_report(repo)
    assert {name: gate["outcome"] for name, gate in gates.items()} == {
        "check dist": "passed", "build": "passed", "lint": "passed"}
    assert gates["check dist"]["needs"] == ["build"]
    assert gates["check dist"]["code"] is None


def test_a_gate_whose_need_failed_is_skipped_with_the_reason(repo: Path) -> None:
    write(repo / "verify.toml", NEEDS_CONTRACT.replace("touch dist/pkg.whl", "exit 3")
          + '[[gate]]\nname = "upload"\ncommand = "true"\nneeds = ["check dist"]\n')
    gates = run_report(repo, status=1)
    assert (gates["build"]["outcome"], gates["build"]["code"]) == ("failed", "command_failed")
    assert gates["check dist"]["outcome"] == "skipped"
    assert gates["check dist"]["reason"] == "needs 'build', which failed"
    assert gates["check dist"]["attempts"] == 0
    # Down the chain: a gate whose need was skipped does not run either.
    assert gates["upload"]["outcome"] == "skipped"
    assert gates["upload"]["reason"] == "needs 'check dist', which was skipped"
    assert gates["lint"]["outcome"] == "passed"  # gates without needs are not held back
    text = verifygate("run", "--all", status=1, cwd=repo).stdout
    assert "needs 'build', which failed" in text


def test_a_need_that_is_not_selected_does_not_hold_a_gate_back(repo: Path) -> None:
    write(repo / "verify.toml", f"""
[[gate]]
name = "build"
command = "false"
when_changed = ["src/**"]
[[gate]]
name = "test"
command = ["{PY}", "-c", "pass"]
needs = ["build"]
""")
    write(repo / "tests" / "test_x.py", "")
    commit_all(repo)
    path = repo.parent / "report.json"
    verifygate("run", "--files", "tests/test_x.py", "--json", str(path), cwd=repo, status=0)
    report = json.loads(path.read_text())
    assert [(gate["name"], gate["outcome"]) for gate in report["gates"]] == [("test", "passed")]


def test_needs_hold_under_pytest_and_a_need_outside_the_session_does_not_block(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    write(pytester.path / "verify.toml", NEEDS_CONTRACT)
    pytester.runpytest("--verify-contract").assert_outcomes(passed=3)
    # Only "check dist" is run (-k): build is not in this session, so it does not hold the
    # gate back; without the earlier build's dist/ it fails on its own terms.
    (pytester.path / "dist" / "pkg.whl").unlink()
    result = pytester.runpytest("--verify-contract", "-k", "check")
    result.assert_outcomes(failed=1)


def test_middle_gates_run_in_declared_order_under_pytest(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    project(pytester.path)
    middle_contract(pytester.path, *((name, logging_command(name)) for name in "abc"))
    pytester.runpytest("--verify-contract").assert_outcomes(passed=3)
    assert events(pytester.path) == one_at_a_time(["a", "b", "c"])


def test_the_engine_starts_gates_in_contract_order_whatever_order_it_is_given(
    repo: Path,
) -> None:
    project(repo)
    write(repo / "verify.toml", "[settings]\njobs = 1\n" + "".join(
        f'[[gate]]\nname = "{name}"\ncommand = "{logging_command(name, 0)}"\n'
        for name in "abc"))
    plan = engine.prepare(RunRequest(start=repo, changes=ChangeRequest(all=True)))
    runner = engine.start(plan, list(reversed(plan.gate_plans())), log_dir=repo.parent / "logs")
    try:
        assert [result.outcome for result in runner.results()] == ["passed"] * 3
    finally:
        runner.close()
    assert events(repo) == one_at_a_time(["a", "b", "c"])


# -- exclusive ------------------------------------------------------------------------------


def test_an_exclusive_gate_runs_alone(repo: Path) -> None:
    project(repo)
    gates = "".join(
        f'[[gate]]\nname = "{name}"\ncommand = "{logging_command(name)}"\n'
        + ("exclusive = true\n" if name == "fmt" else "")
        for name in ("a", "b", "fmt", "c", "d"))
    write(repo / "verify.toml", "[settings]\njobs = 4\n" + gates)
    outcomes = run_report(repo)
    assert outcomes["fmt"]["exclusive"] is True and outcomes["a"]["exclusive"] is False
    log = events(repo)
    fmt_start, fmt_end = log.index("start fmt"), log.index("end fmt")
    assert fmt_end == fmt_start + 1, log  # nothing started or ended while it ran
    assert {line for line in log[:fmt_start]} == {"start a", "end a", "start b", "end b"}, log
    assert {line for line in log[fmt_end + 1:]} == {"start c", "end c", "start d", "end d"}, log


# -- the agent hook ----------------------------------------------------------------------


def test_the_agent_hook_takes_a_job_count(repo: Path) -> None:
    project(repo)
    names = ["a", "b"]
    middle_contract(repo, *((name, meeting_command(name, *names)) for name in names))
    commit_all(repo)
    write(repo / "src.py", "x = 1\n")
    answer = stop(repo, "--jobs", "2")
    assert not answer.blocked, answer
    assert (repo / "a.here").exists() and (repo / "b.here").exists()
