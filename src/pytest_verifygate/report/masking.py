"""Finding secrets in output as a reader will see it, for ``redact``: the search behind the mask.

Masking happens once, before any sink, so it must hold whatever a sink does afterwards. Sinks
strip ANSI sequences and characters nothing shows (controls, C1, and Unicode's default-ignorable
code points: zero-width, bidi and variation selectors, fillers, tags), some sequences first
(the digest, JUnit), some characters first (a terminal ignores a NUL inside an escape
sequence); they cut output to a window. So a secret is searched for in the text as it reads
after each way of stripping (``TO\\x1b[0mKEN`` is ``TOKEN``), and a match masks the whole
stretch of the original it came from. Its forms: as printed, with CRLF or LF line ends, line
by line when it spans lines (a PEM key), JSON-escaped and URL-encoded; and, at the start of a
cut output, its last characters, also after what the cut left of an escape sequence (the
``[0m`` of ``\\x1b[0m``). ``NAME=value`` with a secret name is found from the name's secret
word (``TOKEN``, ...), so plain output costs a fast literal search rather than a regular
expression tried at every character.

Works on ``str`` (reports) and on ``bytes`` (``LogMasker``, for a log as it is written).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import AnyStr, Generic

from pytest_verifygate.report.overwrites import shown_text
from pytest_verifygate.report.readings import (
    BYTES,
    NAME_CHARS,
    TEXT,
    Span,
    Syntax,
    View,
    compiled,
)
from pytest_verifygate.report.secrets import (
    MASK,
    MIN_CUT_SECRET_CHARS,
    MIN_LISTED_SECRET_CHARS,
    MIN_SECRET_LINE_CHARS,
)

__all__ = ["MASK", "MIN_CUT_SECRET_CHARS", "MIN_LISTED_SECRET_CHARS", "MIN_SECRET_LINE_CHARS",
           "SECRET_WORDS", "Forms", "LogMasker", "apply", "secret_forms", "secret_forms_bytes"]

# What makes an upper-case ``NAME`` secret (redact.SECRET_NAME, as environment names spell it).
SECRET_WORDS = ("PRIVATE_KEY", "PRIVATEKEY", "PASSWORD", "API_KEY", "SECRET", "PASSWD",
                "APIKEY", "TOKEN")
# What a cut may leave of an escape sequence at the start of a tail, each read alike by every
# sink (no ESC left to start a sequence): the rest of a CSI (``[0m``, ``0m``, ``m``); of a
# two-character or nF escape (``c``, ``(B``, the ``\\`` of a string terminator); of an OSC or
# a device control, privacy or application string, up to its terminator.
_ESCAPE_REMAINDERS = (r"\[?[0-?]*[ -/]*[@-~]", r"[ -/]*[0-~]",
                      r"[^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)")
_URL_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b",
                 "\f": "\\f"}

SecretName = Callable[[str], bool]


def _characters(text: AnyStr) -> tuple[AnyStr, ...]:
    """The distinct characters (or bytes) of ``text``, each as a text of its own."""
    return tuple({text[index:index + 1] for index in range(len(text))})


class Forms(Generic[AnyStr]):
    """How a set of secrets looks in output, compiled for one kind of text."""

    def __init__(self, syntax: Syntax[AnyStr], visible: tuple[str, ...], literal: set[str],
                 names: Iterable[str]) -> None:
        self.syntax: Syntax[AnyStr] = syntax
        # The forms a reader sees (raw, JSON, URL-encoded, line by line), searched in the text
        # as a reader sees it; secrets holding hidden characters are also searched as written.
        self.visible: tuple[str, ...] = visible
        # Forms led by ``%`` or ``\\`` (a secret with every character escaped) apart: one
        # alternation of forms that share their first character is a fast literal search,
        # and these are searched only where the text holds that character at all.
        groups: list[tuple[str | None, list[str]]] = [
            (None, [form for form in visible if not form.startswith(("%", "\\"))]),
            *((lead, [form for form in visible if form.startswith(lead)])
              for lead in ("%", "\\"))]
        self.patterns: tuple[tuple[AnyStr | None, re.Pattern[AnyStr]], ...] = tuple(
            (None if lead is None else syntax.encode(lead), pattern)
            for lead, forms in groups if (pattern := self._alternation(forms)) is not None)
        self.literal: re.Pattern[AnyStr] | None = self._alternation(literal)
        words: list[str] = [*SECRET_WORDS, *(name for name in names
                                              if name and set(name) <= set(NAME_CHARS))]
        self.words: re.Pattern[AnyStr] | None = self._alternation(words)
        self.longest: int = max((len(form.encode("utf-8", "surrogatepass"))
                                 for form in (*visible, *literal)), default=0)
        self.shortest: int = min((len(syntax.encode(form)) for form in (*visible, *words)),
                                 default=0)
        # The characters of each word and form, for ``_may_show``.
        self._word_chars: tuple[tuple[AnyStr, ...], ...] = tuple(
            _characters(syntax.encode(word)) for word in words)
        self._form_chars: tuple[tuple[AnyStr, ...], ...] = tuple(
            _characters(syntax.encode(form)) for form in visible)

    def _alternation(self, forms: Iterable[str]) -> re.Pattern[AnyStr] | None:
        # Longest first, so a secret that contains another secret is masked as a whole.
        ordered = sorted({self.syntax.encode(form) for form in forms}, key=len, reverse=True)
        if not ordered:
            return None
        return re.compile(self.syntax.bar.join(re.escape(form) for form in ordered))

    def may_hold(self, text: AnyStr) -> bool:
        """Whether ``text`` (as a reader sees it) holds a secret form or a secret word."""
        return (any(pattern.search(text) is not None for pattern in self._patterns(text))
                or self._has_word(text))

    def _patterns(self, text: AnyStr) -> list[re.Pattern[AnyStr]]:
        """The alternations of secret forms that ``text`` may hold."""
        return [pattern for lead, pattern in self.patterns if lead is None or lead in text]

    def _may_show(self, text: AnyStr) -> bool:
        """Whether some reading of ``text`` may hold a secret form or word. Readings only
        remove, so each character of one must be in ``text`` (on what is left of names, for
        a word): found with ``in``, in C. Spares stripping output that holds escape sequences
        everywhere (coloured, redrawn) and no secret, which costs more than the rest."""
        if self.syntax.most_shown(text) < self.shortest:
            return False
        names = self.syntax.name_only(text)
        return (any(all(char in names for char in chars) for chars in self._word_chars)
                or any(all(char in text for char in chars) for chars in self._form_chars))

    def _has_word(self, text: AnyStr) -> bool:
        """Whether a secret word is in ``text``: most output holds none, and for bytes that is
        found in what is left of the text once all but name characters are removed."""
        return self.words is not None and self.words.search(
            self.syntax.name_only(text)) is not None

    def find(self, text: AnyStr, secret_name: SecretName, *, cut: bool = False,
             overwrites: bool = True) -> list[Span]:
        """Where ``text`` holds a secret: sorted, disjoint spans of ``text``.

        ``cut``: ``text`` is the end of a longer output, so it may start inside a secret.
        ``overwrites``: lines that write over themselves are also searched as shown.
        """
        syntax = self.syntax
        readings: list[tuple[tuple[re.Pattern[AnyStr], ...], AnyStr]] = [((), text)]
        if syntax.has_hidden(text):
            readings = syntax.readings(text) if cut or self._may_show(text) else []
        spans: list[Span] = []
        for order, shown in readings:
            ends: list[int] = []
            if cut and isinstance(text, str) and isinstance(shown, str):
                ends = self._cut_ends(text, order, shown)
            if order and not ends and not self.may_hold(shown):
                continue  # a view maps what is kept back to the text: built only when needed
            view = View.of(text, order)
            for pattern in self._patterns(shown):
                spans += [view.span(*match.span()) for match in pattern.finditer(shown)]
            spans += [view.span(*span) for span in self._assignments(shown, secret_name)]
            spans += [(0, view.position(end - 1) + 1) for end in ends]
        if overwrites and syntax.may_move(text):
            spans += self._overwritten(text, secret_name)
        if self.literal is not None:
            spans += [match.span() for match in self.literal.finditer(text)]
        return _merge(spans)

    def _overwritten(self, text: AnyStr, secret_name: SecretName) -> list[Span]:
        """The lines of ``text`` that write over themselves and show a secret so (which none
        of their pieces need hold), each whole: what shows comes from all over the line."""
        syntax = self.syntax
        shown = shown_text(syntax.as_text(text))
        if shown is None:
            return []
        as_shown = syntax.from_text(shown)
        found = self.find(as_shown, secret_name, overwrites=False)
        if not found:
            return []
        starts = [0]  # where each line of ``text`` starts (a secret shown is rare)
        position = text.find(syntax.newline)
        while position != -1:
            starts.append(position + 1)
            position = text.find(syntax.newline, position + 1)
        spans: list[Span] = []
        for start, end in found:
            first = as_shown.count(syntax.newline, 0, start)
            last = first + as_shown.count(syntax.newline, start, end)
            for line in range(first, min(last, len(starts) - 1) + 1):
                line_end = starts[line + 1] - 1 if line + 1 < len(starts) else len(text)
                if syntax.may_move(text[starts[line]:line_end]):  # a plain one is masked as is
                    spans.append((starts[line], line_end))
        return spans

    def _cut_ends(self: Forms[str], text: str, order: tuple[re.Pattern[str], ...],
                  shown: str) -> list[int]:
        """Where in ``shown`` (``text`` read in ``order``) the end of a secret that the cut
        ``text`` starts with ends; ``text`` is masked from its start to there.

        That end starts the text, or follows what the cut left of an escape sequence that
        split the secret: no sink can tell that rest (``[0m``, ``8;;url\\x07``) from text.
        No sequence runs on from the rest, so it reads alone as it does in ``shown``.
        """
        ends: list[int] = []
        for start in (0, *_escape_remainders(text)):
            offset = len(self.syntax.strip(text[:start], order))
            ends += _cut_start(shown, offset, self.visible)
        return ends

    def _assignments(self, text: AnyStr, secret_name: SecretName) -> list[Span]:
        """The values of ``NAME=value`` with a secret NAME, found from the names' words."""
        if self.words is None or not self._has_word(text):
            return []
        syntax = self.syntax
        spans: list[Span] = []
        done = 0  # the text before is examined: every character is walked over at most twice
        for word in self.words.finditer(text):
            if word.start() < done:
                continue  # in a name already examined, or in the value of one found
            start, end = word.start(), word.end()
            while start > done and text[start - 1] in syntax.name_chars:
                start -= 1
            while end < len(text) and text[end] in syntax.name_chars:
                end += 1
            done = end
            if text[end:end + 1] != syntax.equals:
                continue
            raw = text[start:end]
            name = raw if isinstance(raw, str) else raw.decode()
            # As the shell spells a name: not after a word character, not starting with a digit.
            if name[0].isdigit() or (start and syntax.word_before.match(text, start - 1)):
                continue
            value = syntax.value.match(text, end + 1)
            if value is None or not secret_name(name):
                continue
            if value.group() != syntax.mask:
                spans.append(value.span())
            done = value.end()
        return spans


def _cut_start(text: str, at: int, forms: tuple[str, ...]) -> list[int]:
    """Where the longest end of a secret form (``MIN_CUT_SECRET_CHARS`` or more) that
    ``text`` holds at ``at`` ends in ``text``: none, or one place."""
    head = text[at:at + MIN_CUT_SECRET_CHARS]
    if len(head) < MIN_CUT_SECRET_CHARS:
        return []
    longest = 0
    for form in forms:
        found = form.find(head, 1)
        while found != -1:  # each place the head occurs in the form may start its end
            if len(form) - found > longest and text.startswith(form[found:], at):
                longest = len(form) - found
            found = form.find(head, found + 1)
    return [at + longest] if longest else []


def _escape_remainders(text: str) -> set[int]:
    """Where each thing a cut may have left of an escape sequence at ``text``'s start ends."""
    found = (compiled(remainder).match(text) for remainder in _ESCAPE_REMAINDERS)
    return {match.end() for match in found if match is not None}


def _merge(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def apply(text: AnyStr, spans: list[Span], mask: AnyStr) -> AnyStr:
    """``text`` with each of ``spans`` (sorted, disjoint) replaced by ``mask``."""
    if not spans:
        return text
    parts: list[AnyStr] = []
    position = 0
    for start, end in spans:
        parts += [text[position:start], mask]
        position = end
    parts.append(text[position:])
    return text[:0].join(parts)


@lru_cache(maxsize=16)
def secret_forms(values: tuple[str, ...], names: frozenset[str]) -> Forms[str]:
    """The compiled forms of ``values`` (and of ``NAME=`` for ``names``) for text."""
    return Forms(TEXT, *_visible_forms(values), names)


@lru_cache(maxsize=16)
def secret_forms_bytes(values: tuple[str, ...], names: frozenset[str]) -> Forms[bytes]:
    """The same, for a byte stream."""
    return Forms(BYTES, *_visible_forms(values), names)


def _visible_forms(values: tuple[str, ...]) -> tuple[tuple[str, ...], set[str]]:
    """Every form a reader may see of ``values``, and the values with hidden characters."""
    visible: set[str] = set()
    literal: set[str] = set()
    for value in values:
        shown = TEXT.strip(value, TEXT.orders[0]) if TEXT.has_hidden(value) else value
        if shown != value:
            literal.add(value)  # as written, too: what shows of it may be too short to mask
        if len(shown) < MIN_LISTED_SECRET_CHARS:
            continue
        visible.update(form for form in _encoded_forms(shown)
                       if len(form) >= MIN_LISTED_SECRET_CHARS)
        if "\n" in shown:
            visible.update(line.strip() for line in shown.split("\n")
                           if len(line.strip()) >= MIN_SECRET_LINE_CHARS)
    return tuple(sorted(visible)), literal


def _encoded_forms(value: str) -> set[str]:
    """``value`` as printed, JSON-escaped (non-ASCII escaped or not) and URL-encoded, and
    with every character escaped either way (what any decoder turns back into ``value``)."""
    forms = {value, _json_escaped(value, "")}
    encoded = value.encode("utf-8", "surrogatepass")
    units = value.encode("utf-16-be", "surrogatepass")
    for hex_case in ("x", "X"):
        forms.add(_json_escaped(value, hex_case))
        url = "".join(char if char in _URL_SAFE else "".join(
            f"%{byte:02{hex_case}}" for byte in char.encode("utf-8", "surrogatepass"))
            for char in value)
        forms.update((url, url.replace("%20", "+")))
        forms.add("".join(f"%{byte:02{hex_case}}" for byte in encoded))
        forms.add("".join(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04{hex_case}}"
                          for i in range(0, len(units), 2)))
    return forms


def _json_escaped(value: str, hex_case: str) -> str:
    """``value`` inside a JSON string; with ``hex_case`` ("x", "X") non-ASCII is escaped."""
    out = []
    for char in value:
        if char in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[char])
        elif char < " " or (hex_case and ord(char) > 0x7E):
            units = char.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04{hex_case or 'x'}}"
                       for i in range(0, len(units), 2))
        else:
            out.append(char)
    return "".join(out)


class LogMasker:
    """Masks a gate's output as it streams to its log: ``feed`` each chunk, then ``flush``.

    Works on bytes: output need not be UTF-8, and what is not passes through unchanged. The
    last ``holdback`` bytes are kept back until more comes, so a secret split across two reads
    is seen whole. Not caught: a secret spread over more than that (hundreds of escape
    sequences between its characters), and the rest of one ``SECRET=value`` word longer than
    ``MAX_PENDING`` (masked up to there).
    """

    MAX_PENDING = 1 << 20

    def __init__(self, forms: Forms[bytes], secret_name: SecretName) -> None:
        self._forms = forms
        self._secret_name = secret_name
        self.holdback = max(1024, 4 * forms.longest + 64)
        self._pending = b""

    def feed(self, data: bytes) -> bytes:
        """What of ``data`` (and of what was kept back) can be written now, masked."""
        buffer = self._pending + data if self._pending else data
        if len(buffer) <= self.holdback:
            self._pending = buffer
            return b""
        cut = len(buffer) - self.holdback
        spans = self._forms.find(buffer, self._secret_name)
        for start, end in spans:  # a secret across the cut waits for the rest of it
            if start < cut and (cut < end or end == len(buffer)):
                cut = start
                break
        if cut < len(buffer) - self.MAX_PENDING:
            cut = len(buffer) - self.holdback  # one endless word: mask what is here
        self._pending = buffer[cut:]
        kept = [(start, min(end, cut)) for start, end in spans if start < cut]
        masked: bytes = apply(buffer[:cut], kept, BYTES.mask)
        return masked

    def flush(self) -> bytes:
        """The rest, masked: call once, when the output has ended."""
        buffer, self._pending = self._pending, b""
        masked: bytes = apply(buffer, self._forms.find(buffer, self._secret_name), BYTES.mask)
        return masked
