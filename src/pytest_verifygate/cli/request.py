"""What ``run``, ``list`` and ``merge`` share: the selection flags as the engine's
``RunRequest``, and the report files they write.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_verifygate.engine import Plan, RunRequest, prepare
from pytest_verifygate.errors import UsageError
from pytest_verifygate.git.changes import ChangeRequest
from pytest_verifygate.selection import asked_roles
from pytest_verifygate.shards import requested_shard

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Collection

    from pytest_verifygate.hookspecs import GateHooks
    from pytest_verifygate.report.model import Report
    from pytest_verifygate.report.writers import Written


def prepare_from_args(args: argparse.Namespace, *, jobs: int | None = None,
                      read_cache: bool = True, work_set_aside: bool = False) -> Plan:
    """The engine's plan for these flags (``work_set_aside``: by this run, for a commit's
    check); its warnings are printed on stderr."""
    files = args.files
    if args.files_from is not None:
        files = read_files_from(args.files_from)
    changes = ChangeRequest(files=files, staged=args.staged, changed_from=args.changed_from,
                            all=args.all, outputs=output_paths(args))
    try:
        plan = prepare(RunRequest(contract=args.contract, changes=changes,
                                  role=asked_roles(args.role, os.environ), phase=args.phase,
                                  jobs=jobs, read_cache=read_cache,
                                  shard=requested_shard(args.shard, os.environ),
                                  names=tuple(dict.fromkeys(getattr(args, "names", None) or ())),
                                  work_set_aside=work_set_aside))
    except UsageError:  # a named file that does not exist: perhaps a gate
        if args.files:
            _refuse_gate_names_as_files(args)
        raise
    for warning in plan.warnings:
        print(f"verifygate: {warning}", file=sys.stderr)
    return plan


def _refuse_gate_names_as_files(args: argparse.Namespace) -> None:
    """``--files`` takes every word after it: a gate's name there that is no file is said to
    be a gate, with both ways to name it."""
    plan = prepare(RunRequest(contract=args.contract, changes=ChangeRequest(all=True)))
    names = {gate.name for gate in plan.contract.gates}
    for word in args.files:
        if word in names and not os.path.lexists(word):
            raise UsageError(f"--files {word}: {word!r} is a gate, not a file: name gates "
                             f"before --files (verifygate {args.command} {word} --files ...), "
                             "or after the files and -- (--files F... -- NAME)")


def output_paths(args: argparse.Namespace) -> list[str]:
    """The files this command writes (``--json``, ``--junit``): never changes themselves."""
    return [path for path in (getattr(args, "json", None), getattr(args, "junit", None))
            if path]


def write_outputs(args: argparse.Namespace, report: Report, said: Collection[str] = (), *,
                  repo_root: Path, project_root: Path, hook: GateHooks | None = None,
                  github: bool = False, junit_options: Callable[[], dict[str, Any]] = dict,
                  ) -> Written:
    """Write ``--json`` and ``--junit`` (and with ``github``, GitHub's step files) and remember
    the files (not changes for the next run while unedited)."""
    from pytest_verifygate.notices import collecting
    from pytest_verifygate.report.writers import Targets, write_all
    from pytest_verifygate.state.outputs import remember_outputs

    targets = Targets(json=args.json, junit=args.junit, junit_family=args.junit_family,
                      github=github)
    written = write_all(report, targets, repo_root=repo_root, project_root=project_root,
                        hook=hook, junit_options=junit_options)
    with collecting() as found:
        remember_outputs(output_paths(args))
    for warning in found:
        if warning not in said:
            print(f"verifygate: {warning}", file=sys.stderr)
    return written


def read_files_from(source: str) -> list[str]:
    """``--files-from``: newline- or NUL-separated paths from a file, or stdin for ``-``."""
    try:
        raw = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise UsageError(f"--files-from {source}: {exc.strerror or exc}") from None
    separator = b"\0" if b"\0" in raw else b"\n"
    return [os.fsdecode(item.rstrip(b"\r") if separator == b"\n" else item)
            for item in raw.split(separator) if item.strip()]
