"""The ``tally`` command, run as a real process on real files."""

import os
import subprocess
import sys
from pathlib import Path


def run_tally(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [sys.executable, "-m", "tally", *args],
        input=stdin, capture_output=True, text=True, env=env, check=False,
    )


def test_totals_of_a_file(tmp_path: Path) -> None:
    ledger = tmp_path / "march.ledger"
    ledger.write_text("food; market; 23.40\nrent; March; 950\nfood; bakery; 4.10\n")
    result = run_tally(str(ledger))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "food          27.50",
        "rent         950.00",
        "total        977.50",
    ]


def test_reads_standard_input() -> None:
    result = run_tally("-", stdin="travel; train; 1,200.00\n")
    assert result.returncode == 0, result.stderr
    assert "travel      1,200.00" in result.stdout


def test_bad_ledger_is_one_line_and_exit_1(tmp_path: Path) -> None:
    ledger = tmp_path / "bad.ledger"
    ledger.write_text("food; market; lots\n")
    result = run_tally(str(ledger))
    assert result.returncode == 1
    assert result.stderr.strip() == f"tally: {ledger}: line 1: not an amount: 'lots'"
