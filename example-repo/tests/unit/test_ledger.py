from decimal import Decimal

import pytest

from tally.ledger import Entry, parse_ledger, totals

LEDGER = """\
# household, March
food; market; 23.40
rent; March; 950
food; bakery; 4.10

food; refund; (3.00)
"""


def test_parse_ledger_skips_comments_and_blank_lines() -> None:
    entries = parse_ledger(LEDGER.splitlines())
    assert entries[0] == Entry("food", "market", Decimal("23.40"))
    assert len(entries) == 4


def test_totals_per_category_in_order_of_appearance() -> None:
    sums = totals(parse_ledger(LEDGER.splitlines()))
    assert list(sums) == ["food", "rent"]
    assert sums["food"] == Decimal("24.50")


def test_bad_line_names_its_number() -> None:
    with pytest.raises(ValueError, match="line 2: expected"):
        parse_ledger(["food; a; 1", "food; 2"])
