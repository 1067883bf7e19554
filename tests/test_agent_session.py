"""``verifygate agent-hook`` across a session: its starting point and the contract it had then.

Real payloads, real git repositories (a bare remote where an upstream is needed), real gates.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_verifygate.agents.session_start import record_path
from test_agent_hook import (
    BAD,
    CHECK,
    CHECK_GATE,
    GOOD,
    HOOK,
    checked_project,
    contract,
    rounds_path,
)

from conftest import HookRun, commit_all, git, stop, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PASSING_GATE = contract('[[gate]]\nname = "quick"\ncommand = [PY, "-c", "pass"]\n')


@pytest.fixture
def project(repo: Path) -> Path:
    return checked_project(repo)


def session_start(cwd: Path, session: str = "s-1", source: str = "startup") -> HookRun:
    run = stop(cwd, event="SessionStart", source=source, session=session, begin=False)
    assert run.stdout == ""  # what a SessionStart hook prints becomes the agent's context
    return run


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def recorded_start(session: str = "s-1") -> dict[str, Any]:
    path = record_path(session)
    assert path is not None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def last_report(repo: Path, session: str = "s-1") -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        rounds_path(repo, session).with_suffix(".report.json").read_text())
    return data


# --------------------------------------------------------------------------------------------
# the starting point: committed work is checked too


def test_session_start_records_head_and_answers_nothing(project: Path) -> None:
    before = git(project, "status", "--porcelain", "--ignored")
    run = session_start(project)
    assert run.stderr == ""
    assert recorded_start()["commit"] == head(project)
    assert recorded_start()["directory"] == str(project.resolve())
    assert recorded_start()["refs"]["refs/heads/main"] == head(project)
    assert git(project, "status", "--porcelain", "--ignored") == before


def test_broken_work_committed_after_session_start_blocks_the_stop(project: Path) -> None:
    start = head(project)
    session_start(project)
    write(project / "calc.py", BAD)
    commit_all(project, "the agent commits its broken work")
    assert git(project, "status", "--porcelain") == ""

    run = stop(project)
    assert run.blocked
    assert (f"Checked: every change since HEAD when the session began ({start[:12]}), "
            "committed or not.") in run.reason
    assert "calc.py:1: error: bug found" in run.reason
    assert last_report(project)["changes"]["files"] == ["calc.py"]

    write(project / "calc.py", GOOD.replace("a + b", "b + a"))
    commit_all(project, "fixed, committed")
    assert stop(project).stdout == ""


def test_a_resumed_session_keeps_its_start(project: Path) -> None:
    start = head(project)
    session_start(project)
    write(project / "calc.py", BAD)
    commit_all(project)
    session_start(project, source="resume")
    assert recorded_start()["commit"] == start
    run = stop(project)
    assert run.blocked
    assert f"({start[:12]})" in run.reason


def test_session_start_in_a_repository_without_commits(repo: Path) -> None:
    session_start(repo)
    assert recorded_start()["commit"] is None
    write(repo / "check.py", CHECK)
    write(repo / "verify.toml", CHECK_GATE)
    write(repo / "calc.py", BAD)
    commit_all(repo, "the first commit, broken")
    run = stop(repo)
    assert run.blocked
    assert last_report(repo)["changes"]["source"] == "all"


def test_session_start_outside_git_says_so_on_stderr_only(tmp_path: Path) -> None:
    run = session_start(tmp_path)
    assert "not in a git repository" in run.stderr


# --------------------------------------------------------------------------------------------
# the contract as it was at the start still binds


def test_a_gate_removed_during_the_session_still_runs(project: Path) -> None:
    start = head(project)
    session_start(project)
    write(project / "calc.py", BAD)
    write(project / "verify.toml", PASSING_GATE)  # "check" is gone, "quick" is new
    run = stop(project)
    assert run.blocked
    assert (f"Note: the contract changed since {start[:12]}: gate `check` removed: they run "
            "as they were then. Removing or weakening a gate does not skip it.") in run.reason
    assert "calc.py:1: error: bug found" in run.reason
    report = last_report(project)
    assert [(g["name"], g["outcome"]) for g in report["gates"]] == [
        ("check", "failed"), ("quick", "passed")]
    assert report["warnings"][0].startswith("the contract changed since")


def test_a_weakened_gate_runs_as_it_was(project: Path) -> None:
    session_start(project)
    write(project / "calc.py", BAD)
    write(project / "verify.toml", CHECK_GATE.replace('"check.py"', '"-c", "pass"'))
    commit_all(project, "weaken the gate and commit")
    run = stop(project)
    assert run.blocked
    assert "gate `check` changed: they run as they were then" in run.reason
    assert "calc.py:1: error: bug found" in run.reason


VERDICT_FLIPPER = """
import pytest

@pytest.hookimpl
def pytest_verifygate_modifyreport(report):
    report["verdict"] = "passed"
    for gate in report["gates"]:
        gate["outcome"] = "passed"
"""


def test_a_plugin_added_during_the_session_is_not_loaded(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin can change a verdict: one the session's own contract edit names does not
    join the check, committed or not."""
    write(tmp_path / "site" / "vg_flip.py", VERDICT_FLIPPER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    session_start(project)
    write(project / "calc.py", BAD)
    contract = project / "verify.toml"
    write(contract, '[settings]\nplugins = ["vg_flip"]\n\n' + contract.read_text())
    commit_all(project, "a plugin that passes everything")
    run = stop(project)
    assert run.blocked
    assert "settings.plugins changed: the plugins of then are loaded" in run.reason
    assert "calc.py:1: error: bug found" in run.reason
    assert [(g["name"], g["outcome"]) for g in last_report(project)["gates"]] == [
        ("check", "failed")]


def test_an_unchanged_contract_adds_no_note(project: Path) -> None:
    session_start(project)
    write(project / "calc.py", BAD)
    run = stop(project)
    assert run.blocked
    assert "contract changed" not in run.reason
    assert last_report(project)["warnings"] == []


def test_a_contract_change_that_passes_is_told_to_the_user(project: Path) -> None:
    session_start(project)
    write(project / "verify.toml", CHECK_GATE + PASSING_GATE)
    run = stop(project)
    assert not run.blocked
    assert "the contract changed since" in run.message
    assert "no gate was removed or changed" in run.message
    assert [g["name"] for g in last_report(project)["gates"]] == ["check", "quick"]


@pytest.mark.parametrize("text", ["[[gate]\nname = 'check'\n", "[settings]\njobs = 1\n"],
                         ids=["syntax", "no-gates"])
def test_a_contract_broken_during_the_session_blocks_the_stop(project: Path, text: str) -> None:
    session_start(project)
    write(project / "calc.py", BAD)
    write(project / "verify.toml", text)
    run = stop(project)
    assert run.blocked
    assert "the verify contract cannot be loaded" in run.reason
    assert "verify.toml" in run.reason


def test_a_contract_deleted_during_the_session_blocks_the_stop(project: Path) -> None:
    start = head(project)
    session_start(project)
    (project / "verify.toml").unlink()
    run = stop(project)
    assert run.blocked
    assert f"verify.toml: was removed since {start[:12]}" in run.reason
    assert f"git checkout {start[:12]} -- verify.toml" in run.reason


def test_a_contract_deleted_when_git_cannot_read_the_start_blocks_the_stop(project: Path
                                                                        ) -> None:
    # Git fails to list the start's tree: that is not "there was no contract then" (which
    # would allow the stop with no gate run), so the stop is blocked as unchecked.
    session_start(project)
    (project / "verify.toml").unlink()
    tree = git(project, "rev-parse", "HEAD^{tree}").strip()
    (project / ".git/objects" / tree[:2] / tree[2:]).unlink()
    run = stop(project)
    assert run.blocked
    assert "your work could not be checked" in run.reason
    assert "git ls-tree failed" in run.stderr


def test_a_contract_moved_to_pyproject_still_runs_the_gates_it_had(project: Path) -> None:
    session_start(project)
    write(project / "calc.py", BAD)
    (project / "verify.toml").unlink()
    write(project / "pyproject.toml", "[project]\nname = 'calc'\n\n"
          + PASSING_GATE.replace("[[gate]]", "[[tool.verifygate.gate]]"))
    run = stop(project)
    assert run.blocked
    assert "(it was verify.toml): gate `check` removed" in run.reason
    assert [g["name"] for g in last_report(project)["gates"]] == ["check", "quick"]


def test_a_contract_that_was_invalid_at_the_start_binds_nothing(project: Path) -> None:
    write(project / "verify.toml", "not toml [\n")
    commit_all(project, "a broken contract, before the session")
    session_start(project)
    write(project / "verify.toml", CHECK_GATE)
    write(project / "calc.py", BAD)
    run = stop(project)
    assert run.blocked
    assert "only the current contract's gates run" in run.stderr


def test_a_contract_broken_before_the_session_that_changed_nothing_allows_the_stop(
    project: Path,
) -> None:
    write(project / "verify.toml", CHECK_GATE.replace("command", "comand"))
    commit_all(project, "a mistyped key, before the session")
    session_start(project)
    run = stop(project)
    assert not run.blocked
    assert "nothing changed since HEAD when the session began" in run.message
    assert "'comand'" in run.message
    write(project / "calc.py", BAD)  # once the session changes something, it fails closed
    assert stop(project).blocked


def test_no_contract_now_and_none_at_the_start_allows_the_stop(repo: Path) -> None:
    write(repo / "calc.py", GOOD)
    commit_all(repo)
    session_start(repo)
    write(repo / "calc.py", BAD)
    run = stop(repo)
    assert not run.blocked
    assert "no verify contract found" in run.message


def test_a_mistyped_session_start_payload_never_blocks(project: Path) -> None:
    done = subprocess.run(HOOK, input=b'{"session_id": "s", "cwd": 3, '
                          b'"hook_event_name": "SessionStart"}', capture_output=True,
                          check=False, timeout=60)
    assert done.returncode == 0
    assert b'"decision"' not in done.stdout
    assert b"'cwd' is missing or not a string" in done.stderr


def test_a_named_contract_removed_during_the_session_blocks_and_one_never_there_allows(
    project: Path,
) -> None:
    session_start(project)
    (project / "verify.toml").unlink()
    assert "verify.toml: was removed since" in stop(project, "--contract", "verify.toml").reason
    run = stop(project, "--contract", "other.toml", session="session-2")
    assert not run.blocked
    assert "no such contract file" in run.message


def test_a_contract_that_shadows_the_one_above_from_a_subdirectory_blocks(project: Path) -> None:
    (project / "pkg").mkdir()
    session_start(project / "pkg")  # the session begins in pkg/
    write(project / "pkg" / "verify.toml", PASSING_GATE)  # found first from pkg/
    write(project / "pkg" / "mod.py", "y = 2  # BUG\n")
    run = stop(project / "pkg")
    assert run.blocked
    assert "replaces verify.toml, the contract at" in run.reason
    assert "from another directory" in run.reason
