"""``verifygate run``: run the selected gates, print progress and the outcome, write reports."""

import argparse
import os
import sys
import time
from typing import Any, TextIO

from pytest_verifygate import codes, options
from pytest_verifygate.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from pytest_verifygate.cli.request import prepare_from_args
from pytest_verifygate.contract import Contract, display_path
from pytest_verifygate.signals import Interruptible


def main(args: argparse.Namespace) -> int:
    from pytest_verifygate import engine
    from pytest_verifygate.plugins import plugin_hook
    from pytest_verifygate.report.console import Progress, run_summary
    from pytest_verifygate.report.document import dumps, write_report

    started, clock = time.time(), time.monotonic()
    problems: list[str] = []
    with Interruptible():
        plan = prepare_from_args(args, jobs=args.jobs, read_cache=not args.no_cache)
        contract, selected = plan.contract, plan.selected
        text = args.format == "text"
        stream = sys.stdout if text else sys.stderr
        live = stream.isatty()
        if text:
            print(f"verifygate: {display_path(contract.path)}: {len(selected)} of "
                  f"{len(plan.selections)} gate(s) selected "
                  f"(changes: {plan.changes.describe()})")
        progress = Progress(stream, [s.gate.name for s in selected], live=live)
        quiet = not text and not live
        hook = plugin_hook()
        run = engine.run(plan, hook=hook,
                         on_started=None if quiet else progress.started,
                         on_finished=None if quiet else progress.finished)
        progress.close()
        report = engine.report(run, hook)
        if args.json:
            try:
                write_report(args.json, report)
            except OSError as exc:
                problems.append(f"cannot write the JSON report {args.json}: "
                                f"{exc.strerror or exc}")
        if args.junit:
            problems += _write_junit(args.junit, report, contract, started,
                                     time.monotonic() - clock)
    if args.format == "json":
        sys.stdout.write(dumps(report))
    elif args.format == "agent":
        from pytest_verifygate.report.digest import to_digest

        sys.stdout.write(to_digest(report, root=str(contract.repo_root)))
    else:
        sys.stdout.write(run_summary(report, run.results, root=contract.repo_root,
                                     report_path=args.json))
    sys.stdout.flush()
    if options.github_annotations(args.annotations, os.environ):
        # On stdout where GitHub reads workflow commands, unless stdout is the report/digest.
        _github_outputs(report, contract, stream)
    for problem in problems:
        print(f"verifygate: error: {problem}", file=sys.stderr)
    if problems:
        return EXIT_USAGE
    if run.interrupted:
        print("verifygate: interrupted; unfinished gates are marked interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_FAILED if report["verdict"] == codes.VERDICT_FAILED else EXIT_OK


def _write_junit(path: str, report: dict[str, Any], contract: Contract, started: float,
                 seconds: float) -> list[str]:
    """Write the JUnit XML; a problem to report (exit status 2) instead of a traceback."""
    from pytest_verifygate.report.junit import write_junit

    try:
        write_junit(path, report, suite_seconds=seconds, started_at=started,
                    timeouts={gate.name: gate.timeout_seconds for gate in contract.gates})
    except OSError as exc:
        return [f"cannot write the JUnit file {path}: {exc.strerror or exc}"]
    return []


def _github_outputs(report: dict[str, Any], contract: Contract, stream: TextIO) -> None:
    """GitHub Actions: error annotations for failed gates, and the step summary."""
    from pytest_verifygate.report.github import github_outputs

    lines, warnings = github_outputs(report, os.environ, repo_root=contract.repo_root,
                                     project_root=contract.root)
    for line in lines:
        print(line, file=stream)
    for warning in warnings:
        print(f"verifygate: warning: {warning}", file=sys.stderr)
    stream.flush()
