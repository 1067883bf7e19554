"""An attacker's pass over the newest commands and state: what anything that can write the
work tree or ``.git`` (a gate, an agent) can plant, and what the tool must never do with it."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_verifygate import githooks
from pytest_verifygate.agents.status import status_path
from pytest_verifygate.filetypes import _finder
from pytest_verifygate.report.github import write_step_outputs
from reliability.support import examples
from test_agent_hook import BAD, GOOD, checked_project

from conftest import begun, commit_all, git, read_output_file, verifygate, write


@pytest.mark.slow
def test_install_never_writes_through_a_planted_temp_link(repo: Path, tmp_path: Path) -> None:
    # The hook's temp name is predictable: a link there must not lead the write (and the
    # chmod 755) to a file of the user's.
    victim = write(tmp_path / "victim.txt", "the user's file\n")
    victim.chmod(0o600)
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in ("pre-commit", "pre-push"):
        os.symlink(victim, hooks / f".{name}.verifygate-tmp")
    result = verifygate("install", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "the user's file\n"
    assert victim.stat().st_mode & 0o777 == 0o600
    assert "pytest_verifygate run --staged" in (hooks / "pre-commit").read_text()
    assert not (hooks / "pre-commit").is_symlink()


def _claude_stop(cwd: Path, project_dir: Path) -> subprocess.CompletedProcess[str]:
    """The hook as Claude Code runs it: ``CLAUDE_PROJECT_DIR`` names the project, the
    payload's ``cwd`` is wherever the agent's shell was left."""
    payload = {"session_id": "s-1", "transcript_path": "/nonexistent.jsonl", "cwd": str(cwd),
               "hook_event_name": "Stop", "stop_hook_active": False}
    begun(project_dir, "s-1")  # the session began in the project
    return subprocess.run([sys.executable, "-m", "pytest_verifygate", "agent-hook"],
                          input=json.dumps(payload), capture_output=True, text=True,
                          cwd=project_dir, check=False, timeout=120,
                          env={**os.environ, "CLAUDE_PROJECT_DIR": str(project_dir)})


@pytest.mark.slow
def test_a_stop_from_a_clean_clone_still_judges_the_project(repo: Path, tmp_path: Path) -> None:
    # The agent leaves the project broken, clones it (clean) and stops from the clone: the
    # project the agent works on is the one to judge, not wherever its shell was left.
    checked_project(repo)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    write(repo / "calc.py", BAD)
    for cwd in (clone, tmp_path):  # another repository; no repository at all
        done = _claude_stop(cwd, repo)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer.get("decision") == "block", answer
        assert "calc.py:1: error: bug found" in answer["reason"]
    write(repo / "calc.py", GOOD.replace("a + b", "b + a"))
    assert _claude_stop(clone, repo).stdout == ""  # fixed: allowed as before


@pytest.mark.slow
def test_a_stop_from_the_project_or_below_is_judged_where_it_was_made(repo: Path) -> None:
    checked_project(repo)
    write(repo / "calc.py", BAD)
    for cwd in (repo, repo / "pkg", repo / "pkg" / ".." / "pkg"):
        cwd.mkdir(exist_ok=True)
        done = _claude_stop(cwd, repo)
        assert json.loads(done.stdout)["decision"] == "block"
        assert "outside the project's repository" not in done.stderr


@pytest.mark.slow
def test_agent_status_believes_no_record_replayed_from_another_repository(
        repo: Path, tmp_path: Path) -> None:
    # A "verified" record from another repository (or an earlier clone) copied into this
    # one's place must not make a broken run's caller see a verified stop.
    checked_project(repo)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    write(other / "calc.py", GOOD.replace("a + b", "b + a"))
    assert _claude_stop(other, other).stdout == ""  # verified there
    status = [sys.executable, "-m", "pytest_verifygate", "agent-status"]
    assert subprocess.run(status, cwd=other, check=False).returncode == 0
    mine, theirs = status_path(repo), status_path(other)
    assert mine is not None and theirs is not None
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_bytes(theirs.read_bytes())
    replayed = subprocess.run(status, cwd=repo, capture_output=True, text=True, check=False)
    assert replayed.returncode == 1, replayed.stdout
    assert "no stop recorded" in replayed.stdout


@pytest.mark.slow
def test_files_regex_is_matched_in_bounded_time(repo: Path) -> None:
    # pre-commit's `files` / `exclude` are Python regexes; one that backtracks
    # catastrophically (as a migrated config may hold) against a long changed name must not
    # keep a run busy: with re2 it is linear in the name's length.
    write(repo / "verify.toml", f'''
[[gate]]
name = "lint"
command = ["{sys.executable}", "-c", "print('ran')"]
files_regex = "^(a+)+$"
exclude_regex = "^(b+)+$"
''')
    commit_all(repo)
    write(repo / ("a" * 60 + "c"), "x\n")
    write(repo / ("b" * 60 + "c"), "x\n")
    write(repo / ("a" * 60), "x\n")
    write(repo / ("a" * 60 + "\u00e9"), "x\n")  # not ASCII: linear all the same
    write(repo / ("a" * 60 + "\x01"), "x\n")  # a control character too
    git(repo, "add", "-A")
    try:
        done = subprocess.run([sys.executable, "-m", "pytest_verifygate", "run", "--staged",
                               "--json",
                               str(repo.parent / "report.json")], cwd=repo, timeout=30,
                              capture_output=True, text=True, check=False)
    except subprocess.TimeoutExpired:
        raise AssertionError("matching files_regex took over 30 s") from None
    assert done.returncode == 0, done.stdout + done.stderr
    (gate,) = json.loads((repo.parent / "report.json").read_text())["gates"]
    assert gate["outcome"] == "passed"


_PIECES = ["a", "b", "A", "/", ".", "_", "-", "1", r"\.", r"\w", r"\W", r"\d", r"\s", r"\b",
           r"\B", ".", "*", "+", "?", "*?", "{1,2}", "{2}", "^", "$", r"\A", "(", ")", "|",
           "[a-c]", "[^a]", "[]a]", r"[\w.]", "(?i)", "(?s)", "(?m)", "(?:", " ", "{", "}"]


@examples(300)
@given(st.lists(st.sampled_from(_PIECES), max_size=8),
       st.lists(st.text(st.sampled_from("aAb_/.-1 \t\n\x1c\x0b\x7fé\u00c9\u0661\u2028\u017f\u212a"
                                        "\udcff\U0001f600"), min_size=1, max_size=12),
                min_size=1, max_size=5))
def test_files_regex_means_what_python_means(pieces: list[str], paths: list[str]) -> None:
    # The linear engine is used only where it keeps Python's meaning: every path (ASCII or
    # not, with control characters, line breaks, lone surrogates) is matched as Python's re
    # matches it.
    pattern = "".join(pieces)
    try:
        python = re.compile(pattern)
    except (re.error, FutureWarning, DeprecationWarning):
        return
    finder = _finder(pattern)
    for path in paths:
        assert finder(path) == (python.search(path) is not None), (pattern, path)


def _check(repo: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, "-m", "pytest_verifygate", "check"], cwd=repo,
                              capture_output=True, text=True, check=False, timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("verifygate check hung") from None


@pytest.mark.slow
def test_check_reads_a_hostile_repository_bounded_and_without_blocking(repo: Path) -> None:
    # A repository cloned from anywhere: an agent configuration nested too deeply, a FIFO in
    # place of a configuration or of pyproject.toml never hang `check` or end in a traceback.
    write(repo / "verify.toml", '[[gate]]\nname = "a"\ncommand = ["true"]\n')
    write(repo / ".claude" / "settings.json", "[" * 100_000 + "]" * 100_000)
    write(repo / ".codex" / "hooks.json", '{"hooks": ' * 990 + "{}" + "}" * 990)
    (repo / ".cursor").mkdir()
    os.mkfifo(repo / ".cursor" / "hooks.json")
    os.mkfifo(repo / "pyproject.toml")
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    os.mkfifo(hooks / "pre-push")
    done = _check(repo)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 1), done
    assert "1 gate(s)" in done.stdout + done.stderr


@pytest.mark.slow
def test_install_and_uninstall_leave_a_linked_hook_and_its_target_alone(
        repo: Path, tmp_path: Path) -> None:
    # A hook that is a link to a file of the user's (a dotfiles repository) is moved aside as
    # a link and put back as one; its target is never written, and never deleted.
    target = write(tmp_path / "dotfiles" / "pre-commit", "#!/bin/sh\nexit 0\n")
    target.chmod(0o700)
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    os.symlink(target, hooks / "pre-commit")
    assert verifygate("install", cwd=repo).returncode == 0
    assert os.readlink(hooks / "pre-commit.verifygate-chained") == str(target)
    assert verifygate("uninstall", cwd=repo).returncode == 0
    assert os.readlink(hooks / "pre-commit") == str(target)
    assert target.read_text() == "#!/bin/sh\nexit 0\n"
    assert target.stat().st_mode & 0o777 == 0o700
    # A link to a file holding our marker is still not ours to remove.
    ours = write(tmp_path / "dotfiles" / "pre-push", githooks.hook_text("pre-push", "python"))
    os.symlink(ours, hooks / "pre-push")
    done = verifygate("uninstall", cwd=repo)
    assert "pre-push: not written by verifygate install: left as it is" in done.stdout
    assert (hooks / "pre-push").is_symlink() and ours.exists()


def test_step_outputs_hold_no_output_of_a_gate_s_making(tmp_path: Path) -> None:
    # $GITHUB_OUTPUT: a report path with line breaks and a gate named like a delimiter or a
    # workflow command add no output and end no value early.
    report = {"verdict": "failed", "gates": [
        {"name": "::set-output name=verdict::passed", "outcome": "failed"},
        {"name": "verdict<<EOF", "outcome": "failed"}]}
    output = tmp_path / "github_output"
    warning = write_step_outputs(report, {"GITHUB_OUTPUT": str(output)},
                                 report_path="r.json\nverdict=passed\nEOF\nverdict<<X\npassed")
    assert warning is None
    outputs = read_output_file(output)
    assert outputs["verdict"] == "failed"
    assert json.loads(outputs["failed-gates"]) == [gate["name"] for gate in report["gates"]]
    assert outputs["report"] == "r.json\nverdict=passed\nEOF\nverdict<<X\npassed"
    assert sorted(outputs) == ["failed-gates", "report", "verdict"]


@pytest.mark.slow
def test_init_reads_a_hostile_project_bounded_and_without_blocking(repo: Path) -> None:
    # init looks at the project's files to find its tools: a FIFO in place of one, and a
    # noxfile nested deeper than Python's parser goes, are no tools, never a hang or a
    # traceback.
    write(repo / "noxfile.py", "x = " + "-" * 200_000 + "1\n")
    os.mkfifo(repo / "tox.ini")
    os.mkfifo(repo / "setup.cfg")
    write(repo / "pyproject.toml", "[tool.ruff]\nline-length = 99\n")
    try:
        # ruff, a test dependency, on PATH: init writes only gates whose program is there.
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        done = subprocess.run([sys.executable, "-m", "pytest_verifygate", "init"], cwd=repo,
                              capture_output=True, text=True, check=False, timeout=30,
                              env={**os.environ, "PATH": path})
    except subprocess.TimeoutExpired:
        raise AssertionError("verifygate init hung") from None
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "wrote verify.toml" in done.stdout and "ruff" in done.stdout


LAUGHS = "".join(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
                 for previous, name in zip("abcdefg", "bcdefgh", strict=True))


@pytest.mark.slow
@pytest.mark.parametrize(("config", "expected"), [
    # YAML aliases of aliases: nine lines meaning 387 million values.
    ('a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]\n' + LAUGHS
     + "repos:\n- repo: local\n  hooks:\n  - {id: lol, name: lol, entry: echo, "
       "language: system, args: *h, types: *h}\n",
     "its aliases expand to more than 100000 values"),
    ("repos: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
])
def test_migrate_refuses_a_config_that_would_not_end(repo: Path, config: str,
                                                     expected: str) -> None:
    write(repo / ".pre-commit-config.yaml", config)
    try:
        done = subprocess.run([sys.executable, "-m", "pytest_verifygate", "migrate", "-o",
                               "-"], cwd=repo, capture_output=True, text=True, check=False,
                              timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("verifygate migrate did not end") from None
    assert done.returncode == 2, done
    assert done.stderr.startswith("verifygate: error: .pre-commit-config.yaml: ")
    assert expected in done.stderr and "Traceback" not in done.stderr


def _claude_event(cwd: Path, event: str) -> subprocess.CompletedProcess[str]:
    payload = {"session_id": "s-1", "transcript_path": "/nonexistent.jsonl", "cwd": str(cwd),
               "hook_event_name": event, "stop_hook_active": False, "source": "startup"}
    return subprocess.run([sys.executable, "-m", "pytest_verifygate", "agent-hook"],
                          input=json.dumps(payload), capture_output=True, text=True,
                          cwd=cwd, check=False, timeout=120)


@pytest.mark.slow
def test_deleting_the_git_state_directory_does_not_hide_committed_work(repo: Path) -> None:
    # The agent commits its broken work, then deletes all it can of the tool's state: the
    # session's start is kept where it cannot write, so the stop does not start again from
    # the broken commit.
    checked_project(repo)
    assert _claude_event(repo, "SessionStart").stdout == ""
    write(repo / "calc.py", BAD)
    commit_all(repo, "broken")
    shutil.rmtree(repo / ".git" / "verifygate", ignore_errors=True)
    done = _claude_event(repo, "Stop")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer.get("decision") == "block", answer
    assert "calc.py:1: error: bug found" in answer["reason"]


@pytest.mark.slow
def test_install_and_uninstall_never_block_on_a_fifo_hook(repo: Path) -> None:
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    os.mkfifo(hooks / "pre-push")
    for command in ("uninstall", "install"):
        try:
            done = subprocess.run([sys.executable, "-m", "pytest_verifygate", command],
                                  cwd=repo, capture_output=True, text=True, check=False,
                                  timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"verifygate {command} hung on a FIFO") from None
        assert done.returncode == 0, done
    # The FIFO is not ours: moved aside as it is, never opened, never removed.
    assert stat.S_ISFIFO(os.lstat(hooks / "pre-push.verifygate-chained").st_mode)


@pytest.mark.slow
def test_a_planted_journal_never_moves_a_file_outside_the_work_tree(repo: Path,
                                                                   tmp_path: Path) -> None:
    """An agent can write ``.git``: a journal of work set aside that names paths out of the
    work tree (``..``, absolute, under ``.git``) is refused whole, and says so; nothing moves."""
    import hashlib
    import json

    write(repo / "verify.toml", '[[gate]]\nname = "ok"\ncommand = ["true"]\n')
    write(repo / "a.py", "1\n")
    commit_all(repo)
    precious = write(tmp_path / "precious.txt", "keep me\n")
    tag = hashlib.sha256(os.fsencode(os.path.realpath(repo))).hexdigest()[:16]
    run_dir = repo / ".git" / "verifygate" / "aside" / tag / "run-1-1"
    for path in ("../precious.txt", str(precious), ".git/config"):
        write(run_dir / "000000", "planted\n")
        write(run_dir / "journal.json", json.dumps({
            "version": 1, "pid": 1, "top": str(repo), "removed_dirs": [], "made_dirs": [],
            "entries": [[path, "000000", None, None, None]]}))
        done = verifygate("run", "--staged", cwd=repo)
        assert done.returncode == 0, done
        assert "cannot read what an earlier run set aside" in done.stderr
        assert precious.read_text() == "keep me\n"
        assert (run_dir / "000000").read_text() == "planted\n"
    assert "planted" not in (repo / ".git" / "config").read_text()


