"""Helpers shared by the reliability tests: example budgets, process and fd probes, TOML text.

``VERIFYGATE_FUZZ=1`` (``make fuzz``) raises every property's example budget to at least
``FUZZ_EXAMPLES``; without it the budgets stay small so ``make test`` stays fast.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from datetime import time as clock_time
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from hypothesis import HealthCheck, settings

from pytest_verifygate.contract import load_contract
from pytest_verifygate.engine import RunResult, run_gates
from pytest_verifygate.git.changes import ChangeSet
from pytest_verifygate.report.document import load_schema
from pytest_verifygate.selection import select_gates

FUZZ = os.environ.get("VERIFYGATE_FUZZ", "") not in ("", "0")
FUZZ_EXAMPLES = 2000
PY = sys.executable


def examples(default: int) -> settings:
    """Hypothesis settings: ``default`` examples, or ``FUZZ_EXAMPLES`` under ``make fuzz``."""
    return settings(
        max_examples=max(default, FUZZ_EXAMPLES) if FUZZ else default,
        # Two shared cores: wall-clock deadlines would only measure the neighbours.
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.filter_too_much],
    )


# --------------------------------------------------------------------------------------------
# processes and file descriptors


def process_state(pid: int) -> str | None:
    """The one-letter state from /proc (``Z`` for a zombie), or None when the pid is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def alive(pid: int) -> bool:
    """A process exists and is not a zombie waiting to be reaped."""
    state = process_state(pid)
    return state is not None and state != "Z"


def wait_dead(pids: Iterable[int], seconds: float = 5.0) -> list[int]:
    """Wait until none of ``pids`` is alive; return the ones still alive after ``seconds``."""
    pids = list(pids)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(alive(pid) for pid in pids):
            return []
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def children_of(parent: int) -> list[tuple[int, str]]:
    """Direct children of ``parent`` (pid, state), zombies included."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == parent:
            found.append((int(entry), fields[0]))
    return found


def open_fds() -> dict[str, str]:
    """This process's open file descriptors and what they point at."""
    fds = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the descriptor os.listdir itself used, closed by now
    return fds


def marked(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker`` (a gate's ``env`` sets it: whatever
    the gate does with its process group or its parents, its processes keep it)."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ and alive(int(entry)):
            found.append(int(entry))
    return found


def wait_unmarked(marker: str, seconds: float = 5.0) -> list[int]:
    """Wait until no live process carries ``marker``; return those still alive after
    ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not marked(marker):
            return []
        time.sleep(0.05)
    return marked(marker)


def kill_all(pids: Iterable[int]) -> None:
    """Clean up after a failing test: no test leaves a process behind, even a broken one."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def read_pids(directory: Path) -> list[int]:
    """Every pid written (one per line) to the files in ``directory``."""
    pids: list[int] = []
    for path in sorted(directory.glob("*")):
        pids.extend(int(line) for line in path.read_text().split() if line.strip())
    return pids


# --------------------------------------------------------------------------------------------
# running and reports


def run_contract(root: Path, text: str, changes: ChangeSet | None = None,
                 **kwargs: Any) -> RunResult:
    """Write ``verify.toml`` and run every gate it selects, in this process."""
    (root / "verify.toml").write_text(text, encoding="utf-8")
    contract = load_contract(root / "verify.toml")
    changes = changes or ChangeSet("all")
    return run_gates(contract, select_gates(contract, changes), changes, **kwargs)


def validate(report: Mapping[str, Any]) -> None:
    """The report matches the shipped JSON Schema and survives a JSON round trip."""
    jsonschema.validate(report, load_schema())
    assert json.loads(json.dumps(report)) == report


# A gate command (array form) that prints its arguments NUL-separated, as hex, so any byte
# of a file name survives the trip through the report's UTF-8 output tail.
DUMP_ARGS_SCRIPT = "printf '%s\\0' \"$@\" | od -An -v -tx1"


def decode_dump(output: str) -> list[bytes]:
    """The arguments printed by ``DUMP_ARGS_SCRIPT``."""
    raw = bytes.fromhex("".join(output.split()))
    assert raw.endswith(b"\0") or not raw, output
    return raw.split(b"\0")[:-1]


# --------------------------------------------------------------------------------------------
# TOML text


def toml_string(value: str) -> str:
    """A TOML basic string; control characters and DEL escaped as TOML requires."""
    out = ['"']
    for char in value:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def toml_key(key: str) -> str:
    bare = key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
    return key if bare else toml_string(key)


def toml_value(value: object) -> str:
    """Any value hypothesis builds, as inline TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (datetime, date, clock_time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))


def toml_document(data: Mapping[str, object]) -> str:
    """A TOML document: dict values become ``[table]`` / ``[[array]]`` sections, the rest
    inline, so both the header forms and the inline forms are exercised."""
    lines = []
    sections = []
    for key, value in data.items():
        if isinstance(value, dict):
            sections.append(f"[{toml_key(key)}]")
            sections.extend(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items())
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for table in value:
                assert isinstance(table, dict)
                sections.append(f"[[{toml_key(key)}]]")
                sections.extend(f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items())
        else:
            lines.append(f"{toml_key(key)} = {toml_value(value)}")
    return "\n".join(lines + sections) + "\n"
