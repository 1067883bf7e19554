"""``verifygate agent-hook``: the coding-agent stop hook (see ``pytest_verifygate.agents``)."""

import argparse


def main(args: argparse.Namespace) -> int:
    from pytest_verifygate.agents.stop_hook import run_agent_hook

    return run_agent_hook(args)
