"""The openTiger form (``.opentiger/verify.contract.json``): its commands (for everyone, per
role, per rule of changed files) as gates named after them, its minimatch globs as gitignore
patterns.

PYTEST_DONT_REWRITE
"""

import posixpath
import re
from typing import Any, NamedTuple

from pytest_verifygate.commands import UnsupportedCommand, split_words
from pytest_verifygate.contract.fields import FieldReader, short_repr, type_name
from pytest_verifygate.contract.model import (
    OPENTIGER_KEYS,
    OPENTIGER_RULE_KEYS,
    SEED_SETTINGS,
    Gate,
    Settings,
)
from pytest_verifygate.contract.settings import load_settings
from pytest_verifygate.item_names import unique_name
from pytest_verifygate.patterns import MAX_PATTERN_LENGTH

# Longest gate name made from a command; longer commands are cut at a word boundary.
MAX_NAME_LENGTH = 48
ELLIPSIS = "\u2026"


class _Use(NamedTuple):
    """One place a command is listed: for every role or one, on every change or a rule's."""

    command: str
    roles: tuple[str, ...] | None = None
    when_changed: tuple[str, ...] | None = None
    when_changed_all: tuple[str, ...] = ()
    cwd: str = "."


def load_opentiger(data: object, reader: FieldReader) -> tuple[Settings, list[Gate], list[str]]:
    """The settings, gates and warnings (keys verifygate does not use) of a parsed contract."""
    if not isinstance(data, dict):
        raise reader.error(f"must be a JSON object, not {type_name(data)}")
    warnings = [f"{reader.shown}: key {key!r} is not used by verifygate and was ignored"
                for key in data if key not in OPENTIGER_KEYS]
    settings = SEED_SETTINGS["opentiger"]
    if "settings" in data:
        settings = load_settings(data["settings"], reader, settings, where='"settings"',
                                 table_word="an object")

    def uses_of(commands: object, key: str, **when: Any) -> list[_Use]:
        if not isinstance(commands, list):
            raise reader.error(f"must be a list of command strings, not {type_name(commands)}",
                               key=key)
        texts = [reader.string(command, gate=None, key=key) for command in commands]
        return [_Use(part, cwd=cwd, **when) for text in texts for part, cwd in chained_parts(text)]

    uses = uses_of(data.get("commands", []), "commands")
    by_role = data.get("byRole", {})
    if not isinstance(by_role, dict):
        raise reader.error(f"must be an object, not {type_name(by_role)}", key="byRole")
    for role, commands in by_role.items():
        reader.string(role, gate=None, key="byRole")  # a role name is printed and matched
        uses += uses_of(commands, f"byRole.{role}", roles=(role,))
    rules = data.get("rules", [])
    if not isinstance(rules, list):
        raise reader.error(f"must be a list, not {type_name(rules)}", key="rules")
    for index, rule in enumerate(rules):
        key = f"rules[{index}]"
        if not isinstance(rule, dict):
            raise reader.error(f"must be an object, not {type_name(rule)}", key=key)
        warnings += [f"{reader.shown}: key {key}.{rule_key!r} is not used by verifygate and "
                     "was ignored" for rule_key in rule if rule_key not in OPENTIGER_RULE_KEYS]
        any_globs = _json_globs(rule.get("whenChangedAny"), reader, f"{key}.whenChangedAny")
        all_globs = _json_globs(rule.get("whenChangedAll"), reader, f"{key}.whenChangedAll")
        uses += uses_of(rule.get("commands", []), f"{key}.commands",
                        when_changed=any_globs or None, when_changed_all=all_globs)
    if not uses:
        raise reader.error("defines no commands", key="commands", hint='add "commands": ["..."]')
    used: set[str] = set()
    gates = [Gate(name=unique_name(name_from_command(use.command), used), command=use.command,
                  roles=use.roles, when_changed=use.when_changed,
                  when_changed_all=use.when_changed_all, cwd=use.cwd,
                  timeout_seconds=settings.timeout_seconds, on_missing=settings.on_missing,
                  cache=settings.cache)
             for use in _merged(uses)]
    return settings, gates, warnings


def _merged(uses: list[_Use]) -> list[_Use]:
    """One use per gate, in the order the commands first appear: openTiger runs a command once
    however many lists name it, so its uses become one gate where one gate can say when it
    runs (always; for any of its roles; on any of its ``whenChangedAny`` globs). A role or
    else a change, or two ``whenChangedAll`` rules, stay one gate per condition."""
    by_command: dict[tuple[str, str], list[tuple[int, _Use]]] = {}
    for position, use in enumerate(uses):
        by_command.setdefault((use.command.strip(), use.cwd), []).append((position, use))
    # (where the first use it stands for is, the use): a gate runs where it is first listed.
    merged: list[tuple[int, _Use]] = []
    for group in by_command.values():
        command, cwd = group[0][1].command, group[0][1].cwd
        always = [position for position, use in group
                  if use.roles is None and use.when_changed is None and not use.when_changed_all]
        if always:
            merged.append((always[0], _Use(command, cwd=cwd)))
            continue
        by_role = [(position, use) for position, use in group if use.roles is not None]
        if by_role:
            roles = tuple(dict.fromkeys(role for _, use in by_role for role in use.roles or ()))
            merged.append((by_role[0][0], _Use(command, roles=roles, cwd=cwd)))
        any_only = [(position, use) for position, use in group
                    if use.roles is None and not use.when_changed_all]
        if any_only:
            globs = tuple(dict.fromkeys(glob for _, use in any_only
                                        for glob in use.when_changed or ()))
            merged.append((any_only[0][0], _Use(command, when_changed=globs, cwd=cwd)))
        seen: set[_Use] = set()
        for position, use in group:
            if use.roles is None and use.when_changed_all and use not in seen:
                seen.add(use)
                merged.append((position, use))
    return [use for _, use in sorted(merged, key=lambda item: item[0])]


def chained_parts(command: str) -> list[tuple[str, str]]:
    """The parts of ``command`` between ``&&`` outside quotes, each with the directory it runs
    in. A plain ``cd DIR`` inside the project sets the directory of the parts after it (never
    past its own command, unlike openTiger); any other ``cd`` is a part, failing as a builtin."""
    parts: list[tuple[str, str]] = []
    cwd = "."
    for part in _split_and_and(command):
        target = _cd_target(part, cwd)
        if target is not None:
            cwd = target
        else:
            parts.append((part, cwd))
    return parts or [(command, ".")]


def _split_and_and(command: str) -> list[str]:
    """``command`` cut at every ``&&`` outside quotes; quotes and backslashes stay as written."""
    parts: list[str] = []
    start, index, quote = 0, 0, ""
    while index < len(command):
        char = command[index]
        if char == "\\" and quote != "'":
            index += 2
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif command.startswith("&&", index):
            parts.append(command[start:index])
            start = index = index + 2
            continue
        index += 1
    parts.append(command[start:])
    return [part.strip() for part in parts if part.strip()]


def _cd_target(part: str, cwd: str) -> str | None:
    """The directory ``part`` changes to when it is a plain ``cd`` that stays in the project."""
    try:
        words = [word.text for word in split_words(part)]
    except UnsupportedCommand:
        return None
    if not words or words[0] != "cd" or len(words) > 2:
        return None
    target = words[1] if len(words) == 2 else "."
    if posixpath.isabs(target):
        return None
    joined = posixpath.normpath(posixpath.join(cwd, target))
    return None if joined == ".." or joined.startswith("../") else joined


def _json_globs(value: object, reader: FieldReader, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    globs = reader.string_list(value, gate=None, key=key, allow_empty=True)
    converted: list[str] = []
    for glob in globs:
        if len(glob) > MAX_PATTERN_LENGTH:  # what the expansions are made of stays bounded
            raise reader.error(f"{short_repr(glob)} is {len(glob)} characters long; at most "
                               f"{MAX_PATTERN_LENGTH}", key=key,
                               hint="split it into shorter globs")
        try:
            converted.extend(minimatch_to_gitignore(glob))
        except TooManyExpansions as error:
            raise reader.error(
                f"{short_repr(glob)} expands to more than {MAX_EXPANSIONS} patterns "
                f"({error})", key=key,
                hint="use fewer {a,b} groups, or globs such as * that match the same files",
            ) from None
    return reader.patterns(tuple(converted), gate=None, key=key)


# The most patterns one glob's ``{a,b}`` groups may expand to: each group multiplies them
# (five groups of ten options are 100,000 patterns), each matched against every changed file.
MAX_EXPANSIONS = 256
# An innermost ``{...}`` group with a comma; linear (no backtracking) up to its first comma.
BRACE_GROUP = re.compile(r"\{[^{},]*,[^{}]*\}")


class TooManyExpansions(ValueError):
    """A glob whose braces expand to more than ``MAX_EXPANSIONS`` patterns."""


def minimatch_to_gitignore(glob: str) -> list[str]:
    """One minimatch glob (``dot: true``) as gitignore patterns: anchored at the root as
    minimatch's are (``*.ts`` is top-level only), its ``{a,b}`` braces expanded."""
    negated = glob.startswith("!")
    body = (glob[1:] if negated else glob).removeprefix("./")
    return [("!" if negated else "") + (part if part.startswith(("/", "**")) else "/" + part)
            for part in expand_braces(body)]


def expand_braces(glob: str) -> list[str]:
    """``glob`` with each ``{a,b,...}`` group (innermost first) replaced by each option in turn,
    each pattern once. Each step makes two or more patterns of one and the bound stops them
    all, so the work is bounded whatever the glob."""
    done: list[str] = []
    pending = [glob]  # a stack: the last item is expanded next, keeping the options' order
    while pending:
        current = pending.pop()
        group = BRACE_GROUP.search(current)
        if group is None:
            done.append(current)
            continue
        options = group.group()[1:-1].split(",")
        if len(done) + len(pending) + len(options) > MAX_EXPANSIONS:
            raise TooManyExpansions(f"at least {len(done) + len(pending) + len(options)}")
        head, tail = current[:group.start()], current[group.end():]
        pending += [head + option + tail for option in reversed(options)]
    return list(dict.fromkeys(done))


def name_from_command(command: str) -> str:
    """The command's words; past ``MAX_NAME_LENGTH``, its first and last words (the tool and
    the target) around "…", never cutting a word unless it is longer than a name may be."""
    words = command.split()
    text = " ".join(words)
    if len(text) <= MAX_NAME_LENGTH:
        return text
    if len(words[0]) > MAX_NAME_LENGTH - 2:
        return words[0][: MAX_NAME_LENGTH - 1] + ELLIPSIS
    head = [words[0]]
    rest = words[1:]
    while rest and len(" ".join([*head, rest[0]])) <= MAX_NAME_LENGTH // 2:
        head.append(rest.pop(0))
    tail: list[str] = []
    # Room left after the head, " … " and the tail so far.
    while rest and len(" ".join([*head, ELLIPSIS, rest[-1], *tail])) <= MAX_NAME_LENGTH:
        tail.insert(0, rest.pop())
    return " ".join([*head, ELLIPSIS, *tail])
