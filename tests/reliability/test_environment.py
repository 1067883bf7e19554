"""Gates inherit the environment untouched, and no secret value reaches a report or digest."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_verifygate.engine import to_report
from pytest_verifygate.report.digest import to_digest
from pytest_verifygate.report.redact import (
    MASK,
    MIN_LISTED_SECRET_CHARS,
    MIN_NAMED_SECRET_CHARS,
    Redactor,
    is_secret_name,
)

from .support import PY, examples, run_contract, validate
from conftest import verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

DUMP_ENV = f'command = ["{PY}", "-c", "import json, os; print(json.dumps(dict(os.environ)))"]\n'


def test_gates_see_the_parent_environment_exactly(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing removed, and nothing added but VERIFYGATE_GATE (how a pytest inside a gate
    knows not to run gates again) and VERIFYGATE_TREE (the marks that find the gate's
    processes wherever they go): CI, NO_COLOR and friends are the user's business."""
    monkeypatch.setenv("CI", "from-the-parent")
    monkeypatch.setenv("TERM", "dumb")
    for name in ("NO_COLOR", "FORCE_COLOR", "PY_COLORS", "CLICOLOR_FORCE"):
        monkeypatch.delenv(name, raising=False)
    contract = (f'[[gate]]\nname = "inherit"\n{DUMP_ENV}'
                f'[[gate]]\nname = "set"\nenv = {{ NO_COLOR = "1", CI = "from-contract" }}\n'
                f'{DUMP_ENV}')
    monkeypatch.setenv("VERIFYGATE_TREE", "vg-outer-mark")  # as inside another gate
    results = {r.name: r for r in run_contract(repo, contract).results}
    seen = {name: json.loads(result.output_tail) for name, result in results.items()}
    marks = {name: env.pop("VERIFYGATE_TREE").split() for name, env in seen.items()}
    parent = {k: v for k, v in os.environ.items() if k != "VERIFYGATE_TREE"}
    assert seen["inherit"] == {**parent, "VERIFYGATE_GATE": "inherit"}
    assert seen["set"] == {
        **parent, "NO_COLOR": "1", "CI": "from-contract", "VERIFYGATE_GATE": "set"}
    # The outer mark is kept (an outer run finds these processes too), one of its own added.
    assert [len(m) for m in marks.values()] == [2, 2]
    assert marks["inherit"][0] == marks["set"][0] == "vg-outer-mark"
    assert marks["inherit"][1] != marks["set"][1]


def test_the_cli_passes_ci_and_no_color_through(repo: Path) -> None:
    write(repo / "verify.toml", f'[[gate]]\nname = "show"\ncommand = ["{PY}", "-c", '
          '"import os; print(os.environ.get(\'CI\'), os.environ.get(\'NO_COLOR\'))"]\n')
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR")}
    for parent, shown in ((env, "None None"), ({**env, "CI": "true", "NO_COLOR": ""}, "true ")):
        done = subprocess.run(
            [PY, "-m", "pytest_verifygate.cli", "run", "--all", "--format", "json"],
            cwd=repo, capture_output=True, env=parent)
        assert json.loads(done.stdout)["gates"][0]["output_tail"] == shown + "\n"


SECRETS = {
    "GITHUB_TOKEN": "ghp_parentTokenValue123",
    "db_password": "lower-case-name-pw",
    "STRIPE_API_KEY": "sk_live_abcdef123456",
    "CLIENT_SECRET": "client-secret-value-9",
}
LISTED = {"PARENT_THING": "parent-listed-value"}
CONTRACT_SECRETS = ["deploy-key-12345", "tok-prefix-777", "shelltok-99999", "literalpw123"]


DUMP_ALL = "import os, sys\nfor k, v in os.environ.items(): print(f'{k}={v}')\nsys.exit(1)"
PRINT_LISTED = ("import os, sys; e = os.environ\n"
                "print('key is', e['DEPLOY_KEY'], 'and', e['PARENT_THING'], e['VISIBLE'])\n"
                "sys.exit(1)")
PRINT_PREFIX = 'import os, sys; print(os.environ["API_TOKEN"]); sys.exit(3)'


def _secret_contract() -> str:
    return f"""
[[gate]]
name = "env-dump"
command = [{json.dumps(PY)}, "-c", {json.dumps(DUMP_ALL)}]

[[gate]]
name = "listed"
env = {{ DEPLOY_KEY = "deploy-key-12345", VISIBLE = "plain-value-123" }}
secret_env = ["DEPLOY_KEY", "PARENT_THING"]
command = [{json.dumps(PY)}, "-c", {json.dumps(PRINT_LISTED)}]

[[gate]]
name = "prefix"
command = {json.dumps(f"API_TOKEN=tok-prefix-777 {PY} -c {shlex.quote(PRINT_PREFIX)}")}

[[gate]]
name = "shell-script"
shell = true
command = "SERVICE_TOKEN=shelltok-99999; echo \\"using $SERVICE_TOKEN\\"; exit 1"

[[gate]]
name = "unsupported"
command = "MY_PASSWORD=literalpw123 deploy | tee log"
"""


def _assert_no_secret(text: str) -> None:
    for value in [*SECRETS.values(), *LISTED.values(), *CONTRACT_SECRETS]:
        assert value not in text, value


def test_secrets_never_reach_the_report_or_the_digest(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {**SECRETS, **LISTED, "PLAIN_SETTING": "visible-value-42"}.items():
        monkeypatch.setenv(name, value)
    run = run_contract(repo, _secret_contract())
    results = {r.name: r for r in run.results}
    # The gates printed the secrets; what was captured holds them masked already...
    for name in ("env-dump", "listed", "shell-script"):
        _assert_no_secret(results[name].output_tail)
        assert MASK in results[name].output_tail, name
    # ... and so does the report, the thing that leaves the machine.
    report = to_report(run)
    validate(report)
    text = json.dumps(report, ensure_ascii=False)
    _assert_no_secret(text)
    assert "visible-value-42" in text and "plain-value-123" in text  # only secrets go
    gates = {g["name"]: g for g in report["gates"]}
    assert f"GITHUB_TOKEN={MASK}" in gates["env-dump"]["output_tail"]
    assert gates["listed"]["env"] == {"DEPLOY_KEY": MASK, "VISIBLE": "plain-value-123"}
    assert gates["prefix"]["env"] == {"API_TOKEN": MASK}
    assert gates["unsupported"]["command"][0] == f"MY_PASSWORD={MASK}"
    assert f"SERVICE_TOKEN={MASK}" in gates["shell-script"]["command"][2]
    _assert_no_secret(to_digest(report, root=str(repo)))


def test_the_cli_json_and_agent_output_are_redacted(repo: Path) -> None:
    write(repo / "verify.toml", _secret_contract())
    env = {**SECRETS, **LISTED}
    done = verifygate("run", "--all", "--json", "report.json", "--format", "agent", cwd=repo,
                      env=env)
    assert done.returncode == 1
    _assert_no_secret(done.stdout + done.stderr)
    _assert_no_secret((repo / "report.json").read_text())
    done = verifygate("run", "--all", "--format", "json", cwd=repo, env=env)
    _assert_no_secret(done.stdout)


@pytest.mark.parametrize(
    ("name", "secret"),
    [("GITHUB_TOKEN", True), ("github_token", True), ("AWS_SECRET_ACCESS_KEY", True),
     ("DB_PASSWORD", True), ("PGPASSWD", True), ("OPENAI_API_KEY", True), ("APIKEY", True),
     ("SSH_PRIVATE_KEY", True), ("PATH", False), ("HOME", False), ("KEYBOARD", False),
     ("CI", False)],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_short_and_boolean_values_are_not_erased_everywhere() -> None:
    """TOKENIZERS_PARALLELISM=false is not a secret worth erasing every "false" for."""
    from pytest_verifygate.report.redact import redactor_for

    redactor = redactor_for((), {"TOKENIZERS_PARALLELISM": "false", "API_KEY": "k3y"})
    assert redactor.text("assert false is True") == "assert false is True"
    assert redactor.text("API_KEY=k3y") == f"API_KEY={MASK}"  # as an assignment it goes
    assert redactor.text("max_tokens=512") == "max_tokens=512"


SECRET_VALUES = st.text(st.characters(codec="utf-8", exclude_characters="*"),
                        min_size=MIN_LISTED_SECRET_CHARS, max_size=12)


@examples(200)
@given(secrets=st.lists(SECRET_VALUES, min_size=1, max_size=4),
       pieces=st.lists(st.text(max_size=10), max_size=6), data=st.data())
def test_no_secret_survives_redaction(secrets: list[str], pieces: list[str],
                                      data: st.DataObject) -> None:
    text = "".join(piece + data.draw(st.sampled_from(secrets)) for piece in pieces) + "tail"
    redacted = Redactor(values=tuple(secrets)).text(text)
    for secret in secrets:
        assert secret not in redacted
    assert len(redacted) <= len(text)  # the mask is never longer than what it hides
    assert MIN_NAMED_SECRET_CHARS >= MIN_LISTED_SECRET_CHARS >= len(MASK)
