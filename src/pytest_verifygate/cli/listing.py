"""``verifygate list``: every gate of the contract, selected or not, and why: what ``verifygate
run`` would do for the same change, taken from the engine's plan.

PYTEST_DONT_REWRITE
"""

import argparse
import sys
from typing import TYPE_CHECKING, Any

from pytest_verifygate.cli.exits import EXIT_OK
from pytest_verifygate.cli.request import prepare_from_args
from pytest_verifygate.contract import display_path
from pytest_verifygate.git.pushed import run_in_pushed_commit

if TYPE_CHECKING:
    from pytest_verifygate.engine import Plan


def main(args: argparse.Namespace) -> int:
    with run_in_pushed_commit(args):
        return _show(args)


def _show(args: argparse.Namespace) -> int:
    plan = prepare_from_args(args)
    contract, changes, selections = plan.contract, plan.changes, plan.selections
    warnings: list[str] = []
    rows = listed_gates(plan, warnings)
    for warning in dict.fromkeys(warnings):
        print(f"verifygate: {warning}", file=sys.stderr)
    if args.format == "json":
        payload = {
            "contract": display_path(contract.path),
            "changes": {"source": changes.source, "ref": changes.ref,
                        "count": len(changes.files),
                        **({"detected_by": changes.detected_by} if changes.detected_by else {})},
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
            from pytest_verifygate.commands import command_text

            # Each invocation as a line sh would read alike (more than one: {files} chunked).
            for argv in row["argv"]:
                print(f"  {'':<4}  {'':<{width}}  $ {command_text(argv)}")
    return EXIT_OK


def listed_gates(plan: "Plan", warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per gate in contract order: ``name``, ``selected``, ``runs`` (whether ``run``
    would start it), ``reason``, ``argv`` (the argvs ``run`` would spawn, ``{files}``
    expanded; empty when it spawns none) and the text form's ``mark`` (run, skip, pend).
    What the result cache has to say goes to ``warnings``."""
    planned = {gate_plan.gate.name: gate_plan
               for gate_plan in (plan.gate_plans(warnings) if plan.selected else ())}
    rows: list[dict[str, Any]] = []
    for selection in plan.selections:
        name, reason = selection.gate.name, selection.reason
        gate_plan = planned.get(name)
        mark, runs = ("run", True) if selection.selected else ("skip", False)
        if gate_plan is not None and gate_plan.skip_reason is not None:
            mark, runs, reason = "skip", False, f"{gate_plan.skip_reason} ({reason})"
        elif gate_plan is not None and gate_plan.pending_reason is not None:
            mark, runs, reason = "pend", False, f"{gate_plan.pending_reason} ({reason})"
        elif gate_plan is not None and gate_plan.cache is not None and gate_plan.cache.hit:
            runs, reason = False, f"{reason}; cached: the pass stored for these inputs is reused"
        argv = ([list(invocation) for invocation in gate_plan.invocations]
                if gate_plan is not None and runs else [])
        rows.append({"name": name, "selected": selection.selected, "runs": runs,
                     "reason": reason, "argv": argv, "mark": mark})
    return rows
