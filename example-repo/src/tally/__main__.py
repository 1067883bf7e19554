"""``python -m tally LEDGER``: print the total per category, then the grand total."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from decimal import Decimal

from tally.amounts import format_amount
from tally.ledger import parse_ledger, totals


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tally", description=__doc__)
    parser.add_argument("ledger", help="the ledger file ('-' for standard input)")
    args = parser.parse_args(argv)
    try:
        if args.ledger == "-":
            entries = parse_ledger(sys.stdin)
        else:
            with open(args.ledger, encoding="utf-8") as handle:
                entries = parse_ledger(handle)
    except (OSError, ValueError) as exc:
        print(f"tally: {args.ledger}: {exc}", file=sys.stderr)
        return 1
    sums = totals(entries)
    width = max(len(name) for name in [*sums, "total"])
    for category, amount in sums.items():
        print(f"{category:<{width}}  {format_amount(amount):>12}")
    print(f"{'total':<{width}}  {format_amount(sum(sums.values(), Decimal(0))):>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
