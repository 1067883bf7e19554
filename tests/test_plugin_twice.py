"""``pytest --verify-contract`` where a gate runs pytest on the tests this run collects too:
said once, with how to avoid it."""

from __future__ import annotations

import sys

import pytest

from plugin_support import QUIET_PLUGINS, init_repo, write_contract

from conftest import commit_all

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow


def test_a_gate_that_runs_the_collected_tests_is_pointed_out_once(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    pytester.makepyfile(test_a="def test_a():\n    assert True\n")
    write_contract(pytester.path, {"name": "unit tests", "command": [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_a.py"]})
    commit_all(pytester.path)
    both = pytester.runpytest_subprocess("--verify-contract", "-p", "no:cacheprovider")
    both.assert_outcomes(passed=2)
    notices = [line for line in both.outlines if "runs pytest, and this run collects" in line]
    assert notices == ["verifygate: gate 'unit tests' runs pytest, and this run collects tests "
                       "too: the suite runs twice. Collect only the gates (pytest verify.toml "
                       "--verify-contract), or leave the gate out here (--deselect "
                       "'verify.toml::unit tests')"]
    deselected = pytester.runpytest_subprocess("--verify-contract", "-p", "no:cacheprovider",
                                               "--deselect", "verify.toml::unit tests")
    deselected.assert_outcomes(passed=1, deselected=1)  # the advice works
    # Under pytest-xdist only the workers collect: said all the same.
    spread = pytester.runpytest_subprocess("--verify-contract", "-p", "no:cacheprovider",
                                           "-n", "2")
    spread.assert_outcomes(passed=2)
    assert [line for line in spread.outlines
            if "runs pytest, and this run collects" in line] == notices
    gates_only = pytester.runpytest_subprocess("verify.toml", "--verify-contract", "-p",
                                               "no:cacheprovider")
    gates_only.assert_outcomes(passed=1)
    assert "runs pytest, and this run collects" not in gates_only.stdout.str()
