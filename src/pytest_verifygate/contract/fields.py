"""``FieldReader``: every format's checks of a contract file's values, each returning the value
typed or raising a ``ContractError`` that names the file, the gate and the key, with a fix.

PYTEST_DONT_REWRITE
"""

import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from pytest_verifygate.contract.keys import CONTROL, ENV_NAME, MAX_SECONDS, MODULE_NAME, Key
from pytest_verifygate.errors import ContractError
from pytest_verifygate.patterns import PatternError, check_pattern


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A hint naming the choice closest to ``word``, if one is close enough."""
    import difflib  # only for error hints: keeps start-up cheap

    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {matches[0]!r}?" if matches else None


def type_name(value: object) -> str:
    """What a parsed value is, in the words of a contract file ("a string", "a table")."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "a list", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def short_repr(value: object, limit: int = 40) -> str:
    """``repr(value)``, cut to ``limit`` characters so one message stays one line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class FieldReader(NamedTuple):
    """Reads the values of one contract file. ``key_prefix`` (``tool.verifygate.``) goes before
    every key outside a gate an error names, so that it is the key the user sees in the file."""

    shown: str
    root: Path
    repo_root: Path
    key_prefix: str = ""

    def error(self, message: str, *, gate: str | None = None, key: str | None = None,
              hint: str | None = None) -> ContractError:
        if key is not None and gate is None:
            key = self.key_prefix + key
        return ContractError(self.shown, message, gate=gate, key=key, hint=hint)

    def check_keys(self, table: dict[str, Any], allowed: tuple[str, ...], *, gate: str | None,
                   where: str) -> None:
        for key in table:
            if key not in allowed:
                raise self.error(f"unknown key in {where}", gate=gate, key=key,
                                 hint=did_you_mean(key, allowed)
                                 or f"known keys: {', '.join(allowed)}")

    def string(self, value: object, *, gate: str | None, key: str,
               allow_empty: bool = False) -> str:
        if not isinstance(value, str):
            raise self.error(f"must be a string, not {type_name(value)}", gate=gate, key=key)
        if not allow_empty and not value.strip():
            raise self.error("must not be empty", gate=gate, key=key)
        if "\x00" in value:
            raise self.error("must not contain a NUL character", gate=gate, key=key)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            # JSON can spell "\ud800"; such a string cannot become an argv, env or file name.
            raise self.error("must not contain a lone surrogate (\\ud800-\\udfff escape)",
                             gate=gate, key=key, hint="write real Unicode characters") from None
        return value

    def string_list(self, value: object, *, gate: str | None, key: str, allow_empty: bool = False,
                    empty_hint: str | None = None) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.error(f"must be a list of strings, not {type_name(value)}", gate=gate,
                             key=key, hint=f'write {key} = ["..."]')
        if not value and not allow_empty:
            raise self.error("must not be an empty list", gate=gate, key=key, hint=empty_hint)
        items = []
        for item in value:
            if not isinstance(item, str):
                raise self.error(f"must hold only strings, found {type_name(item)} "
                                 f"{short_repr(item)}", gate=gate, key=key)
            items.append(self.string(item, gate=gate, key=key))
        return tuple(items)

    def read(self, key: Key, value: object, *, gate: str | None) -> Any:
        """``value`` of ``key`` (``keys.py``), checked and typed as its kind says; a key outside
        a gate is named ``settings.<key>``."""
        name = key.name if gate is not None else f"settings.{key.name}"
        kind = key.kind
        if kind in ("strings", "patterns", "names", "env_names", "modules"):
            items = self.string_list(value, gate=gate, key=name, allow_empty=key.empty is None,
                                     empty_hint=key.empty)
            if kind == "patterns":
                return self.patterns(items, gate=gate, key=name)
            if kind == "names":
                return tuple(dict.fromkeys(item.strip() for item in items))
            if kind == "strings":
                return items
            pattern, what = ((ENV_NAME, "a valid environment variable name") if kind == "env_names"
                             else (MODULE_NAME, "a module name"))
            for item in items:
                if not re.fullmatch(pattern, item):
                    raise self.error(f"{item!r} is not {what}", gate=gate, key=name, hint=None
                                     if kind == "env_names" else 'name a module as import '
                                     'would, e.g. "my_project.gates"')
            return tuple(dict.fromkeys(items)) if kind == "modules" else items
        if kind == "integer":
            return self.integer(value, gate=gate, key=name, minimum=key.bounds[0],
                                maximum=key.bounds[1])
        if kind == "choice":
            return self.choice(value, key.choices, gate=gate, key=name)
        if kind == "ref":
            return self.string(value, gate=gate, key=name, allow_empty=True).strip()
        # Every other kind is read by the method of its name (text, env, seconds, cwd, ...).
        return getattr(self, kind)(value, gate=gate, key=name)

    def text(self, value: object, *, gate: str | None, key: str) -> str:
        """Any non-empty text on one line (a gate's name), without the blanks around it."""
        text = self.string(value, gate=gate, key=key)
        control = re.search(CONTROL, text)
        if control is not None:  # shown on one line everywhere: progress, tables, annotations
            raise self.error(f"must be one line of text, not hold the control character "
                             f"U+{ord(control.group()):04X}", gate=gate, key=key,
                             hint="write the name without line breaks or escapes")
        return text.strip()

    def env(self, value: object, *, gate: str | None, key: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.error(f"must be a table, not {type_name(value)}", gate=gate, key=key,
                             hint='write env = { NAME = "value" }')
        for env_name, env_value in value.items():
            if not re.fullmatch(ENV_NAME, env_name):
                raise self.error(f"{env_name!r} is not a valid environment variable name",
                                 gate=gate, key=key)
            if not isinstance(env_value, str):
                raise self.error(
                    f"value of {env_name} must be a string, not {type_name(env_value)}",
                    gate=gate, key=key, hint=f'write {env_name} = "{env_value}"'
                    if isinstance(env_value, (int, float, bool)) else None)
        return {env_name: self.string(env_value, gate=gate, key=key, allow_empty=True)
                for env_name, env_value in value.items()}

    def phases(self, value: object, *, gate: str | None, key: str) -> tuple[int, ...]:
        if not isinstance(value, list):
            raise self.error(f"must be a list of positive integers, not {type_name(value)}",
                             gate=gate, key=key, hint="write phases = [1, 2]")
        if not value:
            raise self.error("must not be an empty list", gate=gate, key=key,
                             hint="remove the key to mean every phase")
        return tuple(self.integer(item, gate=gate, key=key, minimum=1) for item in value)

    def integer(self, value: object, *, gate: str | None, key: str, minimum: int,
                maximum: int | None = None) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 1.0: a whole number, as JSON Schema (and taplo) count it
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"must be an integer, not {type_name(value)}", gate=gate, key=key)
        if value < minimum or (maximum is not None and value > maximum):
            bound = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
            raise self.error(f"must be {bound}, got {value}", gate=gate, key=key)
        return value

    def seconds(self, value: object, *, gate: str | None, key: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"must be a number of seconds, not {type_name(value)}", gate=gate,
                             key=key)
        try:
            seconds = float(value)
        except OverflowError:  # an integer too large for a float: far past any sane limit
            seconds = math.inf
        if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_SECONDS:
            raise self.error(f"must be a positive number of seconds up to {MAX_SECONDS:,} "
                             f"(a year), got {short_repr(value)}", gate=gate, key=key)
        return seconds

    def boolean(self, value: object, *, gate: str | None, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(f"must be true or false, not {type_name(value)}", gate=gate, key=key)
        return value

    def choice(self, value: object, choices: tuple[str, ...], *, gate: str | None, key: str) -> str:
        if not isinstance(value, str) or value not in choices:
            options = " or ".join(repr(c) for c in choices)
            hint = did_you_mean(value, choices) if isinstance(value, str) else None
            raise self.error(f"must be {options}, got {short_repr(value)}", gate=gate, key=key,
                             hint=hint)
        return value

    def patterns(self, patterns: tuple[str, ...], *, gate: str | None, key: str) -> tuple[str, ...]:
        """Each pattern checked now (``patterns.check_pattern``): a bad one is a contract error,
        not a traceback or a gate that silently never runs."""
        roots = tuple(dict.fromkeys(str(path) for path in (
            self.root, self.repo_root, self.root.resolve(), self.repo_root.resolve())))
        for pattern in patterns:
            try:
                check_pattern(pattern, roots)
            except PatternError as error:
                raise self.error(f"{short_repr(pattern)} {error.problem}", gate=gate, key=key,
                                 hint=error.fix) from None
        return patterns

    def file_types(self, value: object, *, gate: str | None, key: str) -> tuple[str, ...]:
        """identify's tags, as pre-commit's ``types`` (``filetypes.py``)."""
        from pytest_verifygate.filetypes import known_tags

        tags = self.string_list(value, gate=gate, key=key,
                                empty_hint="remove the key to take files of every type")
        known = known_tags()
        for tag in tags:
            if tag not in known:
                raise self.error(f"{short_repr(tag)} is not a file type identify knows",
                                 gate=gate, key=key,
                                 hint=did_you_mean(tag, sorted(known))
                                 or "see identify's tags: text, binary, python, yaml, ...")
        return tags

    def regex(self, value: object, *, gate: str | None, key: str) -> str:
        """A Python regular expression, as pre-commit's ``files`` / ``exclude``."""
        text = self.string(value, gate=gate, key=key)
        try:
            re.compile(text)
        except re.error as exc:
            raise self.error(f"is not a valid Python regular expression: {exc}", gate=gate,
                             key=key) from None
        return text

    def cwd(self, value: object, *, gate: str | None, key: str) -> str:
        """A directory inside the repository, relative to the project root, "/"-separated."""
        text = self.string(value, gate=gate, key=key)
        target = (self.root / text).resolve()
        repo = self.repo_root.resolve()
        if target != repo and repo not in target.parents:
            raise self.error(f"{text!r} resolves outside the repository ({repo})", gate=gate,
                             key=key, hint="use a directory inside the repository")
        relative = os.path.relpath(target, self.root.resolve())
        return Path(relative).as_posix()
