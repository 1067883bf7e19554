"""``verifygate mcp``: the engine's gates as Model Context Protocol tools, over stdio.

Built on the official ``mcp`` SDK (the optional extra ``pytest-verifygate[mcp]``: its
``MCPServer``, called ``FastMCP`` before mcp 2), imported only when this server runs. The tools
(``tools.py`` does their work): ``list_gates``, ``run_gates``, ``explain_failure``.

A run sends one progress notification per finished gate (when the client asked for progress).
A cancelled request (``notifications/cancelled``, or the client going away) ends its gates:
the runner is cancelled, which kills every gate's process group, and closed before the
cancellation goes on. The gates run in the runner's threads; the event loop only waits.

Deliberately written without ``from __future__ import annotations``: the SDK reads the tools'
parameter annotations as objects to build their JSON schemas and to inject the ``Context``.

PYTEST_DONT_REWRITE
"""

import queue
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from pydantic import Field

try:
    from mcp.server.mcpserver import Context, MCPServer
except ImportError:  # mcp 1.x: the same server, called FastMCP there
    from mcp.server.fastmcp import Context  # type: ignore[no-redef, attr-defined, unused-ignore]
    from mcp.server.fastmcp import (  # type: ignore[no-redef, attr-defined, unused-ignore]
        FastMCP as MCPServer,
    )
from mcp.types import CallToolResult, TextContent

from pytest_verifygate.agents.tools import Answer, GateTools, progress_message
from pytest_verifygate.errors import VerifyGateError

if TYPE_CHECKING:
    from pytest_verifygate.engine import Plan
    from pytest_verifygate.runner.records import GateResult
    from pytest_verifygate.runner.scheduler import GateRunner

PROGRESS_POLL_SECONDS = 0.05
INSTRUCTIONS = (
    "verifygate runs the verification gates (lint, type checks, tests, builds) that this "
    "repository's verify contract declares. list_gates says which gates apply to the current "
    "change and why the others do not; run_gates runs them and returns the verdict with a "
    "digest of the failures; explain_failure gives one failed gate's output. Only gates the "
    "contract declares can run, by name."
)

# Every runner still running, for ``close_all`` when the server itself is stopped.
LIVE_RUNNERS: "set[GateRunner]" = set()

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


def build_server(root: Path, contract: str | None = None) -> Any:
    """The server, its tools bound to the repository at ``root``."""
    tools = GateTools(root, contract)
    server = MCPServer("verifygate", instructions=INSTRUCTIONS)

    @server.tool(name="list_gates", description=(
        "Which of the contract's gates apply to the current change, and why each other gate "
        "does not. Runs nothing."))
    async def list_gates(roles: Roles = None, changed_only: ChangedOnly = True,
                         changed_from: ChangedFrom = None) -> CallToolResult:
        def answer() -> Answer:
            return tools.list_gates(tools.plan(roles=roles, changed_only=changed_only,
                                               changed_from=changed_from))

        return await _answered(answer)

    @server.tool(name="run_gates", description=(
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
            report = await _run(tools, plan, ctx)
            return tools.run_answer(plan, report, names)

        return await _answered_async(answer)

    @server.tool(name="explain_failure", description=(
        "One gate's classified failure (its code, a hint, the command) and the end of its "
        "output, from the last run_gates call, else from running that gate now."))
    async def explain_failure(ctx: Context, name: GateName, rerun: Rerun = False,
                              roles: Roles = None, changed_only: ChangedOnly = True,
                              changed_from: ChangedFrom = None) -> CallToolResult:
        async def answer() -> Answer:
            report = None if rerun else tools.remembered(name)
            if report is not None:
                return tools.explain(name, report, tools.root, "from the last run_gates call")
            plan = await anyio.to_thread.run_sync(lambda: tools.plan(
                names=[name], roles=roles, changed_only=changed_only,
                changed_from=changed_from))
            report = await _run(tools, plan, ctx)
            return tools.explain(name, report, plan.contract.repo_root, "run just now")

        return await _answered_async(answer)

    return server


async def _run(tools: GateTools, plan: "Plan", ctx: Any) -> dict[str, Any]:
    """Run the plan's selected gates; progress per finished gate; cancelled, they end."""
    from pytest_verifygate import engine
    from pytest_verifygate.plugins import plugin_hook

    hook = plugin_hook()
    total = len(plan.selected)
    if total == 0:
        return tools.finish(plan, (), hook)
    finished: queue.SimpleQueue[GateResult] = queue.SimpleQueue()
    runner = engine.start(plan, hook=hook,
                          on_finished=lambda gate, result: finished.put(result))
    LIVE_RUNNERS.add(runner)
    done = 0

    async def report_progress() -> None:
        nonlocal done
        while True:
            try:
                result = finished.get_nowait()
            except queue.Empty:
                return
            done += 1
            await ctx.report_progress(done, total, progress_message(result))

    all_done = anyio.Event()

    async def pump() -> None:
        # Never cancelled between taking a result and sending its notification: told to
        # stop, it sends what is left and returns.
        while not all_done.is_set():
            await report_progress()
            with anyio.move_on_after(PROGRESS_POLL_SECONDS):
                await all_done.wait()
        await report_progress()

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
        LIVE_RUNNERS.discard(runner)
    await anyio.to_thread.run_sync(runner.close)
    return tools.finish(plan, results, hook)


def close_all() -> None:
    """Cancel and wait for every run still going (the server is stopping)."""
    for runner in list(LIVE_RUNNERS):
        runner.cancel()
    for runner in list(LIVE_RUNNERS):
        runner.close()


async def _answered(work: Any) -> CallToolResult:
    async def in_thread() -> Answer:
        answer: Answer = await anyio.to_thread.run_sync(work)
        return answer

    return await _answered_async(in_thread)


async def _answered_async(work: Any) -> CallToolResult:
    """The tool's result; a problem the user can fix is one line, an error result."""
    try:
        answer: Answer = await work()
    except VerifyGateError as exc:
        answer = Answer(f"verifygate: {exc}", {"error": str(exc)}, is_error=True)
    except Exception as exc:  # a bug: one line for the agent, never a traceback
        text = f"verifygate: internal error ({type(exc).__name__}: {exc}); please report this"
        answer = Answer(text, {"error": text}, is_error=True)
    # By the wire's names: mcp 2 takes them as aliases, mcp 1 has no others.
    return CallToolResult.model_validate({
        "content": [TextContent(type="text", text=answer.text)],
        "structuredContent": answer.data, "isError": answer.is_error})
