"""The contract's JSON Schema (shipped in the package for SchemaStore, taplo and Even Better
TOML) and the contract loader agree on the same cases."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import tomllib

from pytest_verifygate.contract import load_contract
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


def test_the_schema_names_every_key_the_loader_knows() -> None:
    from pytest_verifygate.contract import GATE_KEYS, SETTINGS_KEYS

    definitions = _schema()["definitions"]
    assert isinstance(definitions, dict)
    assert sorted(definitions["gate"]["properties"]) == sorted(GATE_KEYS)
    assert sorted(definitions["settings"]["properties"]) == sorted(SETTINGS_KEYS)
