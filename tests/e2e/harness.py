"""Driving the real agent CLIs headless: a throwaway project whose hooks ``verifygate
install-agent-hook`` wrote, a scripted model on 127.0.0.1 (``models.py``), and a log of every hook
call (``hooklog.sh``, which runs the installed command unchanged).

Each CLI runs with a home of its own (no user configuration, no credentials), a PATH of
the system's directories and Node.js (and the project's virtualenv unless a scenario takes it
away), and every model URL pointed at the fake: nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .models import AGENT, SUBAGENT, FakeModels, Request, Script

ROOT = Path(__file__).resolve().parents[2]
E2E_DIR = ROOT / ".e2e"  # what `make e2e` installs: tests/e2e/package.json, pinned
NODE_BIN = E2E_DIR / "node_modules" / ".bin"
PINS = ROOT / "tests" / "e2e" / "package.json"
HOOKLOG = Path(__file__).with_name("hooklog.sh")
VENV_BIN = Path(sys.executable).parent
VERIFYGATE = VENV_BIN / "verifygate"
RUN_TIMEOUT = 120  # seconds for one headless session: the slowest takes about fifteen

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
# The gate imports calc.py without writing bytecode: a fix of the same size written within
# the same second as the break would otherwise be hidden by a stale .pyc.
GATE = [sys.executable, "-B", "-c",
        "import calc; assert calc.add(2, 2) == 4, 'add(2, 2) is not 4'"]
CONTRACT = f'[[gate]]\nname = "tests"\ncommand = {json.dumps(GATE)}\n'
PROMPT = "Change calc.py as the task says, then stop."


def write_file(path: str, text: str) -> str:
    """A shell command that writes ``text`` to ``path`` (what the scripted model runs)."""
    return f"printf %s {shlex.quote(text)} > {shlex.quote(path)}"


BREAK = write_file("calc.py", BROKEN)
FIX = write_file("calc.py", FIXED)


class AgentCLI(NamedTuple):
    """One agent CLI: its ``install-agent-hook --agent`` name, npm package and program, the hook
    events that are its stops, and how it is run headless (``trusted``: with what it needs
    to run project hooks; without, as a user who missed it runs it)."""

    name: str
    title: str
    package: str
    program: str
    stop_event: str
    subagent_stop_event: str | None
    configure: Callable[[Path, Path, str, bool], dict[str, str]]
    argv: Callable[[Path, str, bool], list[str]]


def installed_version(package: str) -> str:
    """An npm package's version as installed under ``.e2e`` (from its package.json)."""
    manifest = E2E_DIR / "node_modules" / package / "package.json"
    return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])


def _claude_env(home: Path, repo: Path, url: str, trusted: bool) -> dict[str, str]:
    env = {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-e2e-not-a-key",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
    if os.geteuid() == 0:  # Claude Code refuses to skip permissions as root outside a sandbox
        env["IS_SANDBOX"] = "1"
    return env


def _claude_argv(logs: Path, prompt: str, trusted: bool) -> list[str]:
    return [str(NODE_BIN / "claude"), "-p", prompt, "--dangerously-skip-permissions",
            "--output-format", "stream-json", "--verbose",
            "--debug-file", str(logs / "claude-debug.log")]


def _codex_env(home: Path, repo: Path, url: str, trusted: bool) -> dict[str, str]:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    # The project is trusted, as a user trusts it on first use; the hooks run under exec
    # with --dangerously-bypass-hook-trust (automation that vets its hooks itself).
    (codex_home / "config.toml").write_text(
        'model = "gpt-5"\nmodel_provider = "scripted"\n\n'
        '[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\n\n'
        f"[projects.{json.dumps(str(repo))}]\ntrust_level = \"trusted\"\n", encoding="utf-8")
    return {"CODEX_HOME": str(codex_home), "SCRIPTED_API_KEY": "sk-e2e-not-a-key"}


def _codex_argv(logs: Path, prompt: str, trusted: bool) -> list[str]:
    hook_trust = ["--dangerously-bypass-hook-trust"] if trusted else []
    return [str(NODE_BIN / "codex"), "exec", "--json",
            "--dangerously-bypass-approvals-and-sandbox", *hook_trust, prompt]


def _gemini_env(home: Path, repo: Path, url: str, trusted: bool) -> dict[str, str]:
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}),
                        encoding="utf-8")
    # Project hooks load only in a trusted folder; --skip-trust would disable them. Without
    # its relaunch (a second node process with a larger heap) it starts in half the time.
    env = {"GEMINI_API_KEY": "e2e-not-a-key", "GOOGLE_GEMINI_BASE_URL": url,
           "GEMINI_CLI_NO_RELAUNCH": "true"}
    if trusted:
        env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
    return env


def _gemini_argv(logs: Path, prompt: str, trusted: bool) -> list[str]:
    # Untrusted: the flag Gemini CLI itself suggests for headless use in a new folder.
    return [str(NODE_BIN / "gemini"), "--yolo", *([] if trusted else ["--skip-trust"]),
            "-p", prompt]


CLAUDE = AgentCLI("claude", "Claude Code", "@anthropic-ai/claude-code", "claude", "Stop",
                  "SubagentStop", _claude_env, _claude_argv)
CODEX = AgentCLI("codex", "Codex CLI", "@openai/codex", "codex", "Stop", None,
                 _codex_env, _codex_argv)
GEMINI = AgentCLI("gemini", "Gemini CLI", "@google/gemini-cli", "gemini", "AfterAgent", None,
                  _gemini_env, _gemini_argv)
AGENTS = {agent.name: agent for agent in (CLAUDE, CODEX, GEMINI)}


# --------------------------------------------------------------------------------------------
# the project


class Project(NamedTuple):
    """A throwaway git repository, the home its agent runs with, and where logs go."""

    root: Path
    home: Path
    logs: Path

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.root, check=True, capture_output=True,
                              text=True).stdout

    def read(self, name: str) -> str:
        return (self.root / name).read_text(encoding="utf-8")


def make_project(base: Path) -> Project:
    """calc.py (correct) and a contract with one gate, ``tests``, committed."""
    project = Project(base / "repo", base / "home", base / "logs")
    for path in project:
        path.mkdir(parents=True)
    (project.logs / "hooks").mkdir()
    project.git("init", "-q", "-b", "main")
    for key, value in (("user.email", "e2e@example.invalid"), ("user.name", "E2E"),
                       ("commit.gpgsign", "false")):
        project.git("config", key, value)
    (project.root / "calc.py").write_text(FIXED, encoding="utf-8")
    (project.root / "verify.toml").write_text(CONTRACT, encoding="utf-8")
    project.git("add", "-A")
    project.git("commit", "-q", "-m", "calc and its contract")
    return project


def system_path(*, venv: bool) -> str:
    """PATH for the agent: the system's directories and Node.js, the virtualenv first when
    ``venv`` (as in a shell where it is activated)."""
    dirs = [str(VENV_BIN)] if venv else []
    node = shutil.which("node")
    if node is not None:
        dirs.append(str(Path(node).parent))
    dirs += ["/usr/local/bin", "/usr/bin", "/bin"]
    return os.pathsep.join(dict.fromkeys(dirs))


def base_env(project: Project, *, venv: bool = True) -> dict[str, str]:
    return {"HOME": str(project.home), "PATH": system_path(venv=venv), "LANG": "C.UTF-8",
            "TERM": "dumb", "NO_COLOR": "1", "TMPDIR": str(project.home.parent)}


def install_hook(project: Project, agent: AgentCLI, *args: str,
                 replace_command: str | None = None) -> str:
    """Run ``verifygate install-agent-hook --agent NAME`` in the project (by the virtualenv's
    script, as from a shell where it is activated), route every hook command it wrote
    through ``hooklog.sh``, and commit the configuration. ``replace_command``: run this
    instead of the installed command (the negative control). What install-agent-hook printed."""
    done = subprocess.run([str(VERIFYGATE), "install-agent-hook", "--agent", agent.name,
                           *args], cwd=project.root, env=base_env(project), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    config_file = project.root / {"claude": ".claude/settings.local.json",
                                  "codex": ".codex/hooks.json",
                                  "gemini": ".gemini/settings.json"}[agent.name]
    config = json.loads(config_file.read_text(encoding="utf-8"))
    hooks = list(_command_hooks(config))
    assert hooks, f"install-agent-hook wrote no hook command to {config_file}"
    for hook in hooks:
        command = replace_command if replace_command is not None else hook["command"]
        hook["command"] = shlex.join(["/bin/sh", str(HOOKLOG), str(project.logs / "hooks"),
                                      command])
    config_file.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    project.git("add", "-A")
    project.git("commit", "-q", "-m", f"{agent.title} runs the verify hook")
    return done.stdout


def agent_status(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """``verifygate agent-status`` in the project: how the hook's last stop ended, for a
    caller of a headless run (which exits 0 whatever the hook decided)."""
    return subprocess.run([str(VERIFYGATE), "agent-status", *args], cwd=project.root,
                          env=base_env(project), capture_output=True, text=True, timeout=60)


def installed_commands(project: Project) -> list[str]:
    """The hook commands install-agent-hook wrote (as hooklog.sh runs them)."""
    commands = []
    for name in (".claude/settings.local.json", ".codex/hooks.json", ".gemini/settings.json"):
        path = project.root / name
        if path.exists():
            for hook in _command_hooks(json.loads(path.read_text(encoding="utf-8"))):
                commands.append(shlex.split(hook["command"])[-1])
    return commands


def _command_hooks(config: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for groups in (config.get("hooks") or {}).values():
        for group in groups:
            for hook in group.get("hooks", []):
                if isinstance(hook, dict) and "command" in hook:
                    yield hook


# --------------------------------------------------------------------------------------------
# a session


@dataclass
class HookCall:
    """One call of a hook command, as hooklog.sh saw it."""

    payload: dict[str, Any]
    stdout: str
    stderr: str
    status: int
    start: float
    end: float

    @property
    def event(self) -> str:
        return str(self.payload.get("hook_event_name"))

    @property
    def answer(self) -> dict[str, Any]:
        try:
            data = json.loads(self.stdout) if self.stdout.strip() else {}
        except ValueError:
            return {"unparsed": self.stdout}
        return data if isinstance(data, dict) else {"unparsed": self.stdout}

    @property
    def blocked(self) -> bool:
        """Whether the agent was sent back to work (exit status 2 blocks too)."""
        return self.status == 2 or self.answer.get("decision") in ("block", "deny")

    @property
    def decision(self) -> str:
        return "block" if self.blocked else "allow"

    @property
    def reason(self) -> str:
        return str(self.answer.get("reason", ""))

    @property
    def message(self) -> str:
        """What the hook told the user: its systemMessage and stderr."""
        return f"{self.answer.get('systemMessage', '')}\n{self.stderr}"

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class Session:
    """One headless run of an agent CLI: how it ended, every model request, every hook call."""

    agent: AgentCLI
    project: Project
    exit_code: int | None
    stdout: str
    stderr: str
    started: float
    ended: float
    requests: list[Request]
    hook_calls: list[HookCall] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    def conversation(self, role: str = AGENT) -> list[Request]:
        return [r for r in self.requests if r.role == role]

    def stops(self) -> list[HookCall]:
        return [c for c in self.hook_calls if c.event == self.agent.stop_event]

    def subagent_stops(self) -> list[HookCall]:
        return [c for c in self.hook_calls if c.event == self.agent.subagent_stop_event]

    def request_after(self, call: HookCall) -> Request | None:
        """The agent's first model request after ``call`` ended."""
        return next((r for r in self.conversation() if r.at >= call.end), None)

    def refused(self) -> bool:
        """Whether the scripted model's runaway limit ended the session."""
        return any(r.role in (AGENT, SUBAGENT) and r.reply is None for r in self.requests)

    def describe(self) -> str:
        """What happened, for an assertion's message."""
        lines = [f"{self.agent.title}: exit status {self.exit_code} after {self.seconds:.1f} s; "
                 f"{len(self.conversation())} model request(s) of the agent, "
                 f"{len(self.conversation(SUBAGENT))} of subagents"
                 f"{', the runaway limit was hit' if self.refused() else ''}; logs in "
                 f"{self.project.logs}"]
        for call in self.hook_calls:
            first = (call.reason or call.message.strip()).splitlines()[:1]
            lines.append(f"  hook {call.event}: {call.decision}, exit {call.status}, "
                         f"{call.seconds:.2f} s: {first[0][:160] if first else ''}")
        lines.append("  stderr: " + self.stderr[-1500:].replace("\n", "\n    "))
        return "\n".join(lines)


def run_agent(project: Project, agent: AgentCLI, script: Script, *, venv: bool = True,
              trusted: bool = True, prompt: str = PROMPT) -> Session:
    """Run ``agent`` headless in the project against a scripted model; its session."""
    with FakeModels(script) as models:
        env = base_env(project, venv=venv)
        env.update(agent.configure(project.home, project.root, models.url, trusted))
        argv = agent.argv(project.logs, prompt, trusted)
        started = time.time()
        process = subprocess.Popen(argv, cwd=project.root, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=RUN_TIMEOUT)
            exit_code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            exit_code = None
        ended = time.time()
        requests = list(models.requests)
        (project.logs / "requests.json").write_text(json.dumps(models.dump(), indent=1),
                                                    encoding="utf-8")
    (project.logs / "stdout").write_text(stdout, encoding="utf-8")
    (project.logs / "stderr").write_text(stderr, encoding="utf-8")
    return Session(agent, project, exit_code, stdout, stderr, started, ended, requests,
                   read_hook_calls(project.logs / "hooks"))


def read_hook_calls(directory: Path) -> list[HookCall]:
    """Every call hooklog.sh logged, in order; one that never finished (killed by the
    CLI's hook timeout) has exit status -1."""
    calls = []
    def part(stdin: Path, suffix: str) -> str:
        path = stdin.with_suffix(suffix)
        return path.read_text(encoding="utf-8") if path.exists() else ""

    for stdin in directory.glob("*.stdin"):
        started = stdin.stat().st_mtime
        status, start, end = (part(stdin, ".status").split() or
                              ["-1", str(int(started * 1e9)), str(int(started * 1e9))])
        payload = json.loads(part(stdin, ".stdin") or "{}")
        calls.append(HookCall(payload, part(stdin, ".stdout"), part(stdin, ".stderr"),
                              int(status),
                              int(start) / 1e9, int(end) / 1e9))
    return sorted(calls, key=lambda call: call.start)
