"""The agent digest: content, hard size bounds, fencing, cleaning, determinism, signatures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_verifygate.codes import CODES
from pytest_verifygate.report.digest import (
    HINTS,
    MAX_BACKTICK_RUN,
    PER_GATE_BYTES,
    TOTAL_BYTES,
    failure_signature,
    gate_digest,
    to_digest,
)

from conftest import git, write

VERIFYGATE = [sys.executable, "-m", "pytest_verifygate.cli"]


def gate(name: str = "tests", output: str = "", *, outcome: str = "failed",
         code: str | None = "command_failed", **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name, "outcome": outcome, "code": code if outcome == "failed" else None,
        "command": ["python", "-m", "pytest", "-q"], "cwd": ".", "exit_code": 1,
        "signal": None, "duration_s": 0.5, "attempts": 1, "output_tail": output,
        "output_truncated": False,
    }
    entry.update(extra)
    return entry


def report(*gates: dict[str, Any], verdict: str | None = None) -> dict[str, Any]:
    summary = {"passed": 0, "failed": 0, "skipped": 0, "pending": 0}
    for entry in gates:
        summary[entry["outcome"]] += 1
    if verdict is None:
        verdict = "failed" if summary["failed"] else "passed"
    return {"version": 1, "verdict": verdict, "contract": "verify.toml",
            "changes": {"source": "worktree", "ref": "HEAD", "files": []},
            "summary": summary, "gates": list(gates)}


def size(text: str) -> int:
    return len(text.encode("utf-8"))


def code_blocks(markdown: str) -> list[str]:
    """The fenced code blocks of ``markdown``, closed by CommonMark's rule: a line holding only
    a backtick run at least as long as the opening one. Raises if a fence is left open."""
    blocks: list[str] = []
    lines = markdown.split("\n")
    index = 0
    while index < len(lines):
        opening = re.fullmatch(r" {0,3}(`{3,})[^`]*", lines[index])
        if not opening:
            index += 1
            continue
        width = len(opening.group(1))
        body: list[str] = []
        index += 1
        while index < len(lines):
            closing = re.fullmatch(r" {0,3}(`{3,})\s*", lines[index])
            if closing and len(closing.group(1)) >= width:
                break
            body.append(lines[index])
            index += 1
        else:
            raise AssertionError(f"unclosed fence of width {width}")
        blocks.append("\n".join(body))
        index += 1
    return blocks


# --------------------------------------------------------------------------------------------
# content


def test_failed_gate_section_has_heading_hint_command_cwd_and_output() -> None:
    text = to_digest(report(
        gate("lint", "ok\n", outcome="passed"),
        gate("tests", "collected 3 items\nFAILED tests/test_a.py::test_one - assert 1 == 2\n"
             "1 failed, 2 passed in 0.12s\n", cwd="services/api"),
    ))
    assert text.startswith("## verifygate: 1 of 2 gate(s) failed: `tests`")
    assert "### `tests` failed: command_failed, exit status 1" in text
    assert f"Hint: {HINTS['command_failed']}" in text
    assert "Command: `python -m pytest -q` (cwd: `services/api`)" in text
    assert code_blocks(text) == ["collected 3 items\n"
                                 "FAILED tests/test_a.py::test_one - assert 1 == 2\n"
                                 "1 failed, 2 passed in 0.12s"]
    assert "`lint`" not in text  # passed gates are not in the digest


@pytest.mark.parametrize(("code", "phrase"), [
    ("setup_or_bootstrap_issue", "install or configure it; do not change source code"),
    ("missing_script", "define the script, or fix the gate's command in the contract"),
    ("missing_make_target", "add the target to the Makefile"),
    ("no_test_files", "found no tests"),
    ("unsupported_format", "shell = true"),
    ("sequence_issue", "run the step that produces it first"),
    ("timeout", "raise timeout_seconds"),
])
def test_each_code_gets_its_hint(code: str, phrase: str) -> None:
    text = to_digest(report(gate("g", "boom\n", code=code)))
    hint_lines = [line for line in text.splitlines() if line.startswith("Hint: ")]
    assert len(hint_lines) == 1
    assert phrase in hint_lines[0]


def test_every_failure_code_has_a_one_line_hint() -> None:
    assert set(HINTS) == set(CODES)
    assert all("\n" not in hint and len(hint) < 200 for hint in HINTS.values())


def test_heading_says_timed_out_killed_or_not_run() -> None:
    timed_out = to_digest(report(gate("slow", "tick\n", code="timeout", exit_code=None)))
    assert "### `slow` failed: timeout, timed out" in timed_out
    killed = to_digest(report(gate("k", "x\n", exit_code=None, signal=9)))
    assert "### `k` failed: command_failed, killed by signal 9 (SIGKILL)" in killed
    unsupported = to_digest(report(gate("u", "verifygate: needs a shell\n",
                                        code="unsupported_format", exit_code=None)))
    assert "### `u` failed: unsupported_format, not run (the command needs a shell)" in unsupported


def test_passing_is_one_line() -> None:
    text = to_digest(report(gate("lint", "all good\n" * 50, outcome="passed"),
                            gate("docs", "", outcome="skipped")))
    assert text == "verifygate: passed (1 passed, 0 failed, 1 skipped, 0 pending)\n"


def test_changes_that_no_gate_verified_say_what_to_do() -> None:
    text = to_digest(report(gate("docs", "", outcome="skipped"), verdict="failed"))
    assert text == ("verifygate: failed (0 passed, 0 failed, 1 skipped, 0 pending); files "
                    "changed but no gate ran, and the contract sets fail_when_unverified: add "
                    "a gate whose when_changed matches the changes, or change the setting\n")


def test_pending_manual_gate_is_named_in_the_one_line() -> None:
    text = to_digest(report(gate("lint", "", outcome="passed"),
                            gate("review", "", outcome="pending"), verdict="pending"))
    assert text.count("\n") == 1
    assert text.startswith("verifygate: pending (1 passed, 0 failed, 0 skipped, 1 pending)")
    assert "awaiting human sign-off: `review`" in text


def test_unverified_failure_without_failed_gates_explains_itself() -> None:
    text = to_digest(report(verdict="failed"))
    assert text.count("\n") == 1
    assert "fail_when_unverified" in text


def test_no_output_is_said() -> None:
    text = to_digest(report(gate("quiet", "")))
    assert "(no output)" in text
    assert code_blocks(text) == []


def test_limits_below_the_minimum_are_refused() -> None:
    with pytest.raises(ValueError, match="per_gate"):
        to_digest(report(gate()), per_gate=100)
    with pytest.raises(ValueError, match="total"):
        to_digest(report(gate()), total=500)


# --------------------------------------------------------------------------------------------
# bounds and the lines kept


def test_megabyte_output_keeps_the_end_and_earlier_error_lines_within_bounds() -> None:
    def noise(lines: range) -> str:
        return "".join(f"progress line {i}: compiling module_{i}\n" for i in lines)

    output = (noise(range(15000)) + "src/core.py:12: error: Incompatible types\n"
              + "FAILED tests/test_core.py::test_add - AssertionError\n"
              + noise(range(15000, 30000)) + "=== 1 failed, 99 passed in 12.00s ===\n")
    assert len(output) > 1_000_000
    section = gate_digest(gate("tests", output))
    assert size(section) <= PER_GATE_BYTES
    (block,) = code_blocks(section)
    assert block.endswith("=== 1 failed, 99 passed in 12.00s ===")
    assert "src/core.py:12: error: Incompatible types" in block
    assert "FAILED tests/test_core.py::test_add - AssertionError" in block
    assert re.search(r"\[\.\.\. \d+ earlier line\(s\) omitted \.\.\.\]", block)
    assert "progress line 29999" in block  # the very end is there
    assert "progress line 0:" not in block


def test_single_huge_line_is_cut_in_the_middle() -> None:
    line = "E   AssertionError: assert '" + "x" * 3_000_000 + "' == 'expected-value'"
    section = gate_digest(gate("tests", line))
    assert size(section) <= PER_GATE_BYTES
    (block,) = code_blocks(section)
    assert block.startswith("E   AssertionError: assert 'xxx")
    assert block.endswith("' == 'expected-value'")
    assert "[... middle of a long line cut ...]" in block


def test_many_failed_gates_respect_the_total_and_say_what_was_left_out() -> None:
    gates = [gate(f"gate{i:02d}", f"gate{i:02d} line\n" * 20000) for i in range(30)]
    text = to_digest(report(*gates))
    assert size(text) <= TOTAL_BYTES
    assert "more failed gate(s) not shown" in text
    assert "gate00" in text.split("\n", 1)[0]  # the title names them
    assert "and 20 more" in text.split("\n", 1)[0]
    shown = re.findall(r"^### `(gate\d+)`", text, re.MULTILINE)
    assert 3 <= len(shown) < 30
    assert all(block.endswith(" line") for block in code_blocks(text))


@pytest.mark.parametrize(("per_gate", "total"), [(512, 1024), (1000, 2500), (4096, 16384),
                                                  (20000, 50000)])
def test_custom_limits_are_hard_bounds(per_gate: int, total: int) -> None:
    long_command = ["tool", *(f"/very/long/argument/number/{i}" for i in range(500))]
    gates = [gate(f"g{i}", ("`" * 40 + " Error: é\n") * 5000 + "\r" * 30 + "end\n",
                  command=long_command, cwd="deep/" * 60) for i in range(6)]
    for entry in gates:
        assert size(gate_digest(entry, budget=per_gate)) <= per_gate
    text = to_digest(report(*gates), per_gate=per_gate, total=total)
    assert size(text) <= total
    code_blocks(text)  # every fence is closed


# --------------------------------------------------------------------------------------------
# cleaning and fencing


def test_fence_is_longer_than_any_backtick_run_in_the_output() -> None:
    output = "```python\nx = 1\n```\n``````\nsome ```` inline\n`"
    text = to_digest(report(gate("md", output)))
    lines = text.rstrip("\n").split("\n")
    opening = lines.index("Output:") + 1
    assert lines[opening] == lines[-1] == "`" * 7  # one longer than the longest run (6)
    assert code_blocks(text) == [output]


def test_huge_backtick_runs_are_shortened_so_the_fence_stays_short() -> None:
    output = "before\n" + "`" * 100_000 + "\nafter ```` \n" + "`" * 3000
    text = to_digest(report(gate("ticks", output)))
    assert size(text) <= PER_GATE_BYTES + 200
    lines = text.rstrip("\n").split("\n")
    assert lines[lines.index("Output:") + 1] == lines[-1] == "`" * (MAX_BACKTICK_RUN + 1)
    (block,) = code_blocks(text)
    assert block.endswith("`" * MAX_BACKTICK_RUN + "[+2984 backticks]")
    assert "after ````" in block


def test_progress_bars_ansi_controls_and_replacement_runs_are_cleaned() -> None:
    output = ("\x1b[32mcollecting\x1b[0m\n"
              "[  5%]\r[ 50%]\r[100%]\r\n"
              "downloading 10%\rdownloading 100%\r\n"
              "\x1b[2K\x1b[1Gspinner |\x1b[2K\x1b[1Gspinner done\x1b[K\n"
              "bell\x07 nul\x00 backspace\x08!\n"
              "binary " + "\ufffd" * 100_000 + " tail\n"
              "\x1b]0;window title\x07\x1b[1;31mFAILED\x1b[0m test_x\n")
    text = to_digest(report(gate("t", output)))
    (block,) = code_blocks(text)
    assert block.split("\n") == [
        "collecting",
        "[100%]",
        "downloading 100%",
        "spinner done",
        "bell nul backspace!",
        "binary \ufffd tail",
        "FAILED test_x",
    ]
    assert size(text) < 1000


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["`", "a", "\n", "\r", "\x1b[31m", "é", "\ufffd", "~", " ",
                                  "E   ", "error: ", "\t", "\x00", "```", "x" * 500]),
                max_size=300).map("".join),
       st.integers(min_value=1, max_value=400))
@example(chunk="\x00```", repeat=203)  # removing NULs joined runs into one too long to fence
@pytest.mark.slow
def test_any_output_gives_a_bounded_digest_with_closed_fences(chunk: str, repeat: int) -> None:
    output = chunk * repeat
    per_gate, total = 1024, 2048
    text = to_digest(report(gate("a", output), gate("b", output[::-1])),
                     per_gate=per_gate, total=total)
    assert size(text) <= total
    blocks = code_blocks(text)
    if output.strip():
        assert blocks or "(no output)" in text or "no room" in text
    outside = re.sub(r"(?ms)^(`{3,}).*?^\1$", "", text)
    assert "\x1b" not in text and "\x00" not in text and "\r" not in text
    assert not re.search(r"^`{3,}", outside, re.MULTILINE)


# --------------------------------------------------------------------------------------------
# determinism


def test_command_with_backticks_and_control_characters_stays_one_short_line() -> None:
    command = ["sh", "-c", "echo `date`" + "`" * 5000 + "\n\rdone"]
    text = to_digest(report(gate("sh", "out\n", command=command)))
    (line,) = [line for line in text.splitlines() if line.startswith("Command: ")]
    assert len(line.encode()) < 600
    assert "echo `date`" in line
    ticks = re.match(r"Command: (`+)", line)
    assert ticks and line.endswith(ticks.group(1) + " (cwd: `.`)")


def test_paths_under_the_repository_are_shown_relative(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    output = (f"{root}/src/a.py:3: error: boom\ncwd is {root}\nother {root}-backup/x.py\n"
              f"{root}2/y.py\n")
    text = to_digest(report(gate("t", output, command=["mypy", f"{root}/src"])), root=root)
    (block,) = code_blocks(text)
    assert block.split("\n") == ["src/a.py:3: error: boom", "cwd is .",
                                 f"other {root}-backup/x.py", f"{root}2/y.py"]
    assert "Command: `mypy src`" in text
    # Said, once, where it happened: a `pwd` that printed "." misleads no one.
    assert text.count("\n\nPaths under the repository are shown relative to its root (`.` is "
                      "the root).\n\n") == 1
    assert "Paths under" not in to_digest(report(gate("t", "src/a.py:3: error: boom\n")),
                                           root=root)


def test_a_root_inside_a_word_is_not_cut_out(tmp_path: Path) -> None:
    """Dropping ``<root>/`` from ``TO<root>/KEN`` would join masked halves back together."""
    root = tmp_path / "repo"
    text = to_digest(report(gate("t", f"error: TO{root}/KEN and {root}/src/a.py\n")), root=root)
    (block,) = code_blocks(text)
    assert block == f"error: TO{root}/KEN and src/a.py"


@pytest.mark.slow
def test_identical_failures_in_different_checkouts_give_identical_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: ``verifygate run --format agent`` in two clones at different paths."""
    for name in ("PRE_COMMIT", "PRE_COMMIT_FROM_REF", "PRE_COMMIT_TO_REF",
                 "VERIFYGATE_CHANGED_FROM"):
        monkeypatch.delenv(name, raising=False)
    script = ("import os, sys\n"
              "print('checking', os.getcwd())\n"
              "print(os.path.join(os.getcwd(), 'src', 'a.py') + ':2: error: bad ```` here')\n"
              "sys.exit(3)\n")
    digests = []
    for name in ("first", "second-checkout"):
        repo = tmp_path / name
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        write(repo / "check.py", script)
        write(repo / "verify.toml",
              f'[[gate]]\nname = "check"\ncommand = ["{sys.executable}", "check.py"]\n'
              '[[gate]]\nname = "fine"\ncommand = ["true"]\n')
        done = subprocess.run([*VERIFYGATE, "run", "--all", "--format", "agent"], cwd=repo,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 1, done.stderr
        assert str(repo) not in done.stdout
        digests.append(done.stdout.replace(sys.executable, "PYTHON"))
    assert digests[0] == digests[1]
    assert "### `check` failed: command_failed, exit status 3" in digests[0]
    assert code_blocks(digests[0]) == ["checking .\nsrc/a.py:2: error: bad ```` here"]
    assert "`fine`" not in digests[0]


# --------------------------------------------------------------------------------------------
# signatures


def test_signature_ignores_numbers_hex_ids_uuids_and_paths(tmp_path: Path) -> None:
    first = report(gate("t", f"{tmp_path}/repo/a.py:10: AssertionError at 0x7f3a2b1c\n"
                             "session 3f2a9c1d-1111-4a2b-9c3d-123456789abc commit 9fceb02d\n"
                             "/tmp/pytest-of-me/pytest-41/x.txt\n1 failed in 0.51s\n"
                             "checked at 1795352182.6067436\n"))
    second = report(gate("t", f"{tmp_path}/other/a.py:12: AssertionError at 0x55aa00ff\n"
                              "session 00000000-2222-4a2b-9c3d-aaaaaaaaaaaa commit 1234abcd\n"
                              "/tmp/pytest-of-me/pytest-42/x.txt\n1 failed in 2.07s\n"
                              "checked at 1795352182.607064\n"))
    assert failure_signature(first, root=tmp_path / "repo") == failure_signature(
        second, root=tmp_path / "other")


def test_signature_changes_with_the_failure() -> None:
    base = failure_signature(report(gate("t", "AssertionError: expected apples\n")))
    assert base is not None
    assert failure_signature(report(gate("t", "AssertionError: expected pears\n"))) != base
    assert failure_signature(report(gate("u", "AssertionError: expected apples\n"))) != base
    assert failure_signature(report(gate("t", "AssertionError: expected apples\n",
                                         code="timeout"))) != base
    assert failure_signature(report(gate("t", "x", outcome="passed"))) is None


def test_interrupted_gates_are_counted_apart_and_unstarted_ones_get_no_section() -> None:
    def gate(name: str, code: str, attempts: int) -> dict[str, object]:
        return {"name": name, "outcome": "failed", "code": code, "command": ["x"], "cwd": ".",
                "exit_code": None, "signal": None, "duration_s": 0.1, "attempts": attempts,
                "output_tail": f"{name} output\n", "output_truncated": False}

    report = {"version": 1, "verdict": "failed", "gates": [
        gate("lint", "command_failed", 1), gate("tests", "interrupted", 1),
        gate("docs", "interrupted", 0), gate("build", "interrupted", 0)]}
    digest = to_digest(report)
    assert digest.startswith("## verifygate: 1 of 4 gate(s) failed, 3 interrupted: `lint`, "
                             "`tests`\n\nInterrupted before they started: `docs`, `build`\n")
    assert "### `docs`" not in digest and "docs output" not in digest
    only_cut = to_digest({**report, "gates": report["gates"][1:]})
    assert only_cut.startswith("## verifygate: interrupted: 3 of 3 gate(s) did not finish: "
                               "`tests`\n")
