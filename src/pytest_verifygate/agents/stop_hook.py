"""``verifygate agent-hook``: the one verify-on-stop policy, for every coding agent.

Owns the decisions; reading the payload, the time budget and answering are the front end's
(``cli/agent_hook.py``). Each agent's protocol (its payload, its answer's format, its
configuration) is an adapter's (``claude.py``, ``codex.py``, ``cursor.py``, ``gemini.py``;
``detect.py`` tells them apart); the per-session files are ``state.py``'s and the starting
point ``session_start.py``'s. The gates run through the one engine, exactly as
``verifygate run`` runs them. The answer is in the agent's format at exit status 0 (another
status is an error every agent lets pass), but for a payload of no known agent (below). A
``SessionStart`` payload records the session's starting point and is answered with nothing
(what a SessionStart hook prints becomes the agent's context).

What a stop checks: everything changed since the session's starting point
(``session_start.py``: HEAD when the session began, or the upstream merge base), committed or
not, plus untracked files; and the contract as it was there still binds: its gates run as they
were, even if removed or changed since (``contract/revision.py``).

Decisions, per session, the same for every agent. Nothing unverified counts as verified:
only these let the agent stop,

- no changes since the starting point;
- gates pass, or only manual gates are pending, or no gate applies (no contract now and none
  at the starting point included): the round count starts again at zero;
- the hand-over: after ``--max-rounds`` blocks in a row the stop is allowed, telling the user
  a human must review (``Decision.human_review``); the count starts again at zero, so the
  next stop after a human re-prompts the agent gets a fresh set of rounds;

and a stop that is no stop of the session's: a ``SubagentStop`` (a subagent hands its work
to its parent, whose own stop checks everything the session changed, the subagent's work
included: judged alone it would be blamed for its parent's unfinished work), a payload of an
event that is no stop (``PreToolUse``), and Cursor's aborted or failed runs (sending the agent
back would overrule the user). Everything else blocks, counting rounds towards the same cap:

- gates fail: block with the digest; when the failure signature equals the previous round's,
  the reason says so;
- the contract cannot be loaded (invalid, unreadable, or removed since the starting point);
- the stop cannot be checked: a git error, an internal error, an interrupted run, the hook's
  time budget (``--budget``, below the timeout the installer writes) running out, whose
  gates are then stopped, and a payload that cannot be read. An agent that cannot be told
  from its payload cannot be answered in its protocol: then the hook exits with status 2
  and the reason on stderr, which Claude Code, Codex CLI and Gemini CLI all read as a block
  (Cursor's hook names its agent with ``--agent``, and is answered in its format).

The rounds behind a stop are the agent's own count where it keeps one (Cursor's
``loop_count``: the hand-over was given once it passes the cap), else ours, counted per
session in ``<git dir>/verifygate/agent/`` (``state.py``), never in the work tree, or in the
user's state directory when the git directory cannot take them. When neither can,
the payload is all there is: a stop the agent makes while already sent back
(``stop_hook_active``), or, for Gemini CLI, whose ``stop_hook_active`` is false on retries
that used tools, a ``prompt`` that quotes a block reason's round, counts; failing that, a stop
blocks each time, and only the agent's own turn limit ends it (the limit that remains).
Payloads that cannot be read are counted under one key per repository.

Each judged stop's outcome is recorded for ``verifygate agent-status`` (``status.py``).

PYTEST_DONT_REWRITE
"""

import argparse
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_verifygate import codes
from pytest_verifygate.agents import status
from pytest_verifygate.agents.protocol import (
    SESSION_START,
    SUBAGENT_STOP,
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
from pytest_verifygate.agents.state import Rounds, SessionState
from pytest_verifygate.contract import find_contract, find_repo_root, posix_relative
from pytest_verifygate.contract.revision import NoContractError, change_note
from pytest_verifygate.engine import Plan, RunRequest, prepare
from pytest_verifygate.errors import ContractError, VerifyGateError
from pytest_verifygate.git.changes import ChangeRequest

# Rounds of payloads that cannot be read are counted under this key, one per repository.
UNREAD_KEY = "unread-payload"


class GatesInterrupted(Exception):
    """The run ended before its gates did; ``gates``: those that were cut short."""

    def __init__(self, gates: tuple[str, ...]) -> None:
        super().__init__(", ".join(gates))
        self.gates = gates


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
        return Decision(system_message=note, state=SessionState(), status=status.VERIFIED)
    failed = tuple(str(g.get("name")) for g in report.get("gates", [])
                   if g.get("outcome") == codes.FAILED)
    where = f" Last report: {report_path}." if report_path else ""
    return block_round(
        previous, max_rounds, signature=signature, failed=failed, notes=notes, body=digest,
        problem="the verify contract's gates fail on your changes. Fix the failures below, "
                "then stop again; the gates run again automatically.",
        hand_over=f"gates still fail after {previous.rounds} round(s) of fixes "
                  f"({gate_names(failed)}): the stop is allowed and a human must review the "
                  f"work. Run `{rerun}` to see the failures.{where}",
    )


def gate_names(names: tuple[str, ...]) -> str:
    """```a`, `b` and 3 more``: gates named in a message, at most ten."""
    shown = ", ".join(f"`{name}`" for name in names[:10]) or "(no gate ran)"
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")


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
                        state=SessionState(0, signature, failed), human_review=True,
                        status=status.HANDED_OVER)
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
    reason = "\n".join(lines) + ("\n\n" + body if body else "")
    return Decision(block_reason=reason, state=SessionState(rounds, signature, failed),
                    status=status.BLOCKED)


# --------------------------------------------------------------------------------------------
# judging a stop


def one_line(error: BaseException) -> str:
    """An error's message as one bounded line."""
    text = " ".join(str(error).split())
    return text[:500] + " ..." if len(text) > 500 else text


def judge(args: argparse.Namespace, payload: HookPayload) -> Decision:
    """The decision on one payload (``cli/agent_hook.py`` reads it and answers)."""
    import os

    try:
        os.chdir(payload.cwd)  # relative paths in messages and --contract are from here
    except OSError as exc:
        return fail_closed(args, payload, f"cannot use {payload.cwd}: {exc.strerror or exc}")
    repo_root = find_repo_root(Path.cwd())
    if payload.event == SESSION_START:
        return _session_started(payload, repo_root)
    if payload.event == SUBAGENT_STOP:
        # Not gated: the parent's stop checks the session's work, the subagent's included.
        return Decision()
    if payload.skip_reason is not None:
        return allow(payload.skip_reason)
    if payload.loop_count is not None and payload.loop_count > args.max_rounds:
        # The agent's own count is past the cap: the hand-over was given in this run.
        return allow(f"the agent was already sent back {payload.loop_count} time(s) in this "
                     f"run, past the {args.max_rounds} round(s) of fixes: the stop is allowed "
                     "and the work is a human's to review")._replace(status=status.HANDED_OVER)
    start = None
    if repo_root is None and args.contract is None and find_contract(Path.cwd()) is None:
        return allow(f"no verify contract found in {payload.cwd} or above, and it is not in a "
                     "git repository: no gate applies")._replace(status=status.VERIFIED)
    try:
        if repo_root is not None:
            start, warning = session_start_point(repo_root, payload.session_id,
                                                 args.changed_from)
            if warning is not None:
                _warn(warning)
        plan = prepare(_request(args, payload, start))
    except NoContractError as exc:
        return allow(f"{exc}: no gate applies")._replace(status=status.VERIFIED)
    except ContractError as exc:
        if start is not None and start.commit is not None and not _changed_since(
                args, payload, start, repo_root):
            # Broken before the session began, and untouched by it: not the agent's to fix.
            return allow(f"contract error: {exc}; nothing changed since {start.source} "
                         f"({start.short}), so the stop is allowed")
        return _contract_error(args, payload, exc, repo_root or Path.cwd(), start)
    except VerifyGateError as exc:  # git, mostly: the change set cannot be known
        return fail_closed(args, payload, one_line(exc))
    for warning in plan.warnings:
        _warn(warning)
    return _check(args, payload, plan, start)


# The project directory an agent names for its hooks, where it names one.
PROJECT_DIR_VARIABLES = {"claude": "CLAUDE_PROJECT_DIR", "gemini": "GEMINI_PROJECT_DIR"}


def in_project(payload: HookPayload) -> HookPayload:
    """``payload`` judged in the agent's project: the payload's ``cwd`` is wherever the
    agent's shell was left, so a stop made from another repository (a clean clone, a scratch
    directory) would judge that one. When the agent names its project directory and the
    ``cwd`` is not in the project's repository, the project is judged instead; a ``cwd`` in
    the same repository (a package's subdirectory, its own contract) stays."""
    import os

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


def _changed_since(args: argparse.Namespace, payload: HookPayload, start: StartPoint,
                   repo_root: Path | None) -> bool:
    """Whether anything (committed or not, untracked included) changed since ``start``: what
    a stop is judged on, asked without a contract to select gates. When git cannot tell,
    something did (the contract error then blocks)."""
    from pytest_verifygate.engine import change_set

    request = _request(args, payload, start)
    try:
        return bool(change_set(request, repo_root or Path.cwd()).files)
    except VerifyGateError:
        return True


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
    if start is None:  # outside git: nothing tells what changed, so every gate applies
        changes = ChangeRequest(all=True)
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


def _rounds(payload: HookPayload | None) -> Rounds:
    """Where this stop's rounds are counted: the session's (or subagent's) key, or, for a
    payload that cannot be read, one key for the repository the hook runs in."""
    place = payload.cwd if payload is not None else Path.cwd()
    repo_root = find_repo_root(place)
    key = payload.state_key if payload is not None else UNREAD_KEY
    return Rounds.of(repo_root, key, repo_root or place)


def _contract_error(args: argparse.Namespace, payload: HookPayload, error: ContractError,
                    repo_root: Path, start: StartPoint | None) -> Decision:
    """Fail closed: a contract that cannot be loaded blocks, round after round, like a
    failing gate, until the round cap hands over to a human."""
    rounds = _rounds(payload)
    stored = rounds.load()
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
    if decision.state != stored and not rounds.save(decision.state):
        decision = _uncounted(decision, payload)
    return decision


def fail_closed(args: argparse.Namespace, payload: HookPayload | None, problem: str
                 ) -> Decision:
    """Block a stop that cannot be checked (``problem`` says why), counting rounds towards
    the cap like failing gates: nothing unverified counts as verified, and the cap still
    hands over to a human."""
    _warn(f"this stop cannot be checked: {problem}")
    try:
        rounds = _rounds(payload)
        stored = rounds.load()
    except Exception as exc:  # nowhere to count: the payload is all there is
        _warn(f"cannot read the round count ({type(exc).__name__}: {one_line(exc)})")
        rounds, stored = None, SessionState()
    previous = stored._replace(rounds=stored.rounds if payload is None
                               else payload.rounds_before(stored))
    decision = block_round(
        previous, args.max_rounds, signature=f"cannot check: {problem}", failed=(), body="",
        problem=f"your work could not be checked, and unchecked work is not verified: "
                f"{problem}. If the cause is yours to fix, fix it and stop again; if it is "
                "outside the code, say so and stop.",
        hand_over=f"the stop still cannot be checked after {previous.rounds} round(s) "
                  f"({problem}): the stop is allowed and a human must review the work.",
    )
    try:
        saved = decision.state == stored or (rounds is not None and rounds.save(decision.state))
    except Exception:  # counted or not, the decision stands
        saved = False
    return decision if saved else _uncounted(decision, payload)


def _check(args: argparse.Namespace, payload: HookPayload, plan: Plan,
           start: StartPoint | None) -> Decision:
    contract = plan.contract
    rounds = _rounds(payload)
    stored = rounds.load()
    previous = stored._replace(rounds=payload.rounds_before(stored))
    if plan.changes.filtering and not plan.changes.files:
        # Nothing changed: nothing to verify, and nothing left of earlier failures.
        if stored != SessionState():
            rounds.save(SessionState())
        return Decision(status=status.VERIFIED)
    # Imported once there is something to run: most stops change nothing, or hit a contract
    # error, and need none of it.
    from pytest_verifygate import engine
    from pytest_verifygate.plugins import plugin_hook
    from pytest_verifygate.report.document import dumps
    from pytest_verifygate.state.files import write_state

    hook = plugin_hook()
    run = engine.run(plan, hook=hook)
    if run.interrupted:
        raise GatesInterrupted(tuple(r.name for r in run.results
                                     if r.code == codes.INTERRUPTED))
    report = engine.report(run, hook)
    root = str(contract.repo_root)
    kept = rounds.primary or rounds.fallback
    report_path = None if kept is None else kept.with_suffix(".report.json")
    if report_path is not None:
        try:
            write_state(report_path, dumps(report))  # state: never through a planted link
        except OSError as exc:
            from pytest_verifygate.state.storage import blocked

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
        report_path=None if report_path is None else posix_relative(report_path,
                                                                    contract.repo_root),
        rerun=_rerun_command(args, start),
        notes=notes,
    )
    if decision.state != stored and not rounds.save(decision.state):
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
    if start is None:
        words = ["verifygate", "run", "--all"]
    if args.contract:
        words += ["--contract", args.contract]
    if args.role:
        words += [word for role in args.role for word in ("--role", role)]
    return shlex.join(words)


def _uncounted(decision: Decision, payload: HookPayload | None) -> Decision:
    """The decision when its round could not be recorded anywhere. A block still blocks, but
    the cap must hold without our count: where the agent counts itself (Cursor's
    ``loop_count``), or its input quotes the round (Gemini CLI's retry ``prompt``), that count
    already decided; otherwise a stop the agent makes while already sent back by a stop hook
    (``stop_hook_active``) is allowed with the hand-over, and so is one whose agent and
    session cannot even be read (nothing at all can bound those rounds)."""
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


def allow(message: str) -> Decision:
    """Let the agent stop without a verdict, telling the user why (on stderr too:
    ``run_agent_hook``)."""
    return Decision(system_message=f"verifygate agent-hook: {message}",
                    status=status.NOT_CHECKED)


def _warn(message: str) -> None:
    print(f"verifygate agent-hook: {message}", file=sys.stderr)
