"""Turning a gate's command into what gets spawned, without ever invoking a shell by accident.

Owns POSIX-sh-like word splitting (quotes and backslashes), the detection of unquoted shell
syntax that only a shell would understand, ``NAME=value`` prefixes, ``{files}`` expansion and
splitting over-long argument lists into chunks the OS accepts. Also owns reading a command for
display or inspection rather than for running it (``shell_words``, ``command_text``): lenient
where ``parse_command`` is strict, since nothing is spawned from what they return.

PYTEST_DONT_REWRITE
"""

import itertools
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

FILES_PLACEHOLDER = "{files}"

# Builtins cannot be spawned as programs; naming them is a contract mistake we can explain.
SHELL_BUILTINS = frozenset(
    {"cd", "export", "source", ".", "set", "unset", "alias", "eval", "exec", "ulimit", "umask"}
)
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# ``{files}`` as a word of a shell script (between blanks and operators), not inside one.
_PLACEHOLDER_WORD = re.compile(r"(?<![^\s;|&(])\{files\}(?![^\s;|&)])")
# Linux caps one argv string at 128 KiB (MAX_ARG_STRLEN): it bounds a `sh -c` script.
_MAX_SINGLE_ARG = 128 * 1024 - 1024
# A chunk run beside others holds at least this many files: pre-commit's xargs partition.
MIN_CHUNK_FILES = 4


class UnsupportedCommand(Exception):
    """The command needs a shell (or cannot be parsed); the gate fails ``unsupported_format``."""


class Word(NamedTuple):
    """One word of a command after quote removal.

    ``lead`` is the unquoted text the word starts with, up to its first quote or backslash:
    ``FOO="a b"`` is an assignment because its lead ``FOO=`` is unquoted.
    """

    text: str
    lead: str


class ParsedCommand(NamedTuple):
    """A command ready for expansion: argv words (``{files}`` still in place) and env prefixes."""

    words: tuple[str, ...]
    env: Mapping[str, str] = MappingProxyType({})
    shell: bool = False
    uses_files: bool = False


def split_words(command: str) -> list[Word]:
    """Split ``command`` like POSIX sh, refusing what only a shell would interpret.

    Operators inside quotes are plain text (``grep -E "a|b"`` is one word ``a|b``).
    """
    words: list[Word] = []
    buffer: list[str] = []
    lead: list[str] = []
    in_word = False
    lead_open = True
    index, length = 0, len(command)

    def syntax(token: str) -> UnsupportedCommand:
        return UnsupportedCommand(
            f"shell syntax {token!r} needs a shell: set shell = true, or use the array form"
        )

    while index < length:
        char = command[index]
        if char in " \t\n":
            if in_word:
                words.append(Word("".join(buffer), "".join(lead)))
                buffer, lead, in_word, lead_open = [], [], False, True
            index += 1
            continue
        if char == "'":
            end = command.find("'", index + 1)
            if end < 0:
                raise UnsupportedCommand("unterminated single quote")
            buffer.append(command[index + 1 : end])
            in_word, lead_open = True, False
            index = end + 1
            continue
        if char == '"':
            index += 1
            while True:
                if index >= length:
                    raise UnsupportedCommand("unterminated double quote")
                char = command[index]
                if char == '"':
                    break
                if char == "\\" and index + 1 < length and command[index + 1] in '$`"\\\n':
                    if command[index + 1] != "\n":
                        buffer.append(command[index + 1])
                    index += 2
                    continue
                if char == "`" or (char == "$" and _starts_expansion(command, index)):
                    raise syntax(_expansion_token(command, index))
                buffer.append(char)
                index += 1
            in_word, lead_open = True, False
            index += 1
            continue
        if char == "\\":
            if index + 1 >= length:
                raise UnsupportedCommand("trailing backslash")
            if command[index + 1] != "\n":  # backslash-newline is a line continuation
                buffer.append(command[index + 1])
                in_word, lead_open = True, False
            index += 2
            continue
        if char in "|&;<>()`":
            token = command[index : index + 2] if command[index : index + 2] in (
                "||", "&&", ">>", "<<", "$(", ">&", "<&", ";;"
            ) else char
            raise syntax(token)
        if char == "$" and _starts_expansion(command, index):
            raise syntax(_expansion_token(command, index))
        if char in "*?" or (char == "[" and _closes_bracket(command, index)):
            raise UnsupportedCommand(
                f"unquoted glob {char!r} needs a shell to expand: set shell = true, "
                "quote it, or use the array form"
            )
        if char in "~#" and not in_word:
            meaning = "a comment" if char == "#" else "a home-directory expansion"
            raise UnsupportedCommand(
                f"unquoted {char!r} starts {meaning}, which needs a shell: set shell = true, "
                "or quote it"
            )
        buffer.append(char)
        if lead_open:
            lead.append(char)
        in_word = True
        index += 1
    if in_word:
        words.append(Word("".join(buffer), "".join(lead)))
    return words


def _closes_bracket(command: str, index: int) -> bool:
    """Whether an unquoted ``[`` starts a glob class (a ``]`` follows in the same word)."""
    rest = re.match(r"[^\s'\"]*", command[index + 1 :])
    return rest is not None and "]" in rest.group(0)


def _starts_expansion(command: str, index: int) -> bool:
    following = command[index + 1 : index + 2]
    return bool(following) and (following in "({" or following.isalpha() or following == "_"
                                or following in "0123456789@*#?$!-")


def _expansion_token(command: str, index: int) -> str:
    if command[index] == "`":
        return "`"
    match = re.match(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|.)", command[index:])
    return match.group(0) if match else "$"


def parse_command(command: str | Sequence[str], *, shell: bool) -> ParsedCommand:
    """Turn a gate's command into words and env prefixes; raise ``UnsupportedCommand``."""
    if shell:
        text = command if isinstance(command, str) else shlex.join(command)
        return ParsedCommand(
            words=(text,), shell=True, uses_files=_PLACEHOLDER_WORD.search(text) is not None
        )
    if isinstance(command, str):
        words = split_words(command)
        env: dict[str, str] = {}
        while words and ASSIGNMENT.match(words[0].lead):
            key, _, value = words.pop(0).text.partition("=")
            env[key] = value
        argv = [word.text for word in words]
    else:
        env, argv = {}, list(command)
    if not argv:
        raise UnsupportedCommand("the command has no program to run")
    if argv[0] in SHELL_BUILTINS:
        raise UnsupportedCommand(
            f"{argv[0]!r} is a shell builtin, not a program: set shell = true "
            "(or use the gate's cwd / env keys)"
        )
    return ParsedCommand(
        words=tuple(argv), env=env, shell=False, uses_files=FILES_PLACEHOLDER in argv
    )


def shell_words(command: str) -> list[str] | None:
    """The words of a command line as sh would split them, quotes removed; None when its
    quoting is unbalanced. Lenient: operators, globs and ``$`` are kept as plain text, for
    display and inspection only (``parse_command`` decides what may run)."""
    try:
        return shlex.split(command)
    except ValueError:
        return None


def command_text(command: str | Sequence[str]) -> str:
    """A command as one line a person could paste into sh: argv words quoted where needed;
    a command string (a shell gate's script) as written."""
    if isinstance(command, str):
        return command
    return shlex.join(str(word) for word in command)


def expand(parsed: ParsedCommand, files: Sequence[str], parts: int = 1) -> list[list[str]]:
    """The argv lists to spawn: ``{files}`` replaced, split into OS-sized chunks.

    Without ``{files}`` there is exactly one invocation. For a shell gate, the files are
    quoted for sh before they are put into the script, so no name can inject a command.
    ``parts`` > 1 cuts the files into that many chunks of one size, in order, to run at once
    (as pre-commit's xargs: none of fewer than ``MIN_CHUNK_FILES`` files).
    """
    parts = min(parts, -(-len(files) // MIN_CHUNK_FILES)) if parsed.uses_files else 1
    if parts > 1:
        cuts = [len(files) * part // parts for part in range(parts + 1)]
        return [argv for start, end in itertools.pairwise(cuts)
                for argv in expand(parsed, files[start:end])]
    if parsed.shell:
        script = parsed.words[0]
        if not parsed.uses_files:
            return [["/bin/sh", "-c", script]]
        fixed = len(script.encode()) - len(FILES_PLACEHOLDER)
        chunks = _chunk([shlex.quote(path) for path in files], _MAX_SINGLE_ARG - fixed)
        return [["/bin/sh", "-c", _with_files(script, " ".join(chunk))] for chunk in chunks]
    if not parsed.uses_files:
        return [list(parsed.words)]
    position = parsed.words.index(FILES_PLACEHOLDER)
    head, tail = list(parsed.words[:position]), list(parsed.words[position + 1 :])
    fixed = sum(len(word.encode()) + 1 for word in head + tail)
    return [head + chunk + tail for chunk in _chunk(list(files), _argv_budget() - fixed)]


def _with_files(script: str, files: str) -> str:
    # A function, not a replacement string: a backslash in a file name is no escape.
    return _PLACEHOLDER_WORD.sub(lambda _match: files, script)


def _argv_budget() -> int:
    try:
        arg_max = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):  # pragma: no cover - every POSIX system has it
        arg_max = 128 * 1024
    environment = sum(len(k) + len(v) + 2 for k, v in os.environ.items())
    # Leave room for the gate's own env and the pointer array (8 bytes per argument).
    return max(16 * 1024, min(arg_max, 2 * 1024 * 1024) // 2 - environment)


def _chunk(items: list[str], budget: int) -> list[list[str]]:
    """Split ``items`` into runs whose encoded size (plus a separator and a pointer each)
    fits ``budget``."""
    budget = max(budget, 1)
    chunks: list[list[str]] = []
    current: list[str] = []
    size = 0
    for item in items:
        cost = len(os.fsencode(item)) + 1 + 8
        if current and size + cost > budget:
            chunks.append(current)
            current, size = [], 0
        current.append(item)
        size += cost
    if current:
        chunks.append(current)
    return chunks
