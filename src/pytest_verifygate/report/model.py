"""The JSON report's types, matching ``report.schema.json`` key for key (a test holds them to
it): a key the schema requires is required here, every other one optional.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from types import UnionType
from typing import (
    Any,
    Literal,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

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


Where = tuple[str | int, ...]  # keys and 1-based item numbers from the report's top


def problem(value: object, kind: Any = Report, where: Where = ()) -> tuple[Where, bool] | None:
    """Where ``value`` (parsed JSON) is not of type ``kind`` (a type of this module, or a part
    of one), and whether a required key is missing there; None when it is of that type. How
    ``verifygate merge`` checks the reports it is given."""
    origin, args = get_origin(kind), get_args(kind)
    if is_typeddict(kind):
        if not isinstance(value, dict):
            return where, False
        missing = sorted(kind.__required_keys__ - value.keys())
        if missing:
            return (*where, missing[0]), True
        hints = get_type_hints(kind)
        return next(filter(None, (problem(value[key], hints[key], (*where, key))
                                  for key in sorted(hints.keys() & value.keys()))), None)
    if origin in (Union, UnionType):
        arms = [problem(value, arm, where) for arm in args]
        return None if None in arms else arms[0]
    if origin is list:
        if not isinstance(value, list):
            return where, False
        return next(filter(None, (problem(item, args[0], (*where, number))
                                  for number, item in enumerate(value, 1))), None)
    if origin is Literal:
        fits = value in args
    elif origin is dict:
        fits = isinstance(value, dict) and all(isinstance(item, str) for item in value.values())
    else:
        accepted = {float: (int, float), type(None): (type(None),)}.get(kind, (kind,))
        fits = isinstance(value, accepted) and (kind is bool or not isinstance(value, bool))
    return None if fits else (where, False)
