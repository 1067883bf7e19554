"""``verifygate merge``: three shards run for real in a temporary repository, merged into one
report with one verdict; and every way a set of reports can fail to be one run's shards.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from plugin_support import validate_report
from pytest_verifygate.codes import verdict_of
from pytest_verifygate.state import durations

from conftest import commit_all, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PY = sys.executable


def gate(name: str, command: str = "true", **keys: Any) -> str:
    text = f'[[gate]]\nname = "{name}"\ncommand = {json.dumps(command)}\n'
    return text + "".join(f"{key} = {json.dumps(value)}\n" for key, value in keys.items())


CONTRACT = "".join([
    gate("build"),
    gate("lint", when_changed=["src/**"]),
    gate("unit", needs=["build"]),
    gate("types", f"{PY} -c \"import sys; print('src/a.py:1: error: bad'); sys.exit(1)\"",
         when_changed=["src/**"]),
    gate("docs", when_changed=["docs/**"]),
    gate("package", needs=["unit"]),
    gate("sign-off", "ask someone", kind="manual"),
    gate("audit"),
    gate("fmt", when_changed=["src/**"]),
])


def shard_reports(repo: Path, total: int = 3, *extra: str) -> list[str]:
    names = []
    for index in range(1, total + 1):
        name = f"shard-{index}.json"
        done = verifygate("run", "--files", "src/a.py", "--shard", f"{index}/{total}",
                          "--json", name, *extra, cwd=repo)
        assert done.returncode in (0, 1), done.stderr
        names.append(name)
    return names


@pytest.fixture
def project(repo: Path) -> Path:
    write(repo / "verify.toml", CONTRACT)
    write(repo / "src" / "a.py", "x = 1\n")
    write(repo / "docs" / "index.md", "docs\n")
    commit_all(repo)
    return repo


def test_three_shards_merge_into_the_report_of_one_run(project: Path) -> None:
    whole = verifygate("run", "--files", "src/a.py", "--json", "whole.json", cwd=project)
    assert whole.returncode == 1
    reports = shard_reports(project)
    shards = [json.loads((project / name).read_text()) for name in reports]
    ran = [[g["name"] for g in report["gates"]] for report in shards]
    whole_gates = json.loads((project / "whole.json").read_text())["gates"]
    assert sorted(name for names in ran for name in names) == sorted(
        g["name"] for g in whole_gates)
    assert all(ran), f"a shard ran nothing: {ran}"
    assert any({"build", "unit", "package"} <= set(names) for names in ran)

    done = verifygate("merge", *reports, "--json", "merged.json", "--junit", "merged.xml",
                      cwd=project)
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""
    assert "3 shard report(s) merged, 8 gate(s) ran" in done.stdout
    assert "verdict: failed (6 passed, 1 failed, 0 skipped, 1 pending): types [command_failed]" \
        in done.stdout
    merged = json.loads((project / "merged.json").read_text())
    validate_report(merged)
    expected = json.loads((project / "whole.json").read_text())
    assert "shard" not in merged
    for key in ("version", "verdict", "contract", "changes", "summary", "not_selected",
                "interrupted"):
        assert merged[key] == expected[key], key
    assert [(g["name"], g["outcome"], g["code"]) for g in merged["gates"]] == [
        (g["name"], g["outcome"], g["code"]) for g in expected["gates"]]
    assert merged["not_selected"] == [
        {"name": "docs", "reason": "no changed file matches when_changed [docs/**]"}]

    junit = ET.parse(project / "merged.xml")
    cases = {case.attrib["name"]: case for case in junit.iter("testcase")}
    assert list(cases) == [g["name"] for g in expected["gates"]]
    assert cases["types"].find("failure") is not None
    assert cases["sign-off"].find("skipped") is not None

    # The merge records the whole run's durations for the next build's split.
    assert set(durations.read_durations(project, "verify.toml")[0]) == {
        "build", "lint", "unit", "types", "package", "audit", "fmt"}


def test_a_passing_merge_and_its_json_on_stdout(project: Path) -> None:
    write(project / "verify.toml", CONTRACT.replace("sys.exit(1)", "sys.exit(0)"))
    reports = shard_reports(project, 2)
    done = verifygate("merge", *reports, "--format", "json", cwd=project)
    assert done.returncode == 0, done.stderr
    merged = json.loads(done.stdout)
    assert merged["verdict"] == "pending"  # the manual gate awaits sign-off
    assert merged["summary"] == {"passed": 7, "failed": 0, "skipped": 0,
                                 "pending": 1, "interrupted": 0}


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("verifygate: error: ")
    return lines[0][len("verifygate: error: "):]


def test_a_missing_or_duplicated_shard_is_one_clear_error(project: Path) -> None:
    first, second, third = shard_reports(project)
    assert one_error_line(verifygate("merge", first, third, cwd=project)) == (
        "shard 2 of 3 is missing (given: 1, 3): pass every shard's report")
    assert one_error_line(verifygate("merge", third, cwd=project)) == (
        "shards 1, 2 of 3 are missing (given: 3): pass every shard's report")
    shutil.copy(project / first, project / "again.json")
    assert one_error_line(verifygate("merge", first, second, third, "again.json",
                                     cwd=project)) == (
        f"shard 1 of 3 is given twice: {first} and again.json")
    verifygate("run", "--files", "src/a.py", "--shard", "1/2", "--json", "half.json",
               cwd=project)
    assert "is shard 1 of 3 but half.json is shard 1 of 2" in one_error_line(
        verifygate("merge", first, second, third, "half.json", cwd=project))
    assert not (project / "merged.json").exists()


def test_reports_of_different_runs_are_refused(project: Path) -> None:
    first, _, third = shard_reports(project)
    verifygate("run", "--all", "--shard", "2/3", "--json", "all-2.json", cwd=project)
    assert "are reports of different change sets (files 1 file(s) and all 0 file(s))" in (
        one_error_line(verifygate("merge", first, "all-2.json", third, cwd=project)))
    write(project / "sub" / "verify.toml", gate("other"))
    verifygate("run", "--contract", "sub/verify.toml", "--files", "src/a.py", "--shard", "2/3",
               "--json", "other-2.json", cwd=project)
    assert "are reports of different contracts (verify.toml and sub/verify.toml)" in (
        one_error_line(verifygate("merge", first, "other-2.json", third, cwd=project)))
    write(project / "verify.toml", CONTRACT + gate("added"))
    verifygate("run", "--files", "src/a.py", "--shard", "2/3", "--json", "changed-2.json",
               cwd=project)
    assert "list different gates for verify.toml: the contract changed between the shards" in (
        one_error_line(verifygate("merge", first, "changed-2.json", third, cwd=project)))


def test_shards_of_another_contract_text_or_commit_are_refused(project: Path) -> None:
    """The same gate names with another command, or another commit: merge said passed."""
    first, second, third = shard_reports(project)
    write(project / "verify.toml", CONTRACT.replace('name = "build"\ncommand = "true"',
                                                    'name = "build"\ncommand = "false"'))
    verifygate("run", "--files", "src/a.py", "--shard", "2/3", "--json", "edited-2.json",
               cwd=project)
    assert one_error_line(verifygate("merge", first, "edited-2.json", third, cwd=project)) == (
        "shard 2 of 3 (edited-2.json) ran another version of the contract than shard 1 "
        f"({first}) (its text differs): run every shard with the same contract")
    write(project / "verify.toml", CONTRACT)
    write(project / "docs" / "index.md", "more docs\n")
    commit_all(project)
    verifygate("run", "--files", "src/a.py", "--shard", "3/3", "--json", "later-3.json",
               cwd=project)
    line = one_error_line(verifygate("merge", first, second, "later-3.json", cwd=project))
    assert line.startswith("shard 3 of 3 (later-3.json) checked commit "), line
    assert line.endswith(": merge the shards of one commit"), line
    report = json.loads((project / first).read_text())
    validate_report(report)
    assert len(report["shard"]["commit"]) == 40 and len(report["shard"]["contract_sha256"]) == 64


@pytest.mark.parametrize(("change", "expected"), [
    (lambda r: r.pop("verdict"), 'no "verdict"'),
    (lambda r: r.update(verdict=["passed"]), '"verdict" is not what a report holds there'),
    (lambda r: r.update(gates={"name": "x"}), '"gates" is not what a report holds there'),
    (lambda r: r["gates"][0].update(duration_s="1s"), '"duration_s" is a string'),
    (lambda r: r["gates"][0].update(name=7), '"name" is a number'),
    (lambda r: r["gates"][0].update(output_tail=["x"]), '"output_tail" is a list'),
    (lambda r: r["gates"][0].pop("outcome"), 'gate 1 has no "outcome"'),
    (lambda r: r["gates"][0].update(attempts=True), '"attempts" is a boolean'),
    (lambda r: r["not_selected"].append({"name": "x", "reason": 1}),
     '"not_selected" is not what a report holds there'),
    (lambda r: r["shard"].pop("commit"), "does not say which commit and contract it checked"),
], ids=["no-verdict", "verdict-list", "gates-object", "duration-text", "name-number",
        "tail-list", "no-outcome", "attempts-bool", "reason-number", "no-commit"])
def test_a_malformed_shard_report_is_one_line(project: Path, change: Any, expected: str) -> None:
    first, second, third = shard_reports(project)
    report = json.loads((project / second).read_text())
    change(report)
    write(project / second, json.dumps(report))
    line = one_error_line(verifygate("merge", first, second, third, cwd=project))
    assert line.startswith(f"{second}: ") and expected in line, line


@pytest.mark.parametrize("text", [
    '{"version": 1, "gates": ' + "[" * 100_000,
    '{"version": 1, "verdict": "passed", "gates": ' + "[" * 100_000 + "]" * 100_000 + "}",
    '{"version": 1, "x": NaN}',
    '{"version": 1, "x": -Infinity}',
], ids=["deep-cut", "deep", "nan", "infinity"])
def test_a_report_json_cannot_read_is_one_line(project: Path, text: str) -> None:
    first, second, third = shard_reports(project)
    write(project / second, text)
    line = one_error_line(verifygate("merge", first, second, third, cwd=project))
    assert line.startswith(f"{second} is not a JSON report ("), line


def test_nan_durations_are_refused(project: Path) -> None:
    first, second, third = shard_reports(project)
    text = (project / second).read_text()
    write(project / second, text.replace('"duration_s": ', '"duration_s": NaN, "_was": ', 1))
    line = one_error_line(verifygate("merge", first, second, third, cwd=project))
    assert line == f"{second} is not a JSON report (NaN is not a number JSON allows)", line


def test_what_is_not_a_shard_s_report_is_refused(project: Path) -> None:
    verifygate("run", "--files", "src/a.py", "--json", "whole.json", cwd=project)
    assert 'whole.json is not the report of a shard (no "shard" key)' in one_error_line(
        verifygate("merge", "whole.json", cwd=project))
    write(project / "junk.json", "{not json")
    assert one_error_line(verifygate("merge", "junk.json", cwd=project)).startswith(
        "junk.json is not a JSON report (")
    write(project / "list.json", "[1, 2]")
    assert one_error_line(verifygate("merge", "list.json", cwd=project)).startswith(
        "list.json is not a verifygate JSON report of version 1")
    assert one_error_line(verifygate("merge", "nowhere.json", cwd=project)) == (
        "cannot read the report nowhere.json: No such file or directory")


def test_shards_split_from_different_durations_cannot_hide_a_gate(project: Path) -> None:
    # Shard 1 on a machine that knows "audit" and "lint" are long, shards 2 and 3 on machines
    # without the durations file (split by count): the first leaves "build" and the gates
    # needing it to the others, which left them to shard 1.
    assert durations.record_durations(project, "verify.toml", {
        "audit": 500.0, "lint": 400.0, "build": 0.1, "unit": 0.1, "package": 0.1,
        "types": 0.1, "fmt": 0.1}, None)
    first = "known-1.json"
    (project / shard_reports(project)[0]).rename(project / first)
    path = durations.durations_path(project)
    assert path is not None
    path.unlink()
    second, third = shard_reports(project)[1:]
    reports = [json.loads((project / name).read_text()) for name in (first, second, third)]
    ran = {g["name"] for report in reports for g in report["gates"]}
    assert "build" not in ran
    message = one_error_line(verifygate("merge", first, second, third, cwd=project))
    assert message == ("gate 'build' ran in no shard, though a shard left it to another: the "
                       "shards split the gates differently: give every shard the same "
                       ".git/verifygate/durations.json (see the documentation: Shards and merge)")


def test_the_verdict_follows_spec_precedence() -> None:
    # One rule, for a run and for shards merged: a shard's "failed" with no gate failed is
    # fail_when_unverified speaking.
    assert verdict_of({"passed", "failed", "pending"}) == "failed"
    assert verdict_of({"passed", "pending"}) == "pending"
    assert verdict_of({"skipped"}) == "unverified"
    assert verdict_of({"passed", "skipped"}) == "passed"
    assert verdict_of(set(), unverified_fails=True) == "failed"
    # ... but a shard that ran nothing while another passed does not fail the whole run.
    assert verdict_of({"passed"}, unverified_fails=True) == "passed"
    # A run's own errors (a commit's files changed while the gates ran) fail it.
    assert verdict_of({"passed"}, failed=True) == "failed"


def test_a_gate_deselected_in_its_own_pytest_shard_is_not_a_split_error(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    from plugin_support import QUIET_PLUGINS, init_repo
    from pytest_verifygate.pytest_plugin.session import DESELECTED_REASON

    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    write(pytester.path / "verify.toml", "".join(gate(name) for name in "abcd"))
    commit_all(pytester.path)
    # Equal weights: by count, names in order: a and c in shard 1, b and d in shard 2.
    first = pytester.runpytest("--verify-contract", "--verify-all", "--verify-shard", "1/2",
                               "--verify-report", "p1.json", "-k", "not c")
    second = pytester.runpytest("--verify-contract", "--verify-all", "--verify-shard", "2/2",
                                "--verify-report", "p2.json")
    assert (first.ret, second.ret) == (0, 0)
    done = verifygate("merge", "p1.json", "p2.json", "--format", "json", cwd=pytester.path)
    assert done.returncode == 0, done.stderr
    merged = json.loads(done.stdout)
    validate_report(merged)
    assert [g["name"] for g in merged["gates"]] == ["a", "b", "d"]
    assert merged["not_selected"] == [{"name": "c", "reason": DESELECTED_REASON}]


def test_merged_junit_says_a_timeout_as_run_does(repo: Path) -> None:
    write(repo / "verify.toml", gate("slow", f"{PY} -c \"import time; time.sleep(30)\"",
                                     timeout_seconds=1) + gate("fine"))
    commit_all(repo)
    names = []
    for index in (1, 2):
        done = verifygate("run", "--all", "--shard", f"{index}/2", "--json", f"s{index}.json",
                          cwd=repo)
        assert done.returncode in (0, 1), done.stderr
        names.append(f"s{index}.json")
    ran = verifygate("run", "--all", "--junit", "run.xml", cwd=repo)
    merged = verifygate("merge", *names, "--junit", "merged.xml", cwd=repo)
    assert ran.returncode == merged.returncode == 1, merged.stderr

    def failure(name: str) -> str | None:
        found = ET.parse(repo / name).getroot().find(".//failure")
        return None if found is None else found.get("message")

    assert failure("merged.xml") == failure("run.xml") == "[timeout] slow: timed out after 1 s"
    # xunit1, as pytest's junit_family names it, adds each gate's properties.
    assert verifygate("merge", *names, "--junit", "xunit1.xml", "--junit-family", "xunit1",
                      cwd=repo).returncode == 1
    codes = {case.get("name"): prop.get("value")
             for case in ET.parse(repo / "xunit1.xml").iter("testcase")
             for prop in case.iter("property") if prop.get("name") == "verifygate.code"}
    assert codes == {"slow": "timeout", "fine": ""}
