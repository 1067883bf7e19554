"""History replay: a project's real commits, checked by verifygate and the peers users pick.

Each of the last N commits of a repository is staged on its parent (``git read-tree``: the
index and work tree become the commit, HEAD stays on the parent), and then, in an order that
rotates from commit to commit, ``verifygate run --staged``, ``prek run``, ``pre-commit run``
and ``lefthook run pre-commit`` check it, all from one gate list (a suite file,
``bench/suites/*.toml``) written out as each tool's configuration. A ground-truth run executes
every gate the commit selects, one by one, with nothing cached, and gives the verdict every
tool must agree with, and the per-commit floor: no tool can finish before the longest selected
gate, nor before the gates' total CPU time spread over the cores.

``--workflow`` replays the same commits as the life of a change: the edit is checked when an
agent stops (uncommitted), again when it is committed (staged), pushed (the pushed range) and
in CI (a fresh clone, with only CI's own saved state). Peers have no cache and pay at every
stage. CI runs as each tool's documentation has it run on a push (``--ci all``: every gate on
every file, ``pre-commit run --all-files``, ``lefthook run pre-commit --all-files``,
``verifygate run --all`` with CI's result cache restored), or on the change alone (``--ci
changed``, as a pull request's check would). Every stage's verdicts are compared across tools.

Run ``make bench-replay REPO=path/to/clone`` (see the README's performance section), or
``python bench/replay.py --repo DIR`` inside ``.venv-replay``. Nothing here is asserted: the
report gives totals, medians, ratios, the floor and every verdict that differs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pathspec import GitIgnoreSpec

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

BIN = Path(sys.executable).parent
# verify.toml and lefthook.yml are written into the work tree (untracked, excluded); the
# pre-commit configuration goes beside it, since the project may track one of its own.
CONFIGS = ("verify.toml", "lefthook.yml")
PRE_COMMIT_CONFIG = "replay-pre-commit-config.yaml"
TOOLS = {
    "verifygate": [str(BIN / "verifygate"), "run", "--staged"],
    "prek": [str(BIN / "prek"), "run", "--config", f"../{PRE_COMMIT_CONFIG}"],
    "pre-commit": [str(BIN / "pre-commit"), "run", "--config", f"../{PRE_COMMIT_CONFIG}"],
    "lefthook": [str(BIN / "lefthook"), "run", "pre-commit"],
}


@dataclass(frozen=True)
class Gate:
    name: str
    command: str
    glob: str
    regex: str
    shell: bool = False

    @property
    def takes_files(self) -> bool:
        return self.command.endswith("{files}")

    @property
    def bare_command(self) -> str:
        return self.command.removesuffix("{files}").rstrip()


def load_suite(path: Path) -> list[Gate]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return [Gate(**gate) for gate in data["gate"]]


def write_configs(root: Path, gates: Sequence[Gate], *, cache: bool) -> None:
    """The gates as each tool's configuration, untracked and excluded from the change."""
    toml = [f"[settings]\ncache = {str(cache).lower()}\n"]
    for gate in gates:
        toml.append(f"[[gate]]\nname = {json.dumps(gate.name)}\n"
                    f"command = {json.dumps(gate.command)}\n"
                    f"when_changed = [{json.dumps(gate.glob)}]\n"
                    f"shell = {str(gate.shell).lower()}\n")
    (root / "verify.toml").write_text("\n".join(toml), encoding="utf-8")
    hooks = ["repos:\n- repo: local\n  hooks:\n"]
    for gate in gates:
        entry = (shlex.join(["sh", "-c", gate.bare_command + ' "$@"', "--"]) if gate.shell
                 else gate.bare_command)
        hooks.append(f"  - id: {gate.name}\n    name: {gate.name}\n    entry: {json.dumps(entry)}\n"
                     f"    language: unsupported\n    files: {json.dumps(gate.regex)}\n"
                     f"    pass_filenames: {str(gate.takes_files).lower()}\n")
    (root.parent / PRE_COMMIT_CONFIG).write_text("".join(hooks), encoding="utf-8")
    commands = ["pre-commit:\n  parallel: true\n  commands:\n"]
    for gate in gates:
        run = gate.command.replace("{files}", "{staged_files}")
        commands.append(f"    {gate.name}:\n      glob: {json.dumps(gate.glob)}\n"
                        f"      run: {json.dumps(run)}\n")
    (root / "lefthook.yml").write_text("".join(commands), encoding="utf-8")
    exclude = root / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    with exclude.open("a", encoding="utf-8") as handle:
        handle.write("".join(f"/{name}\n" for name in CONFIGS))


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                          text=True).stdout


def staged_files(root: Path) -> list[str]:
    out = git(root, "diff", "--cached", "--name-only", "-z", "--diff-filter=d")
    return [name for name in out.split("\0") if name]


# --------------------------------------------------------------------------------------------
# ground truth


@dataclass
class Truth:
    verdict: str
    gates: dict[str, tuple[int, float, float]] = field(default_factory=dict)  # exit, wall, cpu

    def floor(self, cores: int) -> float:
        if not self.gates:
            return 0.0
        longest = max(wall for _, wall, _ in self.gates.values())
        return max(longest, sum(cpu for _, _, cpu in self.gates.values()) / cores)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ground_truth(root: Path, gates: Sequence[Gate], env: dict[str, str]) -> Truth:
    """Every gate the staged change selects, run one by one on its files, nothing cached."""
    files = staged_files(root)
    truth = Truth("passed")
    for gate in gates:
        matched = [name for name in files
                   if GitIgnoreSpec.from_lines([gate.glob]).match_file(name)]
        if not matched:
            continue
        script = gate.bare_command + (" " + shlex.join(matched) if gate.takes_files else "")
        argv = ["sh", "-c", script] if gate.shell else shlex.split(script)
        cpu, start = children_cpu(), time.perf_counter()
        done = subprocess.run(argv, cwd=root, env=env, capture_output=True)
        truth.gates[gate.name] = (done.returncode, time.perf_counter() - start,
                                  children_cpu() - cpu)
        if done.returncode:
            truth.verdict = "failed"
    return truth


# --------------------------------------------------------------------------------------------
# the tools


def timed(argv: Sequence[str], root: Path, env: dict[str, str]) -> tuple[float, str, str]:
    """Wall time, verdict and the tail of the output of one tool run."""
    start = time.perf_counter()
    done = subprocess.run(list(argv), cwd=root, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    return elapsed, "passed" if done.returncode == 0 else "failed", (done.stdout
                                                                     + done.stderr)[-2000:]


def prepare(source: Path, work: Path, gates: Sequence[Gate], *, cache: bool,
            env: dict[str, str]) -> None:
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(source), str(work)], check=True)
    write_configs(work, gates, cache=cache)
    for tool in ("prek", "pre-commit"):  # their one-time environment setup is not a commit's
        subprocess.run([TOOLS[tool][0], "install-hooks", "--config", f"../{PRE_COMMIT_CONFIG}"],
                       cwd=work, env=env, capture_output=True, check=False)


def stage(root: Path, commit: str) -> None:
    """The commit's change staged on its parent: HEAD on the parent, index and tree the commit."""
    git(root, "checkout", "-q", "-f", "--detach", f"{commit}^")
    git(root, "read-tree", "-u", "--reset", commit)


def replay(args: argparse.Namespace, gates: Sequence[Gate], env: dict[str, str],
           scratch: Path) -> dict[str, object]:
    work = scratch / "work"
    prepare(Path(args.repo), work, gates, cache=args.cache, env=env)
    commits = git(work, "rev-list", "--first-parent", f"-{args.commits}", args.rev).split()
    commits.reverse()
    tools = [tool for tool in TOOLS if tool in args.tools]
    rows: list[Row] = []
    for index, commit in enumerate(commits):
        stage(work, commit)
        truth = ground_truth(work, gates, env)
        order = tools[index % len(tools):] + tools[:index % len(tools)]
        times: dict[str, float] = {}
        verdicts: dict[str, str] = {}
        for tool in order:
            stage(work, commit)  # a fixer of one tool must not change what the next one sees
            times[tool], verdicts[tool], tail = timed(TOOLS[tool], work, env)
            if verdicts[tool] != truth.verdict:
                print(f"{commit[:10]} {tool}: {verdicts[tool]}, ground truth {truth.verdict}"
                      f"\n{tail}", file=sys.stderr)
        rows.append(Row(commit, truth.verdict, sorted(truth.gates), truth.floor(args.cores),
                        times, verdicts))
        print(f"{index + 1:3}/{len(commits)} {commit[:10]} {truth.verdict:7} floor "
              f"{truth.floor(args.cores):6.2f}s " + " ".join(
                  f"{tool} {times[tool]:6.2f}s" for tool in tools), file=sys.stderr)
    return summarise(rows, tools)


@dataclass
class Row:
    """One replayed commit: the ground truth, its floor, and each tool's time and verdict."""

    commit: str
    truth: str
    selected: list[str]
    floor_s: float
    times_s: dict[str, float]
    verdicts: dict[str, str]


def summarise(rows: list[Row], tools: Sequence[str]) -> dict[str, object]:
    totals = {tool: sum(row.times_s[tool] for row in rows) for tool in tools}
    floor = sum(row.floor_s for row in rows)
    peers = {tool: total for tool, total in totals.items() if tool != "verifygate"}
    best = min(peers, key=peers.__getitem__) if peers else None
    return {
        "commits": len(rows),
        "failing_commits": sum(row.truth == "failed" for row in rows),
        "floor_total_s": round(floor, 2),
        "totals_s": {tool: round(total, 2) for tool, total in totals.items()},
        "medians_s": {tool: round(statistics.median(row.times_s[tool] for row in rows), 3)
                      for tool in tools},
        "verifygate_vs_floor": round(totals["verifygate"] / floor, 3) if floor else None,
        "verifygate_vs_best_peer": (round(totals["verifygate"] / peers[best], 3)
                                    if best else None),
        "best_peer": best,
        "verdicts_differing": [
            {"commit": row.commit, "truth": row.truth, "tool": tool,
             "verdict": row.verdicts[tool]}
            for row in rows for tool in tools if row.verdicts[tool] != row.truth],
        "rows": [asdict(row) for row in rows],
    }


# --------------------------------------------------------------------------------------------
# the workflow: agent stop, commit, push, CI


STAGES = ("agent", "commit", "push", "ci")


def peer_on_files(tool: str, files: Sequence[str]) -> list[str]:
    if tool == "lefthook":
        return [*TOOLS[tool], *(arg for name in files for arg in ("--file", name))]
    return [*TOOLS[tool], "--files", *files]


def stage_argv(tool: str, step: str, files: Sequence[str], ci: str = "changed") -> list[str]:
    if step == "ci" and ci == "all":
        return ([TOOLS[tool][0], "run", "--all"] if tool == "verifygate"
                else [*TOOLS[tool], "--all-files"])
    if tool == "verifygate":
        return {"agent": [TOOLS[tool][0], "run", "--changed-from", "HEAD"],
                "commit": TOOLS[tool],
                "push": [TOOLS[tool][0], "run", "--changed-from", "HEAD^"],
                "ci": [TOOLS[tool][0], "run", "--changed-from", "HEAD^"]}[step]
    return TOOLS[tool] if step == "commit" else peer_on_files(tool, files)


def ci_run(tool: str, commit: str, files: Sequence[str], source: Path, gates: Sequence[Gate],
           env: dict[str, str], scratch: Path, mode: str) -> tuple[float, str]:
    """The time of a CI build of ``commit``: a fresh clone, with only CI's own saved state
    restored (its result cache and the key that seals it), never a developer's."""
    ci = scratch / f"ci-{tool}"
    shutil.rmtree(ci, ignore_errors=True)
    ci_env = {**env, "XDG_STATE_HOME": str(scratch / f"ci-state-{tool}")}
    prepare(source, ci, gates, cache=True, env=ci_env)
    git(ci, "checkout", "-q", "-f", "--detach", commit)
    saved = scratch / f"ci-cache-{tool}"
    if saved.is_dir():
        shutil.copytree(saved, ci / ".git" / "verifygate" / "cache")
    seconds, verdict, _ = timed(stage_argv(tool, "ci", files, mode), ci, ci_env)
    if (ci / ".git" / "verifygate" / "cache").is_dir():
        shutil.rmtree(saved, ignore_errors=True)
        shutil.copytree(ci / ".git" / "verifygate" / "cache", saved)
    return seconds, verdict


def workflow(args: argparse.Namespace, gates: Sequence[Gate], env: dict[str, str],
             scratch: Path) -> dict[str, object]:
    tools = [tool for tool in TOOLS if tool in args.tools]
    source = Path(args.repo)
    commits = git(source, "rev-list", "--first-parent", f"-{args.commits}", args.rev).split()
    commits.reverse()
    per_tool = {tool: dict.fromkeys(STAGES, 0.0) for tool in tools}
    verdicts: dict[tuple[str, str], dict[str, str]] = {}  # (commit, stage) -> tool -> verdict
    # Each tool has its own clone and state, as a developer's machine would.
    work = {tool: scratch / f"flow-{tool}" for tool in tools}
    tool_env = {tool: {**env, "XDG_STATE_HOME": str(scratch / f"state-{tool}")}
                for tool in tools}
    for tool in tools:
        prepare(source, work[tool], gates, cache=True, env=tool_env[tool])
    ci_last, files = 0.0, []
    for index, commit in enumerate(commits):
        # The tools take turns, in an order that rotates from commit to commit, so that what
        # else the machine does weighs on each alike.
        for tool in tools[index % len(tools):] + tools[:index % len(tools)]:
            root = work[tool]
            git(root, "checkout", "-q", "-f", "--detach", f"{commit}^")
            git(root, "checkout", "-q", commit, "--", ".")
            git(root, "reset", "-q")  # the agent's edit: in the work tree, not staged
            files = [name for name in git(root, "diff", "--name-only", "-z", "HEAD").split("\0")
                     if name and (root / name).exists()]
            for step in STAGES:
                if step == "commit":
                    git(root, "read-tree", "-u", "--reset", commit)
                elif step == "push":
                    git(root, "checkout", "-q", "-f", "--detach", commit)
                if step == "ci":
                    seconds, verdict = ci_run(tool, commit, files, source, gates, env, scratch,
                                              args.ci)
                    if tool == "verifygate":
                        ci_last = seconds
                else:
                    seconds, verdict, _ = timed(stage_argv(tool, step, files), root,
                                                tool_env[tool])
                per_tool[tool][step] += seconds
                verdicts.setdefault((commit, step), {})[tool] = verdict
        print(f"{index + 1:3}/{len(commits)} {commit[:10]} " + " ".join(
            f"{tool} {sum(per_tool[tool].values()):7.1f}s" for tool in tools), file=sys.stderr)
    rerun: dict[str, float] = {}
    if "verifygate" in tools:
        # CI run again on the same content, its result cache restored (as the project's
        # action does with actions/cache): what a re-run or a merge-queue run costs.
        rerun = {"first": ci_last,
                 "again": ci_run("verifygate", commits[-1], files, source, gates, env, scratch,
                                 args.ci)[0]}
    totals = {tool: round(sum(stages.values()), 2) for tool, stages in per_tool.items()}
    peers = {tool: total for tool, total in totals.items() if tool != "verifygate"}
    best = min(peers, key=peers.__getitem__) if peers else None
    differing = [{"commit": commit, "stage": step, "verdicts": by_tool}
                 for (commit, step), by_tool in verdicts.items()
                 if len(set(by_tool.values())) > 1]
    return {"commits": len(commits), "ci": args.ci, "stages_s": per_tool, "totals_s": totals,
            "failing_ci_builds": sum(by_tool.get("verifygate") == "failed"
                                     for (_, step), by_tool in verdicts.items() if step == "ci"),
            "verdicts_differing": differing,
            "ci_rerun_vs_first": (round(rerun["again"] / rerun["first"], 3)
                                  if rerun else None),
            "best_peer": best,
            "verifygate_vs_best_peer": (round(totals["verifygate"] / peers[best], 3)
                                        if best and "verifygate" in totals else None)}


def check_programs(gates: Sequence[Gate], tools: Sequence[str], env: dict[str, str]) -> None:
    """Stop unless every gate's program and every tool answers ``--version``: a gate whose
    program cannot start fails alike for every tool, and the replay would time nothing."""
    programs = {shlex.split(gate.bare_command)[0] for gate in gates if not gate.shell}
    for program in sorted(programs | {TOOLS[tool][0] for tool in tools if tool in TOOLS}):
        try:
            done = subprocess.run([program, "--version"], env=env, capture_output=True,
                                  text=True)
        except OSError as exc:
            sys.exit(f"replay: {program} cannot start: {exc}")
        if done.returncode != 0:
            sys.exit(f"replay: {program} --version exited {done.returncode}: "
                     f"{(done.stderr or done.stdout).strip()[-300:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="a git repository to replay")
    parser.add_argument("--suite", default=str(Path(__file__).with_name("suites")
                                               / "packaging.toml"))
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--rev", default="HEAD", help="the newest commit replayed")
    parser.add_argument("--tools", nargs="*", default=list(TOOLS))
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--cache", action="store_true",
                        help="turn verifygate's result cache on ([settings] cache = true)")
    parser.add_argument("--workflow", action="store_true",
                        help="agent stop, commit, push and CI per commit, per tool")
    parser.add_argument("--ci", choices=("all", "changed"), default="all",
                        help="with --workflow: CI checks every gate on every file, as on a push "
                             "(default), or the change alone, as a pull request's check")
    parser.add_argument("--out", default=str(Path(__file__).with_name("replay-results.json")))
    args = parser.parse_args()
    gates = load_suite(Path(args.suite))
    # The tools and the gates' programs come from this environment, first on PATH.
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "PRE_COMMIT_COLOR": "never", "NO_COLOR": "1", "LEFTHOOK_QUIET": "meta,summary"}
    check_programs(gates, args.tools, env)
    with tempfile.TemporaryDirectory(prefix="verifygate-replay-") as scratch:
        env["XDG_STATE_HOME"] = str(Path(scratch) / "state")
        env["PRE_COMMIT_HOME"] = str(Path(scratch) / "pre-commit-home")
        result = (workflow if args.workflow else replay)(args, gates, env, Path(scratch))
    result["machine"] = {"cores": args.cores, "python": sys.version.split()[0]}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    shown = {key: value for key, value in result.items() if key != "rows"}
    print(json.dumps(shown, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
