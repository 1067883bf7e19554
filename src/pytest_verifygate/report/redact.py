"""Secret redaction: the one place that decides what a report may not say.

A report (and the digest made from it) leaves the machine: CI artifacts, pull-request comments,
a coding agent's context. Before a gate's entry is written, the values of secret environment
variables are replaced by ``***`` in its ``command``, ``output_tail``, ``reason`` and ``env``.

A variable is secret when its name contains TOKEN, SECRET, PASSWORD, PASSWD, API_KEY, APIKEY or
PRIVATE_KEY (any case), or when the gate lists it in ``secret_env``. Both the environment the
gate inherits and the gate's own ``env`` / ``NAME=value`` prefixes count. The gate's log file
under the git directory keeps the raw output: it stays on the machine.
"""

import contextlib
import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import NamedTuple

from pytest_verifygate.commands import UnsupportedCommand, parse_command
from pytest_verifygate.contract import Gate

MASK = "***"
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW(?:OR)?D|API_?KEY|PRIVATE_?KEY", re.IGNORECASE)
# A value matched only by its variable's name must be this long to be hidden everywhere:
# TOKENIZERS_PARALLELISM=false must not erase every "false" from a test failure.
MIN_NAMED_SECRET_CHARS = 6
# A value the contract marks secret is hidden from this length on; shorter ones would make
# the mask longer than the value (unbounded output) and garble unrelated text.
MIN_LISTED_SECRET_CHARS = 3
# ``NAME=value`` in a command or in output (a shell prefix, an ``env`` dump). Only upper-case
# names, as environment variables are written: ``max_tokens=512`` in a traceback stays.
# The look-behind (a name never starts inside a longer word) and the bounded quotes keep
# matching near-linear even on hostile output.
_ASSIGNMENT = re.compile(
    r"(?<![\w$])([A-Z_][A-Z0-9_]*)=(\"[^\"\n]{0,512}\"|'[^'\n]{0,512}'|[^\s\"';&|]+)"
)


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

    def text(self, text: str) -> str:
        """``text`` with every secret value masked, and every ``SECRET_NAME=value`` too."""
        if not text:
            return text
        if self.values:
            text = self._pattern.sub(MASK, text)
        return _ASSIGNMENT.sub(self._assignment, text)

    def _assignment(self, match: re.Match[str]) -> str:
        if self._secret(match.group(1)) and match.group(2) != MASK:
            return f"{match.group(1)}={MASK}"
        return match.group(0)

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """An environment for display: secret names keep their name, never their value."""
        return {name: MASK if value and self._secret(name) else self.text(value)
                for name, value in env.items()}

    def _secret(self, name: str) -> bool:
        return name in self.names or is_secret_name(name)

    @property
    def _pattern(self) -> re.Pattern[str]:
        return _values_pattern(self.values)


@lru_cache(maxsize=16)
def _values_pattern(values: tuple[str, ...]) -> re.Pattern[str]:
    # Cached here, not on the redactor: a record has no room for a computed attribute.
    # Longest first, so a secret that contains another secret is masked as a whole.
    ordered = sorted(set(values), key=len, reverse=True)
    return re.compile("|".join(re.escape(value) for value in ordered))


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
                               for match in _ASSIGNMENT.finditer(gate.command_text))
        listed.update(gate.secret_env)
    values = [
        value
        for name, value in assignments
        if (name in listed and len(value) >= MIN_LISTED_SECRET_CHARS)
        or (is_secret_name(name) and len(value) >= MIN_NAMED_SECRET_CHARS)
    ]
    return Redactor(values=tuple(values), names=frozenset(listed))
