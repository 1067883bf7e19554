"""The end-to-end suite itself: without Node.js it fails, saying so, rather than skipping."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .harness import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_without_node_the_suite_fails_loudly(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
         "-m", "e2e", "tests/e2e/test_agents.py::test_a_clean_stop_is_allowed_at_once"],
        cwd=ROOT, env={"PATH": str(empty), "HOME": str(tmp_path)}, capture_output=True,
        text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "3 errors" in done.stdout and "skipped" not in done.stdout, done.stdout
    assert ("the end-to-end suite cannot run: `node` is not on PATH: install Node.js and npm; "
            "`npm` is not on PATH") in done.stdout, done.stdout
    assert "Run `make e2e`" in done.stdout
