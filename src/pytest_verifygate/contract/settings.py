"""The contract's settings: one reader for ``[settings]`` (verify.toml, middle's verify.toml),
``[tool.verifygate.settings]`` (pyproject.toml) and openTiger's ``"settings"`` object.

Every format takes the same keys with the same checks; only the values a file starts from
differ (``model.SEED_SETTINGS``: middle and openTiger run one gate at a time, in order).

PYTEST_DONT_REWRITE
"""

from typing import Any

from pytest_verifygate.contract.fields import FieldReader, type_name
from pytest_verifygate.contract.model import ON_MISSING, SETTINGS_KEYS, Settings

# The most gates a contract may ask to run at once: more threads than this help nobody.
MAX_JOBS = 1024


NATIVE_SETTINGS = Settings()


def load_settings(
    raw: object, reader: FieldReader, defaults: Settings = NATIVE_SETTINGS, *,
    key: str = "settings", where: str = "[settings]", table_word: str = "a table",
) -> Settings:
    """``defaults`` with the values of the settings table ``raw`` (checked) put in.

    ``key`` is the table's name in error messages, ``where`` how the unknown-key message names
    it and ``table_word`` what the table is called in this format ("an object" in JSON).
    """
    if not isinstance(raw, dict):
        raise reader.error(f"must be {table_word}, not {type_name(raw)}", key=key)
    reader.check_keys(raw, SETTINGS_KEYS, gate=None, where=where)
    values: dict[str, Any] = {}

    def name(setting: str) -> str:
        return f"{key}.{setting}"

    if "timeout_seconds" in raw:
        values["timeout_seconds"] = reader.seconds(
            raw["timeout_seconds"], gate=None, key=name("timeout_seconds")
        )
    if "jobs" in raw:
        values["jobs"] = reader.integer(raw["jobs"], gate=None, key=name("jobs"), minimum=0,
                                        maximum=MAX_JOBS)
    if "output_tail_bytes" in raw:
        values["output_tail_bytes"] = reader.integer(
            raw["output_tail_bytes"], gate=None, key=name("output_tail_bytes"), minimum=256,
            maximum=64 * 1024 * 1024,
        )
    if "log_max_bytes" in raw:
        values["log_max_bytes"] = reader.integer(
            raw["log_max_bytes"], gate=None, key=name("log_max_bytes"), minimum=4096,
            maximum=1 << 40,
        )
    if "on_missing" in raw:
        values["on_missing"] = reader.choice(
            raw["on_missing"], ON_MISSING, gate=None, key=name("on_missing")
        )
    if "fail_when_unverified" in raw:
        values["fail_when_unverified"] = reader.boolean(
            raw["fail_when_unverified"], gate=None, key=name("fail_when_unverified")
        )
    if "changed_from" in raw:
        values["changed_from"] = reader.string(
            raw["changed_from"], gate=None, key=name("changed_from"), allow_empty=True
        ).strip()
    if "cache" in raw:
        values["cache"] = reader.boolean(raw["cache"], gate=None, key=name("cache"))
    return defaults._replace(**values)
