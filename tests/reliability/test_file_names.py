"""Any file name git can hold survives the change set and reaches a gate byte for byte.

Names are generated as bytes: newlines, quotes, ``$(...)``, backticks, leading dashes, glob
characters, pathspec magic, invalid UTF-8. They are real files in real git repositories.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_verifygate.contract import load_contract
from pytest_verifygate.engine import run_gates
from pytest_verifygate.git.changes import ChangeRequest, compute_changes
from pytest_verifygate.selection import select_gates

from .support import DUMP_ARGS_SCRIPT, decode_dump, examples, toml_string

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

HOSTILE_NAMES = [
    b"-rf", b"--help", b"-", b"--", b"$(touch pwned)", b"`touch pwned`", b"a;touch pwned",
    b"'", b'"', b"a\nb", b"\n", b" ", b"x\r", b"\t", b"*", b"?", b"[a]", b":(glob)x", b"~",
    b"!x", b"#x", b"{files}", b"\xff\xfe", b"caf\xc3\xa9", b"caf\xe9", b"\x1b[31mred",
    b"a\\b", b"$HOME", b"${IFS}", b"a b  c", b"\xe2\x80\xaeevil", b"--output=pwned",
]


def _acceptable(name: bytes) -> bool:
    """Names a POSIX file system and git can both hold, and that do not configure git."""
    if not name or b"/" in name or b"\0" in name or name in (b".", b".."):
        return False
    # .gitignore, .gitattributes, .git and their NTFS-protected spellings configure or
    # confuse git itself; they are not file names a change set is about.
    return not name.lower().rstrip(b". ").startswith((b".git", b"git~"))


NAMES = st.lists(
    st.one_of(st.sampled_from(HOSTILE_NAMES), st.binary(min_size=1, max_size=24)),
    min_size=1, max_size=5, unique=True,
).map(lambda names: [name for name in names if _acceptable(name)]).filter(bool)


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@e.invalid", "-c", "user.name=T", *args],
                   cwd=root, check=True, capture_output=True)


def _new_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("names")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "commit", "-q", "--allow-empty", "-m", "empty")
    return root


@examples(12)
@given(names=NAMES)
def test_change_sets_hold_exactly_the_names(
    tmp_path_factory: pytest.TempPathFactory, names: list[bytes]
) -> None:
    root = _new_repo(tmp_path_factory)
    for name in names:
        with open(os.path.join(os.fsencode(root), name), "wb") as handle:
            handle.write(b"x")
    expected = tuple(sorted(os.fsdecode(name) for name in names))

    untracked = compute_changes(root, ChangeRequest(worktree=True))
    assert untracked.files == expected and not untracked.deleted

    _git(root, "add", "-A")
    staged = compute_changes(root, ChangeRequest(staged=True))
    assert staged.files == expected and not staged.deleted
    assert staged.existing_files == expected

    explicit = compute_changes(root, ChangeRequest(files=list(expected)), cwd=root)
    assert explicit.files == expected and not explicit.deleted

    _git(root, "commit", "-q", "-m", "add")
    for name in names:
        os.unlink(os.path.join(os.fsencode(root), name))
    _git(root, "add", "-A")
    deleted = compute_changes(root, ChangeRequest(staged=True))
    assert deleted.files == expected and deleted.deleted == frozenset(expected)
    assert deleted.existing_files == ()
    since = compute_changes(root, ChangeRequest(changed_from="HEAD~1"))
    assert since.files == ()  # added then deleted since HEAD~1: nothing changed at all


@examples(10)
@given(names=NAMES)
def test_gates_receive_exactly_the_names_and_no_shell_sees_them(
    tmp_path_factory: pytest.TempPathFactory, names: list[bytes]
) -> None:
    root = _new_repo(tmp_path_factory)
    for name in names:
        with open(os.path.join(os.fsencode(root), name), "wb") as handle:
            handle.write(b"x")
    array = ["sh", "-c", DUMP_ARGS_SCRIPT, "sh", "{files}"]
    string = f"sh -c {shlex.quote(DUMP_ARGS_SCRIPT)} sh {{files}}"
    script = "printf '%s\\0' {files} | od -An -v -tx1"
    # Array form, string form and a shell script: three ways {files} reaches a program.
    (root / "verify.toml").write_text(
        f'[[gate]]\nname = "array"\ncommand = [{", ".join(map(toml_string, array))}]\n'
        f'[[gate]]\nname = "string"\ncommand = {toml_string(string)}\n'
        f'[[gate]]\nname = "shell"\nshell = true\ncommand = {toml_string(script)}\n',
        encoding="utf-8",
    )
    contract = load_contract(root / "verify.toml")
    changes = compute_changes(root, ChangeRequest(files=[os.fsdecode(n) for n in names]),
                              cwd=root)
    run = run_gates(contract, select_gates(contract, changes), changes)
    expected = [b"./" + name if name.startswith(b"-") else name for name in sorted(
        names, key=os.fsdecode)]
    for result in run.results:
        assert result.outcome == "passed", (result.name, result.output_tail)
        assert decode_dump(result.output_tail) == expected, result.name
    assert not list(root.glob("pwned*")) and not Path("pwned").exists()
