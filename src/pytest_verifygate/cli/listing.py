"""``verifygate list``: every gate of the contract, selected or not, and why, from the plan
``verifygate run`` would follow.

PYTEST_DONT_REWRITE
"""

import argparse
import sys

from pytest_verifygate.cli.exits import EXIT_OK
from pytest_verifygate.cli.request import prepare_from_args
from pytest_verifygate.commands import command_text
from pytest_verifygate.contract import display_path
from pytest_verifygate.engine import listed_gates


def main(args: argparse.Namespace) -> int:
    plan = prepare_from_args(args)
    contract, changes, selections = plan.contract, plan.changes, plan.selections
    rows = listed_gates(plan)  # what the result cache says goes to stderr
    if args.format == "json":
        detected = {"detected_by": changes.detected_by} if changes.detected_by else {}
        payload = {
            "contract": display_path(contract.path),
            "changes": {"source": changes.source, "ref": changes.ref,
                        "count": len(changes.files), **detected},
            "gates": [{key: row[key] for key in ("name", "selected", "runs", "reason",
                                                 *(("argv",) if args.verbose else ()))}
                      for row in rows],
        }
        import json

        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return EXIT_OK
    width = max((len(s.gate.name) for s in selections), default=4)
    print(f"verifygate: {display_path(contract.path)}: {len(plan.selected)} of "
          f"{len(selections)} gate(s) selected (changes: {changes.describe()})")
    for row in rows:
        print(f"  {row['mark']:<4}  {row['name']:<{width}}  {row['reason']}")
        if args.verbose:
            # Each invocation as a line sh would read alike (more than one: {files} chunked).
            for argv in row["argv"]:
                print(f"  {'':<4}  {'':<{width}}  $ {command_text(argv)}")
    return EXIT_OK
