"""The contract's records and vocabulary: ``Settings``, ``Gate``, ``Contract``, the keys each
table may hold and the values a key may take.

No loading and no validation here: the loaders (``native.py``, ``opentiger.py``) build these
records from checked values.

PYTEST_DONT_REWRITE
"""

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

CATEGORIES = ("unit", "integration")
KINDS = ("command", "manual")
ON_MISSING = ("fail", "skip")
MAX_RETRIES = 20

# An empty environment mapping, read-only because one instance is shared by every gate (and
# every record elsewhere) that sets no variables.
EMPTY_ENV: Mapping[str, str] = MappingProxyType({})

SETTINGS_KEYS = (
    "timeout_seconds",
    "jobs",
    "output_tail_bytes",
    "on_missing",
    "fail_when_unverified",
    "changed_from",
    "cache",
    "log_max_bytes",
    "plugins",
)
GATE_KEYS = (
    "name",
    "command",
    "roles",
    "when_changed",
    "when_changed_all",
    "cwd",
    "env",
    "timeout_seconds",
    "shell",
    "retries",
    "category",
    "phases",
    "kind",
    "on_missing",
    "secret_env",
    "cache",
    "inputs",
    "needs",
    "exclusive",
    "types",
    "types_or",
    "exclude_types",
    "files_regex",
    "exclude_regex",
)
OPENTIGER_KEYS = ("commands", "byRole", "rules", "settings")
OPENTIGER_RULE_KEYS = ("whenChangedAny", "whenChangedAll", "commands")


class Settings(NamedTuple):
    """Contract-wide defaults (``[settings]``).

    The defaults here are the native form's; the seed forms start from their home systems'
    (``SEED_SETTINGS``).
    """

    timeout_seconds: float = 300.0
    jobs: int = 0
    output_tail_bytes: int = 65536
    on_missing: str = "fail"
    fail_when_unverified: bool = False
    changed_from: str = ""
    cache: bool = False
    log_max_bytes: int = 16 * 1024 * 1024  # per gate attempt's log file (head and tail kept)
    plugins: tuple[str, ...] = ()  # modules whose hook implementations the run loads


# What a seed format's file means where its settings say nothing: middle and openTiger run
# their gates one at a time in declared order. A script that is not defined fails, as it does
# under openTiger when nothing else verified the change; openTiger's skipping it when other
# commands remain is not copied (a contract that names a missing script must not weaken itself).
SEED_SETTINGS: Mapping[str, Settings] = MappingProxyType({
    "middle": Settings(jobs=1),
    "opentiger": Settings(jobs=1),
})


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
    # Environment variables whose values are replaced by "***" in reports (see redact.py).
    secret_env: tuple[str, ...] = ()
    # The result cache (state/result_cache.py): whether a pass is reused, and which files it
    # depends on (None: the when_changed patterns, or every file when there are none).
    cache: bool = False
    inputs: tuple[str, ...] | None = None
    # Ordering (runner/scheduler.py): gates that must pass before this one starts, and whether
    # no other gate may run while this one does (a formatter rewriting files others read).
    needs: tuple[str, ...] = ()
    exclusive: bool = False
    # Which files the gate takes, with pre-commit's meaning (filetypes.py): identify's tags,
    # and Python regexes searched in the path (pre-commit's ``files`` / ``exclude``).
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
    # The file's text as loaded: a shard's report carries its hash (``verifygate merge``).
    text: str = ""

    def gate(self, name: str) -> Gate:
        for gate in self.gates:
            if gate.name == name:
                return gate
        raise KeyError(name)
