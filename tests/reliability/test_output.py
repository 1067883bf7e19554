"""Hostile output stays readable and bounded: in memory, in the report and in the digest."""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

from pytest_verifygate.engine import to_report
from pytest_verifygate.report.digest import TOTAL_BYTES, to_digest

from .support import run_contract, validate

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
    assert Path(results["one-line-100mb"].log_path or "").stat().st_size == 100 * MB + 12
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
