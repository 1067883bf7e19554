"""The JSON report's types, matching ``report.schema.json`` key for key (a test holds them to
it): a key the schema requires is required here, every other one optional.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import TypedDict

from pytest_verifygate import codes


class _Changes(TypedDict):
    source: str
    ref: str | None
    files: list[str]


class ChangesEntry(_Changes, total=False):
    detected_by: str  # only when the ref was not given on the command line


class _Summary(TypedDict):
    passed: int
    failed: int
    skipped: int
    pending: int


class Summary(_Summary, total=False):
    interrupted: int


class NotSelected(TypedDict):
    name: str
    reason: str


class Shard(TypedDict):
    index: int
    total: int
    order: list[str]
    commit: str | None
    contract_sha256: str


class _GateEntry(TypedDict):
    name: str
    outcome: codes.Outcome
    code: str | None
    command: list[str]
    cwd: str
    exit_code: int | None
    signal: int | None
    duration_s: float
    attempts: int
    output_tail: str
    output_truncated: bool


class GateEntry(_GateEntry, total=False):
    """One selected gate's entry."""

    output_bytes: int
    log_path: str | None
    flaky: bool
    cached: bool
    reason: str
    modified_files: list[str]  # files a fixer changed: the gate failed
    # From the contract, when the gate is one of it:
    kind: str
    category: str | None
    roles: list[str] | None
    needs: list[str]
    exclusive: bool
    env: dict[str, str]


class _Report(TypedDict):
    version: int
    verdict: codes.Verdict
    contract: str
    changes: ChangesEntry
    summary: Summary
    gates: list[GateEntry]
    not_selected: list[NotSelected]


class Report(_Report, total=False):
    """A run's JSON report."""

    interrupted: bool
    warnings: list[str]
    errors: list[str]
    shard: Shard
