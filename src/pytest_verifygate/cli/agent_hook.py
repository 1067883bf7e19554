"""``verifygate agent-hook``: the coding-agent stop hook's front end over ``agents/stop_hook``.
A crash, a signal or the ``--budget`` running out is a blocked stop, never an allowed one.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_verifygate.agents.protocol import Decision, HookPayload

# Blocks for a payload of no known agent: Claude Code, Codex CLI and Gemini CLI all read exit
# status 2, with the reason on stderr, as a block.
EXIT_BLOCK_UNKNOWN_AGENT = 2


def main(args: argparse.Namespace) -> int:
    if args.background or args.worker:  # before the stop's imports: an edit waits for it
        from pytest_verifygate.agents import background

        return background.work(args) if args.worker else background.after_edit(args)
    from pytest_verifygate.agents.detect import ADAPTERS, UnreadPayload, read_payload
    from pytest_verifygate.agents.protocol import Adapter, read_input
    from pytest_verifygate.agents.stop_hook import (
        GatesInterrupted,
        allow,
        fail_closed,
        in_project,
        judge,
        one_line,
    )
    from pytest_verifygate.selection import asked_roles
    from pytest_verifygate.signals import TERMINATING_SIGNALS, Interruptible

    args.role = asked_roles(args.role, os.environ)  # every --role, else $VERIFYGATE_ROLE
    adapter: Adapter | None = ADAPTERS.get(args.agent or "")
    payload: HookPayload | None = None
    budget = args.budget
    # Every terminating signal, and the budget's alarm, ends the gates cleanly, like Ctrl-C.
    with Interruptible((*TERMINATING_SIGNALS, signal.SIGALRM)) as guard:
        signal.setitimer(signal.ITIMER_REAL, budget)
        try:
            try:
                adapter, payload = read_payload(read_input(sys.stdin.buffer), args.agent)
                payload = in_project(payload)
                decision = judge(args, payload)
            # From here on a signal, or the budget, is noted, never raised: the answer that
            # blocks must be given whole.
            except UnreadPayload as exc:
                guard.hold()
                adapter = exc.adapter
                decision = (allow(f"{exc}; nothing to check")._replace(status=None)
                            if exc.not_a_stop
                            else fail_closed(args, None, f"its input cannot be read: {exc}"))
            except (KeyboardInterrupt, GatesInterrupted) as exc:
                guard.hold()
                gates = exc.gates if isinstance(exc, GatesInterrupted) else ()
                decision = fail_closed(args, payload, _interruption(
                    guard.received, budget, gates, read=payload is not None))
            except Exception as exc:  # a crash must never let an unchecked stop through
                guard.hold()
                decision = fail_closed(args, payload, f"an internal error stopped the check "
                                       f"({type(exc).__name__}: {one_line(exc)}); please "
                                       "report it")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    _record(payload, decision)
    if decision.system_message is not None and decision.block_reason is None:
        print(decision.system_message, file=sys.stderr)
    if adapter is None:
        if decision.block_reason is not None:  # no protocol to answer in: the exit status
            print(decision.block_reason, file=sys.stderr)
            return EXIT_BLOCK_UNKNOWN_AGENT
        return 0
    sys.stdout.write(adapter.render(decision))
    sys.stdout.flush()
    return 0


def _interruption(received: int | None, budget: float, gates: tuple[str, ...], *,
                  read: bool) -> str:
    """Why the check ended early: the budget (before or after the input arrived), or a
    signal; ``gates`` were cut short."""
    from pytest_verifygate.agents.stop_hook import gate_names

    running = f" (cut short: {gate_names(gates)})" if gates else ""
    if received == signal.SIGALRM and not read:
        return f"the hook's input did not arrive within its time budget of {budget:g} s"
    if received == signal.SIGALRM:
        return (f"the gates did not finish within the hook's time budget of {budget:g} s, and "
                f"were stopped{running}. A gate that hangs or became slow is the likely cause; "
                "the budget stays below the agent's hook timeout (`--budget`)")
    name = signal.Signals(received).name if received is not None else "an interrupt"
    return f"the check was interrupted by {name} before the gates finished{running}"


def _record(payload: HookPayload | None, decision: Decision) -> None:
    """Keep this stop's outcome for ``verifygate agent-status``; never an error."""
    from pytest_verifygate.agents import status
    from pytest_verifygate.agents.stop_hook import one_line
    from pytest_verifygate.contract import find_repo_root

    if decision.status is None:
        return
    try:
        repo_root = find_repo_root(payload.cwd if payload is not None else Path.cwd())
        if repo_root is None:
            return
        message = decision.block_reason or decision.system_message or ""
        status.record_status(repo_root, decision.status,
                             agent=payload.agent if payload is not None else "unknown",
                             session=payload.session_id if payload is not None else "",
                             message=message.split("\n", 1)[0],
                             failed_gates=decision.state.failed_gates)
    except Exception as exc:  # the answer matters more than the record
        print(f"verifygate agent-hook: cannot record this stop's outcome "
              f"({type(exc).__name__}: {one_line(exc)})", file=sys.stderr)
