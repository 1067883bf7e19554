"""CI: the change base of pull/merge request builds, GitHub annotations and step summary, JUnit.

Real git repositories, the real ``verifygate`` command and real pytest sessions (under xdist)
in GitHub-like and GitLab-like environments.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from actions_runner import annotations
from plugin_support import QUIET_PLUGINS, junit_properties, validate_report
from pytest_verifygate.errors import ChangeSetError
from pytest_verifygate.git.changes import (
    ChangeBase,
    ChangeRequest,
    compute_changes,
    detect_change_base,
)
from pytest_verifygate.report.github import (
    error_annotations,
    find_location,
    gate_annotation,
    step_summary,
    workflow_command,
)
from pytest_verifygate.report.junit import failure_text, to_junit
from pytest_verifygate.report.outcomes import format_seconds, outcome_counts

from conftest import commit_all, git, validate_junit, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PY = sys.executable
GITHUB_DETECTED = "GitHub Actions pull request (GITHUB_BASE_REF=main)"
GITLAB_DETECTED = "GitLab merge request (CI_MERGE_REQUEST_DIFF_BASE_SHA)"


def _gate(name: str, code: str, **extra: str) -> str:
    lines = [f'[[gate]]\nname = "{name}"', f"command = {json.dumps([PY, '-c', code])}"]
    lines += [f"{key} = {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


CONTRACT = "".join([
    # Relative to the gate's cwd (the project root), with a column; ':', ',' and '%' to escape.
    _gate("lint", "import sys; print('checking'); "
          "print('src/a.py:1:5: E999 bad, thing: 100%'); sys.exit(1)",
          when_changed='["**/*.py"]'),
    # Relative to a gate cwd below the root.
    _gate("types", "import sys; print('a.py:2: error: Incompatible types'); sys.exit(1)",
          cwd='"src"'),
    # Absolute, under the repository: shown relative.
    _gate("abs", "import os, sys; print('note: starting'); "
          "print(os.path.abspath('src/b.py') + ':7: error: absolute'); sys.exit(2)"),
    # Names no file of the repository (the FAILED line reads as the error); ANSI and characters
    # XML 1.0 cannot hold.
    _gate("tests", "import sys; print('\\x1b[31mred\\x1b[0m \\x00\\x07 bell'); "
          "print('see /nonexistent/x.py:4: error: elsewhere'); "
          "print('FAILED tests/test_x.py::test_a - assert 1 == 2'); sys.exit(1)"),
    _gate("ok", "print('fine')"),
    '[[gate]]\nname = "release"\nkind = "manual"\n',
    _gate("docs", "print('docs')", when_changed='["docs/**"]'),
])

# One annotation per error a tool reported at a file of the repository (the place in the
# properties, the tool's message as the message); one per gate when none is there.
EXPECTED_ANNOTATIONS = [
    "::error file=src/a.py,line=1,col=5,title=verifygate lint::E999 bad, thing: 100%25",
    "::error file=src/a.py,line=2,title=verifygate types::Incompatible types",
    "::error file=src/b.py,line=7,title=verifygate abs::absolute",
    "::error title=verifygate tests [command_failed]"
    "::FAILED tests/test_x.py::test_a - assert 1 == 2",
]


@pytest.fixture
def pr_repo(repo: Path) -> Path:
    """``main`` (also as ``origin/main``) and a checked-out ``feature`` that changes src/a.py."""
    write(repo / "verify.toml", CONTRACT)
    write(repo / "src" / "a.py", "x = 1\n")
    write(repo / "src" / "b.py", "y = 1\n")
    write(repo / "docs" / "index.md", "# docs\n")
    commit_all(repo, "base")
    git(repo, "update-ref", "refs/remotes/origin/main", "main")
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo / "src" / "a.py", "x = 2\n")
    commit_all(repo, "change")
    return repo


def github_env(tmp_path: Path) -> dict[str, str]:
    return {"GITHUB_ACTIONS": "true", "GITHUB_BASE_REF": "main",
            "GITHUB_STEP_SUMMARY": str(tmp_path / "step-summary.md")}


def run_pytest(*args: str, cwd: Path, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider", *QUIET_PLUGINS.split(),
                           *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def workflow_lines(text: str) -> list[str]:
    """The annotations GitHub's runner honours in ``text`` (commands are stopped around the
    gates' output and resumed for these)."""
    return [command.line for command in annotations(text)]


def check_junit(path: Path) -> ET.Element:
    """What a JUnit consumer (Jenkins, GitLab, GitHub test reporters) relies on: valid against
    pytest's xunit2 schema, the structure of its ``--junitxml``, consistent counts."""
    validate_junit(path)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites" and set(root.attrib) == {"name"}
    suites = list(root)
    assert [suite.tag for suite in suites] == ["testsuite"]
    suite = suites[0]
    assert {"name", "tests", "failures", "errors", "skipped", "time"} <= set(suite.attrib)
    assert set(suite.attrib) <= {"name", "tests", "failures", "errors", "skipped", "time",
                                 "timestamp", "hostname"}
    assert float(suite.attrib["time"]) >= 0
    cases = suite.findall("testcase")
    assert [child.tag for child in suite] == ["properties"] * (len(suite) - len(cases)) + [
        "testcase"] * len(cases)
    counts = {key: int(suite.attrib[key]) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {
        "tests": len(cases),
        "failures": sum(case.find("failure") is not None for case in cases),
        "errors": sum(case.find("error") is not None for case in cases),
        "skipped": sum(case.find("skipped") is not None for case in cases),
    }
    for case in cases:
        assert set(case.attrib) == {"classname", "name", "time"}
        assert float(case.attrib["time"]) >= 0
        tags = [child.tag for child in case]
        assert set(tags) <= {"failure", "skipped"} and len(tags) <= 1
        for child in case:
            assert child.attrib.get("message"), ET.tostring(child)
        assert all(set(prop.attrib) == {"name", "value"} for prop in case.iter("property"))
    return root


def junit_substance(path: Path) -> tuple[dict[str, str], dict[tuple[str, str], Any]]:
    """Counts and, per testcase, properties (but the time taken), outcome tag and message."""
    suite = check_junit(path).find("testsuite")
    assert suite is not None
    counts = {key: suite.attrib[key] for key in ("tests", "failures", "errors", "skipped")}
    cases: dict[tuple[str, str], Any] = {}
    for case in suite.iter("testcase"):
        properties = junit_properties(case)  # none under xunit2
        result = [(child.tag, child.attrib["message"]) for child in case]
        cases[(case.attrib["classname"], case.attrib["name"])] = (properties, result)
    return counts, cases


# --------------------------------------------------------------------------------------------
# GitHub Actions


def test_github_pull_request_cli(pr_repo: Path, tmp_path: Path) -> None:
    env = github_env(tmp_path)
    done = verifygate("run", "--json", "report.json", "--junit", "out/junit.xml", cwd=pr_repo,
                      env=env)
    assert done.returncode == 1, done.stderr
    # Workflow commands are stopped before anything a gate or a file name could print.
    stop, header = done.stdout.splitlines()[:2]
    assert stop.startswith("::stop-commands::verifygate-")
    assert header == ("verifygate: verify.toml: 6 of 7 gate(s) selected (changes: ref "
                      f"origin/main, 1 file(s), from {GITHUB_DETECTED})")
    report = json.loads((pr_repo / "report.json").read_text())
    validate_report(report)
    assert report["changes"] == {"source": "ref", "ref": "origin/main", "files": ["src/a.py"],
                                 "detected_by": GITHUB_DETECTED}
    assert report["not_selected"][0]["name"] == "docs"
    # One annotation per failed gate, in contract order, at the end of the log.
    assert workflow_lines(done.stdout) == EXPECTED_ANNOTATIONS
    assert done.stdout.rstrip().endswith(EXPECTED_ANNOTATIONS[-1])

    summary = (tmp_path / "step-summary.md").read_text(encoding="utf-8")
    assert summary.startswith("### \u274c verifygate: failed\n")
    assert f"changes: ref origin/main, 1 file(s), from {GITHUB_DETECTED}" in summary
    assert "| Gate | Outcome | Code | Time |" in summary
    assert "| `lint` | \u274c failed | `command_failed` |" in summary
    assert "| `ok` | \u2705 passed |  |" in summary
    assert "| `release` | \u23f8\ufe0f pending: manual gate: awaits human sign-off |  | - |" \
        in summary
    assert "**1 passed, 4 failed, 0 skipped, 1 pending**; 1 gate(s) not selected" in summary
    assert "<details><summary>Output of the failed gates</summary>" in summary
    assert "src/a.py:1:5: E999 bad, thing: 100%" in summary  # the digest, in the details

    # A second run in the step appends to the summary, never truncates it.
    write(pr_repo / "other.toml", _gate("fine", "print('fine')"))
    again = verifygate("run", "--contract", "other.toml", cwd=pr_repo, env=env)
    assert again.returncode == 0, again.stderr
    assert workflow_lines(again.stdout) == []
    text = (tmp_path / "step-summary.md").read_text(encoding="utf-8")
    assert text.startswith(summary)
    assert "### \u2705 verifygate: passed" in text and "| `fine` | \u2705 passed |" in text


def test_pytest_under_xdist_matches_the_cli(pr_repo: Path, tmp_path: Path) -> None:
    env = github_env(tmp_path)
    session = run_pytest("--verify-contract", "-n", "2", "--junitxml", "pytest.xml",
                         "--verify-report", "pytest-report.json", cwd=pr_repo, env=env)
    assert session.returncode == 1, session.stdout + session.stderr
    assert (f"verifygate: verify.toml: 6 of 7 gate(s) selected (changes: ref origin/main, "
            f"1 file(s), from {GITHUB_DETECTED})") in session.stdout
    # Printed by the controller only, once, after the verdict.
    assert workflow_lines(session.stdout) == EXPECTED_ANNOTATIONS
    report = json.loads((pr_repo / "pytest-report.json").read_text())
    assert report["changes"]["detected_by"] == GITHUB_DETECTED
    summary = (tmp_path / "step-summary.md").read_text(encoding="utf-8")
    assert summary.count("verifygate: failed") == 1
    assert "| `types` | \u274c failed | `command_failed` |" in summary

    cli = verifygate("run", "--junit", "cli.xml", "--annotations", "none", cwd=pr_repo,
                     env={"GITHUB_BASE_REF": "main"})
    assert cli.returncode == 1, cli.stderr
    pytest_counts, pytest_cases = junit_substance(pr_repo / "pytest.xml")
    cli_counts, cli_cases = junit_substance(pr_repo / "cli.xml")
    # docs, left out because nothing it watches changed, is a skipped case in both.
    assert cli_counts == pytest_counts == {"tests": "7", "failures": "4", "errors": "0",
                                           "skipped": "2"}
    assert cli_cases == pytest_cases
    assert cli_cases[("verify.toml", "docs")][1] == [
        ("skipped", "no changed file matches when_changed [docs/**]")]
    assert cli_cases[("verify.toml", "lint")] == (
        {}, [("failure", "[command_failed] lint: exit status 1")])
    assert cli_cases[("verify.toml", "release")][1] == [
        ("skipped", "pending: manual gate: awaits human sign-off")]
    assert cli_cases[("verify.toml", "ok")][1] == []

    # Both end the failure text with the gate's output; the CLI's is clean XML text.
    for name in ("pytest.xml", "cli.xml"):
        failures = {case.attrib["name"]: case.find("failure")
                    for case in ET.parse(pr_repo / name).getroot().iter("testcase")}
        lint = failures["lint"]
        assert lint is not None and lint.text is not None
        assert lint.text.startswith("[command_failed] lint: exit status 1\n")
        assert lint.text.rstrip().endswith("src/a.py:1:5: E999 bad, thing: 100%")
    raw = (pr_repo / "cli.xml").read_text(encoding="utf-8")
    assert "\x1b" not in raw and "\x07" not in raw and "&#" not in raw
    tests = ET.parse(pr_repo / "cli.xml").getroot().find(".//testcase[@name='tests']/failure")
    assert tests is not None and tests.text is not None and "red  bell" in tests.text
    assert not list(pr_repo.glob(".cli.xml.*")), "the temporary file was left behind"


def test_annotations_follow_the_flags(pr_repo: Path, tmp_path: Path) -> None:
    summary = tmp_path / "step-summary.md"
    env = github_env(tmp_path)
    off = verifygate("run", "--annotations", "none", cwd=pr_repo, env=env)
    assert off.returncode == 1 and workflow_lines(off.stdout + off.stderr) == []
    assert not summary.exists()

    # Asked for outside GitHub Actions: printed; no step summary file without the variable.
    forced = verifygate("run", "--changed-from", "main", "--annotations", "github", cwd=pr_repo)
    assert workflow_lines(forced.stdout) == EXPECTED_ANNOTATIONS
    assert "from GitHub" not in forced.stdout  # an explicit ref: nothing was detected

    # --format json keeps stdout the report: the workflow commands go to stderr.
    as_json = verifygate("run", "--format", "json", cwd=pr_repo, env=env)
    assert json.loads(as_json.stdout)["changes"]["detected_by"] == GITHUB_DETECTED
    assert workflow_lines(as_json.stderr) == EXPECTED_ANNOTATIONS

    session = run_pytest("--verify-contract", "--verify-annotations", "none", "-q",
                         cwd=pr_repo, env=env)
    assert session.returncode == 1 and workflow_lines(session.stdout) == []
    assert summary.read_text(encoding="utf-8").count("| Gate |") == 1  # the json run's only


def test_bad_junit_path_is_a_usage_error(pr_repo: Path) -> None:
    (pr_repo / "taken").mkdir()
    done = verifygate("run", "--changed-from", "main", "--junit", "taken", cwd=pr_repo)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(
        "verifygate: error: cannot write the JUnit file taken:")
    assert "Traceback" not in done.stderr
    assert "verdict: failed" in done.stdout  # the results are still shown


# --------------------------------------------------------------------------------------------
# GitLab and the order of change bases


def test_gitlab_merge_request(pr_repo: Path, tmp_path: Path) -> None:
    base = git(pr_repo, "rev-parse", "main").strip()
    env = {"CI_MERGE_REQUEST_DIFF_BASE_SHA": base}
    listed = verifygate("list", "--format", "json", cwd=pr_repo, env=env)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["changes"] == {
        "source": "ref", "ref": base, "count": 1, "detected_by": GITLAB_DETECTED}
    out = tmp_path / "out"
    done = verifygate("run", "--json", str(out / "report.json"), "--junit",
                      str(out / "junit.xml"), cwd=pr_repo, env=env)
    assert done.returncode == 1
    assert f"(changes: ref {base}, 1 file(s), from {GITLAB_DETECTED})" in done.stdout
    assert workflow_lines(done.stdout) == []  # not GitHub: JUnit is what GitLab reads
    assert json.loads((out / "report.json").read_text())["changes"]["detected_by"] == \
        GITLAB_DETECTED
    assert junit_substance(out / "junit.xml")[0]["failures"] == "4"
    collected = run_pytest("--verify-contract", "--co", cwd=pr_repo, env=env)
    assert f"(changes: ref {base}, 1 file(s), from {GITLAB_DETECTED})" in collected.stdout


def test_change_base_order(repo: Path) -> None:
    write(repo / "a.py", "1\n")
    commit_all(repo)
    first = git(repo, "rev-parse", "HEAD").strip()
    write(repo / "b.py", "2\n")
    commit_all(repo)
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    write(repo / "c.py", "3\n")
    github = {"GITHUB_BASE_REF": "main"}
    gitlab = {"CI_MERGE_REQUEST_DIFF_BASE_SHA": first}

    def changes(env: dict[str, str], request: ChangeRequest | None = None,
                settings: str = "") -> tuple[str | None, tuple[str, ...], str | None]:
        found = compute_changes(repo, request, settings_changed_from=settings, environ=env)
        return found.ref, found.files, found.detected_by

    assert changes({**github, **gitlab}, settings=first) == (
        "origin/main", ("c.py",), GITHUB_DETECTED)
    assert changes(gitlab, settings="HEAD") == (first, ("b.py", "c.py"), GITLAB_DETECTED)
    assert changes({**github, "VERIFYGATE_CHANGED_FROM": first}) == (
        first, ("b.py", "c.py"), "VERIFYGATE_CHANGED_FROM")
    assert changes({}, settings=first) == (first, ("b.py", "c.py"), "settings.changed_from")
    # A push build: GITHUB_BASE_REF is set but empty.
    assert changes({"GITHUB_BASE_REF": "", "GITHUB_ACTIONS": "true"}) == (None, (), None)
    # Anything the user or pre-commit said comes first.
    assert changes(github, ChangeRequest(changed_from=first)) == (first, ("b.py", "c.py"), None)
    assert changes(github, ChangeRequest(all=True)) == (None, (), None)
    git(repo, "add", "c.py")
    assert changes({**github, "PRE_COMMIT": "1"}) == (None, ("c.py",), None)


def test_detected_base_says_where_it_came_from_and_how_to_fetch_it() -> None:
    assert detect_change_base({"GITHUB_BASE_REF": " ", "GITHUB_ACTIONS": "true"}) is None
    assert detect_change_base({"VERIFYGATE_CHANGED_FROM": " v1 ", "GITHUB_BASE_REF": "main"}) \
        == ChangeBase("v1", "VERIFYGATE_CHANGED_FROM")
    github = detect_change_base({"GITHUB_BASE_REF": "main", "CI_MERGE_REQUEST_DIFF_BASE_SHA": "f"})
    assert github is not None and (github.ref, github.detected_by) == ("origin/main",
                                                                       GITHUB_DETECTED)
    assert "`fetch-depth: 0`" in str(github.fetch_hint)
    gitlab = detect_change_base({"CI_MERGE_REQUEST_DIFF_BASE_SHA": "f00d"})
    assert gitlab is not None and (gitlab.ref, gitlab.detected_by) == ("f00d", GITLAB_DETECTED)
    assert "`GIT_DEPTH: 0`" in str(gitlab.fetch_hint)


# --------------------------------------------------------------------------------------------
# shallow clones


def _upstream(tmp_path: Path) -> Path:
    """A repository with history on main and a feature branch forked from its first commit."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    git(upstream, "config", "user.email", "test@example.invalid")
    git(upstream, "config", "user.name", "Test")
    write(upstream / "verify.toml", CONTRACT)
    write(upstream / "src" / "a.py", "x = 1\n")
    write(upstream / "src" / "b.py", "y = 1\n")
    commit_all(upstream, "one")
    git(upstream, "checkout", "-q", "-b", "feature")
    write(upstream / "src" / "a.py", "x = 2\n")
    commit_all(upstream, "feature")
    git(upstream, "checkout", "-q", "main")
    write(upstream / "docs" / "index.md", "# docs\n")
    commit_all(upstream, "two")
    return upstream


def test_shallow_clone_gets_one_clear_error(tmp_path: Path) -> None:
    upstream = _upstream(tmp_path)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--no-single-branch", "--branch",
                    "feature", upstream.as_uri(), str(clone)], check=True)
    assert git(clone, "rev-parse", "--is-shallow-repository").strip() == "true"
    done = verifygate("run", "--json", "report.json", cwd=clone, env={"GITHUB_BASE_REF": "main"})
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"verifygate: error: change base from {GITHUB_DETECTED}: no merge-base between "
        "'origin/main' and HEAD in this shallow clone: give actions/checkout `fetch-depth: 0` "
        "(all history and branches), or fetch more history before verifygate runs: "
        "`git fetch --deepen=200 origin +main:refs/remotes/origin/main`"]
    assert done.stdout == "" and not (clone / "report.json").exists()  # nothing was run

    # The advice works.
    git(clone, "fetch", "-q", "--deepen=200", "origin", "+main:refs/remotes/origin/main")
    fixed = verifygate("list", "--format", "json", cwd=clone, env={"GITHUB_BASE_REF": "main"})
    assert fixed.returncode == 0, fixed.stderr
    # The branch's own change only: docs/index.md changed on main after the fork.
    assert json.loads(fixed.stdout)["changes"]["count"] == 1


def test_base_missing_from_the_clone(tmp_path: Path) -> None:
    upstream = _upstream(tmp_path)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "feature",
                    upstream.as_uri(), str(clone)], check=True)
    github = verifygate("list", cwd=clone, env={"GITHUB_BASE_REF": "main"})
    assert github.returncode == 2
    assert github.stderr.splitlines() == [
        f"verifygate: error: change base from {GITHUB_DETECTED}: unknown git ref "
        "'origin/main': no such commit; give actions/checkout `fetch-depth: 0` (all history "
        "and branches), or fetch more history before verifygate runs: "
        "`git fetch --deepen=200 origin +main:refs/remotes/origin/main`"]
    base = git(upstream, "rev-parse", "main~1").strip()
    gitlab = verifygate("list", cwd=clone, env={"CI_MERGE_REQUEST_DIFF_BASE_SHA": base})
    assert gitlab.returncode == 2
    assert gitlab.stderr.startswith(f"verifygate: error: change base from {GITLAB_DETECTED}: "
                                    f"unknown git ref '{base}': no such commit; set the CI/CD "
                                    "variable `GIT_DEPTH: 0`")
    # The advice works in a single-branch clone too (creates origin/main).
    git(clone, "fetch", "-q", "--deepen=200", "origin", "+main:refs/remotes/origin/main")
    assert verifygate("list", cwd=clone, env={"GITHUB_BASE_REF": "main"}).returncode == 0


def test_explicit_ref_in_a_shallow_clone_names_both_fixes(tmp_path: Path) -> None:
    upstream = _upstream(tmp_path)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--no-single-branch", "--branch",
                    "feature", upstream.as_uri(), str(clone)], check=True)
    with pytest.raises(ChangeSetError) as error:
        compute_changes(clone, ChangeRequest(changed_from="origin/main"))
    message = str(error.value)
    assert "shallow clone: fetch more history" in message
    assert "git fetch --deepen=200" in message and "fetch-depth: 0" in message


# --------------------------------------------------------------------------------------------
# the pieces, on report dicts


def test_workflow_command_escaping() -> None:
    assert workflow_command("error", "50% done\r\nnext: a,b", title="a:b,c%", file="x y.py",
                            line=3, col=None) == (
        "::error title=a%3Ab%2Cc%25,file=x y.py,line=3::50%25 done%0D%0Anext: a,b")
    assert workflow_command("error", "plain") == "::error::plain"


def test_locations_must_be_existing_repository_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root / "src" / "a.py", "x\n")
    write(tmp_path / "outside.py", "x\n")
    (root / "link.py").symlink_to(tmp_path / "outside.py")
    bases = [root]

    def where(line: str) -> tuple[str, int, int | None] | None:
        found = find_location(line, repo_root=root, bases=bases)
        return None if found is None else (found.file, found.line, found.col)

    assert where("src/a.py:3:9: E1 x") == ("src/a.py", 3, 9)
    assert where(f'  File "{root}/src/a.py", line 12, in f') == ("src/a.py", 12, None)
    assert where("src/a.py(4,2): error TS1: x") == ("src/a.py", 4, 2)
    assert where("missing.py:3: error") is None
    assert where("../outside.py:1: error") is None
    assert where(f"{tmp_path}/outside.py:1: error") is None
    assert where("link.py:1: error") is None  # a symlink out of the repository
    assert where("src/a.py:0: nothing") is None
    assert where("http://example.invalid:8080/src/a.py") is None


def test_messages_without_error_lines_and_unverified_failures(tmp_path: Path) -> None:
    gate = {"name": "build", "outcome": "failed", "code": "command_failed", "exit_code": 3,
            "signal": None, "attempts": 1, "cwd": ".", "output_tail": "step 1\nall broken\n\n"}
    assert gate_annotation(gate, repo_root=tmp_path) == (
        "::error title=verifygate build [command_failed]::all broken")
    crash = {**gate, "output_tail": f'Traceback (most recent call last):\n  File "{tmp_path}/'
             'm.py", line 3, in <module>\nValueError: bad value\n'}
    write(tmp_path / "m.py", "import sys\n\nraise ValueError('bad value')\n")
    assert gate_annotation(crash, repo_root=tmp_path) == (
        "::error file=m.py,line=3,title=verifygate build [command_failed]::ValueError: bad value")
    silent = {**gate, "code": "timeout", "exit_code": None, "output_tail": ""}
    assert gate_annotation(silent, repo_root=tmp_path) == (
        "::error title=verifygate build [timeout]::timed out")
    unverified = {"verdict": "failed", "gates": [], "summary": {}, "changes": {}}
    assert error_annotations(unverified, repo_root=tmp_path) == [
        "::error title=verifygate::files changed but no gate ran, and the contract sets "
        "fail_when_unverified"]
    table = step_summary({**unverified, "gates": [{**gate, "name": "a|<b>"}]})
    assert "| `a\\|<b>` | \u274c failed |" in table
    table = step_summary({**unverified, "gates": [{**gate, "name": "`x`", "outcome": "skipped",
                                                   "code": None, "reason": "why <not> | this"}]})
    assert "| `x` | \u23ed\ufe0f skipped: why &lt;not&gt; \\| this |  | 0.00 s |" in table


def test_counts_and_durations_read_the_same_in_every_form() -> None:
    assert outcome_counts({"failed": 2, "passed": 1}) == "1 passed, 2 failed, 0 skipped, 0 pending"
    assert (format_seconds(1.234), format_seconds(1.234, prose=True)) == ("1.23s", "1.23 s")
    assert (format_seconds(125.0), format_seconds(125.0, prose=True)) == ("2m05.0s", "2 min 5 s")


def test_failure_text_for_a_file_and_for_a_terminal() -> None:
    output = "\n".join(f"line {number}" for number in range(100))
    gate = {"name": "t", "outcome": "failed", "code": "command_failed", "cwd": "src",
            "command": ["pytest", "-k", "a b"], "output_tail": output + "\n",
            "output_truncated": False, "log_path": "/logs/t.log"}
    junit_text = failure_text(gate, "HEAD")
    assert junit_text.splitlines()[:4] == ["HEAD", "command: pytest -k 'a b'", "cwd: src",
                                           "full log: /logs/t.log"]
    assert junit_text.endswith("---------- output ----------\n" + output)
    quiet = failure_text(gate, "HEAD", verbosity=0)
    assert "command:" not in quiet
    last_40 = "\n".join(output.splitlines()[-40:])
    assert quiet.endswith(f"---------- output (last 40 of 100 lines) ----------\n{last_40}")
    assert "\ncommand: pytest -k 'a b'\ncwd: src\n" in failure_text(gate, "HEAD", verbosity=1)
    kept_end = failure_text({**gate, "output_truncated": True}, "HEAD", verbosity=2)
    assert kept_end.endswith(f"---------- output (last 100 lines) ----------\n{output}")
    assert failure_text({**gate, "output_tail": "", "reason": "r"}, "HEAD", verbosity=0) == \
        "HEAD\nreason: r\nfull log: /logs/t.log\n(no output)"


def test_junit_from_a_report_dict_counts_and_cleans() -> None:
    report = {"contract": ".middle/verify.toml", "verdict": "failed", "gates": [
        {"name": "slow", "outcome": "failed", "code": "timeout", "exit_code": None,
         "signal": None, "duration_s": 1.5, "attempts": 2, "command": ["sleep", "9"],
         "cwd": ".", "output_tail": "tick\x0c\ud800 \U0001f600\n", "output_truncated": True},
        {"name": "skip", "outcome": "skipped", "code": None, "reason": "no matching files",
         "duration_s": 0.0, "attempts": 0},
    ]}
    root = ET.fromstring(to_junit(report, timeouts={"slow": 5.0}, started_at=0.0))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped"),
            suite.get("time")) == ("2", "1", "1", "1.500")
    assert "hostname" not in suite.attrib  # Surefire's schema has none
    cases = suite.findall("testcase")
    assert {case.get("classname") for case in cases} == {".middle.verify.toml"}
    failure = cases[0].find("failure")
    assert failure is not None and failure.text is not None
    assert failure.get("message") == "[timeout] slow: timed out after 5 s (after 2 attempts)"
    assert failure.text.endswith("---------- output (end) ----------\ntick \U0001f600")
    skipped = cases[1].find("skipped")
    assert skipped is not None and skipped.get("message") == "no matching files"
