"""The openTiger form (``.opentiger/verify.contract.json``): commands for everyone, per role and
per rule of changed files, turned into gates.

openTiger's globs are minimatch globs; they are translated into the gitignore-style patterns
every other form uses (``minimatch_to_gitignore``). Its commands have no names, so each gate is
named after its command. Keys openTiger has and verifygate does not use become warnings.
"""

import re

from pytest_verifygate.contract.fields import FieldReader, type_name
from pytest_verifygate.contract.model import OPENTIGER_KEYS, OPENTIGER_RULE_KEYS, Gate, Settings

# One command's place in the contract: (command, roles, when_changed, when_changed_all).
_CommandSpec = tuple[str, tuple[str, ...] | None, tuple[str, ...] | None, tuple[str, ...]]


def load_opentiger(
    data: object, reader: FieldReader
) -> tuple[Settings, list[Gate], list[str]]:
    """The settings (all defaults), gates and warnings of a parsed openTiger contract."""
    if not isinstance(data, dict):
        raise reader.error(f"must be a JSON object, not {type_name(data)}")
    warnings = [
        f"{reader.shown}: key {key!r} is not used by verifygate and was ignored"
        for key in data
        if key not in OPENTIGER_KEYS
    ]
    settings = Settings()
    specs: list[_CommandSpec] = []
    for command in _json_commands(data.get("commands", []), reader, key="commands"):
        specs.append((command, None, None, ()))
    by_role = data.get("byRole", {})
    if not isinstance(by_role, dict):
        raise reader.error(f"must be an object, not {type_name(by_role)}", key="byRole")
    for role, commands in by_role.items():
        reader.string(role, gate=None, key="byRole")  # a role name is printed and matched
        for command in _json_commands(commands, reader, key=f"byRole.{role}"):
            specs.append((command, (role,), None, ()))
    rules = data.get("rules", [])
    if not isinstance(rules, list):
        raise reader.error(f"must be a list, not {type_name(rules)}", key="rules")
    for index, rule in enumerate(rules):
        key = f"rules[{index}]"
        if not isinstance(rule, dict):
            raise reader.error(f"must be an object, not {type_name(rule)}", key=key)
        for rule_key in rule:
            if rule_key not in OPENTIGER_RULE_KEYS:
                warnings.append(
                    f"{reader.shown}: key {key}.{rule_key!r} is not used by verifygate and "
                    "was ignored"
                )
        any_globs = _json_globs(rule.get("whenChangedAny"), reader, f"{key}.whenChangedAny")
        all_globs = _json_globs(rule.get("whenChangedAll"), reader, f"{key}.whenChangedAll")
        for command in _json_commands(rule.get("commands", []), reader, key=f"{key}.commands"):
            specs.append((command, None, any_globs or None, all_globs))
    if not specs:
        raise reader.error("defines no commands", key="commands",
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


def _json_commands(value: object, reader: FieldReader, *, key: str) -> list[str]:
    if not isinstance(value, list):
        raise reader.error(f"must be a list of command strings, not {type_name(value)}", key=key)
    return [reader.string(item, gate=None, key=key) for item in value]


def _json_globs(value: object, reader: FieldReader, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    globs = reader.string_list(value, gate=None, key=key, allow_empty=True)
    converted: list[str] = []
    for glob in globs:
        converted.extend(minimatch_to_gitignore(glob))
    return reader.patterns(tuple(converted), gate=None, key=key)


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
    """A gate name made of the command's text: what the name rule allows, at most 60 long."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", command).strip("-.")
    return slug[:60].rstrip("-.") or "command"


def _unique_name(base: str, used: set[str]) -> str:
    """``base``, or ``base-2``, ``base-3``... the first not in ``used``; then marks it used."""
    name, counter = base, 2
    while name in used:
        name = f"{base}-{counter}"
        counter += 1
    used.add(name)
    return name
