"""The report's types (``report.model``) hold the same keys as its schema, required or not."""

from __future__ import annotations

from typing import Any, get_type_hints

import pytest

from pytest_verifygate.report import model
from pytest_verifygate.report.document import load_schema

SCHEMA = load_schema()


def keys(typed: Any) -> tuple[set[str], set[str]]:
    return set(typed.__required_keys__), set(typed.__optional_keys__)


def schema_keys(node: dict[str, Any]) -> tuple[set[str], set[str]]:
    required = set(node.get("required", ()))
    return required, set(node["properties"]) - required


@pytest.mark.parametrize(("typed", "node"), [
    (model.Report, SCHEMA),
    (model.GateEntry, SCHEMA["$defs"]["gate"]),
    (model.ChangesEntry, SCHEMA["properties"]["changes"]),
    (model.Summary, SCHEMA["properties"]["summary"]),
    (model.NotSelected, SCHEMA["properties"]["not_selected"]["items"]),
    (model.Shard, SCHEMA["properties"]["shard"]),
], ids=lambda value: getattr(value, "__name__", ""))
def test_each_typed_dict_has_the_schema_s_keys(typed: Any, node: dict[str, Any]) -> None:
    assert keys(typed) == schema_keys(node)


def test_every_object_of_the_schema_has_a_typed_dict() -> None:
    """An object added to the schema needs its type too (the list above would miss it)."""
    hints = get_type_hints(model.Report)
    nested = {name for name, node in SCHEMA["properties"].items() if node.get("type") == "object"}
    assert nested == {"changes", "summary", "shard"}
    assert {hints[name].__name__ for name in nested} == {"ChangesEntry", "Summary", "Shard"}


def test_a_key_missing_from_a_type_is_found() -> None:
    # The comparison can fail: a schema with one more property does not match.
    node = {**SCHEMA["properties"]["summary"]}
    node["properties"] = {**node["properties"], "unknown": {"type": "integer"}}
    assert keys(model.Summary) != schema_keys(node)
