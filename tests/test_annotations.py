"""GitHub Actions annotations that point at the line: one per error a tool reported.

The sample project in ``tests/data/annotations/project`` has mistakes for every checker.
ruff, mypy and pytest run on it for real, as gates of a real ``verifygate`` run; the output of
flake8, pyright, eslint and tsc (not installed here) was captured once from the same project
(``tests/data/annotations/captured/README.md`` names the versions). What the runner would
honour is read from stdout as GitHub's runner reads it (``actions_runner``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pluggy
import pytest

from actions_runner import Command, annotations
from plugin_support import QUIET_PLUGINS
from pytest_verifygate import hookspecs
from pytest_verifygate.report.error_formats import Finding
from pytest_verifygate.report.findings import Resolver, gate_locations
from pytest_verifygate.report.github import (
    MAX_ANNOTATIONS,
    error_annotations,
    plan_annotations,
    step_summary,
)

from conftest import commit_all, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PY = sys.executable
DATA = Path(__file__).parent / "data" / "annotations"
RUFF = str(Path(sys.executable).parent / "ruff")
Place = tuple[str, int | None, int | None]
# ruff and mypy come with the dev extra: without them the real-tool runs cannot be made.
needs_ruff_and_mypy = pytest.mark.skipif(
    not Path(RUFF).exists() or importlib.util.find_spec("mypy") is None,
    reason="needs ruff and mypy: pip install -e '.[dev]'")


@pytest.fixture
def sample(repo: Path) -> Path:
    """The sample project, committed: its ``.py.txt`` files become ``.py``."""
    for source in sorted((DATA / "project").rglob("*")):
        if source.is_file():
            target = repo / source.relative_to(DATA / "project")
            if target.name.endswith(".py.txt"):
                target = target.with_name(target.name.removesuffix(".txt"))
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    commit_all(repo)
    return repo


def captured(name: str, root: Path) -> str:
    return (DATA / "captured" / f"{name}.txt").read_text(encoding="utf-8").replace(
        "@ROOT@", str(root))


def failed_gate(output: str, name: str = "check", cwd: str = ".") -> dict[str, Any]:
    return {"name": name, "outcome": "failed", "code": "command_failed", "exit_code": 1,
            "signal": None, "attempts": 1, "cwd": cwd, "duration_s": 0.1,
            "output_tail": output, "output_truncated": False}


def report_of(*gates: Mapping[str, Any]) -> dict[str, Any]:
    return {"version": 1, "verdict": "failed", "contract": "verify.toml",
            "changes": {"source": "all"}, "gates": list(gates),
            "summary": {"failed": len(gates)}}


def places(gate: Mapping[str, Any], root: Path, hook: Any = None) -> list[tuple[Any, ...]]:
    """(file, line, col, severity, first message line) of every error, uncapped."""
    from pytest_verifygate.report.digest import clean_output

    resolver = Resolver(root, [root / str(gate.get("cwd", ".")), root])
    found, problems = gate_locations(gate, clean_output(gate["output_tail"]), resolver, hook)
    assert problems == []
    return [(f.file, f.line, f.col, f.severity, f.message.split("\n")[0]) for f in found]


def shown(command: Command) -> tuple[str | None, int | None, int | None]:
    props = command.properties
    return (props.get("file"), int(props["line"]) if "line" in props else None,
            int(props["col"]) if "col" in props else None)


# --------------------------------------------------------------------------------------------
# captured output of tools not installed here

IMPORTS = [("src/shop/imports.py", line) for line in range(2, 14)]


def test_flake8(sample: Path) -> None:
    found = places(failed_gate(captured("flake8", sample)), sample)
    assert [(f, line, col) for f, line, col, *_ in found] == [
        ("src/shop/cart.py", 2, 1), ("src/shop/cart.py", 6, 5), ("src/shop/cart.py", 14, 5),
        ("src/shop/cart.py", 14, 5), ("src/shop/cart.py", 15, 19), ("src/shop/cart.py", 19, 80),
        *[(f, line, 1) for f, line in IMPORTS]]
    # Two errors at one place are two annotations.
    assert [m for *_, m in found[2:4]] == ["F841 local variable 'l' is assigned to but never used",
                                          "E741 ambiguous variable name 'l'"]


def test_pyright_absolute_paths_and_explanations(sample: Path) -> None:
    found = places(failed_gate(captured("pyright", sample)), sample)
    assert [row[:4] for row in found] == [
        ("src/shop/cart.py", 6, 18, "error"), ("src/shop/cart.py", 10, 12, "error"),
        ("src/shop/cart.py", 15, 19, "error"), ("src/shop/cart.py", 19, 12, "error"),
        ("src/shop/stock.py", 2, 8, "error"), ("src/shop/stock.py", 9, 1, "warning")]
    gate = failed_gate(captured("pyright", sample))
    first = annotations("\n".join(error_annotations(report_of(gate), repo_root=sample)))[0]
    # The explanation pyright indents below the error (with no-break spaces) is kept.
    assert first.data == ('Type "Literal[\'zero\']" is not assignable to declared type "int"\n'
                          '"Literal[\'zero\']" is not assignable to "int" (reportAssignmentType)')


@pytest.mark.parametrize("name", ["eslint-unix", "eslint-stylish"])
def test_eslint(sample: Path, name: str) -> None:
    found = places(failed_gate(captured(name, sample)), sample)
    assert [row[:4] for row in found] == [
        ("web/app.js", 1, 7, "error"), ("web/app.js", 2, 16, "error"),
        ("web/app.js", 3, 21, "error"), ("web/app.js", 5, 1, "warning")]
    assert found[2][4].rstrip(".") in ("'nme' is not defined. (no-undef)",
                                       "'nme' is not defined (no-undef)")


@pytest.mark.parametrize("name", ["tsc", "tsc-pretty"])
def test_tsc(sample: Path, name: str) -> None:
    found = places(failed_gate(captured(name, sample)), sample)
    assert found == [
        ("web/app.ts", 1, 7, "error", "TS2322: Type 'string' is not assignable to type 'number'."),
        ("web/app.ts", 5, 8, "error", "TS2345: Argument of type 'string' is not assignable to "
                                      "parameter of type 'number'.")]


def test_paths_relative_to_the_gate_cwd_and_outside_the_repository(sample: Path,
                                                                   tmp_path: Path) -> None:
    output = ("shop/cart.py:6:5: F841 from the cwd\n"
              f"{tmp_path}/elsewhere.py:1:1: E1 outside\n"
              "/usr/lib/python3/dist-packages/x.py:3:1: E2 a library\n")
    write(tmp_path / "elsewhere.py", "x\n")
    gate = failed_gate(output, cwd="src")
    assert places(gate, sample) == [("src/shop/cart.py", 6, 5, "error", "F841 from the cwd")]


# --------------------------------------------------------------------------------------------
# real ruff, mypy and pytest as the gates of a real run

PYTEST = [PY, "-m", "pytest", "-p", "no:cacheprovider", *QUIET_PLUGINS.split(), "tests"]
GATES: dict[str, list[str]] = {
    "ruff": [RUFF, "check", "--no-cache", "--isolated", "--select", "F", "src"],
    "ruff-concise": [RUFF, "check", "--no-cache", "--isolated", "--select", "F",
                     "--output-format", "concise", "src"],
    "mypy": [PY, "-m", "mypy", "--no-incremental", "--cache-dir", ".mypy-cache", "src"],
    "mypy-pretty": [PY, "-m", "mypy", "--no-incremental", "--cache-dir", ".mypy-cache-2",
                    "--pretty", "--show-column-numbers", "src"],
    **{f"pytest-{tb}": [*PYTEST, f"--tb={tb}"] for tb in ("long", "short", "line", "native")},
    "pytest-no": [*PYTEST, "--tb=no", "-q"],
    "pytest-collect": [*PYTEST[:-1], "tests_broken"],
}
RUFF_PLACES: list[Place] = [
    ("src/shop/cart.py", 2, 8), ("src/shop/cart.py", 6, 5), ("src/shop/cart.py", 14, 5),
    ("src/shop/cart.py", 15, 19), *[(f, line, 8) for f, line in IMPORTS]]
MYPY_PLACES: list[Place] = [("src/shop/stock.py", 2, 1), ("src/shop/cart.py", 6, 18),
                            ("src/shop/cart.py", 10, 12), ("src/shop/cart.py", 19, 38)]
PYTEST_PLACES: list[Place] = [("tests/test_cart.py", 7, None), ("tests/test_cart.py", 13, None),
                              ("src/shop/cart.py", 15, None), ("tests/test_cart.py", 20, None)]
EXPECTED: dict[str, list[Place]] = {
    "ruff": RUFF_PLACES, "ruff-concise": RUFF_PLACES,
    "mypy": [(f, line, None) for f, line, _ in MYPY_PLACES], "mypy-pretty": MYPY_PLACES,
    **{f"pytest-{tb}": PYTEST_PLACES for tb in ("long", "short", "line", "native")},
    # Only "FAILED path::test" lines: the test's def (in its class for a method).
    "pytest-no": [("tests/test_cart.py", 6, None), ("tests/test_cart.py", 12, None),
                  ("tests/test_cart.py", 15, None), ("tests/test_cart.py", 23, None)],
    # A test module that cannot be imported: at its import line.
    "pytest-collect": [("tests_broken/test_stock.py", 1, None)],
}


def contract(gates: Mapping[str, list[str]]) -> str:
    return "".join(f'[[gate]]\nname = "{name}"\ncommand = {json.dumps(argv)}\n'
                   'env = { PYTHONPATH = "src" }\ntimeout_seconds = 300\n'
                   for name, argv in gates.items())


def run_github(repo: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    return subprocess.run([PY, "-m", "pytest_verifygate.cli", "run", "--annotations", "github",
                           "--json", "report.json", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=600)


@needs_ruff_and_mypy
def test_real_tools_one_annotation_per_error_within_githubs_limits(sample: Path,
                                                                   tmp_path: Path) -> None:
    write(sample / "verify.toml", contract(GATES))
    done = run_github(sample, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((sample / "report.json").read_text())
    for gate in report["gates"]:
        assert [row[:3] for row in places(gate, sample)] == EXPECTED[gate["name"]], (
            gate["name"], gate["output_tail"])

    by_name = {gate["name"]: gate for gate in report["gates"]}
    assert places(by_name["ruff"], sample)[0][4] == "F401 [*] `os` imported but unused"
    # mypy's wrapped --pretty message is whole again, and its note joins the error.
    mypy = places(by_name["mypy-pretty"], sample)
    assert mypy[1][4] == ('Incompatible types in assignment (expression has type "str", '
                          'variable has type "int")  [assignment]')
    pytest_long = plan_annotations(report_of(by_name["pytest-long"]), repo_root=sample)
    assert [c.data for c in annotations("\n".join(pytest_long.shown))] == [
        "assert (3 * 2) == 7", "AssertionError: only one rate\nassert 2 == 1",
        "NameError: name 'undefined_rate' is not defined", "ValueError: bad value 3"]
    assert [c.properties["title"] for c in annotations("\n".join(pytest_long.shown))][2] == (
        "verifygate pytest-long: tests/test_cart.py::TestCart::test_undefined")

    # GitHub shows 10 errors of a step: every failed gate (ten here) gets its first one first.
    errors = [c for c in annotations(done.stdout) if c.name == "error"]
    assert len(errors) == MAX_ANNOTATIONS["error"] == len(GATES) == 10
    assert [shown(c) for c in errors] == [EXPECTED[name][0] for name in GATES]
    assert [c.properties["title"].split(":")[0] for c in errors] == [
        f"verifygate {name}" for name in GATES]
    total = sum(len(expected) for expected in EXPECTED.values())
    left_out = total - 10
    assert done.stdout.rstrip().splitlines()[-1] == (
        f"verifygate: {left_out} more error(s) and warning(s) not annotated (GitHub shows 10 "
        "of each per step); the step summary lists them")
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert f"**{left_out} error(s) and warning(s) not annotated**" in summary
    assert "| `ruff` | error | `src/shop/imports.py:13:8` | F401 [*] `uuid` imported but " \
        "unused |" in summary


@needs_ruff_and_mypy
def test_a_single_tool_with_more_errors_than_github_shows(sample: Path, tmp_path: Path) -> None:
    write(sample / "verify.toml", contract({"ruff": GATES["ruff"]}))
    done = run_github(sample, tmp_path)
    assert [shown(c) for c in annotations(done.stdout)] == RUFF_PLACES[:10]
    assert "6 more error(s) and warning(s) not annotated" in done.stdout
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert summary.count("| `ruff` | error | `src/shop/imports.py:") == 6


# --------------------------------------------------------------------------------------------
# the hook: a project's own format


class LintFormat:
    """A tool of the project's own: ``LINT> path @ line : message``."""

    @pluggy.HookimplMarker("pytest")
    def pytest_verifygate_annotation_locations(self, gate: dict[str, Any], output: str
                                               ) -> list[Any]:
        found: list[Any] = []
        for line in output.splitlines():
            if line.startswith("LINT> "):
                path, _, rest = line[6:].partition(" @ ")
                number, _, message = rest.partition(" : ")
                found.append(Finding(path, int(number), None, message, title="house rule"))
        found.append({"path": "src/shop/cart.py", "line": 1, "col": None,
                      "message": f"from a dict, for {gate['name']}", "severity": "notice"})
        found.append(("src/shop/cart.py", 2, 3, "from a tuple"))
        return found


def relay(*plugins: object) -> Any:
    manager = pluggy.PluginManager("pytest")
    manager.add_hookspecs(hookspecs)
    for plugin in plugins:
        manager.register(plugin)
    return manager.hook


def test_the_hook_adds_a_format_before_the_builtin_readers(sample: Path) -> None:
    gate = failed_gate("LINT> src/shop/cart.py @ 10 : no str() here\n"
                       "src/shop/cart.py:6:5: F841 built in\n")
    hook = relay(LintFormat())
    assert places(gate, sample, hook) == [
        ("src/shop/cart.py", 10, None, "error", "no str() here"),
        ("src/shop/cart.py", 1, None, "notice", "from a dict, for check"),
        ("src/shop/cart.py", 2, 3, "error", "from a tuple"),
        ("src/shop/cart.py", 6, 5, "error", "F841 built in")]
    lines = error_annotations(report_of(gate), repo_root=sample, hook=hook)
    assert lines[0] == ("::error file=src/shop/cart.py,line=10,title=verifygate check%3A house "
                        "rule::no str() here")
    assert lines[1].startswith("::notice file=src/shop/cart.py,line=1,")


class Broken:
    @pluggy.HookimplMarker("pytest")
    def pytest_verifygate_annotation_locations(self, gate: dict[str, Any], output: str
                                               ) -> list[Any]:
        if gate["name"] == "raises":
            raise RuntimeError("parser bug")
        return ["not a finding", ("src/shop/cart.py", 0, None, "line 0"), None]


def test_a_broken_hook_costs_only_its_own_findings(sample: Path) -> None:
    output = "src/shop/cart.py:6:5: F841 built in\n"
    planned = plan_annotations(report_of(failed_gate(output, "raises"), failed_gate(output)),
                               repo_root=sample, hook=relay(Broken()))
    assert [shown(c) for c in annotations("\n".join(planned.shown))] == [
        ("src/shop/cart.py", 6, 5), ("src/shop/cart.py", 6, 5)]
    assert planned.warnings == [
        "pytest_verifygate_annotation_locations failed for gate 'raises' (RuntimeError: "
        "parser bug); its findings are left out",
        "pytest_verifygate_annotation_locations returned 3 item(s) for gate 'check' that are "
        "not findings (path, line, col, message): left out"]


# Marked as an implementation, so the command's plugin manager takes it as pytest does.
CONFTEST = '''
import pluggy

from pytest_verifygate.report.error_formats import Finding

@pluggy.HookimplMarker("pytest")
def pytest_verifygate_annotation_locations(gate, output):
    found = []
    for line in output.splitlines():
        if line.startswith("LINT> "):
            path, number = line[6:].split(" @ ")
            found.append(Finding(path, int(number), None, "house rule"))
    return found
'''
HOUSE_GATE = ("[[gate]]\nname = \"house\"\ncommand = "
              + json.dumps([PY, "-c", "print('LINT> src/shop/cart.py @ 10'); exit(1)"]) + "\n")


def test_the_hook_under_pytest_and_the_command(sample: Path, tmp_path: Path) -> None:
    write(sample / "verify.toml", HOUSE_GATE)
    write(sample / "conftest.py", CONFTEST)
    env = {**os.environ, "GITHUB_ACTIONS": "true"}
    session = subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider",
                              *QUIET_PLUGINS.split(), "--verify-contract", "verify.toml"],
                             cwd=sample, env=env, capture_output=True, text=True, timeout=120)
    assert [shown(c) for c in annotations(session.stdout)] == [("src/shop/cart.py", 10, None)]

    # The command loads the plugins the contract names.
    plugins = tmp_path / "plugins"
    write(plugins / "house_format.py", CONFTEST)
    write(sample / "verify.toml", '[settings]\nplugins = ["house_format"]\n\n' + HOUSE_GATE)
    (sample / "conftest.py").unlink()
    done = subprocess.run([PY, "-m", "pytest_verifygate.cli", "run"], cwd=sample,
                          env={**env, "PYTHONPATH": str(plugins)}, capture_output=True,
                          text=True, timeout=120)
    assert [shown(c) for c in annotations(done.stdout)] == [("src/shop/cart.py", 10, None)]
    write(sample / "verify.toml", HOUSE_GATE)  # the plugin installed, but not named
    without = subprocess.run([PY, "-m", "pytest_verifygate.cli", "run"], cwd=sample,
                             env={**env, "PYTHONPATH": str(plugins)}, capture_output=True,
                             text=True, timeout=120)
    assert [shown(c) for c in annotations(without.stdout)] == [(None, None, None)]


# --------------------------------------------------------------------------------------------
# one annotation per gate when nothing points into the repository


def test_fallback_is_one_annotation_without_pytests_margin(sample: Path) -> None:
    gate = failed_gate(textwrap.dedent("""\
        ____ test_x ____
        E       assert 1 == 2
        /elsewhere/test_x.py:3: AssertionError
        FAILED /elsewhere/test_x.py::test_x - assert 1 == 2
        """))
    lines = error_annotations(report_of(gate), repo_root=sample)
    assert lines == ["::error title=verifygate check [command_failed]::assert 1 == 2"]


def test_only_warnings_mean_the_warnings_failed_the_gate(sample: Path) -> None:
    gate = failed_gate(captured("eslint-unix", sample).replace("[Error/", "[Warning/"))
    kinds = [c.name for c in annotations("\n".join(
        error_annotations(report_of(gate), repo_root=sample)))]
    assert kinds == ["error"] * 4


def test_the_step_summary_lists_what_was_left_out(sample: Path) -> None:
    gate = failed_gate(captured("flake8", sample), name="flake8|x")
    text = step_summary(report_of(gate), repo_root=sample)
    assert "**8 error(s) and warning(s) not annotated**" in text
    assert "| `flake8\\|x` | error | `src/shop/imports.py:6:1` | F401 'json' imported but " \
        "unused |" in text
    assert "not annotated" not in step_summary(report_of(failed_gate("one line")),
                                               repo_root=sample)


def test_every_failed_gate_gets_its_first_annotation_first(sample: Path) -> None:
    many = failed_gate(captured("flake8", sample), name="flake8")
    few = failed_gate(captured("tsc", sample), name="tsc")
    lint = failed_gate(captured("eslint-unix", sample), name="eslint")
    planned = plan_annotations(report_of(many, few, lint), repo_root=sample)
    shown_titles = [c.properties["title"] for c in annotations("\n".join(planned.shown))]
    # 10 errors: one each, then a second each, then the rest to the gate that has more;
    # eslint's warning has a budget of its own.
    assert shown_titles.count("verifygate flake8") == 5
    assert shown_titles.count("verifygate tsc") == 2
    assert shown_titles.count("verifygate eslint") == 4
    assert [(a.gate, a.kind) for a in planned.left_out] == [("flake8", "error")] * 13
