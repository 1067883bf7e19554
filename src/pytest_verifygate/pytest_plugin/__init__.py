"""The pytest plugin (entry point ``pytest11: verifygate``): ``pytest --verify-contract`` makes
every selected gate a pytest item.

This module is the wiring only: the hookspecs, the options (``options.py``), and on
``--verify-contract`` one ``VerifyGateSession`` (``session.py``) registered for the run, which
collects the contract's gates as ``GateItem`` items (``items.py``). Loading, selection, running,
classification and the report are the engine's (``pytest_verifygate.engine``).

Without ``--verify-contract`` the plugin registers its options, marker and hookspecs and
nothing else: the engine is not imported, no collector hook is active, nothing is collected.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from pytest_verifygate.pytest_plugin.options import add_options

if TYPE_CHECKING:
    from pytest_verifygate.pytest_plugin.session import VerifyGateSession

_SESSION_KEY: pytest.StashKey[VerifyGateSession] = pytest.StashKey()
# The gate a pytest run is nested in: the runner sets VERIFYGATE_GATE in every gate's
# environment, and a pytest run inside a gate ignores --verify-contract (with
# `addopts = --verify-contract` and a gate running pytest, gates would run gates forever).
_NESTED_KEY = pytest.StashKey[str]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    # Always registered, so a conftest implementing them never fails validation.
    from pytest_verifygate import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    # argparse hands an optional-value option the next word, so `--verify-contract tests/`
    # would read `tests/` as the contract. A word that cannot be a contract file is a test
    # path: rewrite the flag to its explicit empty form so the word stays positional. A
    # contract file named on the command line (`pytest --verify-contract ci/gates.toml`) is
    # both the contract and a path to collect, as pytest collects any file it is given: its
    # gates, and no other tests unless other paths are named. In addopts it only chooses the
    # contract, as `--verify-contract=PATH` does anywhere.
    command_line = len(args) - len(early_config.invocation_params.args)
    for index, word in enumerate(args[:-1]):
        if word == "--":
            return
        if word != "--verify-contract":
            continue
        following = args[index + 1]
        if not _could_be_contract(following):
            args[index] = "--verify-contract="
        elif index >= command_line:
            args[index] = f"--verify-contract={following}"


def _could_be_contract(word: str) -> bool:
    return (
        not word.startswith("-")
        and "::" not in word
        and word.endswith((".toml", ".json"))
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "verifygate: a gate of the verify contract")
    if config.getoption("verify_contract") is None:
        return
    from pytest_verifygate.runner.process import GATE_ENV

    if os.environ.get(GATE_ENV):
        config.stash[_NESTED_KEY] = os.environ[GATE_ENV]
        return
    from pytest_verifygate.errors import VerifyGateError
    from pytest_verifygate.pytest_plugin.items import SOURCE_KEY
    from pytest_verifygate.pytest_plugin.session import PLUGIN_NAME, VerifyGateSession

    try:
        session = VerifyGateSession.from_config(config)
    except VerifyGateError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_SESSION_KEY] = config.stash[SOURCE_KEY] = session
    config.pluginmanager.register(session, PLUGIN_NAME)


def pytest_report_header(config: pytest.Config) -> str | None:
    gate = config.stash.get(_NESTED_KEY, None)
    if gate is None:
        return None
    return f"verifygate: running inside gate {gate!r}: --verify-contract is ignored"


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION_KEY, None)
    if session is not None:
        session.close_runner()
        session.remember_outputs()
        session.interruptible.__exit__()
        session.end_interrupted_if_signalled()  # a signal during the summary counts too
        del config.stash[_SESSION_KEY]
        from pytest_verifygate.pytest_plugin.items import SOURCE_KEY

        del config.stash[SOURCE_KEY]
        config.pluginmanager.unregister(session)
