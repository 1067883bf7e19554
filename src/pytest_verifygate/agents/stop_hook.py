"""``verifygate agent-hook``: the one verify-on-stop policy, for every coding agent.

Owns the decisions. Each agent's protocol (its payload, its answer's format, its
configuration) is an adapter's (``claude.py``, ``codex.py``, ``cursor.py``, ``gemini.py``;
``detect.py`` tells them apart); the per-session files are ``state.py``'s and the starting
point ``session_start.py``'s. The gates run through the one engine, exactly as
``verifygate run`` runs them. The exit status is always 0: every agent reads a non-zero status
as a block or an error, and neither must come from a problem the agent cannot fix. A
``SessionStart`` payload records the session's starting point and is answered with nothing
(what a SessionStart hook prints becomes the agent's context).

What a stop checks: everything changed since the session's starting point
(``session_start.py``: HEAD when the session began, or the upstream merge base), committed or
not, plus untracked files; and the contract as it was there still binds: its gates run as they
were, even if removed or changed since (``contract/revision.py``).

Decisions, per session, the same for every agent:

- no changes since the starting point: allow;
- gates pass (or only manual gates are pending, or no gate applies): allow, and reset the
  round count;
- gates fail: block with the digest, counting the round; when the failure signature equals the
  previous round's, the reason says so;
- gates still fail after ``--max-rounds`` blocks in a row: allow, telling the user a human must
  review (``Decision.human_review``); the count starts again at zero, so the next stop after
  a human re-prompts the agent gets a fresh set of rounds;
- the contract cannot be loaded (invalid, unreadable, or removed since the starting point):
  block with the error, counting rounds like failing gates: it fails closed, since an agent
  that breaks the contract must not stop unchecked;
- anything else that prevents checking (a malformed payload, no contract now and none at the
  starting point, no git repository, an interrupted run, a run the user aborted): allow, with
  the reason on stderr and, where the agent shows one, in a message to the user.

The rounds behind a stop are the agent's own count where it keeps one (Cursor's
``loop_count``: the hand-over was given once it passes the cap), else ours:
``stop_hook_active`` is validated but not relied on, since the round cap must hold even for a
harness that never sets it. Ours are counted per session, and per subagent when a payload names
one (``agent_id``), in ``<git dir>/verifygate/agent/`` (``state.py``), never in the work tree.

PYTEST_DONT_REWRITE
"""

import argparse
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_verifygate import codes
from pytest_verifygate.agents.protocol import (
    MAX_PAYLOAD_BYTES,
    SESSION_START,
    Adapter,
    Decision,
    HookPayload,
)
from pytest_verifygate.agents.session_start import (
    StartPoint,
    empty_tree,
    head_commit,
    record_session_start,
    session_start_point,
)
from pytest_verifygate.agents.state import SessionState, load_state, save_state, state_path
from pytest_verifygate.changes import ChangeRequest
from pytest_verifygate.contract import find_repo_root, posix_relative
from pytest_verifygate.contract.revision import NoContractError, change_note
from pytest_verifygate.engine import Plan, RunRequest, prepare
from pytest_verifygate.errors import ContractError, VerifyGateError
from pytest_verifygate.signals import Interruptible

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
    notes: tuple[str, ...] = (),
) -> Decision:
    """Block or allow, given this round's report and what the session remembers.

    ``notes``: lines for the agent between the round's first line and the digest.
    """
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
    where = f" Last report: {report_path}." if report_path else ""
    return block_round(
        previous, max_rounds, signature=signature, failed=failed, notes=notes, body=digest,
        problem="the verify contract's gates fail on your changes. Fix the failures below, "
                "then stop again; the gates run again automatically.",
        hand_over=f"gates still fail after {previous.rounds} round(s) of fixes ({names}): the "
                  f"stop is allowed and a human must review the work. Run `{rerun}` to see "
                  f"the failures.{where}",
    )


def block_round(
    previous: SessionState,
    max_rounds: int,
    *,
    problem: str,
    body: str,
    signature: str | None,
    failed: tuple[str, ...],
    hand_over: str,
    notes: tuple[str, ...] = (),
) -> Decision:
    """Block for one more round, or, after ``max_rounds`` blocks in a row, allow and tell the
    user (``hand_over``) that a human must review."""
    if previous.rounds >= max_rounds:
        return Decision(system_message=f"verifygate: {hand_over}",
                        state=SessionState(0, signature, failed), human_review=True)
    rounds = previous.rounds + 1
    lines = [f"verifygate blocked this stop (round {rounds} of {max_rounds}): {problem}",
             *notes]
    if signature is not None and signature == previous.signature:
        lines.append("Note: these failures are identical to the previous round's: your last "
                     "changes did not affect them. Try a different approach; if the cause is "
                     "outside the code (a missing tool, a broken environment), say so and stop.")
    if rounds == max_rounds:
        lines.append("This is the last round: if the gates still fail at your next stop, the "
                     "stop is allowed and a human reviews the work.")
    reason = "\n".join(lines) + "\n\n" + body
    return Decision(block_reason=reason, state=SessionState(rounds, signature, failed))


# --------------------------------------------------------------------------------------------
# the command


def run_agent_hook(args: argparse.Namespace) -> int:
    """Read the payload, check the gates, print the decision in the agent's format. Always
    returns 0. Every message for the user is also said on stderr, one line each."""
    from pytest_verifygate.agents.detect import UnreadPayload, read_payload

    adapter: Adapter | None = None
    try:
        adapter, payload = read_payload(sys.stdin.buffer.read(MAX_PAYLOAD_BYTES + 1),
                                        getattr(args, "agent", None))
        with Interruptible():  # SIGTERM (a hook timeout) ends gates cleanly, like Ctrl-C
            decision = _run(args, payload)
    except UnreadPayload as exc:
        adapter = exc.adapter  # None: no agent's payload; answer nothing at all
        decision = _allow(f"{exc}; the stop is allowed without checking")
    except KeyboardInterrupt:
        decision = _allow("interrupted before the gates finished: the stop is allowed")
    except Exception as exc:  # a crash must never trap an agent, nor show it a traceback
        decision = _allow(f"internal error ({type(exc).__name__}: {exc}): the stop is allowed; "
                          "please report this")
    if decision.system_message is not None and decision.block_reason is None:
        print(decision.system_message, file=sys.stderr)
    sys.stdout.write("" if adapter is None else adapter.render(decision))
    sys.stdout.flush()
    return 0


def _run(args: argparse.Namespace, payload: HookPayload) -> Decision:
    import os

    try:
        os.chdir(payload.cwd)  # relative paths in messages and --contract are from here
    except OSError as exc:
        return _allow(f"cannot use {payload.cwd}: {exc.strerror or exc}; the stop is allowed")
    repo_root = find_repo_root(Path.cwd())
    if payload.event == SESSION_START:
        return _session_started(payload, repo_root)
    if payload.skip_reason is not None:
        return _allow(payload.skip_reason)
    if payload.loop_count is not None and payload.loop_count > args.max_rounds:
        # The agent's own count is past the cap: the hand-over was given in this run.
        return _allow(f"the agent was already sent back {payload.loop_count} time(s) in this "
                      f"run, past the {args.max_rounds} round(s) of fixes: the stop is allowed "
                      "and the work is a human's to review")
    start = None
    try:
        if repo_root is not None:
            start, warning = session_start_point(repo_root, payload.session_id,
                                                 args.changed_from)
            if warning is not None:
                _warn(warning)
        plan = prepare(_request(args, payload, start))
    except NoContractError as exc:
        return _allow(f"{exc}; the stop is allowed without checking")
    except ContractError as exc:
        if start is None:  # outside git: nothing can be checked anyway
            return _allow(f"contract error: {exc}; the stop is allowed without checking")
        if start.commit is not None and not _changed_since(args, payload, start, repo_root):
            # Broken before the session began, and untouched by it: not the agent's to fix.
            return _allow(f"contract error: {exc}; nothing changed since {start.source} "
                          f"({start.short}), so the stop is allowed")
        return _contract_error(args, payload, exc, repo_root or Path.cwd(), start)
    except VerifyGateError as exc:
        return _allow(f"{exc}; the stop is allowed without checking")
    except OSError as exc:
        return _allow(f"cannot use {payload.cwd}: {exc.strerror or exc}; the stop is allowed")
    for warning in plan.warnings:
        _warn(warning)
    return _check(args, payload, plan, start)


def _changed_since(args: argparse.Namespace, payload: HookPayload, start: StartPoint,
                   repo_root: Path | None) -> bool:
    """Whether anything (committed or not, untracked included) changed since ``start``: what
    a stop is judged on, asked without a contract to select gates."""
    from pytest_verifygate.engine import change_set

    request = _request(args, payload, start)
    return bool(change_set(request, repo_root or Path.cwd()).files)


def _session_started(payload: HookPayload, repo_root: Path | None) -> Decision:
    """Record where the session starts; answer nothing (it would become the agent's
    context). A problem is said on stderr only."""
    if repo_root is None:
        _warn(f"{payload.cwd} is not in a git repository: no starting point recorded")
        return Decision()
    try:
        record_session_start(repo_root, payload.session_id)
    except VerifyGateError as exc:
        _warn(f"no starting point recorded: {exc}")
    return Decision()


def _request(args: argparse.Namespace, payload: HookPayload, start: StartPoint | None
             ) -> RunRequest:
    """The engine's request: everything since the starting point, committed or not, plus
    untracked files, under the contract as it was there, for the gates of ``--role``."""
    if start is None:  # outside git: the engine says so
        changes = ChangeRequest(worktree=True)
    elif start.commit is None:
        # The repository had no commit when the session began: every file is the session's,
        # and there was no contract to bind it (the empty tree holds none).
        no_commit_yet = head_commit(Path.cwd()) is None
        changes = ChangeRequest(worktree=True) if no_commit_yet else ChangeRequest(all=True)
    else:
        changes = ChangeRequest(changed_from=args.changed_from or start.commit)
    return RunRequest(contract=args.contract, start=payload.cwd, changes=changes,
                      role=args.role, read_cache=not getattr(args, "no_cache", False),
                      jobs=getattr(args, "jobs", None),
                      bound_by=None if start is None else start.commit or empty_tree(Path.cwd()))


def _contract_error(args: argparse.Namespace, payload: HookPayload, error: ContractError,
                    repo_root: Path, start: StartPoint | None) -> Decision:
    """Fail closed: a contract that cannot be loaded blocks, round after round, like a
    failing gate, until the round cap hands over to a human."""
    path = state_path(repo_root, payload.state_key)
    stored = load_state(path)
    previous = stored._replace(rounds=payload.rounds_before(stored))
    text = str(error)
    if len(text) > 2000:
        text = text[:2000] + " ..."
    since = f" at {start.short}" if start is not None and start.commit else ""
    decision = block_round(
        previous, args.max_rounds, signature=f"contract error: {text}", failed=(),
        problem="the verify contract cannot be loaded, so your work cannot be checked. Make "
                "it valid again without removing or weakening gates (the gates it had"
                f"{since} run in any case); if you did not change it, say so and stop.",
        body="The error:\n\n" + "\n".join(f"    {line}" for line in text.splitlines()),
        hand_over=f"the verify contract still cannot be loaded after {previous.rounds} "
                  f"round(s) ({text}): the stop is allowed and a human must review the work.",
    )
    _warn(f"contract error: {text}")
    if decision.state != stored and not _save(path, payload.state_key, decision.state):
        decision = _uncounted(decision, payload)
    return decision


def _check(args: argparse.Namespace, payload: HookPayload, plan: Plan,
           start: StartPoint | None) -> Decision:
    contract = plan.contract
    path = state_path(contract.repo_root, payload.state_key)
    stored = load_state(path)
    previous = stored._replace(rounds=payload.rounds_before(stored))
    if plan.changes.filtering and not plan.changes.files:
        # Nothing changed: nothing to verify, and nothing left of earlier failures.
        if stored != SessionState():
            _save(path, payload.state_key, SessionState())
        return Decision()
    # Imported once there is something to run: most stops change nothing, or hit a contract
    # error, and need none of it.
    from pytest_verifygate import engine
    from pytest_verifygate.plugins import plugin_hook
    from pytest_verifygate.report.document import dumps
    from pytest_verifygate.storage import write_atomic

    hook = plugin_hook()
    run = engine.run(plan, hook=hook)
    if run.interrupted:
        return _allow("the gates were interrupted: the stop is allowed without a verdict")
    report = engine.report(run, hook)
    root = str(contract.repo_root)
    report_path = path.with_suffix(".report.json")
    try:
        write_atomic(report_path, dumps(report))  # state: never through a planted link
    except OSError as exc:
        from pytest_verifygate.storage import blocked

        if not blocked(report_path):  # a file in the way: said once, for everything
            _warn(f"cannot write the report {report_path}: {exc.strerror or exc}")
    digest, signature = "", None
    # A pass needs neither digest nor signature: most stops pass.
    if report["verdict"] in (codes.VERDICT_FAILED, codes.VERDICT_PENDING):
        from pytest_verifygate.report.digest import failure_signature, to_digest

        digest, signature = to_digest(report, root=root), failure_signature(report, root=root)
    changed = change_note(contract.warnings)
    notes: tuple[str, ...] = ()
    if start is not None and start.commit is not None:
        notes += (f"Checked: every change since {start.source} ({start.short}), committed or "
                  "not.",)
    if changed is not None:
        notes += (f"Note: {changed}. Removing or weakening a gate does not skip it.",)
    decision = decide(
        report,
        digest=digest,
        signature=signature,
        previous=previous,
        max_rounds=args.max_rounds,
        report_path=posix_relative(report_path, contract.repo_root),
        rerun=_rerun_command(args, start),
        notes=notes,
    )
    if decision.state != stored and not _save(path, payload.state_key, decision.state):
        decision = _uncounted(decision, payload)
    if changed is not None and decision.block_reason is None:
        # The user should know the contract changed, whatever the verdict (stderr has it).
        message = f"verifygate agent-hook: {changed}"
        if decision.system_message is not None:
            message = f"{decision.system_message}\n{message}"
        decision = decision._replace(system_message=message)
    return decision


def _rerun_command(args: argparse.Namespace, start: StartPoint | None = None) -> str:
    """The ``verifygate run`` command that checks what this hook checked."""
    since = start.short if start is not None and start.commit is not None else "HEAD"
    words = ["verifygate", "run", "--changed-from", args.changed_from or since]
    if args.contract:
        words += ["--contract", args.contract]
    if args.role:
        words += [word for role in args.role for word in ("--role", role)]
    return shlex.join(words)


def _save(path: Path, key: str, state: SessionState) -> bool:
    """Remember the session's rounds; False (and why, on stderr) when the state directory
    cannot be written."""
    try:
        save_state(path, key, state)
    except OSError as exc:
        _warn(f"cannot record the session's rounds in {path}: {exc.strerror or exc}; "
              "the round cap cannot count this stop")
        return False
    return True


def _uncounted(decision: Decision, payload: HookPayload) -> Decision:
    """The decision when its round could not be recorded. A failing stop still blocks the
    first time, but the cap must hold without our count: where the agent counts itself
    (Cursor's ``loop_count``) its count decides as ever; otherwise a stop the agent makes
    while already sent back by a stop hook (``stop_hook_active``) is allowed, with the
    hand-over message, so that an unwritable ``.git`` never traps an agent."""
    if decision.block_reason is None or payload.loop_count is not None:
        return decision
    if not payload.stop_hook_active:
        return decision
    return Decision(
        system_message="verifygate: gates still fail, and the rounds cannot be counted (the "
        "state directory cannot be written): this stop is allowed so that the agent is not "
        "sent back forever. A human must review the work.",
        human_review=True)


def _allow(message: str) -> Decision:
    """Let the agent stop, telling the user why (on stderr too: ``run_agent_hook``)."""
    return Decision(system_message=f"verifygate agent-hook: {message}")


def _warn(message: str) -> None:
    print(f"verifygate agent-hook: {message}", file=sys.stderr)
