"""openTiger's own test suite, case by case, against ``.opentiger/verify.contract.json`` as
read and run here.

Each case names the upstream test (``Andyyyy64/openTiger``, file:line), restates its facts and
runs them through the real ``verifygate`` command in a real git repository. Where the upstream
test hands a tool's output to the classifier as a string, a stand-in program named like the
tool prints that output; real ``npm`` and ``make`` are used where they are installed. A case
either agrees, or differs deliberately: the README's "Differences from the home systems"
table says why, and the test asserts our side. What is out of scope is listed in
``OUT_OF_SCOPE``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from conftest import git, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

WORKER = "apps/worker/test"
SKIPS = f"{WORKER}/verify-missing-script-skip.test.ts"
EXPANSION = f"{WORKER}/verify-command-expansion.test.ts"
FILTER = f"{WORKER}/verify-auto-command-filter.test.ts"
CORE = "packages/core/test/failure-classifier.test.ts"
CYCLE = "apps/cycle-manager/test/failure-classifier.test.ts"

OUT_OF_SCOPE = {
    f"{WORKER}/verify-auto-commands.test.ts:115-:169": "commands written by an LLM (llm, "
    "reconcile and fallback modes): the contract is the only source of gates here",
    "apps/planner/test/planner-verification.test.ts:150-:189": "the planner's LLM commands",
    f"{SKIPS}:526-:546": "narrowing a failed recursive pnpm/npm command for an LLM retry",
    f"{WORKER}/verify-inline-recovery.test.ts": "in-process LLM recovery",
    f"{WORKER}/worker-runner-utils.test.ts": "whether to attempt LLM recovery, and its hints",
    f"{WORKER}/verify-paths.test.ts, {WORKER}/worker-runner-verification.test.ts": "which "
    "changed files the worker discards as generated artifacts (its change policy)",
    f"{CORE}:60-:119, {CYCLE}:88-:170, apps/api/test/tasks-retry-classifier.test.ts": "the "
    "orchestrator's categories for non-verification failures (permissions, branch "
    "divergence, policy violations, model errors) and its error metadata",
}


def contract(root: Path, data: dict[str, Any]) -> None:
    write(root / ".opentiger" / "verify.contract.json", json.dumps(data))


def selected(root: Path, *args: str) -> list[str]:
    done = verifygate("list", "--format", "json", *args, cwd=root)
    assert done.returncode == 0, done.stderr
    return [gate["name"] for gate in json.loads(done.stdout)["gates"] if gate["selected"]]


def run_report(root: Path, *args: str, path: str | None = None) -> dict[str, Any]:
    out = root.parent / "report.json"
    verifygate("run", "--json", str(out), *args, cwd=root, timeout=300,
               env=None if path is None else {"PATH": path})
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {gate["name"]: gate for gate in report["gates"]}


# --------------------------------------------------------------------------------------------
# the contract: which commands apply


def test_contract_commands_for_the_role_and_the_changed_files(repo: Path) -> None:
    """Agree with verify-auto-commands.test.ts:86 and planner-verification.test.ts:118: the
    commands for everyone, then the role's, then each matching rule's, in that order."""
    contract(repo, {"commands": ["runner verify:root"],
                    "byRole": {"worker": ["runner verify:worker"]},
                    "rules": [{"whenChangedAny": ["apps/api/**"],
                               "commands": ["runner verify:api"]}]})
    write(repo / "apps" / "api" / "src" / "index.ts", "export {};\n")
    assert selected(repo, "--role", "worker", "--files", "apps/api/src/index.ts") == [
        "runner verify:root", "runner verify:worker", "runner verify:api"]


# --------------------------------------------------------------------------------------------
# the command parser and runner


def test_parser_quoting(repo: Path) -> None:
    """Agree with command-parser.test.ts:5, :15 and :25: inside double quotes a backslash stays
    before ``[`` and other ordinary characters, and escapes ``$``."""
    write(repo / "build" / "boot_smoke.log", "[boot] kernel entry\n")
    contract(repo, {"commands": ['grep -q "\\[boot\\] kernel entry" build/boot_smoke.log',
                                'echo "a\\[b"', 'echo "a\\$b"']})
    gates = run_report(repo, "--all")["gates"]
    assert [gate["outcome"] for gate in gates] == ["passed"] * 3, gates
    assert gates[0]["command"][2] == "\\[boot\\] kernel entry"
    assert gates[1]["output_tail"] == "a\\[b\n"
    assert gates[2]["output_tail"] == "a$b\n"


def test_shell_builtins_fail_with_a_clear_message(repo: Path) -> None:
    """Agree with command-runner-builtins.test.ts:5 and verify-missing-script-skip.test.ts:457:
    a shell builtin fails at once, ``unsupported_format``, with a message naming it."""
    contract(repo, {"commands": ["source .env"]})
    (gate,) = run_report(repo, "--all")["gates"]
    assert (gate["outcome"], gate["code"]) == ("failed", "unsupported_format")
    assert "'source' is a shell builtin" in gate["output_tail"]


def test_path_prefers_the_projects_own_node_modules(repo: Path, tmp_path: Path) -> None:
    """Agree with command-runner-path.test.ts:6, :16 and :31: a command finds the gate
    directory's ``node_modules/.bin`` first, and not another project's."""
    tool = write(repo / "node_modules" / ".bin" / "localtool", "#!/bin/sh\necho local\n")
    other = write(tmp_path / "elsewhere" / "node_modules" / ".bin" / "othertool",
                  "#!/bin/sh\necho other\n")
    tool.chmod(0o755)
    other.chmod(0o755)
    contract(repo, {"commands": ["localtool", "othertool"]})
    path = os.pathsep.join([str(other.parent), os.environ["PATH"]])
    gates = by_name(run_report(repo, "--all", path=path))
    assert (gates["localtool"]["outcome"], gates["localtool"]["output_tail"]) == (
        "passed", "local\n")
    assert (gates["othertool"]["outcome"], gates["othertool"]["code"]) == (
        "failed", "setup_or_bootstrap_issue")


# --------------------------------------------------------------------------------------------
# chained commands


def test_chained_cd_sets_the_directory_of_the_rest(repo: Path) -> None:
    """Agree with verify-command-expansion.test.ts:6: ``cd packages/db && X`` runs X there."""
    write(repo / "packages" / "db" / "schema.sql", "")
    contract(repo, {"commands": ["cd packages/db && pnpm exec drizzle-kit generate"]})
    assert selected(repo, "--all") == ["pnpm exec drizzle-kit generate"]
    contract(repo, {"commands": ["cd packages/db && ls"]})
    (gate,) = run_report(repo, "--all")["gates"]
    assert (gate["name"], gate["cwd"], gate["output_tail"]) == ("ls", "packages/db",
                                                                "schema.sql\n")


def test_chained_commands_run_as_one_gate_each(repo: Path) -> None:
    """Agree with verify-command-expansion.test.ts:22: ``A && B`` is A then B, in the root."""
    contract(repo, {"commands": ["pnpm run build && pnpm run test"]})
    assert selected(repo, "--all") == ["pnpm run build", "pnpm run test"]
    contract(repo, {"commands": ['echo one && echo "two && three"']})
    gates = run_report(repo, "--all")["gates"]
    assert [(g["cwd"], g["output_tail"]) for g in gates] == [(".", "one\n"),
                                                             (".", "two && three\n")]


def test_cd_out_of_the_project_is_not_followed(repo: Path) -> None:
    """Agree with verify-command-expansion.test.ts:35: ``cd ..`` is not applied; it stays a
    command (which fails as the builtin it is) and the rest runs in the root."""
    contract(repo, {"commands": ["cd .. && pnpm run test"]})
    assert selected(repo, "--all") == ["cd ..", "pnpm run test"]
    contract(repo, {"commands": ["cd .. && pwd"]})
    gates = by_name(run_report(repo, "--all"))
    assert (gates["cd .."]["outcome"], gates["cd .."]["code"]) == ("failed",
                                                                    "unsupported_format")
    assert gates["pwd"]["output_tail"].strip() == str(repo.resolve())


def test_a_cd_never_reaches_another_command(repo: Path) -> None:
    """Differs deliberately from verify-command-expansion.test.ts:48 (a standalone ``cd`` moves
    the later commands): a gate's directory must not depend on which other gates a role or a
    rule selected, so a standalone ``cd`` is a gate that fails (``unsupported_format``) and
    the next command runs in the root. :67 (no cd leaks from explicit to auto commands)
    agrees: here no cd leaks anywhere."""
    write(repo / "packages" / "db" / "x", "")
    contract(repo, {"commands": ["cd packages/db", "pwd"]})
    gates = by_name(run_report(repo, "--all"))
    assert (gates["cd packages/db"]["outcome"], gates["cd packages/db"]["code"]) == (
        "failed", "unsupported_format")
    assert gates["pwd"]["output_tail"].strip() == str(repo.resolve())


# --------------------------------------------------------------------------------------------
# the auto-command filter


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_commands_are_never_dropped(repo: Path) -> None:
    """FILTER:27 drops ``make test`` when the Makefile has no such target: differs
    deliberately (a command is never dropped silently; it fails ``missing_make_target``).
    FILTER:38 (other commands kept) and FILTER:48 (kept when the Makefile cannot say) agree."""
    write(repo / "Makefile", "all:\n\t@echo ok\nlint:\n\t@echo lint\n")
    contract(repo, {"commands": ["make", "make lint", "make test"]})
    gates = by_name(run_report(repo, "--all"))
    assert [gates[name]["outcome"] for name in ("make", "make lint")] == ["passed", "passed"]
    assert (gates["make test"]["outcome"], gates["make test"]["code"]) == (
        "failed", "missing_make_target")
    contract(repo, {"commands": ["pnpm run check", "test -f build/kernel.elf"]})
    assert selected(repo, "--all") == ["pnpm run check", "test -f build/kernel.elf"]
    write(repo / "Makefile", "")
    contract(repo, {"commands": ["make test"]})
    assert selected(repo, "--all") == ["make test"]


# --------------------------------------------------------------------------------------------
# failure codes


class Coded(NamedTuple):
    upstream: str
    case: str  # the stand-in's output file, and the gate's CASE variable
    command: str  # what the gate runs (a stand-in named like the tool)
    output: str  # what the stand-in prints (the upstream test's string)
    code: str


STANDIN = """#!/usr/bin/env python3
import os, sys
sys.stderr.write(open(os.path.join(os.environ["OUTPUTS"], os.environ["CASE"])).read())
sys.exit(1)
"""
WEB = "pnpm --filter @flowprocure/web run"

CODED = [
    Coded(f"{SKIPS}:391", "missing-package", f"{WEB} test",
          "failed to load config from /tmp/repo/apps/web/vitest.config.ts\nError "
          "[ERR_MODULE_NOT_FOUND]: Cannot find package 'vitest' imported from /tmp/repo/apps/"
          "web/node_modules/.vite-temp/vitest.config.ts.mjs\n", "setup_or_bootstrap_issue"),
    Coded(f"{SKIPS}:408", "local-module", f"{WEB} typecheck",
          "error TS2307: Cannot find module './request-utils' or its corresponding type "
          "declarations.\n", "command_failed"),
    Coded(f"{SKIPS}:425", "missing-dependency", f"{WEB} test",
          "MISSING DEPENDENCY  Cannot find dependency 'jsdom'\n", "setup_or_bootstrap_issue"),
    Coded(f"{SKIPS}:441", "not-found", f"{WEB} test",
          "sh: 1: vitest: not found\nspawn ENOENT\n", "setup_or_bootstrap_issue"),
    Coded(f"{SKIPS}:474", "no-test-files", "pnpm run test",
          "No test files found, exiting with code 1\n", "no_test_files"),
    Coded(f"{SKIPS}:490", "engine", f"{WEB} test",
          "Error: require() of ES Module /tmp/repo/node_modules/.pnpm/@exodus+bytes/"
          "node_modules/@exodus/bytes/encoding-lite.js not supported.\ncode: "
          "\"ERR_REQUIRE_ESM\"\nunsupported engine wanted: {\"node\":\">=20.0.0\"}\n",
          "setup_or_bootstrap_issue"),
    Coded(f"{SKIPS}:507", "app-esm", f"{WEB} test",
          "Error [ERR_REQUIRE_ESM]: Must use import to load ES Module: /tmp/repo/src/utils/"
          "test-helper.ts\n", "command_failed"),
    Coded(f"{CORE}:82 and {CYCLE}:114", "pnpm-no-script", "pnpm run verify",
          "ERR_PNPM_NO_SCRIPT Missing script: verify\n", "missing_script"),
    Coded(f"{CORE}:92 and {CYCLE}:138", "vitest-none", "pnpm run unit",
          "No test files found, exiting with code 1\n", "no_test_files"),
    Coded(f"{SKIPS}:203", "recursive-typecheck", "pnpm -r run typecheck",
          "apps/web typecheck: src/api/client.ts(2,15): error TS2339: Property 'env' does not "
          "exist on type 'ImportMeta'.\n", "command_failed"),
    Coded(f"{SKIPS}:328", "unknown", "pnpm run test:unknown",
          "Unexpected framework failure signature\n", "command_failed"),
]


@pytest.fixture(scope="module")
def coded_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every ``CODED`` case as one gate of one openTiger contract, run once."""
    root = tmp_path_factory.mktemp("opentiger") / "repo"
    outputs, bin_dir = root.parent / "outputs", root.parent / "standins"
    root.mkdir()
    git(root, "init", "-q")
    for case in CODED:
        write(outputs / case.case, case.output)
    write(bin_dir / "pnpm", STANDIN).chmod(0o755)
    contract(root, {"commands": [f"OUTPUTS={outputs} CASE={case.case} {case.command}"
                                 for case in CODED]})
    path = os.pathsep.join([str(bin_dir), os.environ["PATH"]])
    gates = run_report(root, "--all", path=path)["gates"]
    return {case.case: gate for case, gate in zip(CODED, gates, strict=True)}


@pytest.mark.parametrize("case", CODED, ids=[case.case for case in CODED])
def test_failure_codes(case: Coded, coded_run: dict[str, dict[str, Any]]) -> None:
    """Agree: the same output of the same tool gets the code openTiger gives it."""
    gate = coded_run[case.case]
    assert (gate["outcome"], gate["code"]) == ("failed", case.code), (case.upstream, gate)


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_npm_missing_script_and_missing_manifest(repo: Path) -> None:
    """Agree with SKIPS:34's output (``npm error Missing script: "dev"``, missing_script) and
    SKIPS:233's (npm cannot read package.json: no script can exist, missing_script), from
    real npm."""
    write(repo / "package.json", json.dumps({"name": "x", "version": "1.0.0", "scripts": {}}))
    (repo / "nopkg").mkdir()
    contract(repo, {"commands": ["npm run dev", "cd nopkg && npm run build"]})
    gates = by_name(run_report(repo, "--all"))
    assert (gates["npm run dev"]["code"], gates["npm run build"]["code"]) == (
        "missing_script", "missing_script"), gates


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_sequence_issue_is_a_silent_artifact_check_after_a_clean(repo: Path) -> None:
    """Agree with openTiger's worker rule (the code behind CYCLE:55 and CYCLE:125): ``test -f``
    of a build output that fails silently right after a clean step is ``sequence_issue``;
    without the clean before it, or for a path that is no build output, it is an ordinary
    failure."""
    write(repo / "Makefile", "clean:\n\t@rm -rf build\n")
    contract(repo, {"commands": ["make clean", "test -f build/kernel.elf"]})
    gates = by_name(run_report(repo, "--all"))
    assert gates["test -f build/kernel.elf"]["code"] == "sequence_issue"
    contract(repo, {"commands": ["true", "test -f build/kernel.elf"]})
    assert by_name(run_report(repo, "--all"))["test -f build/kernel.elf"]["code"] == (
        "command_failed")
    contract(repo, {"commands": ["make clean", "test -f src/kernel.c"]})
    assert by_name(run_report(repo, "--all"))["test -f src/kernel.c"]["code"] == (
        "command_failed")


@pytest.mark.skipif(shutil.which("npm") is None or shutil.which("make") is None,
                    reason="npm and make are needed")
def test_which_codes_are_retried(repo: Path) -> None:
    """Agree with CORE:12, :24, :36, :48 and CYCLE:5, :18, :29, :42, :55, :66, :77 on what a
    retry can change: a command's own failure and a setup problem are retried; an unsupported
    format, a missing script or target, no test files and a sequence issue are not."""
    write(repo / "Makefile", "clean:\n\t@true\n")
    write(repo / "package.json", json.dumps({"name": "x", "version": "1.0.0", "scripts": {}}))
    write(repo / "verify.toml", """
[settings]
jobs = 1

[[gate]]
name = "fails"
command = "false"
retries = 2

[[gate]]
name = "setup"
command = "no-such-program-here"
retries = 2

[[gate]]
name = "format"
command = "source .env"
retries = 2

[[gate]]
name = "target"
command = "make nosuch"
retries = 2

[[gate]]
name = "script"
command = "npm run nosuch"
retries = 2

[[gate]]
name = "clean"
command = "make clean"

[[gate]]
name = "artifact"
command = "test -f build/kernel.elf"
retries = 2
""")
    gates = by_name(run_report(repo, "--all"))
    codes = {name: (gate["code"], gate["attempts"]) for name, gate in gates.items()}
    assert codes["fails"] == ("command_failed", 3)
    assert codes["setup"] == ("setup_or_bootstrap_issue", 3)
    assert codes["format"][0] == "unsupported_format" and codes["format"][1] <= 1
    assert codes["target"] == ("missing_make_target", 1)
    assert codes["script"] == ("missing_script", 1)
    assert codes["artifact"] == ("sequence_issue", 1)


def test_a_signature_starts_from_the_failure_code() -> None:
    """Agree with CORE:121 (the normalised signature carries the failure code): the same
    output with another code is another failure; numbers alone do not make one."""
    from pytest_verifygate.report.digest import failure_signature

    def one(code: str, output: str) -> dict[str, Any]:
        return {"verdict": "failed", "gates": [{"name": "t", "outcome": "failed",
                                                 "code": code, "output_tail": output}]}

    assert failure_signature(one("command_failed", "took 12 ms")) == failure_signature(
        one("command_failed", "took 95 ms"))
    assert failure_signature(one("command_failed", "x")) != failure_signature(
        one("setup_or_bootstrap_issue", "x"))


# --------------------------------------------------------------------------------------------
# skipping a failure: openTiger's policy, and ours


class Skip(NamedTuple):
    upstream: str
    upstream_skips: bool
    commands: list[str]
    changed: str  # the change set: a doc-only change or source


SKIP_CASES = [
    Skip(f"{SKIPS}:34", True, ["npm run dev", "true"], "src/a.ts"),
    Skip(f"{SKIPS}:48", True, ["npm run dev"], "README.md"),
    Skip(f"{SKIPS}:62", False, ["npm run dev"], "src/a.ts"),
    Skip(f"{SKIPS}:76", False, ["npm run dev", "true"], "README.md"),  # skipping switched off
    Skip(f"{SKIPS}:91", True, ["npm run dev"], "README.md"),  # a change with no effect
    Skip(f"{SKIPS}:105", True, ["make test", "true"], "src/a.ts"),
    Skip(f"{SKIPS}:119", True, ["file kernel/kernel.elf | grep -q riscv", "true"], "src/a.ts"),
    Skip(f"{SKIPS}:133", True, ["source .env", "true"], "src/a.ts"),
    Skip(f"{SKIPS}:147", True, ['test -z "$(git ls-files tests/test_runner)"', "true"],
         "src/a.ts"),
    Skip(f"{SKIPS}:161", False, ["file kernel/kernel.elf | grep -q riscv"], "src/a.ts"),
    Skip(f"{SKIPS}:175", False, ['test -z "$(git ls-files tests/test_runner)"'], "src/a.ts"),
    Skip(f"{SKIPS}:189", True, ["true", "timeout 5 scripts/qemu-run.sh | grep -q boot"],
         "src/a.ts"),
    # A failing recursive typecheck (``false`` stands in for it) after another check passed.
    Skip(f"{SKIPS}:203", True, ["true", "false"], "src/a.ts"),
    Skip(f"{SKIPS}:218", False, ["false"], "src/a.ts"),
    Skip(f"{SKIPS}:233", True, ["cd nopkg && npm run dev"], "README.md"),
    Skip(f"{SKIPS}:253", True, ["true", "make test"], "src/a.ts"),
    Skip(f"{SKIPS}:268", True, ["npm run verify", "true"], "src/a.ts"),
    Skip(f"{SKIPS}:283", False, ["make test"], "src/a.ts"),
    Skip(f"{SKIPS}:298", True, ["true", "npm test -- --no-tests-found"], "src/a.ts"),
    Skip(f"{SKIPS}:313", False, ["npm test -- --no-tests-found"], "src/a.ts"),
    Skip(f"{SKIPS}:328", True, ["true", "false"], "src/a.ts"),  # after an explicit pass
    Skip(f"{SKIPS}:343", True, ["true", "false"], "src/a.ts"),
    Skip(f"{SKIPS}:358", False, ["false"], "src/a.ts"),
    Skip(f"{SKIPS}:373", False, ["true", "false"], "src/a.ts"),  # skipping switched off
]


@pytest.mark.skipif(shutil.which("npm") is None or shutil.which("make") is None,
                    reason="npm and make are needed")
@pytest.mark.parametrize("case", SKIP_CASES, ids=[c.upstream.split(":")[-1] for c in SKIP_CASES])
def test_a_failing_command_is_never_skipped(repo: Path, case: Skip) -> None:
    """openTiger skips some failing commands when other verification remains or passed, or the
    change touches only docs; where it does (``upstream_skips``) we differ deliberately: a
    contract must not weaken itself, so the command fails and so does the verdict. Where it
    does not, we agree."""
    write(repo / "package.json", json.dumps({"name": "x", "version": "1.0.0", "scripts": {
        "test": "echo 'No test files found, exiting with code 1' && exit 1"}}))
    write(repo / "Makefile", "all:\n\t@true\n")
    (repo / "nopkg").mkdir()
    contract(repo, {"commands": case.commands})
    write(repo / case.changed, "x\n")
    result = run_report(repo, "--files", case.changed)
    failing = [gate for gate in result["gates"] if gate["outcome"] == "failed"]
    assert result["verdict"] == "failed" and len(failing) == 1, (case.upstream, result)
    assert not any(gate["outcome"] == "skipped" for gate in result["gates"])
