"""The pre-commit hook, driven by the real pre-commit: commits and pushes in real repositories.

Most tests use a ``repo: local`` hook with ``language: system`` that runs this virtualenv's
``verifygate`` (fast: nothing to install). The hook as published in ``.pre-commit-hooks.yaml``
(``language: python``, installed by pre-commit into an isolated virtualenv) is exercised from a
committed snapshot of this repository, through ``pre-commit try-repo`` and through an installed
``git commit`` hook; its environment is installed once per test session and shared by
pytest-xdist workers.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from conftest import git, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
VERIFYGATE = Path(sys.executable).parent / "verifygate"

VERIFY_TOML = """\
[settings]
jobs = 2

[[gate]]
name = "src-check"
command = "python tools/check.py {files}"
when_changed = ["src/**/*.py"]

[[gate]]
name = "imports"
command = "python tools/imports.py"
when_changed = ["src/**"]

[[gate]]
name = "docs-check"
command = "python tools/check.py {files}"
when_changed = ["docs/**"]
"""

# Fails when a given file contains the word BROKEN; says which files it saw, and where its
# Python lives (to tell pre-commit's isolated virtualenv from this one).
CHECK_PY = """\
import sys

print("checked:", " ".join(sys.argv[1:]))
print("prefix:", sys.prefix)
bad = [path for path in sys.argv[1:] if "BROKEN" in open(path, encoding="utf-8").read()]
for path in bad:
    print(f"{path}:1: error: BROKEN")
sys.exit(1 if bad else 0)
"""

# Fails when a module under src/app imports a sibling module that does not exist.
IMPORTS_PY = """\
import pathlib
import re
import sys

package = pathlib.Path("src/app")
missing = []
for module in sorted(package.glob("*.py")):
    for name in re.findall(r"^from app\\.(\\w+) import", module.read_text(), re.M):
        if not (package / f"{name}.py").exists():
            missing.append(f"{module}: imports app.{name}, which does not exist")
print("\\n".join(missing) or "imports ok")
sys.exit(1 if missing else 0)
"""

HOOK_FIELDS = """\
        pass_filenames: false
        always_run: true
        require_serial: true
        verbose: true
"""


# --------------------------------------------------------------------------------------------
# helpers


def clean_env(pre_commit_home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user's shell: no pre-commit, git or verifygate variables leak in."""
    env = {
        key: value for key, value in os.environ.items()
        if not key.startswith(("GIT_", "PRE_COMMIT", "VERIFYGATE_", "PYTEST_"))
    }
    env.update(
        PATH=f"{VERIFYGATE.parent}{os.pathsep}{env.get('PATH', '')}",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        PRE_COMMIT_HOME=str(pre_commit_home),
        PRE_COMMIT_COLOR="never",
    )
    env.update(extra)
    return env


def run(
    args: list[str], cwd: Path, env: Mapping[str, str], *, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"{shlex.join(args)} exited {done.returncode}:\n"
                             f"{done.stdout}\n{done.stderr}")
    return done


def pre_commit(repo: Path, env: Mapping[str, str], *args: str,
               check: bool = True) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "pre_commit", *args], repo, env, check=check)


def read_report(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    path.unlink()  # the next run must write a fresh one
    return report


def outcomes(report: Mapping[str, Any]) -> dict[str, str]:
    return {gate["name"]: gate["outcome"] + (f"/{gate['code']}" if gate["code"] else "")
            for gate in report["gates"]}


def head(repo: Path, env: Mapping[str, str], ref: str = "HEAD") -> str:
    return git(repo, "rev-parse", ref, env=env).strip()


def local_hook_config(report: Path) -> str:
    entry = f"{shlex.quote(str(VERIFYGATE))} run"
    return f"""\
default_install_hook_types: [pre-commit, pre-push]
repos:
  - repo: local
    hooks:
      - id: verifygate
        name: verifygate
        entry: {entry}
        args: [--json, {json.dumps(str(report))}]
        language: system
{HOOK_FIELDS}        stages: [pre-commit, pre-push, manual]
"""


class Project:
    """A git repository with a verify contract and pre-commit hooks installed."""

    def __init__(self, path: Path, env: dict[str, str], report: Path) -> None:
        self.path = path
        self.env = env
        self.report = report

    def git(self, *args: str) -> str:
        return git(self.path, *args, env=self.env)

    def commit(self, message: str, *extra: str) -> subprocess.CompletedProcess[str]:
        """``git commit`` through the installed hooks; does not raise when a hook blocks it."""
        return run(["git", "commit", "-q", "-m", message, *extra], self.path, self.env,
                   check=False)

    def write(self, relative: str, text: str) -> None:
        write(self.path / relative, text)


def make_project(tmp_path: Path, pre_commit_home: Path, config: str) -> Project:
    path = tmp_path / "project"
    report = tmp_path / "report.json"
    env = clean_env(pre_commit_home)
    write(path / "verify.toml", VERIFY_TOML)
    write(path / "tools/check.py", CHECK_PY)
    write(path / "tools/imports.py", IMPORTS_PY)
    write(path / "src/app/__init__.py", "")
    write(path / "src/app/core.py", "from app.helper import double\n\nVALUE = double(21)\n")
    write(path / "src/app/helper.py", "def double(x):\n    return 2 * x\n")
    write(path / "docs/guide.md", "# Guide\n")
    write(path / ".gitignore", "__pycache__/\n")
    write(path / ".pre-commit-config.yaml", config.replace("@REPORT@", str(report)))
    git(path, "-c", "init.defaultBranch=main", "init", "-q", env=env)
    git(path, "config", "user.name", "Test", env=env)
    git(path, "config", "user.email", "test@example.invalid", env=env)
    git(path, "config", "commit.gpgsign", "false", env=env)
    git(path, "add", "-A", env=env)
    git(path, "commit", "-q", "--no-verify", "-m", "initial", env=env)
    pre_commit(path, env, "install")
    return Project(path, env, report)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A project whose hooks run this virtualenv's verifygate (``repo: local``)."""
    return make_project(tmp_path, tmp_path / "pre-commit-home",
                        local_hook_config(tmp_path / "report.json"))


# --------------------------------------------------------------------------------------------
# the hook as published: a committed snapshot of this repository, installed once per session


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``, so pytest-xdist workers build shared things once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_dir(factory: pytest.TempPathFactory) -> Path:
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # every worker's basetemp lives in one directory of the session
    return base / "verifygate-precommit"


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This repository's package and manifest, committed to a git repository of their own.

    pre-commit installs hooks from commits; copying the working files (instead of cloning
    HEAD) tests the code as it is now, uncommitted changes included.
    """
    shared = shared_dir(tmp_path_factory)
    env = clean_env(shared / "unused-home")
    repo = shared / "hook-repo"
    with locked(shared / "hook-repo.lock"):
        if not repo.exists():
            building = shared / "hook-repo.building"
            shutil.rmtree(building, ignore_errors=True)
            building.mkdir(parents=True)
            for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
                shutil.copy2(ROOT / name, building / name)
            shutil.copytree(ROOT / "src", building / "src",
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
            git(building, "-c", "init.defaultBranch=main", "init", "-q", env=env)
            git(building, "add", "-A", env=env)
            git(building, "-c", "user.name=Test", "-c", "user.email=test@example.invalid",
                "commit", "-q", "--no-verify", "-m", "snapshot", env=env)
            building.rename(repo)
        return repo, head(repo, env)


@pytest.fixture(scope="session")
def shared_pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One PRE_COMMIT_HOME for the session: the hook's virtualenv is installed once."""
    return shared_dir(tmp_path_factory) / "pre-commit-home"


def published_hook_config(hook_repo: tuple[Path, str]) -> str:
    repo, rev = hook_repo
    return f"""\
default_install_hook_types: [pre-commit, pre-push]
repos:
  - repo: {json.dumps(str(repo))}
    rev: {rev}
    hooks:
      - id: verifygate
        args: [--json, "@REPORT@"]
        verbose: true
      - id: verifygate-all
        args: [--json, "@REPORT@"]
        verbose: true
"""


# --------------------------------------------------------------------------------------------
# the manifest


def test_manifest_is_valid_and_declares_what_the_hook_relies_on(tmp_path: Path) -> None:
    from pre_commit.clientlib import load_manifest  # type: ignore[import-untyped]

    done = run([sys.executable, "-m", "pre_commit", "validate-manifest",
                ".pre-commit-hooks.yaml"], ROOT, clean_env(tmp_path / "home"), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    hooks = {hook["id"]: hook for hook in load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))}
    assert set(hooks) == {"verifygate", "verifygate-all"}
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["entry"].startswith("verifygate run")
        assert hook["pass_filenames"] is False
        assert hook["always_run"] is True
        assert hook["require_serial"] is True
        # The new stage names (pre-commit, pre-push) arrived in pre-commit 3.2.0.
        assert hook["minimum_pre_commit_version"] == "3.2.0"
    verifygate = hooks["verifygate"]
    # No change-set flag: verifygate reads pre-commit's environment (staged, or the push range).
    assert verifygate["entry"] == "verifygate run"
    assert verifygate["stages"] == ["pre-commit", "pre-push", "manual"]
    assert hooks["verifygate-all"]["entry"] == "verifygate run --all"


# --------------------------------------------------------------------------------------------
# the published hook (language: python, in pre-commit's own virtualenv)


def test_try_repo_runs_the_published_hook_on_the_staged_change(
    tmp_path: Path, hook_repo: tuple[Path, str]
) -> None:
    project = make_project(tmp_path, tmp_path / "home", local_hook_config(tmp_path / "unused"))
    project.write("src/app/core.py", "BROKEN = True\n")
    project.git("add", "src/app/core.py")
    done = pre_commit(project.path, project.env, "try-repo", str(hook_repo[0]), "verifygate",
                      "--verbose", check=False)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "verifygate" in out and "Failed" in out
    assert "(changes: staged, 1 file(s))" in out
    assert "FAIL  src-check" in out and "PASS  imports" in out
    assert "src/app/core.py:1: error: BROKEN" in out
    assert "verdict: failed (1 passed, 1 failed, 0 skipped, 0 pending): src-check " \
           "[command_failed]" in out
    assert "docs-check" not in out  # not selected: nothing under docs/ changed


@pytest.mark.parametrize("tool", ["pre-commit", "prek"])
def test_try_repo_at_pre_push_resolves_the_refs_in_the_users_repository(
    tmp_path: Path, hook_repo: tuple[Path, str], tool: str
) -> None:
    project = make_project(tmp_path, tmp_path / "home", local_hook_config(tmp_path / "unused"))
    for text in ("# Guide\n\nInstall it.\n", "# Guide\n\nInstall it, then run it.\n"):
        project.write("docs/guide.md", text)
        project.git("add", "docs/guide.md")
        project.git("commit", "-q", "--no-verify", "-m", "docs")

    def try_repo(to_ref: str) -> subprocess.CompletedProcess[str]:
        return hook_manager(tool, project, "try-repo", str(hook_repo[0]), "verifygate",
                            "--hook-stage", "pre-push", "--from-ref", "HEAD~2", "--to-ref",
                            to_ref, "--verbose")

    # The refs are the user's, whatever pre-commit's own checkout of the hook is.
    done = try_repo("HEAD")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "unknown git ref" not in done.stdout + done.stderr
    assert "PASS  docs-check" in done.stdout
    # A pushed commit that is not the one checked out is refused in one line, saying why.
    refused = try_repo("HEAD~1")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    output = refused.stdout + refused.stderr
    assert "unknown git ref" not in output
    assert "is not the one checked out" in output, output


def test_published_hook_blocks_a_commit_and_runs_every_gate_on_request(
    tmp_path: Path, hook_repo: tuple[Path, str], shared_pre_commit_home: Path
) -> None:
    project = make_project(tmp_path, shared_pre_commit_home, published_hook_config(hook_repo))
    before = head(project.path, project.env)
    project.write("src/app/core.py", "BROKEN = True\n")
    project.git("add", "-A")
    blocked = project.commit("breaks src-check")
    assert blocked.returncode != 0
    assert "FAIL  src-check" in blocked.stdout + blocked.stderr
    assert head(project.path, project.env) == before
    report = read_report(project.report)
    assert report["changes"] == {"source": "staged", "ref": None, "files": ["src/app/core.py"]}
    assert outcomes(report) == {"src-check": "failed/command_failed", "imports": "passed"}
    # The gates ran with the python of pre-commit's isolated virtualenv, not this one.
    src_check = next(gate for gate in report["gates"] if gate["name"] == "src-check")
    assert f"prefix: {shared_pre_commit_home}" in src_check["output_tail"]

    project.write("src/app/core.py", "VALUE = 42\n")
    project.git("add", "-A")
    passed = project.commit("fixed")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert head(project.path, project.env) != before
    assert outcomes(read_report(project.report)) == {"src-check": "passed",
                                                      "imports": "passed"}

    manual = pre_commit(project.path, project.env, "run", "--hook-stage", "manual",
                        "verifygate-all")
    assert "Passed" in manual.stdout
    report = read_report(project.report)
    assert report["changes"]["source"] == "all"
    assert outcomes(report) == {"src-check": "passed", "imports": "passed",
                                "docs-check": "passed"}


# --------------------------------------------------------------------------------------------
# commits through a repo: local hook


def test_staged_breakage_blocks_the_commit_and_the_fix_lets_it_through(project: Project) -> None:
    before = head(project.path, project.env)
    project.write("src/app/core.py", "from app.helper import double\n\nBROKEN = double(1)\n")
    project.git("add", "src/app/core.py")
    blocked = project.commit("break it")
    output = blocked.stdout + blocked.stderr
    assert blocked.returncode == 1
    assert head(project.path, project.env) == before
    assert "- hook id: verifygate" in output and "- exit code: 1" in output
    assert "  FAIL  src-check" in output and "  PASS  imports" in output
    assert "### `src-check` failed: command_failed, exit status 1" in output
    assert "verdict: failed (1 passed, 1 failed, 0 skipped, 0 pending): src-check " \
           "[command_failed]" in output
    report = read_report(project.report)
    assert report["changes"]["source"] == "staged"
    assert outcomes(report) == {"src-check": "failed/command_failed", "imports": "passed"}
    assert [gate["name"] for gate in report["not_selected"]] == ["docs-check"]

    project.write("src/app/core.py", "from app.helper import double\n\nVALUE = double(1)\n")
    project.git("add", "src/app/core.py")
    passed = project.commit("fix it")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert head(project.path, project.env) != before
    assert "Passed" in passed.stdout + passed.stderr
    assert outcomes(read_report(project.report)) == {"src-check": "passed", "imports": "passed"}


def _report(verdict: str, *gates: tuple[str, str, str | None]) -> dict[str, Any]:
    summary = {"passed": 0, "failed": 0, "skipped": 0, "pending": 0}
    for _, outcome, _ in gates:
        summary[outcome] += 1
    return {"verdict": verdict, "summary": summary,
            "gates": [{"name": n, "outcome": o, "code": c} for n, o, c in gates]}


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        (_report("passed", ("lint", "passed", None)),
         "verdict: passed (1 passed, 0 failed, 0 skipped, 0 pending)"),
        (_report("failed", ("lint", "failed", "command_failed"), ("t", "failed", "timeout"),
                 ("docs", "passed", None)),
         "verdict: failed (1 passed, 2 failed, 0 skipped, 0 pending): lint [command_failed], "
         "t [timeout]"),
        (_report("pending", ("lint", "passed", None), ("review", "pending", None)),
         "verdict: pending (1 passed, 0 failed, 0 skipped, 1 pending): awaiting sign-off: "
         "review"),
        (_report("unverified"),
         "verdict: unverified (0 passed, 0 failed, 0 skipped, 0 pending): no gate ran (no gate "
         "applies to this change)"),
        (_report("unverified", ("tests", "skipped", None)),
         "verdict: unverified (0 passed, 0 failed, 1 skipped, 0 pending): no gate ran"),
        (_report("failed"),
         "verdict: failed (0 passed, 0 failed, 0 skipped, 0 pending): files changed but no "
         "gate ran, and the contract sets fail_when_unverified"),
    ],
)
def test_verdict_line_says_what_to_do_next(report: dict[str, Any], expected: str) -> None:
    from pytest_verifygate.report.terminal import verdict_line

    assert verdict_line(report) == expected
    assert verdict_line(report, report_path="r.json") == expected + "; report: r.json"


@pytest.mark.parametrize("form", [["-a"], ["--", "src/app/helper.py"]], ids=["-a", "paths"])
def test_commit_all_and_commit_paths_check_what_git_is_about_to_commit(
    project: Project, form: list[str]
) -> None:
    # Nothing is staged beforehand: git builds a temporary index (GIT_INDEX_FILE) for the
    # commit, and the change set must come from that index.
    project.write("src/app/helper.py", "def double(x):\n    return 2 * x  # BROKEN\n")
    blocked = project.commit("break the helper", *form)
    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    report = read_report(project.report)
    assert report["changes"]["files"] == ["src/app/helper.py"]
    assert outcomes(report) == {"src-check": "failed/command_failed", "imports": "passed"}
    assert project.git("status", "--porcelain") == " M src/app/helper.py\n"


def test_successful_run_prints_gate_lines_and_one_verdict_line(project: Project) -> None:
    project.write("docs/guide.md", "# Guide\n\nMore.\n")
    project.git("add", "docs/guide.md")
    done = pre_commit(project.path, project.env, "run")
    body = done.stdout.split("- duration:", 1)[1].splitlines()[1:]
    lines = [line for line in body if line.strip()]
    assert lines[0].startswith("verifygate: verify.toml: 1 of 3 gate(s) selected")
    assert lines[1].startswith("  PASS  docs-check") and lines[1].endswith("s")
    assert lines[2:] == ["verdict: passed (1 passed, 0 failed, 0 skipped, 0 pending); "
                         f"report: {project.report}"]


def test_staged_deletion_selects_the_gates_watching_that_path(project: Project) -> None:
    project.git("rm", "-q", "src/app/helper.py")
    blocked = project.commit("remove the helper")
    assert blocked.returncode == 1
    assert "src/app/core.py: imports app.helper, which does not exist" in blocked.stderr
    report = read_report(project.report)
    assert report["changes"]["files"] == ["src/app/helper.py"]
    # Both gates watch src/: the deletion selects them; src-check has no file left for
    # {files} (deleted files never appear there), imports checks what remains and fails.
    assert outcomes(report) == {"src-check": "skipped", "imports": "failed/command_failed"}

    project.write("src/app/core.py", "VALUE = 2 * 21\n")
    project.git("add", "src/app/core.py")
    passed = project.commit("remove the helper")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    report = read_report(project.report)
    assert report["changes"]["files"] == ["src/app/core.py", "src/app/helper.py"]
    src_check = next(gate for gate in report["gates"] if gate["name"] == "src-check")
    assert src_check["outcome"] == "passed"
    assert "checked: src/app/core.py\n" in src_check["output_tail"]


def test_staged_rename_counts_both_paths(project: Project) -> None:
    project.git("mv", "docs/guide.md", "docs/manual.md")
    done = project.commit("rename the guide")
    assert done.returncode == 0, done.stdout + done.stderr
    report = read_report(project.report)
    assert report["changes"]["files"] == ["docs/guide.md", "docs/manual.md"]
    docs = next(gate for gate in report["gates"] if gate["name"] == "docs-check")
    assert "checked: docs/manual.md\n" in docs["output_tail"]


def test_unstaged_work_is_left_untouched(project: Project) -> None:
    core = project.path / "src/app/core.py"
    untracked = project.path / "notes.txt"
    # Staged: a good change. Unstaged on top of it: work in progress that would fail the gate.
    project.write("src/app/core.py", "from app.helper import double\n\nVALUE = double(2)\n")
    project.git("add", "src/app/core.py")
    project.write("src/app/core.py",
                  "from app.helper import double\n\nVALUE = double(2)\nBROKEN = 'wip'\r\n")
    untracked.write_bytes(b"scratch \xff\n")
    work_before = core.read_bytes()

    done = project.commit("double two")
    assert done.returncode == 0, done.stdout + done.stderr
    # pre-commit stashed the unstaged part, so the gates checked exactly what is committed.
    assert "Unstaged files detected" in done.stdout + done.stderr
    assert outcomes(read_report(project.report)) == {"src-check": "passed",
                                                      "imports": "passed"}
    assert "BROKEN" not in project.git("show", "HEAD:src/app/core.py")
    assert core.read_bytes() == work_before
    assert untracked.read_bytes() == b"scratch \xff\n"
    assert project.git("status", "--porcelain") == " M src/app/core.py\n?? notes.txt\n"

    # The other way round: the staged part is broken, the unstaged part would fix it.
    project.write("src/app/helper.py", "BROKEN = 1\n")
    project.git("add", "src/app/helper.py")
    project.write("src/app/helper.py", "def double(x):\n    return x + x\n")
    helper_before = (project.path / "src/app/helper.py").read_bytes()
    staged_before = project.git("diff", "--cached")
    blocked = project.commit("half done")
    assert blocked.returncode == 1
    assert (project.path / "src/app/helper.py").read_bytes() == helper_before
    assert core.read_bytes() == work_before
    assert project.git("diff", "--cached") == staged_before


STAGED_NOTE = "verifygate: checking the staged content in place: "


def staged_state(project: Project) -> tuple[bytes, str, str]:
    """The helper's bytes on disk, the staged diff and the status: what must stay as it was."""
    return ((project.path / "src/app/helper.py").read_bytes(), project.git("diff", "--cached"),
            project.git("status", "--porcelain"))


def test_verifygate_staged_checks_the_index_not_the_work_tree(project: Project) -> None:
    # Staged: broken. Unstaged on top of it: the fix, which a commit would not take.
    project.write("src/app/helper.py", "def double(x):\n    return 2 * x  # BROKEN\n")
    project.git("add", "src/app/helper.py")
    project.write("src/app/helper.py", "def double(x):\n    return x + x\n")
    before = staged_state(project)
    done = run([str(VERIFYGATE), "run", "--staged"], project.path, project.env, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines()[0].startswith(STAGED_NOTE)
    assert "src/app/helper.py:1: error: BROKEN" in done.stdout
    assert staged_state(project) == before
    assert worktrees(project) == [str(project.path)]

    # The other way round: the staged part is good, the unstaged part broken.
    project.git("add", "src/app/helper.py")
    project.write("src/app/helper.py", "def double(x):\n    return x + x  # BROKEN\n")
    before = staged_state(project)
    done = run([str(VERIFYGATE), "run", "--staged"], project.path, project.env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert STAGED_NOTE in done.stderr
    assert staged_state(project) == before

    # Nothing partially staged: checked in place, nothing to say.
    project.git("add", "src/app/helper.py")
    done = run([str(VERIFYGATE), "run", "--staged"], project.path, project.env, check=False)
    assert done.returncode == 1 and done.stderr == "", done.stderr


def test_a_git_hook_running_verifygate_staged_blocks_a_broken_staged_file(
    project: Project, tmp_path: Path
) -> None:
    hooks = tmp_path / "hooks"
    write(hooks / "pre-commit", f"#!/bin/sh\nexec {shlex.quote(str(VERIFYGATE))} run --staged\n")
    (hooks / "pre-commit").chmod(0o755)
    before = head(project.path, project.env)
    project.write("src/app/helper.py", "def double(x):\n    return 2 * x  # BROKEN\n")
    project.git("add", "src/app/helper.py")
    project.write("src/app/helper.py", "def double(x):\n    return x + x\n")
    work = staged_state(project)
    blocked = run(["git", "-c", f"core.hooksPath={hooks}", "commit", "-q", "-m", "broken"],
                  project.path, project.env, check=False)
    assert blocked.returncode != 0, blocked.stdout + blocked.stderr
    assert STAGED_NOTE in blocked.stderr
    assert head(project.path, project.env) == before
    assert staged_state(project) == work
    # git commit <path>: git's own temporary index holds HEAD and that path as on disk.
    project.write("docs/guide.md", "# Guide\n\nBROKEN\n")
    project.git("add", "docs/guide.md")
    done = run(["git", "-c", f"core.hooksPath={hooks}", "commit", "-q", "-m", "helper only",
                "--", "src/app/helper.py"], project.path, project.env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BROKEN" not in project.git("show", "HEAD:src/app/helper.py")


def test_pre_commit_checks_a_staged_file_git_is_told_not_to_look_at(project: Project) -> None:
    # Staged broken, fixed in the work tree, and hidden from git (and so from pre-commit's
    # stash of unstaged changes).
    project.write("src/app/helper.py", "def double(x):\n    return 2 * x  # BROKEN\n")
    project.git("add", "src/app/helper.py")
    project.write("src/app/helper.py", "def double(x):\n    return x + x\n")
    project.git("update-index", "--assume-unchanged", "src/app/helper.py")
    before = staged_state(project)
    blocked = project.commit("broken helper")
    output = blocked.stdout + blocked.stderr
    assert blocked.returncode == 1, output
    assert STAGED_NOTE in output and "src/app/helper.py:1: error: BROKEN" in output
    assert staged_state(project) == before


# --------------------------------------------------------------------------------------------
# --all-files: pre-commit.ci, tox style environments, CI


PREK = Path(sys.executable).parent / "prek"


def hook_manager(tool: str, project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """``pre-commit <args>`` or ``prek <args>``, in the project, not raising on failure."""
    command = [sys.executable, "-m", "pre_commit"] if tool == "pre-commit" else [str(PREK)]
    env = {**project.env, "PREK_HOME": str(Path(project.env["PRE_COMMIT_HOME"]) / "prek")}
    return run([*command, *args], project.path, env, check=False)


ALL_FILES_NOTE = ("verifygate: warning: nothing is staged and pre-commit names no range (as "
                  "under `pre-commit run --all-files`): checking every gate")


def check_all_files_run(tool: str, project: Project) -> None:
    """``<tool> run --all-files`` with nothing staged runs every gate, and fails when one
    fails: never zero gates and "Passed"."""
    project.write("docs/guide.md", "# Guide\n\nBROKEN\n")
    project.git("commit", "-q", "--no-verify", "-am", "broken docs")
    done = hook_manager(tool, project, "run", "--all-files", "--verbose")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert ALL_FILES_NOTE in output
    report = read_report(project.report)
    assert report["changes"]["source"] == "all"
    assert outcomes(report) == {"src-check": "passed", "imports": "passed",
                                "docs-check": "failed/command_failed"}
    # --all-files stashes nothing: the work tree is what is checked, unstaged fix included.
    project.write("docs/guide.md", "# Guide\n")
    done = hook_manager(tool, project, "run", "--all-files")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "temporary worktree" not in done.stdout + done.stderr
    assert outcomes(read_report(project.report)) == {
        "src-check": "passed", "imports": "passed", "docs-check": "passed"}
    project.git("commit", "-q", "--no-verify", "-am", "docs fixed")
    done = hook_manager(tool, project, "run", "--all-files")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcomes(read_report(project.report)) == {
        "src-check": "passed", "imports": "passed", "docs-check": "passed"}


@pytest.mark.parametrize("tool", ["pre-commit", "prek"])
def test_run_all_files_with_nothing_staged_checks_every_gate(project: Project, tool: str
                                                             ) -> None:
    check_all_files_run(tool, project)


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["pre-commit", "prek"])
def test_the_published_hook_run_on_all_files_checks_every_gate(
    tmp_path: Path, hook_repo: tuple[Path, str], shared_pre_commit_home: Path, tool: str
) -> None:
    config = published_hook_config(hook_repo).replace(
        "      - id: verifygate-all\n        args: [--json, \"@REPORT@\"]\n        verbose: true\n",
        "")
    assert "verifygate-all" not in config  # only the hook a commit runs
    project = make_project(tmp_path, shared_pre_commit_home, config)
    check_all_files_run(tool, project)


# --------------------------------------------------------------------------------------------
# pushes


def bare_remote(project: Project, tmp_path: Path) -> Path:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote), env=project.env)
    project.git("remote", "add", "origin", str(remote))
    return remote


def test_pre_push_selects_gates_by_the_pushed_range(project: Project, tmp_path: Path) -> None:
    remote = bare_remote(project, tmp_path)
    project.git("push", "-q", "--no-verify", "origin", "main")
    pushed = head(project.path, project.env)
    project.write("docs/guide.md", "# Guide\n\nInstall it.\n")
    project.git("commit", "-q", "--no-verify", "-am", "docs")
    project.write("src/app/helper.py", "def double(x):\n    return 2 * x  # BROKEN\n")
    project.git("commit", "-q", "--no-verify", "-am", "helper")
    local = head(project.path, project.env)

    blocked = run(["git", "push", "-q", "origin", "main"], project.path, project.env,
                  check=False)
    assert blocked.returncode != 0
    assert "FAIL  src-check" in blocked.stdout + blocked.stderr
    assert head(remote, project.env, "main") == pushed
    report = read_report(project.report)
    assert report["changes"] == {"source": "pre-commit", "ref": f"{pushed}...{local}",
                                 "files": ["docs/guide.md", "src/app/helper.py"]}
    assert outcomes(report) == {"src-check": "failed/command_failed", "imports": "passed",
                                "docs-check": "passed"}

    project.write("src/app/helper.py", "def double(x):\n    return x + x\n")
    project.git("commit", "-q", "--no-verify", "-am", "helper, fixed")
    done = run(["git", "push", "-q", "origin", "main"], project.path, project.env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert head(remote, project.env, "main") == head(project.path, project.env)
    report = read_report(project.report)
    assert report["changes"]["files"] == ["docs/guide.md", "src/app/helper.py"]

    # A push of commits that touch only docs/ selects only the docs gate.
    project.write("docs/guide.md", "# Guide\n\nInstall it, then run it.\n")
    project.git("commit", "-q", "--no-verify", "-am", "docs again")
    run(["git", "push", "-q", "origin", "main"], project.path, project.env)
    report = read_report(project.report)
    assert report["changes"]["files"] == ["docs/guide.md"]
    assert outcomes(report) == {"docs-check": "passed"}


def test_pre_commit_run_with_from_ref_and_to_ref_selects_by_that_range(
    project: Project,
) -> None:
    # The CI recipe: pre-commit run --from-ref origin/main --to-ref HEAD.
    base = head(project.path, project.env)
    project.write("docs/guide.md", "# Guide\n\nBROKEN\n")
    project.git("commit", "-q", "--no-verify", "-am", "docs")
    done = pre_commit(project.path, project.env, "run", "--from-ref", base, "--to-ref", "HEAD",
                      check=False)
    assert done.returncode == 1
    report = read_report(project.report)
    assert report["changes"]["source"] == "pre-commit"
    assert report["changes"]["files"] == ["docs/guide.md"]
    assert outcomes(report) == {"docs-check": "failed/command_failed"}


def test_first_push_of_a_new_history_checks_everything(project: Project, tmp_path: Path) -> None:
    bare_remote(project, tmp_path)
    project.write("src/app/helper.py", "def double(x):\n    return 2 * x  # BROKEN\n")
    project.git("commit", "-q", "--no-verify", "-am", "helper")
    blocked = run(["git", "push", "-q", "origin", "main"], project.path, project.env,
                  check=False)
    report = read_report(project.report)
    assert report["changes"]["source"] == "all"
    assert blocked.returncode != 0


# --------------------------------------------------------------------------------------------
# pushes from a work tree that differs from the pushed commit

def push_note(commit: str) -> str:
    return f"verifygate: checking the pushed commit {commit[:12]} in place: "


FALLBACK_NOTE = "verifygate: checking the pushed commit "


def worktrees(project: Project) -> list[str]:
    """The paths of the repository's worktrees, as git lists them."""
    listing = project.git("worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in listing.splitlines()
            if line.startswith("worktree ")]


def push(project: Project) -> subprocess.CompletedProcess[str]:
    return run(["git", "push", "-q", "origin", "main"], project.path, project.env, check=False)


def test_pre_push_checks_the_pushed_commit_not_an_uncommitted_fix(
    project: Project, tmp_path: Path
) -> None:
    remote = bare_remote(project, tmp_path)
    project.git("push", "-q", "--no-verify", "origin", "main")
    pushed = head(project.path, project.env)
    project.write("src/app/helper.py", "def double(x):\n    return 2 * x  # BROKEN\n")
    project.git("commit", "-q", "--no-verify", "-am", "helper, broken")
    broken = head(project.path, project.env)
    # The fix is staged, not committed: the push sends the broken commit. (pre-commit stashes
    # unstaged changes, not staged ones.)
    project.write("src/app/helper.py", "def double(x):\n    return x + x\n")
    project.git("add", "src/app/helper.py")

    blocked = push(project)
    output = blocked.stdout + blocked.stderr
    assert blocked.returncode != 0, output
    assert head(remote, project.env, "main") == pushed
    assert push_note(broken) in output
    assert "FAIL  src-check" in output
    report = read_report(project.report)
    assert report["changes"]["ref"] == f"{pushed}...{broken}"
    assert outcomes(report) == {"src-check": "failed/command_failed", "imports": "passed"}
    src_check = next(gate for gate in report["gates"] if gate["name"] == "src-check")
    assert "src/app/helper.py:1: error: BROKEN" in src_check["output_tail"]
    # The checkout is gone, and the work tree is as the user left it.
    assert worktrees(project) == [str(project.path)]
    assert project.git("status", "--porcelain") == "M  src/app/helper.py\n"
    assert "BROKEN" not in (project.path / "src/app/helper.py").read_text()

    # Committed, the fix is what is pushed: the work tree is the pushed commit, checked in place.
    project.git("commit", "-q", "--no-verify", "-am", "helper, fixed")
    done = push(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert FALLBACK_NOTE not in done.stdout + done.stderr
    assert head(remote, project.env, "main") == head(project.path, project.env)
    assert outcomes(read_report(project.report)) == {"src-check": "passed", "imports": "passed"}


def test_pre_push_with_an_untracked_file_checks_the_pushed_commit(
    project: Project, tmp_path: Path
) -> None:
    # The pushed commit imports a module that exists only as an untracked file.
    bare_remote(project, tmp_path)
    project.git("push", "-q", "--no-verify", "origin", "main")
    project.write("src/app/core.py", "from app.extra import more\n")
    project.git("commit", "-q", "--no-verify", "-am", "uses a module never added")
    project.write("src/app/extra.py", "more = 1\n")
    blocked = push(project)
    output = blocked.stdout + blocked.stderr
    assert blocked.returncode != 0, output
    assert FALLBACK_NOTE in output
    assert "src/app/core.py: imports app.extra, which does not exist" in output
    assert worktrees(project) == [str(project.path)]
    assert (project.path / "src/app/extra.py").read_text() == "more = 1\n"


def test_pre_push_of_a_commit_whose_contract_is_broken_is_blocked(
    project: Project, tmp_path: Path
) -> None:
    bare_remote(project, tmp_path)
    project.git("push", "-q", "--no-verify", "origin", "main")
    good = (project.path / "verify.toml").read_text()
    project.write("verify.toml", good + "[[gate]]\nname = \"x\"\n")  # no command
    project.git("commit", "-q", "--no-verify", "-am", "contract, broken")
    project.write("verify.toml", good)
    project.git("add", "verify.toml")
    blocked = push(project)
    output = blocked.stdout + blocked.stderr
    assert blocked.returncode != 0, output
    assert "verify.toml: gate 'x': key 'command': is required" in output
    assert worktrees(project) == [str(project.path)]


def push_environment(project: Project, from_ref: str) -> dict[str, str]:
    """What pre-commit's pre-push stage gives a hook, for running verifygate directly."""
    return {**project.env, "PRE_COMMIT": "1", "PRE_COMMIT_FROM_REF": from_ref,
            "PRE_COMMIT_TO_REF": head(project.path, project.env)}


def test_checks_of_a_pushed_commit_reuse_cached_passes_and_keep_their_logs(
    project: Project,
) -> None:
    base = head(project.path, project.env)
    project.write("verify.toml", VERIFY_TOML.replace("[settings]\n", "[settings]\ncache = true\n"))
    project.write("src/app/helper.py", "def double(x):\n    return x + x\n")
    project.git("commit", "-q", "--no-verify", "-am", "cache the gates")
    project.write("scratch.txt", "notes\n")  # untracked: the pushed commit is checked apart
    env = push_environment(project, base)
    command = [str(VERIFYGATE), "run", "--json", "report.json"]
    first = run(command, project.path, env)
    assert FALLBACK_NOTE in first.stderr
    report = json.loads((project.path / "report.json").read_text())
    assert {gate["name"]: gate["cached"] for gate in report["gates"]} == {
        "src-check": False, "imports": False}
    (project.path / "report.json").unlink()
    for gate in report["gates"]:
        assert Path(gate["log_path"]).is_file()  # under the repository's own git dir
        assert Path(gate["log_path"]).is_relative_to(project.path / ".git")

    second = run(command, project.path, env)
    assert FALLBACK_NOTE in second.stderr
    report = json.loads((project.path / "report.json").read_text())
    assert {gate["name"]: gate["cached"] for gate in report["gates"]} == {
        "src-check": True, "imports": True}
    assert worktrees(project) == [str(project.path)]


SLOW_GATE = """\
[[gate]]
name = "slow"
command = "python tools/slow.py"
"""
SLOW_PY = """\
import os, sys, time
with open(os.environ["STARTED_FILE"] + ".new", "w") as started:  # where the gate runs
    started.write(os.getcwd())
os.replace(os.environ["STARTED_FILE"] + ".new", os.environ["STARTED_FILE"])
time.sleep(120)
"""


def start_slow_check(project: Project, tmp_path: Path) -> subprocess.Popen[str]:
    """``verifygate run`` on a pushed commit whose one gate runs until it is killed, with an
    untracked file set aside meanwhile."""
    base = head(project.path, project.env)
    project.write("verify.toml", SLOW_GATE)
    project.write("tools/slow.py", SLOW_PY)
    project.git("add", "-A")
    project.git("commit", "-q", "--no-verify", "-m", "a slow gate")
    project.write("scratch.txt", "notes\n")
    started = tmp_path / "started"
    env = {**push_environment(project, base), "STARTED_FILE": str(started)}
    process = subprocess.Popen([str(VERIFYGATE), "run"], cwd=project.path, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the gate never started"
        time.sleep(0.05)
    assert Path(started.read_text()) == project.path  # in place, in the user's work tree
    assert not (project.path / "scratch.txt").exists()  # not in the pushed commit: aside
    return process


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_check_of_a_pushed_commit_puts_back_what_it_set_aside(
    project: Project, tmp_path: Path, signum: int
) -> None:
    process = start_slow_check(project, tmp_path)
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    assert "Traceback" not in err
    assert (project.path / "scratch.txt").read_text() == "notes\n"
    assert project.git("status", "--porcelain") == "?? scratch.txt\n"


def test_what_a_killed_check_set_aside_is_put_back_by_the_next_run(
    project: Project, tmp_path: Path
) -> None:
    process = start_slow_check(project, tmp_path)
    os.killpg(process.pid, signal.SIGKILL)  # verifygate and its gate: nothing can clean up
    process.communicate(timeout=60)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    assert not (project.path / "scratch.txt").exists()

    done = run([str(VERIFYGATE), "run", "--all"], project.path, project.env, check=False)
    assert ("verifygate: putting back what a killed run (pid "
            f"{process.pid}) had set aside: 1 file(s)") in done.stderr
    assert (project.path / "scratch.txt").read_text() == "notes\n"
    assert project.git("status", "--porcelain") == "?? scratch.txt\n"


def test_reports_written_in_the_work_tree_are_not_differences(project: Project) -> None:
    base = head(project.path, project.env)
    project.write("docs/guide.md", "# Guide\n\nMore.\n")
    project.git("commit", "-q", "--no-verify", "-am", "docs")
    command = [str(VERIFYGATE), "run", "--json", "report.json", "--junit", "junit.xml"]
    env = push_environment(project, base)
    project.write("report.json", "stale\n")  # this run's report, for now an old one
    for _ in range(2):  # the second run finds the first one's reports, untracked
        done = run(command, project.path, env)
        assert FALLBACK_NOTE not in done.stderr
        assert json.loads((project.path / "report.json").read_text())["verdict"] == "passed"
    assert project.git("status", "--porcelain") == "?? junit.xml\n?? report.json\n"


def test_first_push_checks_the_pushed_commit_not_a_staged_fix(
    project: Project, tmp_path: Path
) -> None:
    remote = bare_remote(project, tmp_path)
    project.write("src/app/helper.py", "def double(x):\n    return 2 * x  # BROKEN\n")
    project.git("commit", "-q", "--no-verify", "-am", "helper, broken")
    broken = head(project.path, project.env)
    project.write("src/app/helper.py", "def double(x):\n    return x + x\n")
    project.git("add", "src/app/helper.py")
    blocked = push(project)
    output = blocked.stdout + blocked.stderr
    assert blocked.returncode != 0, output
    assert push_note(broken) in output
    assert read_report(project.report)["changes"]["source"] == "all"
    assert "main" not in project.git("ls-remote", str(remote))
    assert worktrees(project) == [str(project.path)]


def test_a_named_contract_is_read_from_the_pushed_commit(project: Project) -> None:
    base = head(project.path, project.env)
    good = (project.path / "verify.toml").read_text()
    project.write("verify.toml", good + "[[gate]]\nname = \"x\"\n")  # no command
    project.git("commit", "-q", "--no-verify", "-am", "contract, broken")
    project.write("verify.toml", good)
    env = push_environment(project, base)
    for named in ("verify.toml", str(project.path / "verify.toml")):
        done = run([str(VERIFYGATE), "run", "--contract", named], project.path, env,
                   check=False)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "gate 'x': key 'command': is required" in done.stderr
        assert (project.path / "verify.toml").read_text() == good  # the fix is back
        # ``list`` never moves a file: it reads the work tree's contract.
        listed = run([str(VERIFYGATE), "list", "--contract", named], project.path, env,
                     check=False)
        assert listed.returncode == 0, listed.stdout + listed.stderr
