"""The plain git hooks (``pre-commit``, ``pre-push``) that ``verifygate install`` writes where git
looks, chaining to a hook already there, and ``verifygate uninstall`` removes. They run this
interpreter by its path: without it the hook, and the commit, fails.

PYTEST_DONT_REWRITE
"""

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from pytest_verifygate.errors import ChangeSetError, UsageError
from pytest_verifygate.state.files import DIRECTORY, replace_in
from pytest_verifygate.state.storage import read_user_file

HOOKS = ("pre-commit", "pre-push")
MARKER = "# verifygate: written by verifygate install"
CHAINED = ".verifygate-chained"

# The gates find this environment's tools first, as in the shell that installed the hooks: a
# GUI client or a shell without the virtualenv on PATH runs the same gates.
_PRE_COMMIT = """\
#!/bin/sh
{marker}; verifygate uninstall removes it.
chained="$(dirname "$0")/pre-commit{chained}"
if [ -x "$chained" ]; then
    "$chained" "$@" || exit $?
fi
PATH={bin}:$PATH exec {python} -m pytest_verifygate run --staged
"""

# Each pushed ref (on stdin) is checked as pre-commit's pre-push stage checks it, with its
# variables: the pushed range, from the first commit the remote lacks for a new ref (none:
# nothing to check), or every gate for a history the remote shares nothing of.
_PRE_PUSH = """\
#!/bin/sh
{marker}; verifygate uninstall removes it.
input=$(cat)
chained="$(dirname "$0")/pre-push{chained}"
if [ -x "$chained" ]; then
    printf '%s\\n' "$input" | "$chained" "$@" || exit $?
fi
PATH={bin}:$PATH
export PATH
printf '%s\\n' "$input" | {{
    while read -r local_ref local_sha remote_ref remote_sha; do
        case "$local_sha" in *[!0]*) ;; *) continue ;; esac  # a deletion: nothing to check
        base=
        case "$remote_sha" in
            *[!0]*) base=$(git rev-parse --quiet --verify "$remote_sha^{{commit}}") ;;
        esac
        if [ -z "$base" ]; then
            first=$(git rev-list --topo-order --reverse "$local_sha" --not --remotes="$1" |
                    head -n 1)
            [ -n "$first" ] || continue  # the remote has every commit already
            base=$(git rev-parse --quiet --verify "$first^")
        fi
        if [ -n "$base" ]; then
            PRE_COMMIT_FROM_REF="$base" PRE_COMMIT_TO_REF="$local_sha" \\
                {python} -m pytest_verifygate run </dev/null || exit $?
        else
            PRE_COMMIT=1 PRE_COMMIT_REMOTE_BRANCH="$remote_ref" \\
                PRE_COMMIT_LOCAL_BRANCH="$local_sha" \\
                {python} -m pytest_verifygate run </dev/null || exit $?
        fi
    done
}}
"""


def hooks_dir(start: Path) -> Path:
    """Where git runs hooks from for the repository at ``start`` (``core.hooksPath``)."""
    from pytest_verifygate.gitcmd import git_output

    try:
        out = git_output(start, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
    except ChangeSetError:
        raise UsageError("not in a git repository: run it in the repository to hook") from None
    return Path(os.fsdecode(out).strip())


def hook_text(name: str, python: str) -> str:
    """The hook's script. git runs hooks at the work tree's top, which ``python -m`` would
    search first: ``-P`` keeps a ``pytest_verifygate`` written there from running instead."""
    from pytest_verifygate.agents.config import SAFE_PATH

    template = _PRE_COMMIT if name == "pre-commit" else _PRE_PUSH
    return template.format(marker=MARKER, chained=CHAINED, bin=shlex.quote(os.path.dirname(python)),
                           python=shlex.join([python, *SAFE_PATH]))


# A hook larger than this is not ours (ours is a few hundred bytes).
MAX_HOOK_BYTES = 1 << 20


def is_ours(path: Path) -> bool:
    """Whether the hook at ``path`` is a regular file carrying the marker (read bounded and
    non-blocking: a FIFO planted there never hangs install)."""
    text = read_user_file(path, MAX_HOOK_BYTES)
    return text is not None and MARKER.encode() in text[:4096]


def install(directory: Path, names: Sequence[str], python: str) -> list[str]:
    """Write the hooks; what was done, one line per hook."""
    directory.mkdir(parents=True, exist_ok=True)
    done = []
    for name in names:
        path = directory / name
        chained = directory / f"{name}{CHAINED}"
        text = hook_text(name, python)
        if not os.path.lexists(path):
            done.append(f"{name}: installed")
        elif not is_ours(path):
            if os.path.lexists(chained):
                raise UsageError(f"{path} is not ours and {chained.name} exists already: "
                                 "merge them by hand, then run verifygate install again")
            os.rename(path, chained)  # a link is moved as a link, never followed
            done.append(f"{name}: installed; the hook that was there runs first "
                        f"({chained.name})")
        elif read_user_file(path, MAX_HOOK_BYTES) == text.encode():
            done.append(f"{name}: already installed")
            continue
        else:
            done.append(f"{name}: updated")
        _write(path, text)
    return done


def uninstall(directory: Path, names: Sequence[str]) -> list[str]:
    """Remove our hooks (only ours) and put back what they chained to."""
    done = []
    for name in names:
        path = directory / name
        chained = directory / f"{name}{CHAINED}"
        if not os.path.lexists(path):
            done.append(f"{name}: not installed")
            continue
        if not is_ours(path) or path.is_symlink():
            done.append(f"{name}: not written by verifygate install: left as it is")
            continue
        path.unlink()
        if os.path.lexists(chained):
            os.rename(chained, path)
            done.append(f"{name}: removed; the earlier hook is back")
        else:
            done.append(f"{name}: removed")
    return done


def _write(path: Path, text: str) -> None:
    """Replace ``path`` atomically with an executable script, following no link: a name
    planted in the hooks directory never leads the write, or the chmod, to a user's file."""
    dir_fd = os.open(path.parent, DIRECTORY)
    try:
        replace_in(dir_fd, path.name, text, mode=0o755)
    finally:
        os.close(dir_fd)
