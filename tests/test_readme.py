"""Every snippet in the README and the documentation site works as shown, so none can drift
from the code again.

The documents are the README, CONTRIBUTING.md and every page under ``docs/``. Each fenced
block is tried by what it is: a TOML or JSON contract is loaded, a pre-commit
configuration is validated by pre-commit itself, every ``verifygate`` command line in a shell
block, a CI workflow or an agent's hook configuration is parsed by the real parser, every
``pre-commit run HOOK`` names a hook that the README defines, and the Python is run against a
real repository. Blocks without a language are shown output or diagrams.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # pre-commit's own dependency

from pytest_verifygate.cli.parser import build_parser
from pytest_verifygate.contract import load_contract

from conftest import write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCUMENTS = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# The README stays a page for adopters; everything else is on the documentation site.
README_MAX_LINES = 250


def _blocks(document: Path) -> list[tuple[str, str, str]]:
    text = document.read_text(encoding="utf-8")
    where = document.relative_to(ROOT)
    return [(match.group(1), match.group(2), f"{where}:{text[: match.start()].count(chr(10)) + 1}")
            for match in FENCE.finditer(text)]


BLOCKS = [block for document in DOCUMENTS for block in _blocks(document)]


def blocks(language: str) -> list[Any]:
    return [pytest.param(text, id=where) for lang, text, where in BLOCKS if lang == language]


def verifygate_commands(text: str) -> Iterator[list[str]]:
    """The ``verifygate ...`` command lines in ``text`` (shell lines, YAML values), as argv."""
    for line in text.splitlines():
        found = re.search(r"(?:^|[\s\"'-])(verifygate (?:run|list|agent-hook|agent-status|"
                          r"install-agent-hook|install-hook|install|uninstall|mcp|merge|init|"
                          r"migrate|check|completion)\b"
                          r"[^#\"']*)", line)
        if found:
            yield shlex.split(found.group(1))


def parses(argv: list[str]) -> None:
    assert argv[0] == "verifygate"
    try:
        build_parser(argv[1]).parse_args(argv[1:])
    except SystemExit as exc:  # argparse's way of rejecting a command line
        pytest.fail(f"the documented command does not parse: {shlex.join(argv)} ({exc})")


def defined_hook_ids() -> set[str]:
    ids = set()
    for language, text, _ in BLOCKS:
        if language == "yaml":
            config = yaml.safe_load(text)
            for repo in config.get("repos", []) if isinstance(config, dict) else []:
                ids |= {hook["id"] for hook in repo.get("hooks", [])}
    return ids


def test_the_documents_have_snippets_of_every_kind() -> None:
    languages = {language for language, _, _ in BLOCKS}
    assert {"toml", "yaml", "json", "python", "sh"} <= languages
    assert {"toml", "yaml", "sh"} <= {language for language, _, _ in _blocks(README)}


def test_the_readme_is_short_and_its_anchors_exist() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    # GitHub's anchors: the heading in lower case, punctuation but - and _ dropped, spaces -.
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", text), re.MULTILINE)
    anchors = {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
               for heading in headings}
    for anchor in re.findall(r"\]\(#([^)]+)\)", text):
        assert anchor in anchors, f"README.md links to #{anchor}, which no heading makes"


@pytest.mark.parametrize("text", blocks("toml"))
def test_each_toml_contract_loads(text: str, repo: Path) -> None:
    in_pyproject = re.search(r"^\[tool\.verifygate", text, re.MULTILINE)
    name = "pyproject.toml" if in_pyproject else "verify.toml"
    contract = load_contract(write(repo / name, text))
    assert contract.gates


@pytest.mark.parametrize("text", blocks("json"))
def test_each_json_snippet_is_a_contract_or_a_hook_configuration(text: str, repo: Path) -> None:
    data = json.loads(text)
    if "hooks" in data:
        commands = [hook["command"] for entries in data["hooks"].values()
                    for entry in entries for hook in entry.get("hooks", [entry])]
        assert commands
        for command in commands:
            words = shlex.split(command)
            if words[-1:] == ["GUARD"]:  # the docs' stand-in for the sh guard
                del words[-1]
            while words[1:2] in (["-E"], ["-P"]):  # python -E -P: see the installer
                del words[1]
            if words[1:3] == ["-m", "pytest_verifygate"]:  # an interpreter's path, -m
                words = ["verifygate", *words[3:]]
            parses(words)
    elif "mcpServers" in data:  # an MCP client's configuration
        for server in data["mcpServers"].values():
            parses([server["command"], *server["args"]])
    else:
        contract = load_contract(write(repo / ".opentiger" / "verify.contract.json", text))
        assert contract.gates


@pytest.mark.parametrize("text", blocks("yaml"))
def test_each_yaml_snippet_validates_and_its_commands_parse(text: str, repo: Path) -> None:
    config = yaml.safe_load(text)
    assert isinstance(config, dict)
    if "repos" in config:
        path = write(repo / ".pre-commit-config.yaml", text)
        done = subprocess.run([sys.executable, "-m", "pre_commit", "validate-config", str(path)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    for argv in verifygate_commands(text):
        parses(argv)


@pytest.mark.parametrize("text", blocks("sh"))
def test_each_shell_line_parses_and_names_hooks_that_exist(text: str) -> None:
    hooks = defined_hook_ids()
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if words[:2] == ["pre-commit", "run"] and len(words) > 2 and not words[2].startswith("-"):
            assert words[2] in hooks, f"`{line}` runs a hook no document defines"
        elif words[:2] == ["pre-commit", "run"] and "--hook-stage" in words:
            hook = words[words.index("--hook-stage") + 2]
            assert hook in hooks, f"`{line}` runs a hook no document defines"
    for argv in verifygate_commands(text):
        parses(argv)


def test_each_make_target_and_pytest_option_named_exists() -> None:
    """`make X` in a shell snippet is a Makefile target; `--verify-X` anywhere is an option."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w.-]+):", makefile, re.MULTILINE))
    for language, text, where in BLOCKS:
        for line in text.splitlines() if language == "sh" else ():
            words = shlex.split(line, comments=True)
            if words[:1] == ["make"] and len(words) > 1:
                assert words[1] in targets, f"{where}: `make {words[1]}` is no Makefile target"
    done = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    offered = set(re.findall(r"--verify-[a-z-]+", done.stdout))
    for document in DOCUMENTS:
        named = set(re.findall(r"--verify-[a-z][a-z-]*[a-z]", document.read_text("utf-8")))
        assert named <= offered, f"{document.name} names {sorted(named - offered)}"


@pytest.mark.parametrize("document", [*DOCUMENTS, ROOT / "example-repo" / "README.md",
                                      ROOT / "example-repo" / ".pre-commit-config.yaml"],
                         ids=lambda path: str(path.relative_to(ROOT)))
def test_no_placeholder_is_left_for_the_reader_to_guess(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    for placeholder in ("<owner>", "<your", "TODO", "XXX"):
        assert placeholder not in text
    # The documents are the project's word: they cite each other, never a text outside it.
    assert not re.search(r"\bSPEC\b", text)
    # A pre-commit `rev:` needs a tag or commit the reader can look up; none is published.
    assert not re.search(r"^\s*#?\s*rev:", text, re.MULTILINE)


@pytest.mark.parametrize("text", blocks("python"))
def test_each_python_snippet_runs(text: str, repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "ok"\ncommand = "true"\n')
    write(repo / "snippet.py", text)
    done = subprocess.run([sys.executable, "snippet.py"], cwd=repo, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ok: passed" in done.stdout


def test_the_pre_commit_config_runs_as_shown(repo: Path, tmp_path: Path) -> None:
    """The config pinned to PyPI works as written, installed here from this checkout."""
    (text,) = {text for language, text, _ in BLOCKS
               if language == "yaml" and "additional_dependencies" in text}
    checkout = Path(__file__).resolve().parents[1]
    assert "pytest-verifygate==0.1.0" in text
    write(repo / ".pre-commit-config.yaml",
          text.replace("pytest-verifygate==0.1.0", str(checkout)))
    write(repo / "verify.toml", '[[gate]]\nname = "says-hello"\ncommand = "echo hello"\n'
          'when_changed = ["*.txt"]\n')
    write(repo / "note.txt", "hi\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PRE_COMMIT", "VERIFYGATE_", "PYTEST_"))}
    env.update(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), PRE_COMMIT_COLOR="never")
    for args in (["run", "verifygate"], ["run", "--hook-stage", "manual", "verifygate-all"]):
        done = subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Passed" in done.stdout
