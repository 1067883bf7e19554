"""``verifygate agent-hook``: the coding-agent stop hook (see ``pytest_verifygate.agents``).

PYTEST_DONT_REWRITE
"""

import argparse
import os


def main(args: argparse.Namespace) -> int:
    from pytest_verifygate.agents.stop_hook import run_agent_hook
    from pytest_verifygate.selection import asked_roles

    # The roles asked for, as ``run`` reads them: every --role, else $VERIFYGATE_ROLE.
    args.role = asked_roles(args.role, os.environ)
    return run_agent_hook(args)
