"""The commonest command lines, read without argparse: ``verifygate run`` with nothing but
``--staged``, ``--all`` or ``--no-cache``, as pre-commit's hook and git hook managers run it.

argparse costs about 3 ms of every start-up (importing it, the gettext and locale lookups its
messages make, building the parser), a tenth of a commit's run. Any other command line
(another flag, a value, an abbreviation, ``--help``, a mistake) is read by ``parser``, which
stays the one definition of the command line: ``RUN_DEFAULTS`` are its ``run`` defaults, and
``test_cli.py`` checks that both read every command line this module takes alike. The table
of subcommands is here too: ``main`` needs it before it knows whether argparse is needed.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from types import SimpleNamespace

# Subcommand -> the module under ``pytest_verifygate.cli`` whose ``main(args)`` runs it.
COMMANDS = {"run": "run", "list": "listing", "agent-hook": "agent_hook", "merge": "merge",
            "install-agent-hook": "install_hook", "agent-status": "agent_status",
            "install-hook": "install_hook", "mcp": "mcp", "migrate": "migrate",
            "init": "init", "check": "check", "install": "install",
            "uninstall": "uninstall", "completion": "completion"}
# What argparse gives ``verifygate run`` for every option not on the command line.
RUN_DEFAULTS: dict[str, object] = {
    "command": "run", "names": [], "contract": None, "role": None, "phase": None, "shard": None,
    "staged": False, "changed_from": None, "files": None, "files_from": None, "all": False,
    "jobs": None, "json": None, "format": "text", "junit": None, "annotations": None,
    "no_cache": False, "color": "auto", "junit_family": "xunit2",
}
# The flags read here, each with the attribute it sets to True.
QUICK_FLAGS = {"--staged": "staged", "--all": "all", "--no-cache": "no_cache"}
# Flags argparse refuses together (one change-set source at most).
_EXCLUSIVE = ("staged", "all")


def quick_args(arguments: list[str]) -> SimpleNamespace | None:
    """What argparse would make of ``arguments``, when they are ``run`` and quick flags
    only, each at most once; None for any other command line (argparse reads it)."""
    if not arguments or arguments[0] != "run":
        return None
    values = dict(RUN_DEFAULTS)
    for argument in arguments[1:]:
        name = QUICK_FLAGS.get(argument)
        if name is None or values[name]:
            return None
        values[name] = True
    if all(values[name] for name in _EXCLUSIVE):
        return None  # argparse's usage error says which
    return SimpleNamespace(**values)
