"""``verifygate completion SHELL``: the shell completion script, made by shtab from the parser,
completing gate names from the contract (``verifygate completion --gates``) as ``pre-commit
run`` completes hook ids.

PYTEST_DONT_REWRITE
"""

import argparse
import sys

from pytest_verifygate.cli.exits import EXIT_OK
from pytest_verifygate.cli.parser import build_parser
from pytest_verifygate.errors import UsageError

# The functions parser.GATE_NAMES names, defined in the script.
_PREAMBLES = {
    "bash": """_verifygate_gate_names() {
  local name
  while IFS= read -r name; do
    [[ $name == "$1"* ]] && printf '%q\\n' "$name"
  done < <(verifygate completion --gates 2>/dev/null)
}""",
    "zsh": """_verifygate_gate_names() {
  local -a names
  names=(${(f)"$(verifygate completion --gates 2>/dev/null)"})
  compadd -a names
}""",
}


def main(args: argparse.Namespace) -> int:
    if args.gates:
        return _print_gate_names(args.contract)
    if args.shell is None:
        raise UsageError("completion: name a shell (bash, zsh, fish, tcsh), or --gates")
    try:
        import shtab
    except ImportError:
        raise UsageError("shell completion needs shtab: pip install "
                         "'pytest-verifygate[completion]' (or pip install shtab)") from None
    sys.stdout.write(shtab.complete(build_parser(), shell=args.shell,
                                    preamble=_PREAMBLES.get(args.shell, "")))
    return EXIT_OK


def _print_gate_names(contract: str | None) -> int:
    """Every gate's name, one a line (a contract that does not load is a usage error)."""
    from pytest_verifygate.engine import RunRequest, prepare
    from pytest_verifygate.git.changes import ChangeRequest

    plan = prepare(RunRequest(contract=contract, changes=ChangeRequest(all=True)))
    sys.stdout.write("".join(f"{gate.name}\n" for gate in plan.contract.gates))
    return EXIT_OK
