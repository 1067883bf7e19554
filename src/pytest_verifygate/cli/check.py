"""``verifygate check``: the setup's problems found before running (``setup_check``), one
line each.

PYTEST_DONT_REWRITE
"""

import argparse
import os
import sys
from pathlib import Path

from pytest_verifygate.cli.exits import EXIT_FAILED, EXIT_OK
from pytest_verifygate.contract import display_path, find_contract, find_repo_root
from pytest_verifygate.errors import ContractError
from pytest_verifygate.setup_check import (
    ERROR,
    Finding,
    contract_file_findings,
    gate_findings,
    hook_findings,
)


def main(args: argparse.Namespace) -> int:
    from pytest_verifygate.engine import RunRequest, prepare
    from pytest_verifygate.git.changes import ChangeRequest, all_files

    environ = dict(os.environ)
    start = Path.cwd()
    found = Path(args.contract) if args.contract else find_contract(start)
    findings: list[Finding] = list(contract_file_findings(
        (found.parent if found is not None else start).resolve()))
    repo_root = find_repo_root(start)
    checked = "no contract" if found is None else f"{display_path(found)} (not loaded)"
    try:
        contract = prepare(RunRequest(contract=args.contract, start=start,
                                      changes=ChangeRequest(all=True))).contract
    except ContractError as exc:
        findings.append(Finding(ERROR, "contract", str(exc)))
    else:
        checked = f"{display_path(contract.path)}: {len(contract.gates)} gate(s)"
        findings += gate_findings(contract, all_files(contract.root), environ)
        repo_root = contract.repo_root
    if repo_root is not None:
        findings += hook_findings(repo_root, environ)
    for finding in findings:
        print(f"verifygate check: {finding.level}: {finding.where}: {finding.message}")
    errors = sum(finding.level == ERROR for finding in findings)
    print(f"verifygate check: {checked}: {errors} error(s), {len(findings) - errors} "
          f"warning(s): the setup is {'not sound' if errors else 'sound'}",
          file=sys.stderr if errors else sys.stdout)
    return EXIT_FAILED if errors else EXIT_OK
