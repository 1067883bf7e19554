"""Contract discovery, the four formats, and one-line errors for every kind of bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_verifygate.contract import find_contract, load_contract
from pytest_verifygate.contract.model import EMPTY_ENV
from pytest_verifygate.contract.opentiger import minimatch_to_gitignore
from pytest_verifygate.errors import ContractError

from conftest import verifygate, write

FULL = """
[settings]
timeout_seconds = 12
jobs = 3
output_tail_bytes = 4096
on_missing = "skip"
fail_when_unverified = true
changed_from = "origin/main"

[[gate]]
name = "lint"
command = "ruff check {files}"
roles = ["implementer"]
when_changed = ["**/*.py", "!docs/**"]
when_changed_all = ["src/**"]
cwd = "services/api"
env = { PYTHONWARNINGS = "error" }
timeout_seconds = 120
shell = false
retries = 2
category = "unit"
phases = [40, 41]
kind = "command"
on_missing = "fail"

[[gate]]
name = "plain"
command = ["python", "-c", "pass"]
"""


def test_every_key_of_the_toml_form_loads(repo: Path) -> None:
    (repo / "services" / "api").mkdir(parents=True)
    write(repo / "verify.toml", FULL)
    contract = load_contract()
    assert contract.format == "toml"
    assert contract.root == repo.resolve()
    settings = contract.settings
    assert (settings.timeout_seconds, settings.jobs, settings.output_tail_bytes) == (12, 3, 4096)
    assert settings.on_missing == "skip" and settings.fail_when_unverified
    assert settings.changed_from == "origin/main"
    lint, plain = contract.gates
    assert lint.command == "ruff check {files}"
    assert lint.roles == ("implementer",)
    assert lint.when_changed == ("**/*.py", "!docs/**")
    assert lint.when_changed_all == ("src/**",)
    assert lint.cwd == "services/api"
    assert dict(lint.env) == {"PYTHONWARNINGS": "error"}
    assert (lint.timeout_seconds, lint.retries, lint.phases) == (120, 2, (40, 41))
    assert (lint.category, lint.kind, lint.on_missing, lint.shell) == ("unit", "command", "fail",
                                                                      False)
    # Defaults come from [settings].
    assert plain.command == ("python", "-c", "pass")
    assert (plain.timeout_seconds, plain.on_missing, plain.roles) == (12, "skip", None)


def test_discovery_order_and_upward_search(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / ".opentiger" / "verify.contract.json", json.dumps({"commands": ["true"]}))
    sub = repo / "a" / "b"
    sub.mkdir(parents=True)
    assert find_contract(sub) == (repo / ".opentiger" / "verify.contract.json").resolve()
    write(repo / ".middle" / "verify.toml", '[[gate]]\nname = "m"\ncommand = "true"\n')
    assert find_contract(sub) == (repo / ".middle" / "verify.toml").resolve()
    write(repo / "pyproject.toml", "[project]\nname = 'x'\n")  # no [tool.verifygate]: ignored
    assert find_contract(sub) == (repo / ".middle" / "verify.toml").resolve()
    write(repo / "pyproject.toml",
          '[tool.verifygate]\n[[tool.verifygate.gate]]\nname = "p"\ncommand = "true"\n')
    assert find_contract(sub) == (repo / "pyproject.toml").resolve()
    write(repo / "verify.toml", '[[gate]]\nname = "v"\ncommand = "true"\n')
    assert find_contract(sub) == (repo / "verify.toml").resolve()
    monkeypatch.chdir(sub)
    assert load_contract().gates[0].name == "v"


def test_search_stops_at_the_git_toplevel(tmp_path: Path) -> None:
    write(tmp_path / "verify.toml", '[[gate]]\nname = "outer"\ncommand = "true"\n')
    inner = tmp_path / "inner"
    (inner / ".git").mkdir(parents=True)
    assert find_contract(inner) is None
    with pytest.raises(ContractError, match="no verify contract found"):
        load_contract(start=inner)


def test_pyproject_table_and_key_names_in_errors(repo: Path) -> None:
    write(repo / "pyproject.toml", """
[tool.verifygate.settings]
jobs = 2
[[tool.verifygate.gate]]
name = "t"
command = "true"
""")
    contract = load_contract()
    assert contract.format == "pyproject" and contract.settings.jobs == 2
    write(repo / "pyproject.toml", '[[tool.verifygate.gate]]\nname = "t"\ncomand = "true"\n')
    with pytest.raises(ContractError) as error:
        load_contract()
    assert str(error.value) == (
        "pyproject.toml: gate 't': key 'comand': unknown key in [[tool.verifygate.gate]] "
        "(did you mean 'command'?)"
    )


@pytest.mark.parametrize("where", ["verify.toml", ".middle/verify.toml", "pyproject.toml"])
def test_any_non_empty_gate_name_is_accepted_and_trimmed(repo: Path, where: str) -> None:
    names = ["unit tests", "Type check (mypy)", "  lint  ", "src/a: ünïcode ✓", "x" * 300]
    gates = "".join(f"[[{'tool.verifygate.' if where == 'pyproject.toml' else ''}gate]]\n"
                    f"name = {json.dumps(name)}\ncommand = \"true\"\n" for name in names)
    write(repo / where, gates)
    contract = load_contract(repo / where)
    assert [gate.name for gate in contract.gates] == [name.strip() for name in names]


@pytest.mark.parametrize("name", ["two\nlines", "carriage\rreturn", "bell\a", "csi\x9b2J"])
def test_a_gate_name_is_one_line_of_text(repo: Path, name: str) -> None:
    write(repo / "verify.toml", f"[[gate]]\nname = {json.dumps(name)}\ncommand = \"true\"\n")
    with pytest.raises(ContractError, match=r"gate '#1': key 'name': must be one line of text, "
                                            r"not hold the control character U\+00"):
        load_contract(repo / "verify.toml")


def test_gate_keys_for_order_load(repo: Path) -> None:
    write(repo / "verify.toml", """
[[gate]]
name = "unit tests"
command = "true"
needs = [" build ", "build"]
[[gate]]
name = "build"
command = "true"
exclusive = true
""")
    tests, build = load_contract().gates
    assert (tests.needs, tests.exclusive) == (("build",), False)
    assert (build.needs, build.exclusive) == ((), True)


def test_middle_gates_default_to_a_shell(repo: Path) -> None:
    write(repo / ".middle" / "verify.toml", """
[[gate]]
name = "unit"
command = "pytest -q && echo ok"
timeout_seconds = 30
phases = [1]
category = "unit"
""")
    contract = load_contract()
    assert contract.format == "middle"
    assert contract.root == repo.resolve()
    gate = contract.gates[0]
    assert gate.shell is True and gate.phases == (1,) and gate.timeout_seconds == 30


def test_opentiger_form(repo: Path) -> None:
    write(repo / ".opentiger" / "verify.contract.json", json.dumps({
        "commands": ["npm run lint", "npm run lint"],
        "byRole": {"tester": ["npm test"]},
        "rules": [{"whenChangedAny": ["src/**/*.{ts,tsx}", "*.json"],
                   "whenChangedAll": ["docs/**"], "commands": ["npm run build"]}],
        "visualProbes": [],
    }))
    contract = load_contract()
    names = [gate.name for gate in contract.gates]
    assert names == ["npm run lint", "npm test", "npm run build"]
    assert contract.gates[1].roles == ("tester",)
    build = contract.gates[2]
    assert build.when_changed == ("/src/**/*.ts", "/src/**/*.tsx", "/*.json")
    assert build.when_changed_all == ("/docs/**",)
    assert build.shell is False
    assert any("visualProbes" in warning for warning in contract.warnings)


def test_an_opentiger_command_listed_in_several_places_is_one_gate(repo: Path) -> None:
    write(repo / ".opentiger" / "verify.contract.json", json.dumps({
        "commands": ["npm run lint"],
        "byRole": {"implementer": ["npm run lint", "npm test"], "tester": ["npm test"]},
        "rules": [{"whenChangedAny": ["src/**"], "commands": ["npm run lint", "npm run build"]},
                  {"whenChangedAny": ["lib/**"], "commands": ["npm run build"]}],
    }))
    gates = {gate.name: gate for gate in load_contract().gates}
    assert list(gates) == ["npm run lint", "npm test", "npm run build"]
    # Listed under "commands": it runs for every role on every change, so it stays unscoped.
    assert (gates["npm run lint"].roles, gates["npm run lint"].when_changed) == (None, None)
    assert gates["npm test"].roles == ("implementer", "tester")
    assert gates["npm run build"].when_changed == ("/src/**", "/lib/**")


def test_opentiger_gate_names_read_like_the_command(repo: Path) -> None:
    long = "pnpm --filter @acme/web-application run typecheck:strict --pretty"
    write(repo / ".opentiger" / "verify.contract.json", json.dumps({
        "commands": ["npm   run lint", long, long.replace("--pretty", "--incremental")],
        "byRole": {"reviewer": ["npm run lint"]},
    }))
    names = [gate.name for gate in load_contract().gates]
    assert names[0] == "npm run lint"
    assert names[1] == "pnpm --filter … run typecheck:strict --pretty"
    assert names[2] == "pnpm --filter … typecheck:strict --incremental"
    assert names[3] == "npm run lint (2)"  # the role's gate, apart from the one for everyone
    assert all(len(name) <= 48 for name in names)


def test_seed_formats_start_from_their_home_systems_settings(repo: Path) -> None:
    write(repo / ".middle" / "verify.toml", '[[gate]]\nname = "m"\ncommand = "true"\n')
    middle = load_contract()
    assert (middle.settings.jobs, middle.settings.on_missing) == (1, "fail")
    write(repo / ".middle" / "verify.toml",
          '[settings]\njobs = 0\n[[gate]]\nname = "m"\ncommand = "true"\n')
    assert load_contract().settings.jobs == 0
    path = write(repo / ".opentiger" / "verify.contract.json", json.dumps({"commands": ["x"]}))
    opentiger = load_contract(path)
    assert (opentiger.settings.jobs, opentiger.settings.on_missing) == (1, "fail")
    assert opentiger.gates[0].on_missing == "fail"
    path.write_text(json.dumps({"commands": ["x"], "settings": {
        "jobs": 4, "on_missing": "skip", "timeout_seconds": 9, "cache": True}}))
    lenient = load_contract(path)
    assert (lenient.settings.jobs, lenient.gates[0].on_missing) == (4, "skip")
    assert (lenient.gates[0].timeout_seconds, lenient.gates[0].cache) == (9, True)
    assert lenient.warnings == ()
    write(repo / "verify.toml", '[[gate]]\nname = "n"\ncommand = "true"\n')
    native = load_contract()
    assert (native.settings.jobs, native.settings.on_missing) == (0, "fail")


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"jobs": "2"}, "key 'settings.jobs': must be an integer, not a string"),
        ({"jobs": 2.5}, "key 'settings.jobs': must be an integer, not a number"),
        ({"on_misssing": "fail"},
         "key 'on_misssing': unknown key in \"settings\" (did you mean 'on_missing'?)"),
        ({"on_missing": "never"}, "key 'settings.on_missing': must be 'fail' or 'skip'"),
        ([], "key 'settings': must be an object, not a list"),
    ],
)
def test_opentiger_settings_are_checked_like_toml_settings(
    repo: Path, settings: object, expected: str
) -> None:
    write(repo / ".opentiger" / "verify.contract.json",
          json.dumps({"commands": ["x"], "settings": settings}))
    with pytest.raises(ContractError) as error:
        load_contract()
    assert str(error.value).startswith(".opentiger/verify.contract.json: " + expected)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("npm") is None, reason="needs npm")
def test_an_opentiger_script_that_is_not_defined_fails_unless_the_contract_skips_it(
    repo: Path,
) -> None:
    write(repo / "package.json", json.dumps({"name": "x", "version": "1.0.0", "scripts": {}}))
    contract = write(repo / ".opentiger" / "verify.contract.json",
                     json.dumps({"commands": ["npm run lint"]}))
    report, junit = repo.parent / "report.json", repo.parent / "junit.xml"
    done = verifygate("run", "--all", "--json", str(report), cwd=repo)
    assert done.returncode == 1, done.stdout + done.stderr
    (gate,) = json.loads(report.read_text())["gates"]
    assert (gate["name"], gate["outcome"], gate["code"]) == ("npm run lint", "failed",
                                                             "missing_script")
    contract.write_text(json.dumps({"commands": ["npm run lint"],
                                    "settings": {"on_missing": "skip"}}))
    done = verifygate("run", "--all", "--json", str(report), "--junit", str(junit), cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    (gate,) = json.loads(report.read_text())["gates"]
    assert (gate["outcome"], gate["code"]) == ("skipped", None)
    assert "missing_script" in gate["reason"]
    assert "missing_script" in done.stdout
    assert "missing_script" in junit.read_text()


def test_minimatch_translation_anchors_at_the_root() -> None:
    assert minimatch_to_gitignore("*.ts") == ["/*.ts"]
    assert minimatch_to_gitignore("**/*.ts") == ["**/*.ts"]
    assert minimatch_to_gitignore("!./a/{b,c}/x") == ["!/a/b/x", "!/a/c/x"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[[gate]]\nname = "a"\ncommand = "x"\ncomand = "y"\n',
         "verify.toml: gate 'a': key 'comand': unknown key in [[gate]] (did you mean 'command'?)"),
        ('[[gate]]\nname = "a"\n',
         "verify.toml: gate 'a': key 'command': is required "
         "(add command = \"...\", or kind = \"manual\" for a sign-off gate)"),
        ('[[gate]]\nname = "a"\ncommand = ""\n',
         "verify.toml: gate 'a': key 'command': must not be empty"),
        ('[[gate]]\nname = "a"\ncommand = []\n',
         "verify.toml: gate 'a': key 'command': must not be an empty list"),
        ('[[gate]]\nname = "a"\ncommand = 3\n',
         "verify.toml: gate 'a': key 'command': must be a string or a list of strings, "
         "not an integer"),
        ('[[gate]]\nname = "a"\ncommand = "x"\nroles = []\n',
         "verify.toml: gate 'a': key 'roles': must not be an empty list "
         "(remove the key to mean every role)"),
        ('[[gate]]\nname = "a"\ncommand = "x"\nphases = []\n',
         "verify.toml: gate 'a': key 'phases': must not be an empty list "
         "(remove the key to mean every phase)"),
        ('[[gate]]\nname = "a"\ncommand = "x"\nphases = [0]\n',
         "verify.toml: gate 'a': key 'phases': must be >= 1, got 0"),
        ('[[gate]]\nname = "a"\ncommand = "x"\nwhen_changed = []\n',
         "verify.toml: gate 'a': key 'when_changed': must not be an empty list "
         "(remove the key to run the gate always)"),
        ('[[gate]]\nname = "a"\ncommand = "x"\ntimeout_seconds = "5"\n',
         "verify.toml: gate 'a': key 'timeout_seconds': must be a number of seconds, "
         "not a string"),
        ('[[gate]]\nname = "a"\ncommand = "x"\ntimeout_seconds = inf\n',
         "verify.toml: gate 'a': key 'timeout_seconds': must be a positive number of seconds up "
         "to 31,536,000 (a year), got inf"),
        ('[[gate]]\nname = "a"\ncommand = "x"\ntimeout_seconds = 1' + "0" * 400 + "\n",
         "verify.toml: gate 'a': key 'timeout_seconds': must be a positive number of seconds up "
         "to 31,536,000 (a year), got 1000000000000000000000000000000000000..."),
        ('[[gate]]\nname = "a"\ncommand = "x"\nretries = true\n',
         "verify.toml: gate 'a': key 'retries': must be an integer, not a boolean"),
        ('[[gate]]\nname = "a"\ncommand = "x"\ncategory = "unti"\n',
         "verify.toml: gate 'a': key 'category': must be 'unit' or 'integration', got 'unti' "
         "(did you mean 'unit'?)"),
        ('[[gate]]\nname = "a"\ncommand = "x"\nenv = { N = 1 }\n',
         "verify.toml: gate 'a': key 'env': value of N must be a string, not an integer "
         '(write N = "1")'),
        ('[[gate]]\nname = "a"\ncommand = "x"\n[[gate]]\nname = "a"\ncommand = "y"\n',
         "verify.toml: gate 'a': key 'name': duplicate gate name (gate names must be unique; "
         "rename one of them)"),
        ('[[gate]]\nname = "  "\ncommand = "x"\n',
         "verify.toml: gate '#1': key 'name': must not be empty"),
        ('[[gate]]\nname = "a\\u0000b"\ncommand = "x"\n',
         "verify.toml: gate '#1': key 'name': must not contain a NUL character"),
        ('[[gate]]\nname = "a"\ncommand = "x"\n[[gate]]\nname = " a "\ncommand = "y"\n',
         "verify.toml: gate 'a': key 'name': duplicate gate name (gate names must be unique; "
         "rename one of them)"),
        ('[[gate]]\nname = "test"\ncommand = "x"\nneeds = ["biuld"]\n'
         '[[gate]]\nname = "build"\ncommand = "x"\n',
         "verify.toml: gate 'test': key 'needs': names no gate 'biuld' (did you mean 'build'?)"),
        ('[[gate]]\nname = "test"\ncommand = "x"\nneeds = ["test"]\n',
         "verify.toml: gate 'test': key 'needs': a gate cannot need itself "
         "(remove 'test' from needs)"),
        ('[[gate]]\nname = "a"\ncommand = "x"\nneeds = ["c"]\n'
         '[[gate]]\nname = "b"\ncommand = "x"\nneeds = ["a"]\n'
         '[[gate]]\nname = "c"\ncommand = "x"\nneeds = ["b"]\n',
         "verify.toml: gate 'a': key 'needs': gates need each other in a circle: "
         "'a' -> 'c' -> 'b' -> 'a' (remove one of these needs)"),
        ('[[gate]]\nname = "a"\ncommand = "x"\nneeds = "b"\n',
         "verify.toml: gate 'a': key 'needs': must be a list of strings, not a string "
         '(write needs = ["..."])'),
        ('[[gate]]\nname = "a"\ncommand = "x"\nneeds = []\n',
         "verify.toml: gate 'a': key 'needs': must not be an empty list "
         "(remove the key: the gate needs no other)"),
        ('[[gate]]\nname = "a"\ncommand = "x"\nexclusive = "yes"\n',
         "verify.toml: gate 'a': key 'exclusive': must be true or false, not a string"),
        ('[[gate]]\ncommand = "x"\n',
         "verify.toml: gate '#1': key 'name': is required (add name = \"...\")"),
        ('[setings]\njobs = 1\n[[gate]]\nname = "a"\ncommand = "x"\n',
         "verify.toml: key 'setings': unknown key in the contract (did you mean 'settings'?)"),
        ('[settings]\njobs = -1\n[[gate]]\nname = "a"\ncommand = "x"\n',
         "verify.toml: key 'settings.jobs': must be between 0 and 1024, got -1"),
        ("[settings]\njobs = 1\n",
         "verify.toml: key 'gate': defines no gates (add at least one [[gate]] with "
         'name = "..." and command = "...")'),
        ('gate = "x"\n',
         "verify.toml: key 'gate': must be an array of tables ([[gate]]), not a string"),
        ('[[gate]]\nname = "a"\ncommand = "x"\ncwd = "../../elsewhere"\n',
         None),
    ],
)
def test_invalid_contracts_are_one_clear_line(repo: Path, text: str, expected: str | None) -> None:
    write(repo / "verify.toml", text)
    with pytest.raises(ContractError) as error:
        load_contract()
    message = str(error.value)
    assert "\n" not in message
    if expected is None:
        assert message.startswith("verify.toml: gate 'a': key 'cwd': '../../elsewhere' resolves "
                                  "outside the repository")
    else:
        assert message == expected


def test_cwd_through_a_symlink_cannot_escape(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "link").symlink_to(outside)
    write(repo / "verify.toml", '[[gate]]\nname = "a"\ncommand = "x"\ncwd = "link"\n')
    with pytest.raises(ContractError, match="resolves outside the repository"):
        load_contract()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"\x00\x01\x02binary", "is a binary file"),
        (b"[[gate]]\nname = \"\xff\xfe\"\n", "is not valid UTF-8"),
        (b"[[gate]\nname=", "is not valid TOML"),
    ],
)
def test_unreadable_files_are_clean_errors(repo: Path, raw: bytes, expected: str) -> None:
    (repo / "verify.toml").write_bytes(raw)
    with pytest.raises(ContractError, match=expected):
        load_contract()


def test_invalid_json_and_missing_explicit_file(repo: Path) -> None:
    write(repo / ".opentiger" / "verify.contract.json", "{not json")
    with pytest.raises(ContractError, match=r"is not valid JSON: .*\(line 1, column 2\)"):
        load_contract()
    with pytest.raises(ContractError, match="no such contract file"):
        load_contract("nope.toml")
    write(repo / ".opentiger" / "verify.contract.json", json.dumps({"commands": [1]}))
    with pytest.raises(ContractError, match="key 'commands': must be a string"):
        load_contract()


def test_manual_gates_need_no_command(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "signoff"\nkind = "manual"\n')
    gate = load_contract().gates[0]
    assert gate.kind == "manual" and gate.command == ""


@pytest.mark.slow
def test_importing_the_contract_package_imports_no_parser_or_pathspec() -> None:
    # The command line imports the contract package on every commit: the parsers, pathspec
    # and difflib cost milliseconds and are imported only when a file or a hint needs them.
    script = ("import sys\n"
              "import pytest_verifygate.contract\n"
              "print(sorted(name for name in ('tomllib', 'tomli', 'json', 'pathspec', "
              "'difflib', 'shlex') if name in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_gates_without_env_share_one_read_only_mapping(repo: Path) -> None:
    write(repo / ".opentiger" / "verify.contract.json", json.dumps({"commands": ["a", "b"]}))
    first, second = load_contract().gates
    assert first.env is second.env is EMPTY_ENV
    with pytest.raises(TypeError):
        EMPTY_ENV["NAME"] = "value"  # type: ignore[index]
