"""How a terminal shows a line that writes over itself: carriage returns, backspaces, cursor moves.

``printf 'zzzz0123\\rghp_'`` shows ``ghp_0123``: a secret can be put together on the screen
from pieces none of which holds it, and a log or a report printed raw on a terminal shows it
so. ``shown_text`` gives a text as a terminal shows it, line for line: each line that moves
the cursor back (a lone CR, a backspace, a CSI cursor move back) rendered, for ``masking``
to search; a line that shows a secret is masked whole. A character struck over
with one backspace (nroff's bold, spinners) is undone for the whole text at once; what is left
(progress bars, cursor moves) is rendered a line at a time, linear in its length and moves.

A log is decoded as UTF-8 for this (bytes that are not kept as they are), and searched as
bytes again.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import re

# What may move the cursor back on a line: a CR not ending it, a backspace, a CSI cursor back
# or to a column. (Moving forward or erasing brings no two pieces of a line together: gcc's
# colours end every piece with an erase, and are not rendered for it.)
_MOVES = r"\r(?!\n)|\x08|\x1b\[[0-9]*[DG]"
# The same CSI moves as bytes: a search with a literal start, which the regex engine skips to.
_CSI_MOVES = rb"\x1b\[[0-9]*[DG]"
# A character a lone backspace steps back over, with the character written over it: the
# terminal shows the second. nroff's bold and underline, spinners; undone all at once.
_STRUCK = r"[^\n\r\x08\x1b]\x08(?=[^\n\r\x08\x1b])"
# The pieces of a line, for rendering: a move, or another escape sequence (shown as nothing).
_TOKENS = (r"\r|\x08|\x1b\[([0-9]*)([CDGK])"
           r"|\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[ -/]*[0-~])?")
# Patterns are compiled on first use: most output never moves the cursor back, and the
# compiles cost a commit's run close to 2 ms.
_compiled = functools.cache(re.compile)
# A column past this is as far as any terminal goes: moves cannot make a line grow unbounded.
MAX_COLUMN = 4096


def moves_back(data: bytes) -> bool:
    """Whether ``data`` may move the cursor back on a line (searches in C, for a log)."""
    # One byte at a time first: ``in`` with one byte is memchr, with two a hundred times slower.
    return (b"\x08" in data or (b"\x1b" in data and _compiled(_CSI_MOVES).search(data) is not None)
            or (b"\r" in data and data.count(b"\r") != data.count(b"\r\n")))


def shown_text(text: str) -> str | None:
    """``text`` as a terminal shows it, line for line (the same lines, in the same order);
    None when no line of it moves the cursor back."""
    if _compiled(_MOVES).search(text) is None:
        return None
    if "\x08" in text:
        text = _compiled(_STRUCK).sub("", text)
    pieces: list[str] = []
    done = 0
    for found in _compiled(_MOVES).finditer(text):
        if found.start() < done:
            continue  # in a line rendered already
        start = text.rfind("\n", 0, found.start()) + 1
        end = text.find("\n", found.end())
        end = len(text) if end == -1 else end
        pieces += [text[done:start], rendered(text[start:end])]
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def moves(text: str) -> bool:
    """Whether ``text`` may move the cursor back on a line."""
    return _compiled(_MOVES).search(text) is not None


def rendered(line: str) -> str:
    """What a terminal shows of ``line`` (no newline in it): each character written at the
    cursor over what was there, the cursor moved by CR, backspace and CSI ``C`` ``D`` ``G``,
    the line erased by CSI ``K``; other escape sequences show nothing."""
    cells: list[str] = []
    column = position = 0
    for token in _compiled(_TOKENS).finditer(line):
        column = _write(cells, column, line[position:token.start()])
        position = token.end()
        move = token.group()
        if move == "\r":
            column = 0
        elif move == "\x08":
            column = max(0, column - 1)
        elif token.group(2) is not None:
            column = _moved(cells, column, token.group(2), token.group(1))
    _write(cells, column, line[position:])
    return "".join(cells)


def _write(cells: list[str], column: int, text: str) -> int:
    if text:
        if column > len(cells):
            cells.extend(" " * (column - len(cells)))
        cells[column:column + len(text)] = text
    return column + len(text)


def _moved(cells: list[str], column: int, final: str, digits: str) -> int:
    """The cursor's column after a CSI move or erase (``final``) with parameter ``digits``."""
    count = min(int(digits[:5] or "0"), MAX_COLUMN)
    if final == "D":
        return max(0, column - max(count, 1))
    if final == "C":  # not past the line's end by more than a terminal is wide
        return min(column + max(count, 1), max(len(cells), MAX_COLUMN))
    if final == "G":
        return max(0, min(count, MAX_COLUMN) - 1)
    # K: erase to the end of the line (0), to the cursor (1), or the whole line (2).
    if count == 0:
        del cells[column:]
    elif count == 1:
        cells[:column] = " " * min(column, len(cells))
    else:
        cells[:] = " " * len(cells)
    return column
