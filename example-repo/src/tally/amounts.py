"""Money amounts as written by people and by spreadsheets."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

CENT = Decimal("0.01")


def parse_amount(text: str) -> Decimal:
    """Parse ``1,234.50``, ``-3`` or accounting-style ``(12.00)`` (a negative amount)."""
    cleaned = text.strip().replace(",", "")
    negative = cleaned.startswith("(") and cleaned.endswith(")")
    if negative:
        cleaned = cleaned[1:-1]
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise ValueError(f"not an amount: {text!r}") from None
    if not value.is_finite():
        raise ValueError(f"not an amount: {text!r}")
    return -value if negative else value


def format_amount(value: Decimal) -> str:
    """Two decimals with thousands separators: ``-1,234.50``."""
    return f"{value.quantize(CENT):,.2f}"
