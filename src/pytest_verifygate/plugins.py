"""Third-party verifygate plugins outside pytest: the ``verifygate`` entry-point group.

Inside pytest, plugins implement our hooks as ordinary pytest plugins. The ``verifygate``
command and the agent hooks load the distributions that declare a ``verifygate`` entry point
into a pluggy manager of their own, so the same hook implementations run there too.

PYTEST_DONT_REWRITE
"""

import os
import sys
from typing import Any

PLUGIN_GROUP = "verifygate"


def plugin_hook() -> Any | None:
    """A pluggy hook relay with our hookspecs and the plugins of the ``verifygate`` group.

    None when no installed distribution registers such a plugin: nothing could implement a
    hook, so neither pluggy nor the plugins are imported (this is every commit's start-up).
    """
    if not entry_point_group_installed(PLUGIN_GROUP):
        return None
    import pluggy

    from pytest_verifygate import hookspecs

    manager = pluggy.PluginManager("pytest")
    manager.add_hookspecs(hookspecs)
    manager.load_setuptools_entrypoints(PLUGIN_GROUP)
    return manager.hook


def entry_point_group_installed(group: str) -> bool:
    """Whether any installed distribution declares an entry point in ``group``.

    Loading entry points parses every distribution's metadata (tens of milliseconds, on every
    commit and every agent stop); a plain text scan of the ``entry_points.txt`` files answers
    the usual "none" far cheaper. A false positive only costs the full scan.
    """
    header = f"[{group}]"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(entry or ".", name, "entry_points.txt"),
                          encoding="utf-8", errors="replace") as handle:
                    if header in handle.read():
                        return True
            except OSError:
                continue
    return False
