"""The pytest plugin's wiring: the hookspecs, the options, and with ``--verify-contract`` the
run's ``VerifyGateSession``; without the flag the engine is not imported.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os

import pytest

from pytest_verifygate.pytest_plugin.options import add_options

# A pytest run inside a gate ignores --verify-contract (with `addopts = --verify-contract` and a
# gate running pytest, gates would run gates forever) and says so in its header.
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
    # argparse would read `--verify-contract tests/` as the contract tests/: a word that cannot
    # be a contract file stays positional. A contract file named on the command line is also
    # a path to collect, as pytest collects any file it is given; in addopts it only chooses
    # the contract, as `--verify-contract=PATH` does anywhere.
    command_line = len(args) - len(early_config.invocation_params.args)
    for index, word in enumerate(args[:-1]):
        if word == "--":
            return
        if word != "--verify-contract":
            continue
        following = args[index + 1]
        if following.startswith("-") or "::" in following or not following.endswith(
                (".toml", ".json")):
            args[index] = "--verify-contract="
        elif index >= command_line:
            args[index] = f"--verify-contract={following}"


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
