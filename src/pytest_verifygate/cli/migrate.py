"""``verifygate migrate [PATH]``: a contract from a ``.pre-commit-config.yaml`` or a
``lefthook.yml`` (``migrate/``), or its gates added to the native contract beside it (what
``init`` wrote); never written over an existing file.

PYTEST_DONT_REWRITE
"""

import argparse
import sys
from pathlib import Path

from pytest_verifygate.cli.exits import EXIT_OK
from pytest_verifygate.contract.writer import (
    check_contract_text,
    contract_table,
    contract_text,
    native_contract,
    write_new,
)
from pytest_verifygate.errors import UsageError
from pytest_verifygate.migrate import Migration, load_yaml

PRE_COMMIT_NAMES = (".pre-commit-config.yaml", ".pre-commit-config.yml")
LEFTHOOK_NAMES = ("lefthook.yml", ".lefthook.yml", "lefthook.yaml", ".lefthook.yaml")


def main(args: argparse.Namespace) -> int:
    source = _source(args.path)
    try:
        text = source.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {source}: {getattr(exc, 'strerror', None) or exc}"
                         ) from None
    config = load_yaml(text, str(source))
    if "lefthook" in source.name:
        from pytest_verifygate.migrate.lefthook import from_lefthook

        migration = from_lefthook(config, str(source))
    else:
        from pytest_verifygate.migrate.precommit import from_pre_commit, frozen_revs

        migration = from_pre_commit(config, str(source), frozen_revs(text))
    if not migration.gates:
        raise UsageError(f"{source}: no hook carries over: "
                         + "; ".join(migration.notes or ["it defines no hooks"]))
    comments = [f"Migrated from {source.name} by verifygate migrate."]
    if migration.settings.get("jobs") == 1:
        comments.append("jobs = 1: one gate at a time in the config's order, as pre-commit "
                        "runs hooks (a fixer rewrites files before later gates read them).")
    if migration.notes:
        comments.append("Not carried over, or needing you (what to do):")
        comments += [f"- {note}" for note in migration.notes]
    output = Path(args.output) if args.output not in (None, "-") else (
        source.parent / "verify.toml")
    existing = native_contract(source.parent) if args.output is None else None
    if existing is not None:
        return _add_to(existing, migration, comments, source)
    text = contract_text(migration.gates, settings=migration.settings, comments=comments)
    check_contract_text(text, str(output), source.parent.resolve())
    if args.output == "-":
        sys.stdout.write(text)
    else:
        write_new(output, text)
        print(f"verifygate: wrote {output}: {len(migration.gates)} gate(s) from {source.name}")
    for note in migration.notes:
        print(f"verifygate: migrate: {note}", file=sys.stderr)
    return EXIT_OK


def _add_to(contract: Path, migration: Migration, comments: list[str], source: Path) -> int:
    """Append the migrated gates to ``contract`` (as ``init`` wrote it, or by hand), but those
    whose name it has already: they are most often the same tool, kept as they are."""
    existing = contract.read_text(encoding="utf-8-sig")
    table = contract_table(contract) or {}
    taken = {str(gate.get("name")) for gate in table.get("gate", []) if isinstance(gate, dict)}
    added = [gate for gate in migration.gates if gate["name"] not in taken]
    kept = [str(gate["name"]) for gate in migration.gates if gate["name"] in taken]
    notes = [*migration.notes, *(f"gate {name!r} is in {contract.name} already: kept as it is"
                                 for name in kept)]
    if added:
        pyproject = contract.name == "pyproject.toml"
        # Settings of its own stay: the migrated ones are written only where there are none.
        text = contract_text(added, settings=None if "settings" in table else migration.settings,
                             comments=comments, table="tool.verifygate" if pyproject else "")
        separator = "" if existing.endswith("\n\n") or not existing else (
            "\n" if existing.endswith("\n") else "\n\n")
        check_contract_text(existing + separator + text, contract.name,
                            contract.parent.resolve(), pyproject=pyproject)
        with open(contract, "a", encoding="utf-8") as stream:
            stream.write(separator + text)
    for note in notes:
        print(f"verifygate: migrate: {note}", file=sys.stderr)
    print(f"verifygate: added {len(added)} gate(s) from {source.name} to {contract}")
    return EXIT_OK


def _source(path: str | None) -> Path:
    """``path``, else the first config found in it (a directory) or the current directory."""
    given = Path(path if path is not None else ".")
    if not given.is_dir():
        if not given.is_file():
            raise UsageError(f"{given}: no such file")
        return given
    for name in (*PRE_COMMIT_NAMES, *LEFTHOOK_NAMES):
        if (given / name).is_file():
            return given / name
    if path is None:
        raise UsageError(f"no {PRE_COMMIT_NAMES[0]} or {LEFTHOOK_NAMES[0]} here: name the "
                         "file to migrate (verifygate migrate PATH)")
    raise UsageError(f"{given} has no {PRE_COMMIT_NAMES[0]} or {LEFTHOOK_NAMES[0]}")
