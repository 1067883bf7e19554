"""``verifygate mcp``: the MCP server, driven by the SDK's own client over stdio, against real
repositories with real gates: its tools, a failing and a passing gate, progress, a cancelled
run that leaves no process behind, and the command without the SDK installed.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from pytest_verifygate.state.storage import state_dir

from conftest import commit_all, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

anyio = pytest.importorskip("anyio")
pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

_SCRIPT = Path(sys.executable).with_name("verifygate")
VERIFYGATE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m",
                                                       "pytest_verifygate.cli"]
PY = json.dumps(sys.executable)
CONTRACT = f"""\
[[gate]]
name = "ok"
command = [{PY}, "-c", "print('all good')"]

[[gate]]
name = "bad"
command = [{PY}, "-c", "import sys; print('calc.py:3: error: wrong sign'); sys.exit(1)"]
when_changed = ["*.py"]

[[gate]]
name = "docs"
command = [{PY}, "-c", "pass"]
when_changed = ["docs/**"]
"""


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "text", None))


def data_of(result: Any) -> dict[str, Any]:
    data: dict[str, Any] = result.structured_content
    return data


def is_error(result: Any) -> bool:
    return bool(result.is_error)


Scenario = Callable[[ClientSession], Awaitable[None]]


def serve(repo: Path, scenario: Scenario, tmp_path: Path, *args: str,
          initialized: list[Any] | None = None) -> str:
    """Run ``scenario`` against ``verifygate mcp`` started in ``repo``; the server's stderr.
    ``initialized`` receives the server's answer to ``initialize``."""
    errors = tmp_path / f"server-{uuid.uuid4().hex}.err"

    async def main() -> None:
        params = StdioServerParameters(command=VERIFYGATE[0],
                                       args=[*VERIFYGATE[1:], "mcp", *args],
                                       env=dict(os.environ), cwd=str(repo))
        with errors.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write_stream), \
                    ClientSession(read, write_stream) as session:
                answer = await session.initialize()
                if initialized is not None:
                    initialized.append(answer)
                with anyio.fail_after(120):
                    await scenario(session)

    anyio.run(main)
    text = errors.read_text()
    assert "Traceback" not in text, text
    # A line for every request on stderr: a client shows it as a problem.
    assert "Processing request" not in text, text
    return text


@pytest.fixture
def project(repo: Path) -> Path:
    write(repo / "verify.toml", CONTRACT)
    write(repo / "calc.py", "def sub(a, b):\n    return a - b\n")
    commit_all(repo)
    write(repo / "calc.py", "def sub(a, b):\n    return a + b\n")  # the current change
    return repo


# --------------------------------------------------------------------------------------------
# the tools


def test_the_server_offers_its_tools_with_their_arguments(project: Path, tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        listed = await session.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert set(tools) >= {"list_gates", "run_gates", "explain_failure"}
        schema = tools["run_gates"].input_schema
        assert set(schema["properties"]) >= {"names", "roles", "changed_only"}
        explain = tools["explain_failure"].input_schema
        assert explain["required"] == ["name"]

    serve(project, scenario, tmp_path)


def test_the_server_names_this_package_and_its_version(project: Path, tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        pass

    initialized: list[Any] = []
    serve(project, scenario, tmp_path, initialized=initialized)
    info = initialized[0].server_info
    assert (info.name, info.version) == ("verifygate", version("pytest-verifygate"))


def test_the_tools_have_titles_annotations_and_output_schemas(project: Path,
                                                              tmp_path: Path) -> None:
    """Every structured answer is valid under the schema its tool lists (the report's, for
    run_gates): checked here with jsonschema, whatever the SDK client checks by itself."""
    jsonschema = pytest.importorskip("jsonschema")
    from pytest_verifygate.report.document import load_schema

    async def scenario(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert {name: tool.title for name, tool in tools.items()} == {
            "list_gates": "List the gates", "run_gates": "Run the gates",
            "explain_failure": "Explain a failed gate"}
        hints = {name: tool.annotations.read_only_hint
                 for name, tool in tools.items()}
        assert hints == {"list_gates": True, "run_gates": False, "explain_failure": False}
        schemas = {name: tool.output_schema
                   for name, tool in tools.items()}
        report_schema = load_schema()
        assert schemas["run_gates"]["properties"] == report_schema["properties"]
        for tool in tools.values():
            assert tool.input_schema["additionalProperties"] is False

        calls = [("list_gates", {}), ("list_gates", {"changed_only": False}),
                 ("run_gates", {}), ("explain_failure", {"name": "bad"}),
                 ("explain_failure", {"name": "ok"}),
                 ("explain_failure", {"name": "docs", "rerun": True})]
        for tool, arguments in calls:
            result = await session.call_tool(tool, arguments)
            assert not is_error(result), text_of(result)
            jsonschema.validate(data_of(result), schemas[tool])
        with pytest.raises(jsonschema.ValidationError):  # the schemas can fail
            jsonschema.validate({"verdict": "passed"}, schemas["run_gates"])

    serve(project, scenario, tmp_path)


def test_an_argument_a_tool_does_not_take_is_refused_in_one_line(project: Path,
                                                                tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        result = await session.call_tool("run_gates", {"nmes": ["bad"]})
        assert is_error(result)
        assert text_of(result) == (
            "verifygate: run_gates: unknown argument 'nmes' (did you mean 'names'?); it takes "
            "names, roles, changed_only, changed_from")
        assert data_of(result) is None  # an error is text only: no report to check
        listing = await session.call_tool("list_gates", {"changed_only": True, "verbose": 1})
        assert text_of(listing) == ("verifygate: list_gates: unknown argument 'verbose'; it "
                                    "takes roles, changed_only, changed_from")

    serve(project, scenario, tmp_path)
    assert not (project / ".git" / "verifygate" / "logs").exists()  # nothing ran


def test_list_gates_says_what_applies_and_why_not(project: Path, tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        result = await session.call_tool("list_gates", {})
        assert not is_error(result)
        gates = {gate["name"]: gate for gate in data_of(result)["gates"]}
        assert gates["bad"]["selected"] and "changed 'calc.py' matches" in gates["bad"]["reason"]
        assert not gates["docs"]["selected"]
        assert "no changed file matches when_changed" in gates["docs"]["reason"]
        assert data_of(result)["changes"]["files"] == ["calc.py"]
        assert "- skip docs: no changed file matches when_changed" in text_of(result)
        everything = await session.call_tool("list_gates", {"changed_only": False})
        assert all(gate["selected"] for gate in data_of(everything)["gates"])

    serve(project, scenario, tmp_path)


def test_run_gates_a_failing_and_a_passing_gate_with_progress(project: Path,
                                                             tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        failing = await session.call_tool("run_gates", {"names": ["bad"]},
                                          progress_callback=on_progress)
        assert not is_error(failing)
        report = data_of(failing)
        assert report["verdict"] == "failed"
        assert [(g["name"], g["outcome"], g["code"]) for g in report["gates"]] == [
            ("bad", "failed", "command_failed")]
        assert {item["name"]: item["reason"] for item in report["not_selected"]}["ok"] == (
            "not among the gates asked for")
        text = text_of(failing)
        assert text.startswith("verdict: failed (0 passed, 1 failed, 0 skipped, 0 pending)\n"
                               "- bad: failed [command_failed]\n")
        assert "### `bad` failed: command_failed, exit status 1" in text
        assert "calc.py:3: error: wrong sign" in text
        with anyio.fail_after(10):  # callbacks may trail the answer: a bounded wait
            while not progress:
                await anyio.sleep(0.05)
        assert progress == [(1, 1, "bad: failed [command_failed]")]

        passing = await session.call_tool("run_gates", {"names": ["ok"]})
        assert data_of(passing)["verdict"] == "passed"
        assert text_of(passing).startswith("verdict: passed (1 passed, 0 failed")

        progress.clear()
        both = await session.call_tool("run_gates", {}, progress_callback=on_progress)
        assert [g["name"] for g in data_of(both)["gates"]] == ["ok", "bad"]
        assert "- docs: " not in text_of(both)
        with anyio.fail_after(10):
            while len(progress) < 2:
                await anyio.sleep(0.05)
        assert [(done, total) for done, total, _ in progress] == [(1, 2), (2, 2)]
        assert sorted(str(message) for _, _, message in progress) == [
            "bad: failed [command_failed]", "ok: passed"]

    serve(project, scenario, tmp_path)


def test_explain_failure_from_the_last_run_or_by_running_it(project: Path,
                                                           tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        fresh = await session.call_tool("explain_failure", {"name": "bad"})
        assert text_of(fresh).startswith("gate `bad` failed (run just now).")
        assert "calc.py:3: error: wrong sign" in text_of(fresh)
        assert "Full log: " in text_of(fresh)
        assert data_of(fresh)["code"] == "command_failed"
        await session.call_tool("run_gates", {})
        remembered = await session.call_tool("explain_failure", {"name": "bad"})
        assert "(from the last run_gates call)" in text_of(remembered)
        passed = await session.call_tool("explain_failure", {"name": "ok"})
        assert "gate `ok` passed" in text_of(passed)
        skipped = await session.call_tool("explain_failure", {"name": "docs", "rerun": True})
        assert "gate `docs` did not run" in text_of(skipped)

    serve(project, scenario, tmp_path)


def test_names_are_looked_up_never_run(project: Path, tmp_path: Path) -> None:
    planted = tmp_path / "planted"

    async def scenario(session: ClientSession) -> None:
        for tool, arguments in [("run_gates", {"names": [f"touch {planted}"]}),
                                ("explain_failure", {"name": f"touch {planted}"})]:
            result = await session.call_tool(tool, arguments)
            assert is_error(result)
            assert text_of(result) == (f"verifygate: no gate named 'touch {planted}' in "
                                       "verify.toml; its gates: ok, bad, docs")

    serve(project, scenario, tmp_path)
    assert not planted.exists()


def test_the_contract_is_read_at_call_time(project: Path, tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        before = await session.call_tool("list_gates", {})
        assert [g["name"] for g in data_of(before)["gates"]] == ["ok", "bad", "docs"]
        write(project / "verify.toml", CONTRACT + '[[gate]]\nname = "new"\ncommand = "true"\n')
        after = await session.call_tool("list_gates", {})
        assert [g["name"] for g in data_of(after)["gates"]][-1] == "new"
        write(project / "verify.toml", CONTRACT + "timeout_secnds = 1\n")
        broken = await session.call_tool("run_gates", {})
        assert is_error(broken)
        assert "timeout_secnds" in text_of(broken) and "\n" not in text_of(broken).strip()

    serve(project, scenario, tmp_path)


# --------------------------------------------------------------------------------------------
# cancelled runs leave nothing behind


def slow_contract(pid_file: Path, marker: str) -> str:
    """A gate that records its pid, starts a grandchild, and sleeps; both carry ``marker``."""
    code = ("import os, subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', "
            "sys.argv[2]]); open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)")
    return (f'[[gate]]\nname = "slow"\ncommand = [{PY}, "-c", {json.dumps(code)}, '
            f'{json.dumps(str(pid_file))}, {json.dumps(marker)}]\n')


def processes_with(marker: str) -> list[int]:
    """The processes whose command line holds ``marker`` (pgrep, else /proc)."""
    if shutil.which("pgrep"):
        done = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        return [int(pid) for pid in done.stdout.split()]
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def wait_until_gone(marker: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while processes_with(marker):
        assert time.monotonic() < deadline, f"still running: {processes_with(marker)}"
        time.sleep(0.05)


def test_a_cancelled_run_ends_its_gates(repo: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "gate.pid"
    marker = f"verifygate-mcp-cancel-{uuid.uuid4().hex}"
    write(repo / "verify.toml", slow_contract(pid_file, marker))
    commit_all(repo)

    async def scenario(session: ClientSession) -> None:
        async with anyio.create_task_group() as group:
            async def call() -> None:
                await session.call_tool("run_gates", {"changed_only": False})
                raise AssertionError("the run was not cancelled")

            group.start_soon(call)
            with anyio.fail_after(30):
                while len(processes_with(marker)) < 2 or not pid_file.exists():
                    await anyio.sleep(0.05)
            group.cancel_scope.cancel()  # the client sends notifications/cancelled
        await anyio.to_thread.run_sync(wait_until_gone, marker)
        # The server lives on, and answers.
        result = await session.call_tool("list_gates", {})
        assert [g["name"] for g in data_of(result)["gates"]] == ["slow"]

    serve(repo, scenario, tmp_path)
    assert pid_file.read_text().isdigit()
    assert processes_with(marker) == []


class RawServer:
    """``verifygate mcp`` spoken to in plain JSON-RPC lines: what any client sends, whatever
    SDK version is installed."""

    def __init__(self, repo: Path) -> None:
        # Unbuffered: a line read leaves nothing behind in Python's buffer, unseen by select.
        self.process = subprocess.Popen([*VERIFYGATE, "mcp"], cwd=repo, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        bufsize=0)
        self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}})
        assert self.receive(1)["result"]["serverInfo"]["name"] == "verifygate"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def receive(self, request_id: int) -> dict[str, Any]:
        """The response to ``request_id`` (notifications before it are passed over)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + 60
        while True:
            # Whole lines only come from the server: once readable, a line is there.
            ready, _, _ = select.select([self.process.stdout], [], [],
                                        max(0.0, deadline - time.monotonic()))
            assert ready, f"no answer to request {request_id} within 60 s"
            line = self.process.stdout.readline()
            assert line, "the server closed its output"
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == request_id:
                return message

    def call(self, request_id: int, tool: str, arguments: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}})

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate(timeout=30)


def wait_for_gate(marker: str) -> None:
    deadline = time.monotonic() + 30
    while len(processes_with(marker)) < 2:  # the gate and its grandchild
        assert time.monotonic() < deadline, "the gate never started"
        time.sleep(0.05)


def running_slow_gate(repo: Path, tmp_path: Path, marker: str) -> RawServer:
    """A server whose ``run_gates`` (request 2) runs the slow gate, once it has started."""
    write(repo / "verify.toml", slow_contract(tmp_path / "gate.pid", marker))
    commit_all(repo)
    server = RawServer(repo)
    try:
        server.call(2, "run_gates", {"changed_only": False})
        wait_for_gate(marker)
    except BaseException:
        server.close()
        raise
    return server


def test_the_protocols_cancellation_ends_the_gates(repo: Path, tmp_path: Path) -> None:
    marker = f"verifygate-mcp-cancelled-{uuid.uuid4().hex}"
    server = running_slow_gate(repo, tmp_path, marker)
    try:
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 2, "reason": "the user changed their mind"}})
        wait_until_gone(marker)
        server.call(3, "list_gates", {})
        answer = server.receive(3)
        assert answer["result"]["structuredContent"]["gates"][0]["name"] == "slow"
    finally:
        server.close()
    assert processes_with(marker) == []


def test_a_stopped_server_ends_its_gates(repo: Path, tmp_path: Path) -> None:
    marker = f"verifygate-mcp-sigterm-{uuid.uuid4().hex}"
    server = running_slow_gate(repo, tmp_path, marker)
    try:
        server.process.send_signal(signal.SIGTERM)
        server.process.communicate(timeout=30)
        wait_until_gone(marker)
    finally:
        server.close()


# --------------------------------------------------------------------------------------------
# the command line without the SDK


def test_without_the_sdk_the_command_says_how_to_install_it(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['mcp'] = None; "
            "from pytest_verifygate.cli import main; sys.exit(main(['mcp']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == ("verifygate mcp: the MCP server needs the mcp package: "
                           "pip install 'pytest-verifygate[mcp]'\n")


def test_the_command_line_never_imports_the_sdk_elsewhere(project: Path) -> None:
    code = ("import sys; from pytest_verifygate.cli import main; main(['list']); "
            "main(['install-hook', '--agent', 'cursor']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'anyio')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=project, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("[]")


def test_run_gates_says_a_flaky_pass_as_every_report_does(repo: Path, tmp_path: Path) -> None:
    code = (f"import os, sys; f = {str(tmp_path / 'runs')!r}; first = not os.path.exists(f); "
            "open(f, 'a').close(); sys.exit(1 if first else 0)")
    write(repo / "verify.toml",
          f'[[gate]]\nname = "flaky"\nretries = 1\ncommand = [{PY}, "-c", {json.dumps(code)}]\n')
    commit_all(repo)
    progress: list[str | None] = []

    async def scenario(session: ClientSession) -> None:
        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append(message)

        answer = await session.call_tool("run_gates", {"changed_only": False},
                                         progress_callback=on_progress)
        assert "- flaky: passed (flaky: passed on attempt 2 after 1 failed)\n" in text_of(answer)
        with anyio.fail_after(10):
            while not progress:
                await anyio.sleep(0.05)

    serve(repo, scenario, tmp_path)
    assert progress == ["flaky: passed (flaky: passed on attempt 2 after 1 failed)"]


def test_run_gates_says_what_the_run_found_in_its_state(repo: Path, tmp_path: Path) -> None:
    """A warning of the run itself (here an unreadable durations file) reaches the agent in
    the answer and in the JSON report, as every other front end shows it."""
    write(repo / "verify.toml", '[settings]\njobs = 2\n[[gate]]\nname = "a"\ncommand = "true"\n'
          '[[gate]]\nname = "b"\ncommand = "true"\n')
    commit_all(repo)
    durations = write(state_dir(repo) / "durations.json", "[1, 2, 3]\n")

    async def scenario(session: ClientSession) -> None:
        answer = await session.call_tool("run_gates", {"changed_only": False})
        (warning,) = data_of(answer)["warnings"]
        assert warning.startswith("warning: ") and str(durations) in warning, warning
        assert f"- {warning}\n" in text_of(answer)

    serve(repo, scenario, tmp_path)
