"""The contract's JSON Schema under the checks SchemaStore's CI runs on every schema it hosts
(``node cli.js check``): a ``$schema`` that is not "too high" (draft-07), an ``$id`` that is
a URL, a compile by Ajv (pinned in package.json) in strict mode, and the same valid and
invalid contracts as ``tests/test_contract_schema.py``, validated by Ajv; and taplo, the
TOML checker of editors, reading it from a ``#:schema`` line.
"""

from __future__ import annotations

import json
import subprocess
from importlib import resources
from pathlib import Path

import pytest
import tomllib

from test_contract_schema import CASES

from .harness import E2E_DIR, NODE_BIN

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

GOOD = '[[gate]]\nname = "lint"\ncommand = "ruff check"\n'

# Ajv's draft-07 class with strict: true, as SchemaStore's ajvFactory makes it for a schema
# not listed in its ajvNotStrictMode; a strict-mode problem throws at compile.
AJV = """
const Ajv = require("ajv");
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const validate = new Ajv({strict: true, allErrors: true}).compile(input.schema);
console.log(JSON.stringify(input.documents.map((document) => validate(document))));
"""


def test_ajv_in_strict_mode_compiles_the_schema_and_agrees(node_tools: None) -> None:
    text = resources.files("pytest_verifygate").joinpath("contract/contract.schema.json")
    schema = json.loads(text.read_text(encoding="utf-8"))
    # SchemaStore's pre-checks: draft-07 (2019-09 and 2020-12 are refused as too high), and
    # an $id that is a URL of the catalog.
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["$id"] == "https://www.schemastore.org/verifygate.json"
    documents = [tomllib.loads(toml) for toml, _ in CASES]
    done = subprocess.run(["node", "-e", AJV], cwd=E2E_DIR, capture_output=True, text=True,
                          input=json.dumps({"schema": schema, "documents": documents}),
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [valid for _, valid in CASES]


def test_taplo_checks_a_contract_against_the_shipped_schema(node_tools: None,
                                                            tmp_path: Path) -> None:
    # What the documentation tells editor users to do: a #:schema line naming the schema the
    # package ships (taplo is what Even Better TOML runs).
    schema = resources.files("pytest_verifygate").joinpath("contract/contract.schema.json")
    head = f"#:schema {schema}\n\n"
    for name, body in (("good", GOOD), ("typo", GOOD + 'when_chnged = ["*.py"]\n')):
        (tmp_path / f"{name}.toml").write_text(head + body, encoding="utf-8")
    done = {name: subprocess.run([str(NODE_BIN / "taplo"), "check", f"{name}.toml"],
                                 cwd=tmp_path, capture_output=True, text=True, timeout=60)
            for name in ("good", "typo")}
    assert done["good"].returncode == 0, done["good"].stderr
    assert done["typo"].returncode != 0
    assert "'when_chnged' was unexpected" in done["typo"].stderr
