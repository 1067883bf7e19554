"""The ``--verify-*`` command-line options and ``verify_*`` ini options of the pytest plugin.

Owns registering them and reading them back as one ``VerifyOptions`` (command line over ini;
paths made absolute), with the same value checks as the ``verifygate`` command.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pytest

if TYPE_CHECKING:
    from pytest_verifygate.shards import Shard


def add_options(parser: pytest.Parser) -> None:
    """Register the ``--verify-*`` options and their ini defaults."""
    from pytest_verifygate import option_checks  # argparse types shared with the CLI

    group = parser.getgroup("verifygate", "verify contract gates (pytest-verifygate)")
    group.addoption(
        "--verify-contract", dest="verify_contract", nargs="?", const="", default=None,
        metavar="PATH",
        help="collect one item per selected gate of the verify contract: PATH, or the "
        "contract found from the current directory up (default: ini verify_contract)",
    )
    group.addoption("--verify-role", dest="verify_role", metavar="R", action="append",
                    help="select the gates for role R (repeatable; default: $VERIFYGATE_ROLE, "
                    "then ini verify_role, comma-separated); gates with roles are collected "
                    "only for one of theirs")
    group.addoption("--verify-phase", dest="verify_phase", type=option_checks.positive_int,
                    metavar="N",
                    help="select the gates for this phase (ini: verify_phase)")
    group.addoption("--verify-shard", dest="verify_shard", metavar="K/N",
                    help="collect only shard K of N of the selected gates, balanced by earlier "
                    "durations (default: $CI_NODE_INDEX/$CI_NODE_TOTAL when set)")
    group.addoption("--verify-staged", dest="verify_staged", action="store_true", default=False,
                    help="the change set is the index against HEAD")
    group.addoption("--verify-changed-from", dest="verify_changed_from", metavar="REF",
                    help="the change set is everything since merge-base(REF, HEAD) "
                    "(ini: verify_changed_from)")
    group.addoption("--verify-files", dest="verify_files", nargs="+", action="extend",
                    metavar="F", help="the change set is these files")
    group.addoption("--verify-all", dest="verify_all", action="store_true", default=False,
                    help="no change filtering: every gate applies")
    group.addoption("--verify-jobs", dest="verify_jobs", type=option_checks.jobs, metavar="N",
                    help="gates run at once in this process (0 = one per CPU; ini: "
                    "verify_jobs; default: the contract's settings.jobs)")
    group.addoption("--verify-report", dest="verify_report", metavar="PATH",
                    help="write the JSON report here (ini: verify_report)")
    group.addoption("--verify-digest", dest="verify_digest", metavar="PATH",
                    help="write the Markdown digest of failed gates here (ini: verify_digest)")
    group.addoption("--verify-annotations", dest="verify_annotations",
                    choices=option_checks.ANNOTATION_CHOICES, default=None,
                    help="github: GitHub Actions error annotations for failed gates and a table "
                    "in $GITHUB_STEP_SUMMARY (default: when GITHUB_ACTIONS is true); none: never")
    group.addoption("--verify-no-cache", dest="verify_no_cache", action="store_true",
                    default=False, help="run gates with cache = true even if they passed on "
                    "these inputs (a pass is still stored)")
    parser.addini("verify_contract", "contract file used by a bare --verify-contract "
                  "(relative to the ini file)", default="")
    parser.addini("verify_role", "default for --verify-role (comma-separated roles)",
                  default="")
    parser.addini("verify_phase", "default for --verify-phase", default="")
    parser.addini("verify_changed_from", "default for --verify-changed-from", default="")
    parser.addini("verify_jobs", "default for --verify-jobs", default="")
    parser.addini("verify_report", "default for --verify-report (relative to the ini file)",
                  default="")
    parser.addini("verify_digest", "default for --verify-digest (relative to the ini file)",
                  default="")


class VerifyOptions(NamedTuple):
    """The ``--verify-*`` options with their ini defaults applied."""

    contract: Path | None
    roles: tuple[str, ...]
    phase: int | None
    staged: bool
    changed_from: str | None
    files: tuple[str, ...] | None
    all: bool
    jobs: int | None
    report: Path | None
    digest: Path | None
    shard: Shard | None = None


def read_options(config: pytest.Config) -> VerifyOptions:
    """Command-line values win over ini values; paths are made absolute now."""
    from pytest_verifygate import option_checks

    invocation_dir = config.invocation_params.dir
    ini_dir = config.inipath.parent if config.inipath is not None else config.rootpath

    def ini(name: str) -> str:
        return str(config.getini(name) or "").strip()

    def cli_path(value: str | None) -> Path | None:
        return invocation_dir / value if value else None

    def ini_path(name: str) -> Path | None:
        value = ini(name)
        return ini_dir / value if value else None

    sources = [
        name
        for name, given in (
            ("--verify-staged", config.getoption("verify_staged")),
            ("--verify-changed-from", config.getoption("verify_changed_from")),
            ("--verify-files", config.getoption("verify_files")),
            ("--verify-all", config.getoption("verify_all")),
        )
        if given
    ]
    if len(sources) > 1:
        raise pytest.UsageError(
            f"{' and '.join(sources)} cannot be combined: choose one source of changed files"
        )
    phase: int | None = config.getoption("verify_phase")
    if phase is None and ini("verify_phase"):
        phase = _ini_number(ini("verify_phase"), "verify_phase", option_checks.positive_int)
    jobs: int | None = config.getoption("verify_jobs")
    if jobs is None and ini("verify_jobs"):
        jobs = _ini_number(ini("verify_jobs"), "verify_jobs", option_checks.jobs)
    files = config.getoption("verify_files")
    changed_from = config.getoption("verify_changed_from")
    if not sources and ini("verify_changed_from"):
        changed_from = ini("verify_changed_from")
    contract_option: str = config.getoption("verify_contract") or ""
    return VerifyOptions(
        contract=cli_path(contract_option) or ini_path("verify_contract"),
        roles=_roles(config.getoption("verify_role"), ini("verify_role")),
        phase=phase,
        staged=bool(config.getoption("verify_staged")),
        changed_from=changed_from or None,
        files=tuple(files) if files is not None else None,
        all=bool(config.getoption("verify_all")),
        jobs=jobs,
        report=cli_path(config.getoption("verify_report")) or ini_path("verify_report"),
        digest=cli_path(config.getoption("verify_digest")) or ini_path("verify_digest"),
        shard=_shard(config.getoption("verify_shard")),
    )


def _roles(given: list[str] | None, ini_value: str) -> tuple[str, ...]:
    """``--verify-role`` (every one given), else ``VERIFYGATE_ROLE``, else the ini's roles."""
    import os

    from pytest_verifygate.selection import ROLE_ENV, asked_roles

    environ = dict(os.environ)
    if not environ.get(ROLE_ENV, "").strip():
        environ[ROLE_ENV] = ini_value
    return asked_roles(given, environ)


def _shard(given: str | None) -> Shard | None:
    """``--verify-shard K/N``, else GitLab's ``CI_NODE_INDEX``/``CI_NODE_TOTAL``."""
    import os

    from pytest_verifygate.errors import UsageError
    from pytest_verifygate.shards import requested_shard

    try:
        return requested_shard(given, os.environ, "--verify-shard")
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def _ini_number(text: str, name: str, check: Callable[[str], int]) -> int:
    """An ini option's number, checked like the command-line option of the same name."""
    import argparse

    try:
        return check(text)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option {name}: {exc}") from None


def output_paths(config: pytest.Config, options: VerifyOptions) -> list[str | Path]:
    """The files this run writes: never changes themselves (``--junitxml`` is pytest's,
    relative to the current directory as pytest takes it)."""
    paths: list[str | Path] = [path for path in (options.report, options.digest) if path]
    xmlpath = getattr(config.option, "xmlpath", None)
    return [*paths, xmlpath] if xmlpath else paths
