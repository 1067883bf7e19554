"""Secret redaction: the one place that decides what a report, a cache entry or a log may not say.

A report (and the digest, JUnit, annotations and step summary made from it) leaves the machine:
CI artifacts, pull-request comments, a coding agent's context. Before a gate's entry is written,
the values of secret environment variables are replaced by ``***`` in its ``command``,
``output_tail``, ``reason`` and ``env``; the result cache stores masked output only, and
``Redactor.log_masker`` masks a gate's log as it is written.

A variable is secret when its name contains TOKEN, SECRET, PASSWORD, PASSWD, API_KEY, APIKEY or
PRIVATE_KEY (any case), or when the gate lists it in ``secret_env``. Both the environment the
gate inherits and the gate's own ``env`` / ``NAME=value`` prefixes count. How a secret is found
in text that sinks strip and cut afterwards is ``masking``'s business; the search is loaded
only for a text it could find something in (``Redactor.text``) and a gate's first output
(``LogMaskerOnDemand``): a run whose gates print nothing never loads it.

PYTEST_DONT_REWRITE
"""

import contextlib
import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from pytest_verifygate.commands import UnsupportedCommand, parse_command
from pytest_verifygate.contract import Gate
from pytest_verifygate.report.secrets import (
    MASK,
    MIN_CUT_SECRET_CHARS,
    MIN_LISTED_SECRET_CHARS,
    MIN_SECRET_LINE_CHARS,
)

if TYPE_CHECKING:
    from pytest_verifygate.report.masking import LogMasker

__all__ = ["MASK", "MIN_CUT_SECRET_CHARS", "MIN_LISTED_SECRET_CHARS", "MIN_NAMED_SECRET_CHARS",
           "MIN_SECRET_LINE_CHARS", "LogMaskerOnDemand", "Redactor", "gate_environment",
           "is_secret_name", "redactor_for"]

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW(?:OR)?D|API_?KEY|PRIVATE_?KEY", re.IGNORECASE)
# A value matched only by its variable's name must be this long to be hidden everywhere:
# TOKENIZERS_PARALLELISM=false must not erase every "false" from a test failure.
MIN_NAMED_SECRET_CHARS = 6
# ``NAME=value`` in a shell script: what a script sets itself is as secret as what it inherits.
# (A source, compiled on first use: only shell gates need it.)
_ASSIGNMENT = r"(?<![\w$])([A-Z_][A-Z0-9_]*)=(\"[^\"\n]{0,512}\"|'[^'\n]{0,512}'|[^\s\"';&|]+)"


def is_secret_name(name: str) -> bool:
    """Whether a variable's name says its value is a secret."""
    return SECRET_NAME.search(name) is not None


def gate_environment(gate: Gate) -> dict[str, str]:
    """The variables a gate sets itself: its ``env`` table and its ``NAME=value`` prefixes."""
    env = dict(gate.env)
    if gate.kind == "command" and not gate.shell:
        # A command that cannot be parsed fails before it runs; its text is still redacted.
        with contextlib.suppress(UnsupportedCommand):
            env.update(parse_command(gate.command, shell=False).env)
    return env


class Redactor(NamedTuple):
    """Replaces known secret values, and values assigned to secret names, by ``***``."""

    values: tuple[str, ...] = ()
    names: frozenset[str] = frozenset()

    def text(self, text: str, *, cut: bool = False) -> str:
        """``text`` with every secret value masked, and every ``SECRET_NAME=value`` too.

        ``cut``: ``text`` is the end of a longer output (a tail window), so it may start
        inside a secret.
        """
        if not text or self._holds_none(text, cut=cut):
            return text
        from pytest_verifygate.report.masking import apply, secret_forms

        forms = secret_forms(self.values, self.names)
        masked: str = apply(text, forms.find(text, self.secret, cut=cut), MASK)
        return masked

    def _holds_none(self, text: str, *, cut: bool) -> bool:
        """Whether ``text`` certainly holds no secret, told without the search (``masking``),
        which most reports then never load: no secret value is known, ``text`` is whole (not
        a tail window), and it is plain ASCII with no ``=``. Then there is no value to find,
        nothing a reader would strip, join or redraw, and no ``NAME=value``."""
        return (not self.values and not cut and "=" not in text and text.isascii()
                and text.isprintable())

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """An environment for display: secret names keep their name, never their value."""
        return {name: MASK if value and self.secret(name) else self.text(value)
                for name, value in env.items()}

    def log_masker(self) -> "LogMaskerOnDemand":
        """A masker for a gate's log: bytes fed as they come, masked as ``text`` masks."""
        return LogMaskerOnDemand(self)

    def secret(self, name: str) -> bool:
        """Whether a variable of this name holds a secret (by its name, or listed)."""
        return name in self.names or is_secret_name(name)


def redactor_for(
    gates: Iterable[Gate] = (), environ: Mapping[str, str] | None = None
) -> Redactor:
    """One redactor for a whole report: a value secret for one gate is secret in all of them
    (any gate may print it). ``environ`` is what the gates inherit (default: ours)."""
    inherited = os.environ if environ is None else environ
    assignments = list(inherited.items())
    listed: set[str] = set()
    for gate in gates:
        assignments.extend(gate_environment(gate).items())
        if gate.shell:
            # A shell script can set a secret itself (SERVICE_TOKEN=... ./deploy) and the
            # gate's output may echo it: its value is as secret as an inherited one.
            assignments.extend((match.group(1), match.group(2).strip("'\""))
                               for match in re.finditer(_ASSIGNMENT, gate.command_text))
        listed.update(gate.secret_env)
    values = [
        value
        for name, value in assignments
        if (name in listed and len(value) >= MIN_LISTED_SECRET_CHARS)
        or (is_secret_name(name) and len(value) >= MIN_NAMED_SECRET_CHARS)
    ]
    return Redactor(values=tuple(sorted(set(values))), names=frozenset(listed))


class LogMaskerOnDemand:
    """``masking.LogMasker``, made when the gate's first output comes: a gate that prints
    nothing never loads the search."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._masker: LogMasker | None = None

    def feed(self, data: bytes) -> bytes:
        """What of ``data`` (and of what was held back) can be written now."""
        if self._masker is None:
            from pytest_verifygate.report.masking import LogMasker, secret_forms_bytes

            redactor = self._redactor
            self._masker = LogMasker(secret_forms_bytes(redactor.values, redactor.names),
                                     redactor.secret)
        return self._masker.feed(data)

    def flush(self) -> bytes:
        """The rest, once the output has ended."""
        return b"" if self._masker is None else self._masker.flush()
