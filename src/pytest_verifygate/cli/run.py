"""``verifygate run``: run the selected gates, print progress and the outcome, write reports.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_verifygate import codes, option_checks
from pytest_verifygate.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from pytest_verifygate.cli.request import output_paths, prepare_from_args, write_outputs
from pytest_verifygate.contract import display_path
from pytest_verifygate.git.changes import ChangeRequest
from pytest_verifygate.git.set_aside import set_aside_for
from pytest_verifygate.signals import Interruptible

if TYPE_CHECKING:
    import argparse

    from pytest_verifygate.engine import Plan
    from pytest_verifygate.report.github import CommandStop
    from pytest_verifygate.report.model import Report


def main(args: argparse.Namespace) -> int:
    if not option_checks.github_annotations(args.annotations, os.environ):
        return _main(args, None)
    from pytest_verifygate.report.github import CommandStop

    # Gate output, file and gate names are not ours: GitHub honours no workflow command in
    # them (resumed for our annotations; json and agent output on stdout are made inert).
    with CommandStop.on_stream(sys.stdout if args.format == "text" else sys.stderr) as stop:
        return _main(args, stop)


def _main(args: argparse.Namespace, stop: CommandStop | None) -> int:
    from pytest_verifygate import engine
    from pytest_verifygate.plugins import plugin_hook
    from pytest_verifygate.report.document import dumps
    from pytest_verifygate.report.terminal import Progress, color_wanted, run_summary

    started, clock = time.time(), time.monotonic()
    # A commit's or a push's check: the gates see the work tree as the commit records it.
    changes = ChangeRequest(files=[] if args.files_from else args.files, staged=args.staged,
                            changed_from=args.changed_from, all=args.all,
                            outputs=output_paths(args))
    with Interruptible() as guard, set_aside_for(changes, Path.cwd(), _say) as aside:
        plan = prepare_from_args(args, jobs=args.jobs, read_cache=not args.no_cache,
                                 work_set_aside=aside is not None)
        contract, selected = plan.contract, plan.selected
        hook = plugin_hook(contract)  # a plugin that cannot load stops here, before any output
        text = args.format == "text"
        stream = sys.stdout if text else sys.stderr
        live = stream.isatty()
        # Only the text lines are colored: JSON and the agent digest on stdout never are.
        color = color_wanted(args.color, stream, os.environ)
        if text:
            print(f"verifygate: {display_path(contract.path)}: {len(selected)} of "
                  f"{len(plan.selections)} gate(s) selected "
                  f"(changes: {plan.changes.describe()})")
        progress = Progress(stream, [s.gate.name for s in selected], live=live, color=color)
        quiet = not text and not live
        run = engine.run(plan, hook=hook,
                         on_started=None if quiet else progress.started,
                         on_finished=None if quiet else progress.finished)
        progress.close()
        if aside is not None:  # before the report: what it checked, then the work put back
            run = run._replace(errors=tuple(aside.finish()))
        for error in run.errors:
            print(f"verifygate: error: {error}", file=sys.stderr)
        for warning in run.warnings:
            print(f"verifygate: {warning}", file=sys.stderr)
        report = engine.report(run, hook)
        timeouts = {gate.name: gate.timeout_seconds for gate in contract.gates}
        seconds = time.monotonic() - clock
        written = write_outputs(
            args, report, {*plan.warnings, *run.warnings}, repo_root=contract.repo_root,
            project_root=contract.root, hook=hook, github=stop is not None,
            junit_options=lambda: _junit_options(plan, report, timeouts, started, seconds))
    if args.format == "json":
        sys.stdout.write(stop.inert_json(dumps(report)) if stop else dumps(report))
    elif args.format == "agent":
        from pytest_verifygate.report.digest import to_digest

        digest = to_digest(report, root=str(contract.repo_root))
        sys.stdout.write(stop.inert_text(digest) if stop else digest)
    else:
        fold = None
        if stop is not None:  # in GitHub Actions, each failed gate's output folded in the log
            from pytest_verifygate.report.github import folded

            fold = partial(folded, stop=stop)
        sys.stdout.write(run_summary(report, run.results, root=contract.repo_root,
                                     report_path=written.report_path, color=color,
                                     timeouts=timeouts, fold=fold))
    sys.stdout.flush()
    if stop is not None:  # the annotations, on stdout where GitHub reads them (but the report)
        stop.resume()
        for line in written.annotations:
            print(line, file=stream)
        stream.flush()
    for warning in written.warnings:
        print(f"verifygate: warning: {warning}", file=sys.stderr)
    for problem in written.problems:
        print(f"verifygate: error: {problem}", file=sys.stderr)
    if written.problems:
        return EXIT_USAGE
    if run.interrupted or guard.fired:  # fired: a signal held while the report was written
        print("verifygate: interrupted; unfinished gates are marked interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_FAILED if report["verdict"] == codes.VERDICT_FAILED else EXIT_OK


def _say(line: str) -> None:
    print(f"verifygate: {line}", file=sys.stderr)


def _junit_options(plan: Plan, report: Report, timeouts: Mapping[str, float], started: float,
                   seconds: float) -> dict[str, Any]:
    """JUnit's cases are what pytest's would be: the selected gates, and the gates left out
    because nothing they watch changed as skipped cases, in contract order, under their item
    names."""
    from pytest_verifygate.item_names import item_names
    from pytest_verifygate.report.junit import unchanged_entry
    from pytest_verifygate.selection import BY_CHANGES

    entries = {gate["name"]: gate for gate in report["gates"]}
    cases = [entries[s.gate.name] if s.gate.name in entries else
             unchanged_entry(s.gate.name, s.reason)
             for s in plan.selections if s.gate.name in entries or s.left_out_by == BY_CHANGES]
    return {"suite_seconds": seconds, "started_at": started, "timeouts": timeouts,
            "cases": cases, "names": item_names(gate.name for gate in plan.contract.gates)}
