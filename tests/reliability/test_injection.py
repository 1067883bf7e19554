"""File names never reach a shell, never become options, and paths never leave the repository.

Every gate here runs for real, through the ``verifygate`` command or ``engine.run_gates``.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from pytest_verifygate.contract import load_contract
from pytest_verifygate.engine import run_gates
from pytest_verifygate.errors import ContractError
from pytest_verifygate.git.changes import ChangeRequest, compute_changes
from pytest_verifygate.selection import select_gates

from .support import DUMP_ARGS_SCRIPT, PY, decode_dump, toml_string, validate
from conftest import verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

INJECTIONS = [
    "$(touch pwned1)", "`touch pwned2`", "a;touch pwned3", "a && touch pwned4",
    "a | touch pwned5", "'; touch pwned6; '", '"; touch pwned7; "', "a\ntouch pwned8",
    "$(touch${IFS}pwned9)", "x' 'y", "-rf", "--help", "--output=pwned10", "\\", "a b",
]


def _gates_contract(prefix: str = "") -> str:
    array = ["sh", "-c", DUMP_ARGS_SCRIPT, "sh", "{files}"]
    string = f"sh -c {shlex.quote(DUMP_ARGS_SCRIPT)} sh {{files}}"
    script = "printf '%s\\0' {files} | od -An -v -tx1"
    return (
        f'{prefix}[[gate]]\nname = "array"\ncommand = [{", ".join(map(toml_string, array))}]\n'
        f'[[gate]]\nname = "string"\ncommand = {toml_string(string)}\n'
        f'[[gate]]\nname = "shell"\nshell = true\ncommand = {toml_string(script)}\n'
    )


def _as_arguments(names: list[str]) -> list[str]:
    """How to name these files on verifygate's own command line: argparse reads any word
    starting with "-" as an option, so such names are written ./-rf (or use --files-from)."""
    return ["./" + n if n.startswith("-") else n for n in names]


def _expected(names: list[str]) -> list[bytes]:
    return [os.fsencode("./" + n if n.startswith("-") else n) for n in sorted(names)]


def _no_pwned(*places: Path) -> None:
    for place in places:
        assert not [p.name for p in place.iterdir() if p.name.startswith("pwned")]


@pytest.mark.parametrize("via", ["--files", "--files-from"])
def test_hostile_names_through_the_cli(repo: Path, via: str) -> None:
    for name in INJECTIONS:
        write(repo / name, "x")
    write(repo / "verify.toml", _gates_contract())
    if via == "--files":
        done = verifygate("run", "--json", "report.json", "--files", *_as_arguments(INJECTIONS),
                          cwd=repo)
    else:
        listing = b"\0".join(os.fsencode(name) for name in INJECTIONS) + b"\0"
        done = verifygate("run", "--files-from", "-", "--json", "report.json", cwd=repo,
                          stdin=listing, text=False)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((repo / "report.json").read_text())
    validate(report)
    for gate in report["gates"]:
        assert decode_dump(gate["output_tail"]) == _expected(INJECTIONS), gate["name"]
    _no_pwned(repo, repo.parent)


@pytest.mark.parametrize("form", ["middle", "opentiger"])
def test_hostile_names_in_the_middle_and_opentiger_forms(repo: Path, form: str) -> None:
    """middle runs commands through sh (shell = true by default), openTiger does not."""
    for name in INJECTIONS:
        write(repo / name, "x")
    script = "printf '%s\\0' {files} | od -An -v -tx1"
    if form == "middle":
        write(repo / ".middle" / "verify.toml",
              f'[[gate]]\nname = "dump"\ncommand = {toml_string(script)}\n')
    else:
        string = f"sh -c {shlex.quote(DUMP_ARGS_SCRIPT)} sh {{files}}"
        write(repo / ".opentiger" / "verify.contract.json", json.dumps({"commands": [string]}))
    done = verifygate("run", "--format", "json", "--files", *_as_arguments(INJECTIONS),
                      cwd=repo)
    assert done.returncode == 0, done.stderr
    (gate,) = json.loads(done.stdout)["gates"]
    assert decode_dump(gate["output_tail"]) == _expected(INJECTIONS)
    _no_pwned(repo, repo.parent)


def test_dash_names_cannot_become_options_of_a_real_option_parser(repo: Path) -> None:
    """``cat`` parses options: a file named --help must be read, not obeyed; and the
    ``--`` convention (``cat -- {files}``) works together with the ``./`` prefix."""
    write(repo / "--help", "HELP-FILE\n")
    write(repo / "-n", "DASH-N-FILE\n")
    write(repo / "--version", "VERSION-FILE\n")
    write(repo / "verify.toml", """
[[gate]]
name = "plain"
command = "cat {files}"
[[gate]]
name = "dashdash"
command = "cat -- {files}"
[[gate]]
name = "shell"
shell = true
command = "cat {files}"
[[gate]]
name = "after-args"
command = ["cat", "-v", "{files}"]
""")
    contract = load_contract(repo / "verify.toml")
    changes = compute_changes(repo, ChangeRequest(files=["--help", "-n", "--version"]), cwd=repo)
    run = run_gates(contract, select_gates(contract, changes), changes)
    for result in run.results:
        assert result.outcome == "passed", (result.name, result.output_tail)
        # Exactly the three files' contents: no help text, no numbered lines, no version.
        assert result.output_tail == "HELP-FILE\nVERSION-FILE\nDASH-N-FILE\n", result.name
        assert " ".join(result.command).endswith(" ./--help ./--version ./-n"), result.name


@pytest.mark.parametrize(
    "cwd", ["..", "../..", "sub/../..", "/", "/tmp", "link-out", "link-out/x", "./link-in/../..",
            "sub/" + "../" * 10]
)
def test_cwd_cannot_escape_the_repository(repo: Path, tmp_path: Path, cwd: str) -> None:
    (repo / "sub").mkdir()
    outside = tmp_path / "outside"
    (outside / "x").mkdir(parents=True)
    (repo / "link-out").symlink_to(outside)
    (repo / "link-in").symlink_to(repo / "sub")
    write(repo / "verify.toml", f'[[gate]]\nname = "g"\ncommand = "true"\ncwd = "{cwd}"\n')
    with pytest.raises(ContractError, match=r"key 'cwd'.*outside the repository"):
        load_contract(repo / "verify.toml")


def test_cwd_through_a_symlink_inside_the_repository_is_fine(repo: Path) -> None:
    (repo / "sub").mkdir()
    (repo / "link-in").symlink_to(repo / "sub")
    write(repo / "verify.toml", '[[gate]]\nname = "g"\ncommand = "true"\ncwd = "link-in"\n')
    assert load_contract(repo / "verify.toml").gates[0].cwd == "sub"


PRINT_CWD = f'command = ["{PY}", "-c", "import os; print(os.getcwd())"]\n'


def test_a_symlinked_contract_is_anchored_where_it_is_found(repo: Path, tmp_path: Path) -> None:
    """verify.toml -> /elsewhere/verify.toml: the gates still run in this repository, and a
    cwd that is harmless next to the target cannot reach outside the repository."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write(elsewhere / "verify.toml", f'[[gate]]\nname = "where"\n{PRINT_CWD}')
    (repo / "verify.toml").symlink_to(elsewhere / "verify.toml")
    done = verifygate("run", "--all", "--format", "json", cwd=repo)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["contract"] == "verify.toml"
    assert report["gates"][0]["output_tail"].strip() == str(repo)
    # Beside the target, cwd = "../elsewhere" would be the target's own directory.
    write(elsewhere / "verify.toml",
          f'[[gate]]\nname = "where"\ncwd = "../elsewhere"\n{PRINT_CWD}')
    done = verifygate("run", "--all", cwd=repo)
    assert done.returncode == 2 and "outside the repository" in done.stderr


def test_an_explicit_contract_elsewhere_stays_inside_its_own_tree(
    repo: Path, tmp_path: Path
) -> None:
    """--contract naming a file outside this repository is allowed (whoever runs the command
    chose it) but is anchored to its own directory: its cwd cannot climb out of it."""
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere / "verify.toml", f'[[gate]]\nname = "where"\n{PRINT_CWD}')
    done = verifygate("run", "--all", "--contract", str(elsewhere / "verify.toml"),
                      "--format", "json", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gates"][0]["output_tail"].strip() == str(elsewhere)
    write(elsewhere / "verify.toml", f'[[gate]]\nname = "w"\ncwd = ".."\n{PRINT_CWD}')
    done = verifygate("run", "--all", "--contract", "../elsewhere/verify.toml", cwd=repo)
    assert done.returncode == 2 and "key 'cwd'" in done.stderr


def test_explicit_files_outside_the_project_are_ignored(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("outside")
    (repo / "ok.txt").write_text("inside")
    changes = compute_changes(repo, ChangeRequest(files=["../secret.txt", "/etc/passwd",
                                                         "ok.txt"]), cwd=repo)
    assert changes.files == ("ok.txt",)
