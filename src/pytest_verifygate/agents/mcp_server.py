"""``verifygate mcp``: the gates as Model Context Protocol tools over stdio (``tools.py`` does
their work). No ``from __future__ import annotations``: the SDK reads the annotations.

PYTEST_DONT_REWRITE
"""

import queue
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from pytest_verifygate import __version__, engine
from pytest_verifygate.agents.tools import Answer, GateTools, progress_message
from pytest_verifygate.contract.fields import did_you_mean
from pytest_verifygate.errors import VerifyGateError
from pytest_verifygate.notices import collecting
from pytest_verifygate.plugins import plugin_hook
from pytest_verifygate.report.document import load_schema

if TYPE_CHECKING:
    from pytest_verifygate.engine import Plan
    from pytest_verifygate.report.model import Report
    from pytest_verifygate.runner.records import GateResult

PROGRESS_POLL_SECONDS = 0.05
INSTRUCTIONS = (
    "verifygate runs the verification gates (lint, type checks, tests, builds) that this "
    "repository's verify contract declares. list_gates says which gates apply to the current "
    "change and why the others do not; run_gates runs them and returns the verdict with a "
    "digest of the failures; explain_failure gives one failed gate's output. Only gates the "
    "contract declares can run, by name."
)

Names = Annotated[list[str] | None, Field(
    description="Only these gates, by name (default: every gate that applies)")]
Roles = Annotated[list[str] | None, Field(
    description="The roles to select gates for (default: $VERIFYGATE_ROLE); gates with roles "
                "apply only for one of theirs")]
ChangedOnly = Annotated[bool, Field(
    description="true (default): only gates whose files changed (the working tree against "
                "HEAD plus untracked files, or everything since changed_from); false: every "
                "gate, whatever changed")]
ChangedFrom = Annotated[str | None, Field(
    description="A git ref: judge everything changed since merge-base(ref, HEAD)")]
GateName = Annotated[str, Field(description="The gate to explain, by name")]
Rerun = Annotated[bool, Field(
    description="Run the gate now even if the last run_gates call has its result")]


# By the wire's names, which the SDK takes as aliases.
READ_ONLY = ToolAnnotations.model_validate({
    "readOnlyHint": True, "idempotentHint": True, "openWorldHint": False})
# Runs the contract's own commands (which may write, as a formatter does), never anything else.
RUNS_GATES = ToolAnnotations.model_validate({
    "readOnlyHint": False, "destructiveHint": False, "idempotentHint": True})


class GateServer(MCPServer):
    """The SDK's server, with each tool's output schema, and a refusal of the arguments a tool
    does not take (the SDK would drop them silently)."""

    output_schemas: dict[str, dict[str, Any]]  # build_server sets them
    gate_tools: GateTools  # build_server sets it

    async def list_tools(self) -> Any:
        listed = []
        for tool in await super().list_tools():
            wire = tool.model_dump(by_alias=True, exclude_none=True)
            wire["inputSchema"] = {**wire["inputSchema"], "additionalProperties": False}
            if tool.name in self.output_schemas:
                wire["outputSchema"] = self.output_schemas[tool.name]
            listed.append(type(tool).model_validate(wire))
        return listed

    async def call_tool(self, name: str, arguments: dict[str, Any], *args: Any,
                        **kwargs: Any) -> Any:
        listed = {tool.name: tool for tool in await super().list_tools()}
        if name in listed:
            wire = listed[name].model_dump(by_alias=True)
            known = list(wire["inputSchema"].get("properties", {}))
            unknown = [key for key in arguments or {} if key not in known]
            if unknown:
                hint = did_you_mean(unknown[0], known)
                text = (f"verifygate: {name}: unknown argument {unknown[0]!r}"
                        f"{f' ({hint})' if hint else ''}; it takes {', '.join(known)}")
                return _result(Answer(text, {}, is_error=True))
        return await super().call_tool(name, arguments, *args, **kwargs)


def output_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of each tool's structured content. An error answer has none: a client
    checks it against the schema even in an error (the MCP Inspector does)."""
    report = load_schema()
    dialect = report["$schema"]
    changes = {"type": "object", "required": ["source", "ref", "files"], "properties": {
        "source": {"type": "string"},
        "ref": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "files": {"type": "array", "items": {"type": "string"}}}}
    listed_gate = {"type": "object", "required": ["name", "selected", "runs", "reason"],
                   "properties": {"name": {"type": "string"}, "selected": {"type": "boolean"},
                                  "runs": {"type": "boolean"}, "reason": {"type": "string"}}}
    not_run = {"type": "object", "required": ["name", "ran", "reason"], "properties": {
        "name": {"type": "string"}, "ran": {"const": False}, "reason": {"type": "string"}}}
    return {
        "list_gates": {"$schema": dialect, "type": "object",
                       "required": ["contract", "changes", "gates"],
                       "properties": {"contract": {"type": "string"}, "changes": changes,
                                      "gates": {"type": "array", "items": listed_gate}}},
        "run_gates": {key: value for key, value in report.items() if key != "$id"},
        "explain_failure": {"$schema": dialect, "type": "object",
                            "anyOf": [{"$ref": "#/$defs/gate"}, not_run],
                            "$defs": report["$defs"]},
    }


def build_server(root: Path, contract: str | None = None) -> Any:
    tools = GateTools(root, contract)
    # WARNING: a line on stderr for each request would show in clients as an error.
    server = GateServer("verifygate", instructions=INSTRUCTIONS, version=__version__,
                        log_level="WARNING")
    server.output_schemas = output_schemas()
    server.gate_tools = tools

    @server.tool(name="list_gates", title="List the gates", annotations=READ_ONLY,
                 description=(
        "Which of the contract's gates apply to the current change, and why each other gate "
        "does not. Runs nothing."))
    async def list_gates(roles: Roles = None, changed_only: ChangedOnly = True,
                         changed_from: ChangedFrom = None) -> CallToolResult:
        # In a worker thread, like every plan: it runs git.
        return await _answered(anyio.to_thread.run_sync(lambda: tools.list_gates(tools.plan(
            roles=roles, changed_only=changed_only, changed_from=changed_from))))

    @server.tool(name="run_gates", title="Run the gates", annotations=RUNS_GATES,
                 description=(
        "Run the gates that apply to the current change (or only those named) and return "
        "the verdict, each gate's outcome and failure code, and a digest of the failures; "
        "the JSON report is the structured content. Sends progress as gates finish."))
    async def run_gates(ctx: Context, names: Names = None, roles: Roles = None,
                        changed_only: ChangedOnly = True,
                        changed_from: ChangedFrom = None) -> CallToolResult:
        async def answer() -> Answer:
            plan = await anyio.to_thread.run_sync(lambda: tools.plan(
                names=names, roles=roles, changed_only=changed_only,
                changed_from=changed_from))
            return tools.run_answer(plan, await _run(tools, plan, ctx), names)

        return await _answered(answer())

    @server.tool(name="explain_failure", title="Explain a failed gate",
                 annotations=RUNS_GATES, description=(
        "One gate's classified failure (its code, a hint, the command) and the end of its "
        "output, from the last run_gates call, else from running that gate now."))
    async def explain_failure(ctx: Context, name: GateName, rerun: Rerun = False,
                              roles: Roles = None, changed_only: ChangedOnly = True,
                              changed_from: ChangedFrom = None) -> CallToolResult:
        async def answer() -> Answer:
            report = tools.last_report
            if not rerun and report is not None and any(gate["name"] == name
                                                        for gate in report["gates"]):
                return tools.explain(name, report, tools.root, "from the last run_gates call")
            plan = await anyio.to_thread.run_sync(lambda: tools.plan(
                names=[name], roles=roles, changed_only=changed_only,
                changed_from=changed_from))
            report = await _run(tools, plan, ctx)
            return tools.explain(name, report, plan.contract.repo_root, "run just now")

        return await _answered(answer())

    return server


async def _run(tools: GateTools, plan: "Plan", ctx: Any) -> "Report":
    """Run the plan's selected gates, with progress per finished gate."""
    hook = plugin_hook(plan.contract)
    total = len(plan.selected)
    if total == 0:
        return tools.finish(plan, (), hook)
    finished: queue.SimpleQueue[GateResult] = queue.SimpleQueue()
    with collecting() as notices:
        runner = engine.start(plan, hook=hook,
                              on_finished=lambda gate, result: finished.put(result))
    tools.running.add(runner)
    all_done = anyio.Event()

    async def pump() -> None:
        # Never cancelled between taking a result and sending its notification: once the run
        # is done, it sends what is left and returns.
        done = 0
        while True:
            last = all_done.is_set()
            while not finished.empty():
                done += 1
                await ctx.report_progress(done, total, progress_message(finished.get_nowait()))
            if last:
                return
            with anyio.move_on_after(PROGRESS_POLL_SECONDS):
                await all_done.wait()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            results = await anyio.to_thread.run_sync(runner.results, abandon_on_cancel=True)
            all_done.set()
    except BaseException:  # cancelled (the client's notifications/cancelled), or broken
        runner.cancel()  # kills the running gates' process groups; waiting gates never start
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(runner.close)
        raise
    finally:
        tools.running.discard(runner)
    await anyio.to_thread.run_sync(runner.close)
    return tools.finish(plan, results, hook, notices)


async def _answered(work: Awaitable[Answer]) -> CallToolResult:
    """The tool's result; any problem is one line, an error result."""
    try:
        answer = await work
    except VerifyGateError as exc:
        answer = Answer(f"verifygate: {exc}", {}, is_error=True)
    except Exception as exc:  # a bug: one line for the agent, never a traceback
        text = f"verifygate: internal error ({type(exc).__name__}: {exc}); please report this"
        answer = Answer(text, {}, is_error=True)
    return _result(answer)


def _result(answer: Answer) -> CallToolResult:
    """The answer on the wire, by the wire's names (see ``READ_ONLY``); an error's is text."""
    wire: dict[str, Any] = {"content": [TextContent(type="text", text=answer.text)],
                            "isError": answer.is_error}
    if not answer.is_error:
        wire["structuredContent"] = answer.data
    return CallToolResult.model_validate(wire)
