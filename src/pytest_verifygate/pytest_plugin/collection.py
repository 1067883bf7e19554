"""Where the contract is collected: exactly once, whatever paths pytest is given.

A mixin of the run's ``VerifyGateSession`` (its ``config``, ``contract``, ``contract_path`` and
``forced_paths``): arranging pytest's arguments before collection, and the two collection hooks
that let the contract through and make it a ``ContractFile``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_verifygate.pytest_plugin.items import ContractFile

if TYPE_CHECKING:
    from pytest_verifygate.contract import Contract


class ContractCollection:
    """The collection side of the session: see the module docstring."""

    config: pytest.Config
    contract: Contract
    contract_path: Path
    forced_paths: frozenset[Path]

    def arrange_collection(self) -> None:
        """Make sure the contract is collected exactly once, whatever the paths given.

        A path argument naming the contract is used as given (``verify.toml::lint``). A
        directory argument that contains it would walk to it, but ``norecursedirs`` (``.*``)
        or ``--ignore`` may skip ``.middle/``: those directories are let through. Otherwise
        (``testpaths = tests``, or test files named) the contract is added as an argument.
        """
        rootpath = self.config.rootpath
        if not self.contract_path.is_relative_to(rootpath):
            # Node ids are relative to the rootdir; a contract outside it would get none.
            raise pytest.UsageError(
                f"the contract {self.contract.path} is outside pytest's rootdir {rootpath}: "
                "run pytest from the project root, or pass --rootdir=<project root>"
            )
        invocation_dir = self.config.invocation_params.dir
        argument_paths = [
            Path(os.path.abspath(invocation_dir / arg.split("::")[0])) for arg in self.config.args
        ]
        if self.contract_path in argument_paths:
            return
        for argument in argument_paths:
            if argument.is_dir() and self.contract_path.is_relative_to(argument):
                between = [
                    parent for parent in self.contract_path.parents
                    if parent.is_relative_to(argument) and parent != argument
                ]
                self.forced_paths = frozenset([self.contract_path, *between])
                return
        self.config.args.append(str(self.contract_path))

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        if collection_path in self.forced_paths:
            return False
        return None

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> ContractFile | None:
        if file_path == self.contract_path or (
            file_path.name == self.contract_path.name and file_path.samefile(self.contract.path)
        ):
            return ContractFile.from_parent(parent, path=file_path)
        return None
