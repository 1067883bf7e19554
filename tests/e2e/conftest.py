"""The end-to-end suite's fixtures: the pinned agent CLIs that ``make e2e`` installs (their
absence fails every test, loudly: this suite never passes by not running), a project per test,
and a summary of what the tests measured, printed at the end of the run.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import AGENTS, E2E_DIR, PINS, Project, installed_version, make_project


def missing_tools() -> list[str]:
    """Why the agent CLIs cannot run here: each problem in one line."""
    problems = [f"`{tool}` is not on PATH: install Node.js and npm" for tool in ("node", "npm")
                if shutil.which(tool) is None]
    pins = json.loads(PINS.read_text(encoding="utf-8"))["dependencies"]
    for package, pinned in pins.items():
        try:
            installed = installed_version(package)
        except (OSError, ValueError, KeyError):
            problems.append(f"{package} is not installed in {E2E_DIR}")
            continue
        if installed != pinned:
            problems.append(f"{package} {installed} is installed in {E2E_DIR}, but "
                            f"{PINS.name} pins {pinned}")
    return problems


@pytest.fixture(scope="session")
def node_tools() -> None:
    """The pinned agent CLIs and MCP Inspector, installed; else every test fails, saying
    what is missing and how to install it."""
    problems = missing_tools()
    if problems:
        pytest.fail("the end-to-end suite cannot run: " + "; ".join(problems) +
                    ". Run `make e2e`, which installs the pinned versions into .e2e/ with npm "
                    "(or deselect this suite with -m 'not e2e')", pytrace=False)


@pytest.fixture
def project(tmp_path: Path, node_tools: None) -> Iterator[Project]:
    yield make_project(tmp_path)


def pytest_report_header() -> str:
    versions = []
    for agent in AGENTS.values():
        try:
            versions.append(f"{agent.title} {installed_version(agent.package)}")
        except (OSError, ValueError, KeyError):
            versions.append(f"{agent.title} (not installed)")
    return "agent CLIs: " + ", ".join(versions)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """What each test measured (``record_property("e2e: …", value)``), passed or failed;
    under xdist the workers' reports reach the controller with their properties."""
    measured = sorted(
        (report.nodeid.split("::")[-1], name[5:], value)
        for reports in terminalreporter.stats.values() for report in reports
        if isinstance(report, pytest.TestReport) and report.when == "call"
        for name, value in report.user_properties if name.startswith("e2e: "))
    if not measured:
        return
    terminalreporter.section("measured by the end-to-end suite")
    for test, name, value in measured:
        terminalreporter.line(f"{test}: {name}: {value}")
