"""How a sink reads output: which characters it hides, and the ways it strips them.

Sinks strip escape sequences and characters nothing shows (controls, C1, and Unicode's
default-ignorable code points), some sequences first (the digest, JUnit), some characters first
(a terminal runs a NUL inside an escape sequence), some only the ESC of an escape. ``Syntax``
holds those ways of reading (``readings``) for one kind of text: ``TEXT`` for reports, ``BYTES``
for a log as it is written. ``View`` is text as one way reads it, mapped back to the original,
so that a secret found in what a reader sees masks the whole stretch of the original it came
from. Owned for ``masking``, which searches the readings for secrets.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections.abc import Callable
from typing import AnyStr, Generic

from pytest_verifygate.report.overwrites import moves, moves_back
from pytest_verifygate.report.secrets import MASK
from pytest_verifygate.text import ANSI, CSI_OR_OSC

# A value after ``NAME=``: quoted (bounded, so matching stays linear) or one shell word.
_VALUE = r"\"[^\"\n]{0,512}\"|'[^'\n]{0,512}'|[^\s\"';&|]+"
NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
# Unicode's default-ignorable code points (Default_Ignorable_Code_Point in
# DerivedCoreProperties.txt, as of Unicode 14): what renderers and terminals draw as
# nothing, and so what can sit inside a secret that still reads whole. The soft hyphen, the
# combining grapheme joiner, the Arabic letter mark, Hangul fillers, Khmer inherent vowels,
# Mongolian variation selectors and vowel separator, zero-width, joiner, bidi and invisible
# operator characters, variation selectors, the BOM, shorthand and musical format controls,
# tag characters, and the reserved code points kept ignorable for what is assigned later.
_IGNORABLE = ("\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
              "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
              "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff")
# Characters nothing shows, but ESC (which starts a sequence): controls but tab and newline
# (CR too, so CRLF and LF line ends read the same), C1 controls, the default-ignorable code
# points, interlinear annotation characters and noncharacters. Three readings are searched:
# escape sequences removed before the characters, as the digest and JUnit do; the characters
# before any ECMA-48 escape sequence, as a terminal does (it runs a NUL inside a sequence, and
# takes ``ESC 7`` away whole); and only the ESC of a two-character escape, as a sink that
# drops control characters alone does (``SECR\x1bET`` shows ``SECRET``).
_HIDDEN = f"\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f{_IGNORABLE}\ufff9-\ufffb\ufffe\uffff"
_ESCAPE = r"\x1b[\x20-\x2f]*[\x30-\x7e]"
# The same as bytes: the C0 controls (each byte hidden by itself), then the rest as UTF-8.
_CONTROL_BYTES = bytes([*range(0x00, 0x09), *range(0x0B, 0x1B), *range(0x1C, 0x20), 0x7F])
_IGNORABLE_BYTES = (rb"\xc2[\x80-\x9f\xad]|\xcd\x8f|\xd8\x9c"
                    rb"|\xe1(?:\x85[\x9f\xa0]|\x9e[\xb4\xb5]|\xa0[\x8b-\x8f])"
                    rb"|\xe2(?:\x80[\x8b-\x8f\xaa-\xae]|\x81[\xa0-\xaf])|\xe3\x85\xa4"
                    rb"|\xef(?:\xb8[\x80-\x8f]|\xbb\xbf|\xbe\xa0|\xbf[\xb0-\xbb\xbe\xbf])"
                    rb"|\xf0(?:\x9b\xb2[\xa0-\xa3]|\x9d\x85[\xb3-\xba])|\xf3\xa0[\x80-\xbf]{2}")
_HIDDEN_BYTES = b"[" + _CONTROL_BYTES + b"]+|" + _IGNORABLE_BYTES
# Bytes that start something hidden (a superset): output without any is read as it is.
_HIDDEN_LEADS = _CONTROL_BYTES + b"\xc2\xcd\xd8\xe1\xe2\xe3\xef\xf0\xf3"
# Whether output hides anything (or holds an ESC): every alternative starts with a literal byte,
# so the search skips ahead in C to where one of them is, not trying each at every byte.
_HIDDEN_SEARCH = b"|".join([*(re.escape(bytes([byte])) for byte in _CONTROL_BYTES + b"\x1b"),
                            _IGNORABLE_BYTES])
# Every byte that is not in an upper-case variable name: removed in C, what is left of most
# output is short, and a secret word is searched for there first.
_NOT_NAME_BYTES = bytes(byte for byte in range(256) if chr(byte) not in NAME_CHARS)
Span = tuple[int, int]


class Syntax(Generic[AnyStr]):
    """The patterns for one kind of text, ``str`` or ``bytes``."""

    def __init__(self, *, readings: tuple[tuple[AnyStr, ...], ...],
                 has_hidden: Callable[[AnyStr], bool], value: AnyStr, word_before: AnyStr,
                 name_chars: frozenset[str] | frozenset[int], equals: AnyStr, bar: AnyStr,
                 mask: AnyStr, encode: Callable[[str], AnyStr], sequences: AnyStr,
                 escape: AnyStr, newline: AnyStr, may_move: Callable[[AnyStr], bool],
                 as_text: Callable[[AnyStr], str], from_text: Callable[[str], AnyStr],
                 most_shown: Callable[[AnyStr], int] = len,
                 name_only: Callable[[AnyStr], AnyStr] | None = None) -> None:
        # The ways text is read once stripped: each a sequence of patterns removed in turn.
        self._readings: tuple[tuple[AnyStr, ...], ...] = readings
        self._sequences: AnyStr = sequences  # CSI and OSC: what every reading removes alike
        self.escape: AnyStr = escape
        self.has_hidden: Callable[[AnyStr], bool] = has_hidden
        self._value: AnyStr = value
        self._word_before: AnyStr = word_before
        self.name_chars = name_chars
        self.equals: AnyStr = equals
        self.bar: AnyStr = bar
        self.mask: AnyStr = mask
        self.encode: Callable[[str], AnyStr] = encode
        # The most any reading of a text can keep of it (a bound, cheap to compute): a text
        # that keeps less than the shortest secret form holds none, however it is read.
        self.most_shown: Callable[[AnyStr], int] = most_shown
        # The text with only what names are made of left (a cheap prefilter): a secret word
        # in the text is in what is left, since all its characters are kept.
        self.name_only: Callable[[AnyStr], AnyStr] = name_only or _unchanged
        # Lines that write over themselves (``overwrites``): whether the text may hold one,
        # and the text as ``str`` and back, for rendering them.
        self.newline: AnyStr = newline
        self.may_move: Callable[[AnyStr], bool] = may_move
        self.as_text: Callable[[AnyStr], str] = as_text
        self.from_text: Callable[[str], AnyStr] = from_text

    # Compiled on first use: most output has nothing hidden, and a commit's run should not
    # pay for compiling large character classes it never uses.
    @functools.cached_property
    def orders(self) -> tuple[tuple[re.Pattern[AnyStr], ...], ...]:
        return tuple(tuple(re.compile(source) for source in reading)
                     for reading in self._readings)

    @functools.cached_property
    def sequences(self) -> tuple[re.Pattern[AnyStr], ...]:
        return (re.compile(self._sequences),)

    @functools.cached_property
    def value(self) -> re.Pattern[AnyStr]:
        return re.compile(self._value)

    @functools.cached_property
    def word_before(self) -> re.Pattern[AnyStr]:
        return re.compile(self._word_before)

    def strip(self, text: AnyStr, order: tuple[re.Pattern[AnyStr], ...]) -> AnyStr:
        for hidden in order:
            text = hidden.sub(text[:0], text)
        return text

    def readings(self, text: AnyStr) -> list[tuple[tuple[re.Pattern[AnyStr], ...], AnyStr]]:
        """Each way ``text`` reads once stripped, with how. Coloured output (nothing hidden
        but well-formed CSI and OSC sequences, which every way removes alike) reads one way."""
        if not self.has_hidden(text.replace(self.escape, text[:0])):
            shown = self.strip(text, self.sequences)
            if self.escape not in shown:
                return [(self.sequences, shown)]
        return [(order, self.strip(text, order)) for order in self.orders]


def _unchanged(text: AnyStr) -> AnyStr:
    return text


def _has_hidden(text: str) -> bool:
    # Printable ASCII text (tab and newline aside) hides nothing: a fast check in C first.
    # Anything else is searched: some ignorable characters count as printable (variation
    # selectors are marks, Hangul fillers letters), and a non-breaking space is not printable.
    if text.isascii() and text.replace("\n", "").replace("\t", "").isprintable():
        return False
    return compiled(f"[{_HIDDEN}\x1b]").search(text) is not None


def _has_hidden_bytes(data: bytes) -> bool:
    # Bytes that may start something hidden first (in C), then the search (a dash or a
    # check mark starts like a zero-width space, an emoji like a musical format control).
    return (len(data.translate(None, _HIDDEN_LEADS + b"\x1b")) != len(data)
            and compiled(_HIDDEN_SEARCH).search(data) is not None)


@functools.cache
def compiled(source: AnyStr) -> re.Pattern[AnyStr]:
    return re.compile(source)


TEXT = Syntax(
    # Sequences first then characters is one pass: a run of characters never holds an ESC.
    readings=((f"{ANSI}|[{_HIDDEN}]+|\x1b",),
              (f"[{_HIDDEN}]+", f"{CSI_OR_OSC}|{_ESCAPE}|\x1b"),
              (f"{CSI_OR_OSC}|[{_HIDDEN}]+|\x1b",)),
    has_hidden=_has_hidden,
    value=_VALUE,
    word_before=r"[\w$]",
    name_chars=frozenset(NAME_CHARS),
    equals="=",
    bar="|",
    mask=MASK,
    encode=str,
    sequences=CSI_OR_OSC,
    escape="\x1b",
    newline="\n",
    may_move=moves,
    as_text=str,
    from_text=str,
)
BYTES = Syntax(
    readings=((ANSI.encode() + rb"|" + _HIDDEN_BYTES + rb"|\x1b",),
              (_HIDDEN_BYTES, CSI_OR_OSC.encode() + rb"|" + _ESCAPE.encode() + rb"|\x1b"),
              (CSI_OR_OSC.encode() + rb"|" + _HIDDEN_BYTES + rb"|\x1b",)),
    has_hidden=_has_hidden_bytes,
    value=_VALUE.encode(),
    word_before=rb"[\w$]",
    name_chars=frozenset(NAME_CHARS.encode()),
    equals=b"=",
    bar=b"|",
    mask=MASK.encode(),
    encode=lambda text: text.encode("utf-8", "surrogatepass"),
    sequences=CSI_OR_OSC.encode(),
    escape=b"\x1b",
    newline=b"\n",
    may_move=moves_back,
    as_text=lambda data: data.decode("utf-8", "surrogateescape"),
    from_text=lambda text: text.encode("utf-8", "surrogateescape"),
    # Every reading drops each C0 control and ESC (in C: a flood of NULs costs no search).
    most_shown=lambda data: len(data.translate(None, _CONTROL_BYTES + b"\x1b")),
    name_only=lambda data: data.translate(None, _NOT_NAME_BYTES),
)


class View(Generic[AnyStr]):
    """Text as a reader sees it once hidden parts are stripped, mapped back to the original.

    A match in ``visible`` covers the span of the original from its first character to its
    last, hidden parts in between included.
    """

    def __init__(self, text: AnyStr, starts: list[int] | None = None,
                 sources: list[int] | None = None, inner: View[AnyStr] | None = None) -> None:
        self.visible: AnyStr = text
        self._starts = starts or [0]  # where each kept run starts in ``visible``
        self._sources = sources or [0]  # ... and in the text it was kept from
        self._inner: View[AnyStr] | None = inner

    @classmethod
    def of(cls, text: AnyStr, order: tuple[re.Pattern[AnyStr], ...]) -> View[AnyStr]:
        view: View[AnyStr] = cls(text)
        for hidden in order:
            view = view._without(hidden)
        return view

    def _without(self, hidden: re.Pattern[AnyStr]) -> View[AnyStr]:
        text = self.visible
        starts: list[int] = []
        sources: list[int] = []
        pieces: list[AnyStr] = []
        position = kept = 0
        for found in hidden.finditer(text):
            if found.start() > position:
                starts.append(kept)
                sources.append(position)
                pieces.append(text[position:found.start()])
                kept += found.start() - position
            position = found.end()
        if position == 0:
            return self  # nothing hidden
        if position < len(text):
            starts.append(kept)
            sources.append(position)
            pieces.append(text[position:])
        return View(text[:0].join(pieces), starts, sources, self)

    def position(self, index: int) -> int:
        run = bisect_right(self._starts, index) - 1
        found = self._sources[run] + index - self._starts[run]
        return found if self._inner is None else self._inner.position(found)

    def span(self, start: int, end: int) -> Span:
        return self.position(start), self.position(end - 1) + 1
