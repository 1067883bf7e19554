"""The pytest plugin's ``--verify-*`` and ``verify_*`` ini options, read back as the engine's
request with the same checks as ``verifygate run``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pytest

if TYPE_CHECKING:
    from pytest_verifygate.engine import RunRequest


def add_options(parser: pytest.Parser) -> None:
    from pytest_verifygate import option_checks  # argparse types shared with the CLI

    group = parser.getgroup("verifygate", "verify contract gates (pytest-verifygate)")
    group.addoption("--verify-contract", nargs="?", const="", metavar="PATH",
                    help="collect one item per selected gate of the verify contract: PATH, or "
                    "the contract found from the current directory up (default: ini "
                    "verify_contract)")
    group.addoption("--verify-role", metavar="R", action="append",
                    help="select the gates for role R (repeatable; default: $VERIFYGATE_ROLE, "
                    "then ini verify_role, comma-separated); gates with roles are collected "
                    "only for one of theirs")
    group.addoption("--verify-phase", type=option_checks.positive_int, metavar="N",
                    help="select the gates for this phase (ini: verify_phase)")
    group.addoption("--verify-shard", metavar="K/N",
                    help="collect only shard K of N of the selected gates, balanced by earlier "
                    "durations; auto: $CI_NODE_INDEX/$CI_NODE_TOTAL (GitLab's parallel:), every "
                    "gate when they are not set")
    group.addoption("--verify-staged", action="store_true",
                    help="the change set is the index against HEAD")
    group.addoption("--verify-changed-from", metavar="REF",
                    help="the change set is everything since merge-base(REF, HEAD) "
                    "(ini: verify_changed_from)")
    group.addoption("--verify-files", nargs="+", action="extend", metavar="F",
                    help="the change set is these files")
    group.addoption("--verify-all", action="store_true",
                    help="no change filtering: every gate applies")
    group.addoption("--verify-jobs", type=option_checks.jobs, metavar="N",
                    help="gates run at once in this process (0 = one per CPU; ini: "
                    "verify_jobs; default: the contract's settings.jobs)")
    group.addoption("--verify-report", metavar="PATH",
                    help="write the JSON report here (ini: verify_report)")
    group.addoption("--verify-digest", metavar="PATH",
                    help="write the Markdown digest of failed gates here (ini: verify_digest)")
    group.addoption("--verify-annotations", choices=option_checks.ANNOTATION_CHOICES,
                    help="github: GitHub Actions error annotations for failed gates and a table "
                    "in $GITHUB_STEP_SUMMARY (default: when GITHUB_ACTIONS is true); none: never")
    group.addoption("--verify-no-cache", action="store_true",
                    help="run gates with cache = true even if they passed on these inputs (a "
                    "pass is still stored)")
    parser.addini("verify_contract",
                  "contract file used by a bare --verify-contract (relative to the ini file)")
    parser.addini("verify_role", "default for --verify-role (comma-separated roles)")
    parser.addini("verify_phase", "default for --verify-phase")
    parser.addini("verify_changed_from", "default for --verify-changed-from")
    parser.addini("verify_jobs", "default for --verify-jobs")
    parser.addini("verify_report", "default for --verify-report (relative to the ini file)")
    parser.addini("verify_digest", "default for --verify-digest (relative to the ini file)")


class VerifyOptions(NamedTuple):
    """The engine's request and the files to write, ini defaults applied."""

    request: RunRequest
    report: Path | None
    digest: Path | None


def read_options(config: pytest.Config) -> VerifyOptions:
    """Command-line values win over ini values; paths are made absolute now."""
    import argparse
    import os

    from pytest_verifygate import option_checks
    from pytest_verifygate.engine import RunRequest
    from pytest_verifygate.git.changes import ChangeRequest
    from pytest_verifygate.selection import ROLE_ENV, asked_roles
    from pytest_verifygate.shards import requested_shard

    option = config.getoption
    ini_dir = config.inipath.parent if config.inipath is not None else config.rootpath

    def ini(name: str) -> str:
        return str(config.getini(name) or "").strip()

    def path(name: str) -> Path | None:
        # On the command line relative to where pytest started; in the ini, to the ini file.
        given: str | None = option(name)
        if given:
            return config.invocation_params.dir / given
        return ini_dir / ini(name) if ini(name) else None

    def number(name: str, check: Callable[[str], int]) -> int | None:
        given: int | None = option(name)
        if given is not None or not ini(name):
            return given
        try:
            return check(ini(name))  # checked like the command-line option of the same name
        except argparse.ArgumentTypeError as exc:
            raise pytest.UsageError(f"ini option {name}: {exc}") from None

    sources = [flag for flag in ("--verify-staged", "--verify-changed-from", "--verify-files",
                                 "--verify-all") if option(flag)]
    if len(sources) > 1:
        raise pytest.UsageError(
            f"{' and '.join(sources)} cannot be combined: choose one source of changed files"
        )
    changed_from = option("verify_changed_from") if sources else ini("verify_changed_from")
    roles = option("verify_role")
    if roles is None and not os.environ.get(ROLE_ENV, "").strip():
        roles = ini("verify_role").split(",")
    report, digest = path("verify_report"), path("verify_digest")
    changes = ChangeRequest(files=option("verify_files"), staged=option("verify_staged"),
                            changed_from=changed_from or None, all=option("verify_all"),
                            outputs=output_paths(config, report, digest))
    request = RunRequest(contract=path("verify_contract"), start=config.invocation_params.dir,
                         changes=changes, role=asked_roles(roles, os.environ),
                         phase=number("verify_phase", option_checks.positive_int),
                         jobs=number("verify_jobs", option_checks.jobs),
                         read_cache=not option("verify_no_cache"),
                         contract_flag="--verify-contract",
                         shard=requested_shard(option("verify_shard"), os.environ,
                                               "--verify-shard"))
    return VerifyOptions(request, report, digest)


def output_paths(config: pytest.Config, *paths: Path | None) -> list[str | Path]:
    """The files this run writes, never changes themselves (with pytest's ``--junitxml``)."""
    xmlpath = getattr(config.option, "xmlpath", None)
    return [path for path in (*paths, xmlpath) if path]
