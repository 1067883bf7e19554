"""``verifygate agent-hook``: verify-on-stop for coding agents (Claude Code ``Stop`` hooks).

Owns the hook protocol and the per-session bookkeeping; the gates run through the one engine,
exactly as ``verifygate run`` runs them.

Protocol (Claude Code ``Stop`` / ``SubagentStop``): a JSON object on stdin with ``session_id``,
``cwd`` and ``stop_hook_active``. To keep the agent working, print
``{"decision": "block", "reason": <digest>}``; to let it stop, print nothing (or JSON without a
decision). The exit status is always 0: for a Stop hook, status 2 also blocks, and any other
status is an error shown to the user; neither must come from a problem the agent cannot fix.

Decisions, per session:

- no changes (working tree vs HEAD plus untracked files, or since ``--changed-from``): allow;
- gates pass (or only manual gates are pending, or no gate applies): allow, and reset the
  round count;
- gates fail: block with the digest, counting the round; when the failure signature equals the
  previous round's, the reason says so;
- gates still fail after ``--max-rounds`` blocks in a row: allow, with a ``systemMessage``
  telling the user a human must review; the count starts again at zero, so the next stop after
  a human re-prompts the agent gets a fresh set of rounds;
- anything that prevents checking (a malformed payload, no contract, an invalid contract, no
  git repository, an interrupted run): allow, with the reason on stderr and in a
  ``systemMessage``. A contract error is not handed to the agent, which would be tempted to
  "fix" it by weakening the gates; the user sees it instead.

``stop_hook_active`` is validated but not relied on: the round cap must hold even for a harness
that never sets it, so the count lives in our own state.

Rounds are counted per session (``session_id``), and per subagent when a ``SubagentStop``
payload names one (``agent_id``). State lives in ``<git dir>/verifygate/agent/<key>.json``,
the last report beside it, never in the work tree; both are written atomically.
"""

import argparse
import contextlib
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from pytest_verifygate import codes
from pytest_verifygate.changes import ChangeRequest
from pytest_verifygate.contract import posix_relative
from pytest_verifygate.engine import Plan, RunRequest, prepare
from pytest_verifygate.errors import ContractError, VerifyGateError
from pytest_verifygate.signals import Interruptible
from pytest_verifygate.storage import state_dir, write_atomic

STATE_VERSION = 1
KEEP_SESSIONS = 100
MAX_PAYLOAD_BYTES = 1 << 20
STOP_EVENTS = ("Stop", "SubagentStop")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class PayloadError(Exception):
    """The hook input is not what a Stop hook receives."""


class HookPayload(NamedTuple):
    """What the hook needs from Claude Code's input."""

    session_id: str
    cwd: Path
    stop_hook_active: bool = False
    event: str = "Stop"
    agent_id: str | None = None

    @property
    def state_key(self) -> str:
        """Whose rounds these are: the session, or one subagent of it (parallel subagents
        share the session id, and must not use up each other's rounds)."""
        return self.session_id if self.agent_id is None else f"{self.session_id}/{self.agent_id}"


class SessionState(NamedTuple):
    """What one session's hook remembers between stops."""

    rounds: int = 0
    signature: str | None = None
    failed_gates: tuple[str, ...] = ()

    def to_json(self, key: str) -> str:
        data = {
            "version": STATE_VERSION,
            "key": key,
            "rounds": self.rounds,
            "signature": self.signature,
            "failed_gates": list(self.failed_gates),
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        return json.dumps(data, indent=2) + "\n"


class Decision(NamedTuple):
    """The hook's answer: block with a reason for the agent, or allow (maybe with a note)."""

    block_reason: str | None = None
    system_message: str | None = None
    state: SessionState = SessionState()  # immutable, so one shared fresh state is safe

    def output(self) -> str:
        """What to print on stdout: a JSON object, or nothing for a plain allow."""
        data: dict[str, Any] = {}
        if self.block_reason is not None:
            data = {"decision": "block", "reason": self.block_reason}
        if self.system_message is not None:
            data["systemMessage"] = self.system_message
        return json.dumps(data) + "\n" if data else ""


# --------------------------------------------------------------------------------------------
# input


def parse_payload(raw: bytes) -> HookPayload:
    """The hook input, validated; ``PayloadError`` says what is wrong with it."""
    if not raw.strip():
        raise PayloadError("empty input: expected the hook's JSON object on stdin")
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise PayloadError(f"input larger than {MAX_PAYLOAD_BYTES} bytes: not a hook payload")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise PayloadError("input is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise PayloadError(f"input is not JSON ({exc.msg} at line {exc.lineno} column "
                           f"{exc.colno})") from None
    if not isinstance(data, dict):
        raise PayloadError(f"input is JSON {type(data).__name__}, expected an object")
    session_id = data.get("session_id")
    if not isinstance(session_id, str) or not session_id.strip():
        raise PayloadError("'session_id' is missing or not a non-empty string")
    cwd = data.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        raise PayloadError("'cwd' is missing or not a string")
    if not os.path.isabs(cwd):
        raise PayloadError(f"'cwd' must be an absolute path, got {cwd!r}")
    if not os.path.isdir(cwd):
        raise PayloadError(f"'cwd' is not a directory: {cwd}")
    active = data.get("stop_hook_active", False)
    if not isinstance(active, bool):
        raise PayloadError("'stop_hook_active' is not true or false")
    event = data.get("hook_event_name", "Stop")
    if not isinstance(event, str):
        raise PayloadError("'hook_event_name' is not a string")
    if event not in STOP_EVENTS:
        raise PayloadError(f"hook event {event!r} is not one this hook handles "
                           f"({', '.join(STOP_EVENTS)}): register it for Stop and SubagentStop")
    agent_id = data.get("agent_id")
    if agent_id is not None and not isinstance(agent_id, str):
        raise PayloadError("'agent_id' is not a string")
    return HookPayload(session_id=session_id, cwd=Path(cwd), stop_hook_active=active,
                       event=event, agent_id=agent_id or None)


# --------------------------------------------------------------------------------------------
# state


def session_file_stem(key: str) -> str:
    """A file name for a session key: safe characters only, unique for distinct keys."""
    safe = _UNSAFE.sub("_", key).lstrip(".")
    # ".report" would collide with the session's report file (``<stem>.report.json``).
    if safe != key or len(safe) > 64 or not safe or safe.endswith(".report"):
        import hashlib  # only for keys that are not already a safe file name

        tag = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        safe = f"{safe[:48]}-{tag}" if safe else tag
    return safe


def state_path(repo_root: Path, key: str) -> Path:
    """``<git dir>/verifygate/agent/<session>.json`` (``key``: ``HookPayload.state_key``)."""
    return state_dir(repo_root) / "agent" / f"{session_file_stem(key)}.json"


def load_state(path: Path) -> SessionState:
    """The saved state, or a fresh one when there is none or it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return SessionState()
    except (OSError, ValueError) as exc:
        _warn(f"ignoring unreadable state {path} ({exc}); starting the round count again")
        return SessionState()
    if not isinstance(data, dict):
        return SessionState()
    rounds = data.get("rounds")
    signature = data.get("signature")
    gates = data.get("failed_gates")
    return SessionState(
        rounds=rounds if isinstance(rounds, int) and rounds >= 0 else 0,
        signature=signature if isinstance(signature, str) else None,
        failed_gates=tuple(str(g) for g in gates) if isinstance(gates, list) else (),
    )


def save_state(path: Path, key: str, state: SessionState) -> None:
    write_atomic(path, state.to_json(key))
    _prune(path.parent)


def _prune(directory: Path) -> None:
    """Keep the most recent sessions' files; old sessions never come back."""
    from pytest_verifygate.storage import prune_oldest  # loaded already, for state_dir

    def remove_session(state: Path) -> None:
        for stale in (state, state.with_suffix(".report.json")):
            with contextlib.suppress(OSError):
                stale.unlink()

    try:
        states = [p for p in directory.glob("*.json") if not p.name.endswith(".report.json")]
    except OSError:
        return
    prune_oldest(states, KEEP_SESSIONS, remove_session)


# --------------------------------------------------------------------------------------------
# deciding


def decide(
    report: Mapping[str, Any],
    *,
    digest: str,
    signature: str | None,
    previous: SessionState,
    max_rounds: int,
    report_path: str | None = None,
    rerun: str = "verifygate run",
) -> Decision:
    """Block or allow, given this round's report and what the session remembers."""
    if report.get("verdict") != codes.VERDICT_FAILED:
        note = None
        if report.get("verdict") == codes.VERDICT_PENDING:
            note = digest.strip()  # the one line naming the gates awaiting sign-off
        return Decision(system_message=note, state=SessionState())
    failed = tuple(str(g.get("name")) for g in report.get("gates", [])
                   if g.get("outcome") == codes.FAILED)
    names = ", ".join(f"`{name}`" for name in failed[:10]) or "(no gate ran)"
    if len(failed) > 10:
        names += f" and {len(failed) - 10} more"
    if previous.rounds >= max_rounds:
        where = f" Last report: {report_path}." if report_path else ""
        message = (f"verifygate: gates still fail after {previous.rounds} round(s) of fixes "
                   f"({names}): the stop is allowed and a human must review the work. Run "
                   f"`{rerun}` to see the failures.{where}")
        return Decision(system_message=message,
                        state=SessionState(0, signature, failed))
    rounds = previous.rounds + 1
    lines = [f"verifygate blocked this stop (round {rounds} of {max_rounds}): the verify "
             f"contract's gates fail on your changes. Fix the failures below, then stop again; "
             f"the gates run again automatically."]
    if signature is not None and signature == previous.signature:
        lines.append("Note: these failures are identical to the previous round's: your last "
                     "changes did not affect them. Try a different approach; if the cause is "
                     "outside the code (a missing tool, a broken environment), say so and stop.")
    if rounds == max_rounds:
        lines.append("This is the last round: if the gates still fail at your next stop, the "
                     "stop is allowed and a human reviews the work.")
    reason = "\n".join(lines) + "\n\n" + digest
    return Decision(block_reason=reason, state=SessionState(rounds, signature, failed))


# --------------------------------------------------------------------------------------------
# the command


def run_agent_hook(args: argparse.Namespace) -> int:
    """Read the payload, check the gates, print the decision. Always returns 0."""
    try:
        with Interruptible():  # SIGTERM (a hook timeout) ends gates cleanly, like Ctrl-C
            decision = _run(args)
    except KeyboardInterrupt:
        decision = _allow("interrupted before the gates finished: the stop is allowed")
    except Exception as exc:  # a crash must never trap an agent, nor show it a traceback
        decision = _allow(f"internal error ({type(exc).__name__}: {exc}): the stop is allowed; "
                          "please report this")
    sys.stdout.write(decision.output())
    sys.stdout.flush()
    return 0


def _run(args: argparse.Namespace) -> Decision:
    try:
        payload = parse_payload(sys.stdin.buffer.read(MAX_PAYLOAD_BYTES + 1))
    except PayloadError as exc:
        return _allow(f"malformed hook input: {exc}; the stop is allowed without checking")
    try:
        os.chdir(payload.cwd)  # relative paths in messages and --contract are from here
        plan = prepare(_request(args, payload))
    except ContractError as exc:
        return _allow(f"contract error: {exc}; the stop is allowed without checking")
    except VerifyGateError as exc:
        return _allow(f"{exc}; the stop is allowed without checking")
    except OSError as exc:
        return _allow(f"cannot use {payload.cwd}: {exc.strerror or exc}; the stop is allowed")
    for warning in plan.warnings:
        _warn(warning)
    return _check(args, payload, plan)


def _request(args: argparse.Namespace, payload: HookPayload) -> RunRequest:
    """The engine's request: the working tree vs HEAD plus untracked files (or everything
    since ``--changed-from``), for the gates of ``--role``."""
    changes = ChangeRequest(changed_from=args.changed_from, worktree=args.changed_from is None)
    return RunRequest(contract=args.contract, start=payload.cwd, changes=changes,
                      role=args.role, read_cache=not getattr(args, "no_cache", False))


def _check(args: argparse.Namespace, payload: HookPayload, plan: Plan) -> Decision:
    contract = plan.contract
    path = state_path(contract.repo_root, payload.state_key)
    previous = load_state(path)
    if not plan.changes.files:
        # Nothing changed: nothing to verify, and nothing left of earlier failures.
        if previous != SessionState():
            save_state(path, payload.state_key, SessionState())
        return Decision()
    # Imported once there is something to run: most stops change nothing, or hit a contract
    # error, and need none of it.
    from pytest_verifygate import engine
    from pytest_verifygate.plugins import plugin_hook
    from pytest_verifygate.report.document import write_report

    hook = plugin_hook()
    run = engine.run(plan, hook=hook)
    if run.interrupted:
        return _allow("the gates were interrupted: the stop is allowed without a verdict")
    report = engine.report(run, hook)
    root = str(contract.repo_root)
    report_path = path.with_suffix(".report.json")
    write_report(report_path, report)
    digest, signature = "", None
    # A pass needs neither digest nor signature: most stops pass.
    if report["verdict"] in (codes.VERDICT_FAILED, codes.VERDICT_PENDING):
        from pytest_verifygate.report.digest import failure_signature, to_digest

        digest, signature = to_digest(report, root=root), failure_signature(report, root=root)
    decision = decide(
        report,
        digest=digest,
        signature=signature,
        previous=previous,
        max_rounds=args.max_rounds,
        report_path=posix_relative(report_path, contract.repo_root),
        rerun=_rerun_command(args),
    )
    if decision.state != previous:
        save_state(path, payload.state_key, decision.state)
    if decision.system_message is not None and decision.block_reason is None:
        _warn(decision.system_message.removeprefix("verifygate: "))
    return decision


def _rerun_command(args: argparse.Namespace) -> str:
    """The ``verifygate run`` command that checks what this hook checked."""
    words = ["verifygate", "run", "--changed-from", args.changed_from or "HEAD"]
    if args.contract:
        words += ["--contract", args.contract]
    if args.role:
        words += ["--role", args.role]
    return shlex.join(words)


def _allow(message: str) -> Decision:
    _warn(message)
    return Decision(system_message=f"verifygate agent-hook: {message}")


def _warn(message: str) -> None:
    print(f"verifygate agent-hook: {message}", file=sys.stderr)
