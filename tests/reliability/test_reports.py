"""Reports survive: crashing gates, interrupted writes, readers polling during writes, and
signals that land after the last gate ended, while the report is being made.

(Reports after Ctrl-C and SIGTERM are checked against the schema in test_process_trees.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_verifygate.contract import Gate
from pytest_verifygate.engine import to_report
from pytest_verifygate.report.document import write_report
from pytest_verifygate.runner.records import GateResult

from .support import PY, run_contract, validate
from conftest import verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("signum", [11, 6, 9], ids=["SIGSEGV", "SIGABRT", "SIGKILL"])
def test_a_crashing_gate_still_gives_a_complete_report(repo: Path, signum: int) -> None:
    write(repo / "verify.toml", f"""
[[gate]]
name = "crash"
command = ["{PY}", "-c",
           "import os; print('about to die', flush=True); os.kill(os.getpid(), {signum})"]
[[gate]]
name = "fine"
command = "true"
""")
    done = verifygate("run", "--all", "--json", "report.json", cwd=repo)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads((repo / "report.json").read_text())
    validate(report)
    crash, fine = report["gates"]
    assert (crash["outcome"], crash["code"], crash["signal"], crash["exit_code"]) == (
        "failed", "command_failed", signum, None)
    assert "about to die" in crash["output_tail"]
    assert fine["outcome"] == "passed"


def _big_report(marker: str, gates: int = 150, output: int = 20_000) -> dict[str, Any]:
    return {
        "version": 1, "verdict": "failed", "contract": "verify.toml", "interrupted": False,
        "changes": {"source": "all", "ref": None, "files": []},
        "summary": {"passed": 0, "failed": gates, "skipped": 0, "pending": 0},
        "gates": [
            {"name": f"{marker}-{i}", "outcome": "failed", "code": "command_failed",
             "command": ["x"], "cwd": ".", "exit_code": 1, "signal": None, "duration_s": 0.1,
             "attempts": 1, "output_tail": marker * output, "output_truncated": True}
            for i in range(gates)
        ],
        "not_selected": [],
    }


READER = textwrap.dedent("""
    import json, os, sys
    path, stop = sys.argv[1], sys.argv[2]
    parsed, broken, seen = 0, 0, set()
    while not os.path.exists(stop):
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            broken += 1  # the path must never be missing once the first report exists
            continue
        try:
            seen.add(json.loads(text)["gates"][0]["name"])
            parsed += 1
        except ValueError:
            broken += 1
    print(json.dumps({"parsed": parsed, "broken": broken, "seen": sorted(seen)}))
""")


def test_a_reader_never_sees_a_partial_report(tmp_path: Path) -> None:
    """Another process polls the report while it is rewritten, ~3 MB at a time: every read
    is one complete report, old or new, never a half-written or missing file."""
    path = tmp_path / "out" / "report.json"
    stop = tmp_path / "stop"
    reports = [_big_report("a"), _big_report("b")]
    write_report(path, reports[1])
    reader = subprocess.Popen([sys.executable, "-c", READER, str(path), str(stop)],
                              stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)  # the reader is polling before the writes start
        for index in range(30):
            write_report(path, reports[index % 2])
    finally:
        stop.touch()
        stdout, _ = reader.communicate(timeout=60)
    counts = json.loads(stdout)
    assert counts["broken"] == 0, counts
    assert counts["parsed"] > 0 and counts["seen"] == ["a-0", "b-0"], counts
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]  # no temp file left


def test_an_interrupted_write_keeps_the_old_report_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in the middle of writing (simulated at the fsync: a signal's timing cannot be
    aimed) leaves the previous report whole and removes the temporary file."""
    path = tmp_path / "report.json"
    old = _big_report("o", gates=2, output=10)
    write_report(path, old)

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_report(path, _big_report("n"))
    assert json.loads(path.read_text()) == old
    assert os.listdir(tmp_path) == ["report.json"]


def test_ctrl_c_while_gates_are_being_started_still_reports_every_gate(repo: Path) -> None:
    """A Ctrl-C can land while the run is still handing gates to its workers. A manual gate's
    result is announced at that moment, in the main thread: raising KeyboardInterrupt from
    that callback is exactly such a Ctrl-C, no timing luck needed."""
    interrupted: list[str] = []

    def ctrl_c_once(gate: Gate, result: GateResult) -> None:
        if gate.name == "manual" and not interrupted:
            interrupted.append(gate.name)
            raise KeyboardInterrupt

    run = run_contract(repo, "[settings]\njobs = 2\n"
                       '[[gate]]\nname = "first"\ncommand = "sleep 30"\n'
                       '[[gate]]\nname = "manual"\nkind = "manual"\n'
                       '[[gate]]\nname = "last"\ncommand = "sleep 30"\n',
                       on_finished=ctrl_c_once)
    assert interrupted and run.interrupted
    assert [(r.name, r.code) for r in run.results] == [
        ("first", "interrupted"), ("manual", "interrupted"), ("last", "interrupted")]
    validate(to_report(run))


# Sends a real signal to its own process from the report hook: the signal lands after every
# gate ended and before the report is written, the window no timing could aim at.
SIGNAL_IN_REPORT_HOOK = """
import os, signal

import pluggy

@pluggy.HookimplMarker("pytest")
def pytest_verifygate_modifyreport(report):
    os.kill(os.getpid(), signal.{name})
    report["hook_finished"] = True
"""


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_after_the_last_gate_still_writes_the_report(
    repo: Path, tmp_path: Path, name: str
) -> None:
    site = tmp_path / "site"
    write(site / "vg_late.py", SIGNAL_IN_REPORT_HOOK.format(name=name))
    write(repo / "verify.toml", '[settings]\nplugins = ["vg_late"]\n\n'
                                '[[gate]]\nname = "ok"\ncommand = "echo fine"\n')
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    done = verifygate("run", "--all", "--json", "report.json", cwd=repo,
                      env={"PYTHONPATH": path})
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads((repo / "report.json").read_text())
    validate(report)
    assert report["hook_finished"] is True  # the report was finished, not cut short
    assert [(g["name"], g["outcome"]) for g in report["gates"]] == [("ok", "passed")]
    assert "report: report.json" in done.stdout  # and the output says where it is


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_while_pytest_writes_the_report_still_writes_it(
    repo: Path, name: str
) -> None:
    write(repo / "conftest.py", SIGNAL_IN_REPORT_HOOK.format(name=name))
    write(repo / "verify.toml", '[[gate]]\nname = "ok"\ncommand = "echo fine"\n')
    done = subprocess.run(
        [PY, "-m", "pytest", "--verify-contract", "--verify-report", "report.json",
         "-p", "no:cacheprovider", "verify.toml"],
        cwd=repo, capture_output=True, timeout=120)
    output = done.stdout + done.stderr
    assert b"Traceback" not in output and b"INTERNALERROR" not in output, output.decode()
    report = json.loads((repo / "report.json").read_text())
    validate(report)
    assert report["hook_finished"] is True
    assert [(g["name"], g["outcome"]) for g in report["gates"]] == [("ok", "passed")]
    assert b"report: " in done.stdout
    # Held, not forgotten: the session ends interrupted, as `verifygate run` does (130).
    assert done.returncode == pytest.ExitCode.INTERRUPTED, output.decode()
    assert f"verifygate: interrupted by {name}".encode() in done.stdout


@pytest.mark.parametrize("target", [".", "sub/"])
def test_a_report_path_that_is_a_directory_is_never_named_as_written(
    repo: Path, target: str
) -> None:
    """The summary names the report's file only when it was written; the error is one line."""
    write(repo / "verify.toml", '[[gate]]\nname = "ok"\ncommand = "true"\n')
    (repo / "sub").mkdir()
    plugin = subprocess.run(
        [PY, "-m", "pytest", "--verify-contract", "--verify-report", target,
         "-p", "no:cacheprovider", "verify.toml"],
        cwd=repo, capture_output=True, text=True, timeout=120)
    cli = verifygate("run", "--all", "--json", target, cwd=repo)
    for status, output in ((plugin.returncode, plugin.stdout + plugin.stderr),
                           (cli.returncode, cli.stdout + cli.stderr)):
        assert status in (pytest.ExitCode.USAGE_ERROR, 2), output
        assert "Traceback" not in output and "INTERNALERROR" not in output, output
        assert "report: " not in output, output  # no claim that a report was written
        errors = [line for line in output.splitlines() if "is a directory" in line]
        assert len(errors) == 1 and "cannot write" in errors[0], output
