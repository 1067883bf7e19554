"""Random bytes at every state file, random output at the redactor and the sinks after it.

Properties (hypothesis; ``make fuzz`` runs thousands of examples each): every state reader
(the parse cache, result cache entries, the agent hook's state) returns "nothing usable" for
anything it did not write itself, without an exception, even for well-formed data of the
wrong shape sealed with the right key; and no marker secret survives the redactor, however it
is split, encoded or cut, in the report or in any sink made from it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_verifygate import cache, durations
from pytest_verifygate.agents.state import STATE_SEAL, load_state
from pytest_verifygate.engine import RunRequest, prepare
from pytest_verifygate.integrity import seal, signed
from pytest_verifygate.report import redact
from pytest_verifygate.report.digest import to_digest
from pytest_verifygate.report.document import gate_entry
from pytest_verifygate.report.github import error_annotations, step_summary
from pytest_verifygate.report.junit import to_junit
from pytest_verifygate.report.redact import MASK, redactor_for
from pytest_verifygate.runner.records import GatePlan, GateResult
from pytest_verifygate.text import strip_ansi, terminal_safe

from .support import examples
from conftest import commit_all, git, write

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
    hit = cache.lookup(project.slot, project.plan)
    assert hit is None or (hit.cached and hit.outcome == "passed")
    state = load_state(project.agent_state)
    assert isinstance(state.rounds, int) and state.rounds >= 0


@examples(60)
@given(content=st.binary(max_size=512) | st.builds(bytes.__mul__, st.sampled_from(
    [b"[", b"{", b"(", b"\xff", b"verifygate-sealed-1 ", b"\x00"]), st.integers(1, 50_000)))
def test_random_bytes_in_every_state_file(project: Project, content: bytes) -> None:
    for path in (project.durations, project.slot.path, project.agent_state):
        path.write_bytes(content)
    read_every_state(project)
    assert cache.lookup(project.slot, project.plan) is None  # never sealed by us
    assert load_state(project.agent_state).rounds == 0


@examples(60)
@given(entry=ENTRY_FIELDS, state=ENTRY_FIELDS, recorded=JSON_VALUES)
def test_well_formed_data_of_the_wrong_shape_sealed_with_our_key(
        project: Project, entry: dict[str, Any], state: dict[str, Any], recorded: Any) -> None:
    """Past the seal (a file an older version, or a bug, wrote) the fields are still checked."""
    sealed = seal(cache.SEAL_PURPOSE, json.dumps(entry).encode())
    assert sealed is not None
    project.slot.path.write_bytes(sealed)
    project.agent_state.write_text(json.dumps(signed(STATE_SEAL, state)))
    project.durations.write_text(json.dumps({"version": 1, "durations": recorded}))
    read_every_state(project)


# --------------------------------------------------------------------------------------------
# the redactor and the sinks after it

MARKERS = {"API_TOKEN": "Mk-SECRET_tok3n.value", "DB_PASSWORD": "p@ss w/rd+Zq&9\u00e9",
           "TLS_PRIVATE_KEY": "-----BEGIN KEY-----\nQUJDREVGR0hJSktMTU5P\nUFFSU1RVVldYWVo=\n"}
REDACTOR = redactor_for((), MARKERS)
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
# Controls, C1, and Unicode's default-ignorable code points (what a terminal draws as nothing).
HIDDEN = re.compile("[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160"
                    "\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164"
                    "\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
                    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")
NOISE = st.sampled_from(["\x1b[0m", "\x1b[31;1m", "\x1b]8;;u\x07", "\x1b]0;t\x1b\\", "\x00",
                         "\r", "\x85", "\u200b", "\u202e", "\ufeff", "\x1b", "\x1bc",
                         "\ufe0f", "\u034f", "\U000e0041", "\U000e0100", "\u3164", "\u115f",
                         "\uffa0", "\u180b", "\u2064", "\u00ad", "\u200d", "\U0001d173"])
FILLER = st.text(st.characters(codec="utf-8", exclude_characters="*"), max_size=12)


def readable(text: str) -> list[str]:
    """``text`` as a sink shows it: escape sequences and hidden characters gone, either first;
    CRLF as LF."""
    return [HIDDEN.sub("", ANSI.sub("", text)), ANSI.sub("", HIDDEN.sub("", text))]


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
    """Output printing the markers: split by noise, encoded, with CRLF, among filler."""
    parts = [draw(FILLER)]
    for _ in range(draw(st.integers(1, 4))):
        secret = draw(st.sampled_from(list(MARKERS.values())))
        form = draw(st.sampled_from([*forms(secret), secret.replace("\n", "\r\n")]))
        noisy = "".join(char + (draw(NOISE) if draw(st.integers(0, 3)) == 0 else "")
                        for char in form)
        parts += [noisy, draw(FILLER)]
    return "".join(parts)


@examples(200)
@given(output=leaking_output())
def test_no_marker_survives_the_redactor(output: str) -> None:
    assert_no_marker(REDACTOR.text(output))


# Plain ASCII with the characters a secret-bearing text is made of: words, ``=``, ``%`` and
# ``\\`` escapes, quotes, and the secret words in any case.
PLAIN_PIECES = st.sampled_from(["TOKEN", "token", "Api_Key", "PASSWD", "x", "=", "%41", "\\u0041",
                                " ", '"', "'", ":", "&", ";", "MY_", "SECRET", "v4lue", "/"])


@examples(300)
@given(pieces=st.lists(PLAIN_PIECES | st.text(st.characters(codec="ascii"), max_size=8),
                       max_size=12),
       names=st.frozensets(st.sampled_from(["DEPLOY", "x", "VALUE"]), max_size=2),
       cut=st.booleans())
def test_the_redactor_s_shortcut_skips_only_what_the_search_finds_nothing_in(
    pieces: list[str], names: frozenset[str], cut: bool
) -> None:
    """With no secret value known, ``Redactor.text`` answers plain text without the search
    (``masking``); the search finds nothing wherever it does."""
    from pytest_verifygate.report.masking import apply, secret_forms

    redactor = redact.Redactor(values=(), names=names)
    text = "".join(pieces)
    searched = apply(text, secret_forms((), names).find(text, redactor.secret, cut=cut), MASK)
    assert redactor.text(text, cut=cut) == searched


CUT_END = "-- end of the cut marker --"


@st.composite
def cut_marker(draw: st.DrawFn) -> tuple[str, str]:
    """A marker split by noise and cut anywhere, inside a piece of noise too (``0m`` of
    ``\\x1b[0m``): the output's start, and what is left of the marker (enough to mask)."""
    secret = draw(st.sampled_from([MARKERS["API_TOKEN"], MARKERS["DB_PASSWORD"]]))
    pieces = [char + (draw(NOISE) if draw(st.integers(0, 2)) == 0 else "") for char in secret]
    kept = draw(st.integers(1, len(secret) - 6))  # the cut falls after the kept-th character
    noise = pieces[kept - 1][1:]
    start = noise[draw(st.integers(0, len(noise))):] + "".join(pieces[kept:])
    return start, secret[kept:]


@examples(100)
@given(output=leaking_output(), cut=cut_marker())
def test_a_cut_output_hides_what_is_left_of_a_marker(output: str, cut: tuple[str, str]) -> None:
    start, left = cut
    masked = REDACTOR.text(f"{start}\n{CUT_END}\n{output}", cut=True)
    for shown in [*readable(masked), terminal_safe(masked), strip_ansi(masked)]:
        assert CUT_END in shown and left not in shown.split(CUT_END)[0], (start, shown)
    assert_no_marker(masked)


@examples(100)
@given(output=leaking_output(), sizes=st.lists(st.integers(1, 300), min_size=1, max_size=20))
def test_no_marker_survives_the_log_masker(output: str, sizes: list[int]) -> None:
    data = output.encode("utf-8", "surrogatepass")
    masker = REDACTOR.log_masker()
    written, position = [], 0
    for size in sizes * (len(data) // max(1, sum(sizes)) + 1):
        written.append(masker.feed(data[position:position + size]))
        position += size
    written.append(masker.feed(data[position:]) + masker.flush())
    assert_no_marker(b"".join(written).decode("utf-8", "surrogateescape"))


@examples(60)
@given(output=leaking_output(), raw=st.binary(max_size=300), truncated=st.booleans())
def test_no_sink_shows_a_marker_or_raises(tmp_path_factory: pytest.TempPathFactory,
                                         output: str, raw: bytes, truncated: bool) -> None:
    tail = raw.decode("utf-8", "replace") + output
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
    shown = any(form in text for text in readable(tail) for secret in MARKERS.values()
                for form in forms(secret))
    assert MASK in entry["output_tail"] or not shown
