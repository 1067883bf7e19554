"""Verifying while the agent works (docs: how-to/agents.md, "Verify while the agent works"):
after an edit, one background run per repository, at low priority, of the gates the session's
changes select whose passes the result cache keeps, once the edits settle. A newer edit
supersedes it, the stop waits for it (the same inputs) or retires it, and nothing of it
outlives the session. It only fills the result cache: the stop judges as it always does.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

    from pytest_verifygate.contract import Gate
    from pytest_verifygate.engine import Plan
    from pytest_verifygate.runner.records import GatePlan, GateResult

SETTLE_SECONDS = 1.0  # no newer edit for this long: the edits have settled
POLL_SECONDS = 0.2
NICENESS = 10
# Agents run hooks through a shell: the agent is the first ancestor that is none.
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "fish", "busybox"})
# {"latest": the newest edit's run, "running": {"token", "keys": [[gate, cache key], ...]}}
STATE = "state.json"
MAX_STATE_BYTES = 1 << 20


def after_edit(args: argparse.Namespace) -> int:
    """The after-edit hook (``agent-hook --background``): start the background run and answer
    at once. Whatever goes wrong, the agent goes on: only the cache is not filled."""
    from pytest_verifygate.agents.config import program
    from pytest_verifygate.agents.protocol import json_object, read_input

    try:
        data = json_object(read_input(sys.stdin.buffer))
        session = data.get("session_id") or data.get("conversation_id")  # Cursor's
        cwd = data.get("cwd") or (data.get("workspace_roots") or [os.getcwd()])[0]
        if isinstance(session, str) and session and isinstance(cwd, str) and not args.no_cache:
            passed_on = [*(["--contract", args.contract] if args.contract else []),
                         *(word for role in args.role or () for word in ("--role", role)),
                         *(["--jobs", str(args.jobs)] if args.jobs is not None else []),
                         *(["--changed-from", args.changed_from] if args.changed_from else [])]
            subprocess.Popen([*program(), "agent-hook", "--worker", str(_agent()), session,
                              *passed_on], cwd=cwd, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    except Exception as exc:
        print(f"verifygate agent-hook: no background run: {exc}", file=sys.stderr)
    sys.stdout.write("{}\n")  # nothing to say, in every agent's JSON
    return 0


def _agent() -> int:
    """The agent's process id (the hook's parent, past the shells between)."""
    pid = os.getppid()
    while (parent := _parent(pid)) is not None and parent[1] in SHELLS and parent[0] > 1:
        pid = parent[0]
    return pid


def _parent(pid: int) -> tuple[int, str] | None:
    """The parent of ``pid`` and ``pid``'s name, from ``/proc`` or else ``ps`` (macOS)."""
    from pytest_verifygate.runner.tree import read_proc

    proc = read_proc(pid)
    if proc is not None:
        return proc.ppid, proc.name
    with contextlib.suppress(OSError, ValueError):
        ppid, name = subprocess.run(["ps", "-o", "ppid=,comm=", "-p", str(pid)],
                                    capture_output=True, text=True).stdout.split(None, 1)
        return int(ppid), os.path.basename(name.strip()).lstrip("-")  # "-zsh": a login shell
    return None


def work(args: argparse.Namespace) -> int:
    """The background run (``agent-hook --worker AGENT_PID SESSION``): settle, plan as the
    stop does, run the cacheable gates that need a run while nothing newer supersedes it and
    the agent lives; its passes go to the result cache as any run's do."""
    from pytest_verifygate import engine
    from pytest_verifygate.agents import session_start
    from pytest_verifygate.contract import find_repo_root
    from pytest_verifygate.selection import asked_roles

    args.role = asked_roles(args.role, os.environ)  # as the stop asks for them
    os.nice(NICENESS)  # and every gate it starts
    os.environ["GIT_OPTIONAL_LOCKS"] = "0"  # never an index.lock in the way of the agent's git
    token, alive = os.urandom(8).hex(), _watch(int(args.worker[0]))
    record = session_start.load(args.worker[1])
    place = None if record is None else _place(Path(record.repository))
    if record is None or place is None:
        return 0
    _update(place, lambda state: {**state, "latest": token})  # settling runs give way
    for _ in range(round(SETTLE_SECONDS / POLL_SECONDS)):
        time.sleep(POLL_SECONDS)
        if _read(place).get("latest") != token or not alive():
            return 0
    os.chdir(record.directory)
    start = session_start.StartPoint(record.commit, session_start.FROM_SESSION_START)
    if args.changed_from:
        start, _ = session_start.changed_from_start(find_repo_root(Path.cwd()) or Path.cwd(),
                                                    args.changed_from)
    plan = engine.prepare(session_start.run_request(args, Path(record.directory), start))
    plans = _cacheable(plan.gate_plans())
    keys = sorted([gate_plan.gate.name, gate_plan.cache.key] for gate_plan in plans
                  if gate_plan.cache is not None)

    def claim(state: dict[str, Any]) -> dict[str, Any]:
        if state.get("latest") != token or (_running(state).get("keys") == keys and _busy(place)):
            return state  # superseded, or the run going on is on these inputs already
        return {**state, "running": {"token": token, "keys": keys}}

    if not plans or _running(_update(place, claim)).get("token") != token:
        return 0
    def failed(gate: Gate, result: GateResult) -> None:
        if result.failed:  # a stop waiting for this run need not wait for the rest
            _update(place, lambda state: {**state, "running": {**_running(state), "failed": True}}
                    if _running(state).get("token") == token else state)

    lock = _lock(place)  # once a run this one superseded has ended its gates
    runner = engine.start(plan, plans, on_finished=failed)
    done = threading.Event()

    def watch() -> None:
        while not done.wait(POLL_SECONDS):
            if _running(_read(place)).get("token") != token or not alive():
                runner.cancel()  # superseded, retired by the stop, or the agent is gone
                return

    threading.Thread(target=watch, name="background-watch", daemon=True).start()
    try:
        runner.results()
    finally:
        done.set()
        runner.close()  # stores the passes
        _update(place, lambda state: state if _running(state).get("token") != token
                else {key: value for key, value in state.items() if key != "running"})
        os.close(lock)
    return 0


def _cacheable(plans: list[GatePlan]) -> list[GatePlan]:
    """The plans a background run starts: those that run something, rewrite no file (a
    ``fixer`` would race the agent's edits) and whose pass the cache keeps, after the gates
    they need (a gate needing one left out would run where the stop runs it after)."""
    from pytest_verifygate.runner.scheduler import needs_process, run_order

    names = {gate_plan.gate.name for gate_plan in plans}
    ready = {gate_plan.gate.name for gate_plan in plans if not needs_process(gate_plan)
             and gate_plan.cache is not None and gate_plan.cache.hit is not None}
    kept = []
    for gate_plan in run_order(plans):
        if (gate_plan.cache is not None and needs_process(gate_plan) and not gate_plan.gate.fixer
                and all(need in ready or need not in names for need in gate_plan.gate.needs)):
            kept.append(gate_plan)
            ready.add(gate_plan.gate.name)
    return kept


def settle(plan: Plan) -> None:
    """Before a stop runs its gates: wait for a background run on the inputs it needs (its
    passes are then in the cache), retire any other and wait for it to end; the stop holds
    the lock from then on, so no background run starts its gates beside it."""
    place = _place(plan.contract.repo_root)
    state = _read(place) if place is not None else {}
    if place is None or not state:
        return
    keys = {tuple(key) for key in _running(state).get("keys") or ()}
    needed = set()
    if keys:
        needed = {(gate_plan.gate.name, gate_plan.cache.key) for gate_plan in plan.gate_plans()
                  if gate_plan.cache is not None and gate_plan.cache.hit is None}
    if not needed or not needed <= keys:
        _update(place, lambda state: {})
    while True:
        with contextlib.suppress(BlockingIOError):
            _lock(place, wait=False)  # held until the stop's process ends
            return
        if _running(_read(place)).get("failed"):  # the stop blocks whatever: it runs them now
            _update(place, lambda state: {})
        time.sleep(POLL_SECONDS / 4)


def retire(repo_root: Path) -> None:
    """End every background run of the repository (a new session starts)."""
    place = _place(repo_root)
    if place is not None and _read(place):
        _update(place, lambda state: {})


def _watch(pid: int) -> Callable[[], bool]:
    """Whether the process ``pid`` still lives (where ``/proc`` tells, the same one)."""
    from pytest_verifygate.runner.tree import read_proc

    first = read_proc(pid)

    def alive() -> bool:
        if first is None:  # no /proc: by its id alone
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            return True
        now = read_proc(pid)
        return now is not None and now.running and now.start == first.start

    return alive


def _place(repo_root: Path) -> Path | None:
    """The repository's background state, in the private state directory."""
    from pytest_verifygate.state.storage import private_dir, repository_key

    return private_dir("background", repository_key(repo_root))


def _read(place: Path) -> dict[str, Any]:
    from pytest_verifygate.state.files import StateFileError, read_state_file

    with contextlib.suppress(StateFileError, ValueError):
        state = json.loads(read_state_file(place / STATE, MAX_STATE_BYTES) or b"{}")
        if isinstance(state, dict):
            return state
    return {}


def _running(state: dict[str, Any]) -> dict[str, Any]:
    running = state.get("running")
    return running if isinstance(running, dict) else {}


def _update(place: Path, change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """The state ``change`` made of it, one change at a time."""
    from pytest_verifygate.state.files import write_state

    fd = _lock(place, "state.lock")
    try:
        state = change(_read(place))
        write_state(place / STATE, json.dumps(state))
        return state
    finally:
        os.close(fd)


def _lock(place: Path, name: str = "running.lock", *, wait: bool = True) -> int:
    """A descriptor holding the lock ``name`` (held by a background run while it runs its
    gates, and by a stop); ``BlockingIOError`` without ``wait`` when another holds it."""
    from pytest_verifygate.state.files import open_state_dir

    dir_fd = open_state_dir(place, create=True)
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _busy(place: Path) -> bool:
    """Whether a background run holds the running lock."""
    try:
        os.close(_lock(place, wait=False))
    except BlockingIOError:
        return True
    return False
