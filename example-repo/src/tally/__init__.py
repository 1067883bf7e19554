"""tally: sum the amounts of a ledger file, per category."""

from tally.amounts import format_amount, parse_amount
from tally.ledger import Entry, parse_ledger, totals

__all__ = ["Entry", "format_amount", "parse_amount", "parse_ledger", "totals"]
__version__ = "0.3.0"
