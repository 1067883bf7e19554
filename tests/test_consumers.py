"""Third-party consumers of what a run writes: pytest's JUnit schema (``junit-10.xsd``) and
junitparser, pytest's terminal (-rP, -rs), pytest-rerunfailures and pytest-timeout.

Real pytest sessions (pytester, in subprocesses), the real ``verifygate`` command, the real
plugins installed as test dependencies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plugin_support import (
    QUIET_PLUGINS,
    counting,
    failing,
    init_repo,
    junit_cases,
    junit_properties,
    load_json,
    passing,
    python,
    write_contract,
)
from pytest_verifygate.report.github import step_summary

from conftest import commit_all, read_output_file, validate_junit, validate_surefire, verifygate

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

# Fails on its first run in each pair of runs, passes on the next: flaky under one retry.
FLAKY = python(
    "import pathlib, sys; counter = pathlib.Path(sys.argv[1]); "
    "runs = len(counter.read_text().splitlines()) if counter.exists() else 0; "
    "counter.write_text('ran\\n' * (runs + 1)); print('attempt', runs + 1); "
    "sys.exit(1 if runs % 2 == 0 else 0)",
    "flaky.count",
)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    return pytester


def consumers_contract(root: Path) -> None:
    (root / "Makefile").write_text("all:\n\ttrue\n", encoding="utf-8")
    write_contract(
        root,
        {"name": "ok", "command": passing("hello from ok")},
        {"name": "bad", "command": failing()},
        {"name": "flaky", "command": FLAKY, "retries": 1},
        {"name": "retried", "command": failing(), "retries": 1},
        {"name": "miss", "command": "make nosuchtarget", "on_missing": "skip"},
        {"name": "slow", "command": python("import time; time.sleep(30)"),
         "timeout_seconds": 1},
    )
    commit_all(root)


def test_both_junit_files_are_valid_xunit2(project: pytest.Pytester) -> None:
    consumers_contract(project.path)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--verify-contract",
                                          "--verify-all", "--junitxml", "pytest.xml",
                                          "-o", "junit_logging=all", "-rP")
    assert result.ret == 1
    cli = verifygate("run", "--all", "--junit", "cli.xml", cwd=project.path)
    assert cli.returncode == 1, cli.stderr
    validate_surefire(project.path / "cli.xml")
    for name in ("pytest.xml", "cli.xml"):
        validate_junit(project.path / name)
        cases = junit_cases(project.path / name)
        assert set(cases) == {"ok", "bad", "flaky", "retried", "miss", "slow"}
        # xunit2 allows no testcase properties (pytest warns for record_property there).
        assert all(case.find("properties") is None for case in cases.values()), name

    # A passing gate's output is where pytest users look for it: -rP, and <system-out>.
    assert "hello from ok" in result.stdout.str().split("PASSES")[1]
    out = junit_cases(project.path / "pytest.xml")["ok"].find("system-out")
    assert out is not None and "hello from ok" in (out.text or "")

    cases = junit_cases(project.path / "cli.xml")
    # The skip reason once: as the message, with no body repeating it.
    skipped = cases["miss"].find("skipped")
    assert skipped is not None and not (skipped.text or "").strip()
    assert skipped.get("message") == 'missing_make_target (on_missing = "skip")'
    assert "type" not in skipped.attrib  # Surefire's schema has none: the message says it
    failure = cases["slow"].find("failure")
    assert failure is not None and failure.get("type") == "timeout"
    assert failure.get("message") == "[timeout] slow: timed out after 1 s"


def test_flaky_gates_follow_surefire(project: pytest.Pytester) -> None:
    from junitparser.xunit2 import JUnitXml

    consumers_contract(project.path)
    cli = verifygate("run", "--all", "--junit", "cli.xml", cwd=project.path)
    assert cli.returncode == 1, cli.stderr
    validate_junit(project.path / "cli.xml")
    validate_surefire(project.path / "cli.xml")  # the schema of the elements named after it
    cases = {case.name: case for suite in JUnitXml.fromfile(str(project.path / "cli.xml"))
             for case in suite}
    assert cases["flaky"].is_flaky and cases["flaky"].is_passed
    assert [interim.message for interim in cases["flaky"].flaky_failures()] == [
        "attempt 1 of 2 failed (flaky: passed on attempt 2 after 1 failed)"]
    assert not cases["bad"].is_flaky and not cases["bad"].is_rerun  # no retries: one attempt
    assert cases["retried"].is_rerun and not cases["retried"].is_passed


def test_xunit1_keeps_the_properties(project: pytest.Pytester) -> None:
    consumers_contract(project.path)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--verify-contract",
                                          "--verify-all", "--junitxml", "pytest.xml",
                                          "-o", "junit_family=xunit1", "-rs")
    assert result.ret == 1
    cli = verifygate("run", "--all", "--junit", "cli.xml", "--junit-family", "xunit1",
                     cwd=project.path)
    assert cli.returncode == 1, cli.stderr
    contract_lines = (project.path / "verify.toml").read_text().splitlines()
    miss_line = contract_lines.index('name = "miss"')  # 1-based line of its [[gate]]
    for name in ("pytest.xml", "cli.xml"):
        cases = junit_cases(project.path / name)
        flaky = junit_properties(cases["flaky"])
        assert (flaky["verifygate.attempts"], flaky["verifygate.flaky"]) == ("2", "true"), name
        # The testcase's time is the gate's duration_s, as written.
        for case in cases.values():
            assert case.get("time") == junit_properties(case)["verifygate.duration_s"], name
        # A skip's code, as the CLI table shows it.
        assert junit_properties(cases["miss"])["verifygate.code"] == "missing_make_target"
    # Each item is at its [[gate]] table's line (xunit1's line is 0-based, as pytest's).
    pytest_cases = junit_cases(project.path / "pytest.xml")
    assert pytest_cases["miss"].get("line") == str(miss_line - 1)
    assert f"SKIPPED [1] verify.toml:{miss_line}: missing_make_target" in result.stdout.str()
    # pytest's table shows the skip's code too, as the CLI's does.
    table = result.stdout.str().split("= verifygate =")[1]
    assert any(line.split()[:3] == ["miss", "skipped", "missing_make_target"]
               for line in table.splitlines())
    assert any(line.split()[:3] == ["miss", "skipped", "missing_make_target"]
               for line in cli.stdout.splitlines())
    # ... and so does the step summary's.
    report = {"verdict": "passed", "gates": [{"name": "miss", "outcome": "skipped", "code": None,
                                              "reason": 'missing_script (on_missing = "skip")'}]}
    assert "| `miss` | \u23ed\ufe0f skipped: missing_script (on_missing = \"skip\") | " \
        "`missing_script` |" in step_summary(report)


def test_rerunfailures_runs_the_gate_again(project: pytest.Pytester) -> None:
    write_contract(project.path, {"name": "flaky", "command": FLAKY})
    commit_all(project.path)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--verify-contract",
                                          "--verify-all", "--reruns", "2",
                                          "--verify-report", "report.json")
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("rerun")) == (1, 1), outcomes
    # Run twice for real: not the first result replayed.
    assert (project.path / "flaky.count").read_text().count("ran") == 2
    gate = load_json(project.path / "report.json")["gates"][0]
    assert (gate["outcome"], gate["attempts"], gate["flaky"]) == ("passed", 2, True)


def test_pytest_timeout_leaves_gates_to_their_own_timeout(project: pytest.Pytester) -> None:
    write_contract(project.path,
                   {"name": "slow", "command": python("import time; time.sleep(2)"),
                    "timeout_seconds": 30})
    commit_all(project.path)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--verify-contract",
                                          "--verify-all", "--timeout", "1")
    result.assert_outcomes(passed=1)
    assert "Timeout" not in result.stdout.str()


def test_a_test_freezing_time_leaves_the_gates_their_clock(project: pytest.Pytester) -> None:
    # freezegun replaces time.monotonic and time.time in every module while a test runs; the
    # gates run meanwhile, in threads of the same process.
    pytest.importorskip("freezegun")
    project.makepyfile(test_frozen="""
        import pathlib, time
        from freezegun import freeze_time

        def test_frozen():
            with freeze_time("2011-06-21"):
                for _ in range(1000):  # at most 10 s: the gate takes 1
                    if pathlib.Path("gate.done").exists():
                        break
                    time.sleep(0.01)
    """)
    write_contract(project.path, {"name": "slow", "timeout_seconds": 30, "command": python(
        "import pathlib, time; time.sleep(1); pathlib.Path('gate.done').touch()")})
    commit_all(project.path)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--verify-contract",
                                          "--verify-report", "report.json")
    gate = load_json(project.path / "report.json")["gates"][0]
    assert (gate["outcome"], gate["code"]) == ("passed", None), gate
    assert 0.9 < gate["duration_s"] < 30, gate
    result.assert_outcomes(passed=2)


@pytest.mark.parametrize("arguments", [
    ["--verify-contract", "tests/nope.py"],
    ["-v", "tests/nope.py", "--verify-contract", "verify.toml"],
])
def test_a_usage_error_writes_no_verdict(project: pytest.Pytester,
                                         arguments: list[str]) -> None:
    write_contract(project.path, {"name": "ok", "command": counting("ran.txt")})
    commit_all(project.path)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--verify-all",
                                          "--verify-report", "report.json", *arguments)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "file or directory not found: tests/nope.py" in text
    assert "verdict:" not in text and "interrupted" not in text and "gate  outcome" not in text
    assert not (project.path / "report.json").exists()
    assert not (project.path / "ran.txt").exists()


def test_a_gate_cut_short_between_attempts_is_interrupted(project: pytest.Pytester) -> None:
    # `fast` fails soon after `retried`'s first attempt failed; -x then stops the run while
    # `retried` waits (0.5 s backoff) for its next attempt.
    retried = python("import pathlib, sys; pathlib.Path('started').touch(); sys.exit(1)")
    fast = python("import pathlib, sys, time\n"
                  "while not pathlib.Path('started').exists(): time.sleep(0.02)\n"
                  "time.sleep(0.1); sys.exit(1)")
    write_contract(project.path, {"name": "fast", "command": fast},
                   {"name": "retried", "command": retried, "retries": 3})
    commit_all(project.path)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--verify-contract",
                                          "--verify-all", "-x", "--verify-report",
                                          "report.json")
    assert result.ret == 1
    gates = {gate["name"]: gate for gate in load_json(project.path / "report.json")["gates"]}
    assert (gates["fast"]["outcome"], gates["fast"]["code"]) == ("failed", "command_failed")
    assert (gates["retried"]["outcome"], gates["retried"]["code"]) == ("failed", "interrupted")
    assert gates["retried"]["attempts"] == 1


def test_github_outputs_and_summary_from_pytest(project: pytest.Pytester,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    write_contract(project.path, {"name": "ok", "command": passing()},
                   {"name": "bad gate", "command": failing()})
    commit_all(project.path)
    outputs, summary = project.path / "outputs", project.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--verify-contract",
                                          "--verify-all", "--verify-report", "report.json")
    assert result.ret == 1
    assert read_output_file(outputs) == {"verdict": "failed", "failed-gates": '["bad gate"]',
                                         "report": str(project.path / "report.json")}
    text = summary.read_text(encoding="utf-8")
    headings = [line.split(" ", 1)[0] for line in text.splitlines() if line.startswith("#")]
    # The page's heading first; the digest's nest below it.
    assert headings == ["###", "####", "#####"], text
    # Hint, command and output each a paragraph of their own, not one run-on line.
    assert "\n\nHint: " in text and "\n\nCommand: " in text and "\n\nOutput:" in text


def test_declared_lines_in_every_contract_form(tmp_path: Path) -> None:
    from pytest_verifygate.contract.load import load_contract
    from pytest_verifygate.pytest_plugin.declared import declared_lines

    (tmp_path / ".git").mkdir()
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n\n[[tool.verifygate.gate]]\nname = "lint"\n'
                         'command = "true"\n\n[[ tool.verifygate.gate ]]  # spaced\n'
                         'name = "types"\ncommand = "true"\n', encoding="utf-8")
    assert declared_lines(load_contract(pyproject)) == {"lint": 4, "types": 8}
    opentiger = tmp_path / ".opentiger" / "verify.contract.json"
    opentiger.parent.mkdir()
    opentiger.write_text(json.dumps({"commands": ["npm run lint"],
                                     "byRole": {"tester": ["npm test"]}}, indent=2),
                         encoding="utf-8")
    lines = opentiger.read_text(encoding="utf-8").splitlines()
    assert declared_lines(load_contract(opentiger)) == {
        "npm run lint": lines.index('    "npm run lint"') + 1,
        "npm test": lines.index('      "npm test"') + 1}
    # openTiger makes two gates of "A && B": each is at the line listing it.
    opentiger.write_text(json.dumps({"commands": ["npm run lint && npm test"]}, indent=2),
                         encoding="utf-8")
    contract = load_contract(opentiger)
    assert len(contract.gates) == 2
    assert set(declared_lines(contract).values()) == {3}


def test_github_outputs_and_folding_from_the_cli(project: pytest.Pytester) -> None:
    from actions_runner import honoured

    write_contract(project.path, {"name": "ok", "command": passing()},
                   {"name": "bad", "command": failing(message="::error::forged by the gate")})
    commit_all(project.path)
    outputs = project.path / "outputs"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_verifygate.cli", "run", "--all", "--json", "r.json"],
        cwd=project.path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(outputs)})
    assert done.returncode == 1, done.stderr
    assert read_output_file(outputs) == {"verdict": "failed", "failed-gates": '["bad"]',
                                         "report": "r.json"}
    commands = [(command.name, command.data) for command in honoured(done.stdout)
                if command.name in ("group", "endgroup", "error")]
    # The group is honoured; what the gate printed inside it is not.
    assert commands[:2] == [("group", "verifygate bad [command_failed]"), ("endgroup", "")]
    assert ("error", "forged by the gate") not in commands
    inside = done.stdout.split("::group::verifygate bad [command_failed]")[1].split(
        "::endgroup::")[0]
    assert "::error::forged by the gate" in inside
