"""What the MCP server's tools do, without the MCP SDK. Every call reads the contract again;
gates are asked for by name, never run as commands.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_verifygate import codes, engine
from pytest_verifygate.contract import posix_relative
from pytest_verifygate.engine import Plan, RunRequest
from pytest_verifygate.errors import UsageError
from pytest_verifygate.git.changes import ChangeRequest
from pytest_verifygate.notices import Notices, collecting
from pytest_verifygate.report.digest import gate_digest, to_digest
from pytest_verifygate.report.outcomes import flaky_note, outcome_counts
from pytest_verifygate.selection import asked_roles

if TYPE_CHECKING:
    from pytest_verifygate.hookspecs import GateHooks
    from pytest_verifygate.report.model import Report
    from pytest_verifygate.runner.records import GateResult
    from pytest_verifygate.runner.scheduler import GateRunner

NOT_ASKED_FOR = "not among the gates asked for"
EXPLAIN_BYTES = 16384  # one gate's explanation: a whole digest's worth of its output's end


class Answer(NamedTuple):
    """A tool's answer: text for the agent, and the same as data (structured content)."""

    text: str
    data: Mapping[str, Any]
    is_error: bool = False


class GateTools:
    """The tools of one server: its repository, contract, last report and the runs going."""

    def __init__(self, root: Path, contract: str | None = None) -> None:
        self.root = root
        self.contract = contract
        self.last_report: Report | None = None
        self.running: set[GateRunner] = set()

    def close_all(self) -> None:
        """Cancel and wait for every run still going (the server is stopping)."""
        for runner in list(self.running):
            runner.cancel()
        for runner in list(self.running):
            runner.close()

    def plan(self, *, names: Sequence[str] | None = None, roles: Sequence[str] | None = None,
             changed_only: bool = True, changed_from: str | None = None) -> Plan:
        """The engine's plan for a call; with ``names``, only those gates stay selected."""
        if not changed_only:
            changes = ChangeRequest(all=True)
        elif changed_from:
            changes = ChangeRequest(changed_from=changed_from)
        else:
            changes = ChangeRequest(worktree=True)
        plan = engine.prepare(RunRequest(contract=self.contract, start=self.root, changes=changes,
                                  role=asked_roles(roles, os.environ)))
        if not names:
            return plan
        known = [gate.name for gate in plan.contract.gates]
        unknown = [name for name in names if name not in known]
        if unknown:
            raise UsageError(f"no gate named {', '.join(map(repr, unknown))} in "
                             f"{_contract_name(plan)}; its gates: {', '.join(known)}")
        wanted = set(names)
        return plan._replace(selections=tuple(
            selection._replace(selected=False, reason=NOT_ASKED_FOR)
            if selection.selected and selection.gate.name not in wanted else selection
            for selection in plan.selections))

    def list_gates(self, plan: Plan) -> Answer:
        """Every gate: whether it applies to the change, and why."""
        rows = engine.listed_gates(plan)
        changes = plan.changes
        head = (f"{_contract_name(plan)}: {len(plan.selected)} of {len(plan.selections)} "
                f"gate(s) apply (changes: {changes.describe()})")
        lines = [head, *(f"- {row['mark']} {row['name']}: {row['reason']}" for row in rows)]
        data = {"contract": _contract_name(plan),
                "changes": {"source": changes.source, "ref": changes.ref,
                            "files": list(changes.files)},
                "gates": [{key: row[key] for key in ("name", "selected", "runs", "reason")}
                          for row in rows]}
        return Answer("\n".join(lines) + "\n", data)

    def finish(self, plan: Plan, results: Sequence[GateResult], hook: GateHooks | None,
               notices: Notices | None = None) -> Report:
        """The JSON report of a finished run (``notices``: what it said), remembered for
        ``explain_failure``."""
        run = engine.RunResult(plan.contract, plan.changes, plan.selections, tuple(results))
        with collecting(notices) as found:
            engine.record(run)
        run = run._replace(warnings=tuple(found))
        self.last_report = engine.report(run, hook)
        return self.last_report

    def run_answer(self, plan: Plan, report: Report, names: Sequence[str] | None = None) -> Answer:
        """The verdict, each gate's outcome and code, and the agent digest."""
        lines = [f"verdict: {report['verdict']} ({outcome_counts(report['summary'])})"]
        for gate in report["gates"]:
            code = f" [{gate['code']}]" if gate.get("code") else ""
            reason = f" ({gate['reason']})" if gate.get("reason") else ""
            flaky = f" ({flaky_note(gate)})" if gate.get("flaky") else ""
            lines.append(f"- {gate['name']}: {gate['outcome']}{code}{reason}{flaky}")
        ran = {gate["name"] for gate in report["gates"]}
        for selection in plan.selections:
            if names and selection.gate.name in names and selection.gate.name not in ran:
                lines.append(f"- {selection.gate.name}: not run: {selection.reason}")
        lines.extend(f"- {warning}" for warning in report["warnings"])
        digest = to_digest(report, root=str(plan.contract.repo_root))
        return Answer("\n".join(lines) + "\n\n" + digest, report)

    def explain(self, name: str, report: Report, root: Path, source: str) -> Answer:
        """One gate's classified failure and the end of its output, from ``report``."""
        entry = next((gate for gate in report["gates"] if gate["name"] == name), None)
        if entry is None:
            reason = next((item["reason"] for item in report.get("not_selected", [])
                           if item["name"] == name), "it was not selected")
            return Answer(f"gate `{name}` did not run ({source}): {reason}. Pass "
                          "changed_only=false to run it whatever changed.\n",
                          {"name": name, "ran": False, "reason": reason})
        if entry["outcome"] != codes.FAILED:
            why = f": {entry['reason']}" if entry.get("reason") else ""
            return Answer(f"gate `{name}` {entry['outcome']} ({source}){why}: nothing to "
                          "explain.\n", entry)
        text = gate_digest(entry, root=str(root), budget=EXPLAIN_BYTES)
        if entry.get("log_path"):
            text += f"\nFull log: {entry['log_path']}"
        return Answer(f"gate `{name}` failed ({source}).\n\n{text}\n", entry)


def progress_message(result: GateResult) -> str:
    """What one finished gate's progress notification says."""
    code = f" [{result.code}]" if result.outcome == codes.FAILED and result.code else ""
    flaky = f" ({flaky_note(result._asdict())})" if result.flaky else ""
    return f"{result.name}: {result.outcome}{code}{flaky}"


def _contract_name(plan: Plan) -> str:
    return posix_relative(plan.contract.path, plan.contract.repo_root)
