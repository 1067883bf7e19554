"""Terminal text made readable: ANSI sequences removed, screen redraws turned into lines (apart
from ``classify``, so that reading output does not compile the classification rules).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re

# Control sequences (CSI: colours, cursor moves) and operating system commands (OSC: titles,
# links), which run on; and the other escape sequences, which a terminal takes away whole:
# two characters (``ESC E``, ``ESC c``, ``ESC 7``, ``ESC =``) or more (``ESC ( B``).
CSI_OR_OSC = r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\))"
# Device control, start-of-string, privacy and application strings (DCS, SOS, PM, APC: queries,
# terminal-specific payloads), terminated; and the 8-bit (C1) forms of CSI and of those strings.
STRINGS = (r"\x1b[PX^_][^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)"
           r"|\x9b[0-?]*[ -/]*[@-~]"
           r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)")
ANSI = CSI_OR_OSC + "|" + STRINGS + r"|\x1b[ -/]*[0-~]"
# What a terminal must not be sent from untrusted text once sequences are gone: C0 controls
# but tab and newline, DEL and C1 controls, and the bidi marks, embeddings, overrides and
# isolates that reorder what is shown (U+202E).
UNSAFE_CHARACTERS = ("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f"
                     "\u202a-\u202e\u2066-\u2069]")
# Cursor moves and erases (progress spinners, log-update redraws) start text at a new place on
# the screen.
CURSOR_CONTROL = r"\x1b\[[0-9;?]*[ABEFGHJKf]|\x1bc"


def strip_ansi(text: str) -> str:
    """Remove ANSI colour and cursor sequences."""
    return re.sub(ANSI, "", text)


def plain_output(text: str) -> str:
    """No ANSI codes, ``\\n`` line ends, and every redraw starting a new line."""
    text = strip_ansi(re.sub(CURSOR_CONTROL, "\n", text))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def terminal_safe(text: str) -> str:
    """Untrusted text (a gate's output, a file name) made safe to show on a terminal: escape
    sequences and strings removed, carriage returns and redraws turned into lines, and every
    control or reordering character left dropped. Tab and newline stay."""
    return re.sub(UNSAFE_CHARACTERS, "", plain_output(text))
