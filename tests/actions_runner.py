"""How the GitHub Actions runner reads workflow commands from a step's output, for tests.

Follows the runner's ``ActionCommandManager`` and ``ActionCommand`` (actions/runner): a line
is a command when, after leading blanks, it starts with ``::`` and has a second ``::`` (the
name, case-insensitive, runs to the first space), or when it holds ``##[name ...]`` anywhere
(the old form, tried second). Between ``::stop-commands::TOKEN`` and ``::TOKEN::`` (or
``##[TOKEN]``) no command is honoured. Data and properties are unescaped as the runner does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

# The commands a runner knows; anything else is not a command at all.
KNOWN_COMMANDS = frozenset({
    "error", "warning", "notice", "debug", "add-mask", "set-output", "save-state", "set-env",
    "add-path", "add-matcher", "remove-matcher", "group", "endgroup", "echo",
    "stop-commands",
})


class Command(NamedTuple):
    """A command the runner honoured: its name (lower case), properties and data."""

    name: str
    properties: dict[str, str]
    data: str
    line: str


def _unescape(text: str, mappings: Iterable[tuple[str, str]]) -> str:
    for escaped, plain in mappings:
        text = text.replace(escaped, plain)
    return text


DATA = (("%0D", "\r"), ("%0A", "\n"), ("%25", "%"))
PROPERTY = (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%"))
OLD_FORM = (("%3B", ";"), ("%0D", "\r"), ("%0A", "\n"), ("%5D", "]"), ("%25", "%"))


def parse(line: str, known: Iterable[str]) -> Command | None:
    """The command a line holds for a runner that knows ``known`` command names."""
    names = {name.lower() for name in known}
    message = line.lstrip()
    if message.startswith("::"):
        end = message.find("::", 2)
        if end >= 0:
            info = message[2:end]
            name, _, rest = info.partition(" ")
            if name.lower() in names:
                properties = {}
                for pair in filter(None, rest.strip().split(",")):
                    key, equals, value = pair.partition("=")
                    if equals and key and value:
                        properties[key.lower()] = _unescape(value, PROPERTY)
                return Command(name.lower(), properties, _unescape(message[end + 2:], DATA),
                               line)
    start = line.find("##[")
    if start >= 0:
        end = line.find("]", start)
        if end >= 0:
            name, _, rest = line[start + 3:end].partition(" ")
            if name.lower() in names:
                properties = {}
                for pair in filter(None, rest.split(";")):
                    key, equals, value = pair.partition("=")
                    if equals and key and value:
                        properties[key.lower()] = _unescape(value, OLD_FORM)
                return Command(name.lower(), properties, _unescape(line[end + 1:], OLD_FORM),
                               line)
    return None


def honoured(output: str) -> list[Command]:
    """The commands a runner honours in ``output`` (one stream), stop and resume included."""
    known = set(KNOWN_COMMANDS)
    stop_token: str | None = None
    commands: list[Command] = []
    # The runner reads lines as .NET does: \n, \r\n and a lone \r all end one.
    for line in output.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        command = parse(line, known)
        if command is None:
            continue
        if stop_token is not None:
            if command.name == stop_token:
                known.discard(stop_token)
                stop_token = None
                commands.append(command)
            continue
        if command.name == "stop-commands":
            stop_token = command.data.lower()
            known.add(stop_token)
        commands.append(command)
    return commands


def annotations(output: str) -> list[Command]:
    """The ``error``/``warning``/``notice`` commands a runner honours in ``output``."""
    return [command for command in honoured(output)
            if command.name in ("error", "warning", "notice")]
