"""The result cache: real git repositories, real gates, a counter file to prove what ran."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from plugin_support import (
    QUIET_PLUGINS,
    counting,
    init_repo,
    junit_cases,
    junit_properties,
    python,
    validate_report,
    write_contract,
)
from pytest_verifygate.contract import load_contract
from pytest_verifygate.errors import ContractError
from pytest_verifygate.result_cache import (
    KEEP_ENTRIES,
    cache_dir,
    script_programs,
)

from conftest import commit_all, git, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow


def run_report(repo: Path, *args: str, status: int = 0,
               env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """``verifygate run --all``; the report's gates by name (the report is written outside
    the work tree, so it never becomes an input itself)."""
    path = repo.parent / "report.json"
    done = verifygate("run", "--all", "--json", str(path), *args, env=env, cwd=repo)
    assert done.returncode == status, done.stdout + done.stderr
    report = json.loads(path.read_text(encoding="utf-8"))
    validate_report(report)
    return {gate["name"]: gate for gate in report["gates"]}


def runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def read_entry(path: Path) -> dict[str, Any]:
    """A stored entry: JSON."""
    entry: dict[str, Any] = json.loads(path.read_text())
    return entry


def entries(repo: Path) -> list[Path]:
    directory = cache_dir(repo)
    return sorted(directory.glob("*.json")) if directory is not None and directory.is_dir() else []


@pytest.fixture
def counter(tmp_path: Path) -> Path:
    return tmp_path / "counter"


def test_a_pass_is_reused_without_running_the_gate(repo: Path, counter: Path) -> None:
    write_contract(repo, {"name": "lint", "command": counting(str(counter))},
                   {"name": "plain", "command": python("print('not cached')")},
                   settings={"cache": True})
    write(repo / "src" / "a.py", "x = 1\n")
    commit_all(repo)
    first = run_report(repo)
    assert runs(counter) == 1
    assert first["lint"]["cached"] is False
    done = verifygate("run", "--all", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert runs(counter) == 1, "the second run executed the gate"
    assert re.search(r"PASS  lint\s+cached", done.stdout), done.stdout
    second = run_report(repo)
    assert runs(counter) == 1
    assert (second["lint"]["outcome"], second["lint"]["cached"]) == ("passed", True)
    assert second["lint"]["exit_code"] == 0 and second["lint"]["attempts"] == 0


def test_a_changed_input_file_runs_the_gate_again(repo: Path, counter: Path) -> None:
    write_contract(repo, {"name": "lint", "command": counting(str(counter)),
                          "when_changed": ["src/**/*.py"], "cache": True})
    write(repo / "src" / "a.py", "x = 1\n")
    write(repo / "docs" / "guide.md", "# guide\n")
    commit_all(repo)
    run_report(repo)
    run_report(repo)
    assert runs(counter) == 1
    write(repo / "src" / "a.py", "x = 2\n")  # tracked, modified in the work tree
    assert run_report(repo)["lint"]["cached"] is False
    assert runs(counter) == 2
    assert run_report(repo)["lint"]["cached"] is True
    write(repo / "src" / "staged.py", "y = 1\n")  # newly staged
    git(repo, "add", "src/staged.py")
    run_report(repo)
    assert runs(counter) == 3
    write(repo / "src" / "pkg" / "untracked.py", "z = 1\n")  # untracked, matching
    run_report(repo)
    assert runs(counter) == 4
    write(repo / "docs" / "guide.md", "# changed\n")  # not an input of this gate
    write(repo / "notes.txt", "untracked, not matching\n")
    assert run_report(repo)["lint"]["cached"] is True
    (repo / "src" / "a.py").unlink()  # a deleted input
    run_report(repo)
    assert runs(counter) == 5
    git(repo, "checkout", "--", "src/a.py")  # back to a state that passed before
    assert run_report(repo)["lint"]["cached"] is False  # staged.py and untracked.py remain
    assert runs(counter) == 6


def test_inputs_key_overrides_when_changed_and_mode_counts(repo: Path, counter: Path) -> None:
    write_contract(repo, {"name": "build", "command": counting(str(counter)),
                          "when_changed": ["src/**"], "inputs": ["config.ini", "tool.sh"],
                          "cache": True})
    write(repo / "src" / "a.py", "x = 1\n")
    write(repo / "config.ini", "[a]\n")
    write(repo / "tool.sh", "#!/bin/sh\n")
    commit_all(repo)
    run_report(repo)
    write(repo / "src" / "a.py", "x = 2\n")
    assert run_report(repo)["build"]["cached"] is True
    assert runs(counter) == 1
    write(repo / "config.ini", "[b]\n")
    assert run_report(repo)["build"]["cached"] is False
    (repo / "tool.sh").chmod(0o755)  # same content, now executable
    assert run_report(repo)["build"]["cached"] is False
    assert runs(counter) == 3


def test_the_mode_on_disk_counts_where_git_ignores_modes(repo: Path) -> None:
    # core.fileMode=false (git's default where file systems have no executable bit): git
    # reports no change after chmod -x, and must not vouch for the old mode.
    git(repo, "config", "core.fileMode", "false")
    write_contract(repo, {"name": "runnable", "command": "test -x run.sh",
                          "when_changed": ["run.sh"], "cache": True})
    write(repo / "run.sh", "#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    git(repo, "add", "-A")
    git(repo, "update-index", "--chmod=+x", "run.sh")
    git(repo, "commit", "-q", "-m", "executable")
    assert run_report(repo)["runnable"]["outcome"] == "passed"
    (repo / "run.sh").chmod(0o644)
    assert git(repo, "status", "--porcelain") == ""  # what git says
    gate = run_report(repo, status=1)["runnable"]
    assert (gate["outcome"], gate["cached"]) == ("failed", False)


def test_a_file_hidden_by_a_local_exclude_file_is_still_an_input(repo: Path, counter: Path
                                                                 ) -> None:
    # No patterns: the gate reads every file git tracks or would add.
    write_contract(repo, {"name": "lint", "command": counting(str(counter)), "cache": True})
    write(repo / "a.py", "x = 1\n")
    commit_all(repo)
    run_report(repo)
    write(repo / "hidden.py", "broken\n")
    with open(repo / ".git/info/exclude", "a") as exclude:  # local: anything can write it
        exclude.write("hidden.py\n")
    assert run_report(repo)["lint"]["cached"] is False
    assert runs(counter) == 2


def test_the_gate_definition_and_its_tool_are_part_of_the_key(
    repo: Path, counter: Path, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    tool = write(bin_dir / "mytool", f"#!/bin/sh\necho ran >> '{counter}'\n")
    tool.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    gate = {"name": "check", "command": "mytool --strict", "inputs": ["src/**"], "cache": True}
    write_contract(repo, gate)
    write(repo / "src" / "a.py", "x = 1\n")
    commit_all(repo)
    run_report(repo, env=env)
    run_report(repo, env=env)
    assert runs(counter) == 1
    write_contract(repo, {**gate, "category": "unit", "retries": 1})  # not part of the key
    assert run_report(repo, env=env)["check"]["cached"] is True
    for changed in ({"env": {"MODE": "fast"}}, {"timeout_seconds": 60},
                    {"command": "mytool --lenient"}):
        write_contract(repo, {**gate, **changed})
        assert run_report(repo, env=env)["check"]["cached"] is False, changed
    assert runs(counter) == 4
    assert run_report(repo, env=env)["check"]["cached"] is True
    tool.write_text(f"#!/bin/sh\n# upgraded\necho ran >> '{counter}'\n")  # a new version
    assert run_report(repo, env=env)["check"]["cached"] is False
    assert runs(counter) == 5


def test_no_cache_runs_the_gate_and_still_stores_its_pass(repo: Path, counter: Path) -> None:
    write_contract(repo, {"name": "lint", "command": counting(str(counter)), "cache": True})
    commit_all(repo)
    run_report(repo)
    assert run_report(repo, "--no-cache")["lint"]["cached"] is False
    assert runs(counter) == 2
    for entry in entries(repo):
        entry.unlink()
    run_report(repo, "--no-cache")
    assert run_report(repo)["lint"]["cached"] is True
    assert runs(counter) == 3


def test_failures_and_flaky_passes_are_never_cached(repo: Path, counter: Path,
                                                    tmp_path: Path) -> None:
    attempts = tmp_path / "attempts"
    flaky = python(
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); "
        "n = len(p.read_text().splitlines()) if p.exists() else 0; "
        "p.write_text('x\\n' * (n + 1)); sys.exit(0 if n % 2 else 1)", str(attempts))
    write_contract(repo, {"name": "broken", "command": counting(str(counter), status=1)},
                   {"name": "flaky", "command": flaky, "retries": 1},
                   settings={"cache": True})
    commit_all(repo)
    first = run_report(repo, status=1)
    assert first["flaky"]["flaky"] is True and first["flaky"]["outcome"] == "passed"
    second = run_report(repo, status=1)
    assert runs(counter) == 2 and runs(attempts) == 4
    assert second["broken"]["cached"] is False and second["flaky"]["cached"] is False
    assert entries(repo) == []


def test_a_gate_rewriting_its_inputs_is_stored_once_they_settle(repo: Path, counter: Path
                                                                 ) -> None:
    # As real formatters do, it writes only a file it changes: a rewrite of the same bytes is
    # what a file swapped and put back looks like, never stored.
    formatter = python(
        "import pathlib, sys; open(sys.argv[1], 'a').write('ran\\n'); "
        "p = pathlib.Path('fmt.txt'); text = p.read_text(); "
        "text == text.upper() or p.write_text(text.upper())", str(counter))
    write_contract(repo, {"name": "format", "command": formatter, "inputs": ["fmt.txt"],
                          "cache": True})
    write(repo / "fmt.txt", "lower\n")
    commit_all(repo)
    run_report(repo)  # rewrites fmt.txt: the pass is for neither version
    assert entries(repo) == []
    run_report(repo)  # leaves it unchanged: stored
    assert run_report(repo)["format"]["cached"] is True
    assert runs(counter) == 2


def test_the_cache_lives_in_the_private_state_directory_only(repo: Path, counter: Path
                                                            ) -> None:
    """Never under the work tree nor ``.git``, which whatever the gates check can write."""
    write_contract(repo, {"name": "lint", "command": counting(str(counter)), "cache": True},
                   {"name": "docs", "command": python("print('x' * 10000)"), "cache": True})
    commit_all(repo)
    run_report(repo)
    assert git(repo, "status", "--porcelain") == ""
    found = entries(repo)
    assert len(found) == 2
    assert not (repo / ".git" / "verifygate" / "cache").exists()
    assert str(cache_dir(repo)).startswith(os.environ["XDG_STATE_HOME"])
    for path in found:
        entry = read_entry(path)
        assert entry["key"] == path.stem and entry["gate"] in ("lint", "docs")
        assert len(entry["output_tail"].encode()) <= 4096  # entries stay small
    docs = run_report(repo)["docs"]
    assert docs["cached"] is True and docs["output_truncated"] is True
    assert docs["output_tail"].endswith("x\n") and docs["output_bytes"] == 10001
    assert git(repo, "status", "--porcelain") == ""


def test_concurrent_runs_share_the_cache_safely(repo: Path, counter: Path) -> None:
    slow = "import sys, time; open(sys.argv[1], 'a').write('ran\\n'); time.sleep(0.3)"
    gates = [{"name": f"g{i}", "command": python(slow, str(counter), f"g{i}"), "cache": True}
             for i in range(4)]
    write_contract(repo, *gates, settings={"jobs": 4})
    commit_all(repo)
    command = [sys.executable, "-m", "pytest_verifygate.cli", "run", "--all"]
    processes = [subprocess.Popen(command, cwd=repo, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=60)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    found = entries(repo)
    assert len(found) == 4
    for path in found:
        assert read_entry(path)["key"] == path.stem
    directory = cache_dir(repo)
    assert directory is not None and not list(directory.glob(".*.tmp"))
    before = runs(counter)
    assert 4 <= before <= 8
    assert all(gate["cached"] for gate in run_report(repo).values())
    assert runs(counter) == before


def test_the_size_bound_prunes_the_least_recently_used(repo: Path, counter: Path) -> None:
    write_contract(repo, {"name": "kept", "command": python("print(1)"), "cache": True,
                          "inputs": ["kept.txt"]},
                   {"name": "new", "command": counting(str(counter)), "cache": True,
                    "inputs": ["new.txt"]})
    write(repo / "kept.txt", "1\n")
    commit_all(repo)
    directory = cache_dir(repo)
    assert directory is not None
    run_report(repo)
    stored = {read_entry(path)["gate"]: path for path in entries(repo)}
    stored["new"].unlink()
    kept = stored["kept"]
    # A crowd of older entries, and the real "kept" entry made the oldest of all.
    now = time.time()
    for index in range(KEEP_ENTRIES + 20):
        filler = write(directory / f"{index:064x}.json", "{}\n")
        os.utime(filler, (now - 5000 + index, now - 5000 + index))
    os.utime(kept, (now - 9000, now - 9000))
    stale = write(directory / ".abc.json.123.456.tmp", "half")  # as write_state names it
    os.utime(stale, (now - 7200, now - 7200))
    run_report(repo)  # "kept" is a hit (used now); "new" is stored, which prunes
    assert runs(counter) == 2
    remaining = entries(repo)
    assert len(remaining) == KEEP_ENTRIES
    assert kept in remaining, "an entry used just now was pruned"
    assert not (directory / f"{0:064x}.json").exists()
    assert (directory / f"{KEEP_ENTRIES + 19:064x}.json").exists()
    assert not stale.exists()
    assert run_report(repo)["new"]["cached"] is True


def test_cli_imports_the_cache_only_when_a_gate_caches(repo: Path) -> None:
    write_contract(repo, {"name": "a", "command": "true"})
    commit_all(repo)
    command = [sys.executable, "-X", "importtime", "-m", "pytest_verifygate.cli", "run", "--all"]
    plain = subprocess.run(command, cwd=repo, capture_output=True, text=True)
    assert plain.returncode == 0 and "pytest_verifygate.result_cache" not in plain.stderr
    write_contract(repo, {"name": "a", "command": "true", "cache": True})
    cached = subprocess.run(command, cwd=repo, capture_output=True, text=True)
    assert cached.returncode == 0 and "pytest_verifygate.result_cache" in cached.stderr


def test_contract_keys_are_validated(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "a"\ncommand = "true"\n'
          'inputs = ["src/**"]\n\n[settings]\ncache = true\n')
    gate = load_contract(start=repo).gates[0]
    assert (gate.cache, gate.inputs) == (True, ("src/**",))
    for body, words in (('inputs = []', ("inputs", "empty")),
                        ('cache = "yes"', ("cache", "true or false")),
                        ('chache = true', ("did you mean 'cache'",))):
        write(repo / "verify.toml", f'[[gate]]\nname = "a"\ncommand = "true"\n{body}\n')
        with pytest.raises(ContractError) as caught:
            load_contract(start=repo)
        assert all(word in str(caught.value) for word in words), str(caught.value)


def test_shell_gates_name_the_programs_of_their_script() -> None:
    script = "FOO=1 ruff check . && mypy src | tee out > log 2>&1; if true; then make x; fi"
    assert script_programs(script) == ["ruff", "mypy", "tee", "true", "make"]
    assert script_programs("echo 'unbalanced") == ["echo"]  # what was read before the error


# --------------------------------------------------------------------------------------------
# pytest --verify-contract


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    return pytester


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_pytest_items_reuse_cached_passes(project: pytest.Pytester, counter: Path,
                                          xdist: tuple[str, ...]) -> None:
    if xdist:
        pytest.importorskip("xdist")
    write_contract(project.path,
                   {"name": "lint", "command": counting(str(counter)), "inputs": ["src/**"]},
                   {"name": "types", "command": counting(str(counter)), "inputs": ["src/**"]},
                   settings={"cache": True})
    write(project.path / "src" / "a.py", "x = 1\n")
    commit_all(project.path)
    junit = counter.parent / "junit.xml"
    # The verifygate.* properties are written under xunit1 (xunit2 has no testcase properties).
    args = ("--verify-contract", "-v", "-p", "no:cacheprovider", "--junitxml", str(junit),
            "-o", "junit_family=xunit1", *xdist)
    project.runpytest_subprocess(*args).assert_outcomes(passed=2)
    assert runs(counter) == 2
    assert junit_properties(junit_cases(junit)["lint"])["verifygate.cached"] == "false"
    second = project.runpytest_subprocess(*args)
    second.assert_outcomes(passed=2)
    assert runs(counter) == 2, "a cached gate ran again under pytest"
    assert second.stdout.str().count("PASSED (cached)") == 2  # -v shows each item as cached
    second.stdout.fnmatch_lines(["lint*passed (cached)*", "types*passed (cached)*"])
    for case in junit_cases(junit).values():
        assert junit_properties(case)["verifygate.cached"] == "true"
    project.runpytest_subprocess(*args, "--verify-no-cache").assert_outcomes(passed=2)
    assert runs(counter) == 4


# --------------------------------------------------------------------------------------------
# What a tool reads from outside the repository


STRICT_TOOL = """\
import os, pathlib, sys
places = [pathlib.Path('..', 'pyproject.toml'),
          pathlib.Path(os.environ['XDG_CONFIG_HOME'], 'lint-tool', 'config')]
strict = os.environ.get('LINT_TOOL_STRICT') or any(
    place.exists() and 'strict' in place.read_text() for place in places)
open(sys.argv[1], 'a').write('ran\\n')
sys.exit(1 if strict else 0)
"""


@pytest.mark.parametrize("where", ["parent directory", "repository above the project",
                                   "user configuration", "environment"])
def test_a_configuration_outside_the_project_is_part_of_the_key(
        tmp_path: Path, counter: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    repo = tmp_path / "outer" / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    if where == "repository above the project":  # a monorepo's project in sub/
        write(repo / "pyproject.toml", "[tool.lint-tool]\nmode = 'lax'\n")
        commit_all(repo)
        repo = repo / "sub"
    tool = write(tmp_path / "bin" / "lint-tool", f"#!{sys.executable}\n{STRICT_TOOL}")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("LINT_TOOL_STRICT", raising=False)
    write_contract(repo, {"name": "lint", "command": ["lint-tool", str(counter)],
                          "cache": True})
    commit_all(repo)
    run_report(repo)
    assert run_report(repo)["lint"]["cached"] is True
    if where in ("parent directory", "repository above the project"):
        write(repo.parent / "pyproject.toml", "[tool.lint-tool]\nmode = 'strict'\n")
    elif where == "user configuration":
        write(tmp_path / "config" / "lint-tool" / "config", "strict\n")
    else:
        monkeypatch.setenv("LINT_TOOL_STRICT", "1")
    failed = run_report(repo, status=1)["lint"]
    assert (failed["outcome"], failed["cached"]) == ("failed", False)
    assert runs(counter) == 2


def test_a_package_installed_in_the_tools_environment_is_part_of_the_key(
        repo: Path, tmp_path: Path, counter: Path) -> None:
    """``python -m tool``: the program is the interpreter, which an upgrade of the tool (or a
    plugin added beside it) does not change; its environment's site-packages does."""
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = next(env.glob("lib/python3*/site-packages"))
    write(site / "checker.py", "import sys; open(sys.argv[1], 'a').write('ran\\n')\n")
    (site / "checker-1.0.dist-info").mkdir()
    # Compiled as pip installs it: a first run writing bytecode there is a change of its own.
    subprocess.run([str(env / "bin" / "python"), "-m", "compileall", "-q", str(site)],
                   check=True)
    write_contract(repo, {"name": "lint", "command": [str(env / "bin" / "python"), "-m",
                                                      "checker", str(counter)],
                          "cache": True})
    commit_all(repo)
    run_report(repo)
    assert run_report(repo)["lint"]["cached"] is True
    # As pip upgrades it: the old version's metadata goes, the new one's comes.
    write(site / "checker.py", "raise SystemExit('checker 2.0: stricter')\n")
    (site / "checker-1.0.dist-info").rmdir()
    (site / "checker-2.0.dist-info").mkdir()
    failed = run_report(repo, status=1)["lint"]
    assert (failed["outcome"], failed["cached"]) == ("failed", False)
