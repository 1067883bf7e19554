"""The verify contract: finding it, loading its four formats, validating every key.

Owns the ``Gate``, ``Settings`` and ``Contract`` records. Every problem a user can put in a
contract file becomes a ``ContractError`` naming the file, the gate and the key, with a fix;
nothing in here lets a traceback through for bad input.
"""

import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any, NamedTuple

from pytest_verifygate import patterns
from pytest_verifygate.contract import cache as contract_cache
from pytest_verifygate.errors import ContractError

CONTRACT_NAMES = (
    "verify.toml",
    "pyproject.toml",
    ".middle/verify.toml",
    ".opentiger/verify.contract.json",
)

CATEGORIES = ("unit", "integration")
KINDS = ("command", "manual")
ON_MISSING = ("fail", "skip")
MAX_RETRIES = 20
_GATE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The default ``env`` of a gate: read-only, since one instance is shared by every such gate.
_NO_ENV: Mapping[str, str] = MappingProxyType({})


class Settings(NamedTuple):
    """Contract-wide defaults (``[settings]``)."""

    timeout_seconds: float = 300.0
    jobs: int = 0
    output_tail_bytes: int = 65536
    on_missing: str = "fail"
    fail_when_unverified: bool = False
    changed_from: str = ""
    cache: bool = False


class Gate(NamedTuple):
    """One gate, with the contract's defaults already applied."""

    name: str
    command: str | tuple[str, ...]
    roles: tuple[str, ...] | None = None
    when_changed: tuple[str, ...] | None = None
    when_changed_all: tuple[str, ...] = ()
    cwd: str = "."
    env: Mapping[str, str] = _NO_ENV
    timeout_seconds: float = 300.0
    shell: bool = False
    retries: int = 0
    category: str | None = None
    phases: tuple[int, ...] | None = None
    kind: str = "command"
    on_missing: str = "fail"
    # Environment variables whose values are replaced by "***" in reports (see redact.py).
    secret_env: tuple[str, ...] = ()
    # The result cache (cache.py): whether a pass is reused, and which files it depends on
    # (None: the when_changed patterns, or every file when there are none).
    cache: bool = False
    inputs: tuple[str, ...] | None = None

    @property
    def command_text(self) -> str:
        """The command as a user would type it (for messages and reports)."""
        if isinstance(self.command, str):
            return self.command
        import shlex

        return shlex.join(self.command)


class Contract(NamedTuple):
    """A loaded contract: where it lives, its settings and its gates in file order."""

    path: Path
    root: Path
    repo_root: Path
    format: str
    settings: Settings
    gates: tuple[Gate, ...]
    warnings: tuple[str, ...] = ()

    def gate(self, name: str) -> Gate:
        for gate in self.gates:
            if gate.name == name:
                return gate
        raise KeyError(name)


# --------------------------------------------------------------------------------------------
# discovery


def find_repo_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding ``.git`` (a directory or a file)."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def find_contract(start: Path | None = None) -> Path | None:
    """The first contract file from ``start`` upwards to the git toplevel (SPEC 2.1 order)."""
    here = (start or Path.cwd()).resolve()
    top = find_repo_root(here)
    for directory in (here, *here.parents):
        for name in CONTRACT_NAMES:
            candidate = directory / name
            if not candidate.is_file():
                continue
            if name == "pyproject.toml" and not _pyproject_has_table(candidate, top):
                continue
            return candidate
        if top is not None and directory == top:
            break
    return None


def _pyproject_has_table(path: Path, repo_root: Path | None) -> bool:
    try:
        raw = path.read_bytes()
    except OSError:
        return False
    if b"verifygate" not in raw:  # cheap pre-check: most pyprojects never mention us
        return False
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return True  # a broken pyproject that mentions us is reported when loaded
    # The contract a run loaded before: its parse is cached (no TOML parser to import).
    entries = contract_cache.read(repo_root) if repo_root else {}
    cached = contract_cache.lookup(entries, path, text, None)
    try:
        data = cached.data if cached is not None else _parse_toml(text, str(path))
    except ContractError:
        return True  # likewise reported when loaded, not skipped silently
    tool = data.get("tool")
    return isinstance(tool, dict) and "verifygate" in tool


def contract_format(path: Path) -> str:
    """Which of the four formats a contract file is, from its name and place."""
    if path.name == "pyproject.toml":
        return "pyproject"
    if path.suffix == ".json":
        return "opentiger"
    if path.parent.name == ".middle":
        return "middle"
    return "toml"


def project_root_of(path: Path) -> Path:
    """The directory that ``when_changed`` and ``cwd`` are relative to."""
    parent = path.parent
    if parent.name in (".middle", ".opentiger"):
        return parent.parent
    return parent


# --------------------------------------------------------------------------------------------
# loading


def load_contract(
    path: str | os.PathLike[str] | None = None,
    start: Path | None = None,
    *,
    flag: str = "--contract",
) -> Contract:
    """Load and validate a contract: the file at ``path``, or the one found from ``start``.

    ``flag`` is how the calling front end names the contract option, for the hints.
    """
    if path is None:
        found = find_contract(start)
        if found is None:
            where = (start or Path.cwd()).resolve()
            raise ContractError(
                str(where),
                "no verify contract found here or above (up to the git toplevel)",
                hint=f"create verify.toml with at least one [[gate]], or pass {flag} PATH",
            )
        contract_path = found
    else:
        contract_path = Path(path)
        if not contract_path.is_absolute():
            contract_path = (start or Path.cwd()) / contract_path
    shown = display_path(contract_path)
    if contract_path.is_dir():
        raise ContractError(shown, "is a directory, not a contract file")
    if not contract_path.is_file():
        raise ContractError(shown, "no such contract file", hint=f"check the {flag} path")
    # Resolve the directory but not a symlinked contract file itself: the project root (and
    # the repository that cwd must stay inside) is where the contract was found or named, so
    # a link to a file elsewhere cannot move the gates out of this repository.
    contract_path = contract_path.parent.resolve() / contract_path.name
    root = project_root_of(contract_path)
    repo_root = find_repo_root(root) or root
    fmt = contract_format(contract_path)
    text = _read_text(contract_path, shown)
    loader = _TableLoader(shown, root, repo_root)
    pathspec = patterns.pathspec_identity()
    entries = contract_cache.read(repo_root)
    cached = contract_cache.lookup(entries, contract_path, text, pathspec)
    if cached is not None:
        parsed = cached.data
        patterns.remember(cached.translations)
    else:
        parsed = _parse_json(text, shown) if fmt == "opentiger" else _parse_toml(text, shown)
    data = parsed
    if fmt == "opentiger":
        settings, gates, warnings = _load_opentiger(data, loader)
    else:
        if fmt == "pyproject":
            tool = data.get("tool")
            table = tool.get("verifygate") if isinstance(tool, dict) else None
            if not isinstance(table, dict):
                raise ContractError(shown, "has no [tool.verifygate] table")
            loader.prefix = "tool.verifygate."
            data = table
        settings, gates = _load_toml_form(data, loader, shell_default=fmt == "middle")
        warnings = []
    # Validation translated every pattern (from the table when the cache had them).
    translated = patterns.translations(_patterns_of(gates))
    if cached is None or cached.translations != translated:
        contract_cache.store(repo_root, entries, contract_path, text, parsed, pathspec,
                             translated)
    return Contract(
        path=contract_path,
        root=root,
        repo_root=repo_root,
        format=fmt,
        settings=settings,
        gates=tuple(gates),
        warnings=tuple(warnings),
    )


def posix_relative(path: Path, start: Path) -> str:
    """``path`` relative to ``start`` with "/" separators; as given when it is not below it."""
    try:
        return path.relative_to(start).as_posix()
    except ValueError:
        return path.as_posix()


def display_path(path: Path) -> str:
    """``path`` as messages show it: relative to the current directory where possible."""
    try:
        return os.path.relpath(path)
    except ValueError:  # pragma: no cover - other drive on Windows
        return str(path)


def _read_text(path: Path, shown: str) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ContractError(shown, f"cannot be read: {exc.strerror or exc}") from None
    if b"\x00" in raw:
        raise ContractError(shown, "is a binary file (contains NUL bytes), not a contract")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContractError(
            shown,
            f"is not valid UTF-8 (byte {exc.start})",
            hint="save the file as UTF-8",
        ) from None


def _patterns_of(gates: list[Gate]) -> list[str]:
    return [pattern for gate in gates
            for pattern in (*(gate.when_changed or ()), *gate.when_changed_all,
                            *(gate.inputs or ()))]


def _toml_parser() -> ModuleType:
    """tomllib (tomli before Python 3.11), imported only when a contract must be parsed."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # pragma: no cover - exercised on Python 3.10 only

    parser: ModuleType = tomli
    return parser


def _parse_toml(text: str, shown: str) -> dict[str, Any]:
    tomllib = _toml_parser()
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ContractError(shown, f"is not valid TOML: {exc}") from None
    except RecursionError:
        raise ContractError(shown, "is not valid TOML: nested too deeply") from None
    except ValueError as exc:
        # tomllib lets int()'s digit limit (4300 digits) escape as a plain ValueError.
        raise ContractError(shown, f"is not valid TOML: {exc}") from None
    return data


def _parse_json(text: str, shown: str) -> Any:
    import json  # only the openTiger format is JSON: keeps start-up cheap

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


# --------------------------------------------------------------------------------------------
# validation helpers


def _did_you_mean(word: str, choices: Iterator[str] | tuple[str, ...] | list[str]) -> str | None:
    import difflib  # only for error hints: keeps start-up cheap

    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {matches[0]!r}?" if matches else None


def _type_name(value: object) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }.get(type(value), type(value).__name__)


def _short(value: object, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _TableLoader:
    """Validates the values of one contract file, raising errors that name file/gate/key."""

    def __init__(self, shown: str, root: Path, repo_root: Path) -> None:
        self.shown = shown
        self.root = root
        self.repo_root = repo_root
        self.prefix = ""

    def error(
        self, message: str, *, gate: str | None = None, key: str | None = None,
        hint: str | None = None,
    ) -> ContractError:
        return ContractError(
            self.shown, message, gate=gate, key=None if key is None else self.prefix + key,
            hint=hint,
        )

    def check_keys(
        self, table: dict[str, Any], allowed: tuple[str, ...], *, gate: str | None,
        where: str,
    ) -> None:
        for key in table:
            if key not in allowed:
                raise self.error(
                    f"unknown key in {where}",
                    gate=gate,
                    key=key,
                    hint=_did_you_mean(key, allowed) or f"known keys: {', '.join(allowed)}",
                )

    def string(
        self, value: object, *, gate: str | None, key: str, allow_empty: bool = False
    ) -> str:
        if not isinstance(value, str):
            raise self.error(f"must be a string, not {_type_name(value)}", gate=gate, key=key)
        if not allow_empty and not value.strip():
            raise self.error("must not be empty", gate=gate, key=key)
        if "\x00" in value:
            raise self.error("must not contain a NUL character", gate=gate, key=key)
        if _LONE_SURROGATE.search(value):
            # JSON can spell "\ud800"; such a string cannot become an argv, env or file name.
            raise self.error("must not contain a lone surrogate (\\ud800-\\udfff escape)",
                             gate=gate, key=key, hint="write real Unicode characters")
        return value

    def string_list(
        self, value: object, *, gate: str | None, key: str, allow_empty: bool = False,
        empty_hint: str | None = None,
    ) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.error(
                f"must be a list of strings, not {_type_name(value)}", gate=gate, key=key,
                hint=f'write {key} = ["..."]',
            )
        if not value and not allow_empty:
            raise self.error("must not be an empty list", gate=gate, key=key, hint=empty_hint)
        items = []
        for item in value:
            if not isinstance(item, str):
                raise self.error(
                    f"must hold only strings, found {_type_name(item)} {_short(item)}",
                    gate=gate, key=key,
                )
            items.append(self.string(item, gate=gate, key=key))
        return tuple(items)

    def integer(
        self, value: object, *, gate: str | None, key: str, minimum: int, maximum: int | None = None
    ) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"must be an integer, not {_type_name(value)}", gate=gate, key=key)
        if value < minimum or (maximum is not None and value > maximum):
            bound = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
            raise self.error(f"must be {bound}, got {value}", gate=gate, key=key)
        return value

    def seconds(self, value: object, *, gate: str | None, key: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(
                f"must be a number of seconds, not {_type_name(value)}", gate=gate, key=key
            )
        seconds = float(value)
        if not math.isfinite(seconds) or seconds <= 0:
            raise self.error(f"must be a positive number, got {value}", gate=gate, key=key)
        return seconds

    def boolean(self, value: object, *, gate: str | None, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(
                f"must be true or false, not {_type_name(value)}", gate=gate, key=key
            )
        return value

    def choice(
        self, value: object, choices: tuple[str, ...], *, gate: str | None, key: str
    ) -> str:
        if not isinstance(value, str) or value not in choices:
            options = " or ".join(repr(c) for c in choices)
            hint = _did_you_mean(value, choices) if isinstance(value, str) else None
            raise self.error(f"must be {options}, got {_short(value)}", gate=gate, key=key,
                             hint=hint)
        return value

    def patterns(
        self, patterns: tuple[str, ...], *, gate: str | None, key: str
    ) -> tuple[str, ...]:
        """Compile each pattern once now, so a bad one is a contract error, not a traceback
        at selection time (pathspec rejects "!", a trailing backslash, "[z-a]", ...).
        Remembered translations make this cheap: pathspec is imported only for new ones."""
        from pytest_verifygate.patterns import PatternError, translations

        for pattern in patterns:
            try:
                translations([pattern])
            except PatternError:
                raise self.error(f"{_short(pattern)} is not a valid gitignore-style pattern",
                                 gate=gate, key=key) from None
        return patterns

    def cwd(self, value: object, *, gate: str | None, key: str) -> str:
        text = self.string(value, gate=gate, key=key)
        target = (self.root / text).resolve()
        repo = self.repo_root.resolve()
        if target != repo and repo not in target.parents:
            raise self.error(
                f"{text!r} resolves outside the repository ({repo})",
                gate=gate, key=key, hint="use a directory inside the repository",
            )
        relative = os.path.relpath(target, self.root.resolve())
        return Path(relative).as_posix()


# --------------------------------------------------------------------------------------------
# TOML form (verify.toml, [tool.verifygate], .middle/verify.toml)

SETTINGS_KEYS = (
    "timeout_seconds",
    "jobs",
    "output_tail_bytes",
    "on_missing",
    "fail_when_unverified",
    "changed_from",
    "cache",
)
GATE_KEYS = (
    "name",
    "command",
    "roles",
    "when_changed",
    "when_changed_all",
    "cwd",
    "env",
    "timeout_seconds",
    "shell",
    "retries",
    "category",
    "phases",
    "kind",
    "on_missing",
    "secret_env",
    "cache",
    "inputs",
)


def _load_toml_form(
    data: dict[str, Any], loader: _TableLoader, *, shell_default: bool
) -> tuple[Settings, list[Gate]]:
    loader.check_keys(data, ("settings", "gate"), gate=None, where="the contract")
    settings = _load_settings(data.get("settings", {}), loader)
    raw_gates = data.get("gate")
    if raw_gates is None:
        raise loader.error(
            "defines no gates", key="gate",
            hint='add at least one [[gate]] with name = "..." and command = "..."',
        )
    if not isinstance(raw_gates, list):
        raise loader.error(
            f"must be an array of tables ([[gate]]), not {_type_name(raw_gates)}", key="gate"
        )
    if not raw_gates:
        raise loader.error("defines no gates", key="gate", hint="add at least one [[gate]]")
    gates: list[Gate] = []
    seen: set[str] = set()
    for position, raw in enumerate(raw_gates, start=1):
        gate = _load_gate(raw, position, settings, loader, shell_default=shell_default)
        if gate.name in seen:
            raise loader.error(
                "duplicate gate name", gate=gate.name, key="name",
                hint="gate names must be unique; rename one of them",
            )
        seen.add(gate.name)
        gates.append(gate)
    return settings, gates


def _load_settings(raw: object, loader: _TableLoader) -> Settings:
    if not isinstance(raw, dict):
        raise loader.error(f"must be a table, not {_type_name(raw)}", key="settings")
    loader.check_keys(raw, SETTINGS_KEYS, gate=None, where="[settings]")
    values: dict[str, Any] = {}

    def key(name: str) -> str:
        return f"settings.{name}"

    if "timeout_seconds" in raw:
        values["timeout_seconds"] = loader.seconds(
            raw["timeout_seconds"], gate=None, key=key("timeout_seconds")
        )
    if "jobs" in raw:
        values["jobs"] = loader.integer(raw["jobs"], gate=None, key=key("jobs"), minimum=0,
                                        maximum=1024)
    if "output_tail_bytes" in raw:
        values["output_tail_bytes"] = loader.integer(
            raw["output_tail_bytes"], gate=None, key=key("output_tail_bytes"), minimum=256,
            maximum=64 * 1024 * 1024,
        )
    if "on_missing" in raw:
        values["on_missing"] = loader.choice(
            raw["on_missing"], ON_MISSING, gate=None, key=key("on_missing")
        )
    if "fail_when_unverified" in raw:
        values["fail_when_unverified"] = loader.boolean(
            raw["fail_when_unverified"], gate=None, key=key("fail_when_unverified")
        )
    if "changed_from" in raw:
        values["changed_from"] = loader.string(
            raw["changed_from"], gate=None, key=key("changed_from"), allow_empty=True
        ).strip()
    if "cache" in raw:
        values["cache"] = loader.boolean(raw["cache"], gate=None, key=key("cache"))
    return Settings(**values)


def _load_gate(
    raw: object, position: int, settings: Settings, loader: _TableLoader, *, shell_default: bool
) -> Gate:
    label = f"#{position}"
    if not isinstance(raw, dict):
        raise loader.error(f"must be a table, not {_type_name(raw)}", gate=label, key="gate")
    if "name" not in raw:
        raise loader.error("is required", gate=label, key="name", hint='add name = "..."')
    name = loader.string(raw["name"], gate=label, key="name")
    if not _GATE_NAME.fullmatch(name):
        raise loader.error(
            f"{_short(name)} may only use letters, digits, '_', '-' and '.'",
            gate=label, key="name",
        )
    loader.check_keys(raw, GATE_KEYS, gate=name, where="[[gate]]")
    kind = loader.choice(raw.get("kind", "command"), KINDS, gate=name, key="kind")
    command: str | tuple[str, ...]
    if "command" not in raw:
        if kind != "manual":
            raise loader.error("is required", gate=name, key="command",
                               hint='add command = "...", or kind = "manual" for a sign-off gate')
        command = ""
    else:
        value = raw["command"]
        if isinstance(value, list):
            command = loader.string_list(value, gate=name, key="command")
            if not command[0].strip():
                raise loader.error("must not start with an empty program", gate=name,
                                   key="command")
        elif isinstance(value, str):
            command = loader.string(value, gate=name, key="command")
        else:
            raise loader.error(
                f"must be a string or a list of strings, not {_type_name(value)}",
                gate=name, key="command",
            )
    env = raw.get("env", {})
    if not isinstance(env, dict):
        raise loader.error(f"must be a table, not {_type_name(env)}", gate=name, key="env",
                           hint='write env = { NAME = "value" }')
    env_values: dict[str, str] = {}
    for env_name, env_value in env.items():
        if not _ENV_NAME.fullmatch(env_name):
            raise loader.error(f"{env_name!r} is not a valid environment variable name",
                               gate=name, key="env")
        if not isinstance(env_value, str):
            raise loader.error(
                f"value of {env_name} must be a string, not {_type_name(env_value)}",
                gate=name, key="env", hint=f'write {env_name} = "{env_value}"'
                if isinstance(env_value, (int, float, bool)) else None,
            )
        env_values[env_name] = loader.string(env_value, gate=name, key="env", allow_empty=True)

    def optional(key: str, convert: Callable[[object], Any]) -> Any:
        return convert(raw[key]) if key in raw else None

    roles = optional("roles", lambda v: loader.string_list(
        v, gate=name, key="roles", empty_hint="remove the key to mean every role"))
    when_changed = optional("when_changed", lambda v: loader.patterns(loader.string_list(
        v, gate=name, key="when_changed", empty_hint="remove the key to run the gate always"),
        gate=name, key="when_changed"))
    when_changed_all = optional(
        "when_changed_all",
        lambda v: loader.patterns(
            loader.string_list(v, gate=name, key="when_changed_all", allow_empty=True),
            gate=name, key="when_changed_all"),
    )
    secret_env = optional("secret_env", lambda v: loader.string_list(
        v, gate=name, key="secret_env", allow_empty=True)) or ()
    inputs = optional("inputs", lambda v: loader.patterns(loader.string_list(
        v, gate=name, key="inputs", empty_hint="remove the key to use when_changed (or every "
        "file)"), gate=name, key="inputs"))
    for secret_name in secret_env:
        if not _ENV_NAME.fullmatch(secret_name):
            raise loader.error(f"{secret_name!r} is not a valid environment variable name",
                               gate=name, key="secret_env")
    phases = None
    if "phases" in raw:
        value = raw["phases"]
        if not isinstance(value, list):
            raise loader.error(f"must be a list of positive integers, not {_type_name(value)}",
                               gate=name, key="phases", hint="write phases = [1, 2]")
        if not value:
            raise loader.error("must not be an empty list", gate=name, key="phases",
                               hint="remove the key to mean every phase")
        phases = tuple(
            loader.integer(item, gate=name, key="phases", minimum=1) for item in value
        )
    return Gate(
        name=name,
        command=command,
        roles=roles,
        when_changed=when_changed,
        when_changed_all=when_changed_all or (),
        cwd=loader.cwd(raw["cwd"], gate=name, key="cwd") if "cwd" in raw else ".",
        env=env_values,
        timeout_seconds=(
            loader.seconds(raw["timeout_seconds"], gate=name, key="timeout_seconds")
            if "timeout_seconds" in raw
            else settings.timeout_seconds
        ),
        shell=(
            loader.boolean(raw["shell"], gate=name, key="shell") if "shell" in raw
            else shell_default
        ),
        retries=(
            loader.integer(raw["retries"], gate=name, key="retries", minimum=0,
                           maximum=MAX_RETRIES)
            if "retries" in raw
            else 0
        ),
        category=optional(
            "category", lambda v: loader.choice(v, CATEGORIES, gate=name, key="category")
        ),
        phases=phases,
        kind=kind,
        on_missing=(
            loader.choice(raw["on_missing"], ON_MISSING, gate=name, key="on_missing")
            if "on_missing" in raw
            else settings.on_missing
        ),
        secret_env=secret_env,
        cache=(
            loader.boolean(raw["cache"], gate=name, key="cache") if "cache" in raw
            else settings.cache
        ),
        inputs=inputs,
    )


# --------------------------------------------------------------------------------------------
# openTiger form (.opentiger/verify.contract.json)

OPENTIGER_KEYS = ("commands", "byRole", "rules")
OPENTIGER_RULE_KEYS = ("whenChangedAny", "whenChangedAll", "commands")


def _load_opentiger(
    data: object, loader: _TableLoader
) -> tuple[Settings, list[Gate], list[str]]:
    if not isinstance(data, dict):
        raise loader.error(f"must be a JSON object, not {_type_name(data)}")
    warnings = [
        f"{loader.shown}: key {key!r} is not used by verifygate and was ignored"
        for key in data
        if key not in OPENTIGER_KEYS
    ]
    settings = Settings()
    specs: list[tuple[str, tuple[str, ...] | None, tuple[str, ...] | None, tuple[str, ...]]] = []
    for command in _json_commands(data.get("commands", []), loader, key="commands"):
        specs.append((command, None, None, ()))
    by_role = data.get("byRole", {})
    if not isinstance(by_role, dict):
        raise loader.error(f"must be an object, not {_type_name(by_role)}", key="byRole")
    for role, commands in by_role.items():
        loader.string(role, gate=None, key="byRole")  # a role name is printed and matched
        for command in _json_commands(commands, loader, key=f"byRole.{role}"):
            specs.append((command, (role,), None, ()))
    rules = data.get("rules", [])
    if not isinstance(rules, list):
        raise loader.error(f"must be a list, not {_type_name(rules)}", key="rules")
    for index, rule in enumerate(rules):
        key = f"rules[{index}]"
        if not isinstance(rule, dict):
            raise loader.error(f"must be an object, not {_type_name(rule)}", key=key)
        for rule_key in rule:
            if rule_key not in OPENTIGER_RULE_KEYS:
                warnings.append(
                    f"{loader.shown}: key {key}.{rule_key!r} is not used by verifygate and "
                    "was ignored"
                )
        any_globs = _json_globs(rule.get("whenChangedAny"), loader, f"{key}.whenChangedAny")
        all_globs = _json_globs(rule.get("whenChangedAll"), loader, f"{key}.whenChangedAll")
        for command in _json_commands(rule.get("commands", []), loader, key=f"{key}.commands"):
            specs.append((command, None, any_globs or None, all_globs))
    if not specs:
        raise loader.error("defines no commands", key="commands",
                           hint='add "commands": ["..."]')
    gates: list[Gate] = []
    used: set[str] = set()
    for command, roles, when_changed, when_changed_all in specs:
        name = _unique_name(_name_from_command(command), used)
        gates.append(
            Gate(
                name=name,
                command=command,
                roles=roles,
                when_changed=when_changed,
                when_changed_all=when_changed_all,
                timeout_seconds=settings.timeout_seconds,
            )
        )
    return settings, gates, warnings


def _json_commands(value: object, loader: _TableLoader, *, key: str) -> list[str]:
    if not isinstance(value, list):
        raise loader.error(f"must be a list of command strings, not {_type_name(value)}", key=key)
    return [loader.string(item, gate=None, key=key) for item in value]


def _json_globs(value: object, loader: _TableLoader, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    globs = loader.string_list(value, gate=None, key=key, allow_empty=True)
    converted: list[str] = []
    for glob in globs:
        converted.extend(minimatch_to_gitignore(glob))
    return loader.patterns(tuple(converted), gate=None, key=key)


def minimatch_to_gitignore(glob: str) -> list[str]:
    """Translate one minimatch glob (``dot: true``) into gitignore-style patterns.

    Minimatch anchors every pattern at the root (``*.ts`` is top-level only) and expands
    ``{a,b}`` braces; gitignore matches a slash-less pattern at any depth and has no braces.
    """
    negated = glob.startswith("!")
    body = glob[1:] if negated else glob
    body = body.removeprefix("./")
    patterns = []
    for expanded in _expand_braces(body):
        anchored = expanded if expanded.startswith(("/", "**")) else "/" + expanded
        patterns.append(("!" if negated else "") + anchored)
    return patterns


def _expand_braces(glob: str) -> list[str]:
    match = re.search(r"\{([^{}]*,[^{}]*)\}", glob)
    if not match:
        return [glob]
    head, tail = glob[: match.start()], glob[match.end():]
    results: list[str] = []
    for option in match.group(1).split(","):
        results.extend(_expand_braces(head + option + tail))
    return results


def _name_from_command(command: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", command).strip("-.")
    return slug[:60].rstrip("-.") or "command"


def _unique_name(base: str, used: set[str]) -> str:
    name, counter = base, 2
    while name in used:
        name = f"{base}-{counter}"
        counter += 1
    used.add(name)
    return name
