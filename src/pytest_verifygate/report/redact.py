"""Secret redaction (docs: Security model): a gate's output is masked once, as it is captured,
and every sink is made from the masked stream; a report's other free texts go through
``Redactor.text``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, quote_plus

from pytest_verifygate.commands import UnsupportedCommand, parse_command
from pytest_verifygate.contract import Gate

MASK = "***"
# Shorter listed values would garble unrelated text.
MIN_LISTED_SECRET_CHARS = 3
# A value secret only by its name: TOKENIZERS_PARALLELISM=false must not erase every "false".
MIN_NAMED_SECRET_CHARS = 6
# Each line of a multi-line secret (a PEM key) is masked on its own from this length.
MIN_SECRET_LINE_CHARS = 8

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW(?:OR)?D|API_?KEY|PRIVATE_?KEY", re.IGNORECASE)
# ``NAME=value`` is found from an upper-case secret word (``max_tokens=512`` is no secret),
# then widened to the whole name.
_SECRET_WORDS = rb"PRIVATE_?KEY|PASSW(?:OR)?D|API_?KEY|SECRET|TOKEN"
_NAME_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_VALUE_PATTERN = r"\"[^\"\n]{0,512}\"|'[^'\n]{0,512}'|[^\s\"';&|]+"
_VALUE = re.compile(_VALUE_PATTERN.encode())
_WORD_BEFORE = re.compile(rb"[\w$]")
# ``NAME=value`` in a shell script: what a script sets itself is as secret as what it inherits.
_ASSIGNMENT = re.compile(r"(?<![\w$])([A-Z_][A-Z0-9_]*)=(" + _VALUE_PATTERN + ")")

Span = tuple[int, int]


def is_secret_name(name: str) -> bool:
    return SECRET_NAME.search(name) is not None


def gate_environment(gate: Gate) -> dict[str, str]:
    """The variables a gate sets itself: its ``env`` table and its ``NAME=value`` prefixes."""
    env = dict(gate.env)
    if gate.kind == "command" and not gate.shell:
        # A command that cannot be parsed fails before it runs; its text is still redacted.
        with contextlib.suppress(UnsupportedCommand):
            env.update(parse_command(gate.command, shell=False).env)
    return env


class Redactor:
    """Replaces known secret values, and values assigned to secret names, by ``***``."""

    def __init__(self, values: Iterable[str] = (), names: Iterable[str] = ()) -> None:
        self.names = frozenset(names)
        # Longest first, so a secret that contains another is masked as a whole.
        forms = sorted({form for value in values for form in _forms(value)}, key=len,
                       reverse=True)
        self.forms = re.compile(b"|".join(map(re.escape, forms))) if forms else None
        self.longest = max(map(len, forms), default=0)
        listed = sorted((_to_bytes(name) for name in self.names if name.isidentifier()),
                        key=len, reverse=True)
        self.words = re.compile(b"|".join([_SECRET_WORDS, *map(re.escape, listed)]))

    def text(self, text: str) -> str:
        """``text`` with every secret value masked, and every ``SECRET_NAME=value`` too."""
        if not text or (self.forms is None and "=" not in text):
            return text  # nothing to find: most commands and reasons
        errors = _errors(text)
        data = text.encode("utf-8", errors)
        return _apply(data, self.spans(data)).decode("utf-8", errors)

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """An environment for display: secret names keep their name, never their value."""
        return {name: MASK if value and (name in self.names or is_secret_name(name))
                else self.text(value) for name, value in env.items()}

    def stream_masker(self) -> StreamMasker:
        """A masker for a gate's output, fed as it comes."""
        return StreamMasker(self)

    def spans(self, data: bytes) -> list[Span]:
        """Where ``data`` holds a secret: sorted, disjoint spans."""
        spans = [] if self.forms is None else [m.span() for m in self.forms.finditer(data)]
        return _merge(spans + self._assignments(data))

    def _assignments(self, data: bytes) -> list[Span]:
        spans: list[Span] = []
        if b"=" not in data:  # no assignment: skip the name search (memchr against a regex)
            return spans
        done = 0  # every byte is walked over at most twice
        for word in self.words.finditer(data):
            if word.start() < done:
                continue  # in a name already examined, or in the value of one found
            start, end = word.start(), word.end()
            while start > done and data[start - 1] in _NAME_CHARS:
                start -= 1
            while end < len(data) and data[end] in _NAME_CHARS:
                end += 1
            done = end
            if data[end:end + 1] != b"=" or data[start:start + 1].isdigit():
                continue
            if start and _WORD_BEFORE.match(data, start - 1):
                continue  # not a name as the shell spells one
            name = data[start:end].decode("utf-8", "replace")
            value = _VALUE.match(data, end + 1)
            if value is None or not (name in self.names or is_secret_name(name)):
                continue
            if value.group() != MASK.encode():
                spans.append(value.span())
            done = value.end()
        return spans


def redactor_for(
    gates: Iterable[Gate] = (), environ: Mapping[str, str] | None = None
) -> Redactor:
    """One redactor for a whole report: a value secret for one gate is secret in all of them
    (any gate may print it). ``environ``: what the gates inherit (default: ours)."""
    inherited = os.environ if environ is None else environ
    assignments = list(inherited.items())
    listed: set[str] = set()
    for gate in gates:
        assignments.extend(gate_environment(gate).items())
        if gate.shell:
            # A script's own SERVICE_TOKEN=... is as secret as an inherited one.
            assignments.extend((match.group(1), match.group(2).strip("'\""))
                               for match in _ASSIGNMENT.finditer(gate.command_text))
        listed.update(gate.secret_env)
    values = {
        value
        for name, value in assignments
        if (name in listed and len(value) >= MIN_LISTED_SECRET_CHARS)
        or (is_secret_name(name) and len(value) >= MIN_NAMED_SECRET_CHARS)
    }
    return Redactor(values, listed)


def _forms(value: str) -> set[bytes]:
    """``value`` as a tool may print it: as is, with either line ending, JSON-escaped,
    URL-encoded, and each long enough line of a multi-line value on its own."""
    import json  # only where a secret value is known: not on most commits' runs

    texts = {value, value.replace("\r\n", "\n"), value.replace("\r\n", "\n").replace("\n", "\r\n")}
    forms: set[bytes] = set()
    for text in texts:
        encoded = _to_bytes(text)
        forms.add(encoded)
        for ascii_only in (True, False):
            forms.add(_to_bytes(json.dumps(text, ensure_ascii=ascii_only)[1:-1]))
        for url in (quote(encoded, safe=""), quote_plus(encoded, safe="")):
            forms.update((url.encode(), re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(),
                                               url).encode()))
        forms.update(_to_bytes(line.strip()) for line in text.splitlines()
                     if len(line.strip()) >= MIN_SECRET_LINE_CHARS)
    return {form for form in forms if len(form) >= MIN_LISTED_SECRET_CHARS}


class StreamMasker:
    """Masks a gate's output as it is captured: ``feed`` each chunk, then ``flush``. The last
    ``holdback`` bytes wait for more, so a secret split across two reads is seen whole."""

    MAX_PENDING = 1 << 20

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self.holdback = max(1024, 2 * redactor.longest + 64)
        self._pending = b""

    def feed(self, data: bytes) -> bytes:
        """What of ``data`` (and of what was kept back) can be passed on now, masked."""
        buffer = self._pending + data if self._pending else data
        if len(buffer) <= self.holdback:
            self._pending = buffer
            return b""
        cut = len(buffer) - self.holdback
        spans = self._redactor.spans(buffer)
        while True:
            # What waits keeps the ``NAME=`` before it: a name cut in two might lose its
            # secret word, and a value without its name is not known as a secret's.
            floor = max(0, cut - 257)  # no variable's name is longer
            while cut > floor and (buffer[cut - 1] in _NAME_CHARS or buffer[cut - 1] == 0x3D):
                cut -= 1
            across = [start for start, end in spans  # a secret across the cut waits whole
                      if start < cut and (cut < end or end == len(buffer))]
            if not across:
                break
            cut = across[0]
        if cut < len(buffer) - self.MAX_PENDING:
            cut = len(buffer) - self.holdback  # one endless word: mask what is here
        self._pending = buffer[cut:]
        return _apply(buffer[:cut], [(start, min(end, cut)) for start, end in spans
                                     if start < cut])

    def flush(self) -> bytes:
        """The rest, masked: call once, when the output has ended."""
        buffer, self._pending = self._pending, b""
        return _apply(buffer, self._redactor.spans(buffer))


def _to_bytes(text: str) -> bytes:
    return text.encode("utf-8", _errors(text))


def _errors(text: str) -> str:
    """Undecodable bytes (surrogate escapes) go back as printed, other lone surrogates as such."""
    try:
        text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return "surrogatepass"
    return "surrogateescape"


def _merge(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        elif end > start:
            merged.append((start, end))
    return merged


def _apply(data: bytes, spans: list[Span]) -> bytes:
    """``data`` with each of ``spans`` (sorted, disjoint) replaced by the mask."""
    if not spans:
        return data
    parts: list[bytes] = []
    position = 0
    for start, end in spans:
        parts += [data[position:start], MASK.encode()]
        position = end
    parts.append(data[position:])
    return b"".join(parts)
