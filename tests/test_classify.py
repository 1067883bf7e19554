"""The failure-classification corpus.

Real output first: every tool installed here runs for real, as a gate of one contract, through
the same path the CLI takes (load the contract, compute the change set, select, run), so each
case proves the code a user would see end to end. Tools that are not installed are covered by
fixed strings copied from their messages and fed straight to ``classify``.

Every case also checks that the output really contains the message it is about, so a case
cannot pass because a tool printed something else.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_verifygate import classify
from pytest_verifygate.ansi import plain_output, strip_ansi
from pytest_verifygate.classify import Failure
from pytest_verifygate.codes import (
    CODES,
    COMMAND_FAILED,
    INTERRUPTED,
    MISSING_CODES,
    MISSING_MAKE_TARGET,
    MISSING_SCRIPT,
    NO_TEST_FILES,
    NOT_RETRIED,
    SEQUENCE_ISSUE,
    SETUP_OR_BOOTSTRAP_ISSUE,
    TIMEOUT,
    UNSUPPORTED_FORMAT,
)
from pytest_verifygate.contract import load_contract
from pytest_verifygate.engine import run_gates
from pytest_verifygate.git.changes import ChangeRequest, compute_changes
from pytest_verifygate.runner.records import GateResult
from pytest_verifygate.selection import select_gates

PY = sys.executable
PYTEST = (PY, "-m", "pytest", "-p", "no:cacheprovider")
SETUP = SETUP_OR_BOOTSTRAP_ISSUE


def package_json(scripts: Mapping[str, str], **extra: object) -> str:
    return json.dumps({"name": "corpus", "version": "1.0.0", "scripts": dict(scripts), **extra})


MAKEFILE = (
    "all:\n\t@echo all\n"
    "build: missing.c\n\tcc -o build missing.c\n"
    "recurse:\n\t$(MAKE) -C sub nosuch\n"
    "lint:\n\tfalse\n"
    "tool:\n\tnosuchtool-xyz --version\n"
)
SUB_MAKEFILE = "x:\n\ttrue\n"

# Failing tests whose messages, diffs and printed output quote other tools' messages as text.
PYTEST_TEXT_IN_FAILURES = '''\
import logging


def test_assertion_message():
    assert False, "no tests found\\nnot found\\nModuleNotFoundError: No module named 'x'"


def test_diff():
    common = "No tests found, exiting with code 1\\nModuleNotFoundError: No module named 'x'\\n"
    assert common + "a" == common + "b"


def test_printed_and_logged():
    print('npm error Missing script: "lint"')
    print("make: *** No rule to make target 'lint'.  Stop.")
    print("sh: 1: vitest: not found")
    logging.warning("ModuleNotFoundError: No module named 'requests'")
    assert 0
'''

PYTEST_IMPORT_IN_TEST = '''\
def test_uses_a_dependency():
    if True:
        import nonexistent_pkg_xyz  # noqa: F401
'''


@dataclass(frozen=True)
class RealCase:
    """A gate that runs a real tool; ``shows`` must be in its (ANSI-stripped) output."""

    name: str
    tool: str | None  # the program that must be installed; None: nothing
    command: tuple[str, ...] | str
    expected: str
    shows: str
    files: Mapping[str, str] = field(default_factory=dict)
    shell: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    outcome: str = "failed"
    coloured: bool = False
    on_missing: str = "fail"


REAL_CASES = (
    # npm 11
    RealCase("npm-missing-script", "npm", ("npm", "run", "nosuch"), MISSING_SCRIPT,
             'npm error Missing script: "nosuch"',
             {"package.json": package_json({"build": "node -e 0"})}),
    RealCase("npm-missing-script-colour", "npm", ("npm", "run", "nosuch", "--color=always"),
             MISSING_SCRIPT, 'npm error Missing script: "nosuch"',
             {"package.json": package_json({"build": "node -e 0"})}, coloured=True),
    RealCase("npm-test-undefined", "npm", ("npm", "test"), MISSING_SCRIPT,
             'Missing script: "test"', {"package.json": package_json({})}),
    RealCase("npm-t-alias", "npm", ("npm", "t"), MISSING_SCRIPT,
             'Missing script: "test"', {"package.json": package_json({})}),
    RealCase("npm-workspaces-missing-script", "npm", ("npm", "run", "nosuch", "--workspaces"),
             MISSING_SCRIPT, 'Missing script: "nosuch"',
             {"package.json": json.dumps({"name": "ws", "private": True,
                                          "workspaces": ["packages/*"]}),
              "packages/a/package.json": package_json({})}),
    RealCase("npm-stdout-and-stderr-merged", "npm", "echo building; npm run nosuch",
             MISSING_SCRIPT, 'building\n', {"package.json": package_json({})}, shell=True),
    RealCase("npm-skip-when-missing", "npm", ("npm", "run", "nosuch"), MISSING_SCRIPT,
             'Missing script: "nosuch"', {"package.json": package_json({})},
             outcome="skipped", on_missing="skip"),
    # The gate's own script exists; the script it runs does not: a broken script.
    RealCase("npm-nested-missing-script", "npm", ("npm", "run", "build"), COMMAND_FAILED,
             'npm error Missing script: "gone"',
             {"package.json": package_json({"build": "npm run gone"})}),
    RealCase("npm-script-fails", "npm", ("npm", "run", "lint"), COMMAND_FAILED,
             "lint: 3 problems not found",
             {"package.json": package_json(
                 {"lint": "node -e \"console.error('lint: 3 problems not found'); "
                          "process.exit(3)\""})}),
    RealCase("npm-script-tool-missing", "npm", ("npm", "test"), SETUP,
             "sh: 1: vitest: not found", {"package.json": package_json({"test": "vitest run"})}),
    RealCase("npm-no-package-json", "npm", ("npm", "run", "build"), MISSING_SCRIPT,
             "Could not read package.json"),
    RealCase("npm-unsupported-engine", "npm",
             ("npm", "install", "--engine-strict", "--offline", "--no-audit", "--no-fund"),
             SETUP, "npm error code EBADENGINE",
             {"package.json": package_json({}, engines={"node": ">=999"})}),
    RealCase("npx-no-executable", "npx", ("npx", "--offline", "nobin"), SETUP,
             "npm error could not determine executable to run",
             {"package.json": package_json({}, dependencies={"nobin": "1.0.0"}),
              "node_modules/nobin/package.json": json.dumps({"name": "nobin",
                                                            "version": "1.0.0"}),
              "node_modules/nobin/index.js": "module.exports = 1\n"}),
    RealCase("npm-test-runs-pytest-no-tests", "npm", ("npm", "test"), NO_TEST_FILES,
             "no tests ran in",
             {"package.json": package_json(
                 {"test": shlex.join((*PYTEST, "-q"))})}),
    # GNU make
    RealCase("make-missing-target", "make", ("make", "nosuch"), MISSING_MAKE_TARGET,
             "make: *** No rule to make target 'nosuch'.  Stop.", {"Makefile": MAKEFILE}),
    RealCase("make-no-makefile", "make", ("make",), MISSING_MAKE_TARGET,
             "No targets specified and no makefile found"),
    RealCase("make-no-makefile-for-target", "make", ("make", "test"), MISSING_MAKE_TARGET,
             "No rule to make target 'test'"),
    RealCase("make-missing-prerequisite", "make", ("make", "build"), COMMAND_FAILED,
             "No rule to make target 'missing.c', needed by 'build'.  Stop.",
             {"Makefile": MAKEFILE}),
    RealCase("make-sub-make-missing-target", "make", ("make", "recurse"), COMMAND_FAILED,
             "make[1]: *** No rule to make target 'nosuch'.  Stop.",
             {"Makefile": MAKEFILE, "sub/Makefile": SUB_MAKEFILE}),
    RealCase("make-recipe-fails", "make", ("make", "lint"), COMMAND_FAILED,
             "] Error 1", {"Makefile": MAKEFILE}),
    RealCase("make-recipe-tool-missing", "make", ("make", "tool"), SETUP, "] Error 127",
             {"Makefile": MAKEFILE}),
    RealCase("make-runs-pytest-no-tests", "make", ("make", "test"), NO_TEST_FILES,
             "no tests ran in",
             {"Makefile": f"test:\n\t{shlex.join((*PYTEST, '-q'))}\n"}),
    # pytest
    RealCase("pytest-no-tests", None, PYTEST, NO_TEST_FILES, "no tests ran in"),
    RealCase("pytest-no-tests-quiet", None, (*PYTEST, "-q"), NO_TEST_FILES, "no tests ran in"),
    RealCase("pytest-no-tests-colour", None, (*PYTEST, "--color=yes"), NO_TEST_FILES,
             "no tests ran", coloured=True),
    RealCase("pytest-all-deselected", None, (*PYTEST, "-q", "-k", "nomatch"), NO_TEST_FILES,
             "1 deselected in", {"test_a.py": "def test_a():\n    pass\n"}),
    RealCase("pytest-no-tests-via-sh", None, shlex.join(PYTEST), NO_TEST_FILES,
             "no tests ran in", shell=True),
    RealCase("pytest-text-in-failures", None, (*PYTEST, "-q"), COMMAND_FAILED,
             "E         ModuleNotFoundError: No module named 'x'",
             {"test_text.py": PYTEST_TEXT_IN_FAILURES}),
    RealCase("pytest-missing-dependency-at-collection", None, (*PYTEST, "-q"), SETUP,
             "E   ModuleNotFoundError: No module named 'nonexistent_pkg_xyz'",
             {"test_dep.py": "import nonexistent_pkg_xyz  # noqa: F401\n"}),
    RealCase("pytest-missing-dependency-in-test", None, (*PYTEST, "-q"), SETUP,
             "ModuleNotFoundError: No module named 'nonexistent_pkg_xyz'",
             {"test_dep.py": PYTEST_IMPORT_IN_TEST}),
    RealCase("pytest-local-submodule-missing", None, (*PYTEST, "-q"), COMMAND_FAILED,
             "No module named 'app.gone'",
             {"app/__init__.py": "", "tests/test_app.py": "import app.gone  # noqa: F401\n"}),
    RealCase("pytest-sibling-module-not-on-path", None,
             (*PYTEST, "-q", "--import-mode=importlib"), COMMAND_FAILED,
             "No module named 'helpers_local'",
             {"tests/helpers_local.py": "X = 1\n",
              "tests/test_h.py": "import helpers_local\n\n\ndef test_x():\n"
                                 "    assert helpers_local.X\n"}),
    RealCase("pytest-path-not-found", None, (*PYTEST, "-q", "tests/nope"), COMMAND_FAILED,
             "file or directory not found: tests/nope"),
    # python
    RealCase("python-missing-dependency", None, (PY, "-c", "import nonexistent_pkg_xyz"),
             SETUP, "ModuleNotFoundError: No module named 'nonexistent_pkg_xyz'"),
    RealCase("python-m-missing-dependency", None, (PY, "-m", "nonexistent_pkg_xyz"), SETUP,
             ": No module named nonexistent_pkg_xyz"),
    RealCase("python-local-submodule-missing", None, (PY, "-c", "import app.gone"),
             COMMAND_FAILED, "No module named 'app.gone'", {"app/__init__.py": ""}),
    RealCase("python-m-package-without-main", None, (PY, "-m", "app"), COMMAND_FAILED,
             "No module named app.__main__", {"app/__init__.py": ""}),
    RealCase("python-src-layout-not-installed", None, (PY, "-c", "import mypkg"), SETUP,
             "No module named 'mypkg'", {"src/mypkg/__init__.py": ""}),
    RealCase("python-missing-script-file", None, (PY, "nosuch.py"), COMMAND_FAILED,
             "can't open file"),
    # node 20
    RealCase("node-missing-package", "node", ("node", "-e", "require('left-pad-nonexistent')"),
             SETUP, "Error: Cannot find module 'left-pad-nonexistent'"),
    RealCase("node-missing-local-module", "node", ("node", "-e", "require('./local-missing')"),
             COMMAND_FAILED, "Error: Cannot find module './local-missing'"),
    RealCase("node-esm-missing-package", "node", ("node", "main.mjs"), SETUP,
             "Cannot find package 'left-pad-nonexistent'",
             {"main.mjs": "import pad from 'left-pad-nonexistent'\nconsole.log(pad)\n"}),
    RealCase("node-esm-missing-local-module", "node", ("node", "main.mjs"), COMMAND_FAILED,
             "Error [ERR_MODULE_NOT_FOUND]: Cannot find module",
             {"main.mjs": "import x from './nope.js'\nconsole.log(x)\n"}),
    RealCase("node-missing-entry-file", "node", ("node", "nosuchfile.js"), COMMAND_FAILED,
             "Error: Cannot find module '/"),
    RealCase("node-error-quoting-the-message", "node",
             ("node", "-e", "throw new Error(\"expected: Cannot find module 'lodash'\")"),
             COMMAND_FAILED, "Error: expected: Cannot find module 'lodash'"),
    # sh, env and programs that are not there
    RealCase("sh-command-not-found", "sh", "nosuchtool-xyz --version", SETUP,
             "nosuchtool-xyz: not found", shell=True),
    RealCase("spawn-program-not-found", None, ("nosuchtool-xyz", "--version"), SETUP,
             "program not found on PATH"),
    RealCase("env-program-not-found", "env", ("env", "nosuchtool-xyz"), SETUP,
             "No such file or directory"),
    RealCase("sh-not-executable", "sh", "./noexec.sh", SETUP, "Permission denied",
             {"noexec.sh": "echo hi\n"}, shell=True),
    RealCase("sh-says-not-found", "sh", "echo 'config key not found'; exit 1", COMMAND_FAILED,
             "config key not found", shell=True),
    # artifact checks
    # A silent artifact check is a sequence_issue only right after a clean step (openTiger's
    # rule, tests/test_home_opentiger.py); on its own it is an ordinary failure.
    RealCase("test-f-missing-artifact", "test", ("test", "-f", "dist/missing"), COMMAND_FAILED,
             ""),
    RealCase("bracket-s-missing-artifact", "sh", "[ -s build/out.bin ]", COMMAND_FAILED, "",
             shell=True),
    RealCase("test-comparison", "test", ("test", "1", "-eq", "2"), COMMAND_FAILED, ""),
    # cargo
    RealCase("cargo-no-such-command", "cargo", ("cargo", "nosuchcmd"), SETUP,
             "error: no such command: `nosuchcmd`"),
    RealCase("cargo-no-such-command-colour", "cargo", ("cargo", "nosuchcmd"), SETUP,
             "error: no such command: `nosuchcmd`", env={"CARGO_TERM_COLOR": "always"},
             coloured=True),
    RealCase("cargo-no-manifest", "cargo", ("cargo", "build", "--offline"), SETUP,
             "could not find `Cargo.toml`"),
)


def installed(tool: str | None) -> bool:
    return tool is None or shutil.which(tool) is not None


def toml_value(value: object) -> str:
    """A TOML literal: JSON strings are valid TOML basic strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        pairs = (f"{json.dumps(key)} = {toml_value(item)}" for key, item in value.items())
        return "{ " + ", ".join(pairs) + " }"
    raise TypeError(value)


def write_case(root: Path, case: RealCase) -> list[str]:
    cwd = root / case.name
    cwd.mkdir()
    for relative, text in case.files.items():
        path = cwd / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    lines = [
        "[[gate]]",
        f"name = {toml_value(case.name)}",
        f"command = {toml_value(case.command)}",
        f"cwd = {toml_value(case.name)}",
        "timeout_seconds = 120",
        f"on_missing = {toml_value(case.on_missing)}",
    ]
    if case.shell:
        lines.append("shell = true")
    if case.env:
        lines.append(f"env = {toml_value(case.env)}")
    return [*lines, ""]


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, GateResult]:
    """Every available real case as one gate of one contract, run once through the engine."""
    root = tmp_path_factory.mktemp("corpus")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    text = ["[settings]", "jobs = 2", ""]
    for case in REAL_CASES:
        if installed(case.tool):
            text += write_case(root, case)
    (root / "verify.toml").write_text("\n".join(text), encoding="utf-8")
    with pytest.MonkeyPatch.context() as env:
        # npm's cache and logs stay in the temporary directory; no network is needed.
        env.setenv("npm_config_cache", str(tmp_path_factory.mktemp("npm-cache")))
        env.setenv("npm_config_update_notifier", "false")
        # The child pytest runs see only pytest itself, whatever this session loaded.
        env.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        for name in ("PYTEST_ADDOPTS", "PYTHONPATH", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"):
            env.delenv(name, raising=False)
        contract = load_contract(root / "verify.toml")
        changes = compute_changes(contract.root, ChangeRequest(all=True))
        run = run_gates(contract, select_gates(contract, changes), changes, jobs=2)
    return {result.name: result for result in run.results}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            case,
            id=case.name,
            marks=pytest.mark.skipif(not installed(case.tool), reason=f"{case.tool} not installed"),
        )
        for case in REAL_CASES
    ],
)
@pytest.mark.slow
def test_real_tool_output(case: RealCase, corpus_run: dict[str, GateResult]) -> None:
    result = corpus_run[case.name]
    output = plain_output(result.output_tail)
    assert (result.outcome, result.code) == (case.outcome, case.expected), output
    assert case.shows in output
    if not case.shows:
        assert output == ""
    assert ("\x1b[" in result.output_tail) == case.coloured


@pytest.mark.slow
def test_skipped_gate_says_why(corpus_run: dict[str, GateResult]) -> None:
    if not installed("npm"):
        pytest.skip("npm not installed")
    result = corpus_run["npm-skip-when-missing"]
    assert result.reason == 'missing_script (on_missing = "skip")'


# --------------------------------------------------------------------------------------------
# fixed strings: tools that are not installed here, and older versions' wording


@dataclass(frozen=True)
class FixedCase:
    name: str
    argv: tuple[str, ...]
    exit_code: int | None
    output: str
    expected: str
    signal: int | None = None


FIXED_CASES = (
    # npm before 11
    FixedCase("npm7-10-missing-script", ("npm", "run", "lint"), 1,
              'npm ERR! Missing script: "lint"\nnpm ERR! \nnpm ERR! To see a list of scripts, '
              "run:\nnpm ERR!   npm run\n", MISSING_SCRIPT),
    FixedCase("npm6-missing-script", ("npm", "run", "lint"), 1,
              "npm ERR! missing script: lint\n\nnpm ERR! A complete log of this run can be "
              "found in:\n", MISSING_SCRIPT),
    FixedCase("npm-crlf", ("npm", "run", "lint"), 1,
              'npm error Missing script: "lint"\r\nnpm error\r\n', MISSING_SCRIPT),
    FixedCase("npm-script-name-from-a-variable", ("/bin/sh", "-c", "npm run $TASK"), 1,
              'npm error Missing script: "lint"\n', MISSING_SCRIPT),
    # pnpm (colours its error code with a red background)
    FixedCase("pnpm-missing-script", ("pnpm", "run", "lint"), 1,
              "\x1b[41m\x1b[30m ERR_PNPM_NO_SCRIPT \x1b[39m\x1b[49m Missing script: lint\n\n"
              'Command "lint" not found.\n', MISSING_SCRIPT),
    FixedCase("pnpm-missing-start", ("pnpm", "start"), 1,
              " ERR_PNPM_NO_SCRIPT_OR_SERVER  Missing script start or file server.js\n",
              MISSING_SCRIPT),
    FixedCase("pnpm-recursive-missing-script", ("pnpm", "-r", "run", "build"), 1,
              ' ERR_PNPM_RECURSIVE_RUN_NO_SCRIPT  None of the selected packages has a "build" '
              "script\n", MISSING_SCRIPT),
    FixedCase("pnpm-nested-missing-script", ("pnpm", "run", "build:all"), 1,
              "> app@1.0.0 build:all /repo\n> pnpm run build --r\n\n"
              " ERR_PNPM_NO_SCRIPT  Missing script: build\n"
              " ELIFECYCLE  Command failed with exit code 1.\n", COMMAND_FAILED),
    FixedCase("pnpm-exec-not-found", ("pnpm", "exec", "vitest"), 1,
              ' ERR_PNPM_RECURSIVE_EXEC_FIRST_FAIL  Command "vitest" not found\n', SETUP),
    FixedCase("pnpm-no-package-json", ("pnpm", "run", "build"), 1,
              " ERR_PNPM_NO_IMPORTER_MANIFEST_FOUND  No package.json (or package.yaml, or "
              'package.json5) was found in "/repo".\n', MISSING_SCRIPT),
    # yarn 1 and yarn berry
    FixedCase("yarn1-missing-script", ("yarn", "run", "lint"), 1,
              'yarn run v1.22.22\nerror Command "lint" not found.\ninfo Visit '
              "https://yarnpkg.com/en/docs/cli/run for documentation about this command.\n",
              MISSING_SCRIPT),
    FixedCase("yarn1-missing-script-did-you-mean", ("yarn", "tst"), 1,
              'yarn run v1.22.22\nerror Command "tst" not found. Did you mean "test"?\n',
              MISSING_SCRIPT),
    FixedCase("yarn1-no-package-json", ("yarn", "build"), 1,
              'yarn run v1.22.22\nerror Couldn\'t find a package.json file in "/repo"\n',
              MISSING_SCRIPT),
    FixedCase("yarn-berry-missing-script", ("yarn", "lint"), 1,
              'Usage Error: Couldn\'t find a script named "lint".\n\n$ yarn run [--inspect] '
              "[--inspect-brk] [-T,--top-level] [-B,--binaries-only] [--require #0] "
              "<scriptName> ...\n", MISSING_SCRIPT),
    # bun
    FixedCase("bun-missing-script", ("bun", "run", "lint"), 1,
              'error: Script not found "lint"\n', MISSING_SCRIPT),
    FixedCase("bun-old-missing-script", ("bun", "run", "lint"), 1,
              'error: missing script "lint"\n', MISSING_SCRIPT),
    FixedCase("bun-test-no-tests", ("bun", "test"), 1,
              'bun test v1.3.1\nNo tests found!\n\nTests need ".test", "_test_", ".spec" or '
              '"_spec_" in the filename (ex: "MyApp.test.ts")\n', NO_TEST_FILES),
    FixedCase("bun-test-filter-matches-nothing", ("bun", "test", "src/x"), 1,
              "bun test v1.4.0\n\nThe following filters did not match any test files in "
              '--cwd="/repo":\n src/x\n11 files were searched [2.00ms]\n', NO_TEST_FILES),
    # older GNU make quoting
    FixedCase("make-old-quotes", ("make", "lint"), 2,
              "make: *** No rule to make target `lint'.  Stop.\n", MISSING_MAKE_TARGET),
    # jest (bold) and vitest (coloured, after a redraw of the screen)
    FixedCase("jest-no-tests", ("npx", "jest"), 1,
              "\x1b[1mNo tests found, exiting with code 1\x1b[22m\nRun with `--passWithNoTests` "
              "to exit with code 0\nIn /repo\n  12 files checked.\n  testMatch: "
              "**/?(*.)+(spec|test).[tj]s?(x) - 0 matches\n", NO_TEST_FILES),
    FixedCase("vitest-no-test-files", ("npx", "vitest", "run"), 1,
              "\x1b[1;1H\x1b[J\n\x1b[46m RUN \x1b[49m \x1b[36mv3.2.4 \x1b[39m\x1b[90m/repo"
              "\x1b[39m\n\n\x1b[2minclude: \x1b[22m\x1b[33m**/*.{test,spec}.?(c|m)[jt]s?(x)"
              "\x1b[39m\n\x1b[2mexclude:  \x1b[22m\x1b[33m**/node_modules/**\x1b[2m, \x1b[22m"
              "**/.git/**\x1b[39m\n\x1b[31m\nNo test files found, exiting with code 1\x1b[39m\n",
              NO_TEST_FILES),
    FixedCase("vitest-assertion-quoting-the-message", ("npx", "vitest", "run"), 1,
              " FAIL  src/a.test.ts > reports nothing\nAssertionError: expected 'No test files "
              "found, exiting with code 1' to be 'ok'\n Test Files  1 failed (1)\n",
              COMMAND_FAILED),
    FixedCase("mocha-no-test-files", ("npx", "mocha"), 1,
              'Error: No test files found: "test"\n', NO_TEST_FILES),
    FixedCase("jest-suite-missing-package", ("npx", "jest"), 1,
              "FAIL src/a.test.js\n  ● Test suite failed to run\n\n    Cannot find module "
              "'left-pad' from 'src/a.test.js'\n\nTest Suites: 1 failed, 1 total\n", SETUP),
    FixedCase("jest-suite-missing-local-module", ("npx", "jest"), 1,
              "FAIL src/a.test.js\n  ● Test suite failed to run\n\n    Cannot find module "
              "'./formatter' from 'src/config.js'\n", COMMAND_FAILED),
    FixedCase("jest-suite-missing-alias", ("npx", "jest"), 1,
              "FAIL src/a.test.js\n  ● Test suite failed to run\n\n    Cannot find module "
              "'@/components/Nav' from 'src/a.test.js'\n", COMMAND_FAILED),
    # node: a file missing inside an installed package is a broken install
    FixedCase("node-esm-file-missing-in-node-modules", ("node", "main.mjs"), 1,
              "Error [ERR_MODULE_NOT_FOUND]: Cannot find module '/repo/node_modules/pad/dist/"
              "index.js' imported from /repo/main.mjs\n", SETUP),
    FixedCase("node-cjs-file-missing-in-node-modules", ("node", "main.js"), 1,
              "Error: Cannot find module '/repo/node_modules/pad/lib/index.js'. Please verify "
              "that the package.json has a valid \"main\" entry\n", SETUP),
    # TypeScript: a type error, whatever the module
    FixedCase("tsc-local-module", ("npx", "tsc", "--noEmit"), 2,
              "src/a.ts(1,15): error TS2307: Cannot find module './x' or its corresponding type "
              "declarations.\n", COMMAND_FAILED),
    FixedCase("tsc-package", ("npx", "tsc", "--noEmit"), 2,
              "src/a.ts(1,20): error TS2307: Cannot find module 'lodash' or its corresponding "
              "type declarations.\n", COMMAND_FAILED),
    # go
    FixedCase("go-no-module", ("go", "test", "./..."), 1,
              "go: cannot find main module, but found .git/config in /repo\n\tto create a module "
              "there, run:\n\tgo mod init\n", SETUP),
    FixedCase("go-mod-not-found", ("go", "build", "./..."), 1,
              "go: go.mod file not found in current directory or any parent directory; see "
              "'go help modules'\n", SETUP),
    FixedCase("go-test-fails-beside-no-test-files", ("go", "test", "./..."), 1,
              "?   \texample.com/app/cmd\t[no test files]\n--- FAIL: TestAdd (0.00s)\n    "
              "add_test.go:9: got 3, want 4\nFAIL\nFAIL\texample.com/app\t0.004s\nFAIL\n",
              COMMAND_FAILED),
    # uv
    FixedCase("uv-run-missing-tool", ("uv", "run", "pytest"), 2,
              "error: Failed to spawn: `pytest`\n  Caused by: No such file or directory (os error "
              "2)\n", SETUP),
    FixedCase("uv-run-pytest-no-tests", ("uv", "run", "pytest", "-q"), 5,
              "\nno tests ran in 0.01s\n", NO_TEST_FILES),
    # shells other than dash
    FixedCase("bash-command-not-found-in-script", ("bash", "-c", "make lint"), 2,
              "/usr/bin/bash: line 1: eslint: command not found\nmake: *** [Makefile:2: lint] "
              "Error 127\n", SETUP),
    # exit status and signal come first
    FixedCase("killed-by-signal", ("npm", "run", "lint"), None,
              'npm error Missing script: "lint"\n', COMMAND_FAILED, signal=9),
    FixedCase("exit-127-without-output", ("./scripts/check",), 127, "", SETUP),
    FixedCase("exit-1-without-output", ("./scripts/check",), 1, "", COMMAND_FAILED),
    FixedCase("pytest-summary-without-exit-5", ("./run-tests.sh",), 1,
              "=== no tests ran in 0.01s ===\n=== 1 failed in 0.20s ===\n", COMMAND_FAILED),
)


@pytest.mark.parametrize("case", FIXED_CASES, ids=[case.name for case in FIXED_CASES])
def test_fixed_output(case: FixedCase, tmp_path: Path) -> None:
    failure = Failure(case.exit_code, case.signal, case.output, case.argv, tmp_path)
    assert classify.classify(failure) == case.expected


# --------------------------------------------------------------------------------------------
# the table itself


def test_every_rule_is_anchored_and_names_a_code() -> None:
    for rule in classify.RULES:
        assert rule.pattern.pattern.startswith("^"), rule
        assert rule.pattern.flags & re.MULTILINE, rule
        assert rule.code in CODES, rule
        assert rule.tool


def test_code_sets() -> None:
    assert len(set(CODES)) == 9
    assert {MISSING_SCRIPT, MISSING_MAKE_TARGET, NO_TEST_FILES} == MISSING_CODES
    assert set(NOT_RETRIED) == MISSING_CODES | {UNSUPPORTED_FORMAT, SEQUENCE_ISSUE, INTERRUPTED}
    assert TIMEOUT not in NOT_RETRIED
    assert COMMAND_FAILED not in NOT_RETRIED


def test_plain_output_reads_redraws_as_new_lines() -> None:
    assert strip_ansi("\x1b[1mnpm\x1b[22m \x1b[31merror\x1b[39m") == "npm error"
    assert plain_output("spinner\x1b[2K\x1b[1GNo tests found\r\n") == "spinner\n\nNo tests found\n"


def test_missing_local_module_next_to_the_importer_is_the_projects(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "helpers.py").write_text("", encoding="utf-8")
    output = (
        "Traceback (most recent call last):\n"
        f'  File "{tmp_path}/scripts/run.py", line 1, in <module>\n'
        "    import helpers\n"
        "ModuleNotFoundError: No module named 'helpers'\n"
    )
    argv = (PY, "-m", "scripts.run")
    assert classify.classify(Failure(1, None, output, argv, tmp_path)) == COMMAND_FAILED
    other = output.replace("'helpers'", "'requests'")
    assert classify.classify(Failure(1, None, other, argv, tmp_path)) == SETUP
