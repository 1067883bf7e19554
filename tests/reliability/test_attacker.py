"""An attacker's pass over the newest commands and state: what anything that can write the
work tree or ``.git`` (a gate, an agent) can plant, and what the tool must never do with it."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import commit_all, verifygate, write


def test_install_never_writes_through_a_planted_temp_link(repo: Path, tmp_path: Path) -> None:
    # The hook's temp name is predictable: a link there must not lead the write (and the
    # chmod 755) to a file of the user's.
    victim = write(tmp_path / "victim.txt", "the user's file\n")
    victim.chmod(0o600)
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in ("pre-commit", "pre-push"):
        os.symlink(victim, hooks / f".{name}.verifygate-tmp")
    result = verifygate("install", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "the user's file\n"
    assert victim.stat().st_mode & 0o777 == 0o600
    assert "pytest_verifygate run --staged" in (hooks / "pre-commit").read_text()
    assert not (hooks / "pre-commit").is_symlink()
