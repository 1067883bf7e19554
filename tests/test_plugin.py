"""The pytest plugin in real pytest sessions: items, selection, outcomes, report, JUnit, -x."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plugin_support import (
    QUIET_PLUGINS,
    counting,
    failing,
    gates_by_name,
    init_repo,
    interval,
    junit_cases,
    junit_properties,
    load_json,
    passing,
    python,
    stamping,
    validate_report,
    write_contract,
)
from pytest_verifygate.pytest_plugin.session import DESELECTED_REASON

from conftest import commit_all, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    init_repo(pytester.path, monkeypatch)
    # Hypothesis's plugin is re-imported by every in-process run and dominates its time.
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    return pytester


def standard_contract(root: Path) -> None:
    write_contract(
        root,
        {"name": "lint", "command": passing(), "category": "unit", "roles": ["implementer"]},
        {"name": "types", "command": failing(), "category": "integration"},
        {"name": "docs", "command": [*passing(), "{files}"], "when_changed": ["*.md"]},
        {"name": "release", "command": "ship it", "kind": "manual"},
    )


def collected_ids(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and " " not in line]


def test_without_the_option_nothing_is_collected_and_the_engine_is_not_imported(
    project: pytest.Pytester,
) -> None:
    standard_contract(project.path)
    project.makepyfile(test_one="def test_one(): pass")
    project.makeconftest(
        """
        import pathlib, sys
        def pytest_sessionfinish(session):
            loaded = sorted(m for m in sys.modules if m.startswith("pytest_verifygate"))
            pathlib.Path("modules.txt").write_text("\\n".join(loaded))
        """
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)
    assert "verify.toml" not in result.stdout.str()
    loaded = set((project.path / "modules.txt").read_text().split())
    # The plugin's own option registration and the argparse types it shares with the CLI.
    assert loaded <= {"pytest_verifygate", "pytest_verifygate.pytest_plugin",
                      "pytest_verifygate.pytest_plugin.options",
                      "pytest_verifygate.hookspecs", "pytest_verifygate.option_checks"}


def test_one_item_per_selected_gate_in_contract_order(project: pytest.Pytester) -> None:
    standard_contract(project.path)
    project.makepyfile(test_one="def test_one(): pass")
    project.makeini("[pytest]\nverify_role = implementer\n")  # lint is for implementers
    listed = project.runpytest("--verify-contract", "--co", "-q")
    assert collected_ids(listed) == [
        "test_one.py::test_one",
        "verify.toml::lint",
        "verify.toml::types",
        "verify.toml::docs",
        "verify.toml::release",
    ]
    result = project.runpytest("--verify-contract", "-rs")
    result.assert_outcomes(passed=2, failed=1, skipped=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (failure,) = result.reprec.getfailures()  # type: ignore[attr-defined]
    assert failure.nodeid == "verify.toml::types"
    assert failure.longreprtext.startswith("[command_failed] types: exit status 3\n")
    result.stdout.fnmatch_lines([
        "[[]command_failed[]] types: exit status 3",
        "full log: *types.log",
        "*output*",
        "a.py:1: E999 something is wrong",
    ])
    result.stdout.fnmatch_lines([
        # At each gate's [[gate]] table.
        "SKIPPED [[]1[]] verify.toml:10: no matching files for {files}",
        "SKIPPED [[]1[]] verify.toml:14: pending: manual gate: awaits human sign-off",
    ])
    # The terminal summary: every gate with outcome, code and time.
    result.stdout.fnmatch_lines([
        "*= verifygate =*",
        "gate*outcome*code*time",
        "lint*passed*-*s",
        "types*failed*command_failed*s",
        "docs*skipped*-*",
        "release*pending*-*",
        "verdict: failed (1 passed, 1 failed, 1 skipped, 1 pending): types ?command_failed?",
    ])


def test_verbose_failure_shows_command_and_cwd(project: pytest.Pytester) -> None:
    write_contract(project.path, {"name": "types", "command": failing(status=7)})
    quiet = project.runpytest("--verify-contract")
    assert "command: " not in quiet.stdout.str()
    verbose = project.runpytest("--verify-contract", "-v")
    verbose.stdout.fnmatch_lines([
        "[[]command_failed[]] types: exit status 7",
        f"command: {sys.executable} -c *",
        "cwd: .",
        "full log: *",
    ])


def test_keyword_and_marker_selection_with_strict_markers(project: pytest.Pytester) -> None:
    write_contract(
        project.path,
        {"name": "lint", "command": passing(), "category": "unit",
         "roles": ["implementer", "code-reviewer"]},
        {"name": "types", "command": passing(), "category": "integration",
         "roles": ["code-reviewer"]},
        {"name": "build", "command": passing()},
    )
    project.makepyfile(test_one="def test_one(): pass")
    strict = ("--verify-contract", "--verify-role", "implementer", "--verify-role",
              "code-reviewer", "--strict-markers", "--co", "-q")
    assert collected_ids(project.runpytest(*strict, "-k", "lint")) == ["verify.toml::lint"]
    assert collected_ids(project.runpytest(*strict, "-m", "integration")) == [
        "verify.toml::types"
    ]
    assert collected_ids(project.runpytest(*strict, "-m", "verify_role_implementer")) == [
        "verify.toml::lint"
    ]
    assert collected_ids(project.runpytest(*strict, "-m", "verify_role_code-reviewer")) == [
        "verify.toml::lint", "verify.toml::types"
    ]
    assert collected_ids(project.runpytest(*strict, "-m", "verifygate and not unit")) == [
        "verify.toml::types", "verify.toml::build"
    ]
    result = project.runpytest("--verify-contract", "--strict-markers", "-k", "types",
                               "--verify-role", "code-reviewer")
    result.assert_outcomes(passed=1, deselected=3)


def test_role_option_deselects_gates_at_collection(project: pytest.Pytester) -> None:
    write_contract(
        project.path,
        {"name": "lint", "command": passing(), "roles": ["implementer"]},
        {"name": "review", "command": passing(), "roles": ["reviewer"]},
        {"name": "always", "command": passing()},
    )
    result = project.runpytest("--verify-contract", "--verify-role", "reviewer", "--co", "-q")
    assert collected_ids(result) == ["verify.toml::review", "verify.toml::always"]
    result.stdout.fnmatch_lines(["*2 tests collected*"])  # unselected gates are not items


def test_a_node_id_runs_one_gate(project: pytest.Pytester) -> None:
    write_contract(
        project.path,
        {"name": "lint", "command": counting("lint.txt")},
        {"name": "types", "command": counting("types.txt")},
    )
    result = project.runpytest("verify.toml::types", "--verify-contract")
    result.assert_outcomes(passed=1)
    assert (project.path / "types.txt").exists()
    assert not (project.path / "lint.txt").exists()


def test_contract_is_collected_when_testpaths_do_not_reach_it(project: pytest.Pytester) -> None:
    write_contract(project.path, {"name": "lint", "command": passing()})
    project.makeini("[pytest]\ntestpaths = tests\n")
    project.makepyfile(**{"tests/test_unit": "def test_unit(): pass"})
    expected = ["tests/test_unit.py::test_unit", "verify.toml::lint"]
    assert collected_ids(project.runpytest("--verify-contract", "--co", "-q")) == expected
    # A bare --verify-contract followed by a test path leaves the path a test path.
    assert collected_ids(
        project.runpytest("--verify-contract", "tests", "--co", "-q")
    ) == expected
    assert collected_ids(
        project.runpytest("tests/test_unit.py", "--verify-contract", "--co", "-q")
    ) == expected


def test_contract_in_a_dot_directory_is_collected_once(project: pytest.Pytester) -> None:
    write_contract(project.path, {"name": "lint", "command": passing()},
                   name=".middle/verify.toml")
    project.makepyfile(test_one="def test_one(): pass")
    for args in (["."], []):
        result = project.runpytest("--verify-contract", *args, "--co", "-q")
        assert collected_ids(result) == [".middle/verify.toml::lint", "test_one.py::test_one"]


def test_explicit_contract_path(project: pytest.Pytester) -> None:
    write_contract(project.path, {"name": "lint", "command": passing()})
    write_contract(project.path, {"name": "other", "command": passing()},
                   name="ci/gates.toml")
    result = project.runpytest("--verify-contract=ci/gates.toml", "--co", "-q")
    assert collected_ids(result) == ["ci/gates.toml::other"]


def test_last_failed_reruns_only_the_failed_gate(project: pytest.Pytester) -> None:
    write_contract(
        project.path,
        {"name": "ok", "command": counting("ok.txt")},
        {"name": "bad", "command": counting("bad.txt", status=1)},
    )
    project.runpytest("--verify-contract").assert_outcomes(passed=1, failed=1)
    rerun = project.runpytest("--verify-contract", "--lf")
    rerun.assert_outcomes(failed=1)
    rerun.stdout.fnmatch_lines(["run-last-failure: rerun previous 1 failure*"])
    assert (project.path / "ok.txt").read_text().count("ran") == 1
    assert (project.path / "bad.txt").read_text().count("ran") == 2


def test_gates_run_concurrently_up_to_jobs(project: pytest.Pytester) -> None:
    write_contract(
        project.path,
        *({"name": name, "command": stamping(f"{name}.stamp", 0.4)} for name in "abc"),
        settings={"jobs": 3},
    )
    project.runpytest("--verify-contract").assert_outcomes(passed=3)
    spans = [interval(project.path / f"{name}.stamp") for name in "abc"]
    assert max(start for start, _ in spans) < min(end for _, end in spans), spans

    project.runpytest("--verify-contract", "--verify-jobs", "1").assert_outcomes(passed=3)
    spans = sorted(interval(project.path / f"{name}.stamp") for name in "abc")
    for (_, end), (next_start, _) in itertools.pairwise(spans):
        assert end <= next_start, spans


def test_exitfirst_kills_the_gates_still_running(project: pytest.Pytester) -> None:
    slow = python("import pathlib, time; time.sleep(30); pathlib.Path('slow.done').touch()")
    write_contract(
        project.path,
        {"name": "quick", "command": failing()},
        {"name": "slow", "command": slow},
        {"name": "slow2", "command": slow},
        {"name": "queued", "command": counting("queued.txt")},
        settings={"jobs": 2},  # quick's slot goes to slow2; queued waits for a slot
    )
    result = project.runpytest_subprocess("--verify-contract", "-x", "--verify-report",
                                          "report.json", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    report = load_json(project.path / "report.json")
    validate_report(report)
    gates = gates_by_name(report)
    assert gates["quick"]["code"] == "command_failed"
    assert gates["slow"]["outcome"] == "failed"
    assert gates["slow"]["code"] == "interrupted"
    assert gates["slow2"]["code"] == "interrupted"
    assert gates["queued"]["code"] == "interrupted"
    assert report["interrupted"] is True
    assert not (project.path / "slow.done").exists()
    assert not (project.path / "queued.txt").exists()


def test_ctrl_c_writes_a_report_with_unfinished_gates_interrupted(
    project: pytest.Pytester,
) -> None:
    slow = python("import pathlib, time; pathlib.Path('started').touch(); time.sleep(30)")
    write_contract(project.path, {"name": "ok", "command": passing()},
                   {"name": "slow", "command": slow}, settings={"jobs": 2})
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--verify-contract", "--verify-report", "report.json",
         "-p", "no:cacheprovider"],
        cwd=project.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while not (project.path / "started").exists():
            assert time.monotonic() < deadline and process.poll() is None, "gate never started"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output.decode()
    report = load_json(project.path / "report.json")
    validate_report(report)
    assert report["interrupted"] is True
    assert gates_by_name(report)["slow"]["code"] == "interrupted"


def test_junitxml_properties_and_short_message(project: pytest.Pytester) -> None:
    standard_contract(project.path)
    # pytest's default family, xunit2, allows no testcase properties: xunit1 carries them.
    project.runpytest("--verify-contract", "--verify-role", "implementer", "--junitxml=junit.xml",
                      "-o", "junit_family=xunit1")
    cases = junit_cases(project.path / "junit.xml")
    lint = junit_properties(cases["lint"])
    assert lint["verifygate.outcome"] == "passed"
    assert lint["verifygate.code"] == ""
    assert lint["verifygate.exit_code"] == "0"
    assert float(lint["verifygate.duration_s"]) >= 0
    types = junit_properties(cases["types"])
    assert types["verifygate.outcome"] == "failed"
    assert types["verifygate.code"] == "command_failed"
    assert types["verifygate.exit_code"] == "3"
    failure = cases["types"].find("failure")
    assert failure is not None
    assert failure.attrib["message"] == "[command_failed] types: exit status 3"
    assert "E999 something is wrong" in (failure.text or "")
    assert junit_properties(cases["release"])["verifygate.outcome"] == "pending"
    skipped = cases["release"].find("skipped")
    assert skipped is not None and "awaits human sign-off" in skipped.attrib["message"]


def test_report_and_digest(project: pytest.Pytester) -> None:
    standard_contract(project.path)
    result = project.runpytest("--verify-contract", "--verify-role", "implementer",
                               "-k", "not docs", "--verify-report", "out/report.json",
                               "--verify-digest", "out/digest.md")
    result.assert_outcomes(passed=1, failed=1, skipped=1, deselected=1)
    report = load_json(project.path / "out" / "report.json")
    validate_report(report)
    assert report["verdict"] == "failed"
    assert report["contract"] == "verify.toml"
    assert report["changes"]["source"] == "all"
    assert [gate["name"] for gate in report["gates"]] == ["lint", "types", "release"]
    assert report["summary"] == {"passed": 1, "failed": 1, "skipped": 0,
                                 "pending": 1, "interrupted": 0}
    gates = gates_by_name(report)
    assert gates["types"]["exit_code"] == 3
    assert "E999" in gates["types"]["output_tail"]
    # Role filtering and pytest deselection both land in not_selected, with the reason.
    assert report["not_selected"] == [{"name": "docs", "reason": DESELECTED_REASON}]
    digest = (project.path / "out" / "digest.md").read_text()
    assert "`types` failed: command_failed, exit status 3" in digest
    assert "lint" not in digest.split("\n", 1)[1]  # passing gates are left out


def test_not_selected_by_role_is_in_the_report(project: pytest.Pytester) -> None:
    write_contract(
        project.path,
        {"name": "lint", "command": passing(), "roles": ["implementer"]},
        {"name": "review", "command": passing(), "roles": ["reviewer"]},
    )
    project.runpytest("--verify-contract", "--verify-role", "reviewer",
                      "--verify-report", "report.json").assert_outcomes(passed=1)
    report = load_json(project.path / "report.json")
    validate_report(report)
    assert report["verdict"] == "passed"
    assert [gate["name"] for gate in report["gates"]] == ["review"]
    (entry,) = report["not_selected"]
    assert entry["name"] == "lint" and "reviewer" in entry["reason"]


def test_change_set_selects_gates_and_expands_files(project: pytest.Pytester) -> None:
    write_contract(
        project.path,
        {"name": "py", "command": python("import sys; print('files:', sys.argv[1:])",
                                         "{files}"),
         "when_changed": ["**/*.py"]},
        {"name": "docs", "command": passing(), "when_changed": ["docs/**"]},
    )
    (project.path / "src").mkdir()
    (project.path / "src" / "app.py").write_text("x = 1\n")
    (project.path / "docs").mkdir()
    (project.path / "docs" / "index.md").write_text("# docs\n")
    commit_all(project.path)
    (project.path / "src" / "app.py").write_text("x = 2\n")

    listed = project.runpytest("--verify-contract", "--verify-changed-from", "HEAD",
                               "--co", "-q")
    # Gates whose files did not change are items too, skipped with the reason.
    assert collected_ids(listed) == ["verify.toml::py", "verify.toml::docs"]
    result = project.runpytest("--verify-contract", "--verify-changed-from", "HEAD",
                               "--verify-report", "report.json", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] verify.toml:5: no changed file matches "
                                 "when_changed [[]docs/**[]]"])
    report = load_json(project.path / "report.json")
    validate_report(report)
    assert report["changes"] == {"source": "ref", "ref": "HEAD", "files": ["src/app.py"]}
    assert "files: ['src/app.py']" in gates_by_name(report)["py"]["output_tail"]
    assert [entry["name"] for entry in report["not_selected"]] == ["docs"]

    explicit = project.runpytest("--verify-contract", "--verify-files", "docs/index.md")
    explicit.assert_outcomes(passed=1, skipped=1)
    assert [report.nodeid for report in explicit.reprec.getreports("pytest_runtest_logreport")
            if report.when == "call" and report.passed] == ["verify.toml::docs"]


def test_fail_when_unverified_fails_the_session(project: pytest.Pytester) -> None:
    write_contract(project.path,
                   {"name": "docs", "command": passing(), "when_changed": ["docs/**"]},
                   settings={"fail_when_unverified": True})
    write(project.path / "src" / "app.py", "x = 1\n")
    result = project.runpytest("--verify-contract", "--verify-files", "src/app.py")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["verdict: failed (0 passed, 0 failed, 0 skipped, 0 pending): "
                                 "files changed but no gate ran, and the contract sets "
                                 "fail_when_unverified"])


def test_ini_options(project: pytest.Pytester) -> None:
    write_contract(
        project.path,
        {"name": "lint", "command": passing(), "roles": ["implementer"]},
        {"name": "review", "command": passing(), "roles": ["reviewer"]},
    )
    project.makeini(
        "[pytest]\nverify_role = reviewer\nverify_report = reports/gates.json\n"
        "verify_jobs = 2\n"
    )
    (project.path / "sub").mkdir()
    result = project.runpytest("--verify-contract")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["verifygate: verify.toml: 1 of 2 gate(s) selected*"])
    report = load_json(project.path / "reports" / "gates.json")
    assert [gate["name"] for gate in report["gates"]] == ["review"]
    # The command line wins over the ini file.
    override = project.runpytest("--verify-contract", "--verify-role", "implementer", "--co",
                                 "-q")
    assert collected_ids(override) == ["verify.toml::lint"]


def test_invalid_ini_numbers_are_usage_errors(project: pytest.Pytester) -> None:
    write_contract(project.path, {"name": "lint", "command": passing()})
    for line, message in (("verify_jobs = -1", "ini option verify_jobs: '-1' must be 0*"),
                          ("verify_phase = x", "ini option verify_phase: 'x' is not an int*")):
        project.makeini(f"[pytest]\n{line}\n")
        result = project.runpytest_subprocess("--verify-contract", "-p", "no:cacheprovider")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_contract_error_is_a_usage_error_without_traceback(project: pytest.Pytester) -> None:
    write_contract(project.path, {"name": "lint", "comand": "ruff check"})
    result = project.runpytest_subprocess("--verify-contract", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output
    result.stderr.fnmatch_lines(["ERROR: verify.toml: gate 'lint': key 'comand'*"])


def test_change_set_errors_and_bad_options_are_usage_errors(project: pytest.Pytester) -> None:
    write_contract(project.path, {"name": "lint", "command": passing()})
    unknown = project.runpytest("--verify-contract", "--verify-changed-from", "no-such-ref")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["ERROR: unknown git ref 'no-such-ref'*"])
    both = project.runpytest("--verify-contract", "--verify-staged", "--verify-all")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    both.stderr.fnmatch_lines(["ERROR: --verify-staged and --verify-all cannot be combined*"])
    missing = project.runpytest("--verify-contract=nowhere.toml")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["ERROR: nowhere.toml: no such contract file*--verify-contract*"])


def test_failure_text_says_how_the_gate_ended(project: pytest.Pytester) -> None:
    chatty = python("import sys; [print(f'line {i}') for i in range(500)]; sys.exit(1)")
    killed = python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    no_tests = python("import sys; print('No tests found, exiting with code 1'); sys.exit(1)")
    write_contract(
        project.path,
        {"name": "chatty", "command": chatty},
        {"name": "hang", "command": python("import time; time.sleep(30)"),
         "timeout_seconds": 0.3},
        {"name": "killed", "command": killed},
        {"name": "nothing", "command": no_tests, "on_missing": "skip"},
    )
    result = project.runpytest("--verify-contract", "-rs")
    result.assert_outcomes(failed=3, skipped=1)
    heads = {report.nodeid: report.longreprtext.split("\n", 1)[0]
             for report in result.reprec.getfailures()}  # type: ignore[attr-defined]
    assert heads == {
        "verify.toml::chatty": "[command_failed] chatty: exit status 1",
        "verify.toml::hang": "[timeout] hang: timed out after 0.3 s",
        "verify.toml::killed": "[command_failed] killed: killed by signal 9 (SIGKILL)",
    }
    # The end of the output, bounded: the last lines, not all 500.
    result.stdout.fnmatch_lines(["*output (last 40 of 500 lines)*", "line 460", "line 499"])
    assert "line 459" not in result.stdout.str()
    result.stdout.fnmatch_lines(['SKIPPED*no_test_files (on_missing = "skip")'])


def test_pytest_inside_a_gate_does_not_run_gates(project: pytest.Pytester) -> None:
    # DEPTH bounds the recursion should the guard ever break.
    nested = python(
        "import os, subprocess, sys; depth = int(os.environ.get('DEPTH', '0')); "
        "depth > 1 and sys.exit(0); os.environ['DEPTH'] = str(depth + 1); "
        "sys.exit(subprocess.call([sys.executable, '-m', 'pytest', '-p', "
        "'no:cacheprovider', 'tests']))"
    )
    write_contract(project.path, {"name": "suite", "command": nested})
    project.makeini("[pytest]\naddopts = --verify-contract\n")
    project.makepyfile(**{"tests/test_unit": "def test_unit(): pass"})
    result = project.runpytest("--verify-report", "report.json")
    result.assert_outcomes(passed=2)
    output = load_json(project.path / "report.json")["gates"][0]["output_tail"]
    assert "running inside gate 'suite': --verify-contract is ignored" in output
    assert "1 passed" in output


def test_secrets_are_masked_in_failure_text_and_junit(project: pytest.Pytester) -> None:
    leak = python("import os, sys; print('token is', os.environ['API_TOKEN']); sys.exit(1)")
    write_contract(project.path,
                   {"name": "leak", "command": leak, "env": {"API_TOKEN": "hunter2-secret"}})
    result = project.runpytest("--verify-contract", "--junitxml=junit.xml", "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["token is ***"])
    assert "hunter2-secret" not in result.stdout.str()
    assert "hunter2-secret" not in (project.path / "junit.xml").read_text()


def test_the_failure_repr_still_fits_pytest() -> None:
    # failure_repr builds pytest's own exception repr from private classes (pytest exports
    # no public constructor). If a pytest release changes them, this fails loudly here.
    from _pytest._code.code import TerminalRepr

    from pytest_verifygate.pytest_plugin.items import failure_repr
    from pytest_verifygate.runner.records import GateResult

    result = GateResult(name="lint", outcome="failed", code="command_failed",
                        command=("ruff", "check"), output_tail="E501 line too long\n")
    shown = failure_repr(result._asdict(), "[command_failed] lint: exit 1", path="verify.toml",
                         verbosity=0)
    assert isinstance(shown, TerminalRepr)
    assert shown.reprcrash.message == "[command_failed] lint: exit 1"
    assert "E501 line too long" in str(shown)


# -- honest numbers: JUnit times, and the plugin's modules loaded as they are -----------------


def sleeping(seconds: float) -> list[str]:
    return python(f"import time; time.sleep({seconds})")


@pytest.mark.parametrize("extra", [("--verify-jobs", "4"), ("-n", "2", "-p", "no:cacheprovider")],
                         ids=["verify-jobs", "xdist"])
def test_junit_time_is_the_gate_s_own_duration(project: pytest.Pytester,
                                               extra: tuple[str, ...]) -> None:
    if "-n" in extra:
        pytest.importorskip("xdist")
    # Running at once, the first item waits for its gate and the others find theirs done:
    # pytest alone would time those at a millisecond.
    write_contract(project.path, *({"name": f"g{i}", "command": sleeping(0.4)}
                                   for i in range(3)))
    result = project.runpytest("--verify-contract", "--junitxml=junit.xml",
                               "-o", "junit_family=xunit1", *extra)
    result.assert_outcomes(passed=3)
    for name, case in junit_cases(project.path / "junit.xml").items():
        duration = junit_properties(case)["verifygate.duration_s"]
        assert float(duration) >= 0.4, (name, duration)
        assert case.attrib["time"] == duration, (name, case.attrib)


def test_durations_shows_each_gate_s_own_time(project: pytest.Pytester) -> None:
    write_contract(project.path, *({"name": f"g{i}", "command": sleeping(0.4)}
                                   for i in range(3)))
    result = project.runpytest("--verify-contract", "--verify-jobs", "4", "--durations=0",
                               "-vv")
    result.assert_outcomes(passed=3)
    lines = [line for line in result.outlines if line.endswith(tuple(
        f"call     verify.toml::g{i}" for i in range(3)))]
    assert len(lines) == 3, result.outlines
    assert all(float(line.split("s", 1)[0]) >= 0.4 for line in lines), lines


def test_every_module_of_the_package_says_pytest_dont_rewrite() -> None:
    import ast

    import pytest_verifygate

    root = Path(pytest_verifygate.__file__).parent
    missing = [str(path.relative_to(root)) for path in sorted(root.rglob("*.py"))
               if "PYTEST_DONT_REWRITE" not in (ast.get_docstring(ast.parse(
                   path.read_text(encoding="utf-8"))) or "")]
    assert not missing, (
        "add PYTEST_DONT_REWRITE to the docstring of these modules (pytest would "
        f"assertion-rewrite them otherwise): {missing}")
