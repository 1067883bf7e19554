"""The parsed-contract cache: a run that finds its contract unchanged parses nothing.

Each check that "nothing was imported" runs in a fresh interpreter, as the command line does.
"""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_verifygate.contract import load_contract
from pytest_verifygate.contract.cache import (
    _MAGIC,
    FORMAT,
    LEGACY_FILE_NAME,
    MAX_ENTRIES,
    cache_path,
    checksum,
)
from pytest_verifygate.errors import ContractError
from pytest_verifygate.storage import state_dir

from conftest import write

CONTRACT = """
[[gate]]
name = "lint"
command = "true"
when_changed = ["src/**/*.py", "!src/vendored/"]

[[gate]]
name = "docs"
command = "true"
when_changed = ["docs/"]
"""

# Loads the contract and selects gates for one changed file, then reports what was imported.
PROBE = textwrap.dedent("""
    import json, sys
    from pytest_verifygate.changes import ChangeRequest, compute_changes
    from pytest_verifygate.contract import load_contract
    from pytest_verifygate.selection import select_gates

    contract = load_contract()
    changes = compute_changes(contract.root, ChangeRequest(files=["src/app/main.py"]))
    selected = [s.gate.name for s in select_gates(contract, changes) if s.selected]
    print(json.dumps({"selected": selected,
                      "timeout": contract.gates[0].timeout_seconds,
                      "tomllib": "tomllib" in sys.modules or "tomli" in sys.modules,
                      "pathspec": "pathspec" in sys.modules}))
""")


def probe(repo: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=repo, capture_output=True,
                          text=True, check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def cache_file(repo: Path) -> Path:
    path = cache_path(repo)
    assert path is not None
    return path


def read_cache(repo: Path) -> dict[str, Any]:
    content = cache_file(repo).read_bytes()
    assert content.startswith(_MAGIC)
    written, entries = marshal.loads(content[len(_MAGIC) + 4:])
    assert written == FORMAT
    assert isinstance(entries, dict)
    return entries


def sealed_payload(payload: bytes) -> bytes:
    """What the cache writes: its header, the checksum of the data, the data."""
    return _MAGIC + checksum(payload).to_bytes(4, "big") + payload


def write_cache(repo: Path, entries: dict[str, Any]) -> None:
    """A cache file as this user's verifygate would have written it (its checksum right)."""
    cache_file(repo).write_bytes(sealed_payload(marshal.dumps((FORMAT, entries))))


def test_an_unchanged_contract_is_neither_parsed_nor_its_patterns_compiled(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    first = probe(repo)
    assert first == {"selected": ["lint"], "timeout": 300.0, "tomllib": True, "pathspec": True}
    second = probe(repo)
    assert second == {"selected": ["lint"], "timeout": 300.0, "tomllib": False,
                      "pathspec": False}


def test_an_edit_is_seen_even_with_the_same_size_and_modification_time(repo: Path) -> None:
    contract = write(repo / "verify.toml", CONTRACT)
    assert probe(repo)["selected"] == ["lint"]
    stat = contract.stat()
    edited = CONTRACT.replace('"src/**/*.py"', '"srx/**/*.py"')
    assert len(edited) == len(CONTRACT)
    contract.write_text(edited, encoding="utf-8")
    import os

    os.utime(contract, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = probe(repo)
    assert after["selected"] == []
    assert after["tomllib"] is True


def test_a_corrupt_cache_is_ignored_and_replaced(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    load_contract()
    cache_file(repo).write_bytes(cache_file(repo).read_bytes()[:-20])  # truncated
    assert probe(repo)["selected"] == ["lint"]
    assert str(repo / "verify.toml") in read_cache(repo)
    assert probe(repo)["tomllib"] is False


def test_a_cache_entry_of_the_wrong_shape_is_not_trusted(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    load_contract()
    entries = read_cache(repo)
    entry = entries[str(repo / "verify.toml")]
    entry["translations"] = {"src/**/*.py": "not a pair"}
    write_cache(repo, entries)
    result = probe(repo)
    assert result["selected"] == ["lint"]
    assert result["pathspec"] is True  # recomputed, not guessed


def test_translations_from_another_pathspec_are_recomputed(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    load_contract()
    entries = read_cache(repo)
    entries[str(repo / "verify.toml")]["pathspec"] = "some other pathspec"
    write_cache(repo, entries)
    result = probe(repo)
    assert result == {"selected": ["lint"], "timeout": 300.0, "tomllib": False,
                      "pathspec": True}
    assert probe(repo)["pathspec"] is False  # and stored again for the installed one


def test_a_contract_with_toml_dates_loads_and_is_not_cached(repo: Path) -> None:
    write(repo / "pyproject.toml", 'released = 2026-01-02\n\n[tool.verifygate]\n'
          '[[tool.verifygate.gate]]\nname = "lint"\ncommand = "true"\n')
    assert [gate.name for gate in load_contract().gates] == ["lint"]
    assert [gate.name for gate in load_contract().gates] == ["lint"]
    assert not cache_file(repo).exists()


def test_an_unwritable_state_directory_costs_nothing_but_the_cache(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    write(repo / "verify.toml", CONTRACT)
    blocker = cache_file(repo).parent
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a file where the cache directory would be\n", encoding="utf-8")
    assert probe(repo)["selected"] == ["lint"]
    assert probe(repo)["tomllib"] is True


def test_the_cache_keeps_a_bounded_number_of_contracts(repo: Path) -> None:
    for index in range(MAX_ENTRIES + 3):
        path = write(repo / f"c{index}.toml", f'[[gate]]\nname = "g{index}"\ncommand = "true"\n')
        load_contract(path)
    entries = read_cache(repo)
    assert len(entries) == MAX_ENTRIES
    assert str(repo / f"c{MAX_ENTRIES + 2}.toml") in entries
    assert str(repo / "c0.toml") not in entries


def test_a_cache_from_another_python_or_format_is_not_read(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    load_contract()
    entries = read_cache(repo)
    cache_file(repo).write_bytes(sealed_payload(marshal.dumps(("some older format", entries))))
    assert probe(repo)["tomllib"] is True
    cache_file(repo).write_bytes(b"\x00not marshal at all")
    assert probe(repo)["tomllib"] is True
    assert probe(repo)["tomllib"] is False  # rewritten by the runs above


def test_damaged_entries_are_parsed_and_translated_again(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    load_contract()
    entries = read_cache(repo)
    entry = entries[str(repo / "verify.toml")]
    entry["translations"] = {pattern: ["(", True] for pattern in entry["translations"]}
    write_cache(repo, entries)
    assert probe(repo)["selected"] == ["lint"]  # not a re.error traceback
    entry["data"] = ["not", "a", "table"]
    write_cache(repo, entries)
    assert probe(repo) == {"selected": ["lint"], "timeout": 300.0, "tomllib": True,
                           "pathspec": True}


def test_outside_a_git_repository_nothing_is_cached(tmp_path: Path) -> None:
    project = tmp_path / "plain"
    write(project / "verify.toml", CONTRACT)
    assert [gate.name for gate in load_contract(project / "verify.toml").gates] == ["lint",
                                                                                    "docs"]
    assert cache_path(project) is None


def test_a_pyproject_contract_found_by_discovery_is_not_parsed_again(repo: Path) -> None:
    write(repo / "pyproject.toml", '[project]\nname = "x"\n\n[tool.verifygate]\n'
          '[[tool.verifygate.gate]]\nname = "lint"\ncommand = "true"\n'
          'when_changed = ["src/**/*.py"]\n')
    assert probe(repo)["tomllib"] is True
    assert probe(repo) == {"selected": ["lint"], "timeout": 300.0, "tomllib": False,
                           "pathspec": False}


def test_a_broken_pyproject_found_by_discovery_is_a_contract_error(repo: Path) -> None:
    write(repo / "pyproject.toml", f"[tool.verifygate]\nbig = {'9' * 5000}\n")
    with pytest.raises(ContractError, match=r"pyproject\.toml.*is not valid TOML"):
        load_contract()


def test_the_cache_is_private_to_the_user_and_never_under_git(repo: Path) -> None:
    """The parse decides which commands run: only this user can write where it is kept."""
    write(repo / "verify.toml", CONTRACT)
    legacy = write(state_dir(repo) / LEGACY_FILE_NAME, "left by an older version\n")
    load_contract()
    path = cache_file(repo)
    assert not path.is_relative_to(repo)
    assert os.stat(path.parent.parent).st_mode & 0o777 == 0o700
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert not legacy.exists()  # never read, and removed once a new cache is written
