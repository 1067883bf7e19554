from decimal import Decimal

import pytest

from tally.amounts import format_amount, parse_amount


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12", Decimal(12)),
        ("1,234.50", Decimal("1234.50")),
        ("-3.10", Decimal("-3.10")),
        (" 7.25 ", Decimal("7.25")),
        ("(12.00)", Decimal("-12.00")),
        ("(1,000)", Decimal(-1000)),
    ],
)
def test_parse_amount(text: str, expected: Decimal) -> None:
    assert parse_amount(text) == expected


@pytest.mark.parametrize("text", ["", "twelve", "1.2.3", "NaN", "()"])
def test_parse_amount_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="not an amount"):
        parse_amount(text)


def test_format_amount() -> None:
    assert format_amount(Decimal("-1234.5")) == "-1,234.50"
    assert format_amount(Decimal("0.005")) == "0.00"  # banker's rounding, like the bank
