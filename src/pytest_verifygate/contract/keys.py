"""Every key a contract's tables may hold, declared once: the kind of value, its bounds and what
it means. The readers check values by it (``fields.FieldReader.read``) and the JSON Schema's
properties are made from it (``schema``; a test holds ``contract.schema.json`` to them), as
pre-commit declares its configuration once with cfgv.

PYTEST_DONT_REWRITE
"""

from typing import Any, NamedTuple

from pytest_verifygate.patterns import MAX_PATTERN_LENGTH

CATEGORIES = ("unit", "integration")
KINDS = ("command", "manual")
ON_MISSING = ("fail", "skip")
MAX_RETRIES = 20
MAX_JOBS = 1024  # more gates at once help nobody
MAX_SECONDS = 365 * 24 * 3600  # a timeout past a year is a typo, not a plan
ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
MODULE_NAME = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
# C0 controls but tab, DEL and C1: a name is shown on one line everywhere.
CONTROL = r"[\u0000-\u0008\u000a-\u001f\u007f-\u009f]"
NUL = r"\u0000"
_NO_DEFAULT = object()


class Key(NamedTuple):
    """One key: ``kind`` says how its value is read (``FieldReader.read``); ``empty`` is the
    hint given when an empty list is refused (None: an empty list is fine)."""

    name: str
    kind: str
    about: str
    choices: tuple[str, ...] = ()
    bounds: tuple[int, int] = (0, 0)
    empty: str | None = None
    default: Any = _NO_DEFAULT

    @property
    def schema(self) -> dict[str, Any]:
        """The key's JSON Schema (draft-07)."""
        # As FieldReader.string takes them: not blank, no NUL.
        line = {"type": "string", "pattern": r"\S", "not": {"pattern": NUL}}
        lists = {"type": "array", **({"minItems": 1} if self.empty else {})}
        fragments: dict[str, dict[str, Any]] = {
            "text": {"type": "string", "pattern": r"\S", "not": {"pattern": CONTROL}},
            "command": {"anyOf": [line, {"type": "array", "minItems": 1, "items": line}]},
            "strings": {**lists, "items": line},
            "patterns": {**lists, "items": {
                **line, "maxLength": MAX_PATTERN_LENGTH,
                "not": {"pattern": NUL + "|" + _NEVER_MATCHES}}},
            "names": {**lists, "items": line},
            "env": {"type": "object", "propertyNames": {"pattern": f"^{ENV_NAME}$"},
                    "additionalProperties": {"type": "string", "not": {"pattern": NUL}}},
            "env_names": {"type": "array", "items": {"type": "string",
                                                     "pattern": f"^{ENV_NAME}$"}},
            "modules": {"type": "array", "items": {"type": "string",
                                                   "pattern": f"^{MODULE_NAME}$"}},
            "phases": {"type": "array", "minItems": 1,
                       "items": {"type": "integer", "minimum": 1}},
            "seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_SECONDS,
                        "not": _NAN},
            "integer": {"type": "integer", "minimum": self.bounds[0],
                        "maximum": self.bounds[1]},
            "boolean": {"type": "boolean"},
            "choice": {"enum": list(self.choices)},
            "file_types": {"type": "array", "minItems": 1,
                           "items": {"$ref": "#/definitions/file_type"}},
            "regex": line,
            "cwd": line,
            "ref": {"type": "string", "not": {"pattern": NUL}},
        }
        fragment = fragments[self.kind]
        if self.default is not _NO_DEFAULT:
            fragment["default"] = self.default
        return {"description": self.about, **fragment}


# NaN (TOML's nan): no number is at once at least the largest float and at most the smallest,
# and NaN, which every comparison passes, is; no other keyword refuses it.
_NAN = {"minimum": 1.7976931348623157e308, "maximum": -1.7976931348623157e308}
# A pattern whose path starts with "./" or holds a "." or ".." name never matches a change.
_NEVER_MATCHES = r"^!?/*(\./|(.*/)?\.\.?(/|$))"

SETTINGS = (
    Key("timeout_seconds", "seconds", "each gate's default timeout", default=300),
    Key("jobs", "integer", "gates at once; 0: one per CPU; 1: one by one in declared order",
        bounds=(0, MAX_JOBS), default=0),
    Key("output_tail_bytes", "integer", "how much of the end of each gate's output reports keep",
        bounds=(256, 64 * 1024 * 1024), default=65536),
    Key("log_max_bytes", "integer", "the most each gate attempt's log file holds: its head and "
        "tail, with a line saying what was cut", bounds=(4096, 1 << 40), default=16 << 20),
    Key("on_missing", "choice", "every gate's default on_missing", ON_MISSING, default="fail"),
    Key("fail_when_unverified", "boolean", "changes present but no gate ran: verdict failed",
        default=False),
    Key("changed_from", "ref", "default git ref for the change set, e.g. origin/main",
        default=""),
    Key("cache", "boolean", "every gate's default cache", default=False),
    Key("plugins", "modules", "modules whose verifygate hooks every run loads", default=[]),
    Key("verify_while_editing", "boolean", "install-agent-hook also runs the gates in the "
        "background after each edit", default=False),
)

# In the order they are read: a gate with several mistakes always reports the same one first.
GATE = (
    Key("name", "text", "unique; any non-empty text on one line"),
    Key("kind", "choice", "manual: a human sign-off, never run", KINDS, default="command"),
    Key("command", "command", "a string split like sh and spawned without a shell, or the argv"),
    Key("env", "env", "environment variables added for the gate", default={}),
    Key("roles", "strings", "the gate runs only when one of these roles is asked for (--role)",
        empty="remove the key to mean every role"),
    Key("when_changed", "patterns", "gitignore-style patterns: the gate runs when a changed "
        "file matches", empty="remove the key to run the gate always"),
    Key("when_changed_all", "patterns", "every pattern must match some changed file"),
    Key("inputs", "patterns", "the files a cached pass depends on (gitignore-style) (default: "
        "when_changed, else every file)",
        empty="remove the key to use when_changed (or every file)"),
    Key("secret_env", "env_names", "variables whose values are masked in reports"),
    Key("phases", "phases", "with --phase N, the gate runs only if N is listed"),
    Key("types", "file_types", "only files with every one of these identify tags (pre-commit's "
        "types)"),
    Key("types_or", "file_types", "only files with at least one of these identify tags"),
    Key("exclude_types", "file_types", "never files with any of these identify tags"),
    Key("files_regex", "regex", "only paths this Python regex finds a match in (pre-commit's "
        "files)"),
    Key("exclude_regex", "regex", "never paths this Python regex finds a match in (pre-commit's "
        "exclude)"),
    Key("cwd", "cwd", "directory to run in, relative to the project root, inside the "
        "repository", default="."),
    Key("timeout_seconds", "seconds", "the whole process tree is killed after this (default: "
        "settings.timeout_seconds)"),
    Key("shell", "boolean", "run through /bin/sh -c", default=False),
    Key("retries", "integer", "re-run a failed gate, with backoff", bounds=(0, MAX_RETRIES),
        default=0),
    Key("category", "choice", "becomes a pytest marker", CATEGORIES),
    Key("on_missing", "choice", "what missing_script, missing_make_target, no_test_files "
        "become (default: settings.on_missing)", ON_MISSING),
    Key("cache", "boolean", "reuse a pass while its inputs are unchanged (default: "
        "settings.cache)"),
    Key("needs", "names", "start only after these gates passed",
        empty="remove the key: the gate needs no other"),
    Key("exclusive", "boolean", "no other gate runs while this one does", default=False),
    Key("serial", "boolean", "{files} in one process at a time, never split over the free "
        "cores", default=False),
    Key("fixer", "boolean", "it may rewrite the files it checks (a formatter): never run in the "
        "background while an agent edits", default=False),
)

SETTINGS_KEYS = tuple(key.name for key in SETTINGS)
GATE_KEYS = tuple(key.name for key in GATE)
