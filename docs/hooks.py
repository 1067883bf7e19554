"""Build-time pages of the documentation site: the reference, rendered from the code.

An MkDocs hook (``hooks:`` in ``mkdocs.yml``). A page line ``<!-- reference: NAME -->`` is
replaced by what ``RENDERERS[NAME]`` makes from the installed package: the command line from its
argparse parser, the pytest options from the plugin's ``pytest_addoption``, the failure codes,
the JSON report's and the contract's keys from their JSON Schemas (openTiger's from the model),
the GitHub Action's inputs and outputs from ``action.yml``, the pluggy hookspecs and the Python
API from their docstrings. So the reference cannot drift from the code: a renamed option
changes the page, and an unknown NAME fails the build. ``CONTRIBUTING.md`` and
``CHANGELOG.md`` live at the repository's root, where people look for them, and are added to
the site as pages of their own.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import inspect
import io
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- reference: ([a-z-]+) -->$", re.MULTILINE)
# Root files shown as pages: (file, page). Their links into docs/ are made site-relative.
ROOT_PAGES = (("CONTRIBUTING.md", "contributing.md"), ("CHANGELOG.md", "changelog.md"))
MAX_CHOICES_SHOWN = 12  # a longer enum (identify's file types) is counted, not listed
HELP_COLUMNS = "90"  # the width argparse wraps --help to: the same on every machine, and no wider
# than the page's code blocks


def on_files(files: Files, config: Any) -> Files:
    for source, page in ROOT_PAGES:
        text = (ROOT / source).read_text(encoding="utf-8").replace("](docs/", "](")
        files.append(File.generated(config, page, content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    return MARKER.sub(lambda match: RENDERERS[match.group(1)]().strip() + "\n", markdown)


# -- small Markdown helpers ---------------------------------------------------------------------

def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def code(text: object) -> str:
    return f"`{text}`"


class _Annotation(str):
    """A postponed annotation's text, shown as written rather than as a quoted string."""

    def __repr__(self) -> str:
        return str(self)


def signature(obj: Any) -> str:
    """``inspect.signature`` with the package's postponed (string) annotations unquoted."""
    found = inspect.signature(obj)

    def plain(annotation: Any) -> Any:
        return _Annotation(annotation) if isinstance(annotation, str) else annotation

    parameters = [parameter.replace(annotation=plain(parameter.annotation))
                  for parameter in found.parameters.values()]
    text = str(found.replace(parameters=parameters,
                             return_annotation=plain(found.return_annotation)))
    return re.sub(r"\b(?:[a-z_]+\.)+([A-Z]\w*)", r"\1", text)  # pathlib.Path: Path


def docstring(obj: object) -> str:
    """A docstring as Markdown: reST's ``literal`` is Markdown's `literal`."""
    return re.sub(r"``(.+?)``", r"`\1`", inspect.getdoc(obj) or "")


# -- the command line -----------------------------------------------------------------------------

def cli() -> str:
    from pytest_verifygate.cli.parser import COMMANDS, build_parser

    def help_text(command: str | None) -> str:
        out = io.StringIO()
        previous = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = HELP_COLUMNS
        try:
            with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
                parser = build_parser(command)
                parser.parse_args([command, "--help"] if command else ["--help"])
        finally:
            if previous is None:
                del os.environ["COLUMNS"]
            else:
                os.environ["COLUMNS"] = previous
        return out.getvalue().rstrip()

    parts = ["## verifygate\n", f"```text\n{help_text(None)}\n```\n"]
    for command in COMMANDS:
        parts += [f"## verifygate {command}\n", f"```text\n{help_text(command)}\n```\n"]
    return "\n".join(parts)


# -- pytest options -----------------------------------------------------------------------------

class _OptionRecorder:
    """Stands in for pytest's parser: records what the plugin's ``pytest_addoption`` adds."""

    def __init__(self) -> None:
        self.options: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self.ini: list[tuple[str, str, dict[str, Any]]] = []

    def getgroup(self, *args: Any, **kwargs: Any) -> _OptionRecorder:
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.options.append((names, kwargs))

    def addini(self, name: str, help: str, **kwargs: Any) -> None:
        self.ini.append((name, help, kwargs))


def pytest_options() -> str:
    from pytest_verifygate import pytest_plugin

    recorder = _OptionRecorder()
    pytest_plugin.pytest_addoption(recorder)  # type: ignore[arg-type]

    def usage(names: tuple[str, ...], spec: dict[str, Any]) -> str:
        metavar = spec.get("metavar")
        if spec.get("choices"):
            metavar = "{" + ",".join(spec["choices"]) + "}"
        if spec.get("action") in ("store_true", "store_false") or metavar is None:
            return ", ".join(names)
        if spec.get("nargs") == "?":
            return ", ".join(f"{name}[={metavar}]" for name in names)
        suffix = " ..." if spec.get("nargs") == "+" else ""
        return ", ".join(f"{name} {metavar}{suffix}" for name in names)

    options = [(code(usage(names, spec)), spec.get("help", ""))
               for names, spec in recorder.options]
    ini = [(code(name), help) for name, help, _ in recorder.ini]
    return (table(("option", "meaning"), options)
            + "\n## ini options\n\nIn `[tool.pytest.ini_options]`, `pytest.ini`, `tox.ini` or "
            "`setup.cfg`; a command-line option wins over its ini option.\n\n"
            + table(("ini option", "meaning"), ini))


# -- outcomes, verdicts and failure codes ---------------------------------------------------------

def codes() -> str:
    from pytest_verifygate import codes as words
    from pytest_verifygate.report.digest import HINTS

    rows = [(code(name), HINTS.get(name, ""),
             "skipped" if name in words.MISSING_CODES else "failed",
             "no" if name in words.NOT_RETRIED else "yes")
            for name in words.CODES]
    return ("## Failure codes\n\n"
            + table(("code", "what to do (the digest's hint)",
                     'with `on_missing = "skip"`', "retried (`retries`)"), rows)
            + "\n## Gate outcomes\n\n" + ", ".join(code(name) for name in words.OUTCOMES)
            + "\n\n## Verdicts\n\n" + ", ".join(
                code(name) for name in (words.VERDICT_PASSED, words.VERDICT_FAILED,
                                        words.VERDICT_PENDING, words.VERDICT_UNVERIFIED))
            + "\n")


# -- JSON Schemas: the report and the contract ----------------------------------------------------

def schema_type(spec: dict[str, Any], schema: dict[str, Any] | None = None) -> str:
    """A property's type in a few words: `string or array of strings`, `integer ≥ 1`."""
    if schema is not None:
        spec = resolve(schema, spec)
    if "const" in spec:
        return code(json.dumps(spec["const"]))
    if "enum" in spec and len(spec["enum"]) > MAX_CHOICES_SHOWN:
        return f"string: one of {len(spec['enum'])} names"
    if "enum" in spec:
        return " or ".join(code(json.dumps(value)) for value in spec["enum"])
    if "anyOf" in spec or "oneOf" in spec:
        return " or ".join(schema_type(part, schema)
                           for part in spec.get("anyOf") or spec["oneOf"])
    kinds = spec.get("type", "any")
    words = " or ".join(kinds) if isinstance(kinds, list) else kinds
    if words == "array":
        # "array of strings", "array of integers, each ≥ 1", "array of strings: one of 9 names"
        item, comma, rest = schema_type(spec.get("items", {}), schema).partition(", ")
        item, colon, names = item.partition(": ")
        words = f"array of {item}s" + (f", each {rest}" if comma else "") + (
            f", each {names}" if colon else "")
    elif words == "object" and isinstance(spec.get("additionalProperties"), dict):
        words = "table of " + schema_type(spec["additionalProperties"], schema) + "s"
    bounds = [f"{sign} {spec[key]}" for key, sign in (
        ("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"))
        if key in spec and not isinstance(spec[key], bool)]
    return ", ".join([words, *bounds])


def schema_rows(schema: dict[str, Any], spec: dict[str, Any], path: str,
                with_default: bool) -> Iterator[tuple[str, ...]]:
    """One row per property, depth first; `gates[].name` for the items of an array."""
    required = set(spec.get("required", ()))
    for name, prop in spec.get("properties", {}).items():
        prop = resolve(schema, prop)
        key = f"{path}{name}"
        items = resolve(schema, prop.get("items", {}))
        row = [code(key), schema_type(prop, schema), "yes" if name in required else "no"]
        if with_default:
            row[2] = code(json.dumps(prop["default"])) if "default" in prop else (
                "required" if name in required else "absent")
        yield (*row, prop.get("description", ""))
        if "properties" in prop:
            yield from schema_rows(schema, prop, key + ".", with_default)
        elif "properties" in items:
            yield from schema_rows(schema, items, key + "[].", with_default)


def resolve(schema: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    # The report's schema (draft 2020-12) keeps its parts in $defs, the contract's (draft-07,
    # as SchemaStore asks) in definitions.
    for section in ("$defs", "definitions"):
        if spec.get("$ref", "").startswith(f"#/{section}/"):
            return dict(schema[section][spec["$ref"].removeprefix(f"#/{section}/")])
    return spec


def package_json(relative: str) -> dict[str, Any] | None:
    resource = importlib.resources.files("pytest_verifygate").joinpath(relative)
    if not resource.is_file():
        return None
    loaded: dict[str, Any] = json.loads(resource.read_text(encoding="utf-8"))
    return loaded


def report_keys() -> str:
    schema = package_json("report/report.schema.json")
    assert schema is not None, "the package ships report/report.schema.json"
    return table(("key", "type", "always there", "meaning"),
                 list(schema_rows(schema, schema, "", with_default=False)))


def contract_keys() -> str:
    schema = package_json("contract/contract.schema.json")
    assert schema is not None, "the package ships contract/contract.schema.json"
    parts = []
    for name, title in (("gate", "`[[gate]]`"), ("settings", "`[settings]`")):
        rows = list(schema_rows(schema, schema["definitions"][name], "", with_default=True))
        parts += [f"## {title}\n", table(("key", "type", "default", "meaning"), rows)]
    return "\n".join(parts)


def opentiger_keys() -> str:
    from pytest_verifygate.contract import model

    return table(("object", "keys"), [
        ("the file", ", ".join(code(key) for key in model.OPENTIGER_KEYS)),
        ("each of `rules`", ", ".join(code(key) for key in model.OPENTIGER_RULE_KEYS)),
    ])


def github_action() -> str:
    import yaml  # MkDocs' own dependency

    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    inputs = [(code(name), code(json.dumps(spec["default"])) if spec.get("default") else "none",
               spec.get("description", "")) for name, spec in action.get("inputs", {}).items()]
    outputs = [(code(name), spec.get("description", ""))
               for name, spec in action.get("outputs", {}).items()]
    return ("**Inputs**\n\n" + table(("input", "default", "meaning"), inputs)
            + "\n**Outputs**\n\n" + table(("output", "meaning"), outputs))


# -- hooks and the Python API ---------------------------------------------------------------------

def hookspecs() -> str:
    import pluggy

    from pytest_verifygate import hookspecs as module

    manager = pluggy.PluginManager("pytest")
    parts = []
    for name, function in inspect.getmembers(module, inspect.isfunction):
        opts = manager.parse_hookspec_opts(module, name)
        if opts is None:
            continue
        note = "\n\nThe first implementation to return a value wins." if opts.get(
            "firstresult") else ""
        parts.append(f"## {name}\n\n```python\ndef {name}{signature(function)}\n```\n\n"
                     f"{docstring(function)}{note}\n")
    return "\n".join(parts)


def api() -> str:
    import pytest_verifygate

    parts = []
    for name in pytest_verifygate.__all__:
        if name.startswith("_"):
            continue
        obj = getattr(pytest_verifygate, name)
        if inspect.isclass(obj) and issubclass(obj, Exception):
            heading = f"class {name}({obj.__mro__[1].__name__})"
        elif inspect.isclass(obj) and hasattr(obj, "_fields"):
            heading = f"class {name}(NamedTuple): " + ", ".join(obj._fields)
        else:
            heading = f"{name}{signature(obj)}"
        parts.append(f"## {name}\n\n```python\n{heading}\n```\n\n{docstring(obj)}\n")
    return "\n".join(parts)


RENDERERS: dict[str, Callable[[], str]] = {
    "cli": cli,
    "pytest-options": pytest_options,
    "codes": codes,
    "report-keys": report_keys,
    "contract-keys": contract_keys,
    "opentiger-keys": opentiger_keys,
    "github-action": github_action,
    "hookspecs": hookspecs,
    "api": api,
}
