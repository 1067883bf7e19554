"""Random bytes at every state file, random output at the redactor and the sinks after it.

Properties (hypothesis; ``make fuzz`` runs thousands of examples each): every state reader
(the parse cache, result cache entries, the agent hook's state) returns "nothing usable" for
anything it did not write itself, without an exception, even for well-formed data of the
wrong shape; and no marker secret survives the redactor, as printed,
encoded or split across reads, in the report or in any sink made from it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_verifygate.agents.state import load_state
from pytest_verifygate.engine import RunRequest, prepare
from pytest_verifygate.report.digest import to_digest
from pytest_verifygate.report.document import gate_entry
from pytest_verifygate.report.github import error_annotations, step_summary
from pytest_verifygate.report.junit import to_junit
from pytest_verifygate.report.redact import MASK, redactor_for
from pytest_verifygate.runner.records import GatePlan, GateResult
from pytest_verifygate.state import durations, result_cache

from .support import examples
from conftest import commit_all, git, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

# --------------------------------------------------------------------------------------------
# state files

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                 max_size=4),
    max_leaves=20)
ENTRY_FIELDS = st.fixed_dictionaries({}, optional={
    "version": st.integers(0, 2) | JSON_VALUES, "key": JSON_VALUES, "gate": JSON_VALUES,
    "output_tail": JSON_VALUES, "output_truncated": JSON_VALUES, "output_bytes": JSON_VALUES,
    "rounds": JSON_VALUES, "signature": JSON_VALUES, "failed_gates": JSON_VALUES})


class Project:
    """One repository for every example: a cached gate, its plan, its slot."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.email", "t@example.invalid")
        git(root, "config", "user.name", "T")
        write(root / "verify.toml", '[[gate]]\nname = "check"\ncommand = "true"\ncache = true\n')
        commit_all(root)
        self.plan: GatePlan = prepare(RunRequest(start=root)).gate_plans()[0]
        assert self.plan.cache is not None
        self.slot = self.plan.cache
        self.slot.path.parent.mkdir(parents=True, exist_ok=True)
        path = durations.durations_path(root)
        assert path is not None
        self.durations = path
        self.agent_state = root / ".git" / "verifygate" / "agent" / "s.json"
        self.agent_state.parent.mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return Project(tmp_path_factory.mktemp("fuzz") / "repo")


def read_every_state(project: Project) -> None:
    """Every reader, on whatever the files hold now; each must return without raising."""
    entries, warning = durations._read(project.durations)
    assert warning is not None or all(isinstance(seconds, float) for _, _, seconds in entries)
    hit = result_cache.lookup(project.slot, project.plan, [])
    assert hit is None or (hit.cached and hit.outcome == "passed")
    state = load_state(project.agent_state)
    assert isinstance(state.rounds, int) and state.rounds >= 0


@examples(60)
@given(content=st.binary(max_size=512) | st.builds(bytes.__mul__, st.sampled_from(
    [b"[", b"{", b"(", b"\xff", b"\x00"]), st.integers(1, 50_000)))
def test_random_bytes_in_every_state_file(project: Project, content: bytes) -> None:
    for path in (project.durations, project.slot.path, project.agent_state):
        path.write_bytes(content)
    read_every_state(project)
    assert result_cache.lookup(project.slot, project.plan, []) is None  # never an entry of ours
    assert load_state(project.agent_state).rounds == 0


@examples(60)
@given(entry=ENTRY_FIELDS, state=ENTRY_FIELDS, recorded=JSON_VALUES)
def test_well_formed_data_of_the_wrong_shape(
        project: Project, entry: dict[str, Any], state: dict[str, Any], recorded: Any) -> None:
    """JSON of the wrong shape (a file an older version, or a bug, wrote): the fields are
    still checked."""
    project.slot.path.write_text(json.dumps(entry))
    project.agent_state.write_text(json.dumps(state))
    project.durations.write_text(json.dumps({"version": 1, "durations": recorded}))
    read_every_state(project)


# --------------------------------------------------------------------------------------------
# the redactor and the sinks after it

MARKERS = {"API_TOKEN": "Mk-SECRET_tok3n.value", "DB_PASSWORD": "p@ss w/rd+Zq&9\u00e9",
           "TLS_PRIVATE_KEY": "-----BEGIN KEY-----\nQUJDREVGR0hJSktMTU5P\nUFFSU1RVVldYWVo=\n"}
REDACTOR = redactor_for((), MARKERS)
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
FILLER = st.text(st.characters(codec="utf-8", exclude_characters="*"), max_size=12)


def readable(text: str) -> list[str]:
    """``text`` as a sink shows it: as it is, and with escape sequences gone."""
    return [text, ANSI.sub("", text)]


def forms(secret: str) -> list[str]:
    from urllib.parse import quote

    plain = secret.replace("\r\n", "\n")
    found = [plain, json.dumps(plain)[1:-1], quote(plain, safe="")]
    found += [line for line in plain.split("\n") if len(line.strip()) >= 8]
    return found


def assert_no_marker(text: str) -> None:
    for shown in readable(text):
        for secret in MARKERS.values():
            for form in forms(secret):
                assert form not in shown, (form, text)


@st.composite
def leaking_output(draw: st.DrawFn) -> str:
    """Output printing the markers: as they are, encoded, with CRLF, among filler."""
    parts = [draw(FILLER)]
    for _ in range(draw(st.integers(1, 4))):
        secret = draw(st.sampled_from(list(MARKERS.values())))
        parts += [draw(st.sampled_from([*forms(secret), secret.replace("\n", "\r\n")])),
                  draw(FILLER)]
    return "".join(parts)


def stream_masked(data: bytes, sizes: list[int]) -> bytes:
    """``data`` through the stream masker in reads of ``sizes`` (repeated)."""
    masker = REDACTOR.stream_masker()
    written, position = [], 0
    for size in sizes * (len(data) // max(1, sum(sizes)) + 1):
        written.append(masker.feed(data[position:position + size]))
        position += size
    written.append(masker.feed(data[position:]) + masker.flush())
    return b"".join(written)


@examples(200)
@given(output=leaking_output())
def test_no_marker_survives_the_redactor(output: str) -> None:
    assert_no_marker(REDACTOR.text(output))


@examples(100)
@given(output=leaking_output(), sizes=st.lists(st.integers(1, 300), min_size=1, max_size=20))
def test_no_marker_survives_the_stream_masker(output: str, sizes: list[int]) -> None:
    data = output.encode("utf-8", "surrogatepass")
    masked = stream_masked(data, sizes)
    assert_no_marker(masked.decode("utf-8", "surrogateescape"))
    assert masked == REDACTOR.text(output).encode("utf-8", "surrogatepass")  # one search


@examples(60)
@given(output=leaking_output(), raw=st.binary(max_size=300), truncated=st.booleans())
def test_no_sink_shows_a_marker_or_raises(tmp_path_factory: pytest.TempPathFactory,
                                         output: str, raw: bytes, truncated: bool) -> None:
    printed = raw + output.encode("utf-8", "surrogatepass")
    tail = stream_masked(printed, [64]).decode("utf-8", "replace")  # as the runner keeps it
    result = GateResult(name="leak", outcome="failed", code="command_failed",
                        command=("deploy", f"--token={MARKERS['API_TOKEN']}"), exit_code=1,
                        attempts=1, output_tail=tail, output_truncated=truncated)
    entry = gate_entry(result, None, REDACTOR)
    report: dict[str, Any] = {"version": 1, "verdict": "failed", "contract": "verify.toml",
                              "changes": {"source": "all", "ref": None, "files": []},
                              "summary": {"passed": 0, "failed": 1, "skipped": 0,
                                          "pending": 0},
                              "gates": [entry], "not_selected": [], "warnings": []}
    root = str(tmp_path_factory.getbasetemp())
    sinks = [json.dumps(report, ensure_ascii=False), to_digest(report, root=root),
             to_junit(report), step_summary(report, repo_root=root),
             *error_annotations(report, repo_root=root)]
    for sink in sinks:
        assert_no_marker(sink)
    shown = any(form in text for text in readable(printed.decode("utf-8", "replace"))
                for secret in MARKERS.values() for form in forms(secret))
    assert MASK in entry["output_tail"] or not shown
