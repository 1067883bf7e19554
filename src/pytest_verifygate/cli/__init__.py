"""The ``verifygate`` command: ``run``, ``list`` and ``agent-hook`` over the one engine.

Owns argument parsing, exit statuses (0 passed/pending/unverified, 1 a gate failed, 2 contract
or usage error, 130 interrupted), signal handling and choosing the output format. It never
imports pytest: this is what pre-commit and coding agents call, so start-up time matters.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from pytest_verifygate import __version__, options
from pytest_verifygate.signals import Interruptible

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_FLUSH_FAILED = 120  # what Python's own exit gives when flushing stdout fails


# For a coding agent's Stop hook, status 2 means "block and show stderr to the agent": a
# mistyped hook flag must reach the user instead (status 1), never trap the agent.
HOOK_USAGE_STATUS = 1


class _Parser(argparse.ArgumentParser):
    error_status = EXIT_USAGE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # one line, like every usage error here
        self.exit(self.error_status, f"verifygate: error: {message} (see verifygate --help)\n")


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, sized without ``shutil``.

    argparse builds a formatter for every ``add_argument`` and, left to itself, imports
    ``shutil`` (and with it bz2, lzma and zlib) to size it: a few milliseconds of every
    commit's start-up for a width only ``--help`` uses.
    """

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         width if width is not None else _terminal_columns() - 2)


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``: $COLUMNS, else the terminal's, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):  # no stdout at all, or not a terminal
        return 80


def _add_selection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--contract", metavar="PATH",
                        help="the contract file (default: found from the current directory up)")
    parser.add_argument("--role", metavar="R", help="select the gates for this role")
    parser.add_argument("--phase", metavar="N", type=options.positive_int,
                        help="select the gates for this phase")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--staged", action="store_true",
                        help="the change set is the index against HEAD")
    source.add_argument("--changed-from", metavar="REF",
                        help="the change set is everything since merge-base(REF, HEAD)")
    source.add_argument("--files", metavar="F", nargs="+", help="the change set is these files")
    source.add_argument("--files-from", metavar="PATH",
                        help="read the change set from a file (newline- or NUL-separated; - "
                        "for stdin)")
    source.add_argument("--all", action="store_true",
                        help="no change filtering: every gate applies")


COMMANDS = ("run", "list", "agent-hook")


def build_parser(command: str | None = None) -> _Parser:
    """The command line's parser; with ``command``, only that subcommand gets its options.

    Every subcommand is still listed (``--help`` and a mistyped name show them all), but
    building the options of the two that will not run is skipped: argparse's building is
    a noticeable share of a commit's start-up.
    """
    parser = _Parser(prog="verifygate", description="Run the verify contract's gates.")
    parser.add_argument("--version", action="version", version=f"verifygate {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    wanted = COMMANDS if command is None else (command,)

    run = commands.add_parser("run", help="run the selected gates")
    if "run" in wanted:
        _add_run_options(run)
    run.set_defaults(handler=cmd_run)
    listing = commands.add_parser("list", help="show every gate, selected or not, and why")
    if "list" in wanted:
        _add_selection_flags(listing)
        listing.add_argument("--format", choices=("text", "json"), default="text")
    listing.set_defaults(handler=cmd_list)
    hook = commands.add_parser("agent-hook",
                               help="coding-agent Stop hook: block while gates fail")
    hook.error_status = HOOK_USAGE_STATUS
    if "agent-hook" in wanted:
        _add_agent_hook_options(hook)
    hook.set_defaults(handler=cmd_agent_hook)
    return parser


def _add_run_options(run: argparse.ArgumentParser) -> None:
    _add_selection_flags(run)
    run.add_argument("--jobs", type=options.jobs, metavar="N",
                     help="gates run at once (0 = one per CPU; default from the contract)")
    run.add_argument("--json", metavar="PATH", help="write the JSON report here")
    run.add_argument("--format", choices=("text", "json", "agent"), default="text",
                     help="what to print: text (default), the JSON report, or the agent digest")
    run.add_argument("--junit", metavar="PATH",
                     help="write JUnit XML here (what pytest --junitxml writes for the gates)")
    run.add_argument("--annotations", choices=options.ANNOTATION_CHOICES,
                     help="github: print GitHub Actions error annotations for failed gates and "
                     "append a table to $GITHUB_STEP_SUMMARY (default: when GITHUB_ACTIONS is "
                     "true); none: never")
    run.add_argument("--no-cache", action="store_true",
                     help="run gates with cache = true even if they passed on these inputs "
                     "(a pass is still stored)")


def _add_agent_hook_options(hook: argparse.ArgumentParser) -> None:
    hook.add_argument("--max-rounds", type=options.positive_int, default=3, metavar="N",
                      help="failing rounds per session before it stops blocking (default 3)")
    hook.add_argument("--contract", metavar="PATH")
    hook.add_argument("--role", metavar="R")
    hook.add_argument("--changed-from", metavar="REF",
                      help="judge the changes since REF instead of the working tree vs HEAD")
    hook.add_argument("--no-cache", action="store_true",
                      help="run gates with cache = true even if they passed on these inputs")


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    named = arguments[0] if arguments else None
    parser = build_parser(named if named in COMMANDS else None)
    if named == "agent-hook":  # argparse reports stray arguments on the top-level parser
        parser.error_status = HOOK_USAGE_STATUS
    args = parser.parse_args(arguments)
    from pytest_verifygate.errors import VerifyGateError

    try:
        code: int = args.handler(args)
    except VerifyGateError as exc:
        print(f"verifygate: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("verifygate: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


def console_main() -> NoReturn:
    """The ``verifygate`` console script: ``main``, then an exit without interpreter teardown.

    When ``main`` returns, every gate has been waited for, every worker thread joined and
    every file written closed. What is left is the interpreter tearing down the hundred-odd
    modules a run imported, which on a commit's run costs more (about 8 ms) than spawning
    four trivial gates. ``os._exit`` skips it once stdout and stderr are flushed, unless
    something still needs the ordinary exit (see ``_teardown_needed``).
    """
    status = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # the reader went away: nothing is left to deliver
            pass
        except (OSError, ValueError):  # output lost (a full disk): the status says so
            status = status or EXIT_FLUSH_FAILED
    if _teardown_needed():
        sys.exit(status)
    os._exit(status)


def _teardown_needed() -> bool:
    """Whether the interpreter's own exit must run: ``atexit`` handlers were registered
    (coverage, a plugin), a thread is still alive, or a ``verifygate`` plugin was loaded."""
    import atexit
    import threading

    callbacks = getattr(atexit, "_ncallbacks", None)  # CPython's; without it, play safe
    return (callbacks is None or callbacks() > 0 or threading.active_count() > 1
            or "pluggy" in sys.modules)


# --------------------------------------------------------------------------------------------
# shared steps


def _read_files_from(source: str) -> list[str]:
    from pytest_verifygate.errors import UsageError

    try:
        raw = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise UsageError(f"--files-from {source}: {exc.strerror or exc}") from None
    separator = b"\0" if b"\0" in raw else b"\n"
    return [os.fsdecode(item.rstrip(b"\r") if separator == b"\n" else item)
            for item in raw.split(separator) if item.strip()]


def _prepare(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """Load the contract, compute the change set and select the gates."""
    from pytest_verifygate.changes import ChangeRequest, compute_changes
    from pytest_verifygate.contract import load_contract
    from pytest_verifygate.selection import select_gates

    contract = load_contract(args.contract)
    files = args.files
    if args.files_from is not None:
        files = _read_files_from(args.files_from)
    request = ChangeRequest(files=files, staged=args.staged,
                            changed_from=args.changed_from, all=args.all)
    changes = compute_changes(contract.root, request,
                              settings_changed_from=contract.settings.changed_from)
    selections = select_gates(contract, changes, role=args.role, phase=args.phase)
    for warning in (*contract.warnings, *changes.warnings):
        print(f"verifygate: {warning}", file=sys.stderr)
    return contract, changes, selections


def plugin_hook() -> Any | None:
    """A pluggy hook relay with our hookspecs and the plugins of the ``verifygate`` group.

    None when no installed distribution registers such a plugin: nothing could implement a
    hook, so neither pluggy nor the plugins are imported (this is every commit's start-up).
    """
    if not _entry_point_group_installed(PLUGIN_GROUP):
        return None
    import pluggy

    from pytest_verifygate import hookspecs

    manager = pluggy.PluginManager("pytest")
    manager.add_hookspecs(hookspecs)
    manager.load_setuptools_entrypoints(PLUGIN_GROUP)
    return manager.hook


PLUGIN_GROUP = "verifygate"


def _entry_point_group_installed(group: str) -> bool:
    """Whether any installed distribution declares an entry point in ``group``.

    Loading entry points parses every distribution's metadata (tens of milliseconds, on every
    commit and every agent stop); a plain text scan of the ``entry_points.txt`` files answers
    the usual "none" far cheaper. A false positive only costs the full scan.
    """
    header = f"[{group}]"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(entry or ".", name, "entry_points.txt"),
                          encoding="utf-8", errors="replace") as handle:
                    if header in handle.read():
                        return True
            except OSError:
                continue
    return False


def _write_junit(path: str, report: dict[str, Any], contract: Any, started: float,
                 seconds: float) -> list[str]:
    """Write the JUnit XML; a problem to report (exit status 2) instead of a traceback."""
    from pytest_verifygate.report.junit import write_junit

    try:
        write_junit(path, report, suite_seconds=seconds, started_at=started,
                    timeouts={gate.name: gate.timeout_seconds for gate in contract.gates})
    except OSError as exc:
        return [f"cannot write the JUnit file {path}: {exc.strerror or exc}"]
    return []


def _github_outputs(report: dict[str, Any], contract: Any, stream: Any) -> None:
    """GitHub Actions: error annotations for failed gates, and the step summary."""
    from pytest_verifygate.report.github import github_outputs

    lines, warnings = github_outputs(report, os.environ, repo_root=contract.repo_root,
                                     project_root=contract.root)
    for line in lines:
        print(line, file=stream)
    for warning in warnings:
        print(f"verifygate: warning: {warning}", file=sys.stderr)
    stream.flush()


# --------------------------------------------------------------------------------------------
# commands


def cmd_run(args: argparse.Namespace) -> int:
    import time

    from pytest_verifygate.api import to_report
    from pytest_verifygate.contract import display_path
    from pytest_verifygate.engine import VERDICT_FAILED, run_gates
    from pytest_verifygate.report import dumps, write_report
    from pytest_verifygate.report.console import Progress, run_summary

    started, clock = time.time(), time.monotonic()
    problems: list[str] = []
    with Interruptible():
        contract, changes, selections = _prepare(args)
        selected = [s for s in selections if s.selected]
        text = args.format == "text"
        stream = sys.stdout if text else sys.stderr
        live = stream.isatty()
        if text:
            print(f"verifygate: {display_path(contract.path)}: {len(selected)} of "
                  f"{len(selections)} gate(s) selected (changes: {changes.describe()})")
        progress = Progress(stream, [s.gate.name for s in selected], live=live)
        quiet = not text and not live
        hook = plugin_hook()
        run = run_gates(
            contract, selections, changes, jobs=args.jobs, hook=hook,
            on_started=None if quiet else progress.started,
            on_finished=None if quiet else progress.finished,
            read_cache=not args.no_cache,
        )
        progress.close()
        report = to_report(run, hook)
        if args.json:
            try:
                write_report(args.json, report)
            except OSError as exc:
                problems.append(f"cannot write the JSON report {args.json}: "
                                f"{exc.strerror or exc}")
        if args.junit:
            problems += _write_junit(args.junit, report, contract, started,
                                     time.monotonic() - clock)
    verdict = report["verdict"]
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
    return EXIT_FAILED if verdict == VERDICT_FAILED else EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    from pytest_verifygate.contract import display_path

    contract, changes, selections = _prepare(args)
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
    selected = sum(1 for s in selections if s.selected)
    print(f"verifygate: {display_path(contract.path)}: {selected} of {len(selections)} gate(s) "
          f"selected (changes: {changes.describe()})")
    for s in selections:
        mark = "run " if s.selected else "skip"
        print(f"  {mark}  {s.gate.name:<{width}}  {s.reason}")
    return EXIT_OK


def cmd_agent_hook(args: argparse.Namespace) -> int:
    from pytest_verifygate.agents.stop_hook import run_agent_hook

    status: int = run_agent_hook(args)
    return status
