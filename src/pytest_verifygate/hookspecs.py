"""The pluggy hooks pytest-verifygate calls (docs: Hooks), registered in every pytest session
and in the ``verifygate`` command; the project name is ``pytest`` so ``@pytest.hookimpl``
works for both.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    from pytest_verifygate.contract import Gate
    from pytest_verifygate.report.error_formats import Finding
    from pytest_verifygate.report.model import GateEntry, Report
    from pytest_verifygate.runner.records import GateResult

Findings = Sequence["Finding | tuple[Any, ...] | Mapping[str, Any]"]

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_verifygate_classify(gate: Gate, result: GateResult) -> str | None:
    """Return a failure code for a failed gate, or None to keep the built-in one.

    ``gate`` is the ``Gate``; ``result`` the ``GateResult`` carrying the built-in ``code``,
    ``exit_code``, ``signal`` and ``output_tail``. The returned code must be one of
    ``pytest_verifygate.classify.CODES``.
    """


@hookspec
def pytest_verifygate_gate_started(gate: Gate) -> None:
    """Called when a gate's first attempt is about to be spawned."""


@hookspec
def pytest_verifygate_gate_finished(gate: Gate, result: GateResult) -> None:
    """Called once per selected gate with its final ``GateResult`` (also for skips)."""


@hookspec
def pytest_verifygate_modifyreport(report: Report) -> None:
    """Change the JSON report (a dict, modified in place) just before it is written."""


@hookspec
def pytest_verifygate_annotation_locations(gate: GateEntry, output: str) -> Findings | None:
    """Return the errors in a failed gate's output that the built-in readers do not know.

    Called for each failed gate when GitHub Actions annotations are made. ``gate`` is the
    gate's entry of the JSON report (``name``, ``command``, ``cwd``, ``code``, ...; a copy);
    ``output`` the end of its output as kept in the report, with ANSI sequences and
    carriage-return redraws removed. Return ``pytest_verifygate.report.error_formats.Finding``
    items (or tuples or dicts of its fields: ``path``, ``line``, ``col``, ``message``, and
    optionally ``severity``, ``title``, ``symbol``), or None. Every implementation's findings
    are used, before the built-in readers' (a built-in finding at the same place with the
    same message is a repeat); findings whose ``path`` is not a file of the repository are
    left out.
    """


class GateHooks(Protocol):
    """The hook relay the engine and the reports call, typed by the hookspecs above: pluggy's
    ``HookRelay``, the ``verifygate`` command's (``plugins.plugin_hook``) or pytest's
    ``config.hook``. A hook that is not ``firstresult`` answers with every implementation's
    result."""

    def pytest_verifygate_classify(self, *, gate: Gate, result: GateResult) -> str | None: ...

    def pytest_verifygate_gate_started(self, *, gate: Gate) -> list[None]: ...

    def pytest_verifygate_gate_finished(self, *, gate: Gate, result: GateResult
                                        ) -> list[None]: ...

    def pytest_verifygate_modifyreport(self, *, report: Report) -> list[None]: ...

    def pytest_verifygate_annotation_locations(self, *, gate: GateEntry, output: str
                                               ) -> list[Findings | None]: ...
