"""Third-party verifygate plugins outside pytest: the ``verifygate`` entry-point group.

Inside pytest, plugins implement our hooks as ordinary pytest plugins. The ``verifygate``
command and the agent hooks load the distributions that declare a ``verifygate`` entry point
into a pluggy manager of their own, so the same hook implementations run there too.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from pytest_verifygate.hookspecs import GateHooks

PLUGIN_GROUP = "verifygate"


def plugin_hook() -> GateHooks | None:
    """A pluggy hook relay with our hookspecs and the plugins of the ``verifygate`` group.

    None when no installed distribution registers such a plugin: nothing could implement a
    hook, so neither pluggy nor the plugins are imported (this is every commit's start-up).
    """
    if not entry_points(group=PLUGIN_GROUP):
        return None
    import pluggy

    from pytest_verifygate import hookspecs

    manager = pluggy.PluginManager("pytest")
    manager.add_hookspecs(hookspecs)
    manager.load_setuptools_entrypoints(PLUGIN_GROUP)
    return cast("GateHooks", manager.hook)
