"""Where reports go and what reaches a terminal: the paths a user names for outputs, file names
no encoding can show, and gate output full of terminal control sequences.

Each ends with one clear line (or the output it promises) and never a traceback; nothing the
user named is replaced by something else.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .support import PY
from conftest import commit_all, git, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PASSING = '[[gate]]\nname = "ok"\ncommand = "true"\n'


@pytest.mark.parametrize("target", ["/", ".", "./", "sub/"])
def test_a_directory_as_the_report_path_is_one_clear_line(repo: Path, target: str) -> None:
    write(repo / "verify.toml", PASSING)
    (repo / "sub").mkdir()
    for flag in ("--json", "--junit"):
        done = verifygate("run", "--all", flag, target, cwd=repo)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert "is a directory" in done.stderr


def test_a_link_device_or_fifo_named_for_the_report_is_written_through(repo: Path) -> None:
    write(repo / "verify.toml", PASSING)
    write(repo / "real.json", "")
    os.symlink("real.json", repo / "link.json")
    # /dev/null through a link of the test's own: a regression replaces the link, never the
    # machine's device.
    os.symlink(os.devnull, repo / "null.xml")
    done = verifygate("run", "--all", "--json", "link.json", "--junit", "null.xml", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert (repo / "link.json").is_symlink()  # the link stays a link
    assert json.loads((repo / "real.json").read_text())["verdict"] == "passed"
    assert (repo / "null.xml").is_symlink()  # a device is written into, never replaced
    assert stat.S_ISCHR(os.stat(repo / "null.xml").st_mode)
    os.mkfifo(repo / "no-reader.json")
    done = verifygate("run", "--all", "--json", "no-reader.json", cwd=repo, timeout=30)
    assert done.returncode == 2 and "Traceback" not in done.stderr  # an error, not a hang
    assert stat.S_ISFIFO(os.lstat(repo / "no-reader.json").st_mode)


def test_file_names_no_encoding_can_show_never_crash_the_output(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "files"\ncommand = "false {files}"\n')
    commit_all(repo)
    (repo / os.fsdecode(b"bad\xff.py")).write_text("x = 1\n")
    git(repo, "add", "-A")
    summary = repo.parent / "summary.md"
    for output in ("text", "agent"):
        done = verifygate("run", "--staged", "--format", output, cwd=repo,
                          env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary),
                               "PYTHONIOENCODING": "utf-8"})
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
        assert "bad" in done.stdout
    assert "bad" in summary.read_text(encoding="utf-8")


HOSTILE = (
    "import sys\n"
    "sys.stdout.write('title\\x1b]0;owned\\x07 clip\\x1b]52;c;cGF5bG9hZA==\\x1b\\\\ '\n"
    "                 'dcs\\x1bP$q\"p\\x1b\\\\ query\\x1b[6n c1\\x9b2J osc8\\x9d0;t\\x07 '\n"
    "                 'bidi\\u202eexe.txt bell\\x07 end\\n')\n"
    "sys.exit(1)\n"
)


def test_terminal_control_sequences_never_reach_a_terminal(repo: Path) -> None:
    write(repo / "hostile.py", HOSTILE)
    write(repo / "verify.toml", f'[[gate]]\nname = "hostile"\ncommand = [{json.dumps(PY)}, '
                                '"hostile.py"]\n')
    unsafe = ("\x1b", "\x07", "\x9b", "\x9d", "\u202e")
    done = verifygate("run", "--all", cwd=repo)
    shown = done.stdout
    assert "clip" in shown and "bidi" in shown and "end" in shown
    assert not any(character in shown for character in unsafe), repr(shown)
    for verbosity in ((), ("-vv",)):
        pytest_run = subprocess.run(
            [sys.executable, "-m", "pytest", "--verify-contract", "verify.toml", "-p",
             "no:cacheprovider", "--color=no", *verbosity], cwd=repo, capture_output=True,
            timeout=120, check=False)
        shown = pytest_run.stdout.decode()
        assert "clip" in shown and "end" in shown, shown
        assert not any(character in shown for character in unsafe), repr(shown)


def test_gate_logs_hold_no_secret_in_clear(repo: Path, tmp_path: Path) -> None:
    """Logs are sinks too: the "full log" a report names is masked like the report, for a
    secret split by escape codes, a PEM key, encoded forms and one across a read boundary,
    through a retry's appended attempt and a log cut to its cap."""
    from .test_secrets import PEM, PRINTER, TOKEN, assert_hidden, secret_environment

    boundary = ("import os, sys; t = os.environ['API_TOKEN']; "
                "sys.stdout.buffer.write(b'x' * ((1 << 20) - 7) + t.encode() + b'\\n'); "
                "sys.stdout.flush(); sys.exit(1)")
    write(repo / "verify.toml",
          f'[settings]\nlog_max_bytes = 65536\n\n'
          f'[[gate]]\nname = "leak"\nretries = 1\n'
          f'command = [{json.dumps(PY)}, "-c", {json.dumps(PRINTER)}]\n\n'
          f'[[gate]]\nname = "boundary"\n'
          f'command = [{json.dumps(PY)}, "-c", {json.dumps(boundary)}]\n')
    report = tmp_path / "report.json"
    done = verifygate("run", "--all", "--json", str(report), cwd=repo,
                      env=secret_environment())
    assert done.returncode == 1, done.stderr
    gates = {gate["name"]: gate for gate in json.loads(report.read_text())["gates"]}
    leak = Path(gates["leak"]["log_path"]).read_text(errors="replace")
    assert leak.count("error: bad token") == 2  # both attempts are in the log
    assert "***" in leak
    assert_hidden(leak, TOKEN, PEM)
    cut = Path(gates["boundary"]["log_path"]).read_text(errors="replace")
    assert "bytes cut here" in cut  # over the cap: head and tail
    assert TOKEN not in cut and cut.rstrip().endswith("***")
