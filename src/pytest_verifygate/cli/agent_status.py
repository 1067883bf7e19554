"""``verifygate agent-status``: whether the agent hook's last stop in this repository was
verified, for callers of headless agent runs (which exit 0 whatever the hook decided).

PYTEST_DONT_REWRITE
"""

import argparse
import time
from pathlib import Path

from pytest_verifygate.cli.exits import EXIT_FAILED, EXIT_OK
from pytest_verifygate.errors import UsageError

PREFIX = "verifygate agent-status:"


def main(args: argparse.Namespace) -> int:
    from pytest_verifygate.agents import status
    from pytest_verifygate.contract import find_repo_root

    root = find_repo_root(Path.cwd())
    if root is None:
        raise UsageError("agent-status: not in a git repository: run it in the repository the "
                         "agent worked in")
    if args.clear:
        try:
            status.clear_status(root)
        except OSError as exc:
            raise UsageError(f"agent-status: cannot forget the last stop: "
                             f"{exc.strerror or exc}") from None
        print(f"{PREFIX} forgot the last stop")
        return EXIT_OK
    record = status.read_status(root)
    if record is None:
        print(f"{PREFIX} no stop recorded: the agent hook did not judge a stop here (is it "
              "installed, and trusted by the agent?)")
        return EXIT_FAILED
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record["time"]))
    outcome = str(record["outcome"])
    message = str(record.get("message") or "").strip()
    print(f"{PREFIX} {outcome.replace('_', ' ')} ({record.get('agent')} session "
          f"{record.get('session')}, {when})" + (f": {message}" if message else ""))
    return EXIT_OK if outcome == status.VERIFIED else EXIT_FAILED
