"""What is read back from ``.git/verifygate`` cannot forge a pass, hang a run or crash it.

Anything that can write the work tree can write ``.git``. Each test plants what such a writer
would (a forged entry, a FIFO, a huge or deeply nested file) and runs the real command line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_verifygate.engine import RunRequest, prepare
from pytest_verifygate.state.outputs import record_path
from pytest_verifygate.state.storage import state_dir
from test_agent_hook import rounds_path

from .support import PY
from conftest import commit_all, git, stop, verifygate, write


def outputs_record(repo: Path) -> Path:
    """The record of the package's own outputs: in the user's private state directory."""
    path = record_path(repo)
    assert path is not None
    return path

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

FAILING = f'[[gate]]\nname = "check"\ncommand = [{json.dumps(PY)}, "-c", "raise SystemExit(1)"]\n'


def run_json(repo: Path, *args: str, timeout: float = 60) -> dict[str, Any]:
    done = verifygate("run", "--all", "--format", "json", *args, cwd=repo, timeout=timeout)
    assert "Traceback" not in done.stderr, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


# --------------------------------------------------------------------------------------------
# state files in general


def test_fifos_in_place_of_state_files_never_hang_a_run(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "lint"\ncommand = "true"\ncache = true\n')
    commit_all(repo)
    plan = prepare(RunRequest(start=repo))
    slot = plan.gate_plans()[0].cache
    assert slot is not None
    for fifo in (slot.path, outputs_record(repo), state_dir(repo) / "durations.json"):
        fifo.parent.mkdir(parents=True, exist_ok=True)
        if fifo.exists():
            fifo.unlink()
        os.mkfifo(fifo)
    report = run_json(repo, timeout=30)
    assert report["verdict"] == "passed" and report["gates"][0]["cached"] is False
    write(repo / "new.py", "x = 1\n")  # a change: the record of outputs is read too
    assert run_json(repo, "--jobs", "2", timeout=30)["verdict"] == "passed"


def test_a_record_of_outputs_planted_in_the_git_directory_hides_no_change(repo: Path) -> None:
    """A record of the package's own outputs written where the work tree's writers reach,
    naming a real change, hides nothing: only the one in the private directory is read."""
    write(repo / "verify.toml", FAILING.replace('[[gate]]', '[[gate]]\nwhen_changed = ["*.py"]'))
    commit_all(repo)
    write(repo / "app.py", "broken\n")
    git(repo, "add", "app.py")
    path = os.path.abspath(repo / "app.py")
    info = os.stat(path)
    record = state_dir(repo) / "outputs"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_bytes(f"{info.st_size} {info.st_mtime_ns} ".encode() + path.encode() + b"\0")
    done = verifygate("run", "--staged", "--format", "json", cwd=repo, timeout=60)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["changes"]["files"] == ["app.py"]


@pytest.mark.parametrize("name", ["durations.json"])
@pytest.mark.parametrize("content", [
    b"\x00\xff\xfe\x80 not text" * 64,
    b'{"version": 1, "durations": {"a": 1}}',
    b"[1, 2, 3]\n",
], ids=["bytes", "wrong-shape", "list"])
def test_a_bad_state_file_is_ignored_with_one_warning_naming_it(
        repo: Path, name: str, content: bytes) -> None:
    """Read more than once in a run (to order the gates, to record; to find the changes, to
    remember the outputs): still one line, then the run replaces the file."""
    write(repo / "verify.toml",
          '[[gate]]\nname = "a"\ncommand = "true"\n[[gate]]\nname = "b"\ncommand = "true"\n')
    commit_all(repo)
    write(repo / "new.py", "x = 1\n")
    git(repo, "add", "new.py")  # a change: the record of outputs is read too
    path = state_dir(repo) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    args = ("run", "--staged", "--jobs", "2", "--json", "report.json")
    done = verifygate(*args, cwd=repo, timeout=60)
    stderr = done.stderr
    assert done.returncode == 0, stderr
    (line,) = stderr.splitlines()  # one line, and nothing else: no traceback
    assert line.startswith("verifygate: warning: ") and str(path) in line, line
    again = verifygate(*args, cwd=repo, timeout=60)
    assert again.returncode == 0 and again.stderr == "", again.stderr


# --------------------------------------------------------------------------------------------
# the result cache


def forged_entry(repo: Path) -> Path:
    """A pass for the failing gate's current key, written as an older version wrote one."""
    plan = prepare(RunRequest(start=repo))
    slot = plan.gate_plans()[0].cache
    assert slot is not None
    slot.path.parent.mkdir(parents=True, exist_ok=True)
    slot.path.write_text(json.dumps({"version": 1, "key": slot.key, "gate": "check",
                                     "output_tail": "all good\n", "output_truncated": False,
                                     "output_bytes": 9}))
    return slot.path


def test_a_pass_planted_in_the_git_directory_does_not_pass_a_failing_gate(repo: Path) -> None:
    """Whatever the gates check can write ``.git``: a pass written where earlier versions kept
    the cache is not read."""
    write(repo / "verify.toml", FAILING + "cache = true\n")
    commit_all(repo)
    forged = forged_entry(repo)
    planted = state_dir(repo) / "cache" / forged.name
    planted.parent.mkdir(parents=True)
    forged.rename(planted)
    done = verifygate("run", "--all", "--format", "json", cwd=repo)
    gate = json.loads(done.stdout)["gates"][0]
    assert (gate["outcome"], gate["cached"]) == ("failed", False)
    assert done.returncode == 1


@pytest.mark.parametrize("content", [b"x" * (1 << 20), b"[" * 100_000, b"\xff\xfe\x00"])
def test_oversized_nested_or_binary_entries_are_ignored(repo: Path, content: bytes) -> None:
    write(repo / "verify.toml", FAILING + "cache = true\n")
    commit_all(repo)
    forged_entry(repo).write_bytes(content)
    gate = run_json(repo)["gates"][0]
    assert (gate["outcome"], gate["cached"]) == ("failed", False)


# --------------------------------------------------------------------------------------------
# inputs the cache did not see

# Passes while ``input.txt`` (or the file named) says "good"; counts its runs.
CHECK = ("import pathlib, sys; open(sys.argv[1], 'a').write('ran\\n'); "
         "sys.exit(0 if 'good' in pathlib.Path(sys.argv[2]).read_text() else 1)")


def cached_check(repo: Path, counter: Path, path: str, inputs: list[str] | None) -> None:
    """The gate ``check`` on ``path``, keyed by ``inputs`` (None: every file)."""
    keyed = f'inputs = {json.dumps(inputs)}\n' if inputs is not None else ""
    write(repo / "verify.toml", f'[[gate]]\nname = "check"\ncache = true\n{keyed}'
          f'command = [{json.dumps(PY)}, "-c", {json.dumps(CHECK)}, '
          f'{json.dumps(str(counter))}, {json.dumps(path)}]\n')


def outcome(repo: Path) -> tuple[str, bool]:
    gate = run_json(repo)["gates"][0]
    return gate["outcome"], gate["cached"]


@pytest.mark.parametrize("flag", ["--skip-worktree", "--assume-unchanged"])
def test_edits_git_is_told_to_ignore_still_run_the_gate(repo: Path, tmp_path: Path,
                                                         flag: str) -> None:
    cached_check(repo, tmp_path / "counter", "input.txt", ["input.txt"])
    write(repo / "input.txt", "good\n")
    commit_all(repo)
    assert outcome(repo) == ("passed", False)
    assert outcome(repo) == ("passed", True)
    git(repo, "update-index", flag, "input.txt")
    write(repo / "input.txt", "bad!\n")  # same size: git sees nothing at all
    assert git(repo, "status", "--porcelain") == ""
    assert outcome(repo) == ("failed", False)


def test_an_ignored_file_named_in_inputs_is_hashed(repo: Path, tmp_path: Path) -> None:
    cached_check(repo, tmp_path / "counter", "config/local.env", ["config/local.env", "src/**"])
    write(repo / ".gitignore", "config/local.env\nbuild/\n")
    write(repo / "config" / "local.env", "good\n")
    commit_all(repo)
    assert outcome(repo) == ("passed", False)
    assert outcome(repo) == ("passed", True)
    write(repo / "config" / "local.env", "bad!\n")
    assert outcome(repo) == ("failed", False)


def test_a_file_in_an_ignored_directory_named_in_inputs_is_hashed(repo: Path,
                                                                   tmp_path: Path) -> None:
    cached_check(repo, tmp_path / "counter", "build/out.txt", ["build/**"])
    write(repo / ".gitignore", "build/\n")
    write(repo / "build" / "out.txt", "good\n")
    commit_all(repo)
    assert outcome(repo) == ("passed", False)
    assert outcome(repo) == ("passed", True)
    write(repo / "build" / "out.txt", "bad!\n")
    assert outcome(repo) == ("failed", False)


@pytest.fixture
def with_submodule(repo: Path, tmp_path: Path) -> Path:
    library = tmp_path / "library"
    library.mkdir()
    git(library, "init", "-q", "-b", "main")
    for key, value in (("user.email", "t@example.invalid"), ("user.name", "T"),
                       ("commit.gpgsign", "false")):
        git(library, "config", key, value)
    write(library / "input.txt", "good\n")
    commit_all(library)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    return repo / "lib"


@pytest.mark.parametrize("committed", [False, True])
def test_a_changed_submodule_runs_the_gate_again(repo: Path, tmp_path: Path,
                                                 with_submodule: Path, committed: bool) -> None:
    cached_check(repo, tmp_path / "counter", "lib/input.txt", ["lib/**"])
    commit_all(repo)
    assert outcome(repo) == ("passed", False)
    assert outcome(repo) == ("passed", True)
    write(with_submodule / "input.txt", "bad!\n")
    if committed:  # the submodule checks out another commit: the superproject's id is stale
        commit_all(with_submodule)
    assert outcome(repo) == ("failed", False)


# --------------------------------------------------------------------------------------------
# inputs reached through links, and inputs that cannot be hashed


def fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


def link(path: Path, target: Path | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


@pytest.mark.parametrize("tracked", [True, False], ids=["tracked", "untracked"])
@pytest.mark.parametrize(("links", "target", "path", "inputs"), [
    ({"data.txt": "../elsewhere/input.txt"}, "elsewhere/input.txt", "data.txt", ["data.txt"]),
    ({"data": "../elsewhere"}, "elsewhere/input.txt", "data/input.txt", ["data/**"]),
    ({"data": "../elsewhere"}, "elsewhere/input.txt", "data/input.txt", None),
    ({"data": "../elsewhere"}, "elsewhere/deep/input.txt", "data/deep/input.txt", ["*.txt"]),
    ({"a.txt": "b.txt", "b.txt": "../elsewhere/input.txt"}, "elsewhere/input.txt", "a.txt",
     ["a.txt"]),
    ({"data.txt": "shared/input.txt"}, "repo/shared/input.txt", "data.txt", ["data.txt"]),
    ({"build/data": "../../elsewhere"}, "elsewhere/input.txt", "build/data/input.txt",
     ["build/**"]),
], ids=["file-outside", "directory-outside", "every-file", "unanchored-pattern", "chain",
        "file-inside", "in-ignored-directory"])
def test_a_link_is_keyed_by_what_it_points_to(
    repo: Path, tmp_path: Path, links: dict[str, str], target: str, path: str,
    inputs: list[str] | None, tracked: bool,
) -> None:
    """Git's id of a link is its target's name: the content there, read by the gate through
    the link, must key the pass too (here or outside the repository)."""
    write(tmp_path / target, "good\n")
    write(repo / ".gitignore", "build/\n")
    cached_check(repo, tmp_path / "counter", path, inputs)
    for name, pointed in links.items():
        link(repo / name, pointed)
    if tracked:
        commit_all(repo)
    else:
        git(repo, "add", "verify.toml")
        git(repo, "commit", "-q", "-m", "contract")
    assert outcome(repo) == ("passed", False)
    assert outcome(repo) == ("passed", True)
    write(tmp_path / target, "bad!\n")  # same size, same link: only the content differs
    assert outcome(repo) == ("failed", False)


# Always passes, reading none of its inputs; counts its runs.
COUNT = "import sys; open(sys.argv[1], 'a').write('r')"


def counted(repo: Path, counter: Path, inputs: list[str]) -> None:
    """The gate ``count``, keyed by ``inputs``, committed with whatever the repository holds."""
    write(repo / "verify.toml", f'[[gate]]\nname = "count"\ncache = true\n'
          f'inputs = {json.dumps(inputs)}\n'
          f'command = [{json.dumps(PY)}, "-c", {json.dumps(COUNT)}, {json.dumps(str(counter))}]\n')
    commit_all(repo)


def test_a_dangling_link_is_keyed_by_its_missing_target(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counted(repo, counter, ["data.txt"])
    (repo / "data.txt").symlink_to(tmp_path / "elsewhere" / "data.txt")
    git(repo, "add", "data.txt")
    assert outcome(repo) == ("passed", False)
    assert outcome(repo) == ("passed", True)  # a missing target is a state like any other
    write(tmp_path / "elsewhere" / "data.txt", "now here\n")
    assert outcome(repo) == ("passed", False)
    assert counter.read_text() == "rr"


def loop_of_links(repo: Path, elsewhere: Path) -> None:
    link(repo / "in" / "a", "b")
    link(repo / "in" / "b", "a")


def directory_in_itself(repo: Path, elsewhere: Path) -> None:
    write(elsewhere / "input.txt", "x\n")
    link(elsewhere / "again", elsewhere)
    link(repo / "in" / "data", elsewhere)


def fifo_outside(repo: Path, elsewhere: Path) -> None:
    fifo(elsewhere / "pipe")
    link(repo / "in" / "pipe", elsewhere / "pipe")


def fifo_in_ignored_directory(repo: Path, elsewhere: Path) -> None:
    write(repo / ".gitignore", "in/\n")
    write(repo / "in" / "plain.txt", "x\n")
    fifo(repo / "in" / "pipe")


def tracked_file_now_a_fifo(repo: Path, elsewhere: Path) -> None:
    write(repo / "in" / "pipe", "x\n")
    commit_all(repo)
    (repo / "in" / "pipe").unlink()
    fifo(repo / "in" / "pipe")


def device(repo: Path, elsewhere: Path) -> None:
    link(repo / "in" / "zero", "/dev/zero")


def huge_linked_directory(repo: Path, elsewhere: Path) -> None:
    from pytest_verifygate.git.inputs import MAX_WALKED_FILES

    elsewhere.mkdir()
    for index in range(MAX_WALKED_FILES + 1):
        (elsewhere / str(index)).touch()
    link(repo / "in" / "data", elsewhere)


def too_large(repo: Path, elsewhere: Path) -> None:
    from pytest_verifygate.git.inputs import MAX_HASHED_BYTES

    big = write(elsewhere / "big", "")
    os.truncate(big, MAX_HASHED_BYTES + 1)  # sparse: nothing is written
    link(repo / "in" / "big", big)


@pytest.mark.parametrize("make", [loop_of_links, directory_in_itself, fifo_outside,
                                  fifo_in_ignored_directory, tracked_file_now_a_fifo, device,
                                  huge_linked_directory, too_large])
def test_an_input_that_cannot_be_hashed_runs_the_gate_and_says_why(
    repo: Path, tmp_path: Path, make: Callable[[Path, Path], None]
) -> None:
    """When in doubt, run the gate: never read a FIFO or a device, never follow a loop."""
    counter = tmp_path / "counter"
    write(repo / "plain.txt", "x\n")
    counted(repo, counter, ["in/**"])
    make(repo, tmp_path / "elsewhere")
    warnings = []
    for runs in (1, 2):
        done = verifygate("run", "--all", "--format", "json", cwd=repo, timeout=30)
        gate = json.loads(done.stdout)["gates"][0]
        assert (gate["outcome"], gate["cached"]) == ("passed", False)
        assert counter.read_text() == "r" * runs
        warnings.append(done.stderr)
    assert all("runs uncached" in text and "in/" in text for text in warnings), warnings
    assert "Traceback" not in "".join(warnings)


# --------------------------------------------------------------------------------------------
# the agent hook's state


@pytest.fixture
def failing_project(repo: Path) -> Path:
    write(repo / "verify.toml", FAILING)
    write(repo / "a.py", "x = 1\n")
    commit_all(repo)
    write(repo / "a.py", "x = 2\n")  # a change for the hook to verify
    return repo


def test_a_round_count_planted_in_the_git_directory_cannot_let_an_agent_stop(
        failing_project: Path) -> None:
    assert stop(failing_project, timeout=60).blocked
    # Where earlier versions counted: "a human already reviewed it".
    planted = state_dir(failing_project) / "agent" / "s-1.json"
    planted.parent.mkdir(parents=True)
    planted.write_text(json.dumps({**json.loads(rounds_path(failing_project).read_text()),
                                   "rounds": 99}))
    answer = stop(failing_project, timeout=60)
    assert answer.blocked, answer
    assert "round 2 of 3" in answer.reason


@pytest.mark.parametrize("content", [b"[" * 100_000, b"{" * 5 + b"x" * (2 << 20)])
def test_a_nested_or_huge_agent_state_is_ignored(failing_project: Path, content: bytes) -> None:
    path = rounds_path(failing_project)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    answer = stop(failing_project, timeout=60)
    assert answer.blocked, answer  # not "internal error: allowed"


def test_a_fifo_as_agent_state_never_hangs_the_hook(failing_project: Path) -> None:
    path = rounds_path(failing_project)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    assert stop(failing_project, timeout=60).blocked


def test_no_state_file_breaks_a_run_in_process(repo: Path) -> None:
    """The readers themselves, on the worst files, in this process: no exception at all."""
    from pytest_verifygate.agents.state import load_state

    bad = repo / "bad"
    for content in (b"", b"\x00", b"[" * 200_000, b"{" * 200_000, b'{"rounds": "1"}'):
        bad.write_bytes(content)
        assert load_state(bad).rounds == 0


def test_without_a_private_directory_nothing_is_cached_and_all_still_runs(
        repo: Path, tmp_path: Path) -> None:
    blocker = write(tmp_path / "state-home", "a file where the state directory would be\n")
    write(repo / "verify.toml", '[[gate]]\nname = "lint"\ncommand = "true"\ncache = true\n')
    commit_all(repo)
    for _ in range(2):
        done = verifygate("run", "--all", "--format", "json", cwd=repo,
                          env={"XDG_STATE_HOME": str(blocker)})
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert json.loads(done.stdout)["gates"][0]["cached"] is False
    assert not list((repo / ".git" / "verifygate").glob("cache/*.json"))
    assert not (tmp_path / "state-home").is_dir()
