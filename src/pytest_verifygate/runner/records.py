"""The runner's records (``GatePlan``, ``CacheSlot``, ``GateResult``), cheap to import without
process supervision.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from pytest_verifygate import codes
from pytest_verifygate.contract.model import EMPTY_ENV, Gate


class GateResult(NamedTuple):
    """How one selected gate ended. ``outcome``: passed, failed, skipped or pending."""

    name: str
    outcome: codes.Outcome
    code: str | None = None
    command: tuple[str, ...] = ()
    cwd: str = "."
    exit_code: int | None = None
    signal: int | None = None
    duration_s: float = 0.0
    attempts: int = 0
    output_tail: str = ""
    output_truncated: bool = False
    output_bytes: int = 0
    log_path: str | None = None
    reason: str | None = None
    flaky: bool = False
    started_at: float | None = None
    finished_at: float | None = None
    cached: bool = False  # a pass reused from the result cache: nothing was run
    # Given files it changed: fails the gate (as in pre-commit), so nothing is committed unseen.
    modified_files: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.outcome == codes.FAILED


def result_from_entry(entry: Mapping[str, Any]) -> GateResult:
    """A ``GateResult`` back from its report entry (an xdist worker's, a shard's report)."""
    values = {key: value for key, value in entry.items() if key in GateResult._fields}
    values["command"] = tuple(values.get("command") or ())
    return GateResult(**values)


class CacheSlot(NamedTuple):
    """Where a cacheable gate's pass is stored, and the stored pass found, if any; the key is
    computed again after the run (from ``definition`` and ``patterns``) before storing."""

    directory: Path
    key: str
    root: Path
    definition: str
    patterns: tuple[str, ...] | None
    hit: GateResult | None = None
    # Per-file reuse ({files} with when_changed or file types): the unexpanded definition, the
    # gate, and each file this run checks with its key.
    file_definition: str | None = None
    file_gate: Gate | None = None
    file_keys: tuple[tuple[str, str], ...] = ()
    stamps: str = ""  # of the inputs before the run (``RepoFiles.stamps``)

    @property
    def path(self) -> Path:
        return self.directory / f"{self.key}.json"


class GatePlan(NamedTuple):
    """A selected gate turned into what to do: spawn these argvs, skip it, or fail it early."""

    gate: Gate
    cwd: Path
    invocations: tuple[tuple[str, ...], ...] = ()
    env: Mapping[str, str] = EMPTY_ENV
    display_command: tuple[str, ...] = ()
    skip_reason: str | None = None
    pending_reason: str | None = None
    unsupported: str | None = None
    cache: CacheSlot | None = None
    given_files: tuple[str, ...] = ()
    root: Path | None = None
    file_args: tuple[str, ...] = ()  # what {files} expands to (from cwd): split at run time


def bare_result(plan: GatePlan, outcome: codes.Outcome, code: str | None,
                output: str = "") -> GateResult:
    return GateResult(name=plan.gate.name, outcome=outcome, code=code,
                      command=plan.display_command, cwd=plan.gate.cwd, output_tail=output,
                      output_bytes=len(output.encode()))
