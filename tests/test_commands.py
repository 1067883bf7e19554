"""Splitting commands like sh without a shell, env prefixes, {files} expansion and chunking."""

from __future__ import annotations

import subprocess

import pytest

from pytest_verifygate.commands import (
    UnsupportedCommand,
    command_text,
    expand,
    parse_command,
    shell_words,
)


@pytest.mark.parametrize(
    ("command", "words", "env"),
    [
        ("ruff check src", ("ruff", "check", "src"), {}),
        ('grep -E "a|b" file', ("grep", "-E", "a|b", "file"), {}),
        ("echo 'a && b' \"c;d\"", ("echo", "a && b", "c;d"), {}),
        ('FOO="a b" BAR=1 prog --x=1', ("prog", "--x=1"), {"FOO": "a b", "BAR": "1"}),
        ("prog FOO=1", ("prog", "FOO=1"), {}),
        ("'FOO=1' prog", ("FOO=1", "prog"), {}),
        (r"echo a\ b \$HOME", ("echo", "a b", "$HOME"), {}),
        ('echo "a\\"b" "\\$x"', ("echo", 'a"b', "$x"), {}),
        ("echo it''s", ("echo", "its"), {}),
        ("[ -f dist/x ]", ("[", "-f", "dist/x", "]"), {}),
        ("echo a=b", ("echo", "a=b"), {}),
        ("echo 'it''s ~ # * ?'", ("echo", "its ~ # * ?"), {}),
        ("python -c 'print(1)'", ("python", "-c", "print(1)"), {}),
    ],
)
def test_split_like_sh(command: str, words: tuple[str, ...], env: dict[str, str]) -> None:
    parsed = parse_command(command, shell=False)
    assert parsed.words == words
    assert dict(parsed.env) == env


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("a | b", "'|'"),
        ("a || b", "'||'"),
        ("a && b", "'&&'"),
        ("a; b", "';'"),
        ("a &", "'&'"),
        ("a > out", "'>'"),
        ("a < in", "'<'"),
        ("echo $(date)", "'$('"),
        ('echo "$(date)"', "'$('"),
        ("echo `date`", "'`'"),
        ("echo $HOME", "'$HOME'"),
        ('echo "${HOME}"', "'${'"),
        ("ls *.py", "unquoted glob"),
        ("ls src/[ab].py", "unquoted glob"),
        ("ls ~/x", "home-directory"),
        ("prog # comment", "comment"),
        ("cd sub", "shell builtin"),
        ("echo 'open", "unterminated single quote"),
        ('echo "open', "unterminated double quote"),
        ("A=1", "no program"),
        ("   ", "no program"),
    ],
)
def test_shell_syntax_is_unsupported_without_a_shell(command: str, message: str) -> None:
    with pytest.raises(UnsupportedCommand, match=message.replace("$", r"\$").replace("(", r"\(")
                       .replace("[", r"\[").replace("|", r"\|").replace("*", r"\*")):
        parse_command(command, shell=False)


@pytest.mark.slow
def test_the_split_matches_what_sh_would_pass() -> None:
    command = """printf '%s\\n' "a b" 'c d' e\\ f "g\\\\h" 'i"j' "k'l" """
    parsed = parse_command(command, shell=False)
    real = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert list(parsed.words[2:]) == real.stdout.splitlines()


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("ruff check 'src dir'", ["ruff", "check", "src dir"]),
        # Read for display, not run: what parse_command refuses is kept as plain words.
        ("a | b $HOME *.py", ["a", "|", "b", "$HOME", "*.py"]),
        ("echo 'unterminated", None),
    ],
)
def test_shell_words_read_any_command_leniently(command: str, words: list[str] | None) -> None:
    assert shell_words(command) == words


@pytest.mark.slow
def test_command_text_is_what_sh_reads_back() -> None:
    argv = ["printf", "%s\\n", "a b", "it's", "$HOME", ""]
    text = command_text(argv)
    real = subprocess.run(["sh", "-c", text], capture_output=True, text=True, check=True)
    assert real.stdout.split("\n")[:-1] == argv[2:]
    assert shell_words(text) == argv
    assert command_text("echo a | b") == "echo a | b"  # a shell gate's script, as written


def test_files_expand_in_place_as_separate_arguments() -> None:
    parsed = parse_command("ruff check {files} --fix", shell=False)
    assert parsed.uses_files
    assert expand(parsed, ["a b.py", "c.py"]) == [["ruff", "check", "a b.py", "c.py", "--fix"]]
    quoted = parse_command("echo '{files}'", shell=False)
    assert quoted.uses_files  # the quoted word is still the whole word {files}
    partial = parse_command("echo --files={files}", shell=False)
    assert not partial.uses_files
    assert expand(partial, ["x"]) == [["echo", "--files={files}"]]


def test_array_form_is_taken_verbatim() -> None:
    parsed = parse_command(["python", "-c", "import sys; print(sys.argv)", "{files}"], shell=False)
    assert parsed.words[2] == "import sys; print(sys.argv)"
    assert expand(parsed, ["a|b"]) == [["python", "-c", "import sys; print(sys.argv)", "a|b"]]


@pytest.mark.slow
def test_shell_files_are_quoted_for_sh(tmp_path: object) -> None:
    parsed = parse_command("printf '%s\\n' {files} | cat", shell=True)
    names = ["$(touch pwned)", "a;b", "`x`", "it's", 'q"q', "new\nline"]
    (argv,) = expand(parsed, names)
    assert argv[:2] == ["/bin/sh", "-c"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=str(tmp_path))
    assert out.stdout == "".join(f"{name}\n" for name in names)


def test_long_file_lists_are_chunked() -> None:
    parsed = parse_command("echo {files}", shell=False)
    files = [f"dir/{'x' * 200}{index}.py" for index in range(30_000)]
    chunks = expand(parsed, files)
    assert len(chunks) > 1
    assert [name for chunk in chunks for name in chunk[1:]] == files
    shell_chunks = expand(parse_command("echo {files}", shell=True), files[:2000])
    assert len(shell_chunks) > 1
    assert all(len(chunk[2].encode()) < 128 * 1024 for chunk in shell_chunks)
