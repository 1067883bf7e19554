"""Where a finished run's report goes: the JSON report, JUnit and the agent digest a front end
was asked for, and GitHub's step summary, step outputs and annotations. A front end names the
targets and hands over the report once, as pytest's own ``junitxml`` and ``terminal`` plugins
take theirs at ``pytest_sessionfinish``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pytest_verifygate.report.findings import AnnotationHook
    from pytest_verifygate.report.model import Report


class Targets(NamedTuple):
    """What to write: files by path, and with ``github`` GitHub's step files (when its
    variables name them) and the annotations to print."""

    json: str | os.PathLike[str] | None = None
    junit: str | os.PathLike[str] | None = None
    digest: str | os.PathLike[str] | None = None
    junit_family: str = "xunit2"
    github: bool = False


class Written(NamedTuple):
    """What writing did: ``problems``, files that could not be written (exit status 2);
    ``warnings``; ``annotations``, GitHub's workflow commands for the front end to print; and
    ``report_path``, the JSON report's path once written."""

    problems: list[str]
    warnings: list[str]
    annotations: list[str]
    report_path: str | None


def write_all(report: Report, targets: Targets, *, repo_root: Path, project_root: Path,
              hook: AnnotationHook | None = None,
              junit_options: Callable[[], dict[str, Any]] = dict) -> Written:
    """Write every target of ``targets`` from ``report`` (``junit_options()`` is called only
    for JUnit)."""
    from pytest_verifygate.state.storage import write_output

    problems: list[str] = []
    report_path = None
    files: list[tuple[str, str | os.PathLike[str] | None, Callable[[], str]]] = [
        ("the JSON report", targets.json, lambda: _json(report)),
        ("the JUnit file", targets.junit, lambda: _junit(report, targets, junit_options)),
        ("the digest", targets.digest, lambda: _digest(report, repo_root))]
    for what, path, text in files:
        if path is None:
            continue
        try:
            write_output(path, text())
        except OSError as exc:
            problems.append(f"cannot write {what} {os.fspath(path)}: {exc.strerror or exc}")
            continue
        if path == targets.json:
            report_path = os.fspath(path)
    if not targets.github:
        return Written(problems, [], [], report_path)
    from pytest_verifygate.report import github

    planned = github.plan_annotations(report, repo_root=repo_root, project_root=project_root,
                                      hook=hook)
    warnings = [*planned.warnings, *filter(None, (
        github.append_to(os.environ, github.STEP_SUMMARY_ENV, lambda: github.step_summary(
            report, repo_root=repo_root, planned=planned)),
        github.write_step_outputs(report, os.environ, report_path=report_path)))]
    return Written(problems, warnings, github.printed(planned), report_path)


def _json(report: Report) -> str:
    from pytest_verifygate.report.document import dumps

    return dumps(report)


def _junit(report: Report, targets: Targets, options: Callable[[], dict[str, Any]]) -> str:
    from pytest_verifygate.report.junit import to_junit

    return to_junit(report, family=targets.junit_family, **options())


def _digest(report: Report, repo_root: Path) -> str:
    from pytest_verifygate.report.digest import to_digest

    return to_digest(report, root=str(repo_root))
