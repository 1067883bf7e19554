"""Where each gate is declared in its contract file (its ``[[gate]]`` table; in an openTiger
contract, the first line listing its command): the line pytest reports for its item.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
import re

from pytest_verifygate.contract import Contract

# A ``[[gate]]`` table header, as TOML allows it spelt (blanks, a trailing comment).
_TABLE = re.compile(r"^\s*\[\[\s*(?:tool\s*\.\s*verifygate\s*\.\s*)?gate\s*\]\]\s*(?:#.*)?$")


def declared_lines(contract: Contract) -> dict[str, int]:
    """Each gate's line (1-based) in ``contract``'s text; gates it cannot place are left out."""
    lines = contract.text.splitlines()
    if contract.format == "opentiger":
        return _json_lines(contract, lines)
    headers = [number for number, line in enumerate(lines, start=1) if _TABLE.match(line)]
    # The loader keeps the tables' order, one gate per table: a count that differs (tables
    # written inline, ``gate = [...]``) places none rather than misplacing some.
    if len(headers) != len(contract.gates):
        return {}
    return {gate.name: number for gate, number in zip(contract.gates, headers, strict=True)}


def _json_lines(contract: Contract, lines: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for gate in contract.gates:
        command = gate.command if isinstance(gate.command, str) else " ".join(gate.command)
        # Without its quotes: openTiger splits ``A && B`` into two gates, each a part of it.
        needles = (json.dumps(gate.name, ensure_ascii=False),
                   json.dumps(command, ensure_ascii=False)[1:-1])
        for number, line in enumerate(lines, start=1):
            if any(needle in line for needle in needles):
                found[gate.name] = number
                break
    return found
