"""The TOML forms (``verify.toml``, ``[tool.verifygate]``, middle's ``.middle/verify.toml``):
``[settings]`` and ``[[gate]]`` tables; middle's gates default to a shell and category ``unit``.

PYTEST_DONT_REWRITE
"""

import functools
import graphlib
import re
from collections.abc import Callable
from typing import Any

from pytest_verifygate.contract.fields import FieldReader, did_you_mean, type_name
from pytest_verifygate.contract.model import (
    CATEGORIES,
    GATE_KEYS,
    KINDS,
    MAX_RETRIES,
    ON_MISSING,
    PYPROJECT_KEY_PREFIX,
    SEED_SETTINGS,
    Gate,
    Settings,
)
from pytest_verifygate.contract.settings import load_settings

_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_CONTROL = r"[\x00-\x08\x0a-\x1f\x7f-\x9f]"  # C0 (but tab), DEL and C1


def load_native(data: dict[str, Any], reader: FieldReader, fmt: str) -> tuple[Settings, list[Gate]]:
    """The settings and gates of a parsed contract of format ``fmt`` (toml, pyproject, middle)."""
    if fmt == "pyproject":
        tool = data.get("tool")
        table = tool.get("verifygate") if isinstance(tool, dict) else None
        if not isinstance(table, dict):
            raise reader.error("has no [tool.verifygate] table")
        reader = reader._replace(key_prefix=PYPROJECT_KEY_PREFIX)
        data = table
    reader.check_keys(data, ("settings", "gate"), gate=None, where="the contract")
    settings = load_settings(data.get("settings", {}), reader, SEED_SETTINGS.get(fmt, Settings()))
    raw_gates = data.get("gate")
    if raw_gates is None:
        raise reader.error("defines no gates", key="gate",
                           hint='add at least one [[gate]] with name = "..." and command = "..."')
    if not isinstance(raw_gates, list):
        raise reader.error(f"must be an array of tables ([[gate]]), not {type_name(raw_gates)}",
                           key="gate")
    if not raw_gates:
        raise reader.error("defines no gates", key="gate", hint="add at least one [[gate]]")
    gates: dict[str, Gate] = {}
    for position, raw in enumerate(raw_gates, start=1):
        gate = _load_gate(raw, position, settings, reader, middle=fmt == "middle")
        if gate.name in gates:
            raise reader.error("duplicate gate name", gate=gate.name, key="name",
                               hint="gate names must be unique; rename one of them")
        gates[gate.name] = gate
    _check_needs(gates, reader)
    return settings, list(gates.values())


def _load_gate(raw: object, position: int, settings: Settings, reader: FieldReader, *,
               middle: bool) -> Gate:
    """One gate; ``middle``: with middle's defaults (a shell, category ``unit``)."""
    label = f"#{position}"
    if not isinstance(raw, dict):
        raise reader.error(f"must be a table, not {type_name(raw)}", gate=label, key="gate")
    if "name" not in raw:
        raise reader.error("is required", gate=label, key="name", hint='add name = "..."')
    # Any text is a name, as in middle ("Type check (mypy)"), without the spaces around it.
    name = reader.string(raw["name"], gate=label, key="name").strip()
    control = re.search(_CONTROL, name)
    if control is not None:
        # A name is shown on one line everywhere (progress, tables, headings, annotations).
        raise reader.error(f"must be one line of text, not hold the control character "
                           f"U+{ord(control.group()):04X}", gate=label, key="name",
                           hint="write the name without line breaks or escapes")
    reader.check_keys(raw, GATE_KEYS, gate=name, where=f"[[{reader.key_prefix}gate]]")
    kind = reader.choice(raw.get("kind", "command"), KINDS, gate=name, key="kind")
    command = _command(raw, kind, name, reader)
    env = _env(raw.get("env", {}), name, reader)

    def strings(key: str, **options: Any) -> tuple[str, ...]:
        return reader.string_list(raw[key], gate=name, key=key, **options)

    def patterns(key: str, **options: Any) -> tuple[str, ...]:
        return reader.patterns(strings(key, **options), gate=name, key=key)

    def secret_env() -> tuple[str, ...]:
        names = strings("secret_env", allow_empty=True)
        for secret_name in names:
            if not re.fullmatch(_ENV_NAME, secret_name):
                raise reader.error(f"{secret_name!r} is not a valid environment variable name",
                                   gate=name, key="secret_env")
        return names

    # In this order, so that a gate with several mistakes always reports the same one first.
    readers: dict[str, Callable[[], Any]] = {
        "roles": lambda: strings("roles", empty_hint="remove the key to mean every role"),
        "when_changed": lambda: patterns(
            "when_changed", empty_hint="remove the key to run the gate always"),
        "when_changed_all": lambda: patterns("when_changed_all", allow_empty=True),
        "inputs": lambda: patterns(
            "inputs", empty_hint="remove the key to use when_changed (or every file)"),
        "secret_env": secret_env,
        "phases": lambda: _phases(raw["phases"], name, reader),
        **{key: functools.partial(reader.file_types, raw.get(key), gate=name, key=key)
           for key in ("types", "types_or", "exclude_types")},
        **{key: functools.partial(reader.regex, raw.get(key), gate=name, key=key)
           for key in ("files_regex", "exclude_regex")},
        "cwd": lambda: reader.cwd(raw["cwd"], gate=name, key="cwd"),
        "timeout_seconds": lambda: reader.seconds(
            raw["timeout_seconds"], gate=name, key="timeout_seconds"),
        "shell": lambda: reader.boolean(raw["shell"], gate=name, key="shell"),
        "retries": lambda: reader.integer(raw["retries"], gate=name, key="retries", minimum=0,
                                          maximum=MAX_RETRIES),
        "category": lambda: reader.choice(raw["category"], CATEGORIES, gate=name, key="category"),
        "on_missing": lambda: reader.choice(raw["on_missing"], ON_MISSING, gate=name,
                                            key="on_missing"),
        "cache": lambda: reader.boolean(raw["cache"], gate=name, key="cache"),
        "needs": lambda: tuple(dict.fromkeys(need.strip() for need in strings(
            "needs", empty_hint="remove the key: the gate needs no other"))),
        "exclusive": lambda: reader.boolean(raw["exclusive"], gate=name, key="exclusive"),
        "serial": lambda: reader.boolean(raw["serial"], gate=name, key="serial"),
    }
    given = {key: read() for key, read in readers.items() if key in raw}
    # What the settings (and middle, for its own file) say where the gate says nothing.
    defaults = {"timeout_seconds": settings.timeout_seconds, "on_missing": settings.on_missing,
                "cache": settings.cache, "shell": middle, "category": "unit" if middle else None}
    return Gate(name=name, command=command, kind=kind, env=env, **{**defaults, **given})


def _command(raw: dict[str, Any], kind: str, name: str,
             reader: FieldReader) -> str | tuple[str, ...]:
    """A string to split, an argv list, or "" for a manual gate without one."""
    if "command" not in raw:
        if kind != "manual":
            raise reader.error("is required", gate=name, key="command",
                               hint='add command = "...", or kind = "manual" for a sign-off gate')
        return ""
    value = raw["command"]
    if isinstance(value, list):
        command = reader.string_list(value, gate=name, key="command")
        if not command[0].strip():
            raise reader.error("must not start with an empty program", gate=name, key="command")
        return command
    if isinstance(value, str):
        return reader.string(value, gate=name, key="command")
    raise reader.error(f"must be a string or a list of strings, not {type_name(value)}",
                       gate=name, key="command")


def _env(env: object, name: str, reader: FieldReader) -> dict[str, str]:
    if not isinstance(env, dict):
        raise reader.error(f"must be a table, not {type_name(env)}", gate=name, key="env",
                           hint='write env = { NAME = "value" }')
    env_values: dict[str, str] = {}
    for env_name, env_value in env.items():
        if not re.fullmatch(_ENV_NAME, env_name):
            raise reader.error(f"{env_name!r} is not a valid environment variable name",
                               gate=name, key="env")
        if not isinstance(env_value, str):
            raise reader.error(
                f"value of {env_name} must be a string, not {type_name(env_value)}",
                gate=name, key="env", hint=f'write {env_name} = "{env_value}"'
                if isinstance(env_value, (int, float, bool)) else None,
            )
        env_values[env_name] = reader.string(env_value, gate=name, key="env", allow_empty=True)
    return env_values


def _phases(value: object, name: str, reader: FieldReader) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise reader.error(f"must be a list of positive integers, not {type_name(value)}",
                           gate=name, key="phases", hint="write phases = [1, 2]")
    if not value:
        raise reader.error("must not be an empty list", gate=name, key="phases",
                           hint="remove the key to mean every phase")
    return tuple(reader.integer(item, gate=name, key="phases", minimum=1) for item in value)


# Gates of a circle of needs named in its error; a longer circle is shown by its ends.
MAX_CIRCLE_SHOWN = 12


def _check_needs(gates: dict[str, Gate], reader: FieldReader) -> None:
    """Every ``needs`` names another gate, in no circle: a gate that could never start is a
    contract error, not a hang."""
    for gate in gates.values():
        for need in gate.needs:
            if need == gate.name:
                raise reader.error("a gate cannot need itself", gate=gate.name, key="needs",
                                   hint=f"remove {need!r} from needs")
            if need not in gates:
                known = did_you_mean(need, gates) or f"gates: {', '.join(gates)}"
                raise reader.error(f"names no gate {need!r}", gate=gate.name, key="needs",
                                   hint=known)
    try:
        graphlib.TopologicalSorter({name: gate.needs for name, gate in gates.items()}).prepare()
    except graphlib.CycleError as error:
        # graphlib walks from a gate to those that need it: reversed, each needs the next.
        cycle = error.args[1][::-1]
        shown = [repr(name) for name in cycle]
        if len(shown) > MAX_CIRCLE_SHOWN:
            hidden = len(shown) - MAX_CIRCLE_SHOWN
            shown[MAX_CIRCLE_SHOWN // 2:-MAX_CIRCLE_SHOWN // 2] = [f"... ({hidden} more)"]
        path = " -> ".join(shown)
        raise reader.error(f"gates need each other in a circle: {path}", gate=cycle[0],
                           key="needs", hint="remove one of these needs") from None
