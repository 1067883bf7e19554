"""Hostile output stays readable and bounded: in memory, in the report, in the digest and on
disk (each gate's log is capped, the logs kept across runs too, and they are private)."""

from __future__ import annotations

import json
import os
import re
import resource
import stat
import sys
from pathlib import Path

import pytest

from pytest_verifygate.contract import load_contract
from pytest_verifygate.engine import to_report
from pytest_verifygate.git.changes import ChangeSet
from pytest_verifygate.plan import plan_gates
from pytest_verifygate.report.digest import TOTAL_BYTES, to_digest
from pytest_verifygate.runner.logfile import DEFAULT_LOG_MAX_BYTES
from pytest_verifygate.runner.scheduler import GateRunner
from pytest_verifygate.selection import select_gates
from pytest_verifygate.state.storage import KEEP_LOG_BYTES, new_log_dir, state_dir

from .support import run_contract, validate

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

MB = 1 << 20
WRITERS = {
    # 2 MB of random bytes, NULs and every control character included.
    "binary": "import os, sys; sys.stdout.buffer.write(os.urandom(2 * 2**20))",
    # Invalid UTF-8 everywhere, and a valid 4-byte character split across many writes.
    "invalid-utf8": ("import sys, time\nfor _ in range(20000):\n"
                     "    sys.stdout.buffer.write(b'\\xff\\xfe\\xc3'); sys.stdout.buffer.write("
                     "'\\U0001f600'.encode()[:2]); sys.stdout.buffer.flush()\n"
                     "    sys.stdout.buffer.write('\\U0001f600'.encode()[2:])"),
    # One line of 100 MB (no newline at all until the very end), written in 1 MB pieces.
    "one-line-100mb": ("import sys\nw = sys.stdout.buffer.write\nfor _ in range(100):\n"
                       "    w(b'x' * 2**20)\nw(b'END-OF-LINE\\n')"),
    # Colours, cursor movement, screen clears and terminal-title sequences, 5 MB of them.
    "ansi-flood": ("import sys\nfor i in range(60000):\n"
                   "    sys.stdout.write(f'\\x1b[3{i % 8}m\\x1b[2K\\x1b[1A\\x1b]0;title {i}\\x07"
                   "\\x1b[?25l colour {i}\\x1b[0m\\n')\nprint('\\x1b[31mFAILED the end\\x1b[0m')"),
    # A progress bar redrawn with carriage returns 200,000 times, then a verdict line.
    "progress-bar": ("import sys\nfor i in range(200000):\n"
                     "    sys.stdout.write(f'\\r[{\"#\" * (i % 50):<50}] {i}')\n"
                     "print('\\nDONE: 3 errors')"),
}


def test_hostile_output_is_bounded_in_the_report_and_the_digest(repo: Path) -> None:
    tail_bytes = 4096
    exit_1 = "\nimport sys\nsys.exit(1)"
    contract = f"[settings]\noutput_tail_bytes = {tail_bytes}\njobs = 2\n" + "".join(
        f'[[gate]]\nname = "{name}"\n'
        f'command = [{json.dumps(sys.executable)}, "-c", {json.dumps(code + exit_1)}]\n'
        for name, code in WRITERS.items()
    )
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    run = run_contract(repo, contract)
    rss_growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert rss_growth_mb < 64, "the runner held the output in memory"

    results = {result.name: result for result in run.results}
    for name, result in results.items():
        assert (result.outcome, result.code, result.exit_code) == (
            "failed", "command_failed", 1), (name, result.output_tail[-300:])
        assert result.output_truncated, name
        assert len(result.output_tail.encode("utf-8")) <= tail_bytes, name
    assert results["one-line-100mb"].output_bytes == 100 * MB + len("END-OF-LINE\n")
    assert results["one-line-100mb"].output_tail.endswith("x" * 100 + "END-OF-LINE\n")
    # The log keeps the head and the tail (16 MiB in all by default), and says what it cut.
    log = Path(results["one-line-100mb"].log_path or "").read_bytes()
    assert DEFAULT_LOG_MAX_BYTES <= len(log) <= DEFAULT_LOG_MAX_BYTES + 512
    assert log.startswith(b"x" * 1000) and log.endswith(b"x" * 1000 + b"END-OF-LINE\n")
    assert b"verifygate: " in log and b"bytes cut here" in log
    assert results["invalid-utf8"].output_tail.count("\U0001f600") > 100  # split, rejoined

    report = to_report(run)
    validate(report)
    text = json.dumps(report)
    assert text.isascii() and len(text) < len(WRITERS) * tail_bytes * 6 + 10_000
    for gate in report["gates"]:
        assert "\ud800" not in gate["output_tail"]  # no lone surrogates: strict JSON readers

    digest = to_digest(report, root=str(repo))
    assert len(digest.encode("utf-8")) <= TOTAL_BYTES + 512
    assert "\x1b" not in digest and "\r" not in digest and "\x00" not in digest
    assert "DONE: 3 errors" in digest and "FAILED the end" in digest
    for name in WRITERS:
        assert f"`{name}`" in digest


# Numbered lines: which ones a log kept, and where it cut, can be read back exactly.
NUMBERED = "import sys\nfor i in range({count}):\n    sys.stdout.write(f'line {{i:07d}}\\n')"
LINE = len("line 0000000\n")


@pytest.mark.parametrize("retries", [0, 1])
def test_a_log_keeps_its_head_and_tail_and_says_what_it_cut(repo: Path, retries: int) -> None:
    count, cap = 20_000, 64 * 1024  # 260 KB of output into a 64 KiB log
    code = NUMBERED.format(count=count) + "\nsys.exit(1)"
    (repo / "verify.toml").write_text(
        f'[[gate]]\nname = "chatty"\nretries = {retries}\n'
        f'command = [{json.dumps(sys.executable)}, "-c", {json.dumps(code)}]\n')
    contract = load_contract(repo / "verify.toml")
    changes = ChangeSet("all")
    plans = plan_gates(contract, select_gates(contract, changes))
    with GateRunner(plans, jobs=1, log_dir=repo / "logs", log_max_bytes=cap) as runner:
        (result,) = runner.results()
    assert result.output_bytes == count * LINE and result.attempts == retries + 1
    log = Path(result.log_path or "").read_text()
    attempts = re.split(r"\n--- verifygate: attempt \d+ ---\n", log)
    assert len(attempts) == retries + 1
    for text in attempts:  # each attempt's part is capped on its own
        assert cap <= len(text.encode()) <= cap + 200
        head, cut, tail = re.split(r"\n?(--- verifygate: [\d,]+ bytes cut here[^\n]*---\n)",
                                   text)
        assert head.startswith("line 0000000\nline 0000001\n")
        assert tail.endswith(f"line {count - 1:07d}\n")
        # Nothing in between is lost without a word: the kept bytes and the cut add up.
        cut_bytes = int(re.search(r"([\d,]+) bytes cut", cut).group(1).replace(",", ""))
        assert len(head.encode()) + cut_bytes + len(tail.encode()) == count * LINE


def test_logs_are_private_to_the_user(repo: Path) -> None:
    old_umask = os.umask(0)  # the most permissive umask must not loosen them
    try:
        run = run_contract(repo, '[[gate]]\nname = "a"\ncommand = "echo secret-ish"\n')
    finally:
        os.umask(old_umask)
    log = Path(run.results[0].log_path or "")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    for directory in (log.parent, log.parent.parent, state_dir(repo)):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory


def test_the_logs_kept_across_runs_are_capped_in_total(repo: Path) -> None:
    """Ten runs of 16 MiB gates would keep gigabytes: old runs go once the total passes the
    cap (sparse files: the size counts, the disk is not filled)."""
    old = []
    for _ in range(4):
        run_dir = new_log_dir(repo)
        with open(run_dir / "big.log", "wb") as handle:
            handle.truncate(KEEP_LOG_BYTES // 3 + 1)
        old.append(run_dir)
    newest = new_log_dir(repo)
    kept = sorted((state_dir(repo) / "logs").iterdir())
    assert kept == [*old[-2:], newest]  # 2/3 of the cap kept, one more would pass it
