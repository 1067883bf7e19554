"""No secret leaves in clear, whatever a sink strips or cuts after masking.

Every sink cleans gate output in its own way (the digest and annotations strip ANSI and control
characters, JUnit drops what XML cannot hold, a terminal hides zero-width characters), and a
cut output starts wherever the window fell. Each test reads what a person or a program would
see (``visible``) and looks for the secret there.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from pytest_verifygate.report.redact import MASK, Redactor, redactor_for
from pytest_verifygate.text import plain_output, strip_ansi, terminal_safe

from .support import PY, verifygate
from conftest import commit_all, write

TOKEN = "ghp_SplitTokenValue0123456789"
PEM = ("-----BEGIN PRIVATE KEY-----\n"
       "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
       "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"
       "-----END PRIVATE KEY-----\n")
PASSWORD = 'pa ss/wo"rd+&=?\u00e9'  # changes under JSON and URL encoding
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
# Unicode's default-ignorable code points (DerivedCoreProperties.txt): renderers and terminals
# draw them as nothing (variation selectors, tag characters, Hangul fillers, joiners, ...).
DEFAULT_IGNORABLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
                     (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
                     (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
                     (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
                     (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))
INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f"
                       + "".join(f"{chr(low)}-{chr(high)}" for low, high in DEFAULT_IGNORABLE)
                       + "]")


def visible(text: str) -> str:
    """What any sink could make of ``text``: no escape sequences, no invisible characters."""
    return INVISIBLE.sub("", ANSI.sub("", text))


# What a sink strips: colour codes, NUL, zero-width and bidi characters, OSC links, C1 controls,
# and what a terminal draws as nothing: variation selectors, tag characters, Hangul fillers.
NOISE = ["\x1b[0m", "\x00", "\u200b", "\x1b[31;1m", "\u202e", "\x1b]8;;x\x07", "\r", "\x85",
         "\ufe0f", "\U000e0041", "\u3164"]

# Only what a terminal draws as nothing: no sink removes these, so a secret split by them
# reaches every sink as it was printed.
DRAWN_AS_NOTHING = ["\ufe0f", "\U000e0041", "\u3164", "\u034f", "\u180b", "\uffa0", "\u00ad"]


def interleave(secret: str) -> str:
    """``secret`` with colour codes, NULs and zero-width characters between its characters."""
    noise = NOISE
    return "".join(char + noise[index % len(noise)] for index, char in enumerate(secret))


def json_escaped(secret: str) -> str:
    return json.dumps(secret)[1:-1]


def url_encoded(secret: str) -> str:
    from urllib.parse import quote

    return quote(secret, safe="")


def assert_hidden(text: str, *secrets: str) -> None:
    shown = visible(text)
    for secret in secrets:
        assert secret not in shown, f"{secret!r} leaked"
        for line in secret.splitlines():
            if len(line.strip()) >= 8:
                assert line.strip() not in shown, f"a line of a secret leaked: {line!r}"


PRINTER = f"""
import json, os, sys
from urllib.parse import quote
env = os.environ
token, pem, password = env["API_TOKEN"], env["TLS_PRIVATE_KEY"], env["DB_PASSWORD"]
noise = {NOISE!r}
split = "".join(c + noise[i % len(noise)] for i, c in enumerate(token))
sys.stdout.write("error: bad token " + split + "\\n")
nothing = {DRAWN_AS_NOTHING!r}
unseen = "".join(c + nothing[i % len(nothing)] for i, c in enumerate(token))
sys.stdout.write("error: unseen token " + unseen + "\\n")
sys.stdout.write(pem.replace("\\n", "\\r\\n"))
sys.stdout.write("error: " + json.dumps({{"password": password}}) + "\\n")
sys.stdout.write("error: GET https://db/?p=" + quote(password, safe="") + "\\n")
sys.exit(1)
"""


def secret_environment() -> dict[str, str]:
    return {"API_TOKEN": TOKEN, "TLS_PRIVATE_KEY": PEM, "DB_PASSWORD": PASSWORD}


def test_split_multiline_and_encoded_secrets_reach_no_sink(repo: Path, tmp_path: Path) -> None:
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
    for sink in (done.stdout.decode(), done.stderr.decode(), report.read_text(),
                 json.dumps(json.loads(report.read_text()), ensure_ascii=False),
                 junit.read_text(), summary.read_text()):
        assert_hidden(sink, TOKEN, PEM, PASSWORD, json_escaped(PASSWORD),
                      url_encoded(PASSWORD))
    text = verifygate("run", "--all", cwd=repo, env=secret_environment())
    assert_hidden(text.stdout.decode() + text.stderr.decode(), TOKEN, PEM, PASSWORD)


def test_the_pytest_failure_text_hides_split_secrets(pytester: pytest.Pytester,
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


@pytest.mark.parametrize(("split", "cut_into"), [("", 0), ("\x1b[0m", 2)],
                         ids=["in-the-secret", "in-an-escape-splitting-it"])
def test_a_secret_cut_by_the_tail_window_is_masked(repo: Path, split: str, cut_into: int) -> None:
    """The tail starts inside the secret, or inside an escape sequence splitting it (what is
    left of the sequence, ``0m``, reads as text): what is left of the secret is still one."""
    cut_at = 11
    tail = 256  # output_tail_bytes's minimum
    left = (split + TOKEN[cut_at:])[cut_into:]
    script = (f"import os, sys; t = os.environ['API_TOKEN']; sys.stdout.write('x' * 5000 + "
              f"t[:{cut_at}] + {split!r} + t[{cut_at}:] + '\\n' + "
              f"'y' * {tail - len(left) - 2} + '\\n'); sys.exit(1)")
    write(repo / "verify.toml", f'[settings]\noutput_tail_bytes = {tail}\n\n[[gate]]\n'
          f'name = "cut"\ncommand = [{json.dumps(PY)}, "-c", {json.dumps(script)}]\n')
    done = verifygate("run", "--all", "--format", "json", cwd=repo, env={"API_TOKEN": TOKEN})
    gate = json.loads(done.stdout)["gates"][0]
    assert gate["output_truncated"] is True
    assert gate["output_tail"].startswith(MASK + "\n"), gate["output_tail"][:60]
    for sink in (terminal_safe, strip_ansi, visible):
        assert TOKEN[cut_at:] not in sink(gate["output_tail"])


def test_a_cached_pass_never_shows_a_rotated_token(repo: Path) -> None:
    """The cache stores masked output: after the token changes, the old one is unknown to
    the redactor, so only masking at store time keeps it out of a cached rerun."""
    script = "import os; print('deploying with', os.environ['API_TOKEN'])"
    write(repo / "verify.toml", f'[[gate]]\nname = "deploy"\ncache = true\n'
          f'command = [{json.dumps(PY)}, "-c", {json.dumps(script)}]\n')
    commit_all(repo)
    first = verifygate("run", "--all", "--format", "json", cwd=repo, env={"API_TOKEN": TOKEN})
    assert json.loads(first.stdout)["gates"][0]["cached"] is False
    stored = list((repo / ".git" / "verifygate" / "cache").glob("*.json"))
    assert stored and all(TOKEN not in path.read_text() for path in stored)
    rotated = verifygate("run", "--all", "--format", "json", cwd=repo,
                         env={"API_TOKEN": "ghp_RotatedTokenValue987654"})
    gate = json.loads(rotated.stdout)["gates"][0]
    assert gate["cached"] is True
    assert TOKEN not in gate["output_tail"] and MASK in gate["output_tail"]


# --------------------------------------------------------------------------------------------
# the redactor itself


def test_secrets_split_by_anything_a_sink_strips_are_masked() -> None:
    redactor = redactor_for((), {"API_TOKEN": TOKEN})
    for form in (interleave(TOKEN), TOKEN.replace("Token", "To\x1b[0mken"),
                 TOKEN[:5] + "\x00\x00" + TOKEN[5:]):
        masked = redactor.text(f"token: {form} end")
        assert visible(masked) == f"token: {MASK} end", repr(masked)


def test_secrets_split_by_any_default_ignorable_character_are_masked_whole() -> None:
    """A terminal draws none of these, so the secret reads whole: masked, with what splits it,
    in a report and in a log."""
    redactor = redactor_for((), {"API_TOKEN": TOKEN})
    for low, high in DEFAULT_IGNORABLE:
        for char in map(chr, range(low, high + 1)):
            printed = f"token: {TOKEN[:4]}{char}{TOKEN[4:9]}{char * 2}{TOKEN[9:]} end"
            assert redactor.text(printed) == f"token: {MASK} end", hex(ord(char))
            masker = redactor.log_masker()
            logged = masker.feed(printed.encode()) + masker.flush()
            assert logged == f"token: {MASK} end".encode(), hex(ord(char))


@pytest.mark.parametrize("sequence", ["\x1b[0m", "\x1b[38;5;208m", "\x1b]8;;https://x.invalid/\x07",
                                      "\x1b]0;title\x1b\\", "\x1bc", "\x1b(B"])
def test_a_cut_inside_an_escape_sequence_splitting_a_secret_masks_its_end(sequence: str) -> None:
    """What the cut left of the sequence (``[0m``, ``0m``, ``m``) reads as text to every sink,
    right before the end of the secret: that end is masked all the same."""
    redactor = redactor_for((), {"API_TOKEN": TOKEN})
    split_at = 11
    printed = f"{TOKEN[:split_at]}{sequence}{TOKEN[split_at:]}\nrest\n"
    for cut in range(split_at + 1, split_at + len(sequence)):
        masked = redactor.text(printed[cut:], cut=True)
        for sink in (terminal_safe, strip_ansi, plain_output, visible):
            shown = sink(masked)
            assert TOKEN[split_at:] not in shown, (printed[cut:], shown)
            assert shown.startswith(MASK) and shown.endswith("\nrest\n"), (printed[cut:], shown)


def test_a_split_assignment_loses_its_value() -> None:
    redactor = redactor_for((), {})
    masked = redactor.text("export DEPLOY_TO\x1b[0mKEN=abc123def456 done")
    assert "abc123def456" not in visible(masked)
    assert visible(masked).endswith(" done")


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


def test_a_cut_start_masks_a_long_enough_end_of_a_secret_only() -> None:
    redactor = Redactor(values=(TOKEN,))
    assert redactor.text(TOKEN[-8:] + " rest", cut=True) == f"{MASK} rest"
    assert redactor.text(TOKEN[-8:] + " rest") == TOKEN[-8:] + " rest"  # output's real start
    assert redactor.text(TOKEN[-4:] + " rest", cut=True) == TOKEN[-4:] + " rest"  # too short


def test_the_log_masker_masks_secrets_split_across_chunks() -> None:
    redactor = redactor_for((), {"API_TOKEN": TOKEN, "TLS_PRIVATE_KEY": PEM})
    data = (b"start\n" + interleave(TOKEN).encode() + b"\n" + PEM.encode()
            + b"\xff\xfe binary API_TOKEN=" + TOKEN.encode() + b" end\n")
    for size in (1, 2, 3, 7, 64, len(data)):
        masker = redactor.log_masker()
        out = b"".join(masker.feed(data[i:i + size]) for i in range(0, len(data), size))
        out += masker.flush()
        text = out.decode("utf-8", "surrogateescape")
        assert_hidden(text, TOKEN, PEM)
        assert text.startswith("start\n") and text.endswith(" end\n")
        assert b"\xff\xfe binary" in out  # bytes that are not UTF-8 pass through unchanged


def test_the_log_masker_passes_output_without_secrets_through_unchanged() -> None:
    masker = redactor_for((), {"API_TOKEN": TOKEN}).log_masker()
    data = bytes(range(256)) * 64 + b"plain=value\n" * 100
    out = b"".join(masker.feed(data[i:i + 1000]) for i in range(0, len(data), 1000))
    assert out + masker.flush() == data


def test_cache_entries_are_private_to_the_user(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "ok"\ncache = true\ncommand = "true"\n')
    commit_all(repo)
    assert verifygate("run", "--all", cwd=repo).returncode == 0
    directory = repo / ".git" / "verifygate" / "cache"
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    stored = list(directory.glob("*.json"))
    assert stored and all(stat.S_IMODE(os.stat(path).st_mode) == 0o600 for path in stored)


# --------------------------------------------------------------------------------------------
# lines that write over themselves


def overwritten(secret: str) -> list[str]:
    """Lines a terminal shows as ``secret`` though none of their pieces holds it."""
    half = len(secret) // 2
    return [secret[:half] + "x\b" + secret[half:],  # a backspace, then the rest over the x
            secret[:half] + "x\x1b[D" + secret[half:],  # the cursor moved back instead
            "z" * half + secret[half:] + "\r" + secret[:half],  # the start written last
            "q" * half + secret[half:] + "\x1b[1G" + secret[:half]]  # back to column 1


def test_a_secret_put_together_by_overwriting_is_masked() -> None:
    from pytest_verifygate.report.overwrites import rendered

    redactor = redactor_for((), {"API_TOKEN": TOKEN})
    for line in overwritten(TOKEN):
        assert rendered(line) == TOKEN  # what a terminal shows
        assert redactor.text(f"before\n{line}\nafter\n") == f"before\n{MASK}\nafter\n"
        masker = redactor.log_masker()
        data = f"before\n{line}\nafter\n".encode()
        logged = b"".join(masker.feed(data[i:i + 5]) for i in range(0, len(data), 5))
        assert logged + masker.flush() == f"before\n{MASK}\nafter\n".encode()


def test_progress_bars_that_show_no_secret_are_left_alone() -> None:
    redactor = redactor_for((), {"API_TOKEN": TOKEN})
    bar = "".join(f"\rdownloading {n:3d}%" for n in range(0, 101, 5)) + "\n"
    assert redactor.text(bar) == bar
    assert redactor.text("TOKEN list\rTOKEN list loaded\n") == "TOKEN list\rTOKEN list loaded\n"


def test_a_secret_with_every_character_escaped_is_masked() -> None:
    """Percent-encoding every byte, or ``\\u``-escaping every character: any URL or JSON
    decoder gives the secret back."""
    redactor = redactor_for((), {"API_TOKEN": TOKEN})
    for hex_case in ("x", "X"):
        url = "".join(f"%{byte:02{hex_case}}" for byte in TOKEN.encode())
        json_form = "".join(f"\\u{ord(char):04{hex_case}}" for char in TOKEN)
        for form in (url, json_form):
            assert redactor.text(f"GET /?t={form} done") == f"GET /?t={MASK} done"


def test_rendering_a_line_that_moves_the_cursor_stays_bounded() -> None:
    from pytest_verifygate.report.overwrites import MAX_COLUMN, rendered

    assert len(rendered("\x1b[4096C" * 1000 + "y")) == MAX_COLUMN + 1  # moves cannot pad on
    assert rendered("x" * 5000 + "\x1b[3Cy") == "x" * 5000 + "y"  # nor move a long line back
    assert rendered("ab\x1b[99999999999Dc") == "cb"
    assert rendered("abc\x1b[2K") == "   " and rendered("abc\rd\x1b[K") == "d"
