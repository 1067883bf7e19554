"""The contract's settings: one reader for ``[settings]``, ``[tool.verifygate.settings]`` and
openTiger's ``"settings"`` object, the same keys and checks in every format.

PYTEST_DONT_REWRITE
"""

import re
from collections.abc import Callable
from typing import Any

from pytest_verifygate.contract.fields import FieldReader, type_name
from pytest_verifygate.contract.model import ON_MISSING, SETTINGS_KEYS, Settings

# The most gates a contract may ask to run at once: more threads than this help nobody.
MAX_JOBS = 1024

MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def load_settings(raw: object, reader: FieldReader, defaults: Settings, *,
                  where: str = "[settings]", table_word: str = "a table") -> Settings:
    """``defaults`` with the checked values of the settings table ``raw``; ``where`` and
    ``table_word`` are how messages name the table and what a table is called ("an object")."""
    if not isinstance(raw, dict):
        raise reader.error(f"must be {table_word}, not {type_name(raw)}", key="settings")
    reader.check_keys(raw, SETTINGS_KEYS, gate=None, where=where)
    checks: dict[str, Callable[[object, str], Any]] = {
        "timeout_seconds": lambda value, key: reader.seconds(value, gate=None, key=key),
        "jobs": lambda value, key: reader.integer(value, gate=None, key=key, minimum=0,
                                                  maximum=MAX_JOBS),
        "output_tail_bytes": lambda value, key: reader.integer(
            value, gate=None, key=key, minimum=256, maximum=64 * 1024 * 1024),
        "log_max_bytes": lambda value, key: reader.integer(
            value, gate=None, key=key, minimum=4096, maximum=1 << 40),
        "on_missing": lambda value, key: reader.choice(value, ON_MISSING, gate=None, key=key),
        "fail_when_unverified": lambda value, key: reader.boolean(value, gate=None, key=key),
        "changed_from": lambda value, key: reader.string(
            value, gate=None, key=key, allow_empty=True).strip(),
        "cache": lambda value, key: reader.boolean(value, gate=None, key=key),
        "verify_while_editing": lambda value, key: reader.boolean(value, gate=None, key=key),
        "plugins": lambda value, key: _module_names(reader, value, key),
    }
    return defaults._replace(**{setting: check(raw[setting], f"settings.{setting}")
                                for setting, check in checks.items() if setting in raw})


def _module_names(reader: FieldReader, value: object, key: str) -> tuple[str, ...]:
    """``settings.plugins``: importable module names, each once."""
    names = reader.string_list(value, gate=None, key=key, allow_empty=True)
    for name in names:
        if not MODULE_NAME.fullmatch(name):
            raise reader.error(f"{name!r} is not a module name", key=key,
                               hint='name a module as import would, e.g. "my_project.gates"')
    return tuple(dict.fromkeys(names))
