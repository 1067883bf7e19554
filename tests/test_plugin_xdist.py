"""The pytest plugin under pytest-xdist (``-n 2``), and the hooks with and without it."""

from __future__ import annotations

import json

import pytest

from plugin_support import (
    QUIET_PLUGINS,
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

from conftest import commit_all

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

pytest.importorskip("xdist")

XDIST = ("-n", "2", "-p", "no:cacheprovider")


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    return pytester


def test_same_items_and_outcomes_and_one_complete_report(project: pytest.Pytester) -> None:
    write_contract(
        project.path,
        {"name": "lint", "command": passing(), "category": "unit"},
        {"name": "types", "command": failing()},
        {"name": "docs", "command": [*passing(), "{files}"], "when_changed": ["*.md"]},
        {"name": "release", "command": "ship it", "kind": "manual"},
        {"name": "build", "command": passing()},
    )
    project.makepyfile(test_one="def test_one(): pass")
    result = project.runpytest_subprocess(
        "--verify-contract", *XDIST, "--verify-report", "report.json",
        "--verify-digest", "digest.md", "--junitxml", "junit.xml", "-o", "junit_family=xunit1",
        "-rs",
    )
    result.assert_outcomes(passed=3, failed=1, skipped=2)
    result.stdout.fnmatch_lines([
        "*[[]command_failed[]] types: exit status 3*",
        "*= verifygate =*",
        "verdict: failed (2 passed, 1 failed, 1 skipped, 1 pending)*",
    ])
    result.stdout.fnmatch_lines(["*verify.toml:12: pending: manual gate: awaits human sign-off"])
    report = load_json(project.path / "report.json")
    validate_report(report)
    # Every gate exactly once, in contract order, although two workers ran them.
    assert [gate["name"] for gate in report["gates"]] == [
        "lint", "types", "docs", "release", "build"
    ]
    gates = gates_by_name(report)
    assert gates["types"]["code"] == "command_failed"
    assert gates["release"]["outcome"] == "pending"
    assert gates["docs"]["reason"] == "no matching files for {files}"
    assert report["summary"] == {"passed": 2, "failed": 1, "skipped": 1,
                                 "pending": 1, "interrupted": 0}
    assert "`types` failed: command_failed" in (project.path / "digest.md").read_text()
    cases = junit_cases(project.path / "junit.xml")
    assert junit_properties(cases["types"])["verifygate.code"] == "command_failed"
    assert junit_properties(cases["lint"])["verifygate.outcome"] == "passed"
    failure = cases["types"].find("failure")
    assert failure is not None
    assert failure.attrib["message"] == "[command_failed] types: exit status 3"


def test_workers_use_the_controllers_change_set(project: pytest.Pytester) -> None:
    write_contract(
        project.path,
        {"name": "py", "command": python("import sys; print('files:', sys.argv[1:])",
                                         "{files}"),
         "when_changed": ["**/*.py"]},
        {"name": "docs", "command": passing(), "when_changed": ["docs/**"]},
    )
    (project.path / "src").mkdir()
    (project.path / "src" / "app.py").write_text("x = 1\n")
    # What pytester and the conftest write is not part of the change.
    (project.path / ".gitignore").write_text("stdout\nstderr\nrunpytest-*\n*.json\n"
                                             "__pycache__/\n")
    project.makeconftest(
        """
        import json, pathlib
        def pytest_configure(config):
            workerinput = getattr(config, "workerinput", None)
            if workerinput is not None:
                name = "workerinput-" + workerinput["workerid"] + ".json"
                pathlib.Path(name).write_text(json.dumps(workerinput["verifygate"]))
        """
    )
    commit_all(project.path)
    (project.path / "src" / "app.py").write_text("x = 2\n")
    result = project.runpytest_subprocess("--verify-contract", "--verify-changed-from", "HEAD",
                                          *XDIST, "--verify-report", "report.json")
    result.assert_outcomes(passed=1, skipped=1)  # docs: nothing it watches changed
    received = [json.loads(path.read_text())
                for path in sorted(project.path.glob("workerinput-*.json"))]
    assert len(received) == 2
    for shared in received:
        assert shared["changes"] == {"source": "ref", "ref": "HEAD", "files": ["src/app.py"],
                                     "deleted": []}
        assert shared["contract"] == "verify.toml"
    report = load_json(project.path / "report.json")
    assert [gate["name"] for gate in report["gates"]] == ["py"]
    assert "files: ['src/app.py']" in report["gates"][0]["output_tail"]
    assert [entry["name"] for entry in report["not_selected"]] == ["docs"]


HOOKS_CONFTEST = """
import pytest

def pytest_verifygate_classify(gate, result):
    if gate.name == "artifact" and "dist/app.js" in result.output_tail:
        return "sequence_issue"
    return None

def pytest_verifygate_gate_finished(gate, result):
    with open("finished.log", "a") as log:
        log.write(f"{gate.name} {result.outcome}\\n")

def pytest_verifygate_modifyreport(report):
    report["build_id"] = "b-42"
    with open("modifyreport.log", "a") as log:
        log.write("called\\n")
"""


@pytest.mark.parametrize("xdist", [False, True], ids=["no-xdist", "xdist"])
@pytest.mark.parametrize("where", ["conftest", "contract"])
def test_hooks(project: pytest.Pytester, xdist: bool, where: str) -> None:
    """Hooks from a conftest.py, or from a plugin the contract names (as the command loads
    it), run alike under pytest."""
    write_contract(
        project.path,
        {"name": "artifact", "command": failing(1, "missing dist/app.js")},
        {"name": "other", "command": failing(1, "missing dist/other.js")},
        {"name": "ok", "command": passing()},
        settings={"plugins": ["house_hooks"]} if where == "contract" else None,
    )
    if where == "conftest":
        project.makeconftest(HOOKS_CONFTEST)
    else:
        project.makepyfile(house_hooks=HOOKS_CONFTEST)
    extra = XDIST if xdist else ("-p", "no:cacheprovider")
    result = project.runpytest_subprocess("--verify-contract", *extra, "--verify-report",
                                          "report.json")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*[[]sequence_issue[]] artifact: exit status 1*"])
    report = load_json(project.path / "report.json")
    validate_report(report)
    assert report["build_id"] == "b-42"
    gates = gates_by_name(report)
    assert gates["artifact"]["code"] == "sequence_issue"
    assert gates["other"]["code"] == "command_failed"
    finished = sorted((project.path / "finished.log").read_text().splitlines())
    assert finished == ["artifact failed", "ok passed", "other failed"]
    # The report is built (and the hook called) once, by the controller.
    assert (project.path / "modifyreport.log").read_text().splitlines() == ["called"]


@pytest.mark.parametrize(("plugins", "args", "message"), [
    (["vg_missing"], (), "cannot load plugin 'vg_missing': ModuleNotFoundError"),
    (["house_hooks"], ("-p", "no:house_hooks"),
     "cannot load plugin 'house_hooks': ValueError: it is blocked"),
])
def test_a_contract_plugin_pytest_cannot_load_stops_the_session(
    project: pytest.Pytester, plugins: list[str], args: tuple[str, ...], message: str
) -> None:
    """Never a session without it: the gates would not be the ones the contract declares."""
    write_contract(project.path, {"name": "ok", "command": passing()},
                   settings={"plugins": plugins})
    project.makepyfile(house_hooks=HOOKS_CONFTEST)
    result = project.runpytest_subprocess("--verify-contract", "-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*key 'settings.plugins': {message}*"])


def test_gates_on_different_workers_overlap(project: pytest.Pytester) -> None:
    write_contract(
        project.path,
        {"name": "a", "command": stamping("a.stamp", 1.0)},
        {"name": "b", "command": stamping("b.stamp", 1.0)},
    )
    project.runpytest_subprocess("--verify-contract", *XDIST).assert_outcomes(passed=2)
    (a_start, a_end), (b_start, b_end) = (interval(project.path / f"{n}.stamp") for n in "ab")
    assert max(a_start, b_start) < min(a_end, b_end)


def test_maxfail_under_xdist_still_reports_each_gate_once(project: pytest.Pytester) -> None:
    write_contract(
        project.path,
        {"name": "bad", "command": failing()},
        *({"name": f"ok{index}", "command": passing()} for index in range(4)),
    )
    result = project.runpytest_subprocess("--verify-contract", *XDIST, "-x",
                                          "--verify-report", "report.json")
    # xdist ends a -x run as interrupted (2); without xdist it is a failure (1).
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])
    report = load_json(project.path / "report.json")
    validate_report(report)
    gates = gates_by_name(report)
    assert list(gates) == ["bad", "ok0", "ok1", "ok2", "ok3"]
    assert gates["bad"]["code"] == "command_failed"
    assert all(gates[f"ok{i}"]["outcome"] == "passed" or gates[f"ok{i}"]["code"] ==
               "interrupted" for i in range(4))
