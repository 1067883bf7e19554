"""CI output cannot be turned against CI: on GitHub Actions, gate output, test names, gate
names and file names print no workflow command the runner honours.

Real ``verifygate`` and pytest runs in a GitHub-like environment; their stdout and stderr are
read the way the runner reads them (``actions_runner``), and only our own annotations (and the
stop and resume around untrusted text) may be honoured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actions_runner import Command, annotations, honoured, parse
from plugin_support import QUIET_PLUGINS
from pytest_verifygate.report.github import (
    CommandStop,
    inert_json,
    inert_text,
    workflow_command,
)

from .support import examples
from conftest import commit_all, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

PY = sys.executable
# What a hostile gate, test or file name prints: every form a runner reads, and ways around.
HOSTILE_LINES = [
    "::add-mask::leak",
    "::error file=forged.py,line=1::forged error",
    "::warning::forged warning",
    "  ::set-output name=leak::value",
    "\t::save-state name=leak::value",
    "::SET-ENV name=LEAK::value",
    "::stop-commands::guessed",
    "::guessed::",
    "::notice::forged notice",
    "text first ##[add-mask]leak2",
    "##[set-output name=leak;]old form",
    "##[error]forged old form",
    "a.py:1:1: ::add-mask::leak3",
    "a.py:2:1: E1 50%0A::add-mask::leak4",
]
HOSTILE_SCRIPT = "import sys; print('\\n'.join(sys.argv[1:])); sys.exit(1)"
HOSTILE_FILES = ["::error::name.py", "##[add-mask]name.py", "we,ird.py"]


def _contract() -> str:
    return (
        '[[gate]]\nname = "hostile"\n'
        f"command = {json.dumps([PY, '-c', HOSTILE_SCRIPT, *HOSTILE_LINES])}\n"
        # The file names reach the output through {files}; the gate's name is hostile too.
        '[[gate]]\nname = "::warning::##[add-mask]gate"\n'
        f"command = {json.dumps([PY, '-c', HOSTILE_SCRIPT, '{files}'])}\n"
        'when_changed = ["*.py"]\n'
        '[[gate]]\nname = "place"\n'
        f"command = {json.dumps([PY, '-c', HOSTILE_SCRIPT, 'we,ird.py:3:2: E2 comma file'])}\n"
    )


HOSTILE_TEST = '''
import pytest

@pytest.mark.parametrize("text", ["::error::param", "##[add-mask]param"])
def test_prints(text):
    print("::add-mask::captured")
    print("  ::set-output name=leak::captured")
    assert text == "##[error]message"
'''


@pytest.fixture
def hostile_repo(repo: Path) -> Path:
    write(repo / "verify.toml", _contract())
    write(repo / "a.py", "a = 1\nb = 2\n")
    for name in HOSTILE_FILES:
        write(repo / name, "x = 1\ny = 2\nz = 3\n")
    write(repo / "tests" / "test_hostile.py", HOSTILE_TEST)
    commit_all(repo)
    return repo


def github_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "GITHUB_ACTIONS": "true",
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def _only_ours(stream: str) -> list[Command]:
    """The commands honoured in one stream: a stop and its resume around everything else,
    and between them nothing; after them only our annotations and group lines. Returns the
    annotations."""
    commands = honoured(stream)
    names = [command.name for command in commands]
    stops = [i for i, name in enumerate(names) if name == "stop-commands"]
    for index in stops:
        token = commands[index].data.lower()
        assert token.startswith("verifygate-") and len(token) > 30
        assert names[index + 1] == token, names  # nothing honoured while stopped
    # Ours: the resumes, the annotations, and the group lines that fold a gate's output.
    assert {name for name in names if name != "stop-commands"} <= {
        *(commands[i].data.lower() for i in stops), "error", "warning", "group",
        "endgroup"}, names
    found = annotations(stream)
    for command in found:
        assert command.properties["title"].startswith("verifygate "), command
    # The step's own commands after the run are honoured again.
    assert annotations(stream + "\n::notice::after the run\n")[-1].data == "after the run"
    return found


def _annotated(found: list[Command]) -> list[tuple[str | None, str | None, str]]:
    return [(c.properties.get("file"), c.properties.get("title"), c.data) for c in found]


def test_cli_text_output_honours_only_our_annotations(hostile_repo: Path, tmp_path: Path
                                                      ) -> None:
    done = _run([PY, "-m", "pytest_verifygate.cli", "run"], hostile_repo, github_env(tmp_path))
    assert done.returncode == 1, done.stderr
    # The hostile text is in the log, as text: people read what the gate printed.
    assert "::add-mask::leak" in done.stdout and "##[add-mask]name.py" in done.stdout
    found = _only_ours(done.stdout)
    assert honoured(done.stderr) == []
    assert ("a.py", "verifygate hostile", "::add-mask::leak3") in _annotated(found)
    # An escaped newline in the output stays two characters of the message.
    assert ("a.py", "verifygate hostile", "E1 50%0A::add-mask::leak4") in _annotated(found)
    # A comma in a file name is escaped in the property, not a new property.
    place = next(c for c in found if c.properties.get("title") == "verifygate place")
    assert (place.properties["file"], place.properties["line"], place.properties["col"]) == (
        "we,ird.py", "3", "2")
    # The hostile gate name is only the annotation's title, escaped.
    assert any(c.properties["title"].startswith("verifygate ::warning::##[add-mask]gate")
               for c in found)


@pytest.mark.parametrize("output", ["json", "agent"])
def test_cli_json_and_agent_output_are_inert(hostile_repo: Path, tmp_path: Path,
                                             output: str) -> None:
    done = _run([PY, "-m", "pytest_verifygate.cli", "run", "--format", output, "--json",
                 "report.json"], hostile_repo, github_env(tmp_path))
    assert done.returncode == 1, done.stderr
    assert honoured(done.stdout) == []
    if output == "json":  # the same report to any JSON reader
        assert json.loads(done.stdout) == json.loads((hostile_repo / "report.json").read_text())
    else:
        assert "add-mask]leak2" in done.stdout and ":\u200b:add-mask::leak" in done.stdout
    assert len(_only_ours(done.stderr)) >= 3


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_pytest_output_honours_only_our_annotations(hostile_repo: Path, tmp_path: Path,
                                                    workers: list[str]) -> None:
    done = _run([PY, "-m", "pytest", "-p", "no:cacheprovider", *QUIET_PLUGINS.split(),
                 "--verify-contract", "-rA", "-v", *workers, "tests", "verify.toml"],
                hostile_repo, github_env(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    # pytest printed the hostile test names, failure text and captured output...
    assert "::add-mask::captured" in done.stdout and "##[add-mask]param" in done.stdout
    assert "::add-mask::leak" in done.stdout
    # ...and the runner honours none of it.
    found = _only_ours(done.stdout)
    assert honoured(done.stderr) == []
    assert {c.properties["title"].split(":")[0] for c in found} >= {"verifygate hostile",
                                                                    "verifygate place"}


def test_contract_errors_leave_commands_on(repo: Path, tmp_path: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "x"\ncommand = ""\n')
    commit_all(repo)
    done = _run([PY, "-m", "pytest_verifygate.cli", "run"], repo, github_env(tmp_path))
    assert done.returncode == 2
    # Stopped and resumed, or never stopped: the step's later commands work either way.
    assert annotations(done.stdout + "\n::notice::later\n")[-1].data == "later"


# --------------------------------------------------------------------------------------------
# the pieces


@examples(300)
@given(st.text(), st.text(), st.text())
def test_escaped_commands_survive_the_runner_unchanged(message: str, title: str,
                                                       file: str) -> None:
    line = workflow_command("error", message, title=title, file=file, line=3)
    assert "\n" not in line and "\r" not in line
    command = parse(line, {"error"})
    assert command is not None and command.name == "error"
    assert command.data == message
    expected = {"title": title, "file": file, "line": "3"}
    # The runner drops an empty property value (its split removes empty entries).
    assert command.properties == {key: value for key, value in expected.items() if value}


@examples(300)
@given(st.lists(st.sampled_from([*HOSTILE_LINES, "plain", "", " ", "::", "##[", "]"]))
       .map("\n".join) | st.text())
def test_inert_text_and_json_hold_no_command(text: str) -> None:
    assert honoured(inert_text(text)) == []
    assert inert_text(text).replace("\u200b", "") == text
    encoded = json.dumps({"output": text, "lines": text.splitlines()}, indent=2)
    assert honoured(inert_json(encoded)) == []
    assert json.loads(inert_json(encoded)) == json.loads(encoded)


def test_a_stop_is_resumed_once_and_tokens_differ() -> None:
    lines: list[str] = []
    stop = CommandStop(lines.append)
    with stop:
        stop.resume()
        stop.stop()
        assert stop.stopped
    assert not stop.stopped
    stop.resume()
    assert [line.startswith("::stop-commands::") for line in lines] == [True, False, True, False]
    first, second = lines[0].split("::")[2], lines[2].split("::")[2]
    assert first != second and lines[1] == f"::{first}::" and lines[3] == f"::{second}::"
    assert [c.name for c in honoured("\n".join([lines[0], "::error::x", *lines[1:]]))] == [
        "stop-commands", first, "stop-commands", second]


FORMAT_LINES = [
    "a.py:1:1: E1 x", "src/b.py:2: error: y  [code]", "a.py:1: note: n", "FAILED a.py::t - boom",
    "ERROR src/b.py", "=== FAILURES ===", "____ t ____", "E   assert 1", "a.py:2: AssertionError",
    "rule text", " --> a.py:2:3", "a.py(1,2): error TS1: z", "  a.py:3:4 - error: w",
    "src/b.py", "  1:1  warning  m  rule", '  File "a.py", line 1, in f', "::add-mask::x",
    "a.py:1:1: ::error::%0A##[add-mask]y", "a.py:0: zero", "a.py:99999999999999999999: big",
]


@examples(200)
@given(st.lists(st.sampled_from(FORMAT_LINES) | st.text(max_size=40), max_size=25)
       .map("\n".join))
def test_any_output_gives_well_formed_annotations(tmp_path_factory: pytest.TempPathFactory,
                                                  output: str) -> None:
    from pytest_verifygate.report.github import error_annotations

    root = tmp_path_factory.getbasetemp() / "well-formed"
    write(root / "a.py", "def t():\n    pass\n")
    write(root / "src" / "b.py", "x = 1\n")
    gate = {"name": "g", "outcome": "failed", "code": "command_failed", "cwd": ".",
            "output_tail": output, "attempts": 1}
    report = {"verdict": "failed", "gates": [gate, {**gate, "name": "h"}]}
    lines = error_annotations(report, repo_root=root)
    found = annotations("\n".join(lines))
    assert len(found) == sum(line.startswith("::") for line in lines)  # every one honoured
    assert all(c.properties["title"].startswith("verifygate ") for c in found)
    assert sum(c.name == "error" for c in found) <= 10
    assert all(c.properties.get("file") in (None, "a.py", "src/b.py") for c in found)
    assert honoured("\n".join(line for line in lines if not line.startswith("::"))) == []
