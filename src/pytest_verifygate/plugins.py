"""Plugins outside pytest: the modules a contract names in ``[settings] plugins``.

Inside pytest, plugins implement our hooks as ordinary pytest plugins (and the contract's are
registered with pytest too). The ``verifygate`` command, the agent hooks and the MCP server
load the contract's plugins into a pluggy manager of their own, so the same hook
implementations run there. A plugin can change a verdict, so only the contract, reviewed like
the code, decides which run: an installed package does not join by being installed.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, cast

from pytest_verifygate.contract.discover import display_path
from pytest_verifygate.errors import ContractError

if TYPE_CHECKING:
    from pytest_verifygate.contract import Contract
    from pytest_verifygate.hookspecs import GateHooks


def plugin_error(contract: Contract, name: str, exc: Exception) -> ContractError:
    """A plugin of the contract that cannot be loaded: the run would not be the one the
    contract declares, so it is a contract error, never a run without it."""
    return ContractError(display_path(contract.path),
                         f"cannot load plugin {name!r}: {type(exc).__name__}: {exc}",
                         key="settings.plugins",
                         hint="install it where verifygate runs, or remove it")


def plugin_hook(contract: Contract) -> GateHooks | None:
    """A pluggy hook relay with our hookspecs and the contract's plugins; None when it names
    none (then neither pluggy nor a plugin is imported)."""
    if not contract.settings.plugins:
        return None
    import pluggy

    from pytest_verifygate import hookspecs

    manager = pluggy.PluginManager("pytest")
    manager.add_hookspecs(hookspecs)
    for name in contract.settings.plugins:
        try:  # a plugin's import, or pluggy checking its hooks, may raise anything
            manager.register(importlib.import_module(name), name)
        except Exception as exc:
            raise plugin_error(contract, name, exc) from None
    return cast("GateHooks", manager.hook)
