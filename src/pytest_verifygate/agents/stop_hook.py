"""``verifygate agent-hook``'s verify-on-stop policy, the same for every agent: only no changes,
passing gates or the hand-over after ``--max-rounds`` blocks let a stop through
(``docs/how-to/agents.md``, "How the stop hook decides").

PYTEST_DONT_REWRITE
"""

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_verifygate import codes, engine
from pytest_verifygate.agents import background, session_start, status
from pytest_verifygate.agents.protocol import SESSION_START, SUBAGENT_STOP, Decision, HookPayload
from pytest_verifygate.agents.session_start import SessionRecord, StartPoint
from pytest_verifygate.agents.state import Rounds, SessionState
from pytest_verifygate.contract import find_contract, find_repo_root, posix_relative
from pytest_verifygate.contract.revision import NoContractError, change_note
from pytest_verifygate.engine import Plan
from pytest_verifygate.errors import ContractError, VerifyGateError
from pytest_verifygate.plugins import plugin_hook
from pytest_verifygate.state.files import StateFileError, write_state

if TYPE_CHECKING:
    from pytest_verifygate.hookspecs import GateHooks
    from pytest_verifygate.report.model import Report

# Rounds of payloads that cannot be read are counted under this key, one per repository.
UNREAD_KEY = "unread-payload"
# The project directory an agent names for its hooks, where it names one.
PROJECT_DIR_VARIABLES = {"claude": "CLAUDE_PROJECT_DIR", "gemini": "GEMINI_PROJECT_DIR"}
NO_RECORD = ("no start was recorded for this session, so what it changed cannot be told (the "
             "hook for the session's start is missing, or could not write the private state "
             "directory): run `verifygate install-agent-hook` again and start a new session, "
             "or pass --changed-from REF to the hook")


class GatesInterrupted(Exception):
    """The run ended before its gates did; ``gates``: those that were cut short."""

    def __init__(self, gates: tuple[str, ...]) -> None:
        super().__init__(", ".join(gates))
        self.gates = gates


def judge(args: argparse.Namespace, payload: HookPayload) -> Decision:
    if payload.event == SESSION_START:
        return _session_started(payload)
    if payload.event == SUBAGENT_STOP:
        # Not gated: the parent's stop checks the session's work, the subagent's included;
        # judged alone, a subagent would be blamed for its parent's unfinished work.
        return Decision()
    if payload.skip_reason is not None:
        return allow(payload.skip_reason)
    if payload.loop_count is not None and payload.loop_count > args.max_rounds:
        # The agent's own count is past the cap: the hand-over was given in this run.
        return allow(f"the agent was already sent back {payload.loop_count} time(s) in this "
                     f"run, past the {args.max_rounds} round(s) of fixes: the stop is allowed "
                     "and the work is a human's to review", status.HANDED_OVER)
    record = None
    if not args.changed_from:
        try:
            record = session_start.load(payload.session_id)
        except StateFileError as exc:
            return fail_closed(args, payload, f"the session's record cannot be read ({exc})")
        if record is not None:  # judged from where the session began, wherever it is now
            payload = payload._replace(cwd=Path(record.directory))
    try:
        os.chdir(payload.cwd)  # relative paths in messages and --contract are from here
    except OSError as exc:
        return fail_closed(args, payload, f"cannot use {payload.cwd}, where the session "
                           f"began: {exc.strerror or exc}")
    repo_root = find_repo_root(Path.cwd())
    if record is not None and (repo_root is None
                               or os.path.realpath(repo_root) != record.repository):
        return fail_closed(args, payload, f"{payload.cwd} is no longer in the repository the "
                           f"session began in ({record.repository})")
    if repo_root is None and args.contract is None and find_contract(Path.cwd()) is None:
        return allow(f"no verify contract found in {payload.cwd} or above, and it is not in a "
                     "git repository: no gate applies", status.VERIFIED)
    start = None
    try:
        if repo_root is not None and args.changed_from:
            start, warning = session_start.changed_from_start(repo_root, args.changed_from)
            if warning is not None:
                _warn(warning)
        elif repo_root is not None and record is None:
            if args.contract is None and find_contract(Path.cwd()) is None:
                return allow(f"no verify contract found in {payload.cwd} or above: no gate "
                             "applies", status.VERIFIED)
            return fail_closed(args, payload, NO_RECORD)
        elif record is not None:
            assert repo_root is not None
            moved, tip = session_start.moved_work(record, repo_root)
            _keep(session_start.note_seen(record, repo_root, *filter(None, [tip])), record)
            if moved is not None:
                return fail_closed(args, payload, moved)
            hidden = session_start.filters_changed(record, repo_root)
            if hidden is not None:
                return fail_closed(args, payload, hidden)
            start = StartPoint(record.commit, session_start.FROM_SESSION_START)
        plan = engine.prepare(session_start.run_request(args, payload.cwd, start))
        hook = plugin_hook(plan.contract)  # a plugin that cannot load is a contract error
    except NoContractError as exc:
        return allow(f"{exc}: no gate applies", status.VERIFIED)
    except ContractError as exc:
        if start is not None and start.commit is not None and not _changed_since(
                args, payload, start, repo_root):
            # Broken before the session began, and untouched by it: not the agent's to fix.
            return allow(f"contract error: {exc}; nothing changed since {start.source} "
                         f"({start.short}), so the stop is allowed")
        return _contract_error(args, payload, exc, start)
    except VerifyGateError as exc:  # git, mostly: the change set cannot be known
        return fail_closed(args, payload, one_line(exc))
    for warning in plan.warnings:
        _warn(warning)
    return _check(args, payload, plan, start, hook, record)


def _keep(record: SessionRecord, before: SessionRecord) -> None:
    if record != before:
        try:
            session_start.save(record)
        except OSError as exc:
            _warn(f"cannot update the session's record: {exc.strerror or exc}")


def in_project(payload: HookPayload) -> HookPayload:
    """``payload`` moved to the project directory the agent names, where its ``cwd`` (wherever
    the agent's shell was left) is outside the project's repository."""
    named = os.environ.get(PROJECT_DIR_VARIABLES.get(payload.agent, ""), "")
    if not named or not os.path.isabs(named) or not os.path.isdir(named):
        return payload
    project = Path(named)
    # Compared resolved: ``<project>/../clone`` and a link in the project lead elsewhere.
    here, there = Path(os.path.realpath(payload.cwd)), Path(os.path.realpath(project))
    root = find_repo_root(there)
    if find_repo_root(here) == root and (root is not None or here.is_relative_to(there)):
        return payload
    _warn(f"the stop was made from {payload.cwd}, outside the project's repository: "
          f"{project} is checked")
    return payload._replace(cwd=project)


def _session_started(payload: HookPayload) -> Decision:
    """Record where the session starts; a problem goes to stderr only, as any answer would
    become the agent's context."""
    repo_root = find_repo_root(payload.cwd)
    if repo_root is None:
        _warn(f"{payload.cwd} is not in a git repository: no starting point recorded")
        return Decision()
    try:
        session_start.record_start(payload.cwd, repo_root, payload.session_id)
        background.retire(repo_root)  # a run an earlier session left
    except (VerifyGateError, StateFileError, OSError) as exc:
        _warn(f"no starting point recorded: {one_line(exc)}")
    return Decision()


def _changed_since(args: argparse.Namespace, payload: HookPayload, start: StartPoint,
                   repo_root: Path | None) -> bool:
    """Whether anything changed since ``start``; when git cannot tell, something did."""
    request = session_start.run_request(args, payload.cwd, start)
    try:
        return bool(engine.change_set(request, repo_root or Path.cwd()).files)
    except VerifyGateError:
        return True


def _rounds(payload: HookPayload | None) -> Rounds:
    """Where this stop's rounds are counted; an unread payload's, once per repository."""
    place = payload.cwd if payload is not None else Path.cwd()
    key = payload.state_key if payload is not None else UNREAD_KEY
    return Rounds.of(key, find_repo_root(place) or place)


def _previous(payload: HookPayload | None, stored: SessionState) -> SessionState:
    """The state behind this stop, with the agent's own count where it keeps one (it survives
    a lost state file), else ours, never below the round the input quotes."""
    if payload is None:
        return stored
    if payload.loop_count is not None:
        return stored._replace(rounds=payload.loop_count)
    return stored._replace(rounds=max(stored.rounds, payload.retry_round or 0))


def block_round(previous: SessionState, max_rounds: int, *, problem: str, body: str,
                signature: str | None, failed: tuple[str, ...], hand_over: str,
                notes: tuple[str, ...] = ()) -> Decision:
    """Block for one more round, or, after ``max_rounds`` blocks in a row, allow with the
    ``hand_over`` message."""
    if previous.rounds >= max_rounds:
        return Decision(system_message=f"verifygate: {hand_over}",
                        state=SessionState(0, signature, failed), human_review=True,
                        status=status.HANDED_OVER)
    rounds = previous.rounds + 1
    # Gemini CLI's adapter reads the round back from this first line (``retry_round``).
    lines = [f"verifygate blocked this stop (round {rounds} of {max_rounds}): {problem}", *notes]
    if signature is not None and signature == previous.signature:
        lines.append("Note: these failures are identical to the previous round's: your last "
                     "changes did not affect them. Try a different approach; if the cause is "
                     "outside the code (a missing tool, a broken environment), say so and stop.")
    if rounds == max_rounds:
        lines.append("This is the last round: if the gates still fail at your next stop, the "
                     "stop is allowed and a human reviews the work.")
    reason = "\n".join(lines) + ("\n\n" + body if body else "")
    return Decision(block_reason=reason, state=SessionState(rounds, signature, failed),
                    status=status.BLOCKED)


def _uncounted(decision: Decision, payload: HookPayload | None) -> Decision:
    """The decision when its round could not be recorded. A block still blocks where the
    agent's own count bounds the rounds (``loop_count``, a quoted retry round) or it was not
    sent back yet; else nothing bounds them, and the stop is handed over."""
    if decision.block_reason is None:
        return decision
    if payload is not None and (payload.loop_count is not None
                                or payload.retry_round is not None
                                or not payload.stop_hook_active):
        return decision
    return Decision(
        system_message="verifygate: the stop still cannot be let through as verified, and "
        "its rounds cannot be counted (no state directory can be written): it is allowed so "
        "that the agent is not sent back forever. A human must review the work.",
        human_review=True, status=status.HANDED_OVER)


def _contract_error(args: argparse.Namespace, payload: HookPayload, error: ContractError,
                    start: StartPoint | None) -> Decision:
    text = str(error)
    if len(text) > 2000:
        text = text[:2000] + " ..."
    _warn(f"contract error: {text}")
    since = f" at {start.short}" if start is not None and start.commit else ""
    return _block(
        args, payload, signature=f"contract error: {text}", why=text,
        problem="the verify contract cannot be loaded, so your work cannot be checked. Make "
                "it valid again without removing or weakening gates (the gates it had"
                f"{since} run in any case); if you did not change it, say so and stop.",
        body="The error:\n\n" + "\n".join(f"    {line}" for line in text.splitlines()),
        still="the verify contract still cannot be loaded")


def fail_closed(args: argparse.Namespace, payload: HookPayload | None, problem: str) -> Decision:
    """Block a stop that cannot be checked, counting rounds like failing gates."""
    _warn(f"this stop cannot be checked: {problem}")
    return _block(
        args, payload, signature=f"cannot check: {problem}", why=problem, body="",
        problem=f"your work could not be checked, and unchecked work is not verified: "
                f"{problem}. If the cause is yours to fix, fix it and stop again; if it is "
                "outside the code, say so and stop.",
        still="the stop still cannot be checked")


def _block(args: argparse.Namespace, payload: HookPayload | None, *, signature: str,
           problem: str, body: str, still: str, why: str) -> Decision:
    """Block for ``problem``, counting the round. The last resort: nothing here may raise."""
    rounds: Rounds | None = None
    try:
        rounds = _rounds(payload)
        stored = rounds.load()
    except Exception as exc:  # nowhere to count: the payload is all there is
        _warn(f"cannot read the round count ({type(exc).__name__}: {one_line(exc)})")
        rounds, stored = None, SessionState()
    previous = _previous(payload, stored)
    decision = block_round(
        previous, args.max_rounds, signature=signature, failed=(), body=body, problem=problem,
        hand_over=f"{still} after {previous.rounds} round(s) ({why}): the stop is allowed and "
                  "a human must review the work.")
    try:
        saved = decision.state == stored or (rounds is not None and rounds.save(decision.state))
    except Exception:  # counted or not, the decision stands
        saved = False
    return decision if saved else _uncounted(decision, payload)


def _check(args: argparse.Namespace, payload: HookPayload, plan: Plan,
           start: StartPoint | None, hook: "GateHooks | None",
           record: SessionRecord | None) -> Decision:
    rounds = _rounds(payload)
    stored = rounds.load()
    if record is not None:
        # Whatever else changed: the session's commits are all judged, or the stop is not.
        try:
            unjudged = session_start.unjudged(record, plan.contract.root, plan.changes)
        except VerifyGateError as exc:  # git cannot tell them: not "none"
            unjudged = one_line(exc)
        if unjudged is not None:
            return fail_closed(args, payload, unjudged)
    background.settle(plan)  # its passes are in the cache once it ended
    if plan.changes.filtering and not plan.changes.files:
        # Nothing changed: nothing to verify, and nothing left of earlier failures.
        if stored != SessionState():
            rounds.save(SessionState())
        return Decision(status=status.VERIFIED)
    # Imported once there is something to run: most stops change nothing.
    from pytest_verifygate.report.digest import to_digest

    run = engine.run(plan, hook=hook)
    for warning in run.warnings:
        _warn(warning)
    if run.interrupted:
        raise GatesInterrupted(tuple(r.name for r in run.results if r.code == codes.INTERRUPTED))
    report = engine.report(run, hook)
    report_path = _write_report(report, rounds)
    changed = change_note(plan.contract.warnings)
    if report["verdict"] == codes.VERDICT_FAILED:
        decision = _failed(args, report, _previous(payload, stored), plan, start, changed,
                           report_path)
    else:
        pending = report["verdict"] == codes.VERDICT_PENDING  # gates awaiting sign-off
        note = to_digest(report, root=str(plan.contract.repo_root)).strip() if pending else None
        decision = Decision(system_message=note, status=status.VERIFIED)
    if decision.state != stored and not rounds.save(decision.state):
        decision = _uncounted(decision, payload)
    if changed is not None and decision.block_reason is None:
        # The user should know the contract changed, whatever the verdict (stderr has it).
        lines = (decision.system_message, f"verifygate agent-hook: {changed}")
        decision = decision._replace(system_message="\n".join(filter(None, lines)))
    return decision


def _failed(args: argparse.Namespace, report: "Report", previous: SessionState,
            plan: Plan, start: StartPoint | None, changed: str | None,
            report_path: Path | None) -> Decision:
    from pytest_verifygate.report.digest import failure_signature, to_digest

    root = plan.contract.repo_root
    failed = tuple(str(gate["name"]) for gate in report["gates"] if gate["outcome"] == codes.FAILED)
    notes: tuple[str, ...] = ()
    if start is not None and start.commit is not None:
        notes += (f"Checked: every change since {start.source} ({start.short}), committed or "
                  "not.",)
    if changed is not None:
        notes += (f"Note: {changed}. Removing or weakening a gate does not skip it.",)
    where = f" Last report: {posix_relative(report_path, root)}." if report_path else ""
    return block_round(
        previous, args.max_rounds, signature=failure_signature(report, root=str(root)),
        failed=failed, notes=notes, body=to_digest(report, root=str(root)),
        problem="the verify contract's gates fail on your changes. Fix the failures below, "
                "then stop again; the gates run again automatically.",
        hand_over=f"gates still fail after {previous.rounds} round(s) of fixes "
                  f"({gate_names(failed)}): the stop is allowed and a human must review the "
                  f"work. Run `{_rerun_command(args, start)}` to see the failures.{where}",
    )


def _write_report(report: "Report", rounds: Rounds) -> Path | None:
    """Keep the round's report beside its count; where it went."""
    from pytest_verifygate.report.document import dumps

    if rounds.path is None:
        return None
    path = rounds.path.with_suffix(".report.json")
    try:
        write_state(path, dumps(report))  # state: never through a planted link
    except OSError as exc:
        _warn(f"cannot write the report {path}: {exc.strerror or exc}")
    return path


def _rerun_command(args: argparse.Namespace, start: StartPoint | None) -> str:
    """The ``verifygate run`` command that checks what this hook checked."""
    if start is None:
        words = ["verifygate", "run", "--all"]
    else:
        since = start.short if start.commit is not None else "HEAD"
        words = ["verifygate", "run", "--changed-from", args.changed_from or since]
    if args.contract:
        words += ["--contract", args.contract]
    for role in args.role or ():
        words += ["--role", role]
    return shlex.join(words)


def gate_names(names: tuple[str, ...]) -> str:
    """Gates named in a message, at most ten (```a`, `b` and 3 more``)."""
    shown = ", ".join(f"`{name}`" for name in names[:10]) or "(no gate ran)"
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")


def one_line(error: BaseException) -> str:
    """An error's message as one bounded line."""
    text = " ".join(str(error).split())
    return text[:500] + " ..." if len(text) > 500 else text


def allow(message: str, outcome: str = status.NOT_CHECKED) -> Decision:
    """Let the agent stop, telling the user why."""
    return Decision(system_message=f"verifygate agent-hook: {message}", status=outcome)


def _warn(message: str) -> None:
    print(f"verifygate agent-hook: {message}", file=sys.stderr)
