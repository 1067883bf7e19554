"""No secret leaves in clear: output is masked once, as it is captured, and every sink is made
from the masked stream.

What is masked: the exact value of a secret variable, with either line ending, JSON-escaped
and URL-encoded, each long line of a multi-line value, and ``NAME=value`` for a secret name.
What is not (a secret split by escape sequences, drawn by overwriting, transformed on purpose)
is the README's security model.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pytest_verifygate.report.redact import MASK, redactor_for
from pytest_verifygate.result_cache import cache_dir

from .support import PY
from conftest import commit_all, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

TOKEN = "ghp_SplitTokenValue0123456789"
PEM = ("-----BEGIN PRIVATE KEY-----\n"
       "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
       "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"
       "-----END PRIVATE KEY-----\n")
PASSWORD = 'pa ss/wo"rd+&=?\u00e9'  # changes under JSON and URL encoding


def json_escaped(secret: str) -> str:
    return json.dumps(secret)[1:-1]


def url_encoded(secret: str) -> str:
    from urllib.parse import quote

    return quote(secret, safe="")


def assert_hidden(shown: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in shown, f"{secret!r} leaked"
        for line in secret.splitlines():
            if len(line.strip()) >= 8:
                assert line.strip() not in shown, f"a line of a secret leaked: {line!r}"


PRINTER = """
import json, os, sys
from urllib.parse import quote
env = os.environ
token, pem, password = env["API_TOKEN"], env["TLS_PRIVATE_KEY"], env["DB_PASSWORD"]
sys.stdout.write("error: bad token " + token + "\\n")
sys.stdout.write(pem.replace("\\n", "\\r\\n"))
sys.stdout.write("error: " + json.dumps({"password": password}) + "\\n")
sys.stdout.write("error: GET https://db/?p=" + quote(password, safe="") + "\\n")
sys.exit(1)
"""


def secret_environment() -> dict[str, str]:
    return {"API_TOKEN": TOKEN, "TLS_PRIVATE_KEY": PEM, "DB_PASSWORD": PASSWORD}


def test_multiline_and_encoded_secrets_reach_no_sink(repo: Path, tmp_path: Path) -> None:
    write(repo / "verify.toml", f'[[gate]]\nname = "leak"\n'
          f'command = [{json.dumps(PY)}, "-c", {json.dumps(PRINTER)}]\n')
    summary = tmp_path / "summary.md"
    env = {**secret_environment(), "GITHUB_ACTIONS": "true",
           "GITHUB_STEP_SUMMARY": str(summary)}
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    done = verifygate("run", "--all", "--json", str(report), "--junit", str(junit),
                      "--format", "agent", cwd=repo, env=env)
    assert done.returncode == 1, done.stderr
    raw = json.loads(report.read_text())["gates"][0]
    assert "bad token" in raw["output_tail"] and MASK in raw["output_tail"]
    for sink in (done.stdout, done.stderr, report.read_text(),
                 json.dumps(json.loads(report.read_text()), ensure_ascii=False),
                 junit.read_text(), summary.read_text()):
        assert_hidden(sink, TOKEN, PEM, PASSWORD, json_escaped(PASSWORD),
                      url_encoded(PASSWORD))
    text = verifygate("run", "--all", cwd=repo, env=secret_environment())
    assert_hidden(text.stdout + text.stderr, TOKEN, PEM, PASSWORD)


def test_the_pytest_failure_text_hides_secrets(pytester: pytest.Pytester,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in secret_environment().items():
        monkeypatch.setenv(name, value)
    pytester.makefile(".toml", verify=f'[[gate]]\nname = "leak"\n'
                      f'command = [{json.dumps(PY)}, "-c", {json.dumps(PRINTER)}]\n')
    result = pytester.runpytest_subprocess("--verify-contract", "-p", "no:cacheprovider",
                                           "-vv", "--junitxml=junit.xml")
    assert result.ret == 1
    assert_hidden(result.stdout.str() + result.stderr.str(), TOKEN, PEM, PASSWORD)
    assert_hidden((pytester.path / "junit.xml").read_text(), TOKEN, PEM, PASSWORD)


def test_a_tail_window_is_cut_from_the_masked_stream(repo: Path) -> None:
    """The report keeps the end of the output: where the window would have started inside the
    secret as printed, it starts in the masked stream, which holds no part of it."""
    tail = 256  # output_tail_bytes's minimum
    script = (f"import os, sys; t = os.environ['API_TOKEN']; sys.stdout.write('x' * 5000 + "
              f"t + '\\n' + 'y' * {tail - 10} + '\\n'); sys.exit(1)")
    write(repo / "verify.toml", f'[settings]\noutput_tail_bytes = {tail}\n\n[[gate]]\n'
          f'name = "cut"\ncommand = [{json.dumps(PY)}, "-c", {json.dumps(script)}]\n')
    done = verifygate("run", "--all", "--format", "json", cwd=repo, env={"API_TOKEN": TOKEN})
    gate = json.loads(done.stdout)["gates"][0]
    assert gate["output_truncated"] is True
    assert gate["output_tail"].startswith("x") and MASK + "\n" in gate["output_tail"]
    assert not any(TOKEN[cut:] in gate["output_tail"] for cut in range(len(TOKEN) - 3))


def test_a_cached_pass_never_shows_a_rotated_token(repo: Path) -> None:
    """The cache stores masked output: after the token changes, the old one is unknown to
    the redactor, so only masking at store time keeps it out of a cached rerun."""
    script = "import os; print('deploying with', os.environ['API_TOKEN'])"
    write(repo / "verify.toml", f'[[gate]]\nname = "deploy"\ncache = true\n'
          f'command = [{json.dumps(PY)}, "-c", {json.dumps(script)}]\n')
    commit_all(repo)
    first = verifygate("run", "--all", "--format", "json", cwd=repo, env={"API_TOKEN": TOKEN})
    assert json.loads(first.stdout)["gates"][0]["cached"] is False
    directory = cache_dir(repo)
    assert directory is not None
    stored = list(directory.glob("*.json"))
    assert stored and all(TOKEN not in path.read_text() for path in stored)
    rotated = verifygate("run", "--all", "--format", "json", cwd=repo,
                         env={"API_TOKEN": "ghp_RotatedTokenValue987654"})
    gate = json.loads(rotated.stdout)["gates"][0]
    assert gate["cached"] is True
    assert TOKEN not in gate["output_tail"] and MASK in gate["output_tail"]


# --------------------------------------------------------------------------------------------
# the redactor itself


def test_multiline_secrets_are_masked_whole_with_either_line_ending_and_line_by_line() -> None:
    redactor = redactor_for((), {"TLS_PRIVATE_KEY": PEM.replace("\n", "\r\n")})
    for printed in (PEM, PEM.replace("\n", "\r\n"), "  > " + PEM.splitlines()[1] + "\n"):
        assert_hidden(redactor.text(printed), PEM)


def test_json_escaped_and_url_encoded_forms_are_masked() -> None:
    redactor = redactor_for((), {"DB_PASSWORD": PASSWORD})
    from urllib.parse import quote_plus

    for form in (json_escaped(PASSWORD), json.dumps(PASSWORD, ensure_ascii=False)[1:-1],
                 url_encoded(PASSWORD), url_encoded(PASSWORD).lower(), quote_plus(PASSWORD)):
        assert form not in redactor.text(f"value={form}!"), form


def test_the_stream_masker_masks_secrets_split_across_chunks() -> None:
    redactor = redactor_for((), {"API_TOKEN": TOKEN, "TLS_PRIVATE_KEY": PEM})
    data = (b"start\n" + TOKEN.encode() + b"\n" + PEM.encode()
            + b"\xff\xfe binary API_TOKEN=" + TOKEN.encode() + b" end\n")
    for size in (1, 2, 3, 7, 64, len(data)):
        masker = redactor.stream_masker()
        out = b"".join(masker.feed(data[i:i + size]) for i in range(0, len(data), size))
        out += masker.flush()
        text = out.decode("utf-8", "surrogateescape")
        assert_hidden(text, TOKEN, PEM)
        assert text.startswith("start\n") and text.endswith(" end\n")
        assert b"\xff\xfe binary" in out  # bytes that are not UTF-8 pass through unchanged


def test_a_secret_assignment_split_before_its_equals_sign_is_masked() -> None:
    """A chunk without ``=`` skips the name search; a secret name at its end still meets the
    ``=value`` of the next chunk, whatever the split."""
    value = b"not-a-known-value-12345"
    head = b"." * 3000 + b" DB_PASSWORD"
    data = head + b"=" + value + b"\n" + b"." * 3000
    for first in (len(head), len(head) - 3, len(head) + 1):
        for size in (1, 700, 5000):
            masker = redactor_for(()).stream_masker()
            rest = data[first:]
            out = masker.feed(data[:first]) + b"".join(
                masker.feed(rest[i:i + size]) for i in range(0, len(rest), size))
            out += masker.flush()
            assert value not in out and b"DB_PASSWORD=***\n" in out, (first, size)


def test_the_stream_masker_passes_output_without_secrets_through_unchanged() -> None:
    masker = redactor_for((), {"API_TOKEN": TOKEN}).stream_masker()
    data = bytes(range(256)) * 64 + b"plain=value\n" * 100
    out = b"".join(masker.feed(data[i:i + 1000]) for i in range(0, len(data), 1000))
    assert out + masker.flush() == data


def test_a_secret_name_split_across_reads_still_loses_its_value() -> None:
    """What is held back never starts inside a name: ``DEPLOY_TO`` passed on and ``KEN=...``
    held back would leave neither piece a secret name."""
    redactor = redactor_for((), {})
    rest = b"=abc123def456 done\n"
    for inside in range(1, len(b"DEPLOY_TOKEN")):
        # The hold-back (1,024 bytes here) would start ``inside`` bytes into the name.
        line = b"x " + b"DEPLOY_TOKEN" + rest + b"y" * (1024 - len(b"DEPLOY_TOKEN") - len(rest)
                                                       + inside)
        masker = redactor.stream_masker()
        out = masker.feed(line) + masker.flush()
        assert b"abc123def456" not in out and b"DEPLOY_TOKEN=***" in out, inside


def test_a_note_of_ours_follows_the_output_held_back_for_masking() -> None:
    from pytest_verifygate.runner.process import OutputSink

    sink = OutputSink(None, 4096, redactor_for((), {"API_TOKEN": TOKEN}).stream_masker())
    sink.write(b"output " + TOKEN.encode() + b"\n")
    sink.note("verifygate: a note\n")
    assert sink.text() == (f"output {MASK}\nverifygate: a note\n", False)


def test_cache_entries_are_private_to_the_user(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "ok"\ncache = true\ncommand = "true"\n')
    commit_all(repo)
    assert verifygate("run", "--all", cwd=repo).returncode == 0
    directory = cache_dir(repo)
    assert directory is not None
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    stored = list(directory.glob("*.json"))
    assert stored and all(stat.S_IMODE(os.stat(path).st_mode) == 0o600 for path in stored)
