"""example-repo/: its contract, its pre-commit configuration, its own gates, and demo.sh."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_verifygate.contract import load_contract
from pytest_verifygate.git.changes import ChangeSet
from pytest_verifygate.selection import select_gates

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "example-repo"
BIN = Path(sys.executable).parent
# Caches a developer's tools may have left in example-repo/ are not part of the project.
CACHES = ("__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".venv")


def user_env(tmp_path: Path) -> dict[str, str]:
    """A shell with this virtualenv first on PATH (as ``make demo`` sets it up), nothing else."""
    env = {
        key: value for key, value in os.environ.items()
        if not key.startswith(("GIT_", "PRE_COMMIT", "VERIFYGATE_", "PYTEST_"))
    }
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        TMPDIR=str(tmp_path),
    )
    return env


def test_contract_loads_with_roles_globs_files_integration_and_manual_gates() -> None:
    contract = load_contract(EXAMPLE / "verify.toml")
    assert contract.warnings == ()
    gates = {gate.name: gate for gate in contract.gates}
    assert list(gates) == ["compile", "unit-tests", "cli-tests", "docs", "amounts-review"]
    assert "{files}" in gates["compile"].command
    assert gates["compile"].when_changed == ("*.py",)
    assert gates["cli-tests"].category == "integration"
    assert gates["cli-tests"].roles == ("implementer", "ci")
    assert gates["unit-tests"].category == "unit"
    assert gates["docs"].env == {"PYTHONPATH": "src"}
    assert gates["amounts-review"].kind == "manual"
    assert gates["amounts-review"].roles == ("reviewer",)


@pytest.mark.parametrize(
    ("files", "deleted", "role", "expected"),
    [
        # Gates with roles run only for a role asked for.
        (["src/tally/amounts.py"], [], None, ["compile", "unit-tests"]),
        (["src/tally/amounts.py"], [], ("implementer", "reviewer"),
         ["compile", "unit-tests", "cli-tests", "amounts-review"]),
        (["src/tally/amounts.py"], [], "implementer", ["compile", "unit-tests", "cli-tests"]),
        (["src/tally/amounts.py"], [], "reviewer",
         ["compile", "unit-tests", "amounts-review"]),
        (["README.md"], [], None, ["docs"]),
        (["tests/integration/test_cli.py"], [], "ci", ["compile", "cli-tests"]),
        # A deleted module still selects the gates that watch it (compile then has no file
        # left for {files} and is skipped when it runs).
        (["src/tally/ledger.py"], ["src/tally/ledger.py"], "implementer",
         ["compile", "unit-tests", "cli-tests"]),
        (["LICENSE"], [], None, []),
    ],
)
def test_selection_follows_the_change(
    files: list[str], deleted: list[str], role: str | tuple[str, ...] | None,
    expected: list[str],
) -> None:
    contract = load_contract(EXAMPLE / "verify.toml")
    changes = ChangeSet("files", files=tuple(files), deleted=frozenset(deleted))
    selected = [s.gate.name for s in select_gates(contract, changes, role=role) if s.selected]
    assert selected == expected


def test_pre_commit_config_is_valid_and_runs_verifygate_from_the_project_environment(
    tmp_path: Path,
) -> None:
    from pre_commit.clientlib import load_config  # type: ignore[import-untyped]

    config_path = EXAMPLE / ".pre-commit-config.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-config", str(config_path)],
        env=user_env(tmp_path), capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    config = load_config(str(config_path))
    assert config["default_install_hook_types"] == ["pre-commit", "pre-push"]
    [repo] = config["repos"]
    assert repo["repo"] == "local"
    [hook] = repo["hooks"]
    assert hook["id"] == "verifygate"
    assert hook["entry"] == "verifygate run"
    assert hook["language"] in ("system", "unsupported")
    assert (hook["pass_filenames"], hook["always_run"], hook["require_serial"]) == (
        False, True, True)
    assert hook["stages"] == ["pre-commit", "pre-push", "manual"]
    # The alternative (pytest-verifygate from PyPI, pinned) is shown, commented out, and
    # valid once uncommented.
    text = config_path.read_text(encoding="utf-8")
    assert "#       additional_dependencies: [pytest-verifygate==" in text
    start = text.index("  # - repo: local")
    uncommented = "repos:\n" + "\n".join(line.replace("# ", "", 1) for line in
                                           text[start:].splitlines() if line.strip())
    [alternative] = yaml.safe_load(uncommented)["repos"]
    assert alternative["hooks"][0]["language"] == "python"


def test_the_example_project_passes_its_own_gates(tmp_path: Path) -> None:
    repo = tmp_path / "tally"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns(*CACHES, "demo.sh"))
    env = user_env(tmp_path)
    for args in (["-c", "init.defaultBranch=main", "init", "-q"], ["add", "-A"],
                 ["-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-q",
                  "-m", "initial"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [str(BIN / "verifygate"), "run", "--all", "--role", "implementer", "--role", "reviewer",
         "--json", str(report_path)],
        cwd=repo, env=env, capture_output=True, text=True, check=False, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["verdict"] == "pending"  # every command gate passed; the sign-off waits
    assert {gate["name"]: gate["outcome"] for gate in report["gates"]} == {
        "compile": "passed", "unit-tests": "passed", "cli-tests": "passed", "docs": "passed",
        "amounts-review": "pending",
    }
    assert "awaiting sign-off: amounts-review" in done.stdout
    # The gates leave nothing behind that git would count as a change.
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, env=env,
                            capture_output=True, text=True, check=True)
    assert status.stdout == ""


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(EXAMPLE / "demo.sh")], cwd=ROOT, env=user_env(tmp_path),
        capture_output=True, text=True, check=False, timeout=120,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for number in range(1, 9):
        assert f"\n== {number}. " in out
    assert "UNEXPECTED" not in out
    assert "  FAIL  unit-tests" in out
    assert "unit-tests [command_failed]" in out
    assert "verifygate.code = command_failed" in out
    assert "FAILED verify.toml::unit-tests - [command_failed]" in out
    assert "demo: everything behaved as designed" in out
    # It cleans up after itself (TMPDIR is this test's directory).
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("verifygate-demo")] == []


def test_demo_fails_when_the_breakage_goes_unnoticed(tmp_path: Path) -> None:
    # A copy of example-repo whose unit tests no longer cover accounting negatives: the
    # demo's change then breaks nothing, and the demo must say so and exit non-zero.
    copy = tmp_path / "example-repo"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns(*CACHES))
    test_file = copy / "tests/unit/test_amounts.py"
    text = test_file.read_text(encoding="utf-8")
    kept = [line for line in text.splitlines(keepends=True) if '("(' not in line]
    test_file.write_text("".join(kept), encoding="utf-8")
    (copy / "tests/unit/test_ledger.py").unlink()
    done = subprocess.run(
        ["bash", str(copy / "demo.sh")], cwd=tmp_path, env=user_env(tmp_path),
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UNEXPECTED: verifygate run exits 1: expected 1, got 0" in done.stdout
    assert "UNEXPECTED: gate outcomes in the report" in done.stdout
    assert "did not behave as designed" in done.stdout
