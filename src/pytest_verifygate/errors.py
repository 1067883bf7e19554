"""Errors a user can cause (a contract, a flag, a git ref): the front ends print
``str(error)``, one clear line, and exit with status 2. Tracebacks are for bugs.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations


class VerifyGateError(Exception):
    """Base class: a problem the user can fix, described in one line."""


class ContractError(VerifyGateError):
    """The contract file is missing, unreadable or invalid.

    The message names the file, and where known the gate and the key, and says how to fix it.
    """

    def __init__(
        self,
        path: str,
        message: str,
        *,
        gate: str | None = None,
        key: str | None = None,
        hint: str | None = None,
    ) -> None:
        # Kept to rebuild the error as another kind (``contract.revision``).
        self.path = path
        self.message = message
        self.hint = hint
        where = [path]
        if gate is not None:
            where.append(f"gate {gate!r}")
        if key is not None:
            where.append(f"key {key!r}")
        text = f"{': '.join(where)}: {message}"
        if hint:
            text += f" ({hint})"
        super().__init__(text)


class ChangeSetError(VerifyGateError):
    """The set of changed files cannot be computed (unknown ref, shallow clone, no git)."""


class UsageError(VerifyGateError):
    """A command-line or option value is invalid."""
