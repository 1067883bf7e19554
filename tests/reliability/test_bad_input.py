"""Bad input never becomes a traceback: contracts, command strings and argv, generated.

Every property asserts the whole contract of its function: it either returns a valid value or
raises the one error type the front ends turn into a single line; anything else is a bug.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, event, given
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from pytest_verifygate.cli import main
from pytest_verifygate.commands import (
    FILES_PLACEHOLDER,
    ParsedCommand,
    UnsupportedCommand,
    expand,
    parse_command,
    split_words,
)
from pytest_verifygate.contract import GATE_KEYS, SETTINGS_KEYS, Contract, load_contract
from pytest_verifygate.engine import plan_gates
from pytest_verifygate.errors import ContractError
from pytest_verifygate.git.changes import ChangeSet
from pytest_verifygate.report.document import build_report
from pytest_verifygate.runner.records import bare_result
from pytest_verifygate.selection import select_gates

from .support import examples, toml_document, toml_value, validate

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

# --------------------------------------------------------------------------------------------
# strategies: values of every TOML type, keys the loader knows and keys it does not

# Lone surrogates cannot be written as TOML or UTF-8; JSON gets its own text strategy.
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
JSON_TEXT = st.text(st.characters(), max_size=30)
HUGE_TEXT = st.builds(lambda c, n: c * n, st.sampled_from(["x", "é", "{files}", " ", "\\"]),
                      st.integers(10_000, 200_000))
SCALARS = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(),
    TEXT,
    st.sampled_from(["", " ", "\n", "{files}", "..", "/", "~", "\x7f", "-rf", "a\u202eb"]),
    st.datetimes(),
    st.dates(),
    st.times(),
)
ANY_VALUE = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
NAMES = st.one_of(st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True), TEXT)
COMMANDS = st.one_of(
    TEXT,
    st.lists(TEXT, max_size=4),
    st.sampled_from(["ruff check {files}", "echo a | b", "A=1 B='x y' prog --flag",
                     'grep -E "a|b" {files}', "cd src && make", "true", ["true"], []]),
    HUGE_TEXT,
)
STRING_LISTS = st.one_of(st.lists(TEXT, max_size=3), st.lists(ANY_VALUE, max_size=3))
PLAUSIBLE_GATE: dict[str, st.SearchStrategy[Any]] = {
    "name": NAMES,
    "command": COMMANDS,
    "roles": STRING_LISTS,
    "when_changed": st.one_of(STRING_LISTS, st.just(["**/*.py", "!docs/**"])),
    "when_changed_all": STRING_LISTS,
    "cwd": st.one_of(TEXT, st.sampled_from([".", "..", "../..", "/", "/tmp", "sub/../..",
                                            "a" * 300, "./" * 200])),
    "env": st.dictionaries(TEXT, st.one_of(TEXT, ANY_VALUE), max_size=3),
    "secret_env": STRING_LISTS,
    "timeout_seconds": st.one_of(st.floats(), st.integers(), TEXT),
    "shell": st.one_of(st.booleans(), ANY_VALUE),
    "retries": st.one_of(st.integers(-5, 50), ANY_VALUE),
    "category": st.one_of(st.sampled_from(["unit", "integration", "Unit"]), ANY_VALUE),
    "phases": st.one_of(st.lists(st.integers(-3, 10**20), max_size=3), ANY_VALUE),
    "kind": st.one_of(st.sampled_from(["command", "manual", "manul"]), ANY_VALUE),
    "on_missing": st.one_of(st.sampled_from(["fail", "skip"]), ANY_VALUE),
}
PLAUSIBLE_SETTINGS: dict[str, st.SearchStrategy[Any]] = {
    "timeout_seconds": st.one_of(st.floats(), st.integers()),
    "jobs": st.one_of(st.integers(-3, 5000), ANY_VALUE),
    "output_tail_bytes": st.one_of(st.integers(-1, 10**9), ANY_VALUE),
    "on_missing": st.one_of(st.sampled_from(["fail", "skip"]), ANY_VALUE),
    "fail_when_unverified": ANY_VALUE,
    "changed_from": ANY_VALUE,
}


def _table(plausible: dict[str, st.SearchStrategy[Any]], extra_keys: list[str]) -> Any:
    keys = st.lists(st.sampled_from([*plausible, *extra_keys]), unique=True, max_size=8)
    return keys.flatmap(lambda chosen: st.fixed_dictionaries(
        {key: st.one_of(plausible[key], plausible[key], ANY_VALUE) if key in plausible
         else ANY_VALUE for key in chosen}))


GATE_TABLES = _table(PLAUSIBLE_GATE, ["comand", "timeout", "Name", ""])
SETTINGS_TABLES = _table(PLAUSIBLE_SETTINGS, ["job", "x"])

# Contracts the loader accepts, so that selection, planning and the report run on them too.
WORD = st.text(st.characters(codec="utf-8", exclude_characters="\0"), min_size=1,
               max_size=12).filter(str.strip)
ENV_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
VALID_GATES: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"name": st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True),
     "command": st.one_of(WORD, st.lists(WORD, min_size=1, max_size=4),
                          st.sampled_from(["ruff check -- {files}", "echo a | b",
                                           "A=1 TOKEN=sekrit1 prog {files}", "cd x && make"]))},
    optional={
        "roles": st.lists(WORD, min_size=1, max_size=2),
        "when_changed": st.lists(st.one_of(st.sampled_from(["*.py", "!docs/**", "sub/**", "-rf",
                                                            "!", "a\\", "[z-a]", "[", "\0"]),
                                           WORD), min_size=1, max_size=3),
        "when_changed_all": st.lists(st.sampled_from(["*.py", "sub/**"]), max_size=2),
        "cwd": st.sampled_from([".", "sub", "./sub", "sub/.."]),
        "env": st.dictionaries(ENV_NAME, st.text(st.characters(codec="utf-8",
                                                               exclude_characters="\0"),
                                                 max_size=12), max_size=3),
        "secret_env": st.lists(ENV_NAME, max_size=2),
        "timeout_seconds": st.one_of(st.floats(0.001, 1e9), st.integers(1, 10**6)),
        "shell": st.booleans(),
        "retries": st.integers(0, 20),
        "category": st.sampled_from(["unit", "integration"]),
        "phases": st.lists(st.integers(1, 10**9), min_size=1, max_size=3),
        "kind": st.sampled_from(["command", "manual"]),
        "on_missing": st.sampled_from(["fail", "skip"]),
    },
)


def _gate_name(gate: dict[str, Any]) -> str:
    return str(gate["name"])


VALID_GATE_LISTS: st.SearchStrategy[list[dict[str, Any]]] = st.lists(
    VALID_GATES, min_size=1, max_size=4, unique_by=_gate_name)
VALID_SETTINGS = st.fixed_dictionaries({}, optional={
    "timeout_seconds": st.floats(0.001, 1e9), "jobs": st.integers(0, 1024),
    "output_tail_bytes": st.integers(256, 64 * 2**20), "on_missing": st.just("skip"),
    "fail_when_unverified": st.booleans(), "changed_from": st.sampled_from(["", "main"]),
})
DOCUMENTS = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "settings": st.one_of(SETTINGS_TABLES, ANY_VALUE),
            "gate": st.one_of(st.lists(GATE_TABLES, max_size=4), ANY_VALUE),
            "gates": ANY_VALUE,
        },
    ),
    st.fixed_dictionaries({
        "settings": VALID_SETTINGS,
        "gate": VALID_GATE_LISTS,
    }),
)


def _contracts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("contracts")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "sub").mkdir()
    return root


def _event(name: str) -> None:
    if currently_in_test_context():  # check_load also serves the parametrized tests
        event(name)


def check_load(path: Path) -> Contract | None:
    """``load_contract`` returns a Contract or raises a one-line ContractError; and a contract
    it accepts can be selected, planned and reported without an exception either."""
    try:
        contract = load_contract(path)
    except ContractError as exc:
        text = str(exc)
        assert "\n" not in text and "\r" not in text, text
        assert text.startswith(exc.path), text
        _event("contract error")
        return None
    _event("contract loaded")  # the statistics show both paths are exercised
    assert contract.gates
    changes = ChangeSet("files", files=("a.py", "-rf", "sub/x y.txt"))
    selections = select_gates(contract, changes, role="implementer", phase=1)
    plans = plan_gates(contract, selections)
    results = [bare_result(plan, "skipped", None) for plan in plans]
    validate(build_report(contract=contract, changes=changes, selections=selections,
                          results=results, verdict="unverified"))
    return contract


@pytest.fixture(scope="module")
def contracts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _contracts_dir(tmp_path_factory)


@examples(150)
@given(document=DOCUMENTS, where=st.sampled_from(["verify.toml", ".middle/verify.toml",
                                                  "pyproject.toml"]))
def test_generated_toml_contracts_load_or_fail_in_one_line(
    contracts_dir: Path, document: dict[str, Any], where: str
) -> None:
    if where == "pyproject.toml":
        document = {"tool": {"verifygate": document}} if document else {"tool": {}}
        text = toml_document({"project": {"name": "x"}}) + "tool = " + toml_value(
            document["tool"]) + "\n"
    else:
        text = toml_document(document)
    path = contracts_dir / where
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    check_load(path)


OPENTIGER_DOCUMENTS = st.one_of(
    st.fixed_dictionaries({}, optional={
        "commands": st.one_of(st.lists(st.one_of(JSON_TEXT, COMMANDS), max_size=3), ANY_VALUE),
        "byRole": st.one_of(st.dictionaries(JSON_TEXT, st.lists(JSON_TEXT, max_size=2),
                                            max_size=2), ANY_VALUE),
        "rules": st.one_of(st.lists(st.fixed_dictionaries({}, optional={
            "whenChangedAny": st.one_of(st.lists(JSON_TEXT, max_size=3),
                                        st.just(["src/{a,b}/*.ts", "!**/*.md"]), ANY_VALUE),
            "whenChangedAll": st.one_of(st.lists(JSON_TEXT, max_size=2), ANY_VALUE),
            "commands": st.one_of(st.lists(JSON_TEXT, max_size=2), ANY_VALUE),
            "visualProbes": ANY_VALUE,
        }), max_size=3), ANY_VALUE),
        "visualProbes": ANY_VALUE,
    }),
    ANY_VALUE,
)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return value.isoformat()


@examples(100)
@given(document=OPENTIGER_DOCUMENTS, ascii_only=st.booleans())
def test_generated_opentiger_contracts_load_or_fail_in_one_line(
    contracts_dir: Path, document: Any, ascii_only: bool
) -> None:
    path = contracts_dir / ".opentiger" / "verify.contract.json"
    path.parent.mkdir(exist_ok=True)
    # ensure_ascii spells lone surrogates as \ud800 escapes, which JSON allows.
    text = json.dumps(_jsonable(document), ensure_ascii=ascii_only, allow_nan=True)
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    check_load(path)


VALID_TOML = '[settings]\njobs = 2\n[[gate]]\nname = "lint"\ncommand = "ruff check {files}"\n'


@examples(100)
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
        # A valid contract with a few bytes changed: errors deep inside the parsers.
        st.tuples(st.integers(0, len(VALID_TOML)), st.integers(0, 5), st.binary(max_size=5))
        .map(lambda t: (VALID_TOML[: t[0]].encode() + t[2]
                        + VALID_TOML[t[0] + t[1]:].encode())),
    ),
    where=st.sampled_from(["verify.toml", ".opentiger/verify.contract.json"]),
)
def test_raw_bytes_load_or_fail_in_one_line(contracts_dir: Path, data: bytes, where: str) -> None:
    path = contracts_dir / where
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    check_load(path)


@pytest.mark.parametrize(
    "text",
    [
        "x = " + "[" * 5000 + "]" * 5000,
        "x = " + "{a = " * 3000 + "1" + "}" * 3000,
        "[settings]\njobs = " + "9" * 5000,
        '[[gate]]\nname = "a"\ncommand = "x"\nphases = [' + "1" * 4400 + "]",
        '[[gate]]\nname = "a"\ncommand = "x"\nroles = ' + "[" * 900 + "]" * 900,
        '[[gate]]\nname = "a"\ncommand = "' + "x" * 1_000_000 + '"',
        '[[gate]]\nname = "a"\ncommand = "x"\ncwd = "' + "a/" * 3000 + '"',
        '[[gate]]\nname = "a"\ncommand = "x"\ncwd = "' + "x" * 300 + '"',
        '\ufeff[[gate]]\nname = "a"\ncommand = "x"\n',
        "[[gate]]\nname = 'a'\ncommand = 'x'\ntimeout_seconds = 1e999\n",
        "[[gate]]\nname = 'a'\ncommand = 'x'\nenv = { 'A=B' = 'c' }\n",
        "[[gate]]\nname = 'a'\ncommand = 'x'\nsecret_env = ['NOT VALID']\n",
        "[[gate]]\nname = 'a'\ncommand = 'x'\nsecret_env = 'TOKEN'\n",
        "[[gate]]\nname = 'a'\ncommand = 'x'\nwhen_changed = ['!']\n",
        "[[gate]]\nname = 'a'\ncommand = 'x'\nwhen_changed = ['src\\']\n",
        "[[gate]]\nname = 'a'\ncommand = 'x'\nwhen_changed_all = ['[z-a].py']\n",
    ],
    ids=["deep-array", "deep-table", "huge-int", "huge-int-in-list", "nested-roles",
         "1MB-command", "long-cwd", "long-cwd-component", "bom", "inf-timeout",
         "env-name-with-equals", "secret-env-bad-name", "secret-env-not-a-list",
         "pattern-bang", "pattern-trailing-backslash", "pattern-bad-range"],
)
def test_extreme_toml(contracts_dir: Path, text: str) -> None:
    path = contracts_dir / "verify.toml"
    path.write_text(text, encoding="utf-8")
    check_load(path)


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, '{"commands": [' + "9" * 5000 + "]}",
     '{"commands": ["echo \\ud800"]}', '{"byRole": {"\\udcff": ["true"]}}',
     '{"commands": ["true"], "rules": [{"whenChangedAny": ["\\ud800"]}]}',
     '{"commands": [NaN, Infinity]}',
     '{"commands": ["true"], "rules": [{"whenChangedAny": ["[z-a]"], "commands": ["x"]}]}'],
    ids=["deep", "huge-int", "lone-surrogate-command", "surrogate-role",
         "surrogate-glob", "nan", "bad-glob-range"],
)
def test_extreme_json(contracts_dir: Path, text: str) -> None:
    path = contracts_dir / ".opentiger" / "verify.contract.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    assert check_load(path) is None  # every one of these is a contract error


def test_secret_env_is_validated_and_loaded(contracts_dir: Path) -> None:
    path = contracts_dir / "verify.toml"
    path.write_text('[[gate]]\nname = "a"\ncommand = "x"\nsecret_env = ["DEPLOY_KEY"]\n')
    assert load_contract(path).gates[0].secret_env == ("DEPLOY_KEY",)
    assert "secret_env" in GATE_KEYS and "jobs" in SETTINGS_KEYS
    path.write_text('[[gate]]\nname = "a"\ncommand = "x"\nsecret_env = ["A-B"]\n')
    with pytest.raises(ContractError, match=r"key 'secret_env'.*not a valid environment"):
        load_contract(path)


# --------------------------------------------------------------------------------------------
# the command splitter

SHELLISH = st.lists(
    st.one_of(st.sampled_from(list(" \t\n'\"\\|&;<>()$`*?[]{}~#=!-%^,.:/@+")),
              st.characters(codec="utf-8"), st.sampled_from(["{files}", "$(", "${", "A="])),
    max_size=40,
).map("".join)


@examples(300)
@given(text=st.one_of(SHELLISH, st.text(max_size=60)), shell=st.booleans())
def test_parse_command_returns_argv_or_unsupported(text: str, shell: bool) -> None:
    try:
        parsed = parse_command(text, shell=shell)
    except UnsupportedCommand as exc:
        assert not shell
        assert str(exc) and "\n" not in str(exc)
        return
    assert isinstance(parsed, ParsedCommand)
    assert parsed.words and all(isinstance(word, str) for word in parsed.words)
    files = ["-rf", "a b", "$(touch pwned)", "x\ny"]
    invocations = expand(parsed, files)
    assert invocations and all(argv for argv in invocations)
    if not shell and parsed.uses_files:
        # Every file appears exactly once, in order, across the chunks.
        position = parsed.words.index(FILES_PLACEHOLDER)
        tail = len(parsed.words) - position - 1
        spread = [arg for argv in invocations for arg in argv[position:len(argv) - tail]]
        assert spread == files


@examples(200)
@given(words=st.lists(st.text(st.characters(exclude_categories=["Cs"],
                                            exclude_characters="\0"), max_size=12),
                      min_size=1, max_size=6))
def test_quoted_words_split_back_exactly(words: list[str]) -> None:
    """What ``shlex.join`` quotes, the splitter returns word for word (quotes are inert)."""
    import shlex

    assert [word.text for word in split_words(shlex.join(words))] == words


SH_SAFE = st.text(
    st.one_of(st.sampled_from(list(" \t'\"\\|&;<>()$`*?[]{}~#=!-%^,.:/@+")),
              st.characters(codec="utf-8", exclude_characters="\n\r\0")),
    max_size=30,
)


@examples(40)
@given(text=SH_SAFE)
def test_accepted_commands_split_like_sh(text: str) -> None:
    """Whatever the splitter accepts, /bin/sh splits into the very same words: accepting a
    string promises that no shell was needed to read it."""
    try:
        words = [word.text for word in split_words(text)]
    except UnsupportedCommand:
        return
    assume(words)
    done = subprocess.run(["/bin/sh", "-c", "printf '%s\\0' " + text], capture_output=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(b"\0")[:-1] == [word.encode() for word in words]


# --------------------------------------------------------------------------------------------
# the command line

ARGV_WORDS = st.one_of(
    st.sampled_from(["run", "list", "--contract", "verify.toml", "nope.toml", "/", "--role",
                     "--phase", "0", "-1", "1", "--staged", "--changed-from", "HEAD", "main",
                     "--files", "a.py", "-rf", "--files-from", "files.txt", "--all", "--jobs",
                     "--format", "text", "json", "agent", "--version", "-h", "--", "=",
                     "--jobs=99999999999999999999", "--phase=1e3"]),
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\0"), max_size=12)
    .filter(lambda word: word != "-"),  # "-" would read the test's stdin
    st.binary(min_size=1, max_size=8).map(lambda b: os.fsdecode(b.replace(b"\0", b"x"))),
)


@pytest.fixture(scope="module")
def cli_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = _contracts_dir(tmp_path_factory)
    (root / "verify.toml").write_text(
        '[[gate]]\nname = "ok"\ncommand = "true"\n'
        '[[gate]]\nname = "each"\ncommand = ["true", "{files}"]\nwhen_changed = ["*.py"]\n'
        '[[gate]]\nname = "review"\nkind = "manual"\nroles = ["reviewer"]\nphases = [2]\n')
    (root / "a.py").write_text("")
    (root / "files.txt").write_text("a.py\nmissing.py\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.email=t@e.invalid", "-c", "user.name=T", "commit",
                    "-qm", "x"], cwd=root, check=True)
    return root


@examples(25)
@given(argv=st.lists(ARGV_WORDS, max_size=7))
def test_random_argv_never_tracebacks(cli_repo: Path, argv: list[str]) -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    previous = os.getcwd()
    os.chdir(cli_repo)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                status: object = main(argv)
            except SystemExit as exc:
                status = exc.code
    finally:
        os.chdir(previous)
    errors = stderr.getvalue()
    event(f"exit status {status}")
    assert "Traceback" not in errors
    assert status in (0, 1, 2), (status, errors)
    if status == 2:
        assert errors.endswith("\n"), errors
        if not any("\n" in word or "\r" in word for word in argv):
            # One line; argparse echoes an unrecognized argument verbatim, so a line break
            # the user typed inside one is the only way to get a second line.
            assert errors.count("\n") == 1, errors
            assert errors.startswith("verifygate: error: "), errors
