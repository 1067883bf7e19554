"""Reading a contract file's text and parsing it as TOML or JSON (each parser imported when
used); every way that can fail is a ``ContractError``.

PYTEST_DONT_REWRITE
"""

import sys
from pathlib import Path
from typing import Any

from pytest_verifygate.errors import ContractError


def read_text(path: Path, shown: str) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ContractError(shown, f"cannot be read: {exc.strerror or exc}") from None
    if b"\x00" in raw:
        raise ContractError(shown, "is a binary file (contains NUL bytes), not a contract")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContractError(shown, f"is not valid UTF-8 (byte {exc.start})",
                            hint="save the file as UTF-8") from None


def parse_toml(text: str, shown: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib

    try:
        data: dict[str, Any] = tomllib.loads(text)
    except RecursionError:
        raise ContractError(shown, "is not valid TOML: nested too deeply") from None
    except ValueError as exc:
        # TOMLDecodeError, or int()'s digit limit (4300 digits), which escapes as a ValueError.
        raise ContractError(shown, f"is not valid TOML: {exc}") from None
    return data


def parse_json(text: str, shown: str) -> Any:
    """The JSON document ``text``: any JSON value (the openTiger loader checks its shape)."""
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractError(
            shown, f"is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise ContractError(shown, "is not valid JSON: nested too deeply") from None
    except ValueError as exc:
        # json raises a plain ValueError (not JSONDecodeError) for a number of 4300+ digits.
        raise ContractError(shown, f"is not valid JSON: {exc}") from None
