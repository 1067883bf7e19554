"""``verifygate migrate``'s conversions of a ``.pre-commit-config.yaml`` (``precommit``) or a
``lefthook.yml`` (``lefthook``) into gates, with a note for what does not carry over.

PYTEST_DONT_REWRITE
"""

from typing import Any, NamedTuple

from pytest_verifygate.contract.writer import Value
from pytest_verifygate.errors import UsageError


class Migration(NamedTuple):
    """What a conversion made: gates (keys in writing order), settings, and a line for each
    thing that did not carry over or needs the user."""

    gates: list[dict[str, Value]]
    settings: dict[str, Value]
    notes: list[str]


def load_yaml(text: str, shown: str) -> Any:
    """The YAML document in ``text``. PyYAML is needed only here (the ``migrate`` extra)."""
    try:
        import yaml
    except ImportError:
        raise UsageError(f"reading {shown} needs PyYAML: pip install "
                         "'pytest-verifygate[migrate]' (or pip install pyyaml)") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{shown}: not valid YAML{line}: {problem}") from None
    except RecursionError:
        raise UsageError(f"{shown}: nested too deeply to be a hook configuration") from None
    if not _at_most(data, MAX_VALUES):
        raise UsageError(f"{shown}: its aliases expand to more than {MAX_VALUES} values, "
                         "more than any hook configuration holds: write them out")
    return data


# The most values (mappings, lists and scalars, an alias counted each time it is used) a
# configuration may expand to: YAML aliases of aliases ("billion laughs") make a few lines
# mean billions of values, which reading the hooks would walk one by one.
MAX_VALUES = 100_000


def _at_most(data: object, limit: int) -> bool:
    """Whether ``data`` holds at most ``limit`` values, counted as a walk would meet them."""
    pending = [data]
    count = 0
    while pending:
        count += 1
        if count > limit:
            return False
        item = pending.pop()
        if isinstance(item, dict):
            pending += item.keys()
            pending += item.values()
        elif isinstance(item, list):
            pending += item
    return True
