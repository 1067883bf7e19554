"""Hostile ``needs``: a contract of thousands of gates chained or in a circle is planned,
ordered, sharded and run with bounded work (no recursion, nothing quadratic in the chain),
and a circle is one contract error naming its gates.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pytest_verifygate.contract import Gate, load_contract
from pytest_verifygate.errors import ContractError
from pytest_verifygate.git.changes import ChangeSet
from pytest_verifygate.plan import plan_gates
from pytest_verifygate.runner.records import GatePlan
from pytest_verifygate.runner.scheduler import run_order
from pytest_verifygate.selection import select_gates
from pytest_verifygate.shards import Shard, assign
from pytest_verifygate.state import durations

from conftest import commit_all, verifygate, write

# Contracts of thousands of gates, and runs of them: outside the fast loop.
pytestmark = pytest.mark.slow

GATES = 5000
# Generous for two shared cores: the quadratic or recursive walks these tests guard against
# took 20 s or more (or raised RecursionError) at this size.
SECONDS = 10.0


def chain_contract(count: int, *, first_command: str = "true", circle: bool = False,
                   backward: bool = True) -> str:
    """``count`` gates declared g0..gN in a chain of needs: ``backward``, each needs the next
    one (the run order is the reverse of the declared order), else each needs the one before;
    with ``circle`` the chain's ends need each other too. ``first_command``: the command of
    the gate that runs first."""
    blocks = []
    for index in range(count):
        first = index == (count - 1 if backward else 0)
        command = first_command if first else "true"
        if backward:
            need = index + 1 if index < count - 1 else (0 if circle else None)
        else:
            need = index - 1 if index > 0 else (count - 1 if circle else None)
        needs = f'needs = ["g{need}"]\n' if need is not None else ""
        blocks.append(f'[[gate]]\nname = "g{index}"\ncommand = "{command}"\n{needs}')
    return "\n".join(blocks)


@pytest.mark.parametrize("backward", [True, False], ids=["backward", "forward"])
def test_a_long_chain_of_needs_is_ordered_sharded_and_weighed_quickly(
    repo: Path, backward: bool
) -> None:
    write(repo / "verify.toml", chain_contract(GATES, backward=backward))
    begun = time.monotonic()
    contract = load_contract(repo / "verify.toml")
    selections = select_gates(contract, ChangeSet("all"))
    plans = plan_gates(contract, selections)
    ordered = [plan.gate.name for plan in run_order(plans)]
    needs = {gate.name: gate.needs for gate in contract.gates}
    longest = durations.longest_first([gate.name for gate in contract.gates], {}, needs)
    sharded = assign(selections, Shard(1, 2), {})
    assert time.monotonic() - begun < SECONDS
    # Every gate after the one it needs.
    chain = [f"g{index}" for index in range(GATES)]
    if backward:
        chain.reverse()
    assert ordered == chain
    # The gate the whole chain waits for counts as the longest, the chain's end the shortest.
    assert longest == chain
    # One group: the whole chain lands in one shard.
    assert len({selection.selected for selection in sharded}) == 1


@pytest.mark.parametrize("backward", [True, False], ids=["backward", "forward"])
def test_a_long_chain_of_needs_runs_and_lists_without_a_traceback(
    repo: Path, backward: bool
) -> None:
    # The chain's first gate to run fails: every other gate is skipped by its need.
    write(repo / "verify.toml", chain_contract(GATES, first_command="false", backward=backward))
    commit_all(repo)
    begun = time.monotonic()
    listed = verifygate("list", cwd=repo, timeout=60)
    assert listed.returncode == 0, listed.stderr
    # Two jobs: the longest-first start order is made too.
    done = verifygate("run", "--all", "--jobs", "2", "--json", "report.json", cwd=repo,
                      timeout=60)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    gates = json.loads((repo / "report.json").read_text())["gates"]
    outcomes = [gate["outcome"] for gate in gates]
    assert outcomes.count("failed") == 1
    assert outcomes.count("skipped") == GATES - 1
    assert time.monotonic() - begun < 3 * SECONDS


def test_a_long_circle_of_needs_is_one_contract_error_naming_its_gates(repo: Path) -> None:
    write(repo / "verify.toml", chain_contract(GATES, circle=True))
    begun = time.monotonic()
    with pytest.raises(ContractError) as caught:
        load_contract(repo / "verify.toml")
    assert time.monotonic() - begun < SECONDS
    message = str(caught.value)
    assert "\n" not in message
    assert "circle" in message and "'g0'" in message and "'g1'" in message
    assert "key 'needs'" in message or "needs" in message
    # One readable line, however long the circle.
    assert len(message) < 1000


def test_a_circle_through_the_command_line_is_one_line_exit_2(repo: Path) -> None:
    write(repo / "verify.toml", chain_contract(3, circle=True))
    done = verifygate("run", "--all", cwd=repo, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "'g0' -> 'g1' -> 'g2' -> 'g0'" in lines[0]


def test_a_circle_the_loader_did_not_see_neither_hangs_nor_drops_a_gate() -> None:
    """The order functions stand on their own: a circle of needs (which only a caller that
    bypasses the loader can hand them) leaves every gate in, once, in bounded time."""
    count = GATES
    gates = [Gate(name=f"g{index}", command="true", needs=(f"g{(index + 1) % count}",))
             for index in range(count)]
    plans = [GatePlan(gate, Path(".")) for gate in gates]
    begun = time.monotonic()
    ordered = [plan.gate.name for plan in run_order(plans)]
    longest = durations.longest_first([gate.name for gate in gates], {},
                                      {gate.name: gate.needs for gate in gates})
    assert time.monotonic() - begun < SECONDS
    assert ordered == [gate.name for gate in gates]  # none placeable: as given
    assert sorted(longest) == sorted(gate.name for gate in gates)
