"""Gate names that are any text: what the user sees keeps them; node ids, log files and JUnit
names get safe forms of them."""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from plugin_support import (
    QUIET_PLUGINS,
    failing,
    gates_by_name,
    init_repo,
    load_json,
    passing,
    validate_report,
    write_contract,
)
from pytest_verifygate.item_names import item_name, item_names, role_marker
from pytest_verifygate.state.storage import log_file_name

from conftest import verifygate

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

LONG = "very long gate name " * 15  # 300 characters
NAMES = ["unit tests", "Type check (mypy)", "a::b/c[1]", LONG.strip(), "ünïcode ✓ 检查",
         "Lint", "lint", "a", "a[x]", "tab\there"]
SAFE_FILE = re.compile(r"[A-Za-z0-9._-]+\.log")


def odd_contract(root: Path) -> None:
    write_contract(root, *({"name": name, "command": passing(name)} for name in NAMES),
                   {"name": "broken / gate", "command": failing()})


def test_safe_forms_of_names() -> None:
    assert [item_name(name) for name in ("lint", "unit tests", "Type check (mypy)")] == [
        "lint", "unit tests", "Type check (mypy)"]
    assert item_name("a::b/c[1]") == "a:b/c(1)"
    assert item_name("new\nline") == "new line"
    # Names an ordinary name's shortcut must not let through as they are.
    for odd in ("a\u2028b", "a\x85b", " lead", "trail\t", "", "x]", "[x", "a::"):
        assert item_name(odd) != odd
    assert item_name("a\u2028b") == "a b" and item_name("") == "_"
    # Unique within a contract; a name that needs no change keeps it.
    assert item_names(["a(x)", "a[x]", "a(x) (2)", "a[[x]]"]) == {
        "a(x)": "a(x)", "a[x]": "a(x) (3)", "a(x) (2)": "a(x) (2)", "a[[x]]": "a((x))"}
    assert role_marker("code:reviewer") == "verify_role_code_reviewer"
    assert role_marker("QA team") == "verify_role_QA_team"
    files = [log_file_name(name) for name in [*NAMES, "broken / gate", ".hidden", "-rf"]]
    assert len(set(files)) == len(files)
    assert all(SAFE_FILE.fullmatch(name) and len(name) <= 80 for name in files), files
    assert log_file_name("lint") == "lint.log"
    assert log_file_name("unit-tests") == "unit-tests.log"


def test_the_command_line_keeps_names_and_writes_safe_log_files(repo: Path) -> None:
    odd_contract(repo)
    done = verifygate("run", "--all", "--json", "report.json", "--junit", "junit.xml",
                      cwd=repo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    report = load_json(repo / "report.json")
    validate_report(report)
    gates = gates_by_name(report)
    assert list(gates) == [*NAMES, "broken / gate"]
    assert gates["broken / gate"]["code"] == "command_failed"
    logs = [Path(gate["log_path"]) for gate in gates.values()]
    assert len({log.name for log in logs}) == len(logs)
    for gate in gates.values():
        log = Path(gate["log_path"])
        assert SAFE_FILE.fullmatch(log.name) and len(log.name) <= 80, log.name
        assert log.read_text(encoding="utf-8") == gate["output_tail"]
    cases = [case.attrib["name"] for case in ET.parse(repo / "junit.xml").iter("testcase")]
    assert cases == [item_name(name) for name in [*NAMES, "broken / gate"]]
    failure = next(ET.parse(repo / "junit.xml").iter("failure"))
    assert failure.attrib["message"] == "[command_failed] broken / gate: exit status 3"


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    return pytester


def node_ids(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("verify.toml::")]


def test_pytest_node_ids_are_safe_and_select_one_gate(project: pytest.Pytester) -> None:
    odd_contract(project.path)
    ids = node_ids(project.runpytest("--verify-contract", "--co", "-q"))
    assert ids == [f"verify.toml::{item_name(name)}" for name in [*NAMES, "broken / gate"]]
    assert all(id_.count("::") == 1 and "[" not in id_ for id_ in ids)
    # A node id selects its gate, and only it ("a" no longer selects "a[x]" too).
    for name in ("unit tests", "a", "a[x]", "a::b/c[1]", LONG.strip()):
        one = project.runpytest(f"verify.toml::{item_name(name)}", "--verify-contract")
        one.assert_outcomes(passed=1)
    # -k finds a gate by the words of its name, as the contract spells it.
    for expression, expected in (("mypy", ["Type check (mypy)"]), ("unit and tests",
                                 ["unit tests"]), ("检查", ["ünïcode ✓ 检查"]),
                                 ("c[1]", ["a::b/c[1]"])):
        chosen = node_ids(project.runpytest("--verify-contract", "-k", expression, "--co",
                                            "-q"))
        assert chosen == [f"verify.toml::{item_name(name)}" for name in expected], expression


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["in-process", "xdist"])
def test_pytest_reports_and_junit_keep_the_names(project: pytest.Pytester,
                                                  workers: tuple[str, ...]) -> None:
    if workers:
        pytest.importorskip("xdist")
    odd_contract(project.path)
    result = project.runpytest_subprocess("--verify-contract", *workers, "-p",
                                          "no:cacheprovider", "--junitxml", "junit.xml",
                                          "--verify-report", "report.json")
    result.assert_outcomes(passed=len(NAMES), failed=1)
    result.stdout.fnmatch_lines(["*[[]command_failed[]] broken / gate: exit status 3*"])
    report = load_json(project.path / "report.json")
    validate_report(report)
    assert list(gates_by_name(report)) == [*NAMES, "broken / gate"]
    assert report["not_selected"] == []
    root = ET.parse(project.path / "junit.xml")
    assert sorted(case.attrib["name"] for case in root.iter("testcase")) == sorted(
        item_name(name) for name in [*NAMES, "broken / gate"])
    assert all(os.path.basename(gate["log_path"]) == log_file_name(gate["name"])
               for gate in report["gates"])
