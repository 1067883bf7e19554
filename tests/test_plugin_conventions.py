"""``pytest --verify-contract`` by pytest's conventions: a contract file named on the command
line is collected alone, a change no gate watches is skips (exit 0) rather than "no tests"
(exit 5), and ``-x`` leaves the gates it cut short interrupted, not failed."""

from __future__ import annotations

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
    validate_report,
    write_contract,
)

from conftest import verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    monkeypatch.delenv("VERIFYGATE_ROLE", raising=False)
    return pytester


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and " " not in line]


def test_a_contract_file_named_on_the_command_line_is_collected_alone(
    project: pytest.Pytester,
) -> None:
    write_contract(project.path, {"name": "lint", "command": passing()})
    write_contract(project.path, {"name": "other", "command": passing()}, name="ci/gates.toml")
    project.makepyfile(**{"tests/test_unit": "def test_unit(): pass"})
    both = ["tests/test_unit.py::test_unit", "verify.toml::lint"]
    assert collected(project.runpytest("--verify-contract", "verify.toml", "--co", "-q")) == [
        "verify.toml::lint"]
    assert collected(project.runpytest("--verify-contract", "ci/gates.toml", "--co",
                                       "-q")) == ["ci/gates.toml::other"]
    ran = project.runpytest("--verify-contract", "verify.toml")
    ran.assert_outcomes(passed=1)
    # Other paths named are collected too; PATH after "=" only chooses the contract.
    assert sorted(collected(project.runpytest("--verify-contract", "verify.toml", "tests",
                                              "--co", "-q"))) == both
    assert collected(project.runpytest("--verify-contract=verify.toml", "--co", "-q")) == both
    assert collected(project.runpytest("--verify-contract", "--co", "-q")) == both
    # In addopts the contract is chosen, not the only thing collected.
    project.makeini("[pytest]\naddopts = --verify-contract verify.toml\n")
    assert collected(project.runpytest("--co", "-q")) == both


def test_a_contract_file_named_under_xdist(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    write_contract(project.path, {"name": "lint", "command": passing()},
                   {"name": "types", "command": passing()})
    project.makepyfile(test_unit="def test_unit(): pass")
    result = project.runpytest_subprocess("--verify-contract", "verify.toml", "-n", "2",
                                          "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


CHANGE_CONTRACT = (
    {"name": "lint", "command": passing(), "when_changed": ["src/**"]},
    {"name": "types", "command": passing(), "when_changed_all": ["src/**", "stubs/**"]},
    {"name": "review", "command": passing(), "when_changed": ["docs/**"],
     "roles": ["reviewer"]},
)


def test_a_change_no_gate_watches_skips_the_gates_and_exits_0(project: pytest.Pytester) -> None:
    write_contract(project.path, *CHANGE_CONTRACT)
    write(project.path / "docs" / "guide.md", "# guide\n")
    result = project.runpytest("--verify-contract", "--verify-files", "docs/guide.md", "-rs",
                               "--junitxml", "junit.xml", "-o", "junit_family=xunit1",
                               "--verify-report", "report.json")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(skipped=2)  # review is for reviewers: not collected at all
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] verify.toml:1: no changed file matches when_changed [[]src/[*][*][]]",
        "SKIPPED [[]1[]] verify.toml:5: when_changed_all pattern 'src/[*][*]' matches no "
        "changed file",
    ])
    result.stdout.fnmatch_lines([
        "verdict: unverified (0 passed, 0 failed, 0 skipped, 0 pending): no gate ran*"])
    cases = junit_cases(project.path / "junit.xml")
    assert sorted(cases) == ["lint", "types"]
    skipped = cases["lint"].find("skipped")
    assert skipped is not None
    assert skipped.attrib["message"] == "no changed file matches when_changed [src/**]"
    assert junit_properties(cases["lint"])["verifygate.outcome"] == "skipped"
    report = load_json(project.path / "report.json")
    validate_report(report)
    assert (report["verdict"], report["gates"]) == ("unverified", [])
    assert [entry["name"] for entry in report["not_selected"]] == ["lint", "types", "review"]
    # The command line says the same for the same change.
    cli = verifygate("run", "--files", "docs/guide.md", "--json", "cli.json", "--junit",
                     "cli.xml", cwd=project.path)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    cli_report = load_json(project.path / "cli.json")
    assert (cli_report["verdict"], cli_report["not_selected"]) == ("unverified",
                                                                 report["not_selected"])
    assert sorted(junit_cases(project.path / "cli.xml")) == ["lint", "types"]
    # -k deselects as for any test; what is left still exits 0.
    only = project.runpytest("--verify-contract", "--verify-files", "docs/guide.md",
                             "-k", "lint")
    only.assert_outcomes(skipped=1, deselected=1)
    assert only.ret == pytest.ExitCode.OK


def test_fail_when_unverified_still_fails_in_both(project: pytest.Pytester) -> None:
    write_contract(project.path, *CHANGE_CONTRACT, settings={"fail_when_unverified": True})
    write(project.path / "docs" / "guide.md", "# guide\n")
    result = project.runpytest("--verify-contract", "--verify-files", "docs/guide.md")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["verdict: failed (*): files changed but no gate ran*"])
    assert verifygate("run", "--files", "docs/guide.md", cwd=project.path).returncode == 1


def test_no_gate_for_the_roles_asked_exits_0_as_the_cli_does(project: pytest.Pytester) -> None:
    write_contract(project.path, {"name": "review", "command": failing(), "roles": ["reviewer"]},
                   {"name": "late", "command": failing(), "phases": [3]})
    result = project.runpytest("--verify-contract", "--verify-all", "--verify-phase", "1")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["verdict: unverified (*"])
    assert verifygate("run", "--all", "--phase", "1", cwd=project.path).returncode == 0
    # The role asked for: its gate runs and fails in both.
    failed = project.runpytest("--verify-contract", "--verify-all", "--verify-role", "reviewer")
    assert failed.ret == pytest.ExitCode.TESTS_FAILED
    assert verifygate("run", "--all", "--role", "reviewer", cwd=project.path).returncode == 1
    # Deselected by -k, pytest's own "no tests ran" stands.
    assert project.runpytest("--verify-contract", "--verify-all", "--verify-role", "reviewer",
                             "-k", "nothing").ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_exitfirst_counts_cut_short_gates_as_interrupted(project: pytest.Pytester) -> None:
    slow = python("import time; time.sleep(30)")
    write_contract(
        project.path,
        {"name": "quick", "command": failing()},
        {"name": "slow", "command": slow},
        {"name": "slow2", "command": slow},
        {"name": "queued", "command": counting("queued.txt")},
        settings={"jobs": 2},  # quick's slot goes to slow2; queued waits for a slot
    )
    result = project.runpytest_subprocess("--verify-contract", "-x", "--verify-report",
                                          "report.json", "-p", "no:cacheprovider",
                                          "--junitxml", "junit.xml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "verdict: failed (0 passed, 1 failed, 0 skipped, 0 pending, 3 interrupted): "
        "quick [[]command_failed[]]; interrupted: slow, slow2, queued*",
    ])
    assert "FAILED verify.toml::slow" not in result.stdout.str()
    result.stdout.fnmatch_lines(["slow * interrupted * interrupted *"])
    report = load_json(project.path / "report.json")
    validate_report(report)
    assert [(gate["outcome"], gate["code"]) for gate in report["gates"]] == [
        ("failed", "command_failed"), *[("failed", "interrupted")] * 3]
    # Machine-readable counts agree with the verdict line: cut short is not failed.
    assert report["summary"] == {"passed": 0, "failed": 1, "skipped": 0, "pending": 0,
                                 "interrupted": 3}


def test_files_pytest_writes_are_not_changes_on_the_next_run(project: pytest.Pytester) -> None:
    write_contract(project.path, {"name": "everything", "command": passing(),
                                  "when_changed": ["**"]})
    project.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    from conftest import commit_all

    commit_all(project.path)
    outputs = ("--junitxml", "out/junit.xml", "--verify-report", "out/report.json",
               "--verify-digest", "out/digest.md")
    project.runpytest("--verify-contract", "--verify-all", *outputs).assert_outcomes(passed=1)
    assert sorted(path.name for path in (project.path / "out").iterdir()) == [
        "digest.md", "junit.xml", "report.json"]
    again = project.runpytest("--verify-contract", "--verify-changed-from", "HEAD", *outputs)
    again.assert_outcomes(skipped=1)
    # Without naming them, the next run still knows they are the package's own.
    plain = project.runpytest("--verify-contract", "--verify-changed-from", "HEAD")
    plain.assert_outcomes(skipped=1)
