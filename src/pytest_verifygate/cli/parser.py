"""The ``verifygate`` command line's argparse parser: every subcommand and its options, each
subcommand carried out by the ``main(args)`` of the module ``COMMANDS`` names.

PYTEST_DONT_REWRITE
"""

import argparse
from functools import partial
from typing import Any

from pytest_verifygate import __version__, option_checks
from pytest_verifygate.cli.exits import EXIT_USAGE, HOOK_USAGE_STATUS

COMMANDS = {"run": "run", "list": "listing", "agent-hook": "agent_hook", "merge": "merge",
            "install-agent-hook": "install_hook", "agent-status": "agent_status",
            "install-hook": "install_hook", "mcp": "mcp", "migrate": "migrate",
            "init": "init", "check": "check", "install": "install",
            "uninstall": "install", "completion": "completion"}
# The coding agents whose hook protocols ``agent-hook`` speaks (``agents.detect``).
AGENTS = ("claude", "codex", "cursor", "gemini")
ROLE_HELP = ("select the gates for role R (repeatable; default: $VERIFYGATE_ROLE, "
             "comma-separated); gates with roles run only for one of theirs")
_INSTALL_AGENT_HOOK = (
    "Add verifygate agent-hook to a coding agent's project configuration, keeping everything "
    "else in it. (verifygate install writes git hooks.)",
    "verifygate install-agent-hook --agent claude",
    "0 written or already there; 2 not a git repository, or a file that is not the agent's "
    "configuration")
# What completes a gate name, per shell: shtab puts each in the script where that shell wants an
# argument's candidates (``completion`` defines the functions). The names come from the contract
# found from the current directory at TAB time, one a line; bash and zsh quote them (a name
# may hold spaces).
GATE_NAMES = {
    "bash": "_verifygate_gate_names",
    "zsh": "_verifygate_gate_names",
    "fish": "(verifygate completion --gates 2>/dev/null)",
    "tcsh": "`verifygate completion --gates`",
}
_GIT_HOOKS_EXITS = "0 done; 2 not a git repository, or a hook in the way"
# Each subcommand, in the order --help lists them: its help line, description, example and
# exit statuses.
_TEXTS = {
    "run": ("run the selected gates",
            "Run the gates that apply to the change set (staged, since a ref, the files named, "
            "or all) and report the verdict. NAME... runs only those gates.",
            "verifygate run --changed-from origin/main lint",
            "0 passed, pending or unverified; 1 a gate failed; 2 contract or usage error; "
            "130 interrupted"),
    "list": ("show every gate, selected or not, and why",
             "Show every gate of the contract, whether run would start it and why; -v adds the "
             "argv run would spawn.", "verifygate list -v --staged",
             "0 listed; 2 contract or usage error"),
    "agent-hook": ("coding-agent Stop hook: block while gates fail",
                   "The Stop hook of Claude Code, Codex, Cursor and Gemini CLI: reads the agent's "
                   "payload on stdin and blocks the stop while gates fail, for at most "
                   "--max-rounds rounds.", "verifygate agent-hook --agent claude",
                   "0 the answer is on stdout (allow or block); 1 a usage error (the agent "
                   "shows it)"),
    "merge": ("one report from the reports of a run's shards",
              "Merge the JSON reports of a run's shards into one report (and JUnit).",
              "verifygate merge shard-*.json --json report.json",
              "0 merged verdict passed; 1 a gate failed; 2 a bad or missing report"),
    "install-agent-hook": ("add the agent hook to a coding agent's configuration",
                           *_INSTALL_AGENT_HOOK),
    "install-hook": ("deprecated name of install-agent-hook", *_INSTALL_AGENT_HOOK),
    "agent-status": ("exit 0 only if the agent hook's last stop was verified",
                     "Whether the agent hook's last stop in this repository was verified, for "
                     "callers of headless agent runs.",
                     "claude -p 'fix the tests' && verifygate agent-status",
                     "0 the last stop was verified (or --clear done); 1 it was not, or there is "
                     "none; 2 not a git repository"),
    "mcp": ("serve the gates as MCP tools over stdio",
            "Serve list_gates, run_gates and explain_failure as MCP tools over stdio (pip "
            "install 'pytest-verifygate[mcp]').", "verifygate mcp",
            "0 the client closed the session; 2 the MCP SDK is missing"),
    "install": ("write plain git hooks (pre-commit, pre-push) that run the gates",
                "Write git's pre-commit hook (verifygate run --staged) and pre-push hook (the "
                "pushed range) where git looks for hooks (core.hooksPath honoured), for teams "
                "without the pre-commit framework. Idempotent; a hook already there is kept and "
                "run first (NAME.verifygate-chained). The hooks run this Python by its path, so "
                "they work without the virtualenv on PATH. (install-agent-hook is the coding "
                "agents' installer.)", "verifygate install --hook pre-commit", _GIT_HOOKS_EXITS),
    "uninstall": ("remove the git hooks verifygate install wrote",
                  "Remove the hooks verifygate install wrote (no other) and put back the hooks "
                  "they chained to.", "verifygate uninstall --hook pre-commit", _GIT_HOOKS_EXITS),
    "check": ("check the setup before running: programs, patterns, hooks",
              "Report everything that can be known before running: programs not on PATH, shell "
              "syntax without shell = true, a cwd that does not exist, patterns and types that "
              "match no tracked file, two contracts (verify.toml and [tool.verifygate]), a "
              "misspelt [tool.verify-gate], a UTF-8 byte-order mark, and installed git, "
              "pre-commit and agent hooks whose command will not start.", "verifygate check",
              "0 the setup is sound (warnings may be printed); 1 an error was found"),
    "init": ("write a starter contract from the tools the project uses",
             "Write verify.toml for the project in the current "
             "directory: a gate per tool it already uses (ruff, black, flake8, mypy, pyright, "
             "pytest, sphinx, pre-commit, tox and nox environments), found in pyproject.toml, "
             "setup.cfg, tox.ini, noxfile.py and tool configs, run through uv/poetry/pdm/pipenv "
             "when a lock file says so. Never overwrites a contract.",
             "verifygate init && verifygate list --all",
             "0 written; 2 a contract exists already, or no tool was found"),
    "completion": ("print a shell completion script (bash, zsh, fish, tcsh)",
                   "Print the completion script of verifygate for a shell, made by shtab from "
                   "this parser (pip install 'pytest-verifygate[completion]'); it completes "
                   "subcommands, options and, after run and list, the contract's gate names.",
                   "verifygate completion bash > "
                   "~/.local/share/bash-completion/completions/verifygate\n\nexample: "
                   "verifygate completion fish > ~/.config/fish/completions/verifygate.fish",
                   "0 printed; 2 shtab is not installed"),
    "migrate": ("write a contract from .pre-commit-config.yaml or lefthook.yml",
                "Write verify.toml from a .pre-commit-config.yaml or lefthook.yml (or add to the "
                "contract beside it, as init wrote it): local hooks "
                "and well-known hook repositories become gates running the same programs over "
                "the same files; what does not carry over is listed, with what to do. Needs "
                "PyYAML (pip install 'pytest-verifygate[migrate]').",
                "verifygate migrate && verifygate run --all",
                "0 written; 2 nothing to migrate, a bad config, or the output exists"),
}


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line and a status chosen per subcommand."""

    error_status = EXIT_USAGE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:
        self.exit(self.error_status, f"verifygate: error: {message} (see verifygate --help)\n")


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, keeping paragraphs (description, example, exit statuses) apart,
    never breaking a line inside an option or a path (``--max-rounds``, ``bash-completion``)
    and never at all in an example: what a person copies is kept whole."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return "\n\n".join(
            indent + paragraph if paragraph.startswith("example: ") else textwrap.fill(
                " ".join(paragraph.split()), width, initial_indent=indent,
                subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)
            for paragraph in text.split("\n\n"))

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False,
                             break_long_words=False)


def build_parser(command: str | None = None) -> Parser:
    """The command line's parser; with ``command``, only that subcommand's (building the
    others is a noticeable share of a commit's start-up)."""
    parser = Parser(prog="verifygate", description="Run the verify contract's gates.")
    parser.add_argument("--version", action="version", version=f"verifygate {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    for name in _TEXTS if command is None else (command,):
        what, description, example, exits = _TEXTS[name]
        _add_options(name, commands.add_parser(
            name, help=what, description=description,
            epilog=f"example: {example}\n\nexit status: {exits}"))
    if command == "agent-hook":  # argparse reports stray arguments on the top-level parser
        parser.error_status = HOOK_USAGE_STATUS
    return parser


def _add_options(name: str, command: Parser) -> None:
    add = command.add_argument
    contract = partial(add, "--contract", metavar="PATH",
                       help="the contract file (default: found from the current directory up)")
    role = partial(add, "--role", metavar="R", action="append", help=ROLE_HELP)
    jobs = partial(add, "--jobs", type=option_checks.jobs, metavar="N",
                   help="gates run at once (0 = one per CPU; default from the contract)")
    # pytest's junit_family names: xunit2 (its default, valid against junit-10.xsd) has no
    # testcase properties.
    junit_family = partial(add, "--junit-family", choices=("xunit2", "xunit1"),
                           default="xunit2", help="the JUnit family, as pytest's junit_family: "
                           "xunit2 (default) or xunit1 (adds each gate's verifygate.* "
                           "properties)")
    if name in ("run", "list"):
        # shtab's attribute: the completion scripts offer the contract's gate names here.
        add("names", nargs="*", metavar="NAME",
            help="only these gates (as pre-commit run ID); default: every gate"
            ).complete = GATE_NAMES  # type: ignore[attr-defined]
        contract()
        role()
        add("--phase", metavar="N", type=option_checks.positive_int,
            help="select the gates for this phase")
        add("--shard", metavar="K/N", help="only shard K of N of the selected gates, balanced "
            "by earlier durations; auto: $CI_NODE_INDEX/$CI_NODE_TOTAL (GitLab's parallel:), "
            "every gate when they are not set")
        source = command.add_mutually_exclusive_group()
        source.add_argument("--staged", action="store_true",
                            help="the change set is the index against HEAD")
        source.add_argument("--changed-from", metavar="REF",
                            help="the change set is everything since merge-base(REF, HEAD)")
        source.add_argument("--files", metavar="F", nargs="+",
                            help="the change set is these files")
        source.add_argument("--files-from", metavar="PATH", help="read the change set from a "
                            "file (newline- or NUL-separated; - for stdin)")
        source.add_argument("--all", action="store_true",
                            help="no change filtering: every gate applies")
    if name == "run":
        jobs()
        add("--json", metavar="PATH", help="write the JSON report here")
        add("--format", choices=("text", "json", "agent"), default="text",
            help="what to print: text (default), the JSON report, or the agent digest")
        add("--junit", metavar="PATH",
            help="write JUnit XML here (valid against pytest's and Maven Surefire's schemas)")
        junit_family()
        add("--annotations", choices=option_checks.ANNOTATION_CHOICES,
            help="github: print GitHub Actions error annotations for failed gates and append "
            "a table to $GITHUB_STEP_SUMMARY (default: when GITHUB_ACTIONS is true); none: "
            "never")
        add("--no-cache", action="store_true", help="run gates with cache = true even if they "
            "passed on these inputs (a pass is still stored)")
        add("--color", choices=("auto", "yes", "no"), default="auto",
            help="color the text output: auto (default) on a terminal, as pytest does: "
            "PY_COLORS=1/0 and NO_COLOR/FORCE_COLOR (non-empty) decide first")
    elif name == "list":
        add("--format", choices=("text", "json"), default="text", help="what to print: text "
            '(default) or JSON ({"gates": [{"name", "selected", "reason"}]})')
        add("-v", "--verbose", action="store_true", help="also show each selected gate's "
            "final argv, after {files} expansion (what run would spawn)")
    elif name == "agent-hook":
        from pytest_verifygate.agents import DEFAULT_BUDGET, STOP_TIMEOUT

        command.error_status = HOOK_USAGE_STATUS
        add("--max-rounds", type=option_checks.positive_int, default=3, metavar="N",
            help="failing rounds per session before it stops blocking (default 3)")
        contract()
        add("--agent", choices=AGENTS,
            help="the agent whose protocol to speak (default: told by the payload)")
        role()
        jobs()
        add("--changed-from", metavar="REF",
            help="judge the changes since REF instead of the session's starting point")
        add("--no-cache", action="store_true",
            help="run gates with cache = true even if they passed on these inputs")
        add("--budget", type=option_checks.positive_int, metavar="SECONDS",
            default=DEFAULT_BUDGET, help=f"stop the gates and block after this long (default "
            f"{DEFAULT_BUDGET}: below the {STOP_TIMEOUT} s timeout the installer writes; keep "
            "it below the agent's hook timeout)")
        add("--background", action="store_true", help="the after-edit hook: start the gates "
            "in the background, answer at once (see install-agent-hook --background)")
        add("--worker", nargs=2, help=argparse.SUPPRESS)  # the background run it starts
    elif name == "merge":
        add("reports", nargs="+", metavar="REPORT.json",
            help="the JSON reports of every shard (verifygate run --shard K/N --json)")
        add("--json", metavar="PATH", help="write the merged JSON report here")
        add("--junit", metavar="PATH", help="write JUnit XML of the merged report here")
        junit_family()
        add("--format", choices=("text", "json"), default="text",
            help="what to print: text (default) or the merged JSON report")
    elif name in ("install-agent-hook", "install-hook"):
        add("--agent", choices=AGENTS, required=True,
            help="the agent whose project configuration to write or merge")
        add("--max-rounds", type=option_checks.positive_int, metavar="N",
            help="failing rounds before the hook stops blocking (default 3)")
        add("--background", action="store_true", help="also verify while the agent works: "
            "after each edit, the gates run in the background (default: when the contract "
            "sets verify_while_editing)")
    elif name == "agent-status":
        add("--clear", action="store_true", help="forget the last stop (before a new agent run)")
    elif name in ("mcp", "check"):
        contract()
    elif name in ("install", "uninstall"):
        add("--hook", choices=("pre-commit", "pre-push"), action="append",
            help="only this git hook (repeatable; default: both)")
    elif name == "init":
        add("--pyproject", action="store_true",
            help="append [tool.verifygate] to pyproject.toml instead")
    elif name == "completion":
        add("shell", nargs="?", choices=("bash", "zsh", "fish", "tcsh"),
            help="the shell to complete for")
        add("--gates", action="store_true", help="print the contract's gate names instead, one "
            "a line (what the scripts run to complete NAME)")
        contract()
    elif name == "migrate":
        add("path", nargs="?", metavar="PATH", help="the config, or a directory holding one "
            "(default: the current directory's .pre-commit-config.yaml, else lefthook.yml)")
        add("--output", "-o", metavar="PATH", help="where to write the contract (default: "
            "verify.toml beside the config, or add to the contract there; - for stdout); an "
            "existing file is never overwritten")
