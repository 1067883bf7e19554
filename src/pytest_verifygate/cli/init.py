"""``verifygate init [--pyproject]``: write a starter contract (``starter``) as ``verify.toml``
or appended to ``pyproject.toml``; never over an existing contract.

PYTEST_DONT_REWRITE
"""

import argparse
import sys
from pathlib import Path

from pytest_verifygate.cli.exits import EXIT_OK
from pytest_verifygate.contract.writer import (
    check_contract_text,
    contract_text,
    native_contract,
    write_new,
)
from pytest_verifygate.errors import UsageError
from pytest_verifygate.starter import starter_gates

_NEXT = "next: verifygate check, then verifygate list --all"


def main(args: argparse.Namespace) -> int:
    root = Path.cwd()
    _refuse_existing(root)
    starter = starter_gates(root)
    if not starter.gates and starter.unresolved:
        names = ", ".join(str(gate["name"]) for gate in starter.unresolved)
        raise UsageError(f"found {names}, but none is installed here: "
                         "install the project's tools (or activate its virtualenv), then run "
                         "verifygate init again")
    if not starter.gates:
        raise UsageError("found no tool to make a gate of (ruff, black, flake8, mypy, pyright, "
                         "pytest, sphinx, pre-commit, tox, nox): write verify.toml by hand "
                         "(see the documentation's Getting started)")
    comments = ["Written by verifygate init from what this project uses; edit freely.",
                "Every key: the documentation's reference, Contract keys.", *starter.suggestions]
    table = "tool.verifygate" if args.pyproject else ""
    # Gates whose program is not installed here, as comments to uncomment once it is.
    later = "".join(["\n# Not installed here yet (install, then uncomment):\n", *(
        f"# {line}".rstrip() + "\n" for line in contract_text(
            starter.unresolved, table=table).splitlines())]) if starter.unresolved else ""
    if args.pyproject:
        pyproject = root / "pyproject.toml"
        if not pyproject.is_file():
            raise UsageError("no pyproject.toml here for --pyproject: run verifygate init "
                             "without it to write verify.toml")
        text = contract_text(starter.gates, comments=comments, table=table) + later
        existing = pyproject.read_text(encoding="utf-8")
        check_contract_text(existing + "\n" + text, "pyproject.toml", root, pyproject=True)
        with open(pyproject, "a", encoding="utf-8") as stream:
            stream.write(("\n" if existing and not existing.endswith("\n\n") else "") + text)
        written = "[tool.verifygate] to pyproject.toml"
    else:
        text = contract_text(starter.gates, comments=comments) + later
        check_contract_text(text, "verify.toml", root)
        write_new(root / "verify.toml", text)
        written = "verify.toml"
    for note in starter.notes:
        print(f"verifygate: init: {note}", file=sys.stderr)
    print(f"verifygate: wrote {written}: {len(starter.gates)} gate(s) "
          f"({', '.join(starter.found)}); {_NEXT}")
    return EXIT_OK


def _refuse_existing(root: Path) -> None:
    existing = native_contract(root)
    if existing is not None:
        what = "has [tool.verifygate]" if existing.name == "pyproject.toml" else "exists"
        raise UsageError(f"{existing.name} already {what}: not overwritten (verifygate list "
                         "shows its gates; verifygate migrate adds a pre-commit config's)")
