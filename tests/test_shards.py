"""Shards: ``--shard K/N`` / ``--verify-shard K/N`` / GitLab's ``CI_NODE_*``, the balanced and
deterministic split, ``needs`` groups kept together, and the recorded durations behind it.

The split is checked on real repositories through ``verifygate list --format json`` (what a
CI machine would run), and its balance against the best split found by brute force.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plugin_support import QUIET_PLUGINS, init_repo, load_json, validate_report
from pytest_verifygate.contract.model import Gate
from pytest_verifygate.errors import UsageError
from pytest_verifygate.selection import Selection
from pytest_verifygate.shards import (
    Shard,
    assign,
    gate_groups,
    parse_shard,
    requested_shard,
    split,
)
from pytest_verifygate.state import durations

from conftest import commit_all, git, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PY = sys.executable


def gates_toml(*names: str, needs: dict[str, list[str]] | None = None) -> str:
    text = ""
    for name in names:
        text += f'[[gate]]\nname = "{name}"\ncommand = "true"\n'
        if needs and name in needs:
            text += f"needs = {json.dumps(needs[name])}\n"
    return text


def shard_of_each(repo: Path, total: int, env: dict[str, str] | None = None) -> dict[str, int]:
    """Which shard each gate is in, from ``verifygate list --shard k/N`` for every k."""
    placed: dict[str, int] = {}
    for index in range(1, total + 1):
        done = verifygate("list", "--all", "--shard", f"{index}/{total}", "--format", "json",
                          cwd=repo, env=env)
        assert done.returncode == 0, done.stderr
        for gate in json.loads(done.stdout)["gates"]:
            if gate["selected"]:
                assert gate["name"] not in placed, f"{gate['name']} is in two shards"
                placed[gate["name"]] = index
            else:
                assert gate["reason"].startswith("in shard "), gate
    return placed


def record(repo: Path, seconds: dict[str, float], contract: str = "verify.toml") -> None:
    assert durations.record_durations(repo, contract, seconds, None)


# -- the flag and the CI's variables -----------------------------------------------------------


def test_shard_values_are_checked() -> None:
    assert parse_shard("2/3") == Shard(2, 3) and str(Shard(2, 3)) == "2/3"
    for bad in ("0/3", "4/3", "3", "a/b", "1/0", "-1/2", ""):
        with pytest.raises(UsageError, match="--shard"):
            parse_shard(bad)


def test_gitlab_parallel_variables_are_read_only_when_asked_for() -> None:
    gitlab = {"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "3"}
    assert requested_shard(None, gitlab) is None
    assert requested_shard("auto", gitlab) == Shard(2, 3)
    assert requested_shard("1/2", gitlab) == Shard(1, 2)
    assert requested_shard("auto", {}) is None  # no parallel: every gate
    assert requested_shard("auto", {**gitlab, "PRE_COMMIT": "1"}) is None
    for partial in ({"CI_NODE_INDEX": "2"}, {"CI_NODE_INDEX": "5", "CI_NODE_TOTAL": "3"}):
        with pytest.raises(UsageError, match="--shard auto: CI_NODE_INDEX/CI_NODE_TOTAL"):
            requested_shard("auto", partial)


def test_ci_node_variables_shard_the_command_line_only_with_shard_auto(repo: Path) -> None:
    write(repo / "verify.toml", gates_toml(*(f"g{i}" for i in range(7))))
    commit_all(repo)
    by_flag = verifygate("list", "--all", "--shard", "2/3", "--format", "json", cwd=repo)
    gitlab = {"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "3"}
    by_env = verifygate("list", "--all", "--shard", "auto", "--format", "json", cwd=repo,
                        env=gitlab)
    assert by_env.returncode == 0, by_env.stderr
    assert json.loads(by_env.stdout) == json.loads(by_flag.stdout)
    assert sum(gate["selected"] for gate in json.loads(by_env.stdout)["gates"]) == 2
    # Without --shard, or under pre-commit's hook, the variables shard nothing.
    unasked = verifygate("list", "--all", "--format", "json", cwd=repo, env=gitlab)
    hooked = verifygate("list", "--all", "--shard", "auto", "--format", "json", cwd=repo,
                        env={**gitlab, "PRE_COMMIT": "1"})
    for done in (unasked, hooked):
        assert all(gate["selected"] for gate in json.loads(done.stdout)["gates"])
    bad = verifygate("run", "--all", "--shard", "4/3", cwd=repo)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "verifygate: error: --shard '4/3': K must be between 1 and N (3)"]


def test_the_installed_git_hooks_check_every_gate_in_a_parallel_ci_job(repo: Path,
                                                                        tmp_path: Path) -> None:
    """GitLab's ``parallel:`` sets CI_NODE_* for every command of the job, the commits and
    pushes it makes included: the hooks ``verifygate install`` writes check every gate."""
    no_bad = "import sys; sys.exit(any('bad' in open(f).read() for f in sys.argv[1:]))"
    write(repo / "verify.toml", f"""
[[gate]]
name = "a-no-bad"
command = ["{PY}", "-c", "{no_bad}", "{{files}}"]
when_changed = ["*.txt"]

[[gate]]
name = "b-always"
command = "true"
""")
    write(repo / "a.txt", "good\n")
    commit_all(repo)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")
    assert verifygate("install", cwd=repo).returncode == 0
    # Shard 2 of 2 by the variables would hold b-always alone (equal weights, by name).
    listed = verifygate("list", "--all", "--shard", "2/2", "--format", "json", cwd=repo)
    assert [gate["name"] for gate in json.loads(listed.stdout)["gates"]
            if gate["selected"]] == ["b-always"]
    env = {**os.environ, "CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "2"}
    write(repo / "a.txt", "bad\n")
    git(repo, "add", "a.txt")
    committed = subprocess.run(["git", "commit", "-q", "-m", "bad"], cwd=repo, env=env,
                               capture_output=True, text=True)
    assert committed.returncode == 1, committed.stdout + committed.stderr
    assert "FAIL  a-no-bad" in committed.stdout + committed.stderr
    git(repo, "commit", "-q", "--no-verify", "-m", "bad")
    pushed = subprocess.run(["git", "push", "-q", "origin", "main"], cwd=repo, env=env,
                            capture_output=True, text=True)
    assert pushed.returncode == 1, pushed.stdout + pushed.stderr
    assert "FAIL  a-no-bad" in pushed.stdout + pushed.stderr


# -- the split ---------------------------------------------------------------------------------


def best_longest_shard(weights: list[float], total: int) -> float:
    return min(max(sum(w for w, s in zip(weights, places, strict=True) if s == shard)
                   for shard in range(total))
               for places in itertools.product(range(total), repeat=len(weights)))


@settings(max_examples=150, deadline=None)
@given(weights=st.lists(st.floats(min_value=0.01, max_value=600, allow_nan=False), min_size=1,
                        max_size=7),
       total=st.integers(min_value=1, max_value=3))
def test_the_longest_shard_is_within_graham_s_bound_of_the_best_split(
        weights: list[float], total: int) -> None:
    names = [[f"g{i}"] for i in range(len(weights))]
    places = split(names, {f"g{i}": w for i, w in enumerate(weights)}, total)
    assert all(1 <= place <= total for place in places)
    longest = max(sum(w for w, p in zip(weights, places, strict=True) if p == shard)
                  for shard in range(1, total + 1))
    best = best_longest_shard(weights, total)
    assert longest <= (4 / 3 - 1 / (3 * total)) * best + 1e-9


def test_recorded_durations_balance_a_real_split(repo: Path) -> None:
    seconds = {"build": 240.0, "unit": 180.0, "e2e": 150.0, "lint": 20.0, "types": 45.0,
               "docs": 8.0, "audit": 30.0, "bench": 90.0, "fmt": 3.0, "deps": 12.0,
               "integration": 120.0, "i18n": 5.0}
    write(repo / "verify.toml", gates_toml(*seconds))
    commit_all(repo)
    by_count = shard_of_each(repo, 3)
    assert sorted(list(by_count.values()).count(k) for k in (1, 2, 3)) == [4, 4, 4]
    record(repo, seconds)
    placed = shard_of_each(repo, 3)
    loads = [sum(seconds[name] for name, k in placed.items() if k == shard) for shard in (1, 2, 3)]
    ideal = sum(seconds.values()) / 3
    assert max(loads) <= 1.1 * ideal, loads
    # The split by count alone is far worse here: the durations are what balance it.
    count_loads = [sum(seconds[name] for name, k in by_count.items() if k == shard)
                   for shard in (1, 2, 3)]
    assert max(count_loads) > max(loads)


def test_every_machine_computes_the_same_split(repo: Path, tmp_path: Path) -> None:
    names = [f"gate {i}" for i in range(10)]
    write(repo / "verify.toml", gates_toml(*names))
    commit_all(repo)
    record(repo, {name: float(1 + i % 4) for i, name in enumerate(names)})
    other = tmp_path / "other machine"
    subprocess.run(["git", "clone", "-q", str(repo), str(other)], check=True)
    # The durations file restored from a CI cache: same content, entries in another order.
    entries = durations._read(durations.durations_path(repo))[0]
    target = durations.durations_path(other)
    assert target is not None
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(durations.render(entries[::-1]), encoding="utf-8")
    first = shard_of_each(repo, 3)
    assert shard_of_each(other, 3) == first == shard_of_each(repo, 3)
    assert sorted(first) == sorted(names)


def test_equal_weights_split_by_count_with_ties_by_name() -> None:
    groups = [[name] for name in ("e", "d", "c", "b", "a")]
    places = split(groups, dict.fromkeys("abcde", 1.0), 2)
    assert dict(zip("edcba", places, strict=True)) == {"a": 1, "b": 2, "c": 1, "d": 2, "e": 1}


def test_gates_joined_by_needs_stay_in_one_shard(repo: Path) -> None:
    needs = {"test": ["build"], "package": ["test"], "deploy-check": ["build"],
             "docs-site": ["docs"]}
    names = ["build", "lint", "test", "docs", "package", "types", "deploy-check",
             "docs-site", "audit"]
    write(repo / "verify.toml", gates_toml(*names, needs=needs))
    commit_all(repo)
    for total in (2, 3, 4):
        placed = shard_of_each(repo, total)
        assert sorted(placed) == sorted(names)
        assert len({placed[n] for n in ("build", "test", "package", "deploy-check")}) == 1
        assert placed["docs"] == placed["docs-site"]


def test_groups_follow_needs_among_the_selected_gates_only() -> None:
    gates = [Gate("a", "true"), Gate("b", "true", needs=("a",)), Gate("c", "true"),
             Gate("d", "true", needs=("gone",)), Gate("e", "true", needs=("c", "b"))]
    assert [[g.name for g in group] for group in gate_groups(gates)] == [
        ["a", "b", "c", "e"], ["d"]]


def test_manual_gates_weigh_nothing_and_are_placed_once() -> None:
    selections = [Selection(Gate("slow", "true"), True, "always"),
                  Selection(Gate("sign-off", "x", kind="manual"), True, "always"),
                  Selection(Gate("fast", "true"), True, "always"),
                  Selection(Gate("other role", "true"), False, "role 'x' is not in roles")]
    recorded = {"slow": 100.0, "fast": 1.0}
    shards = [assign(selections, Shard(k, 2), recorded) for k in (1, 2)]
    selected = [[s.gate.name for s in shard if s.selected] for shard in shards]
    assert selected == [["slow"], ["sign-off", "fast"]]
    assert shards[0][3].reason == "role 'x' is not in roles"
    assert shards[0][2].reason == "in shard 2 of 2"


def test_a_gate_without_a_recorded_duration_counts_as_the_median() -> None:
    assert durations.estimates(["a", "new"], {"a": 4.0, "b": 10.0, "c": 2.0}) == {
        "a": 4.0, "new": 4.0}
    assert durations.estimates(["new"], {}) == {"new": durations.DEFAULT_SECONDS}


# -- the durations file ------------------------------------------------------------------------


def test_a_run_records_each_gate_s_duration(repo: Path) -> None:
    write(repo / "verify.toml",
          f'[[gate]]\nname = "slow"\ncommand = ["{PY}", "-c", "import time; time.sleep(0.4)"]\n'
          '[[gate]]\nname = "quick"\ncommand = "true"\n'
          '[[gate]]\nname = "broken"\ncommand = "no-such-program-here"\n'
          '[[gate]]\nname = "sign"\ncommand = "x"\nkind = "manual"\n')
    commit_all(repo)
    assert durations.durations_path(repo) == repo / ".git" / "verifygate" / "durations.json"
    verifygate("run", "--all", cwd=repo)
    recorded, warning = durations.read_durations(repo, "verify.toml")
    assert warning is None
    # Only gates that did their work count: not a missing program, not a manual gate.
    assert set(recorded) == {"slow", "quick"}
    assert recorded["slow"] >= 0.4 > recorded["quick"]
    text = (repo / ".git" / "verifygate" / "durations.json").read_text()
    assert json.loads(text)["version"] == 1


def test_a_bad_durations_file_is_ignored_with_one_warning(repo: Path) -> None:
    write(repo / "verify.toml", gates_toml("a", "b", "c", "d"))
    commit_all(repo)
    path = repo / ".git" / "verifygate" / "durations.json"
    for content in ('{"version": 1, "durations": [["verify.toml", "a", -3]]}',
                    "{not json", '{"version": 7, "durations": []}', "\xff"):
        write(path, content)
        done = verifygate("list", "--all", "--shard", "1/2", "--format", "json", cwd=repo)
        assert done.returncode == 0
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and "ignored" in lines[0], lines
        selected = [g["name"] for g in json.loads(done.stdout)["gates"] if g["selected"]]
        assert selected == ["a", "c"]  # by count
    verifygate("run", "--all", cwd=repo)  # the next run replaces it
    assert durations.read_durations(repo, "verify.toml")[1] is None
    assert set(durations.read_durations(repo, "verify.toml")[0]) == {"a", "b", "c", "d"}


def test_the_durations_file_is_bounded(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(durations, "MAX_ENTRIES", 5)
    record(repo, {f"old{i}": 1.0 for i in range(4)}, "other/verify.toml")
    record(repo, {"a": 2.0, "b": 3.0})
    entries = durations._read(durations.durations_path(repo))[0]
    assert [(c, n) for c, n, _ in entries] == [
        ("verify.toml", "a"), ("verify.toml", "b"), ("other/verify.toml", "old0"),
        ("other/verify.toml", "old1"), ("other/verify.toml", "old2")]
    # A contract's removed gates are dropped when it records again.
    assert durations.record_durations(repo, "verify.toml", {"a": 9.0}, ["a"])
    assert dict(durations.read_durations(repo, "verify.toml")[0]) == {"a": 9.0}
    # Too large a file is not read at all.
    path = durations.durations_path(repo)
    assert path is not None
    path.write_text(" " * (durations.MAX_FILE_BYTES + 1))
    assert "larger than" in (durations.read_durations(repo, "verify.toml")[1] or "")


def test_unchanged_durations_leave_the_file_alone(repo: Path) -> None:
    record(repo, {"a": 2.0, "b": 0.01})
    assert not durations.record_durations(repo, "verify.toml", {"a": 2.1, "b": 0.03}, None)
    assert durations.record_durations(repo, "verify.toml", {"a": 2.5}, None)
    assert dict(durations.read_durations(repo, "verify.toml")[0]) == {"a": 2.5, "b": 0.01}


names_strategy = st.text(min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(entries=st.lists(st.tuples(names_strategy, names_strategy,
                                  st.floats(min_value=0, max_value=1e6, allow_nan=False)),
                        max_size=6))
def test_the_file_reads_back_as_json_reads_it(entries: list[tuple[str, str, float]]) -> None:
    entries = [(c, n, round(s, 3)) for c, n, s in entries]
    text = durations.render(entries)
    as_json = [tuple(item) for item in json.loads(text)["durations"]]
    assert as_json == entries
    assert durations._parse(text.encode()) == entries


def test_a_hand_edited_file_is_read_through_json(repo: Path) -> None:
    path = durations.durations_path(repo)
    assert path is not None
    write(path, json.dumps({"version": 1, "durations": [["verify.toml", 'say "hi"', 3],
                                                        ["verify.toml", "b", 1.5]]}, indent=4))
    assert dict(durations.read_durations(repo, "verify.toml")[0]) == {
        'say "hi"': 3.0, "b": 1.5}


def test_longest_first_keeps_contract_order_between_equals() -> None:
    recorded = {"lint": 2.0, "unit": 30.0, "e2e": 30.0, "docs": 1.0, "types": 4.0}
    # "new" counts as the median of the recorded: 4 s, as long as "types".
    assert durations.longest_first(["lint", "e2e", "types", "docs", "unit", "new"],
                                   recorded) == ["e2e", "unit", "types", "new", "lint", "docs"]


def test_the_planned_order_reads_the_contract_s_recorded_durations(repo: Path) -> None:
    from pytest_verifygate.contract import load_contract

    write(repo / "verify.toml", gates_toml("lint", "unit", "docs"))
    contract = load_contract("verify.toml", start=repo)
    names = ["lint", "unit", "docs"]
    assert durations.planned_order(contract, names) == ["lint", "unit", "docs"]
    record(repo, {"unit": 30.0, "docs": 0.5})
    record(repo, {"lint": 99.0}, "other/verify.toml")
    assert durations.planned_order(contract, names) == ["unit", "lint", "docs"]


# -- the pytest plugin -------------------------------------------------------------------------


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    init_repo(pytester.path, monkeypatch)
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    for name in ("CI_NODE_INDEX", "CI_NODE_TOTAL"):
        monkeypatch.delenv(name, raising=False)
    return pytester


def test_pytest_verify_shard_collects_one_shard(project: pytest.Pytester,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    write(project.path / "verify.toml", gates_toml("a", "b", "c", "d", "e",
                                                   needs={"e": ["a"]}))
    commit_all(project.path)
    collected: dict[int, list[str]] = {}
    for index in (1, 2):
        result = project.runpytest("--verify-contract", "--verify-all", "--verify-shard",
                                   f"{index}/2", "--verify-report", f"r{index}.json", "-v")
        assert result.ret == 0, result.stdout.str()
        report: dict[str, Any] = load_json(project.path / f"r{index}.json")
        validate_report(report)
        identity = {key: report["shard"].pop(key) for key in ("commit", "contract_sha256")}
        assert report["shard"] == {"index": index, "total": 2,
                                   "order": ["a", "b", "c", "d", "e"]}
        assert identity == {"commit": git(project.path, "rev-parse", "HEAD").strip(),
                            "contract_sha256": hashlib.sha256(
                                (project.path / "verify.toml").read_bytes()).hexdigest()}
        collected[index] = [gate["name"] for gate in report["gates"]]
        result.stdout.fnmatch_lines([f"verify.toml::{name} PASSED*"
                                     for name in collected[index]])
        assert all(entry["reason"] == f"in shard {3 - index} of 2"
                   for entry in report["not_selected"])
    assert sorted(collected[1] + collected[2]) == ["a", "b", "c", "d", "e"]
    assert {"a", "e"} <= set(collected[1]) or {"a", "e"} <= set(collected[2])
    monkeypatch.setenv("CI_NODE_INDEX", "2")
    monkeypatch.setenv("CI_NODE_TOTAL", "2")
    by_env = project.runpytest("--verify-contract", "--verify-all", "--verify-shard", "auto",
                               "--co", "-q")
    assert [line.split("::")[1] for line in by_env.outlines
            if line.startswith("verify.toml::")] == collected[2]
    unasked = project.runpytest("--verify-contract", "--verify-all", "--co", "-q")
    assert len([line for line in unasked.outlines if line.startswith("verify.toml::")]) == 5
    bad = project.runpytest("--verify-contract", "--verify-shard", "3/2")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--verify-shard '3/2': K must be between 1 and N (2)*"])
    assert "Traceback" not in bad.stderr.str()


def test_a_shard_whose_commit_git_cannot_tell_writes_no_report(tmp_path: Path) -> None:
    """The commit a shard records is what keeps shards of other runs out of a merge: a git
    failure (here a broken config) is an error, never a report with no commit, which would
    match any other shard that has none."""
    git(tmp_path, "init", "-q")
    write(tmp_path / "verify.toml", gates_toml("a", "b"))
    commit_all(tmp_path)
    with (tmp_path / ".git" / "config").open("a") as config:
        config.write("[core\n")
    done = verifygate("run", "--all", "--shard", "1/2", "--json", "r.json", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    # Refused as early as git fails: here at asking whether the report is a tracked file.
    assert "failed: fatal: bad config line" in done.stderr, done.stderr
    assert not (tmp_path / "r.json").exists()
