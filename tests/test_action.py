"""The composite GitHub Action (``action.yml``), its steps run as the runner runs them.

GitHub's runner cannot run here, so ``run_composite`` does what it does for a composite
action's ``run`` steps: each step's ``env`` and ``working-directory`` with the
``${{ inputs.* }}`` and ``${{ github.action_path }}`` expressions evaluated, its script run
by ``bash --noprofile --norc -eo pipefail``, ``$GITHUB_OUTPUT`` read back after each step, and
the action's outputs evaluated from the steps' outputs. Everything else is real: the package is
installed by pip into a fresh virtualenv, the clone is shallow as actions/checkout makes it, and
the workflow commands in the log are read as the runner reads them (``actions_runner``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from actions_runner import honoured

from conftest import commit_all, git, read_output_file, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

ACTION = Path(__file__).resolve().parent.parent / "action.yml"
_EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


class StepRun(NamedTuple):
    id: str | None
    returncode: int
    stdout: str
    outputs: dict[str, str]


def load_action() -> dict[str, Any]:
    action: dict[str, Any] = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    return action


def run_composite(inputs: dict[str, str], *, cwd: Path, environ: dict[str, str],
                  runner_temp: Path, ci_cache: Path | None = None,
                  ) -> tuple[list[StepRun], dict[str, str]]:
    """Run the action's steps in order, after a failed one only those ``if: always()``, as
    the runner does. ``actions/cache`` is played by ``ci_cache``: ``restore`` copies the
    newest entry whose key is the key or starts with a restore key, ``save`` stores the paths
    under the key (once: entries are immutable)."""
    action = load_action()
    values = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    values.update(inputs)
    steps_outputs: dict[str, dict[str, str]] = {}

    def evaluate(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            expression = match.group(1)
            if expression.startswith("inputs."):
                return values[expression[len("inputs."):]]
            if expression == "github.action_path":
                return str(ACTION.parent)
            if expression == "github.event.repository.default_branch":
                return "main"
            step, _, name = expression.removeprefix("steps.").partition(".outputs.")
            if expression.startswith("steps.") and name:
                return steps_outputs.get(step, {}).get(name, "")
            raise AssertionError(f"an expression this test does not evaluate: {expression}")
        return _EXPRESSION.sub(one, text)

    def condition(step: dict[str, Any], failed: bool) -> bool:
        text = str(step.get("if", "success()"))
        always = text.startswith("always() && ")
        clauses = re.fullmatch(r"(?:always\(\) && )?inputs\.([\w-]+) == '(\w*)'", text)
        if text != "success()" and clauses is None:
            raise AssertionError(f"a condition this test does not evaluate: {text}")
        met = clauses is None or values[clauses.group(1)] == clauses.group(2)
        return met and (always or not failed)

    runs: list[StepRun] = []
    failed = False
    for number, step in enumerate(action["runs"]["steps"]):
        if not condition(step, failed):
            continue
        if "uses" in step:
            with_ = {name: evaluate(str(value)) for name, value in step["with"].items()}
            play_actions_cache(step["uses"], with_, ci_cache)
            continue
        assert step["shell"] == "bash"
        output_file = runner_temp / f"output-{number}"
        env = {**environ, "GITHUB_OUTPUT": str(output_file), "RUNNER_TEMP": str(runner_temp),
               **{key: evaluate(str(value)) for key, value in step.get("env", {}).items()}}
        where = cwd / evaluate(step.get("working-directory", "."))
        script = runner_temp / f"step-{number}.sh"
        script.write_text(step["run"], encoding="utf-8")
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                              cwd=where, env=env, capture_output=True, text=True, timeout=600)
        outputs = read_output_file(output_file)
        runs.append(StepRun(step.get("id"), done.returncode, done.stdout + done.stderr, outputs))
        if step.get("id"):
            steps_outputs[step["id"]] = outputs
        failed = failed or done.returncode != 0
    action_outputs = {name: evaluate(spec["value"]) for name, spec in action["outputs"].items()}
    return runs, action_outputs


def play_actions_cache(uses: str, with_: dict[str, str], store: Path | None) -> None:
    """What ``actions/cache/restore`` and ``actions/cache/save`` do with ``path`` and keys."""
    assert store is not None, f"{uses} in a run without a CI cache"
    paths = [Path(line) for line in with_["path"].splitlines() if line]
    assert paths and all(path.is_absolute() for path in paths), with_["path"]
    if uses == "actions/cache/save@v4":
        entry = store / with_["key"]
        if not entry.exists():
            for number, path in enumerate(paths):
                if path.exists():
                    copy = entry / str(number)
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copytree(path, copy) if path.is_dir() else shutil.copy2(path, copy)
        return
    assert uses == "actions/cache/restore@v4", uses
    prefixes = [with_["key"], *(line for line in with_["restore-keys"].splitlines() if line)]
    saved = sorted(store.iterdir(), key=lambda item: item.stat().st_mtime_ns, reverse=True) \
        if store.exists() else []
    for prefix in prefixes:
        found = next((entry for entry in saved if entry.name.startswith(prefix)), None)
        if found is not None:
            for number, path in enumerate(paths):
                copy = found / str(number)
                path.parent.mkdir(parents=True, exist_ok=True)
                if copy.is_dir():
                    shutil.copytree(copy, path, dirs_exist_ok=True)
                elif copy.exists():
                    shutil.copy2(copy, path)
            return


def test_the_action_declares_its_inputs_and_outputs() -> None:
    action = load_action()
    assert action["runs"]["using"] == "composite"
    assert {"contract", "role", "base"} <= set(action["inputs"])
    assert set(action["outputs"]) == {"verdict", "failed-gates", "report"}
    assert action["inputs"]["cache"]["default"] == "true"
    for step in action["runs"]["steps"]:
        # Inputs are data: passed through the environment, never pasted into a script.
        assert "${{" not in step.get("run", ""), step["name"]


@pytest.mark.slow
def test_the_action_runs_the_gates_on_a_pull_request(tmp_path: Path, repo: Path) -> None:
    python = json.dumps(sys.executable)
    write(repo / "verify.toml",
          f'[[gate]]\nname = "lint"\ncommand = [{python}, "-c", '
          '"import sys; print(\'src/a.py:1: E999 bad\'); sys.exit(1)"]\n'
          'when_changed = ["src/**"]\n'
          f'[[gate]]\nname = "ok"\ncommand = [{python}, "-c", "print(\'fine\')"]\n'
          f'[[gate]]\nname = "docs"\ncommand = [{python}, "-c", "0"]\n'
          'when_changed = ["docs/**"]\n')
    write(repo / "src" / "a.py", "x = 1\n")
    commit_all(repo, "base")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(origin))
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo / "src" / "a.py", "x = 2\n")
    commit_all(repo, "change")
    git(repo, "push", "-q", str(origin), "feature")
    # What actions/checkout makes of a pull request: one commit, no base branch.
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "feature", f"file://{origin}",
        str(checkout))
    assert git(checkout, "rev-parse", "--is-shallow-repository").strip() == "true"

    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    summary = tmp_path / "summary.md"
    environ = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_BASE_REF": "main",
               "GITHUB_STEP_SUMMARY": str(summary),
               # python3 is this interpreter, as actions/setup-python would make it.
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    runs, outputs = run_composite({}, cwd=checkout, environ=environ, runner_temp=runner_temp,
                                  ci_cache=tmp_path / "ci-cache")

    assert [run.returncode for run in runs[:-1]] == [0] * (len(runs) - 1), runs
    gates = runs[-1]
    assert gates.id == "gates" and gates.returncode == 1, gates.stdout  # a gate failed
    assert outputs == {"verdict": "failed", "failed-gates": '["lint"]',
                       "report": "verifygate-report.json"}
    report = json.loads((checkout / "verifygate-report.json").read_text(encoding="utf-8"))
    assert report["changes"]["files"] == ["src/a.py"]
    assert [gate["name"] for gate in report["gates"]] == ["lint", "ok"]
    # The failed gate's output is folded in the log, and the runner honours the group.
    commands = [(command.name, command.data) for command in honoured(gates.stdout)
                if command.name in ("group", "endgroup", "error")]
    assert commands[:2] == [("group", "verifygate lint [command_failed]"), ("endgroup", "")]
    assert ("error", "E999 bad") in commands
    assert summary.read_text(encoding="utf-8").startswith("### \u274c verifygate: failed")


@pytest.mark.slow
def test_a_rerun_reuses_the_passes_ci_stored(tmp_path: Path, repo: Path) -> None:
    counter = tmp_path / "counter"
    python = json.dumps(sys.executable)
    write(repo / "verify.toml",
          f'[[gate]]\nname = "tests"\ncache = true\ncommand = [{python}, "-c", '
          f'"open({str(counter)!r}, \'a\').write(\'ran\\\\n\')"]\n')
    write(repo / "src" / "a.py", "x = 1\n")
    commit_all(repo, "base")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(origin))
    store = tmp_path / "ci-cache"
    environ = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_REF_NAME": "main",
               "RUNNER_OS": "Linux", "GITHUB_RUN_ATTEMPT": "1",
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    environ.pop("XDG_STATE_HOME")  # CI's key is CI's own: never this session's

    def ci_run(number: int, inputs: dict[str, str]) -> dict[str, Any]:
        """A run on a fresh machine: a new clone, a new runner temp, only the CI cache kept."""
        checkout = tmp_path / "checkout"
        shutil.rmtree(checkout, ignore_errors=True)
        git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(checkout))
        runner_temp = tmp_path / f"runner-temp-{number}"
        runner_temp.mkdir()
        runs, outputs = run_composite(inputs, cwd=checkout, ci_cache=store,
                                      environ={**environ, "GITHUB_RUN_ID": str(number),
                                               "HOME": str(runner_temp / "home")},
                                      runner_temp=runner_temp)
        assert outputs["verdict"] == "passed", runs[-1].stdout
        report = json.loads((checkout / "verifygate-report.json").read_text(encoding="utf-8"))
        gate: dict[str, Any] = report["gates"][0]
        return gate

    assert ci_run(1, {})["cached"] is False
    assert counter.read_text().splitlines() == ["ran"]
    assert ci_run(2, {})["cached"] is True  # a re-run: nothing spawned
    assert counter.read_text().splitlines() == ["ran"]
    assert ci_run(3, {"cache": "false"})["cached"] is False
    assert counter.read_text().splitlines() == ["ran", "ran"]
