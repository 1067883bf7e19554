"""Load: 200 gates, 16 at a time, leave no descriptor, thread, child or zombie behind, and
every line of output lands in the gate that printed it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pytest_verifygate.engine import to_report

from .support import children_of, open_fds, run_contract, validate

GATES = 200
LINES = 100
# Each gate prints its own name on every line, pausing now and then so that the gates'
# outputs interleave in time while 16 of them share the machine.
SCRIPT = ('i=0; while [ $i -lt {lines} ]; do echo \\"{name} line $i\\"; i=$((i+1)); '
          'if [ $((i % 25)) -eq 0 ]; then sleep 0.01; fi; done')


def test_two_hundred_gates_leak_nothing_and_keep_their_own_output(repo: Path) -> None:
    contract = "[settings]\njobs = 16\n" + "".join(
        f'[[gate]]\nname = "gate{index:03d}"\nshell = true\n'
        f'command = "{SCRIPT.format(lines=LINES, name=f"gate{index:03d}")}"\n'
        for index in range(GATES)
    )
    fds_before = open_fds()
    threads_before = threading.active_count()
    assert children_of(os.getpid()) == []

    run = run_contract(repo, contract)

    assert open_fds() == fds_before  # every pipe and log file closed
    assert threading.active_count() == threads_before  # the worker pool is gone
    assert children_of(os.getpid()) == []  # every gate reaped: no child, no zombie
    assert len(run.results) == GATES
    for index, result in enumerate(run.results):
        name = f"gate{index:03d}"
        assert (result.name, result.outcome) == (name, "passed"), result.output_tail
        assert result.output_tail.splitlines() == [f"{name} line {i}" for i in range(LINES)]
    validate(to_report(run))
