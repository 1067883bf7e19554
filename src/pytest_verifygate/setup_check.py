"""What ``verifygate check`` finds wrong before anything runs, in the contract's files, its
gates and the installed hooks.

PYTEST_DONT_REWRITE
"""

import json
import os
import re
import shlex
import shutil
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pytest_verifygate.contract import Contract, Gate, display_path
from pytest_verifygate.contract.parse import parse_toml
from pytest_verifygate.errors import UsageError, VerifyGateError
from pytest_verifygate.patterns import unmatched

ERROR = "error"
WARNING = "warning"
BOM = b"\xef\xbb\xbf"
# The most of a contract, hook or agent configuration file ``check`` reads.
MAX_FILE_BYTES = 4 << 20


class Finding(NamedTuple):
    level: str  # ERROR (the setup is unsound) or WARNING
    where: str  # the file (and gate)
    message: str  # what is wrong, and how to fix it


def contract_file_findings(directory: Path) -> Iterator[Finding]:
    """Problems of the contract files in ``directory`` that loading one would not show."""
    verify = directory / "verify.toml"
    pyproject = directory / "pyproject.toml"
    for path in (verify, pyproject):
        if (_read(path) or b"").startswith(BOM):
            yield Finding(ERROR, path.name, "starts with a UTF-8 byte-order mark: save it "
                          "as UTF-8 without one (TOML tools and taplo refuse or misread it)")
    tool = _pyproject_tool(pyproject)
    if verify.is_file() and "verifygate" in tool:
        yield Finding(ERROR, "pyproject.toml", "[tool.verifygate] is ignored: verify.toml in "
                      "the same directory wins; keep one of the two")
    for key in tool:
        normal = re.sub(r"[-_.]", "", key.lower())
        if key != "verifygate" and (normal == "verifygate" or re.fullmatch(
                r"verif\w*gates?", normal)):
            yield Finding(ERROR, "pyproject.toml", f"[tool.{key}] is not read: the table is "
                          "[tool.verifygate]")


def gate_findings(contract: Contract, tracked: Sequence[str],
                  environ: dict[str, str]) -> Iterator[Finding]:
    from pytest_verifygate.commands import UnsupportedCommand, parse_command

    shown = display_path(contract.path)
    for gate in contract.gates:
        where = f"{shown}: gate {gate.name!r}"
        cwd = contract.root / gate.cwd
        if not cwd.is_dir():
            yield Finding(ERROR, where, f"cwd {gate.cwd!r} does not exist: create it or fix "
                          "the key")
        if gate.kind == "command":
            try:
                parsed = parse_command(gate.command, shell=gate.shell)
            except UnsupportedCommand as exc:
                yield Finding(ERROR, where, f"{exc}")
            else:
                if not parsed.shell:
                    yield from _program(where, parsed.words[0], cwd,
                                        {**environ, **gate.env, **parsed.env})
        yield from _pattern_findings(where, gate, contract.root, tracked)


def _program(where: str, program: str, cwd: Path, environ: dict[str, str]) -> Iterator[Finding]:
    if "/" in program:
        path = cwd / program
        if not (path.is_file() and os.access(path, os.X_OK)):
            yield Finding(ERROR, where, f"program {program!r} is not an executable file "
                          f"(relative to {cwd.name or cwd})")
    elif shutil.which(program, path=environ.get("PATH", os.defpath)) is None:
        yield Finding(ERROR, where, f"program {program!r} is not on PATH: install it in "
                      "the environment the gates run in, or name it by its path")


def _pattern_findings(where: str, gate: Gate, root: Path,
                      tracked: Sequence[str]) -> Iterator[Finding]:
    from pytest_verifygate.filetypes import describe_filter, files_of_gate

    for key in ("when_changed", "when_changed_all", "inputs"):
        includes = [pattern for pattern in getattr(gate, key) or ()
                    if not pattern.startswith("!")]
        for pattern in unmatched(list(dict.fromkeys(includes)), tracked):
            yield Finding(WARNING, where, f"{key} pattern {pattern!r} matches no tracked "
                          "file: a typo, or a path that moved?")
    if gate.filters_files and not files_of_gate(gate, root, tracked):
        yield Finding(WARNING, where, f"{describe_filter(gate)}: no tracked file is of these "
                      "types and names")


def hook_findings(repo_root: Path, environ: dict[str, str]) -> Iterator[Finding]:
    """Installed hooks that run verifygate (or pre-commit) but would not start."""
    from pytest_verifygate.agents.detect import ADAPTERS
    from pytest_verifygate.githooks import HOOKS, hooks_dir

    try:
        hooks = [hooks_dir(repo_root) / name for name in HOOKS]
    except UsageError:  # git cannot say where its hooks are: none to check
        hooks = []
    for path in hooks:
        text = (_read(path) or b"").decode("utf-8", errors="replace")
        if "verifygate" not in text and "pre-commit" not in text:
            continue
        shown = os.path.relpath(path, repo_root)
        if not os.access(path, os.X_OK):
            yield Finding(ERROR, shown, "is not executable: git skips it (chmod +x)")
        for line in text.splitlines():
            yield from _hook_line(shown, line, environ)
    files = [name for adapter in ADAPTERS.values()
             for name in (adapter.config_file, adapter.shared_file) if name is not None]
    for name in files:
        raw = _read(repo_root / name)
        try:
            commands = list(_commands(json.loads(raw.decode("utf-8")))) if raw else []
        except (ValueError, RecursionError):  # not JSON, or nested too deeply to be one
            continue
        for command in commands:
            if "verifygate" in command or "pytest_verifygate" in command:
                yield from _command_start(name, command, environ)


def _hook_line(shown: str, line: str, environ: dict[str, str]) -> Iterator[Finding]:
    """A hook script's line that starts a program of ours: pre-commit's ``INSTALL_PYTHON=...``
    or a command naming verifygate."""
    stripped = line.strip()
    assignment = re.match(r"INSTALL_PYTHON=(.+)", stripped)
    if assignment:
        python = _words(assignment.group(1))
        if python and not Path(python[0]).exists():
            yield Finding(ERROR, shown, f"pre-commit's hook runs {python[0]}, which no longer "
                          "exists: run pre-commit install again")
        return
    if stripped.startswith("#") or ("verifygate" not in stripped
                                     and "pytest_verifygate" not in stripped):
        return
    yield from _command_start(shown, stripped, environ)


def _command_start(shown: str, command: str, environ: dict[str, str]) -> Iterator[Finding]:
    words = _words(command)
    while words and (("=" in words[0] and not words[0].startswith(("=", "/"))) or words[0] in (
            "exec", "if", "then", "!")):
        words = words[1:]
    if not words or words[0].startswith("$"):
        return
    program = words[0]
    found = Path(program).exists() if "/" in program else shutil.which(
        program, path=environ.get("PATH", os.defpath)) is not None
    if not found:
        yield Finding(ERROR, shown, f"runs {program!r}, which does not resolve here: "
                      "install it again (verifygate install, or the agent hook's installer)")


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return []


def _commands(data: Any) -> Iterable[str]:
    """Every string under a ``command`` key, anywhere in an agent's configuration."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "command" and isinstance(value, str):
                yield value
            else:
                yield from _commands(value)
    elif isinstance(data, list):
        for item in data:
            yield from _commands(item)


def _pyproject_tool(path: Path) -> dict[str, Any]:
    try:
        data = parse_toml((_read(path) or b"").decode("utf-8-sig"), path.name)
    except (UnicodeDecodeError, VerifyGateError):
        return {}
    tool = data.get("tool")
    return tool if isinstance(tool, dict) else {}


def _read(path: Path) -> bytes | None:
    from pytest_verifygate.state.storage import read_user_file

    return read_user_file(path, MAX_FILE_BYTES)
