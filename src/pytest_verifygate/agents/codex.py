"""Codex CLI's hook protocol: Claude Code's (``claude.py``, whose answer keys are all inside
Codex's output schema), configured in ``.codex/hooks.json``.

PYTEST_DONT_REWRITE
"""

from typing import Any

from pytest_verifygate.agents import SESSION_START_TIMEOUT, claude, protocol


def parse(data: dict[str, Any]) -> protocol.HookPayload:
    return claude.parse(data, agent="codex")


ADAPTER = protocol.Adapter(
    name="codex", title="Codex CLI", parse=parse, render=claude.render,
    config_file=".codex/hooks.json", entries=claude.entries, retired=("SubagentStop",),
    # After every tool: Codex edits with apply_patch and its shell alike.
    after_edit=lambda command: ("PostToolUse", {"hooks": [
        protocol.command_hook(command, SESSION_START_TIMEOUT)]}),
    setup=("Codex skips a project's hooks without a word unless the project is trusted and "
           "each hook is: in `codex`, trust the project, then review and trust the hooks in "
           "/hooks (again whenever a hook's command changes); hooks are on by default, no "
           "[features] setting is needed",
           "headless (`codex exec`): trust the project and the hooks once as above (or "
           "`[projects.\"<root>\"] trust_level = \"trusted\"` in ~/.codex/config.toml and "
           "`codex exec --dangerously-bypass-hook-trust`); then `verifygate agent-status` "
           "exits 1 unless the last stop was verified (also when no hook ran)"),
)
