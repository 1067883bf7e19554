"""middle's own test suite, case by case, against ``.middle/verify.toml`` as read here.

Each case names the upstream test (``thejustinwalsh/middle``, file:line), restates its facts
and runs them through the real ``verifygate`` command in a real git repository. A case either
agrees, or differs deliberately: the README's "Differences from the home systems" table says
why, and the test asserts our side of the difference. Out of scope (middle's GitHub workflow:
checkbox reverts, evidence comments, pull-request state, rate limits, head-SHA caching) is
listed in ``OUT_OF_SCOPE`` so the boundary stays visible.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from conftest import verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

CONFIG = "packages/dispatcher/test/gates/verify-config.test.ts"
RUNNER = "packages/dispatcher/test/gates/gate-runner.test.ts"
WIRING = "packages/dispatcher/test/gates/verify.test.ts"
PASS = "packages/dispatcher/test/gates/checkbox-revert-pass.test.ts"
WORKFLOW = "packages/dispatcher/test/implementation-workflow.test.ts"

OUT_OF_SCOPE = {
    f"{WIRING}:101-:232": "checkbox reverts, evidence comments and the reconcile loop: middle's "
                          "GitHub workflow around the gates, not the gates",
    f"{PASS}:145-:297": "the checkbox-revert pass: head-SHA skipping, rate limits, parked "
                        "workflows (pull-request workflow)",
    f"{WORKFLOW}:1452-:1700": "nudge and park rounds of middle's own agent sessions; the "
                              "digest they carry is checked in test_failure_report_names_gate",
}


def middle_repo(repo: Path, toml: str) -> Path:
    return write(repo / ".middle" / "verify.toml", toml)


def listed(repo: Path, *args: str) -> list[str]:
    done = verifygate("list", "--format", "json", *args, cwd=repo)
    assert done.returncode == 0, done.stderr
    return [gate["name"] for gate in json.loads(done.stdout)["gates"] if gate["selected"]]


def report(repo: Path, *args: str) -> dict[str, Any]:
    out = repo.parent / "report.json"
    verifygate("run", "--all", "--json", str(out), *args, cwd=repo)
    result: dict[str, Any] = json.loads(out.read_text())
    return result


# --------------------------------------------------------------------------------------------
# the loader: every rejected config fails loudly, naming the file, the gate and the key


class Rejected(NamedTuple):
    upstream: str
    label: str
    toml: str
    says: str  # part of our one-line error


REJECTED = [
    Rejected(f"{CONFIG}:101", "no gates", 'title = "nope"', "key 'title': unknown key"),
    Rejected(f"{CONFIG}:101", "no gates (empty file)", "", "defines no gates"),
    Rejected(f"{CONFIG}:102", "missing name", '[[gate]]\ncommand = "x"', "key 'name': is required"),
    Rejected(f"{CONFIG}:103", "empty name", '[[gate]]\nname = "  "\ncommand = "x"',
             "key 'name': must not be empty"),
    Rejected(f"{CONFIG}:104", "missing command", '[[gate]]\nname = "x"',
             "gate 'x': key 'command': is required"),
    Rejected(f"{CONFIG}:105", "empty command", '[[gate]]\nname = "x"\ncommand = ""',
             "gate 'x': key 'command': must not be empty"),
    Rejected(f"{CONFIG}:106", "duplicate name",
             '[[gate]]\nname = "x"\ncommand = "a"\n[[gate]]\nname = "x"\ncommand = "b"',
             "key 'name': duplicate gate name"),
    Rejected(f"{CONFIG}:107", "non-positive timeout",
             '[[gate]]\nname = "x"\ncommand = "a"\ntimeout_seconds = 0',
             "key 'timeout_seconds': must be a positive number"),
    Rejected(f"{CONFIG}:108", "non-int phases",
             '[[gate]]\nname = "x"\ncommand = "a"\nphases = [1.5]',
             "key 'phases': must be an integer"),
    Rejected(f"{CONFIG}:109", "negative phases",
             '[[gate]]\nname = "x"\ncommand = "a"\nphases = [-1]',
             "key 'phases': must be >= 1"),
    Rejected(f"{CONFIG}:113", "empty phases", '[[gate]]\nname = "x"\ncommand = "a"\nphases = []',
             "key 'phases': must not be an empty list"),
    Rejected(f"{CONFIG}:114", "unknown key", '[[gate]]\nname = "x"\ncommand = "a"\ncomand = "typo"',
             "key 'comand': unknown key in [[gate]] (did you mean 'command'?)"),
    Rejected(f"{CONFIG}:115", "invalid category",
             '[[gate]]\nname = "x"\ncommand = "a"\ncategory = "e2e"',
             "key 'category': must be 'unit' or 'integration'"),
    Rejected(f"{CONFIG}:116", "invalid toml", "[[gate]\nname = ", "is not valid TOML"),
]


@pytest.mark.parametrize("case", REJECTED, ids=[case.label for case in REJECTED])
def test_rejected_configs_fail_loudly(repo: Path, case: Rejected) -> None:
    """Agree: each is rejected (exit 2), in one line naming the file and what to fix."""
    middle_repo(repo, case.toml)
    done = verifygate("list", "--all", cwd=repo)
    assert done.returncode == 2, (case.upstream, done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("verifygate: error: .middle/verify.toml: "), line
    assert case.says in line, (case.upstream, line)


def test_unknown_key_suggestions_come_from_the_live_key_set(repo: Path) -> None:
    """CONFIG:124 wants the message for an unknown key to list the live keys (``category``
    included). Differs in wording, deliberately: a misspelt key gets the one closest live key;
    a key with no close match gets the whole live list. Both are built from the key set in
    force, so neither goes stale."""
    middle_repo(repo, '[[gate]]\nname = "x"\ncommand = "a"\ncategry = "unit"')
    assert "did you mean 'category'?" in verifygate("list", "--all", cwd=repo).stderr
    middle_repo(repo, '[[gate]]\nname = "x"\ncommand = "a"\nzzzz = 1')
    line = verifygate("list", "--all", cwd=repo).stderr
    assert "known keys:" in line and "category" in line and "phases" in line, line


def test_gates_keep_declared_order_and_the_default_timeout(repo: Path) -> None:
    """Agree with CONFIG:24 (declared order, 300 s by default) and CONFIG:134 (read from disk)."""
    middle_repo(repo, '[[gate]]\nname = "typecheck"\ncommand = "bun run typecheck"\n\n'
                      '[[gate]]\nname = "test"\ncommand = "bun test"\ntimeout_seconds = 600\n')
    assert listed(repo, "--all") == ["typecheck", "test"]
    from pytest_verifygate import load_contract  # the values the command line does not print

    contract = load_contract(repo / ".middle" / "verify.toml")
    assert [(g.timeout_seconds, g.category or "unit", g.shell) for g in contract.gates] == [
        (300.0, "unit", True), (600.0, "unit", True)]


def test_a_fractional_timeout_is_accepted_and_kills_the_gate(repo: Path) -> None:
    """Agree with RUNNER:37: a gate over its (fractional) timeout is killed and reported as
    timed out, without waiting out its command."""
    middle_repo(repo, '[[gate]]\nname = "slow"\ncommand = "sleep 10"\ntimeout_seconds = 0.2\n')
    (gate,) = report(repo)["gates"]
    assert (gate["outcome"], gate["code"], gate["exit_code"]) == ("failed", "timeout", None)
    assert gate["duration_s"] < 10  # killed, not waited for


PHASED = ('[[gate]]\nname = "typecheck"\ncommand = "tc"\n\n'
          '[[gate]]\nname = "acceptance"\ncommand = "acc"\nphases = [40, 41]\n')


@pytest.mark.parametrize(
    ("upstream", "phase", "expected"),
    [
        (f"{CONFIG}:48", "41", ["typecheck", "acceptance"]),  # carries the phases scope
        (f"{CONFIG}:90", "99", ["typecheck"]),  # an unscoped gate runs for every phase
        (f"{CONFIG}:94", "40", ["typecheck", "acceptance"]),  # scoped: its phases, in order
    ],
)
def test_phases_address_gates(repo: Path, upstream: str, phase: str,
                              expected: list[str]) -> None:
    """Agree: ``--phase N`` selects the unscoped gates and those listing N, in declared order."""
    middle_repo(repo, PHASED)
    assert listed(repo, "--all", "--phase", phase) == expected, upstream


def test_integration_category_is_a_marker(repo: Path) -> None:
    """Agree with CONFIG:57: category defaults to unit, integration is accepted, and the
    integration gates can be picked out (here: pytest's ``-m integration``)."""
    middle_repo(repo, '[[gate]]\nname = "test"\ncommand = "true"\n\n'
                      '[[gate]]\nname = "smoke"\ncommand = "true"\ncategory = "integration"\n')
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--verify-contract",
         ".middle/verify.toml", "--verify-all", "-m", "integration", "--co", "-q"],
        cwd=repo, capture_output=True, text=True, timeout=120)
    assert ".middle/verify.toml::smoke" in done.stdout, done.stdout + done.stderr
    assert ".middle/verify.toml::test" not in done.stdout
    unit = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--verify-contract",
         ".middle/verify.toml", "--verify-all", "-m", "unit", "--co", "-q"],
        cwd=repo, capture_output=True, text=True, timeout=120)
    assert ".middle/verify.toml::test" in unit.stdout, unit.stdout + unit.stderr


def test_a_missing_file_fails_loudly_with_its_path(repo: Path) -> None:
    """Agree with CONFIG:143: naming a contract that is not there is an error with the path."""
    done = verifygate("list", "--contract", ".middle/nope.toml", cwd=repo)
    assert done.returncode == 2
    assert ".middle/nope.toml" in done.stderr


def test_the_canonical_path_is_found_from_the_worktree(repo: Path) -> None:
    """Agree with CONFIG:149: ``<worktree>/.middle/verify.toml`` is the contract, its project
    root the worktree (gates run there)."""
    middle_repo(repo, '[[gate]]\nname = "where"\ncommand = "pwd"\n')
    (repo / "sub").mkdir()
    done = verifygate("run", "--all", "--format", "json", cwd=repo / "sub")
    found = json.loads(done.stdout)
    assert found["contract"] == ".middle/verify.toml"
    assert found["gates"][0]["output_tail"].strip() == str(repo.resolve())


def test_a_config_that_cannot_be_used_is_not_skipped(repo: Path) -> None:
    """Differs deliberately from PASS:236 and middle's verify-on-stop (no usable verify.toml:
    skip, nothing to enforce): a broken contract is an error (exit 2), never a pass."""
    middle_repo(repo, "[[gate]]\nname = ")
    assert verifygate("run", "--all", cwd=repo).returncode == 2


# --------------------------------------------------------------------------------------------
# the runner


GATES = """
[[gate]]
name = "ok"
command = "echo hello"

[[gate]]
name = "fail"
command = "echo boom >&2; exit 3"

[[gate]]
name = "accept"
command = "echo also-ran"

[[gate]]
name = "ls"
command = "ls"
"""


def test_runner_cases(repo: Path) -> None:
    """Agree with RUNNER:19 (a pass captures stdout and exit 0), RUNNER:27 (a failure keeps
    its exit status and stderr), RUNNER:48 (gates run in the worktree), RUNNER:61 and RUNNER:71
    (every gate runs, in declared order, also after a failure; the verdict fails and names the
    first failed gate)."""
    middle_repo(repo, GATES)
    write(repo / "marker.txt", "x")
    result = report(repo)
    gates = {gate["name"]: gate for gate in result["gates"]}
    assert [gate["name"] for gate in result["gates"]] == ["ok", "fail", "accept", "ls"]
    assert (gates["ok"]["outcome"], gates["ok"]["exit_code"]) == ("passed", 0)
    assert "hello" in gates["ok"]["output_tail"]
    assert (gates["fail"]["outcome"], gates["fail"]["exit_code"]) == ("failed", 3)
    assert "boom" in gates["fail"]["output_tail"]
    assert "also-ran" in gates["accept"]["output_tail"]
    assert "marker.txt" in gates["ls"]["output_tail"]
    assert result["verdict"] == "failed"
    digest = verifygate("run", "--all", "--format", "agent", cwd=repo).stdout
    assert digest.splitlines()[0].endswith("failed: `fail`"), digest


def test_all_passing_gates_pass(repo: Path) -> None:
    """Agree with RUNNER:61: every gate passing is a pass."""
    middle_repo(repo, '[[gate]]\nname = "a"\ncommand = "echo a"\n[[gate]]\nname = "b"\n'
                      'command = "echo b"\n')
    assert report(repo)["verdict"] == "passed"


def test_no_gate_for_the_phase_is_not_a_pass(repo: Path) -> None:
    """Differs deliberately from RUNNER:87 (an empty gate list is a vacuous pass): when no gate
    applies the verdict is ``unverified``, which never reads as ``passed`` (the exit status is
    still 0 unless the contract sets ``fail_when_unverified``)."""
    middle_repo(repo, '[[gate]]\nname = "a"\ncommand = "true"\nphases = [1]\n')
    assert report(repo, "--phase", "7")["verdict"] == "unverified"


def test_a_gate_whose_directory_is_gone_fails(repo: Path) -> None:
    """Agree with WIRING:175 (the runner cannot execute: not ok, not a throw): a gate whose
    directory does not exist fails with a code, and the run still reports."""
    middle_repo(repo, '[[gate]]\nname = "gone"\ncommand = "true"\ncwd = "gone"\n')
    (gate,) = report(repo)["gates"]
    assert gate["outcome"] == "failed" and gate["code"], gate


def test_failure_report_names_gate(repo: Path) -> None:
    """Agree in substance with middle's nudge (WORKFLOW:1462, "### gate `lint` failed (exit
    1)", then ``$ command`` and the end of the output): the digest names the gate, the exit
    status, the command and keeps the END of a long output. Differs in layout on purpose: the
    output sits in a fence no output can break, with the failure code and a hint."""
    tail = "".join(f"line {n}\n" for n in range(2000))
    write(repo / "noisy.py", f"import sys\nsys.stdout.write({tail!r})\nsys.exit(1)\n")
    middle_repo(repo, '[[gate]]\nname = "lint"\ncommand = "python3 noisy.py"\n')
    digest = verifygate("run", "--all", "--format", "agent", cwd=repo).stdout
    assert "### `lint` failed: command_failed, exit status 1" in digest, digest
    assert "python3 noisy.py" in digest
    assert "line 1999" in digest and "line 0\n" not in digest
