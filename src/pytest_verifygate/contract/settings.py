"""The contract's settings: one reader for ``[settings]``, ``[tool.verifygate.settings]`` and
openTiger's ``"settings"`` object, the same keys and checks in every format.

PYTEST_DONT_REWRITE
"""

from pytest_verifygate.contract.fields import FieldReader, type_name
from pytest_verifygate.contract.keys import SETTINGS, SETTINGS_KEYS
from pytest_verifygate.contract.model import Settings


def load_settings(raw: object, reader: FieldReader, defaults: Settings, *,
                  where: str = "[settings]", table_word: str = "a table") -> Settings:
    """``defaults`` with the checked values of the settings table ``raw``; ``where`` and
    ``table_word`` are how messages name the table and what a table is called ("an object")."""
    if not isinstance(raw, dict):
        raise reader.error(f"must be {table_word}, not {type_name(raw)}", key="settings")
    reader.check_keys(raw, SETTINGS_KEYS, gate=None, where=where)
    return defaults._replace(**{key.name: reader.read(key, raw[key.name], gate=None)
                                for key in SETTINGS if key.name in raw})
