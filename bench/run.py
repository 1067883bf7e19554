"""The benchmark suite: pytest-verifygate against the tools users would pick instead.

Every scenario runs ours and a peer alternately (A B A B ...) after a warm-up, in the same
scenario repository, and reports both medians and the median of the pairwise ratios
(ours / theirs) against a target. Absolute timings are not asserted anywhere: shared machines
are noisy, ratios measured side by side are not. Results go to ``bench/results.json``.

Run it with ``make bench``: it installs this project (not editable), pytest-xdist, lefthook and
pre-commit into an environment of their own, ``.venv-bench``, and runs this script there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

BIN = Path(sys.executable).parent
VERIFYGATE = str(BIN / "verifygate")
PYTEST = [sys.executable, "-m", "pytest"]
PRE_COMMIT = str(BIN / "pre-commit")
LEFTHOOK = str(BIN / "lefthook")
GIB = 1 << 30


@dataclass
class Result:
    scenario: str
    ours: str
    theirs: str
    target: float
    ours_median_s: float = 0.0
    theirs_median_s: float = 0.0
    ratio: float = 0.0
    met: bool = False
    pairs: int = 0
    extra: dict[str, object] = field(default_factory=dict)


def sh(argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    """Wall time of one successful run; its output is discarded.

    A failing run stops the suite: a ratio against a peer that errored out measures nothing.
    """
    start = time.perf_counter()
    done = subprocess.run(list(argv), cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: "
                           f"{done.stderr.decode(errors='replace')[-500:]}")
    return elapsed


def pairs(ours: Callable[[], float], theirs: Callable[[], float], count: int,
          warmup: int = 1) -> tuple[list[float], list[float]]:
    for _ in range(warmup):
        ours()
        theirs()
    a: list[float] = []
    b: list[float] = []
    for _ in range(count):
        a.append(ours())
        b.append(theirs())
    return a, b


def compare(scenario: str, ours_label: str, theirs_label: str, target: float,
            a: list[float], b: list[float]) -> Result:
    ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
    return Result(scenario, ours_label, theirs_label, target, statistics.median(a),
                  statistics.median(b), ratio, ratio <= target, len(a))


# ----------------------------------------------------------------------------------------
# scenario repositories


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "b@example.invalid"],
                 ["config", "user.name", "bench"]):
        subprocess.run(["git", *args], cwd=path, check=True)
    return path


def commit(path: Path) -> None:
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "init"], cwd=path, check=True)


def gate_repo(path: Path, command: str, count: int) -> Path:
    """A repository declaring ``count`` identical gates for us, lefthook and pre-commit."""
    repo = git_repo(path)
    (repo / "verify.toml").write_text("".join(
        f'[[gate]]\nname = "g{i}"\ncommand = "{command}"\n' for i in range(count)))
    (repo / "lefthook.yml").write_text("pre-commit:\n  parallel: true\n  commands:\n" + "".join(
        f"    g{i}:\n      run: {json.dumps(command)}\n" for i in range(count)))
    (repo / ".pre-commit-config.yaml").write_text("repos:\n- repo: local\n  hooks:\n" + "".join(
        f"  - id: g{i}\n    name: g{i}\n    entry: {json.dumps(command)}\n"
        "    language: unsupported\n"
        "    pass_filenames: false\n    always_run: true\n" for i in range(count)))
    (repo / "pytest.ini").write_text("[pytest]\n")
    (repo / "README.md").write_text("bench\n")
    commit(repo)
    return repo


# ----------------------------------------------------------------------------------------
# scenarios


def scenario_trivial(root: Path, count: int, env: dict[str, str]) -> list[Result]:
    repo = gate_repo(root / "trivial", "true", 4)
    ours = lambda: sh([VERIFYGATE, "run", "--all"], repo)  # noqa: E731
    lefthook = lambda: sh([LEFTHOOK, "run", "pre-commit", "--all-files"], repo, env)  # noqa: E731
    precommit = lambda: sh([PRE_COMMIT, "run", "--all-files"], repo, env)  # noqa: E731
    results = [compare("1. 4 trivial gates", "verifygate run --all",
                       "lefthook run pre-commit --all-files (parallel)", 2.8,
                       *pairs(ours, lefthook, count))]
    results.append(compare("1. 4 trivial gates", "verifygate run --all",
                           "pre-commit run --all-files (4 hooks)", 0.9,
                           *pairs(ours, precommit, count)))
    bare = root / "bare"
    bare.mkdir()
    (bare / "pytest.ini").write_text("[pytest]\n")
    (bare / "test_one.py").write_text("def test_one():\n    assert True\n")
    ours_pytest = lambda: sh([*PYTEST, "-q", "-p", "no:cacheprovider", "--verify-contract"],  # noqa: E731
                             repo)
    bare_pytest = lambda: sh([*PYTEST, "-q", "-p", "no:cacheprovider"], bare)  # noqa: E731
    results.append(compare("2. pytest with 4 trivial gates", "pytest --verify-contract",
                           "bare pytest, one trivial test", 1.35,
                           *pairs(ours_pytest, bare_pytest, count)))
    return results


# Four gates selected by changed-file patterns; the commit changes one Python file, so two
# gates apply (the same for lefthook's globs).
COMMIT_GATES = {"lint": "src/**/*.py", "types": "src/**/*.py", "docs": "docs/**",
                "rust": "*.rs"}


def commit_repo(path: Path) -> Path:
    """A repository with one staged change, declaring pattern-selected gates for both tools."""
    repo = git_repo(path)
    (repo / "verify.toml").write_text("".join(
        f'[[gate]]\nname = "{name}"\ncommand = "true"\nwhen_changed = ["{glob}"]\n'
        for name, glob in COMMIT_GATES.items()))
    (repo / "lefthook.yml").write_text("pre-commit:\n  parallel: true\n  commands:\n" + "".join(
        f'    {name}:\n      glob: "{glob}"\n      run: "true"\n'
        for name, glob in COMMIT_GATES.items()))
    (repo / "src" / "app").mkdir(parents=True)
    (repo / "src" / "app" / "main.py").write_text("x = 1\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "index.md").write_text("docs\n")
    commit(repo)
    (repo / "src" / "app" / "main.py").write_text("x = 2\n")
    subprocess.run(["git", "add", "src/app/main.py"], cwd=repo, check=True)
    return repo


def scenario_commit(root: Path, count: int, env: dict[str, str]) -> list[Result]:
    repo = commit_repo(root / "commit")
    ours = lambda: sh([VERIFYGATE, "run", "--staged"], repo)  # noqa: E731
    lefthook = lambda: sh([LEFTHOOK, "run", "pre-commit"], repo, env)  # noqa: E731
    return [compare("1c. a commit: 4 gates by pattern, 2 apply", "verifygate run --staged",
                    "lefthook run pre-commit (globs, parallel)", 2.8,
                    *pairs(ours, lefthook, count))]


def scenario_partial(root: Path, count: int, env: dict[str, str]) -> list[Result]:
    """A commit with partial staging: what the commit lacks (an unstaged change on top of the
    staged one, untracked files) is set aside for the run, as pre-commit stashes the unstaged
    change (it leaves untracked files where they are); both put everything back."""
    repo = gate_repo(root / "partial", "true", 4)
    (repo / "README.md").write_text("bench\nstaged\n")
    subprocess.run(["git", "add", "README.md"], cwd=repo, check=True)
    (repo / "README.md").write_text("bench\nstaged\nunstaged\n")
    for name in ("notes.txt", "scratch.py"):
        (repo / name).write_text("untracked\n")
    ours = lambda: sh([VERIFYGATE, "run", "--staged"], repo)  # noqa: E731
    precommit = lambda: sh([PRE_COMMIT, "run"], repo, env)  # noqa: E731
    return [compare("1d. a commit with partial staging, 4 gates", "verifygate run --staged",
                    "pre-commit run (stashes the unstaged change)", 0.9,
                    *pairs(ours, precommit, count))]


def scenario_sleep(root: Path, count: int, env: dict[str, str]) -> list[Result]:
    repo = gate_repo(root / "sleep", "sleep 0.5", 8)
    ours = lambda: sh([VERIFYGATE, "run", "--all", "--jobs", "8"], repo)  # noqa: E731
    lefthook = lambda: sh([LEFTHOOK, "run", "pre-commit", "--all-files"], repo, env)  # noqa: E731
    ours_pytest = lambda: sh([*PYTEST, "-q", "-p", "no:cacheprovider", "--verify-contract",  # noqa: E731
                              "--verify-jobs", "8"], repo)
    precommit = lambda: sh([PRE_COMMIT, "run", "--all-files"], repo, env)  # noqa: E731
    return [
        compare("3. 8 gates of sleep 0.5", "verifygate run --jobs 8", "lefthook (parallel)",
                1.15, *pairs(ours, lefthook, count)),
        compare("3. 8 gates of sleep 0.5", "pytest --verify-contract --verify-jobs 8",
                "pre-commit run (sequential)", 0.2, *pairs(ours_pytest, precommit, count)),
    ]


SELECTION_BASELINE = textwrap.dedent("""
    import sys
    from pathspec import GitIgnoreSpec
    patterns = [line.split("\\t") for line in open(sys.argv[1]).read().splitlines()]
    paths = open(sys.argv[2]).read().splitlines()
    specs = [GitIgnoreSpec.from_lines(gate) for gate in patterns]
    selected = [any(True for _ in spec.match_files(paths)) for spec in specs]
    print(sum(selected))
""")


def scenario_selection(root: Path, count: int) -> list[Result]:
    repo = git_repo(root / "selection")
    gates = []
    for g in range(50):
        gates.append([f"services/svc{g}/**/*.go", f"tools/t{g}/*.rs", f"**/*.proto{g}",
                      f"deploy/env{g}/"])
    (repo / "verify.toml").write_text("".join(
        f'[[gate]]\nname = "g{i}"\ncommand = "true"\nwhen_changed = {json.dumps(p)}\n'
        for i, p in enumerate(gates)))
    (repo / "patterns.tsv").write_text("\n".join("\t".join(p) for p in gates) + "\n")
    exts = ("py", "js", "ts", "md", "json", "txt", "css", "html")
    paths = [f"pkg{i % 97}/mod{i % 389}/sub{i % 13}/file{i}.{exts[i % len(exts)]}"
             for i in range(100_000)]
    (repo / "paths.txt").write_text("\n".join(paths) + "\n")
    # Named files must be in the work tree or the index: these are in the index alone.
    empty = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=b"",
                           capture_output=True, check=True).stdout.decode().strip()
    subprocess.run(["git", "update-index", "--add", "--index-info"], cwd=repo, check=True,
                   input="".join(f"100644 {empty}\t{path}\n" for path in paths).encode())
    (repo / "baseline.py").write_text(SELECTION_BASELINE)
    ours = lambda: sh([VERIFYGATE, "list", "--files-from", "paths.txt"], repo)  # noqa: E731
    theirs = lambda: sh([sys.executable, "baseline.py", "patterns.tsv", "paths.txt"], repo)  # noqa: E731
    return [compare("4. selection, 100,000 paths x 50 gates x 4 patterns",
                    "verifygate list --files-from", "plain loop of pathspec match_files", 0.15,
                    *pairs(ours, theirs, count))]


MEMORY_PROBE = textwrap.dedent("""
    import resource, sys
    from pytest_verifygate.cli import main
    status = main(sys.argv[1:])
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sys.stderr.write(f"PEAK_KIB={peak_kib}\\n")
    sys.exit(status)
""")


def scenario_output(root: Path, count: int) -> list[Result]:
    repo = git_repo(root / "output")
    (repo / "verify.toml").write_text(
        f'[[gate]]\nname = "gigabyte"\ncommand = "head -c {GIB} /dev/zero"\n'
        "timeout_seconds = 300\n")
    (repo / "probe.py").write_text(MEMORY_PROBE)
    peaks, rates = [], []
    for _ in range(max(3, count // 2)):
        done = subprocess.run([sys.executable, "probe.py", "run", "--all", "--json", "r.json"],
                              cwd=repo, capture_output=True, text=True)
        peak = int(done.stderr.split("PEAK_KIB=")[1].split()[0]) / 1024
        report = json.loads((repo / "r.json").read_text())
        gate = report["gates"][0]
        assert gate["output_bytes"] == GIB, gate
        peaks.append(peak)
        rates.append(GIB / (1 << 20) / gate["duration_s"])
        shutil.rmtree(repo / ".git" / "verifygate", ignore_errors=True)
    peak, rate = max(peaks), statistics.median(rates)
    memory = Result("5. a gate printing 1 GiB", "peak memory of verifygate (MiB)",
                    "target 64 MiB", 64.0, peak, 64.0, peak / 64, peak <= 64, len(peaks))
    throughput = Result("5. a gate printing 1 GiB", "throughput (MiB/s of gate output)",
                        "target 500 MiB/s", 1.0, rate, 500.0, 500 / rate, rate >= 500,
                        len(rates))
    return [memory, throughput]


def scenario_startup(root: Path) -> list[Result]:
    """What the command line imports, in the steady state of a repository's commits.

    The contract has patterns, and one run comes first: it leaves the parsed-contract cache
    every later run finds, so tomllib should not show up. pathspec does (with ``dataclasses``):
    the patterns are checked and matched with it.
    """
    repo = commit_repo(root / "startup")
    sh([VERIFYGATE, "run", "--staged"], repo)
    results = []
    for args in (["--version"], ["run", "--staged"]):
        # The console script itself, as a hook runs it (``-m`` would add runpy's imports).
        done = subprocess.run([sys.executable, "-X", "importtime", VERIFYGATE, *args],
                              cwd=repo, capture_output=True, text=True)
        rows = []
        for line in done.stderr.splitlines():
            if line.startswith("import time:") and "|" in line:
                _, cumulative, name = line[12:].split("|")
                if cumulative.strip().isdigit():  # the name's indent is its nesting depth
                    rows.append((int(cumulative), name[1:].rstrip()))
        names = {name.strip() for _, name in rows}
        heavy = sorted(n for n in names if n.split(".")[0] in ("pytest", "_pytest", "xdist"))
        unwanted = ("tomllib", "tomli")
        avoided = sorted(n for n in names if n in unwanted)
        top = sorted(rows, reverse=True)[:8]
        total_ms = sum(c for c, n in rows if not n.startswith(" ")) / 1000
        print(f"\n  python -X importtime verifygate {' '.join(args)}: {len(names)} modules, "
              f"top-level imports {total_ms:.1f} ms; heavy imports: {heavy or 'none'}; "
              f"{'/'.join(unwanted)}: {avoided or 'none'}")
        for cumulative, name in top:
            print(f"    {cumulative / 1000:7.1f} ms  {name.strip()}")
        results.append(Result(f"6. start-up: verifygate {' '.join(args)}",
                              "imports of pytest/_pytest/xdist", "target 0", 0.0,
                              float(len(heavy)), 0.0, float(len(heavy)), not heavy, 1,
                              {"modules": len(names), "import_ms": total_ms,
                               "avoided_but_imported": avoided}))
    return results


def scenario_cache(root: Path, count: int) -> list[Result]:
    """8 cached gates of ``sleep 0.5``: a run that reuses every pass vs one that stores them."""
    repo = gate_repo(root / "cache", "sleep 0.5", 8)
    contract = repo / "verify.toml"
    contract.write_text("[settings]\ncache = true\n\n" + contract.read_text())
    commit(repo)
    # The cache is kept in the user's private state directory: this scenario's own.
    state = root / "cache-state"
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    argv = [VERIFYGATE, "run", "--all", "--jobs", "8"]
    first: list[float] = []
    second: list[float] = []
    for index in range(count + 1):  # the first pair is a warm-up
        shutil.rmtree(state, ignore_errors=True)
        cold = sh(argv, repo, env)
        warm = sh(argv, repo, env)
        if index:
            first.append(cold)
            second.append(warm)
    report_path = root / "cache-report.json"
    sh([*argv, "--json", str(report_path)], repo, env)
    gates = json.loads(report_path.read_text())["gates"]
    assert all(gate["cached"] for gate in gates), "the second run did not reuse the passes"
    return [compare("7. result cache, 8 gates of sleep 0.5", "verifygate run (second: cached)",
                    "verifygate run (first: cache cleared)", 0.15, second, first)]


def scenario_no_bytecode(root: Path, count: int) -> list[Result]:
    """Scenario 2 without bytecode writing (``PYTHONDONTWRITEBYTECODE=1``), as a read-only
    site-packages or many container images run pytest.

    What pytest's assertion-rewriting import hook loads it cannot cache then, and loads from
    source on every start; ordinary imports still find the bytecode pip compiled at install.
    One run of each with bytecode writing makes that bytecode (in a cache of this scenario's
    own); the rewritten bytecode pytest wrote in it is removed, since without bytecode
    writing it never exists.
    """
    repo = gate_repo(root / "no-bytecode", "true", 4)
    bare = root / "bare-no-bytecode"
    bare.mkdir()
    (bare / "pytest.ini").write_text("[pytest]\n")
    (bare / "test_one.py").write_text("def test_one():\n    assert True\n")
    prefix = root / "pycache-no-bytecode"
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(prefix)}
    ours_argv = [*PYTEST, "-q", "-p", "no:cacheprovider", "--verify-contract"]
    bare_argv = [*PYTEST, "-q", "-p", "no:cacheprovider"]
    sh(ours_argv, repo, env)
    sh(bare_argv, bare, env)
    for rewritten in prefix.rglob("*-pytest-*.pyc"):
        rewritten.unlink()
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    ours = lambda: sh(ours_argv, repo, env)  # noqa: E731
    theirs = lambda: sh(bare_argv, bare, env)  # noqa: E731
    return [compare("8. pytest, 4 trivial gates, no bytecode writing",
                    "pytest --verify-contract (PYTHONDONTWRITEBYTECODE=1)",
                    "bare pytest, one trivial test (PYTHONDONTWRITEBYTECODE=1)", 1.75,
                    *pairs(ours, theirs, count))]


# One long gate declared last and many short ones: 1.2 s of short gates fit beside it on the
# second job, so the best a scheduler can do is the long gate's own time.
LONG_SECONDS = 1.5
SHORT_SECONDS = (0.15,) * 8


def scenario_longest_first(root: Path, count: int) -> list[Result]:
    """The mixed set with ``--jobs 2``, against the longest gate's own time (``sleep 1.5``).

    A first run records the durations the next runs start the longest gate first by. Started
    in declared order instead (the durations removed before each such run), the long gate
    would start only once the short ones are done: that median is reported beside.
    """
    repo = git_repo(root / "longest-first")
    (repo / "verify.toml").write_text("".join(
        f'[[gate]]\nname = "short{i}"\ncommand = "sleep {seconds}"\n'
        for i, seconds in enumerate(SHORT_SECONDS))
        + f'[[gate]]\nname = "long"\ncommand = "sleep {LONG_SECONDS}"\n')
    commit(repo)
    argv = [VERIFYGATE, "run", "--all", "--jobs", "2"]
    durations = repo / ".git" / "verifygate" / "durations.json"
    sh(argv, repo)
    assert durations.exists(), "the run recorded no durations"
    a, b = pairs(lambda: sh(argv, repo), lambda: sh(["sleep", str(LONG_SECONDS)], repo),
                 count)
    declared = []
    for _ in range(max(3, count // 2)):
        durations.unlink()
        declared.append(sh(argv, repo))  # and records them again
    result = compare("9. longest first: sleep 1.5 declared last + 8 x sleep 0.15",
                     "verifygate run --jobs 2 (durations of earlier runs)",
                     "sleep 1.5 (the longest gate alone)", 1.10, a, b)
    result.extra = {"declared_order_median_s": round(statistics.median(declared), 3)}
    return [result]


# Mixed gate lengths, as a real contract has: 2.85 s of gates in all.
SHARD_SECONDS = (0.6, 0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.15, 0.1, 0.1, 0.05, 0.05)


def scenario_shards(root: Path, count: int) -> list[Result]:
    """12 gates of mixed ``sleep`` over 3 shards vs one machine, every run one gate at a time.

    The shards run one after another here; on CI they are 3 machines at once, so what counts
    is the longest shard. A first whole run records the durations the split is balanced by;
    the three reports are merged at the end to check that every gate ran exactly once.
    """
    repo = git_repo(root / "shards")
    (repo / "verify.toml").write_text("".join(
        f'[[gate]]\nname = "g{i:02d}"\ncommand = "sleep {seconds}"\n'
        for i, seconds in enumerate(SHARD_SECONDS)))
    commit(repo)
    one_machine = [VERIFYGATE, "run", "--all", "--jobs", "1"]
    sh(one_machine, repo)

    def longest_shard() -> float:
        return max(sh([*one_machine, "--shard", f"{k}/3", "--json", f"shard-{k}.json"], repo)
                   for k in (1, 2, 3))

    a, b = pairs(longest_shard, lambda: sh(one_machine, repo), count)
    done = subprocess.run([VERIFYGATE, "merge", *(f"shard-{k}.json" for k in (1, 2, 3)),
                           "--format", "json"], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    merged = json.loads(done.stdout)
    assert len(merged["gates"]) == len(SHARD_SECONDS), merged["gates"]
    shard_loads = [sum(gate["duration_s"] for gate in json.loads(
        (repo / f"shard-{k}.json").read_text())["gates"]) for k in (1, 2, 3)]
    result = compare("10. shards: 12 gates of mixed sleep, 3 machines",
                     "longest of verifygate run --shard k/3 --jobs 1 (k = 1, 2, 3)",
                     "verifygate run --jobs 1 (one machine)", 0.45, a, b)
    result.extra = {"gate_seconds_per_shard": [round(load, 2) for load in shard_loads],
                    "ideal_share": round(sum(SHARD_SECONDS) / 3, 2)}
    return [result]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7, help="measured pairs per comparison")
    parser.add_argument("--only", nargs="*", help="scenario numbers to run (default: all)")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results.json")))
    args = parser.parse_args()
    wanted = set(args.only or [*"123456789", "10"])
    with tempfile.TemporaryDirectory(prefix="verifygate-bench-") as temp:
        root = Path(temp)
        # Measure every tool as installed: pip compiles bytecode for the peers, so ours must
        # have it too. With PYTHONDONTWRITEBYTECODE=1 (some sandboxes set it) an editable
        # install would recompile every module on every run. The bytecode goes to the temp dir.
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        env = {**os.environ, "PRE_COMMIT_HOME": str(root / "pre-commit-home"),
               "LEFTHOOK_QUIET": "meta,summary,execution"}
        results: list[Result] = []
        if wanted & {"1", "2"}:
            trivial = scenario_trivial(root, args.pairs, env)  # 1 vs lefthook, pre-commit; 2
            results += [*trivial[:2], *scenario_commit(root, args.pairs, env),
                        *scenario_partial(root, args.pairs, env), *trivial[2:]]
        if "3" in wanted:
            results += scenario_sleep(root, max(5, args.pairs // 2), env)
        if "4" in wanted:
            results += scenario_selection(root, max(5, args.pairs // 2))
        if "5" in wanted:
            results += scenario_output(root, args.pairs)
        if "6" in wanted:
            results += scenario_startup(root)
        if "7" in wanted:
            results += scenario_cache(root, args.pairs)
        if "8" in wanted:
            results += scenario_no_bytecode(root, args.pairs)
        if "9" in wanted:
            results += scenario_longest_first(root, max(5, args.pairs // 2))
        if "10" in wanted:
            results += scenario_shards(root, max(3, args.pairs // 2))
    print(f"\n{'scenario':<52} {'ours':>10} {'theirs':>10} {'ratio':>7} {'target':>7}  met")
    for r in results:
        print(f"{r.scenario:<52} {r.ours_median_s:>10.3f} {r.theirs_median_s:>10.3f} "
              f"{r.ratio:>7.3f} {r.target:>7.2f}  {'yes' if r.met else 'NO'}")
        print(f"    ours: {r.ours}\n    theirs: {r.theirs}")
    machine = {"cpus": os.cpu_count(), "python": sys.version.split()[0],
               "platform": sys.platform}
    Path(args.out).write_text(json.dumps(
        {"machine": machine, "results": [asdict(r) for r in results]}, indent=2) + "\n")
    print(f"\nresults written to {args.out}")
    return 0 if all(r.met for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
