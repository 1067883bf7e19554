"""``verifygate mcp``: serve the gates as MCP tools over stdio; the MCP SDK, an optional extra,
is imported only here.

PYTEST_DONT_REWRITE
"""

import argparse
import sys
from pathlib import Path

from pytest_verifygate.cli.exits import EXIT_OK, EXIT_USAGE

INSTALL_HINT = ("verifygate mcp: the MCP server needs the mcp package: "
                "pip install 'pytest-verifygate[mcp]'")


def main(args: argparse.Namespace) -> int:
    try:
        import anyio

        from pytest_verifygate.agents import mcp_server
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "anyio", "pydantic"):
            raise
        print(INSTALL_HINT, file=sys.stderr)
        return EXIT_USAGE
    from pytest_verifygate.signals import Interruptible

    server = mcp_server.build_server(Path.cwd(), args.contract)
    try:
        with Interruptible():  # SIGTERM, SIGHUP: like Ctrl-C, so the gates die with us
            anyio.run(server.run_stdio_async)
    finally:
        server.gate_tools.close_all()
    return EXIT_OK
