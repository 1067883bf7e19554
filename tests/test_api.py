"""The public Python API for orchestrators, retries and manual gates, and the README loop."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

import pytest_verifygate
from pytest_verifygate import (
    ChangeRequest,
    Gate,
    GateResult,
    compute_changes,
    failure_signature,
    load_contract,
    run_gates,
    select_gates,
    to_digest,
    to_report,
)
from pytest_verifygate.report.document import load_schema

from conftest import commit_all, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PY = json.dumps(sys.executable)
# Fails while calc.py holds the bug; prints where, with an absolute path.
CHECK = ("import pathlib, sys\n"
         "calc = pathlib.Path('calc.py')\n"
         "if 'BUG' in calc.read_text():\n"
         "    print(calc.resolve(), ':1: error: the bug is still here', sep='')\n"
         "    sys.exit(1)\n")
GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a - b  # BUG\n"


def test_every_public_name_resolves_and_importing_stays_cheap() -> None:
    for name in pytest_verifygate.__all__:
        assert getattr(pytest_verifygate, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pytest_verifygate.nope  # noqa: B018
    probe = ("import sys, pytest_verifygate; "
             "print(sorted(m for m in sys.modules if m.startswith('pytest_verifygate.')))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True).stdout
    assert loaded.strip() == "[]"


def test_load_select_run_report_and_digest_with_a_callback_per_gate(repo: Path) -> None:
    write(repo / "calc.py", GOOD)
    write(repo / "check.py", CHECK)
    write(repo / "verify.toml", f"""
[[gate]]
name = "check"
command = [{PY}, "check.py"]
when_changed = ["*.py"]

[[gate]]
name = "docs"
command = ["false"]
when_changed = ["docs/**"]

[[gate]]
name = "always"
command = [{PY}, "-c", "print('fine')"]
""")
    commit_all(repo)
    write(repo / "calc.py", BAD)

    contract = load_contract(start=repo)
    assert [gate.name for gate in contract.gates] == ["check", "docs", "always"]
    changes = compute_changes(contract.root, ChangeRequest(worktree=True))
    assert changes.files == ("calc.py",)
    selections = select_gates(contract, changes)
    assert [(s.gate.name, s.selected) for s in selections] == [
        ("check", True), ("docs", False), ("always", True)]

    finished: list[tuple[str, str]] = []

    def on_finished(gate: Gate, result: GateResult) -> None:
        finished.append((gate.name, result.outcome))

    run = run_gates(contract, selections, changes, jobs=2, on_finished=on_finished)
    assert sorted(finished) == [("always", "passed"), ("check", "failed")]
    assert run.verdict == "failed"

    report = to_report(run)
    jsonschema.validate(report, load_schema())
    assert report["summary"] == {"passed": 1, "failed": 1, "skipped": 0,
                                 "pending": 0, "interrupted": 0}
    assert report["changes"] == {"source": "worktree", "ref": "HEAD", "files": ["calc.py"]}
    assert report["not_selected"][0]["name"] == "docs"
    (failed,) = [gate for gate in report["gates"] if gate["outcome"] == "failed"]
    assert failed["code"] == "command_failed"
    assert failed["exit_code"] == 1

    digest = to_digest(report, root=str(contract.repo_root))
    assert "### `check` failed: command_failed, exit status 1" in digest
    assert "calc.py:1: error: the bug is still here" in digest
    assert str(repo) not in digest
    assert failure_signature(report, root=contract.repo_root) is not None


def test_retries_turn_a_first_failure_into_a_flaky_pass(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "attempts"
    script = ("import pathlib, sys; p = pathlib.Path(sys.argv[1]); "
              "n = int(p.read_text()) if p.exists() else 0; p.write_text(str(n + 1)); "
              "print('attempt', n + 1); sys.exit(0 if n else 1)")
    write(repo / "verify.toml", f"""
[[gate]]
name = "wobbly"
command = [{PY}, "-c", "{script}", "{counter}"]
retries = 1
""")
    contract = load_contract(start=repo)
    changes = compute_changes(contract.root, ChangeRequest(all=True))
    run = run_gates(contract, select_gates(contract, changes), changes)
    (result,) = run.results
    assert counter.read_text() == "2"
    assert (result.outcome, result.flaky, result.attempts) == ("passed", True, 2)
    assert run.verdict == "passed"
    (entry,) = to_report(run)["gates"]
    assert (entry["outcome"], entry["flaky"], entry["attempts"]) == ("passed", True, 2)


def test_without_retries_the_same_gate_fails(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "attempts"
    script = ("import pathlib, sys; p = pathlib.Path(sys.argv[1]); "
              "n = int(p.read_text()) if p.exists() else 0; p.write_text(str(n + 1)); "
              "sys.exit(0 if n else 1)")
    write(repo / "verify.toml",
          f'[[gate]]\nname = "wobbly"\ncommand = [{PY}, "-c", "{script}", "{counter}"]\n')
    contract = load_contract(start=repo)
    changes = compute_changes(contract.root, ChangeRequest(all=True))
    (result,) = run_gates(contract, select_gates(contract, changes), changes).results
    assert (result.outcome, result.flaky, result.attempts) == ("failed", False, 1)


def test_manual_gate_is_pending_and_so_is_the_verdict(repo: Path, tmp_path: Path) -> None:
    never = tmp_path / "never-run"
    write(repo / "verify.toml", f"""
[[gate]]
name = "lint"
command = [{PY}, "-c", "pass"]

[[gate]]
name = "security-review"
command = "touch {never}"
kind = "manual"
""")
    contract = load_contract(start=repo)
    changes = compute_changes(contract.root, ChangeRequest(all=True))
    run = run_gates(contract, select_gates(contract, changes), changes)
    outcomes = {result.name: result.outcome for result in run.results}
    assert outcomes == {"lint": "passed", "security-review": "pending"}
    assert run.verdict == "pending"
    assert not never.exists()
    report = to_report(run)
    assert report["verdict"] == "pending"
    assert report["summary"]["pending"] == 1
    assert to_digest(report).startswith("verifygate: pending")


# --------------------------------------------------------------------------------------------
# The README's verify-until-pass loop, verbatim.


def verify(repo: Path) -> dict[str, Any]:
    """One round: the gates that apply to the working tree's changes, as a report."""
    contract = load_contract(start=repo)
    changes = compute_changes(contract.root, ChangeRequest(worktree=True))
    selections = select_gates(contract, changes, role="implementer")
    run = run_gates(
        contract, selections, changes,
        on_finished=lambda gate, result: print(f"{gate.name}: {result.outcome}"),
    )
    return to_report(run)


def verify_until_pass(repo: Path, ask_agent: Callable[[str], None],
                      max_rounds: int = 3) -> dict[str, Any]:
    """Give the agent the digest until the gates pass, at most ``max_rounds`` times."""
    previous = None
    for round_number in range(max_rounds + 1):
        report = verify(repo)
        if report["verdict"] != "failed" or round_number == max_rounds:
            return report  # passed / pending / unverified, or still failing: a human decides
        digest = to_digest(report, root=repo)
        signature = failure_signature(report, root=repo)
        if signature == previous:
            digest = "The failures are identical to the previous round's.\n\n" + digest
        previous = signature
        ask_agent(digest)  # the agent edits the working tree
    raise AssertionError("unreachable")


@pytest.fixture
def buggy(repo: Path) -> Path:
    write(repo / "calc.py", GOOD)
    write(repo / "check.py", CHECK)
    write(repo / "verify.toml",
          f'[[gate]]\nname = "check"\ncommand = [{PY}, "check.py"]\nroles = ["implementer"]\n')
    commit_all(repo)
    write(repo / "calc.py", BAD)
    return repo


def test_loop_ends_when_the_agent_fixes_the_bug(buggy: Path) -> None:
    digests: list[str] = []

    def agent(digest: str) -> None:
        digests.append(digest)
        if len(digests) == 2:
            write(buggy / "calc.py", GOOD + "# fixed\n")

    report = verify_until_pass(buggy, agent)
    assert report["verdict"] == "passed"
    assert len(digests) == 2
    assert "calc.py:1: error: the bug is still here" in digests[0]
    assert not digests[0].startswith("The failures are identical")
    assert digests[1].startswith("The failures are identical to the previous round's.")


def test_loop_stops_after_the_round_cap(buggy: Path) -> None:
    digests: list[str] = []
    report = verify_until_pass(buggy, digests.append, max_rounds=2)
    assert report["verdict"] == "failed"
    assert len(digests) == 2
