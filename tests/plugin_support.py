"""Helpers for the pytest-plugin tests: contracts written from dicts, gate commands, git."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import conftest

PY = sys.executable
QUIET_PLUGINS = "-p no:hypothesispytest"


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    # JSON strings and arrays of strings are valid TOML.
    return json.dumps(value)


def contract_text(*gates: dict[str, Any], settings: dict[str, Any] | None = None) -> str:
    lines: list[str] = []
    if settings:
        lines.append("[settings]")
        lines += [f"{key} = {toml_value(value)}" for key, value in settings.items()]
    for gate in gates:
        lines.append("[[gate]]")
        lines += [f"{key} = {toml_value(value)}" for key, value in gate.items()]
    return "\n".join(lines) + "\n"


def write_contract(
    root: Path, *gates: dict[str, Any], settings: dict[str, Any] | None = None,
    name: str = "verify.toml",
) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(contract_text(*gates, settings=settings), encoding="utf-8")
    return path


def python(code: str, *args: str) -> list[str]:
    """A gate command (array form) running a Python snippet."""
    return [PY, "-c", code, *args]


def passing(message: str = "all good") -> list[str]:
    return python(f"print({message!r})")


def failing(status: int = 3, message: str = "a.py:1: E999 something is wrong") -> list[str]:
    return python(f"import sys; print({message!r}); sys.exit({status})")


def stamping(stamp: str, seconds: float) -> list[str]:
    """Writes '<start> <end>' (epoch seconds) to ``stamp`` after sleeping ``seconds``."""
    return python(
        "import pathlib, sys, time; start = time.time(); "
        f"time.sleep({seconds}); "
        "pathlib.Path(sys.argv[1]).write_text(f'{start} {time.time()}')",
        stamp,
    )


def counting(counter: str, status: int = 0) -> list[str]:
    """Appends a line to ``counter`` each time it runs, then exits with ``status``."""
    return python(
        "import sys; open(sys.argv[1], 'a').write('ran\\n'); "
        f"sys.exit({status})",
        counter,
    )


def init_repo(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make ``root`` a git repository with an identity, free of pre-commit's environment."""
    conftest.init_repo(root)
    for name in ("PRE_COMMIT", "PRE_COMMIT_FROM_REF", "PRE_COMMIT_TO_REF",
                 "VERIFYGATE_CHANGED_FROM"):
        monkeypatch.delenv(name, raising=False)
    return root


def load_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def validate_report(report: dict[str, Any]) -> None:
    import jsonschema

    from pytest_verifygate.report.document import load_schema

    jsonschema.validate(report, load_schema())


def gates_by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    names = [gate["name"] for gate in report["gates"]]
    assert len(names) == len(set(names)), f"a gate is reported twice: {names}"
    return {gate["name"]: gate for gate in report["gates"]}


def junit_cases(path: Path) -> dict[str, ET.Element]:
    """The JUnit ``<testcase>`` elements by name."""
    root = ET.parse(path).getroot()
    return {case.attrib["name"]: case for case in root.iter("testcase")}


def junit_properties(case: ET.Element) -> dict[str, str]:
    return {prop.attrib["name"]: prop.attrib["value"] for prop in case.iter("property")}


def interval(path: Path) -> tuple[float, float]:
    start, end = path.read_text(encoding="utf-8").split()
    return float(start), float(end)
