"""Terminal text made readable: ANSI sequences removed, screen redraws turned into lines.

Shared by the classifier, the agent digest and the JUnit writer; kept apart from
``classify`` so that reading output does not compile the classification rules.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re

# Control sequences (CSI: colours, cursor moves) and operating system commands (OSC: titles,
# links), which run on; and two-character escapes (``ESC E``, ``ESC c``).
CSI_OR_OSC = r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\))"
ANSI = re.compile(CSI_OR_OSC + r"|\x1b[@-Z\\-_]")
# Cursor moves and erases (progress spinners, log-update redraws) start text at a new place on
# the screen.
CURSOR_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ABEFGHJKf]|\x1bc")


def strip_ansi(text: str) -> str:
    """Remove ANSI colour and cursor sequences."""
    return ANSI.sub("", text)


def plain_output(text: str) -> str:
    """No ANSI codes, ``\\n`` line ends, and every redraw starting a new line."""
    text = strip_ansi(CURSOR_CONTROL.sub("\n", text))
    return text.replace("\r\n", "\n").replace("\r", "\n")
