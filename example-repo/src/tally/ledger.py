"""Ledger files: one ``category; description; amount`` entry per line."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from tally.amounts import parse_amount


@dataclass(frozen=True)
class Entry:
    category: str
    description: str
    amount: Decimal


def parse_ledger(lines: Iterable[str]) -> list[Entry]:
    """Entries from ledger lines; blank lines and ``#`` comments are skipped."""
    entries: list[Entry] = []
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        fields = [field.strip() for field in stripped.split(";")]
        if len(fields) != 3:
            raise ValueError(f"line {number}: expected 'category; description; amount'")
        category, description, amount = fields
        try:
            entries.append(Entry(category, description, parse_amount(amount)))
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from None
    return entries


def totals(entries: Iterable[Entry]) -> dict[str, Decimal]:
    """The sum per category, categories in order of first appearance."""
    sums: dict[str, Decimal] = {}
    for entry in entries:
        sums[entry.category] = sums.get(entry.category, Decimal(0)) + entry.amount
    return sums
