"""Gate names made safe where names have rules of their own: pytest items, markers and JUnit.

A gate's name is any non-empty text; reports and the console show it as it is. A pytest item
name (also JUnit's ``name=``) must not hold ``::`` (pytest splits node ids there), ``[...]``
(read as a parametrization) or control characters; a marker name only letters, digits, ``_``
and ``-`` (``--strict-markers`` and ``-m`` read words). Ordinary names are left as they are.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_CONTROL = "[\x00-\x1f\x7f-\x9f\u2028\u2029]+"  # control characters, line separators
_COLONS = ":{2,}"
_NOT_MARKER = r"[^\w-]+"
_BRACKETS = str.maketrans("[]", "()")


def item_name(name: str) -> str:
    """``name`` as one part of a pytest node id: no ``::``, no ``[``/``]``, no control
    characters (``a::b[1]`` becomes ``a:b(1)``); an ordinary name is left as it is."""
    text = re.sub(_COLONS, ":", re.sub(_CONTROL, " ", name)).translate(_BRACKETS).strip()
    return text or "_"


def item_names(names: Iterable[str]) -> dict[str, str]:
    """Each gate name's item name, unique among ``names`` (in contract order): a changed name
    that meets another's gets `` (2)``, `` (3)``, ..., so a contract always gives the same ids."""
    names = list(names)
    taken = {name for name in names if item_name(name) == name}
    result: dict[str, str] = {}
    for name in names:
        safe = item_name(name)
        result[name] = safe if safe == name else unique_name(safe, taken)
    return result


def unique_name(name: str, taken: set[str], form: str = "{} ({})") -> str:
    """``name``, or ``form`` of it and 2, 3, ... (``name (2)``): the first not ``taken``, which
    it joins."""
    candidate, number = name, 2
    while candidate in taken:
        candidate, number = form.format(name, number), number + 1
    taken.add(candidate)
    return candidate


def role_marker(role: str) -> str:
    """The pytest marker of a role: ``verify_role_<role>``, every run of characters other than
    letters, digits, ``_`` and ``-`` made one ``_`` (``code:review``: ``verify_role_code_review``).
    """
    return "verify_role_" + re.sub(_NOT_MARKER, "_", role)
