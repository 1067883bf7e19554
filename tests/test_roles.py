"""Roles: a gate with ``roles`` runs only when one of them is asked for, in every front end.

Asked for with ``--role R`` (repeatable) on ``run``, ``list`` and ``agent-hook``, with
``--verify-role R`` in pytest, through the pre-commit hook's ``args``, or with
``VERIFYGATE_ROLE`` (comma-separated); with none, only gates without ``roles`` run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plugin_support import QUIET_PLUGINS, init_repo, load_json, passing, write_contract

from conftest import commit_all, stop, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PY = json.dumps(sys.executable)
CONTRACT = f"""
[[gate]]
name = "lint"
command = [{PY}, "-c", "print('lint ran')"]

[[gate]]
name = "pr-checks"
command = [{PY}, "-c", "import sys; print('no pull request here'); sys.exit(1)"]
roles = ["reviewer"]

[[gate]]
name = "tests"
command = [{PY}, "-c", "print('tests ran')"]
roles = ["implementer", "ci"]
"""


def listed(done: subprocess.CompletedProcess[str]) -> dict[str, tuple[bool, str]]:
    assert done.returncode == 0, done.stderr
    return {gate["name"]: (gate["selected"], gate["reason"])
            for gate in json.loads(done.stdout)["gates"]}


def test_a_reviewer_only_gate_does_not_block_a_run_without_a_role(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    done = verifygate("run", "--all", "--json", "report.json", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    report = load_json(repo / "report.json")
    assert [gate["name"] for gate in report["gates"]] == ["lint"]
    assert report["not_selected"] == [
        {"name": "pr-checks",
         "reason": "only for roles [reviewer]; no role asked for (--role, VERIFYGATE_ROLE)"},
        {"name": "tests", "reason": "only for roles [implementer, ci]; no role asked for "
                                    "(--role, VERIFYGATE_ROLE)"},
    ]
    reviewer = verifygate("run", "--all", "--role", "reviewer", cwd=repo)
    assert reviewer.returncode == 1, reviewer.stdout
    assert "FAIL  pr-checks" in reviewer.stdout and "tests" not in reviewer.stdout


def test_roles_repeat_and_come_from_the_environment(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    both = listed(verifygate("list", "--all", "--role", "ci", "--role", "reviewer",
                             "--format", "json", cwd=repo))
    assert both["tests"][0] and both["pr-checks"][0] and both["lint"][0]
    from_env = listed(verifygate("list", "--all", "--format", "json", cwd=repo,
                                 env={"VERIFYGATE_ROLE": "ci, reviewer"}))
    assert from_env == both
    # The command line wins over the environment.
    flag = listed(verifygate("list", "--all", "--role", "implementer", "--format", "json",
                             cwd=repo, env={"VERIFYGATE_ROLE": "reviewer"}))
    assert flag["tests"][0] and not flag["pr-checks"][0]
    assert flag["pr-checks"][1] == "role 'implementer' is not in roles [reviewer]"
    text = verifygate("list", "--all", "--role", "a", "--role", "b", cwd=repo)
    assert ("skip  pr-checks  none of the roles asked for ('a', 'b') is in roles [reviewer]"
            in text.stdout)


def test_the_agent_hook_takes_roles_like_run(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    commit_all(repo)
    write(repo / "new.py", "x = 1\n")
    assert stop(repo).stdout == ""  # lint passes; the reviewer's gate is not asked for
    blocked = stop(repo, "--role", "ci", "--role", "reviewer")
    assert blocked.blocked and "pr-checks" in blocked.reason
    assert stop(repo, env={"VERIFYGATE_ROLE": "reviewer"}).blocked
    # Past the rounds, the hook lets go and says how to run the same gates again.
    given_up = stop(repo, "--role", "ci", "--role", "reviewer", "--max-rounds", "1")
    assert "--role ci --role reviewer" in given_up.message


def test_the_pre_commit_hook_passes_its_args_roles(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    write(repo / ".pre-commit-config.yaml", """
repos:
  - repo: local
    hooks:
      - id: verifygate
        name: verifygate
        entry: verifygate run
        language: system
        pass_filenames: false
        always_run: true
        require_serial: true
        args: [--role, reviewer]
""")
    commit_all(repo)
    write(repo / "a.py", "x = 1\n")
    subprocess.run(["git", "add", "a.py"], cwd=repo, check=True)
    bin_dir = str(Path(sys.executable).parent)
    env = {"PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
           "PRE_COMMIT_HOME": str(repo.parent / "pre-commit-home")}
    done = subprocess.run([sys.executable, "-m", "pre_commit", "run"], cwd=repo,
                          capture_output=True, text=True, check=False, timeout=300,
                          env={**os.environ, **env})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL  pr-checks" in done.stdout


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    monkeypatch.delenv("VERIFYGATE_ROLE", raising=False)
    return pytester


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("verify.toml::")]


def test_pytest_collects_role_scoped_gates_only_for_a_role_asked_for(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_contract(
        project.path,
        {"name": "lint", "command": passing()},
        {"name": "review", "command": passing(), "roles": ["reviewer"]},
        {"name": "build", "command": passing(), "roles": ["ci"]},
    )
    assert collected(project.runpytest("--verify-contract", "--co", "-q")) == [
        "verify.toml::lint"]
    assert collected(project.runpytest("--verify-contract", "--verify-role", "ci",
                                       "--verify-role", "reviewer", "--co", "-q")) == [
        "verify.toml::lint", "verify.toml::review", "verify.toml::build"]
    monkeypatch.setenv("VERIFYGATE_ROLE", "ci")
    assert collected(project.runpytest("--verify-contract", "--co", "-q")) == [
        "verify.toml::lint", "verify.toml::build"]
    project.makeini("[pytest]\nverify_role = reviewer\n")  # the environment beats the ini
    assert collected(project.runpytest("--verify-contract", "--co", "-q")) == [
        "verify.toml::lint", "verify.toml::build"]
    monkeypatch.delenv("VERIFYGATE_ROLE")
    assert collected(project.runpytest("--verify-contract", "--co", "-q")) == [
        "verify.toml::lint", "verify.toml::review"]


def test_roles_that_are_no_marker_names_keep_strict_markers_working(
    project: pytest.Pytester,
) -> None:
    write_contract(
        project.path,
        {"name": "review", "command": passing(), "roles": ["code:reviewer", "QA team"]},
        {"name": "lint", "command": passing()},
    )
    roles = ("--verify-role", "code:reviewer", "--verify-role", "QA team")
    result = project.runpytest("--verify-contract", *roles, "--strict-markers",
                               "-m", "verify_role_code_reviewer", "--verify-report", "r.json")
    result.assert_outcomes(passed=1, deselected=1)
    assert collected(project.runpytest("--verify-contract", *roles, "--strict-markers",
                                       "-m", "verify_role_QA_team", "--co", "-q")) == [
        "verify.toml::review"]
    # The markers are registered with the roles as the contract spells them.
    markers = project.runpytest("--verify-contract", "--markers").stdout.str()
    assert "@pytest.mark.verify_role_code_reviewer: verify contract gates for role " \
           "'code:reviewer'" in markers
    # The report keeps the roles as they are.
    project.runpytest("--verify-contract", *roles, "--verify-report", "r.json")
    report = load_json(project.path / "r.json")
    assert report["gates"][0]["roles"] == ["code:reviewer", "QA team"]
