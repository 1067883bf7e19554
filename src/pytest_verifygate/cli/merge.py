"""``verifygate merge``: one report, with one verdict, from the JSON reports of every shard of
one run (a gate no shard ran is an error: the verdict would not cover it).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from pytest_verifygate import codes
from pytest_verifygate.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from pytest_verifygate.errors import UsageError, VerifyGateError
from pytest_verifygate.report.model import Report
from pytest_verifygate.report.model import problem as report_problem
from pytest_verifygate.report.outcomes import summary_counts

SHARD_REASON_PREFIX = "in shard "
_SPLIT_HINT = ("the shards split the gates differently: give every shard the same "
               ".git/verifygate/durations.json (see the documentation: Shards and merge)")


def main(args: argparse.Namespace) -> int:
    from pytest_verifygate.cli.request import output_paths, write_outputs
    from pytest_verifygate.contract import find_repo_root
    from pytest_verifygate.git.changes import refuse_tracked_outputs
    from pytest_verifygate.report.document import dumps
    from pytest_verifygate.report.terminal import summary_table, verdict_line
    from pytest_verifygate.state.durations import measured_seconds, record_durations

    refuse_tracked_outputs(output_paths(args), Path.cwd())
    merged, warnings = merge_reports([(path, load_report(path)) for path in args.reports])
    for warning in warnings:
        print(f"verifygate: warning: {warning}", file=sys.stderr)
    root = find_repo_root(Path.cwd())
    if root is not None:  # recorded for the next build's split
        order = [entry["name"] for entry in (*merged["gates"], *merged["not_selected"])]
        record_durations(root, merged["contract"], measured_seconds(merged["gates"]), order)
    here = root or Path.cwd()
    problems = write_outputs(
        args, merged, repo_root=here, project_root=here,
        junit_options=lambda: {"timeouts": _junit_timeouts(merged, root)}).problems
    if args.format == "json":
        sys.stdout.write(dumps(merged))
    else:
        print(f"verifygate: {merged['contract']}: {len(args.reports)} shard report(s) merged, "
              f"{len(merged['gates'])} gate(s) ran")
        if any(gate["outcome"] == codes.FAILED for gate in merged["gates"]):
            from pytest_verifygate.runner.records import result_from_entry

            print(summary_table([result_from_entry(gate) for gate in merged["gates"]]))
        print(verdict_line(merged, report_path=args.json))
    for problem in problems:
        print(f"verifygate: error: {problem}", file=sys.stderr)
    if problems:
        return EXIT_USAGE
    return EXIT_FAILED if merged["verdict"] == codes.VERDICT_FAILED else EXIT_OK


def load_report(path: str) -> Report:
    """A shard's JSON report, every field merge and the sinks read checked where the file
    comes in (it can be anything): ``UsageError``, one line naming the file and key."""
    import json

    def no_constant(name: str) -> object:
        raise ValueError(f"{name} is not a number JSON allows")

    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle, parse_constant=no_constant)
    except OSError as exc:
        raise UsageError(f"cannot read the report {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"{path} is not a JSON report ({exc})") from None
    except RecursionError:
        raise UsageError(f"{path} is not a JSON report (nested too deeply)") from None
    if not (isinstance(report, dict) and report.get("version") == 1):
        raise UsageError(f"{path} is not a verifygate JSON report of version 1 "
                         "(write one with verifygate run --json PATH)")
    shard = report.get("shard")
    if not isinstance(shard, dict):
        raise UsageError(f'{path} is not the report of a shard (no "shard" key): write each '
                         "shard's report with verifygate run --shard K/N --json PATH")
    if "commit" not in shard or "contract_sha256" not in shard:
        raise UsageError(f'{path}: its "shard" does not say which commit and contract it '
                         "checked (a report of an older verifygate): run the shard again")
    problem = _problem(report)
    if problem is None and not 1 <= shard["index"] <= shard["total"]:
        problem = '"shard" is not what a report holds there'
    if problem is not None:
        raise UsageError(f"{path}: {problem}: not a report verifygate wrote (write each "
                         "shard's report with verifygate run --shard K/N --json PATH)")
    return cast("Report", report)


def _problem(report: dict[str, Any]) -> str | None:
    """What is wrong with a report's keys, or None."""
    found = report_problem(report)
    if found is None:
        return None
    where, missing = found
    if len(where) < 3 or where[0] != "gates":
        return f'no "{where[0]}"' if missing else f'"{where[0]}" is not what a report holds there'
    number, key = where[1], where[2]
    if missing:
        return f'gate {number} has no "{key}"'
    gate = report["gates"][int(number) - 1]
    return (f'gate {number} ({str(gate.get("name"))[:60]!r}): "{key}" is '
            f"{_json_type(gate[key])}, not what a report holds there")


def _json_type(value: object) -> str:
    """A JSON value's kind, for a message (never its possibly huge text)."""
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "a list", dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def merge_reports(
    reports: Sequence[tuple[str, Mapping[str, Any]]],
) -> tuple[Report, list[str]]:
    """The merged report of ``(path, report)`` pairs, one per shard, and warnings."""
    _check_one_run(reports)
    warnings: list[str] = []
    ran: dict[str, Mapping[str, Any]] = {}
    reasons: dict[str, dict[int, str]] = {}  # each shard's reason for each gate it did not run
    for path, report in reports:
        for gate in report["gates"]:
            name = gate["name"]
            if name in ran:
                warnings.append(f"gate {name!r} ran in more than one shard ({path} too): "
                                f"{_SPLIT_HINT}")
                if gate.get("outcome") != codes.FAILED:
                    continue  # the merged report keeps the worse result
            ran[name] = gate
        for entry in report["not_selected"]:
            reasons.setdefault(entry["name"], {})[report["shard"]["index"]] = str(
                entry.get("reason") or "not selected")
    first = reports[0][1]
    order: list[str] = first["shard"]["order"]
    position = {name: index for index, name in enumerate(order)}
    gates = sorted(ran.values(), key=lambda gate: position.get(gate["name"], len(position)))
    all_warnings = [warning for _, report in reports for warning in report.get("warnings", [])]
    errors = list(dict.fromkeys(error for _, report in reports
                                for error in report.get("errors", [])))
    merged: dict[str, Any] = {
        "version": 1,
        # A shard's "failed" with no gate failed: fail_when_unverified speaking, or its errors.
        "verdict": codes.verdict_of(
            {gate["outcome"] for gate in gates}, failed=bool(errors),
            unverified_fails=any(report["verdict"] == codes.VERDICT_FAILED
                                 for _, report in reports)),
        "contract": first["contract"],
        "interrupted": any(report.get("interrupted") for _, report in reports),
        "changes": first["changes"],
        "summary": summary_counts((gate["outcome"], gate.get("code")) for gate in gates),
        "gates": gates,
        "not_selected": [{"name": name, "reason": _reason_left_out(name, reasons)}
                         for name in order if name not in ran],
        "warnings": list(dict.fromkeys([*all_warnings, *warnings])),
    }
    if errors:
        merged["errors"] = errors
    return cast("Report", merged), warnings


def _reason_left_out(name: str, reasons: Mapping[str, Mapping[int, str]]) -> str:
    """Why no shard ran gate ``name``: the reason of the shard it was left to, or of every
    shard; ``UsageError`` when that shard left it to yet another (not one split)."""
    by_shard = reasons.get(name, {})
    own = {number: reason for number, reason in by_shard.items()
           if not reason.startswith(SHARD_REASON_PREFIX)}
    for reason in by_shard.values():
        if reason.startswith(SHARD_REASON_PREFIX):
            owner = reason[len(SHARD_REASON_PREFIX):].partition(" ")[0]
            if not owner.isdigit() or int(owner) not in own:
                raise UsageError(f"gate {name!r} ran in no shard, though a shard left it to "
                                 f"another: {_SPLIT_HINT}")
    return next(iter(own.values()), "not selected")


def _check_one_run(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    """``UsageError`` unless the reports are every shard of one split, once each, of one run
    (one commit, contract and change set)."""
    first_path, first = reports[0]
    total = first["shard"]["total"]
    seen: dict[int, str] = {}
    for path, report in reports:
        shard = report["shard"]
        if shard["total"] != total:
            raise UsageError(f"{first_path} is shard {first['shard']['index']} of {total} but "
                             f"{path} is shard {shard['index']} of {shard['total']}: merge the "
                             "shards of one split")
        if shard["index"] in seen:
            raise UsageError(f"shard {shard['index']} of {total} is given twice: "
                             f"{seen[shard['index']]} and {path}")
        seen[shard["index"]] = path
    missing = [str(index) for index in range(1, total + 1) if index not in seen]
    if missing:
        raise UsageError(f"shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} of "
                         f"{total} {'are' if len(missing) > 1 else 'is'} missing (given: "
                         f"{', '.join(str(index) for index in sorted(seen))}): pass every "
                         "shard's report")
    for path, report in reports[1:]:
        for key, what in (("contract", "contracts"), ("changes", "change sets")):
            if report[key] != first[key]:
                raise UsageError(f"{first_path} and {path} are reports of different {what} "
                                 f"({_describe(first[key])} and {_describe(report[key])}): "
                                 "merge the shards of one run")
        shard, other = report["shard"], first["shard"]
        if shard["order"] != other["order"]:
            raise UsageError(f"{first_path} and {path} list different gates for "
                             f"{first['contract']}: the contract changed between the shards")
        name = f"shard {shard['index']} of {shard['total']} ({path})"
        if shard["commit"] != other["commit"]:
            raise UsageError(f"{name} checked commit {_short(shard['commit'])}, shard "
                             f"{other['index']} ({first_path}) {_short(other['commit'])}: "
                             "merge the shards of one commit")
        if shard["contract_sha256"] != other["contract_sha256"]:
            raise UsageError(f"{name} ran another version of the contract than shard "
                             f"{other['index']} ({first_path}) (its text differs): run every "
                             "shard with the same contract")


def _short(commit: object) -> str:
    return str(commit)[:12] if commit else "(no commit)"


def _describe(value: object) -> str:
    if isinstance(value, dict):  # a change set, its shape checked by load_report
        ref = f" {value['ref']}" if value.get("ref") else ""
        return f"{value['source']}{ref} {len(value['files'])} file(s)"
    return str(value)


def _junit_timeouts(merged: Report, root: Path | None) -> dict[str, float]:
    """Each timed-out gate's ``timeout_seconds`` for JUnit's headline, from the contract when
    this repository has it (without, the headline says ``timed out``: nothing is guessed)."""
    from pytest_verifygate import engine

    if root is None or not any(gate.get("code") == codes.TIMEOUT for gate in merged["gates"]):
        return {}
    try:
        return engine.gate_timeouts(root / merged["contract"])
    except (VerifyGateError, OSError):
        return {}
