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
from pytest_verifygate.contract.model import PYPROJECT_KEY_PREFIX
from pytest_verifygate.errors import ContractError

if TYPE_CHECKING:
    import pluggy

    from pytest_verifygate.contract import Contract
    from pytest_verifygate.hookspecs import GateHooks


def _plugin_error(contract: Contract, name: str, exc: BaseException) -> ContractError:
    """A plugin of the contract that cannot be loaded: the run would not be the one the
    contract declares, so it is a contract error, never a run without it."""
    table = PYPROJECT_KEY_PREFIX if contract.format == "pyproject" else ""
    return ContractError(display_path(contract.path),
                         f"cannot load plugin {name!r}: {type(exc).__name__}: {exc}",
                         key=f"{table}settings.plugins",
                         hint="install it where verifygate runs, or remove it")


def register_plugins(contract: Contract, manager: pluggy.PluginManager) -> None:
    """Import the contract's plugins and register them with ``manager`` (ours, or pytest's,
    which may hold one already). A plugin that cannot be imported, is blocked (``-p no:``)
    or clashes with a plugin of its name is a contract error."""
    import inspect  # only for a contract that names plugins: most do not

    import pluggy

    mark = pluggy.HookimplMarker("pytest")
    for name in contract.settings.plugins:
        try:
            module = importlib.import_module(name)
            if manager.is_registered(module):
                continue
            # Unmarked hook functions count, as pytest counts them: one plugin, one meaning.
            for attribute, value in vars(module).items():
                if (attribute.startswith("pytest_verifygate_") and inspect.isroutine(value)
                        and manager.parse_hookimpl_opts(module, attribute) is None):
                    mark(value)
            if manager.register(module, name) is None:
                raise ValueError("it is blocked (-p no:...)")
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a plugin's import may raise anything, pytest.skip too
            raise _plugin_error(contract, name, exc) from None


def plugin_hook(contract: Contract) -> GateHooks | None:
    """A pluggy hook relay with our hookspecs and the contract's plugins; None when it names
    none (then neither pluggy nor a plugin is imported)."""
    if not contract.settings.plugins:
        return None
    import pluggy

    from pytest_verifygate import hookspecs

    manager = pluggy.PluginManager("pytest")
    manager.add_hookspecs(hookspecs)
    register_plugins(contract, manager)
    return cast("GateHooks", manager.hook)
