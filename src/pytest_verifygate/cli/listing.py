"""``verifygate list``: every gate of the contract, selected or not, and why."""

import argparse
import sys

from pytest_verifygate.cli.exits import EXIT_OK
from pytest_verifygate.cli.request import prepare_from_args
from pytest_verifygate.contract import display_path


def main(args: argparse.Namespace) -> int:
    plan = prepare_from_args(args)
    contract, changes, selections = plan.contract, plan.changes, plan.selections
    if args.format == "json":
        payload = {
            "contract": display_path(contract.path),
            "changes": {"source": changes.source, "ref": changes.ref,
                        "count": len(changes.files),
                        **({"detected_by": changes.detected_by} if changes.detected_by else {})},
            "gates": [
                {"name": s.gate.name, "selected": s.selected, "reason": s.reason}
                for s in selections
            ],
        }
        import json

        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return EXIT_OK
    width = max((len(s.gate.name) for s in selections), default=4)
    print(f"verifygate: {display_path(contract.path)}: {len(plan.selected)} of "
          f"{len(selections)} gate(s) selected (changes: {changes.describe()})")
    for s in selections:
        mark = "run " if s.selected else "skip"
        print(f"  {mark}  {s.gate.name:<{width}}  {s.reason}")
    return EXIT_OK
