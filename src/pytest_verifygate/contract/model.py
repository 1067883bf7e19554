"""The contract's records (``Settings``, ``Gate``, ``Contract``), the keys each table may hold
and the values a key may take; the loaders build these from checked values.

PYTEST_DONT_REWRITE
"""

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

# Read-only: one instance is shared by every record that sets no variables.
EMPTY_ENV: Mapping[str, str] = MappingProxyType({})

# How a key of a pyproject.toml contract is named in messages: the table it lives under.
PYPROJECT_KEY_PREFIX = "tool.verifygate."

OPENTIGER_KEYS = ("commands", "byRole", "rules", "settings")
OPENTIGER_RULE_KEYS = ("whenChangedAny", "whenChangedAll", "commands")


class Settings(NamedTuple):
    """Contract-wide defaults (``[settings]``): the native form's; see ``SEED_SETTINGS``."""

    timeout_seconds: float = 300.0
    jobs: int = 0
    output_tail_bytes: int = 65536
    on_missing: str = "fail"
    fail_when_unverified: bool = False
    changed_from: str = ""
    cache: bool = False
    log_max_bytes: int = 16 * 1024 * 1024  # per gate attempt's log file (head and tail kept)
    plugins: tuple[str, ...] = ()  # modules whose hook implementations the run loads
    verify_while_editing: bool = False  # install-agent-hook adds the after-edit hooks


# Middle and openTiger run one gate at a time in declared order. A missing script fails (not
# skipped as openTiger may: a contract that names a missing script must not weaken itself).
SEED_SETTINGS: Mapping[str, Settings] = MappingProxyType(
    {"middle": Settings(jobs=1), "opentiger": Settings(jobs=1)}
)


class Gate(NamedTuple):
    """One gate, with the contract's defaults already applied."""

    name: str
    command: str | tuple[str, ...]
    roles: tuple[str, ...] | None = None
    when_changed: tuple[str, ...] | None = None
    when_changed_all: tuple[str, ...] = ()
    cwd: str = "."
    env: Mapping[str, str] = EMPTY_ENV
    timeout_seconds: float = 300.0
    shell: bool = False
    retries: int = 0
    category: str | None = None
    phases: tuple[int, ...] | None = None
    kind: str = "command"
    on_missing: str = "fail"
    secret_env: tuple[str, ...] = ()
    cache: bool = False
    inputs: tuple[str, ...] | None = None  # None: when_changed's patterns, or every file
    needs: tuple[str, ...] = ()
    exclusive: bool = False
    serial: bool = False  # its {files} never split into chunks run at once
    fixer: bool = False  # it may rewrite files: never run while an agent edits them
    # pre-commit's types, types_or, exclude_types, files and exclude (``filetypes.py``).
    types: tuple[str, ...] = ()
    types_or: tuple[str, ...] = ()
    exclude_types: tuple[str, ...] = ()
    files_regex: str | None = None
    exclude_regex: str | None = None

    @property
    def filters_files(self) -> bool:
        """Whether the gate takes only some files by kind or name (``filetypes.py``)."""
        return bool(self.types or self.types_or or self.exclude_types or self.files_regex
                    or self.exclude_regex)

    @property
    def command_text(self) -> str:
        """The command as a user would type it (for messages and reports)."""
        if isinstance(self.command, str):
            return self.command
        import shlex  # only for a list command's text: keeps start-up cheap

        return shlex.join(self.command)


class Contract(NamedTuple):
    """A loaded contract: where it lives, its settings and its gates in file order."""

    path: Path
    root: Path
    repo_root: Path
    format: str
    settings: Settings
    gates: tuple[Gate, ...]
    warnings: tuple[str, ...] = ()
    text: str = ""  # as loaded: a shard's report carries its hash (``verifygate merge``)

    def gate(self, name: str) -> Gate:
        for gate in self.gates:
            if gate.name == name:
                return gate
        raise KeyError(name)
