"""``verifygate install-agent-hook --agent NAME`` (deprecated: ``install-hook``): merge
``verifygate agent-hook`` into a coding agent's project configuration, keeping every entry, and
say what that agent needs before the hook runs.

PYTEST_DONT_REWRITE
"""

import argparse
import json
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_verifygate.cli.exits import EXIT_OK
from pytest_verifygate.errors import UsageError, VerifyGateError

if TYPE_CHECKING:
    from pytest_verifygate.agents.protocol import Adapter

MAX_CONFIG_BYTES = 4 << 20
NEW_FILE_MODE = 0o644
NAME = "install-agent-hook"


def main(args: argparse.Namespace) -> int:
    from pytest_verifygate.agents.config import ConfigShapeError, hook_command, merge_hooks
    from pytest_verifygate.agents.detect import ADAPTERS
    from pytest_verifygate.contract import find_repo_root

    if args.command != NAME:
        print(f"verifygate: warning: `verifygate {args.command}` is deprecated: use "
              f"`verifygate {NAME}`", file=sys.stderr)
    adapter = ADAPTERS[args.agent]
    root = find_repo_root(Path.cwd())
    if root is None:
        raise UsageError(f"{NAME}: not in a git repository: run it in the repository the "
                         "agent works in")
    path = root / adapter.config_file
    shown = adapter.config_file
    config, mode = _read(path, shown)
    max_rounds = args.max_rounds if args.max_rounds is not None else 3
    after_edit = (hook_command(adapter.name, args.max_rounds, background=True)
                  if args.background or _verifies_while_editing() else None)
    try:
        merged = merge_hooks(config, adapter, hook_command(adapter.name, args.max_rounds),
                             max_rounds, replace=args.max_rounds is not None,
                             after_edit=after_edit)
    except ConfigShapeError as exc:
        raise UsageError(f"{NAME}: {shown}: {exc}: not {adapter.title}'s configuration "
                         f"as documented; fix it by hand, then run {NAME} again (the "
                         "file was left unchanged)") from None
    prefix = f"verifygate {NAME}:"
    if not merged.added:
        print(f"{prefix} {shown} ({adapter.title}): nothing changed, every hook is there")
    else:
        _write(path, shown, json.dumps(config, indent=2, ensure_ascii=False) + "\n", mode)
        print(f"{prefix} {'updated' if mode is not None else 'created'} {shown} "
              f"({adapter.title})")
    for line in merged.added:
        print(f"  added  {line}")
    for line in merged.kept:
        print(f"  kept   {line}")
    print(f"  note   {_where(root, adapter)}")
    # Every time, changed or not: a hook the agent skips is worse than none.
    for line in adapter.setup:
        print(f"  needs  {line.replace('<root>', str(root))}")
    return EXIT_OK


def _verifies_while_editing() -> bool:
    """Whether the contract found from here sets ``verify_while_editing``."""
    from pytest_verifygate.engine import RunRequest, prepare
    from pytest_verifygate.git.changes import ChangeSet

    try:  # no change set is computed: the contract is all it reads
        return prepare(RunRequest(changes=ChangeSet("all"))).contract.settings.verify_while_editing
    except VerifyGateError:  # no contract, or a broken one: the stop hook says so
        return False


def _where(root: Path, adapter: "Adapter") -> str:
    """What the file written holds that is this machine's, and what that means for a team."""
    from pytest_verifygate.agents.config import is_agent_hook

    if adapter.shared_file is None:
        return (f"{adapter.config_file} holds this machine's interpreter path: keep it out of "
                f"git, or have each developer run {NAME} (where the path is missing, the hook "
                "blocks every stop and says how to repair it)")
    text = f"{adapter.config_file} is this machine's own ({adapter.title} does not share it)"
    try:
        shared = json.loads((root / adapter.shared_file).read_text(encoding="utf-8"))
        groups = [group for entries in shared.get("hooks", {}).values() for group in entries]
        hooks = [hook for group in groups for hook in group.get("hooks", [])]
    except (OSError, ValueError, AttributeError, TypeError):
        return text
    if any(isinstance(hook, dict) and is_agent_hook(hook.get("command"), adapter.name)
           for hook in hooks):
        text += (f"; {adapter.shared_file}, a file teams commit, runs the hook too: remove it "
                 "there")
    return text


def _read(path: Path, shown: str) -> tuple[Any, int | None]:
    """The parsed configuration ({} when there is none) and the file's permissions (None: no
    file yet); anything that is not JSON is refused, never overwritten."""
    def refuse(problem: str) -> UsageError:
        return UsageError(f"{NAME}: {shown}: {problem}; fix or move it, then run "
                          f"{NAME} again (the file was left unchanged)")

    try:
        info = path.stat()
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        raise refuse(f"cannot read it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise refuse("not a regular file")
    if info.st_size > MAX_CONFIG_BYTES:
        raise refuse(f"larger than {MAX_CONFIG_BYTES} bytes: not a configuration file")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise refuse(f"cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise refuse("not UTF-8 text") from None
    if not text.strip():
        return {}, stat.S_IMODE(info.st_mode)
    try:
        return json.loads(text), stat.S_IMODE(info.st_mode)
    except json.JSONDecodeError as exc:
        raise refuse(f"cannot parse it as JSON ({exc.msg} at line {exc.lineno} column "
                     f"{exc.colno})") from None
    except RecursionError:
        raise refuse("JSON nested too deeply") from None


def _write(path: Path, shown: str, text: str, mode: int | None) -> None:
    from pytest_verifygate.state.storage import write_output

    try:
        write_output(path, text)  # atomically; a link stays a link, its target replaced
        os.chmod(path, mode if mode is not None else NEW_FILE_MODE & ~_umask())
    except OSError as exc:
        raise UsageError(f"{NAME}: cannot write {shown}: {exc.strerror or exc}") from None


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
