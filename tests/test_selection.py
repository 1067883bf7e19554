"""Selection by role, phase and changed-file patterns, with a reason for every gate."""

from __future__ import annotations

from pathlib import Path

from pytest_verifygate.contract import load_contract
from pytest_verifygate.git.changes import ChangeSet
from pytest_verifygate.selection import select_gates

from conftest import write

CONTRACT = """
[[gate]]
name = "py"
command = "true"
when_changed = ["**/*.py", "!docs/**"]

[[gate]]
name = "impl"
command = "true"
roles = ["implementer"]

[[gate]]
name = "phase"
command = "true"
phases = [2, 3]

[[gate]]
name = "both"
command = "true"
when_changed_all = ["src/**", "tests/**"]

[[gate]]
name = "always"
command = "true"

[[gate]]
name = "build-dir"
command = "true"
when_changed = ["build/"]
"""


def _decisions(repo: Path, changes: ChangeSet, **kwargs: object) -> dict[str, tuple[bool, str]]:
    write(repo / "verify.toml", CONTRACT)
    contract = load_contract(repo / "verify.toml")
    return {s.gate.name: (s.selected, s.reason)
            for s in select_gates(contract, changes, **kwargs)}  # type: ignore[arg-type]


def test_patterns_with_negation(repo: Path) -> None:
    decisions = _decisions(repo, ChangeSet("files", files=("docs/conf.py",)))
    assert decisions["py"] == (False, "no changed file matches when_changed [**/*.py, !docs/**]")
    decisions = _decisions(repo, ChangeSet("files", files=("docs/conf.py", "src/a.py")))
    assert decisions["py"] == (True, "changed 'src/a.py' matches when_changed")
    assert decisions["always"] == (True, "always (no when_changed)")


def test_deleted_files_select_but_do_not_expand(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    contract = load_contract(repo / "verify.toml")
    changes = ChangeSet("staged", files=("gone.py",), deleted=frozenset({"gone.py"}))
    py = select_gates(contract, changes)[0]
    assert py.selected and "(deleted)" in py.reason
    assert py.matched_files == ()


def test_role_and_phase(repo: Path) -> None:
    everything = ChangeSet("all")
    decisions = _decisions(repo, everything, role="reviewer", phase=1)
    assert decisions["impl"] == (False, "role 'reviewer' is not in roles [implementer]")
    assert decisions["phase"] == (False, "phase 1 is not in phases [2, 3]")
    assert decisions["py"] == (True, "no change filtering (all gates apply)")
    decisions = _decisions(repo, everything, role="implementer", phase=3)
    assert decisions["impl"][0] and decisions["phase"][0]


def test_when_changed_all_needs_every_pattern(repo: Path) -> None:
    decisions = _decisions(repo, ChangeSet("files", files=("src/a.py",)))
    assert decisions["both"] == (False,
                                 "when_changed_all pattern 'tests/**' matches no changed file")
    decisions = _decisions(repo, ChangeSet("files", files=("src/a.py", "tests/t.py")))
    assert decisions["both"][0]


def test_directory_patterns_and_empty_change_sets(repo: Path) -> None:
    decisions = _decisions(repo, ChangeSet("files", files=("build/out/x.o",)))
    assert decisions["build-dir"][0]
    decisions = _decisions(repo, ChangeSet("staged"))
    assert decisions["py"] == (False, "no files changed")
    assert decisions["always"][0]


def test_the_prefilter_never_changes_a_decision(repo: Path) -> None:
    import random

    from pathspec import GitIgnoreSpec

    from pytest_verifygate.selection import PREFILTER_MIN_FILES

    rng = random.Random(7)
    parts = ["src", "docs", "a b", "build", "pkg", ".hidden", "x.py", "deep", "ü"]
    names = ["m.py", "README.md", "x.proto", "Makefile", "t.rs", "n\nl.py", ".env", "y.py"]
    paths = sorted({"/".join([*rng.choices(parts, k=rng.randint(0, 4)), rng.choice(names)])
                    for _ in range(PREFILTER_MIN_FILES * 2)})
    assert len(paths) >= PREFILTER_MIN_FILES
    pattern_pool = ["**/*.py", "!docs/**", "build/", "/Makefile", "src/**/t.rs", "*.md",
                    "pkg/*/m.py", "[ab]*/x.proto", "deep/**", "!**/.env", "x.py/",
                    "**/ü/**", "a b/"]
    gates = []
    for index in range(40):
        patterns = rng.sample(pattern_pool, k=rng.randint(1, 4))
        gates.append(f'[[gate]]\nname = "g{index}"\ncommand = "true"\n'
                     f"when_changed = {patterns!r}\n".replace("'", '"'))
    write(repo / "verify.toml", "".join(gates))
    contract = load_contract(repo / "verify.toml")
    for size in (len(paths), 50):  # with and without the prefilter
        sample = tuple(rng.sample(paths, k=size))
        decisions = select_gates(contract, ChangeSet("files", files=sample))
        for selection in decisions:
            spec = GitIgnoreSpec.from_lines(selection.gate.when_changed or [])
            expected = [path for path in sample if spec.match_file(path)]
            assert selection.selected == bool(expected), selection.gate.when_changed
            assert list(selection.matched_files or ()) == expected


def test_a_large_change_set_selects_through_the_prefilter(repo: Path) -> None:
    from pytest_verifygate.selection import PREFILTER_MIN_FILES, files_for_gate

    write(repo / "verify.toml", """
[[gate]]
name = "lint"
command = "true"
when_changed = ["src/**/*.py", "!src/vendored/**"]

[[gate]]
name = "docs"
command = "true"
when_changed = ["docs/"]

[[gate]]
name = "both"
command = "true"
when_changed_all = ["src/app/", "*.json"]
""")
    contract = load_contract(repo / "verify.toml")
    files = ("src/app/main.py", "src/vendored/v.py", "src/app/data.json",
             *(f"other/{i}.txt" for i in range(PREFILTER_MIN_FILES)))
    selections = select_gates(contract, ChangeSet("files", files=files))
    assert [s.gate.name for s in selections if s.selected] == ["lint", "both"]
    assert selections[0].matched_files == ("src/app/main.py",)
    assert {g.name: list(files_for_gate(g, files[:3], repo)) for g in contract.gates} == {
        "lint": ["src/app/main.py"], "docs": [],
        "both": ["src/app/main.py", "src/vendored/v.py", "src/app/data.json"]}


def test_a_role_scoped_gate_needs_one_of_its_roles_asked_for(repo: Path) -> None:
    everything = ChangeSet("all")
    decisions = _decisions(repo, everything)
    assert decisions["impl"] == (
        False, "only for roles [implementer]; no role asked for (--role, VERIFYGATE_ROLE)")
    assert decisions["always"][0] and decisions["py"][0]
    # Several roles may be asked for: a gate runs when any of them is among its roles.
    decisions = _decisions(repo, everything, role=("reviewer", "implementer"))
    assert decisions["impl"] == (True, "no change filtering (all gates apply)")
    decisions = _decisions(repo, everything, role=("reviewer", "tester"))
    assert decisions["impl"] == (
        False, "none of the roles asked for ('reviewer', 'tester') is in roles [implementer]")


def test_roles_asked_for_come_from_the_command_line_else_the_environment() -> None:
    from pytest_verifygate.selection import ROLE_ENV, asked_roles

    assert ROLE_ENV == "VERIFYGATE_ROLE"
    assert asked_roles(None, {}) == ()
    assert asked_roles(None, {ROLE_ENV: " reviewer , ci ,,"}) == ("reviewer", "ci")
    assert asked_roles(["a b", "a b", "c:d"], {ROLE_ENV: "ci"}) == ("a b", "c:d")
    assert asked_roles([], {ROLE_ENV: ""}) == ()


def test_left_out_says_which_filter_left_a_gate_out(repo: Path) -> None:
    from pytest_verifygate.selection import BY_CHANGES, BY_PHASE, BY_ROLE

    write(repo / "verify.toml", CONTRACT)
    contract = load_contract(repo / "verify.toml")
    selections = {s.gate.name: s for s in select_gates(
        contract, ChangeSet("files", files=("README.md",)), phase=1)}
    assert selections["impl"].left_out_by == BY_ROLE
    assert selections["phase"].left_out_by == BY_PHASE
    assert selections["py"].left_out_by == BY_CHANGES
    assert selections["both"].left_out_by == BY_CHANGES
    assert selections["always"].left_out_by is None and selections["always"].selected
