"""The JSON report (docs: JSON report), which every other form is made from: building it, and
writing it atomically.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_verifygate import codes
from pytest_verifygate.contract import Contract, Gate, posix_relative
from pytest_verifygate.git.changes import ChangeSet
from pytest_verifygate.gitcmd import head_commit
from pytest_verifygate.report.outcomes import summary_counts
from pytest_verifygate.report.redact import Redactor, gate_environment, redactor_for
from pytest_verifygate.runner.records import GateResult
from pytest_verifygate.selection import Selection
from pytest_verifygate.state.storage import write_output

if TYPE_CHECKING:
    from pytest_verifygate.report.model import ChangesEntry, GateEntry, Report, Shard

REPORT_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("report.schema.json")


def gate_entry(result: GateResult, contract: Contract | None, redactor: Redactor) -> GateEntry:
    """One gate's report entry, with secret values masked."""
    gate: Gate | None = None
    if contract is not None:
        with contextlib.suppress(KeyError):
            gate = contract.gate(result.name)
    # The report leaves the machine: every free-text field goes through the redactor.
    entry: GateEntry = {
        "name": result.name,
        "outcome": result.outcome,
        "code": result.code if result.outcome == codes.FAILED else None,
        "command": [redactor.text(word) for word in result.command],
        "cwd": result.cwd,
        "exit_code": result.exit_code,
        "signal": result.signal,
        "duration_s": round(result.duration_s, 3),
        "attempts": result.attempts,
        "output_tail": result.output_tail,  # masked as it was captured
        "output_truncated": result.output_truncated,
        "output_bytes": result.output_bytes,
        "log_path": result.log_path,
        "flaky": result.flaky,
        "cached": result.cached,
    }
    if result.reason is not None:
        entry["reason"] = redactor.text(result.reason)
    if result.modified_files:
        entry["modified_files"] = list(result.modified_files)
    if gate is not None:
        entry["kind"] = gate.kind
        entry["category"] = gate.category
        entry["roles"] = list(gate.roles) if gate.roles is not None else None
        entry["needs"] = list(gate.needs)
        entry["exclusive"] = gate.exclusive
        entry["env"] = redactor.env(gate_environment(gate))
    return entry


def build_report(*, contract: Contract, changes: ChangeSet, selections: Sequence[Selection],
                 results: Sequence[GateResult], verdict: codes.Verdict,
                 interrupted: bool = False, redactor: Redactor | None = None) -> Report:
    """The report of the selected gates' ``results`` (in any order)."""
    order = {gate.name: index for index, gate in enumerate(contract.gates)}
    ordered = sorted(results, key=lambda result: order.get(result.name, len(order)))
    summary = summary_counts((result.outcome, result.code) for result in ordered)
    if redactor is None:
        redactor = redactor_for(contract.gates)
    changed: ChangesEntry = {"source": changes.source, "ref": changes.ref,
                             "files": list(changes.files)}
    if changes.detected_by:
        changed["detected_by"] = changes.detected_by
    return {
        "version": REPORT_VERSION,
        "verdict": verdict,
        "contract": posix_relative(contract.path, contract.repo_root),
        "interrupted": interrupted,
        "changes": changed,
        "summary": summary,
        "gates": [gate_entry(result, contract, redactor) for result in ordered],
        "not_selected": [
            {"name": s.gate.name, "reason": s.reason} for s in selections if not s.selected
        ],
        "warnings": [*contract.warnings, *changes.warnings],
    }


def shard_entry(contract: Contract, index: int, total: int) -> Shard:
    """The report's ``shard``; ``verifygate merge`` refuses shards whose commit or contract
    text differ."""
    import hashlib

    # None before the first commit; any other git failure raises: a shard whose commit is
    # unknown must never pass for a shard of the same run as another.
    commit = head_commit(contract.repo_root)
    return {
        "index": index,
        "total": total,
        "order": [gate.name for gate in contract.gates],
        "commit": commit,
        "contract_sha256": hashlib.sha256(contract.text.encode("utf-8", "surrogatepass")
                                          ).hexdigest(),
    }


def dumps(report: Report) -> str:
    """The report as JSON text (file names that are not valid UTF-8 stay escaped)."""
    import json  # only when a report is printed or written: not on a commit's run

    return json.dumps(report, indent=2, ensure_ascii=True) + "\n"


def write_report(path: str | os.PathLike[str], report: Report) -> None:
    """Write the report atomically: a reader sees the old file or the whole new one."""
    write_output(path, dumps(report))


def load_schema() -> dict[str, Any]:
    import json

    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema
