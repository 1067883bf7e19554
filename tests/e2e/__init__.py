"""The end-to-end suite: the real agent CLIs (Claude Code, Codex CLI, Gemini CLI) and the MCP
Inspector, pinned in ``package.json`` here and installed by ``make e2e`` into ``.e2e/``.

A package, like ``tests/reliability``, so its module names cannot clash with the flat
``tests/`` directory's.
"""
