"""``verifygate merge``: one report, with one verdict, from the JSON reports of every shard of
one run (a gate no shard ran is an error: the verdict would not cover it).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from pytest_verifygate import codes
from pytest_verifygate.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from pytest_verifygate.errors import UsageError
from pytest_verifygate.report.words import summary_counts

if TYPE_CHECKING:
    from pytest_verifygate.report.model import Report

SHARD_REASON_PREFIX = "in shard "
_SPLIT_HINT = ("the shards split the gates differently: give every shard the same "
               ".git/verifygate/durations.json (see the documentation: Shards and merge)")


def main(args: argparse.Namespace) -> int:
    from pytest_verifygate.cli.request import output_paths
    from pytest_verifygate.contract import find_repo_root
    from pytest_verifygate.git.changes import refuse_tracked_outputs
    from pytest_verifygate.report.document import dumps
    from pytest_verifygate.report.terminal import verdict_line
    from pytest_verifygate.state.durations import measured_seconds, record_durations

    refuse_tracked_outputs(output_paths(args), Path.cwd())
    merged, warnings = merge_reports([(path, load_report(path)) for path in args.reports])
    for warning in warnings:
        print(f"verifygate: warning: {warning}", file=sys.stderr)
    root = find_repo_root(Path.cwd())
    if root is not None:  # recorded for the next build's split
        order = [entry["name"] for entry in (*merged["gates"], *merged["not_selected"])]
        said: list[str] = []  # what was recorded before could not be read
        record_durations(root, merged["contract"], measured_seconds(merged["gates"]), order,
                         said)
        for warning in said:
            print(f"verifygate: {warning}", file=sys.stderr)
    problems: list[str] = []
    if args.json or args.junit:
        from pytest_verifygate.cli.request import write_outputs

        problems, _ = write_outputs(
            args, merged, junit_options=lambda: {"timeouts": _junit_timeouts(merged, root)})
    if args.format == "json":
        sys.stdout.write(dumps(merged))
    else:
        print(f"verifygate: {merged['contract']}: {len(args.reports)} shard report(s) merged, "
              f"{len(merged['gates'])} gate(s) ran")
        if any(gate["outcome"] == codes.FAILED for gate in merged["gates"]):
            from pytest_verifygate.report.terminal import summary_table
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
    problem = _report_problem(report)
    if problem is not None:
        raise UsageError(f"{path}: {problem}: not a report verifygate wrote (write each "
                         "shard's report with verifygate run --shard K/N --json PATH)")
    shard = report.get("shard")
    if not isinstance(shard, dict):
        raise UsageError(f'{path} is not the report of a shard (no "shard" key): write each '
                         "shard's report with verifygate run --shard K/N --json PATH")
    index, total, order = shard.get("index"), shard.get("total"), shard.get("order")
    if not (_is_int(index) and _is_int(total) and 1 <= index <= total
            and _is_list_of(order, str)):
        raise UsageError(f'{path}: its "shard" is not {{"index": K, "total": N, "order": '
                         "[gate names]}} with 1 <= K <= N")
    commit, digest = shard.get("commit"), shard.get("contract_sha256")
    if not (isinstance(digest, str) and len(digest) == 64 and "commit" in shard
            and (commit is None or isinstance(commit, str))):
        raise UsageError(f'{path}: its "shard" does not say which commit and contract it '
                         "checked (a report of an older verifygate): run the shard again")
    return cast("Report", report)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_count(value: object) -> bool:
    return _is_int(value) and value >= 0


def _is_list_of(value: object, kind: type) -> bool:
    return isinstance(value, list) and all(isinstance(item, kind) for item in value)


# What each key must be (report.schema.json); NaN and infinity were refused on reading.
_GATE_KEYS: dict[str, Callable[[object], bool]] = {
    "name": lambda value: isinstance(value, str),
    "outcome": lambda value: value in codes.OUTCOMES,
    "code": lambda value: value is None or value in codes.CODES,
    "command": lambda value: _is_list_of(value, str),
    "cwd": lambda value: isinstance(value, str),
    "exit_code": lambda value: value is None or _is_int(value),
    "signal": lambda value: value is None or _is_int(value),
    "duration_s": lambda value: _is_count(value) or (isinstance(value, float) and value >= 0),
    "attempts": _is_count,
    "output_tail": lambda value: isinstance(value, str),
    "output_truncated": lambda value: isinstance(value, bool),
    "output_bytes": _is_count,
    "log_path": lambda value: value is None or isinstance(value, str),
    "flaky": lambda value: isinstance(value, bool),
    "cached": lambda value: isinstance(value, bool),
    "reason": lambda value: isinstance(value, str),
}
_GATE_REQUIRED = ("name", "outcome", "code", "command", "cwd", "exit_code", "signal",
                  "duration_s", "attempts", "output_tail", "output_truncated")
_REPORT_KEYS: dict[str, Callable[[object], bool]] = {
    "verdict": lambda value: value in (codes.VERDICT_PASSED, codes.VERDICT_FAILED,
                                       codes.VERDICT_PENDING, codes.VERDICT_UNVERIFIED),
    "contract": lambda value: isinstance(value, str),
    "changes": lambda value: isinstance(value, dict) and isinstance(value.get("source"), str)
    and _is_list_of(value.get("files"), str)
    and (value.get("ref") is None or isinstance(value.get("ref"), str)),
    "gates": lambda value: _is_list_of(value, dict),
    "not_selected": lambda value: isinstance(value, list) and all(
        isinstance(item, dict) and isinstance(item.get("name"), str)
        and isinstance(item.get("reason", ""), str) for item in value),
}


def _report_problem(report: Mapping[str, Any]) -> str | None:
    """What is wrong with a report's keys, or None."""
    for key, check in _REPORT_KEYS.items():
        if key not in report:
            return f'no "{key}"'
        if not check(report[key]):
            return f'"{key}" is not what a report holds there'
    if not _is_list_of(report.get("warnings", []), str):
        return '"warnings" is not a list of strings'
    if not isinstance(report.get("interrupted", False), bool):
        return '"interrupted" is not true or false'
    for number, gate in enumerate(report["gates"], 1):
        for key in _GATE_REQUIRED:
            if key not in gate:
                return f'gate {number} has no "{key}"'
        for key, check in _GATE_KEYS.items():
            if key in gate and not check(gate[key]):
                return f'gate {number} ({str(gate.get("name"))[:60]!r}): "{key}" is ' \
                       f"{_json_type(gate[key])}, not what a report holds there"
    return None


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
    merged: dict[str, Any] = {
        "version": 1,
        "verdict": merged_verdict(gates, [report["verdict"] for _, report in reports]),
        "contract": first["contract"],
        "interrupted": any(report.get("interrupted") for _, report in reports),
        "changes": first["changes"],
        "summary": summary_counts((gate["outcome"], gate.get("code")) for gate in gates),
        "gates": gates,
        "not_selected": [{"name": name, "reason": _reason_left_out(name, reasons)}
                         for name in order if name not in ran],
        "warnings": list(dict.fromkeys([*all_warnings, *warnings])),
    }
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


def merged_verdict(gates: Sequence[Mapping[str, Any]], verdicts: Sequence[str]) -> str:
    """failed > pending > unverified > passed over every shard's gates; with no gate passed,
    a shard's ``failed`` verdict is ``fail_when_unverified`` speaking: failed too."""
    outcomes = {gate.get("outcome") for gate in gates}
    if codes.FAILED in outcomes:
        return codes.VERDICT_FAILED
    if codes.PENDING in outcomes:
        return codes.VERDICT_PENDING
    if codes.PASSED in outcomes:
        return codes.VERDICT_PASSED
    return codes.VERDICT_FAILED if codes.VERDICT_FAILED in verdicts else codes.VERDICT_UNVERIFIED


def _describe(value: object) -> str:
    if isinstance(value, dict):  # a change set, its shape checked by load_report
        ref = f" {value['ref']}" if value.get("ref") else ""
        return f"{value['source']}{ref} {len(value['files'])} file(s)"
    return str(value)


def _junit_timeouts(merged: Report, root: Path | None) -> dict[str, float]:
    """Each timed-out gate's ``timeout_seconds`` for JUnit's headline, from the contract when
    this repository has it (without, the headline says ``timed out``: nothing is guessed)."""
    from pytest_verifygate import engine
    from pytest_verifygate.errors import VerifyGateError

    if root is None or not any(gate.get("code") == codes.TIMEOUT for gate in merged["gates"]):
        return {}
    try:
        return engine.gate_timeouts(root / merged["contract"])
    except (VerifyGateError, OSError):
        return {}
