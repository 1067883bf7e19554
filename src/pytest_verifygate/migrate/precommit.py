"""A ``.pre-commit-config.yaml`` as gates that check what ``pre-commit run --all-files`` does:
the same programs, arguments, files and order, for local hooks and well-known repositories'.

PYTEST_DONT_REWRITE
"""

import re
import shlex
from collections.abc import Mapping
from typing import Any

from pytest_verifygate.contract.writer import Value
from pytest_verifygate.errors import UsageError
from pytest_verifygate.item_names import unique_name
from pytest_verifygate.migrate import Migration
from pytest_verifygate.migrate.known_hooks import KNOWN_REPOSITORIES

# pre-commit's own names for stages before 3.2 (``commit`` is ``pre-commit`` today).
_LEGACY_STAGES = {"commit": "pre-commit", "push": "pre-push", "merge-commit": "pre-merge-commit"}
# Stages whose hooks see files as a commit's do; others get a message file or nothing.
_FILE_STAGES = ("pre-commit", "pre-push", "manual")
# Languages whose entry is a program the project's environment can provide as pre-commit's
# would (the rest build an environment of their own: the program must be installed).
_PLAIN_LANGUAGES = ("system", "unsupported", "script", "unsupported_script", "python")
# ``language: fail``: fail, printing the entry and the files, as pre-commit does.
_FAIL_SCRIPT = "import sys; print(sys.argv[1]); print(*sys.argv[2:], sep='\\n'); sys.exit(1)"
# Programs without plugins or installed packages that change their verdict: their passes are
# cached (``cache = true``). mypy, pyright and flake8 read what is installed: not these.
_CACHEABLE_REPOSITORIES = frozenset({"ruff-pre-commit", "black", "isort", "codespell",
                                     "pyupgrade", "typos"})
_VERSION = re.compile(r"v?(\d+(?:\.\d+)*)")
_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")


# ``rev: <sha>  # frozen: v1.2.3``: what ``pre-commit autoupdate --freeze`` writes.
_FROZEN = re.compile(r"^\s*rev:\s*['\"]?([0-9a-f]{7,64})['\"]?\s*#\s*frozen:\s*(\S+)", re.M)


def frozen_revs(text: str) -> dict[str, str]:
    """The version each frozen (commit) ``rev`` of a config's text stands for."""
    return {match.group(1): match.group(2) for match in _FROZEN.finditer(text)}


def from_pre_commit(config: object, shown: str, frozen: dict[str, str]) -> Migration:
    """The gates of a pre-commit config; ``frozen``: the versions its frozen revs stand for."""
    if isinstance(config, list):  # the format before pre-commit 1.0: a list of repos
        config = {"repos": config}
    if not isinstance(config, dict) or not isinstance(config.get("repos"), list):
        raise UsageError(f"{shown}: not a pre-commit config (no 'repos' list)")
    notes: list[str] = []
    gates: list[dict[str, Value]] = []
    taken: set[str] = set()
    packages: dict[str, str | None] = {}
    for key in ("fail_fast", "default_install_hook_types"):
        if config.get(key):
            notes.append(f"{key}: not carried over (verifygate runs every selected gate; "
                         "see the documentation's Running gates)")
    for position, repo in enumerate(config["repos"], start=1):
        if not isinstance(repo, dict) or not isinstance(repo.get("hooks"), list):
            raise UsageError(f"{shown}: repos[{position}] is not a repository with 'hooks'")
        url = str(repo.get("repo", ""))
        for hook in repo["hooks"]:
            if not isinstance(hook, dict) or not isinstance(hook.get("id"), str):
                raise UsageError(f"{shown}: a hook of repo {url!r} has no 'id'")
            effective = _effective_hook(url, hook, repo, packages, notes, frozen)
            gate = _gate(effective, config, notes) if effective is not None else None
            if gate is not None:
                gates.append({"name": unique_name(hook["id"], taken, "{}-{}"), **gate})
    if packages:
        pins = " ".join(shlex.quote(f"{name}=={version}" if version else name)
                        for name, version in packages.items())
        notes.append("hooks of remote repositories ran in environments pre-commit built; "
                     f"the gates run the same programs from the project's environment: pip "
                     f"install {pins}")
    return Migration(gates, {"jobs": 1}, notes)


def _effective_hook(url: str, hook: dict[str, Any], repo: dict[str, Any],
                    packages: dict[str, str | None], notes: list[str],
                    frozen: dict[str, str]) -> dict[str, Any] | None:
    """The manifest's hook definition overridden by the config's; None, noted, for a hook
    that cannot be carried over."""
    hook_id = hook["id"]
    if url == "meta":
        notes.append(f"hook {hook_id!r} (repo: meta) checks pre-commit's own config: not "
                     "carried over (verifygate check does the same for the contract)")
        return None
    if url == "local":
        if "entry" not in hook:
            notes.append(f"hook {hook_id!r}: a local hook without an entry: not carried over")
            return None
        return {"language": "system", **hook}
    name = url.rstrip("/").removesuffix(".git").rsplit("/", 1)[-1].lower()
    known = KNOWN_REPOSITORIES.get(name)
    definition = known.hooks.get(hook_id) if known is not None else None
    if known is None or definition is None:
        notes.append(f"hook {hook_id!r} of {url}: not a hook verifygate knows: add a gate "
                     "that runs its program (see that repository's .pre-commit-hooks.yaml "
                     "for its entry, args and types)")
        return None
    rev = str(repo.get("rev", ""))
    version = _VERSION.fullmatch(frozen.get(rev, rev))
    packages.setdefault(known.package,
                        version.group(1) if version and known.rev_is_version else None)
    # A pass of these programs depends only on the files and the program (see the docs,
    # "Result cache"), unless the config changed what runs.
    pure = name in _CACHEABLE_REPOSITORIES and not {"entry", "language"} & set(hook)
    return {**definition._asdict(), **hook, "known_pure": pure}


def _gate(hook: Mapping[str, Any], config: Mapping[str, Any],
          notes: list[str]) -> dict[str, Value] | None:
    hook_id = hook["id"]
    language = hook.get("language", "system")
    stages = [_LEGACY_STAGES.get(stage, stage) for stage in
              hook.get("stages") or config.get("default_stages") or _FILE_STAGES]
    if not any(stage in _FILE_STAGES for stage in stages):
        notes.append(f"hook {hook_id!r} runs at stages [{', '.join(stages)}]: not carried "
                     "over (gates check files; use a git hook of your own for these)")
        return None
    if language in ("docker", "docker_image"):
        notes.append(f"hook {hook_id!r} runs in docker ({language}): not carried over: add a "
                     "gate that runs its container, e.g. command = \"docker run ...\"")
        return None
    entry = str(hook["entry"])
    args = [str(arg) for arg in hook.get("args") or ()]
    if language == "pygrep":
        argv = ["python", "-m", "pre_commit.languages.pygrep", *args, entry]
        note = ("pygrep hooks run pre-commit's own grep (python -m "
                "pre_commit.languages.pygrep): keep pre-commit installed in the project's "
                "environment")
        if note not in notes:
            notes.append(note)
    elif language == "fail":
        argv = ["python", "-c", _FAIL_SCRIPT, entry]
    else:
        try:
            argv = [*shlex.split(entry), *args]
        except ValueError:
            notes.append(f"hook {hook_id!r}: its entry {entry!r} has unbalanced quotes: not "
                         "carried over")
            return None
        if language not in _PLAIN_LANGUAGES:
            notes.append(f"hook {hook_id!r} (language: {language}) ran in an environment "
                         f"pre-commit built: install {argv[0]!r} where the gate can find it")
    dependencies = hook.get("additional_dependencies") or ()
    if dependencies:
        listed = " ".join(shlex.quote(str(dependency)) for dependency in dependencies)
        notes.append(f"hook {hook_id!r}: its additional_dependencies went into the hook's own "
                     f"environment: install them into the project's: pip install {listed}")
    pass_filenames = hook.get("pass_filenames", True)
    if pass_filenames:
        argv.append("{files}")
    gate: dict[str, Value] = {"command": argv}
    if pass_filenames and hook.get("require_serial"):
        gate["serial"] = True  # pre-commit's xargs runs its files in one process too
    if _fixer(hook):
        gate["fixer"] = True  # no background run rewrites a file an agent is editing
    roles = [stage for stage in dict.fromkeys(stages) if stage in _FILE_STAGES]
    if "pre-commit" not in roles:
        gate["roles"] = roles  # verifygate run --role manual, as pre-commit's --hook-stage
    if not (hook.get("always_run") and not pass_filenames):
        gate.update(_file_filter(hook, config))
        if hook.get("always_run"):
            notes.append(f"hook {hook_id!r} has always_run: the gate still runs only when "
                         "some file of its types changed (remove its file keys to run always)")
    if hook.get("known_pure") and not dependencies:
        gate["cache"] = True
    _pitfalls(hook_id, argv, gate, hook, notes)
    return gate


def _file_filter(hook: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Value]:
    """The gate's file keys: the config's and the hook's ``files`` (both must match) and
    ``exclude`` (either excludes), and its types (pre-commit's default: ``[file]``)."""
    keys: dict[str, Value] = {}
    files = [regex for regex in (config.get("files"), hook.get("files")) if regex]
    excludes = [regex for regex in (config.get("exclude"), hook.get("exclude"))
                if regex and regex != "^$"]
    if files:
        keys["files_regex"] = (files[0] if len(files) == 1 else
                               "^" + "".join(f"(?=[\\s\\S]*?{_group(regex)})" for regex in files))
    if excludes:
        keys["exclude_regex"] = (excludes[0] if len(excludes) == 1 else
                                 "|".join(_group(regex) for regex in excludes))
    if not hook.get("types") and not hook.get("types_or"):
        keys["types"] = ["file"]
    for key in ("types", "types_or", "exclude_types"):
        if hook.get(key):
            keys[key] = [str(tag) for tag in hook[key]]
    return keys


def _group(regex: str) -> str:
    """``regex`` as a group that can stand beside others: a leading global flag (``(?x)``)
    becomes the group's own, as Python refuses one in the middle of a pattern."""
    match = _GLOBAL_FLAGS.match(regex)
    if match is None:
        return f"(?:{regex})"
    flags, rest = match.group(1), regex[match.end():]
    return f"(?{flags}:{rest}\n)" if "x" in flags else f"(?{flags}:{rest})"


def _fixer(hook: Mapping[str, Any]) -> bool:
    """A hook that rewrites the files it is given: a known fixer, or one whose id, entry or
    args say so (a check taken for a fixer only ever loses the background run)."""
    words = [hook["id"], hook.get("entry", ""), *(hook.get("args") or ())]
    said = " ".join(map(str, words))
    return bool(hook.get("known_fixer")) or any(word in said
                                                for word in ("fix", "format", "whitespace"))


def _pitfalls(hook_id: str, argv: list[str], gate: dict[str, Value], hook: Mapping[str, Any],
              notes: list[str]) -> None:
    """What users migrating by hand got wrong: ruff without ``--force-exclude``, fixers
    without a file type that keeps binaries out."""
    program = argv[0].rsplit("/", 1)[-1]
    if program == "ruff" and "{files}" in argv and "--force-exclude" not in argv:
        notes.append(f"hook {hook_id!r}: ruff given file names checks them even when its "
                     "config excludes them (extend-exclude); add --force-exclude to its args")
    if _fixer(hook) and "{files}" in argv and gate.get("types") == ["file"] and not hook.get(
            "types_or") and not hook.get("files"):
        notes.append(f"hook {hook_id!r} looks like a fixer and takes files of every type: "
                     "add types = [\"text\"] so that it never rewrites a binary file")
