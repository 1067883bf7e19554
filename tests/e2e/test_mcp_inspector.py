"""``verifygate mcp`` under the official MCP Inspector's command-line mode (``mcp-inspector
--cli``, pinned in package.json): who the server says it is, its tools' titles, annotations and
output schemas, structured answers the Inspector checks against those schemas, and an unknown
argument refused in one line.
"""

from __future__ import annotations

import json
import subprocess
from importlib.metadata import version
from typing import Any

import pytest

from .harness import BROKEN, NODE_BIN, VERIFYGATE, Project, base_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def inspector(project: Project, *args: str) -> tuple[int, Any, str]:
    """Run the Inspector's CLI against ``verifygate mcp`` started in the project: its exit
    status, its output as JSON, its stderr."""
    done = subprocess.run([str(NODE_BIN / "mcp-inspector"), "--cli", str(VERIFYGATE), "mcp",
                           *args], cwd=project.root, env=base_env(project),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    try:
        output = json.loads(done.stdout)
    except ValueError:
        raise AssertionError(f"not JSON (exit {done.returncode}): {done.stdout!r}\n"
                             f"{done.stderr}") from None
    return done.returncode, output, done.stderr


def test_the_server_is_verifygate_at_this_packages_version(project: Project) -> None:
    status, output, stderr = inspector(project, "--method", "initialize")
    assert status == 0, stderr
    assert output["serverInfo"] == {"name": "verifygate",
                                    "version": version("pytest-verifygate")}


def test_the_tools_are_titled_annotated_and_schemas_pass_strict_linting(
        project: Project) -> None:
    # --strict exits 6 on an error-severity schema problem (warnings are printed only).
    status, output, stderr = inspector(project, "--method", "tools/list", "--strict")
    assert status == 0, stderr
    tools = {tool["name"]: tool for tool in output["tools"]}
    assert {name: tool["title"] for name, tool in tools.items()} == {
        "list_gates": "List the gates", "run_gates": "Run the gates",
        "explain_failure": "Explain a failed gate"}
    assert tools["list_gates"]["annotations"]["readOnlyHint"] is True
    assert tools["run_gates"]["annotations"]["readOnlyHint"] is False
    for tool in tools.values():
        assert tool["outputSchema"]["type"] == "object"
        assert tool["inputSchema"]["additionalProperties"] is False
    assert "verdict" in tools["run_gates"]["outputSchema"]["required"]


def test_structured_answers_pass_the_inspectors_schema_check(project: Project) -> None:
    """The Inspector checks each structured answer against the tool's output schema and
    prints an error instead of the result when it does not conform."""
    (project.root / "calc.py").write_text(BROKEN, encoding="utf-8")
    calls = [("run_gates", []), ("list_gates", []), ("explain_failure", ["name=tests"])]
    answers = {}
    for tool, arguments in calls:
        args = ["--method", "tools/call", "--tool-name", tool]
        if arguments:
            args += ["--tool-arg", *arguments]
        status, output, stderr = inspector(project, *args)
        assert status == 0 and "error" not in output, f"{tool}: {output}\n{stderr}"
        answers[tool] = output
    assert answers["run_gates"]["structuredContent"]["verdict"] == "failed"
    assert answers["explain_failure"]["structuredContent"]["code"] == "command_failed"
    assert [gate["name"] for gate in answers["list_gates"]["structuredContent"]["gates"]] == [
        "tests"]


def test_an_unknown_argument_is_refused_in_one_line(project: Project) -> None:
    status, output, stderr = inspector(project, "--method", "tools/call", "--tool-name",
                                       "run_gates", "--tool-arg", "nmes=tests")
    # Exit status 5: the Inspector's "the tool returned isError: true".
    assert status == 5 and output.get("isError") is True, f"{status} {output}\n{stderr}"
    assert [block["text"] for block in output["content"]] == [
        "verifygate: run_gates: unknown argument 'nmes' (did you mean 'names'?); it takes "
        "names, roles, changed_only, changed_from"]
    assert not (project.root / ".git" / "verifygate" / "logs").exists()  # nothing ran
