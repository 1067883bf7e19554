"""The runner with real processes: timeouts kill trees, output stays bounded, retries, cancel."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_verifygate.contract import load_contract
from pytest_verifygate.engine import plan_gates, run_gates
from pytest_verifygate.git.changes import ChangeSet
from pytest_verifygate.runner import scheduler
from pytest_verifygate.runner.records import GateResult
from pytest_verifygate.runner.scheduler import GateRunner
from pytest_verifygate.selection import select_gates

from conftest import write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PY = shlex.quote(sys.executable)


def alive(pid: int) -> bool:
    """A process exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_dead(pids: list[int], seconds: float = 5.0) -> list[int]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        living = [pid for pid in pids if alive(pid)]
        if not living:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def run(repo: Path, contract: str, **kwargs: object) -> dict[str, object]:
    write(repo / "verify.toml", contract)
    loaded = load_contract(repo / "verify.toml")
    changes = ChangeSet("all")
    result = run_gates(loaded, select_gates(loaded, changes), changes, **kwargs)  # type: ignore[arg-type]
    return {r.name: r for r in result.results}


def test_timeout_kills_the_whole_process_tree(repo: Path) -> None:
    script = """
import os, subprocess, sys, time
child = subprocess.Popen(["sleep", "300"])
if os.fork() == 0:  # a double-forked daemon that stays in the group
    if os.fork() == 0:
        open("daemon.pid", "w").write(str(os.getpid()))
        time.sleep(300)
    os._exit(0)
open("child.pid", "w").write(str(child.pid))
print("started", flush=True)
time.sleep(300)
"""
    write(repo / "tree.py", script)
    results = run(repo, f'[[gate]]\nname = "tree"\ncommand = "{sys.executable} tree.py"\n'
                        "timeout_seconds = 1.5\n")
    result = results["tree"]
    assert (result.outcome, result.code) == ("failed", "timeout")
    assert "started" in result.output_tail
    pids = [int((repo / name).read_text()) for name in ("child.pid", "daemon.pid")]
    assert wait_dead(pids) == []


def test_a_grandchild_holding_the_pipe_does_not_hang_the_run(repo: Path) -> None:
    contract = ('[[gate]]\nname = "bg"\nshell = true\ntimeout_seconds = 60\n'
                'command = "sleep 300 & echo $! > bg.pid; echo done"\n')
    started = time.monotonic()
    result = run(repo, contract)["bg"]
    assert time.monotonic() - started < 30  # far below the 300 s the grandchild would take
    assert result.outcome == "passed" and "done" in result.output_tail
    assert wait_dead([int((repo / "bg.pid").read_text())]) == []


def test_huge_output_keeps_only_the_tail_and_logs_everything(repo: Path) -> None:
    contract = f"""
[settings]
output_tail_bytes = 1024
[[gate]]
name = "loud"
command = ["{sys.executable}", "-c", "import sys; sys.stdout.write('x' * 5_000_000 + 'END')"]
"""
    result = run(repo, contract)["loud"]
    assert result.outcome == "passed"
    assert result.output_truncated and result.output_bytes == 5_000_003
    assert len(result.output_tail) == 1024 and result.output_tail.endswith("END")
    assert result.log_path is not None
    log = Path(result.log_path)
    assert log.stat().st_size == 5_000_003
    assert ".git/verifygate/logs" in log.as_posix()


def test_binary_output_is_decoded_with_replacement(repo: Path) -> None:
    contract = f"""
[[gate]]
name = "bin"
command = ["{sys.executable}", "-c",
           "import sys; sys.stdout.buffer.write(bytes(range(256))); sys.exit(2)"]
"""
    result = run(repo, contract)["bin"]
    assert (result.outcome, result.code, result.exit_code) == ("failed", "command_failed", 2)
    assert "\ufffd" in result.output_tail


def test_signal_deaths_are_command_failed_with_the_signal(repo: Path) -> None:
    contract = f"""
[[gate]]
name = "killed"
command = ["{sys.executable}", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
"""
    result = run(repo, contract)["killed"]
    assert (result.code, result.signal, result.exit_code) == ("command_failed", 11, None)


def test_retries_mark_flaky_gates(repo: Path) -> None:
    counter = repo / "count"
    script = (f"import pathlib, sys; p = pathlib.Path({str(counter)!r}); "
              "n = int(p.read_text()) if p.exists() else 0; p.write_text(str(n + 1)); "
              "sys.exit(0 if n >= 1 else 1)")
    contract = (f'[[gate]]\nname = "flaky"\nretries = 2\n'
                f'command = ["{sys.executable}", "-c", {script!r}]\n')
    result = run(repo, contract)["flaky"]
    assert (result.outcome, result.attempts, result.flaky) == ("passed", 2, True)


def test_missing_codes_are_not_retried_and_can_be_skipped(repo: Path) -> None:
    write(repo / "Makefile", "all:\n\ttrue\n")
    contract = """
[[gate]]
name = "target"
command = "make nosuchtarget"
retries = 3
[[gate]]
name = "skip-missing"
command = "make nosuchtarget"
on_missing = "skip"
"""
    results = run(repo, contract)
    assert (results["target"].code, results["target"].attempts) == ("missing_make_target", 1)
    skipped = results["skip-missing"]
    assert skipped.outcome == "skipped" and "missing_make_target" in (skipped.reason or "")


def test_spawn_problems_are_setup_issues(repo: Path) -> None:
    contract = """
[[gate]]
name = "nope"
command = "definitely-not-installed-xyz --version"
[[gate]]
name = "nocwd"
command = "true"
cwd = "missing-dir"
"""
    results = run(repo, contract)
    assert results["nope"].code == "setup_or_bootstrap_issue"
    assert "program not found on PATH" in results["nope"].output_tail
    assert results["nocwd"].code == "setup_or_bootstrap_issue"
    assert "does not exist" in results["nocwd"].output_tail


def test_gates_run_concurrently_up_to_jobs(repo: Path) -> None:
    gates = "".join(
        f'[[gate]]\nname = "g{index}"\ncommand = ["{sys.executable}", "-c", '
        f'"import time; s = time.time(); time.sleep(0.4); print(s, time.time())"]\n'
        for index in range(4)
    )
    results = run(repo, gates, jobs=4)
    spans = [tuple(map(float, r.output_tail.split())) for r in results.values()]
    latest_start = max(start for start, _ in spans)
    earliest_end = min(end for _, end in spans)
    assert latest_start < earliest_end  # all four were running at the same moment
    sequential = run(repo, gates, jobs=1)
    spans = sorted(tuple(map(float, r.output_tail.split())) for r in sequential.values())
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(3))


def test_cancel_interrupts_running_and_waiting_gates(repo: Path) -> None:
    write(repo / "verify.toml", "".join(
        f'[[gate]]\nname = "s{index}"\ncommand = "sleep 30"\n' for index in range(3)))
    contract = load_contract(repo / "verify.toml")
    changes = ChangeSet("all")
    plans = plan_gates(contract, select_gates(contract, changes))
    runner = GateRunner(plans, jobs=1, log_dir=None)
    runner.start()
    threading.Timer(0.5, runner.cancel).start()
    started = time.monotonic()
    results = runner.results()
    runner.close()
    assert time.monotonic() - started < 10
    assert [(r.outcome, r.code) for r in results] == [("failed", "interrupted")] * 3
    assert results[0].attempts == 1 and results[2].attempts == 0


def test_files_expansion_runs_in_the_gate_cwd(repo: Path) -> None:
    write(repo / "pkg" / "a.py", "")
    write(repo / "pkg" / "-rf", "")
    write(repo / "top.py", "")
    contract = f"""
[[gate]]
name = "list"
cwd = "pkg"
when_changed = ["pkg/**"]
command = ["{sys.executable}", "-c", "import sys; print(sys.argv[1:])", "{{files}}"]
"""
    write(repo / "verify.toml", contract)
    loaded = load_contract(repo / "verify.toml")
    changes = ChangeSet("files", files=("pkg/-rf", "pkg/a.py", "pkg/gone.py", "top.py"),
                        deleted=frozenset({"pkg/gone.py"}))
    (result,) = run_gates(loaded, select_gates(loaded, changes), changes).results
    assert result.output_tail.strip() == "['./-rf', 'a.py']"


@pytest.mark.parametrize("shell", [False, True])
def test_files_placeholder_with_nothing_to_expand_skips(repo: Path, shell: bool) -> None:
    write(repo / "verify.toml", f'[[gate]]\nname = "f"\nshell = {str(shell).lower()}\n'
                                'command = "echo {files}"\nwhen_changed = ["*.md"]\n')
    loaded = load_contract(repo / "verify.toml")
    changes = ChangeSet("files", files=("x.md",), deleted=frozenset({"x.md"}))
    (result,) = run_gates(loaded, select_gates(loaded, changes), changes).results
    assert (result.outcome, result.reason) == ("skipped", "no matching files for {files}")


def test_a_chunk_killed_by_a_signal_fails_the_gate_even_if_later_chunks_pass(
    repo: Path,
) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "chunks"\ncommand = "true"\n')
    contract = load_contract(repo / "verify.toml")
    changes = ChangeSet("all")
    (plan,) = plan_gates(contract, select_gates(contract, changes))
    chunked = plan._replace(invocations=(("sh", "-c", "kill -SEGV $$"), ("true",)))
    with GateRunner([chunked], jobs=1) as runner:
        (result,) = runner.results()
    assert (result.outcome, result.code, result.signal) == ("failed", "command_failed", 11)


def test_the_records_and_the_cache_load_without_the_scheduler() -> None:
    # The records are what the reports and the cache name: they must stay cheap to import,
    # and the cache (which the scheduler calls) must not need the scheduler back.
    script = ("import json, sys, pytest_verifygate.runner.records; a = list(sys.modules); "
              "import pytest_verifygate.result_cache; "
              "print(json.dumps([a, list(sys.modules)]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    with_records, with_cache = json.loads(done.stdout)
    heavy = {"subprocess", "selectors", "threading", "pytest_verifygate.contract.load",
             "pytest_verifygate.runner.process", "pytest_verifygate.runner.scheduler"}
    assert heavy.isdisjoint(with_records)
    assert {"pytest_verifygate.runner.process",
            "pytest_verifygate.runner.scheduler"}.isdisjoint(with_cache)


def test_run_order_puts_needs_first_and_keeps_the_rest_in_place(repo: Path) -> None:
    from pytest_verifygate.contract import Gate
    from pytest_verifygate.runner.records import GatePlan
    from pytest_verifygate.runner.scheduler import run_order

    def plan(name: str, *needs: str) -> GatePlan:
        return GatePlan(Gate(name, "true", needs=needs), repo)

    plans = [plan("test", "build", "elsewhere"), plan("lint"), plan("build", "gen"),
             plan("gen"), plan("docs")]
    assert [p.gate.name for p in run_order(plans)] == ["lint", "gen", "build", "test", "docs"]


def test_cancel_interrupts_gates_waiting_for_their_needs(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "slow"\ncommand = "sleep 30"\n'
                                '[[gate]]\nname = "after"\ncommand = "true"\nneeds = ["slow"]\n'
                                '[[gate]]\nname = "other"\ncommand = "sleep 30"\n')
    contract = load_contract(repo / "verify.toml")
    changes = ChangeSet("all")
    runner = GateRunner(plan_gates(contract, select_gates(contract, changes)), jobs=4)
    runner.start()
    threading.Timer(0.5, runner.cancel).start()
    results = {result.name: result for result in runner.results()}
    runner.close()
    assert {name: (r.outcome, r.code) for name, r in results.items()} == dict.fromkeys(
        ("slow", "after", "other"), ("failed", "interrupted"))
    assert results["after"].attempts == 0  # it never started: not skipped, interrupted


def test_ctrl_c_while_the_workers_start_leaves_no_traceback(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C between making a worker thread and starting it: closing the run must not try
    to join the thread that never started (a RuntimeError instead of the interrupted run)."""
    write(repo / "verify.toml", "".join(f'[[gate]]\nname = "g{i}"\ncommand = "sleep 30"\n'
                                        for i in range(3)))
    contract = load_contract(repo / "verify.toml")
    runner = GateRunner(plan_gates(contract, select_gates(contract, ChangeSet("all"))), jobs=3)
    started = threading.Thread.start
    calls = []

    def start_then_interrupt(thread: threading.Thread) -> None:
        calls.append(thread.name)
        if thread.name == "gate-1":
            raise KeyboardInterrupt
        started(thread)

    monkeypatch.setattr(threading.Thread, "start", start_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        runner.start()
    monkeypatch.setattr(threading.Thread, "start", started)
    runner.close()  # cancels gate-0's gate and joins it; gate-1 never ran
    assert calls[:2] == ["gate-0", "gate-1"]


# A {files} gate's chunk: logs "start|end <pid> <time> <files>" and prints its files; a chunk
# given a file named bad* fails with exit status 3 after saying so.
CHUNK = """\
import os, sys, time
log, seconds, files = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
def note(word):
    with open(log, "a") as handle:
        handle.write(f"{word} {os.getpid()} {time.time()} {len(files)}\\n")
note("start")
time.sleep(seconds)
print("chunk", *files, flush=True)
note("end")
bad = [name for name in files if name.startswith("bad")]
if bad:
    print("BAD", *bad)
    sys.exit(3)
"""


def chunked(repo: Path, monkeypatch: pytest.MonkeyPatch, files: list[str], keys: str = "",
            seconds: float = 0.5, jobs: int = 1) -> tuple[GateResult, list[list[str]]]:
    """A {files} gate over ``files`` on four cores (whatever this machine has), one job; its
    result and the chunks' log lines."""
    monkeypatch.setattr(scheduler, "available_cores", lambda: 4)
    write(repo / "chunk.py", CHUNK)
    for name in files:
        write(repo / name, "")
    write(repo / "verify.toml", f'[[gate]]\nname = "g"\n{keys}\ncommand = '
                                f'"{sys.executable} chunk.py events.log {seconds} {{files}}"\n')
    loaded = load_contract(repo / "verify.toml")
    changes = ChangeSet("files", files=tuple(files))
    (result,) = run_gates(loaded, select_gates(loaded, changes), changes, jobs=jobs).results
    lines = [line.split() for line in (repo / "events.log").read_text().splitlines()]
    return result, lines


FILES = [f"f{index:02}.txt" for index in range(16)]


def test_one_gate_s_files_run_in_chunks_at_once_on_the_free_cores(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, lines = chunked(repo, monkeypatch, FILES)
    starts = [float(line[2]) for line in lines if line[0] == "start"]
    ends = [float(line[2]) for line in lines if line[0] == "end"]
    assert len(starts) == 4 and sum(int(line[3]) for line in lines if line[0] == "start") == 16
    assert max(starts) < min(ends)  # all four chunks were running at the same moment
    assert result.outcome == "passed"
    # Each chunk's output whole, in chunk order: the files in their order.
    assert result.output_tail.splitlines() == [f"chunk {' '.join(FILES[part:part + 4])}"
                                               for part in range(0, 16, 4)]


def test_a_failing_chunk_fails_the_gate_with_its_own_output_and_code(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = sorted([*FILES[:7], "bad.txt"])
    result, lines = chunked(repo, monkeypatch, files)
    assert len([line for line in lines if line[0] == "start"]) == 2
    assert (result.outcome, result.code, result.exit_code) == (
        "failed", "command_failed", 3)
    assert files[0] == "bad.txt"
    assert result.output_tail.splitlines() == [
        f"chunk {' '.join(files[:4])}", "BAD bad.txt", f"chunk {' '.join(files[4:])}"]


@pytest.mark.parametrize("key", ["serial = true", "exclusive = true"])
def test_serial_and_exclusive_gates_are_never_split(
        repo: Path, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    result, lines = chunked(repo, monkeypatch, FILES, key, seconds=0)
    assert [(line[0], line[3]) for line in lines] == [("start", "16"), ("end", "16")]
    assert result.outcome == "passed"


def test_chunks_share_the_gate_s_deadline_and_leave_no_process(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = time.monotonic()
    result, lines = chunked(repo, monkeypatch, FILES, "timeout_seconds = 1", seconds=60)
    assert time.monotonic() - started < 15
    assert (result.outcome, result.code) == ("failed", "timeout")
    pids = [int(line[1]) for line in lines if line[0] == "start"]
    assert len(pids) == 4 and wait_dead(pids) == []


def test_a_chunk_that_rewrites_a_file_fails_the_gate(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixer = CHUNK.replace('note("start")', 'note("start")\nif "f05.txt" in files: '
                                           'open("f05.txt", "w").write("fixed")')
    monkeypatch.setattr(sys.modules[__name__], "CHUNK", fixer)
    result, lines = chunked(repo, monkeypatch, FILES, seconds=0)
    assert len([line for line in lines if line[0] == "start"]) == 4
    assert (result.outcome, result.modified_files) == (
        "failed", ("f05.txt",))


@pytest.mark.parametrize("on_missing", ["skip", "fail"])
def test_each_chunk_is_judged_on_its_own_output(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                on_missing: str) -> None:
    """pytest over chunks of files: a chunk of modules without tests exits 5 (no tests); a
    failing test in another chunk still fails the gate, and with every test passing the gate
    passes, whatever the contract does with a run that finds no tests."""
    monkeypatch.setattr(scheduler, "available_cores", lambda: 2)
    files = [*(f"src/a{index}.py" for index in range(5)),
             *(f"tests/test_b{index}.py" for index in range(5))]
    for name in files:
        write(repo / name, "def test_ok():\n    assert True\n" if "test_" in name else "x = 1\n")
    write(repo / "verify.toml", f'[settings]\non_missing = "{on_missing}"\n[[gate]]\n'
          f'name = "tests"\ncommand = "{sys.executable} -m pytest -q -p no:cacheprovider '
          '{files}"\nwhen_changed = ["**/*.py"]\n')
    loaded = load_contract(repo / "verify.toml")
    changes = ChangeSet("files", files=tuple(files))

    def run() -> GateResult:
        (result,) = run_gates(loaded, select_gates(loaded, changes), changes, jobs=1).results
        return result

    assert run().outcome == "passed"
    write(repo / "tests/test_b3.py", "def test_broken():\n    assert False\n")
    result = run()
    assert (result.outcome, result.code, result.exit_code) == ("failed", "command_failed", 1)
