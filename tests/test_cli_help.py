"""Every subcommand's ``--help`` (a description, an example, its exit statuses, help for
every option) and the shell completion scripts made from the same parser."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys

import pytest

from pytest_verifygate.cli.parser import COMMANDS, build_parser

from conftest import verifygate

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_subcommand_explains_itself(command: str) -> None:
    parser = build_parser(command)
    sub = next(action for action in parser._actions
               if isinstance(action, argparse._SubParsersAction)).choices[command]
    assert sub.description, command
    assert "example: " in (sub.epilog or "") and "verifygate " in sub.epilog, command
    assert "exit status: 0 " in (sub.epilog or ""), command
    for action in sub._actions:
        assert action.help, f"{command} {action.option_strings or action.dest} has no help"


def test_help_keeps_its_paragraphs(tmp_path: object) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_verifygate", "check", "--help"],
                          capture_output=True, text=True, env={"COLUMNS": "80", "PATH": ""})
    assert done.returncode == 0
    assert "\n\nexample: verifygate check\n\nexit status: 0 the setup is sound" in done.stdout


@pytest.mark.parametrize("command", ["completion", "agent-hook", "run"])
def test_help_never_breaks_an_example_or_an_option(command: str) -> None:
    from pytest_verifygate.cli.parser import _TEXTS

    done = subprocess.run([sys.executable, "-m", "pytest_verifygate", command, "--help"],
                          capture_output=True, text=True, env={"COLUMNS": "80", "PATH": ""})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for example in _TEXTS[command][2].split("\n\nexample: "):
        assert example.removeprefix("example: ") in [
            line.removeprefix("example: ") for line in lines], example
    # No option or path cut at its hyphen (--max-rounds, bash-completion, NUL-separated).
    assert not [line for line in lines if line.endswith("-")], done.stdout


# shtab comes with the completion extra: without it ``verifygate completion`` says so instead.
needs_shtab = pytest.mark.skipif(importlib.util.find_spec("shtab") is None,
                                 reason="needs shtab: pip install -e '.[completion]'")


@needs_shtab
@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "tcsh"])
def test_completion_scripts_offer_every_subcommand(tmp_path: object, shell: str) -> None:
    from pathlib import Path

    done = verifygate("completion", shell, cwd=Path(str(tmp_path)))
    assert done.returncode == 0, done.stderr
    for command in ("run", "list", "migrate", "install", "agent-hook"):
        assert command in done.stdout


@needs_shtab
def test_bash_completion_completes_a_subcommand(tmp_path: object) -> None:
    from pathlib import Path

    script = Path(str(tmp_path)) / "verifygate.bash"
    script.write_text(verifygate("completion", "bash", cwd=Path(str(tmp_path))).stdout)
    done = subprocess.run(["bash", "-c", f"source {script}; COMP_WORDS=(verifygate mig); "
                           "COMP_CWORD=1; _shtab_verifygate; echo \"${COMPREPLY[@]}\""],
                          capture_output=True, text=True)
    assert done.stdout.split() == ["migrate"], done.stderr


@needs_shtab
def test_bash_completion_offers_the_contracts_gate_names(repo: object) -> None:
    from pathlib import Path

    from conftest import write

    root = Path(str(repo))
    write(root / "verify.toml", '[[gate]]\nname = "lint"\ncommand = "true"\n\n[[gate]]\n'
          'name = "unit tests"\ncommand = "true"\n\n[[gate]]\nname = "types"\ncommand = "true"\n')
    script = root.parent / "verifygate.bash"
    script.write_text(verifygate("completion", "bash", cwd=root).stdout)
    # A real bash, with the script sourced as bash-completion would, completing through the
    # function `complete -p` names; the verifygate it runs is this one.
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    done = subprocess.run(["bash", "-c", f"""source {script}
        function=$(complete -p verifygate | sed 's/.* -F \\([^ ]*\\) .*/\\1/')
        for line in 'verifygate run ' 'verifygate run lint un' 'verifygate list --staged t'; do
            read -ra COMP_WORDS <<< "$line"; [[ $line == *' ' ]] && COMP_WORDS+=('')
            COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMPREPLY=()
            "$function"; echo "${{COMPREPLY[*]}}"
        done"""], cwd=root, capture_output=True, text=True, env={"PATH": path}, timeout=60)
    assert done.stdout.splitlines() == ["lint unit\\ tests types", "unit\\ tests", "types"], \
        done.stderr
