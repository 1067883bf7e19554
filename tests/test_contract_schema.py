"""The contract's JSON Schema (shipped in the package for SchemaStore, taplo and Even Better
TOML) and the contract loader agree on the same cases."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import tomllib

from pytest_verifygate.contract import keys, load_contract
from pytest_verifygate.errors import ContractError

GATE = '[[gate]]\nname = "lint"\ncommand = "ruff check"\n'

# (TOML text, whether it is a valid contract)
CASES = [
    (GATE, True),
    (GATE + 'when_changed = ["*.py"]\ntypes = ["text"]\nexclude_types = ["binary"]\n', True),
    (GATE + 'files_regex = "^src/"\nexclude_regex = "_pb2\\\\.py$"\n', True),
    (GATE + 'env = { A_B = "1" }\nretries = 20\ncategory = "unit"\nkind = "command"\n', True),
    ('[settings]\njobs = 1\non_missing = "skip"\n\n' + GATE, True),
    ('[[gate]]\nname = "sign-off"\nkind = "manual"\n', True),
    ('[[gate]]\nname = "a"\ncommand = ["ruff", "check", "{files}"]\nshell = false\n', True),
    ("", False),
    ('[settings]\njobs = 1\n', False),
    ('gate = []\n', False),
    (GATE + 'when_chnged = ["*.py"]\n', False),
    ('[setings]\n\n' + GATE, False),
    ('[[gate]]\ncommand = "x"\n', False),
    ('[[gate]]\nname = "a"\n', False),
    (GATE + "roles = []\n", False),
    (GATE + 'timeout_seconds = "10"\n', False),
    (GATE + "timeout_seconds = 0\n", False),
    (GATE + "retries = 21\n", False),
    (GATE + 'category = "unitt"\n', False),
    (GATE + 'types = ["pyhton"]\n', False),
    (GATE + "types_or = []\n", False),
    (GATE + 'env = { "1A" = "x" }\n', False),
    (GATE + "env = { A = 1 }\n", False),
    (GATE + "phases = [0]\n", False),
    ('[settings]\njobs = 2000\n\n' + GATE, False),
    ('[settings]\ntimeout = 3\n\n' + GATE, False),
    (GATE + 'kind = "manual"\nshell = "yes"\n', False),
]


def _schema() -> dict[str, object]:
    text = resources.files("pytest_verifygate").joinpath("contract/contract.schema.json")
    return json.loads(text.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.mark.parametrize(("text", "valid"), CASES)
def test_schema_and_loader_agree(tmp_path: Path, text: str, valid: bool) -> None:
    path = tmp_path / "verify.toml"
    path.write_text(text, encoding="utf-8")
    try:
        load_contract(path)
        loaded = True
    except ContractError:
        loaded = False
    validator = jsonschema.Draft7Validator(_schema())
    assert (loaded, validator.is_valid(tomllib.loads(text))) == (valid, valid)


def test_the_schema_checks_a_pyproject_table(tmp_path: Path) -> None:
    table = tomllib.loads('[tool.verifygate]\n[[tool.verifygate.gate]]\nname = "a"\n'
                          'command = "true"\nwhen_chnged = ["x"]\n')["tool"]["verifygate"]
    errors = list(jsonschema.Draft7Validator(_schema()).iter_errors(table))
    assert [error.message for error in errors] == [
        "Additional properties are not allowed ('when_chnged' was unexpected)"]


# What only the loader can know: the schema accepts these, the loader refuses them.
LOADER_ONLY = [
    GATE + GATE,  # duplicate names
    GATE + 'needs = ["lint"]\n',  # a gate that needs itself
    GATE + 'files_regex = "(unclosed"\n',  # not a regex
    GATE + 'cwd = "../elsewhere"\n',  # outside the repository
]


@pytest.mark.parametrize("text", LOADER_ONLY)
def test_what_only_the_loader_checks(tmp_path: Path, text: str) -> None:
    path = tmp_path / "verify.toml"
    path.write_text(text, encoding="utf-8")
    assert jsonschema.Draft7Validator(_schema()).is_valid(tomllib.loads(text))
    with pytest.raises(ContractError):
        load_contract(path)


SCHEMA_FILE = Path(__file__).parents[1] / "src/pytest_verifygate/contract/contract.schema.json"


def test_the_schema_file_holds_each_key_as_the_key_table_declares_it() -> None:
    """contract/keys.py declares every key once; the shipped schema's properties are made from
    it. ``VERIFYGATE_WRITE_SCHEMA=1`` writes them after a change to the table."""
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    schema["definitions"]["gate"]["properties"] = {key.name: key.schema for key in keys.GATE}
    schema["definitions"]["settings"]["properties"] = {
        key.name: key.schema for key in keys.SETTINGS}
    text = json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
    if os.environ.get("VERIFYGATE_WRITE_SCHEMA") == "1":
        SCHEMA_FILE.write_text(text, encoding="utf-8")
    assert SCHEMA_FILE.read_text(encoding="utf-8") == text, (
        "contract.schema.json is not what contract/keys.py declares: run "
        "VERIFYGATE_WRITE_SCHEMA=1 pytest tests/test_contract_schema.py")


# Values of each kind of key, for contracts that the loader and the schema must judge alike:
# valid ones, then ones both refuse (the schema cannot know a gate's other gates, a regex's
# syntax or the repository: LOADER_ONLY).
VALUES: dict[str, tuple[list[object], list[object]]] = {
    "text": (["lint", " unit tests ", "Type check (mypy)"],
             ["", " ", "a\nb", "tab\tok but\x7f", 7]),
    "command": (["ruff check", ["ruff", "check"]],
                ["", "  ", [], ["python", ""], ["", "x"], 3]),
    "strings": ([["a"], ["a", "b c"]], [[], [""], [" "], ["a\u0000"], "a", [1]]),
    "patterns": ([["*.py"], ["src/**", "!docs/**"], [".github/**"], ["..x"]],
                 [[], ["./src/**"], ["src/../x"], ["a/./b"], ["."], ["!./x"], [""], ["x" * 1025]]),
    "names": ([["other"]], [[], [""], ["  "]]),
    "env": ([{}, {"A_B": "1", "X": ""}], [{"1A": "x"}, {"A": 1}, {"A": "\u0000"}, "A=1"]),
    "env_names": ([[], ["TOKEN"]], [["1X"], ["A-B"], "TOKEN"]),
    "modules": ([[], ["a.b_c"]], [["a..b"], ["a-b"], "a"]),
    "phases": ([[1, 40]], [[], [0], [1.5], ["1"], 1]),
    "seconds": ([1, 0.5, 300, 31536000], [0, -1, 31536001, "10", float("nan"), float("inf")]),
    "integer": ([0, 1, 1.0], [-1, 2.5, "1", True]),
    "boolean": ([True, False], ["yes", 1]),
    "choice": ([], ["nope", 1]),
    "file_types": ([["python"], ["text", "yaml"]], [[], ["pyhton"], "python"]),
    "regex": (["^src/", "_pb2\\.py$"], ["", " ", 1]),
    "cwd": ([".", "sub"], ["", " ", 1]),
    "ref": (["", "origin/main"], [1, ["main"]]),
}


def cases() -> list[tuple[str, object, bool]]:
    found: list[tuple[str, object, bool]] = []
    for table, declared in (("gate", keys.GATE), ("settings", keys.SETTINGS)):
        for key in declared:
            valid, invalid = VALUES[key.kind]
            valid = [*valid, *key.choices] if key.kind == "choice" else valid
            if key.empty is None and key.kind in ("strings", "patterns", "names"):
                # A list this key may leave empty.
                valid, invalid = [*valid, []], [value for value in invalid if value != []]
            if key.kind == "integer":
                valid = [key.bounds[0], key.bounds[1]]
                invalid = [key.bounds[0] - 1, key.bounds[1] + 1, *VALUES["integer"][1][1:]]
            found += [(f"{table}.{key.name}", value, True) for value in valid]
            found += [(f"{table}.{key.name}", value, False) for value in invalid]
    return found


@pytest.mark.parametrize(("key", "value", "valid"), cases(), ids=repr)
def test_the_loader_and_the_schema_judge_each_value_alike(tmp_path: Path, key: str, value: object,
                                                         valid: bool) -> None:
    table, name = key.split(".")
    gate: dict[str, object] = {"name": "a", "command": "true"}
    data: dict[str, object] = {"gate": [gate]}
    if table == "settings":
        data["settings"] = {name: value}
    else:
        gate[name] = value
        if name == "needs":
            data["gate"] = [gate, {"name": "other", "command": "true"}]
        if name == "kind" and value == "manual":
            del gate["command"]
    contract = tmp_path / "verify.toml"
    contract.write_text(_toml(data), encoding="utf-8")
    try:
        load_contract(contract)
        loaded = True
    except ContractError:
        loaded = False
    checked = jsonschema.Draft7Validator(_schema()).is_valid(tomllib.loads(_toml(data)))
    assert (loaded, checked) == (valid, valid)


def _toml(data: dict[str, object]) -> str:
    """``data`` as TOML, every value written as TOML's own literal."""
    def literal(value: object) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float) and value != value:
            return "nan"
        if isinstance(value, float) and value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        if isinstance(value, (int, float)):
            return repr(value)
        if isinstance(value, str):
            return json.dumps(value)  # a TOML basic string is a JSON string
        if isinstance(value, list):
            return "[" + ", ".join(literal(item) for item in value) + "]"
        assert isinstance(value, dict)
        return "{" + ", ".join(f"{json.dumps(k)} = {literal(v)}" for k, v in value.items()) + "}"

    lines = []
    if "settings" in data:
        assert isinstance(data["settings"], dict)
        lines += ["[settings]", *(f"{k} = {literal(v)}" for k, v in data["settings"].items())]
    for gate in data["gate"]:  # type: ignore[attr-defined]
        lines += ["[[gate]]", *(f"{k} = {literal(v)}" for k, v in gate.items())]
    return "\n".join(lines) + "\n"
