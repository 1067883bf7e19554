"""The pytest plugin's wiring: the hookspecs, the options, and with ``--verify-contract`` the
run's ``VerifyGateSession``; without the flag the engine is not imported.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path

import pytest

from pytest_verifygate.pytest_plugin.options import add_options

# A pytest run inside a gate ignores --verify-contract (with `addopts = --verify-contract` and a
# gate running pytest, gates would run gates forever) and says so in its header.
_NESTED_KEY = pytest.StashKey[str]()
# The work tree whose work this session's commit check set aside, for the pytest processes it
# starts (xdist's workers, and pytest under a test) to leave alone.
ASIDE_ENV = "VERIFYGATE_WORK_SET_ASIDE"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    # Always registered, so a conftest implementing them never fails validation.
    from pytest_verifygate import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    # argparse would read `--verify-contract tests/` as the contract tests/: a word that cannot
    # be a contract file stays positional. A contract file named on the command line is also
    # a path to collect, as pytest collects any file it is given; in addopts it only chooses
    # the contract, as `--verify-contract=PATH` does anywhere.
    command_line = len(args) - len(early_config.invocation_params.args)
    for index, word in enumerate(args[:-1]):
        if word == "--":
            break
        if word != "--verify-contract":
            continue
        following = args[index + 1]
        if following.startswith("-") or "::" in following or not following.endswith(
                (".toml", ".json")):
            args[index] = "--verify-contract="
        elif index >= command_line:
            args[index] = f"--verify-contract={following}"
    _set_aside(early_config)


def _set_aside(config: pytest.Config) -> None:
    """A commit's check (``--verify-staged``, or under pre-commit's commit stage) sees the
    work tree as the commit records it from before the first ``conftest.py`` is imported
    (docs: pre-commit and git hooks); xdist's workers, and any pytest under it, see their
    controller's (``ASIDE_ENV``: ``PYTEST_XDIST_WORKER`` is also inherited by a pytest that a
    test of an unrelated xdist session starts, which must check on its own)."""
    known = config.known_args_namespace
    if getattr(known, "verify_contract", None) is None:
        return  # without the option, nothing of the engine is imported
    from pytest_verifygate.runner.process import GATE_ENV

    if os.environ.get(GATE_ENV):
        return
    from pytest_verifygate.errors import VerifyGateError
    from pytest_verifygate.git.changes import ChangeRequest
    from pytest_verifygate.git.set_aside import at_work, set_aside_for
    from pytest_verifygate.pytest_plugin.items import ASIDE_KEY

    # Only while that check is at work: a variable alone never turns a commit's check off.
    here, aside_top = config.invocation_params.dir, os.environ.get(ASIDE_ENV)
    if aside_top and here.is_relative_to(aside_top) and at_work(Path(aside_top)):
        return

    changes = ChangeRequest(files=known.verify_files, staged=known.verify_staged,
                            changed_from=known.verify_changed_from
                            or str(config.getini("verify_changed_from") or "").strip() or None,
                            all=known.verify_all)
    lines: list[str] = []
    try:
        aside = set_aside_for(changes, here, lines.append).__enter__()
    except VerifyGateError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[ASIDE_KEY] = (aside, lines)
    if aside is not None:
        os.environ[ASIDE_ENV] = str(aside.target.top)
        # pytest ends without pytest_unconfigure when it fails before configuring (a
        # conftest.py that cannot be imported, an unknown option): the work comes back then too.
        atexit.register(aside.close)


def pytest_unconfigure(config: pytest.Config) -> None:
    from pytest_verifygate.pytest_plugin.items import ASIDE_KEY

    aside, _ = config.stash.get(ASIDE_KEY, (None, []))
    if aside is not None:  # put back, once, also when the session never began
        os.environ.pop(ASIDE_ENV, None)
        aside.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "verifygate: a gate of the verify contract")
    if config.getoption("verify_contract") is None:
        return
    from pytest_verifygate.runner.process import GATE_ENV

    if os.environ.get(GATE_ENV):
        config.stash[_NESTED_KEY] = (f"verifygate: running inside gate {os.environ[GATE_ENV]!r}: "
                                     "--verify-contract is ignored")
        return
    from pytest_verifygate.errors import VerifyGateError
    from pytest_verifygate.pytest_plugin.items import SESSION_KEY
    from pytest_verifygate.pytest_plugin.session import VerifyGateSession

    try:
        session = VerifyGateSession(config)
    except VerifyGateError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, "verifygate-session")


def pytest_report_header(config: pytest.Config) -> str | None:
    return config.stash.get(_NESTED_KEY, None)
