"""Where the real coding agents installed by tools/install_agents.py are, and the marker
that skips a test when its agent is not installed here (CI installs every one)."""

from __future__ import annotations

from pathlib import Path

import pytest

AGENTS = Path(__file__).resolve().parents[2] / ".agents"

# name -> the program, relative to .agents/
PROGRAMS: dict[str, str] = {
    "claude-code": "npm/node_modules/.bin/claude",
    "codex": "npm/node_modules/.bin/codex",
    "aider": "aider/bin/aider",
    "mini-swe-agent": "mini-swe-agent/bin/mini",
    "openhands": "openhands/bin/openhands",
}


def program(name: str) -> Path | None:
    """The agent's installed program, or None when it is not installed here."""
    path = AGENTS / PROGRAMS[name]
    return path if path.exists() else None


def needs(name: str) -> pytest.MarkDecorator:
    """Run the test with the real agent `name`; skipped, saying how to install it, when absent."""
    return pytest.mark.skipif(program(name) is None,
                              reason=f"{name} is not installed: python3 tools/install_agents.py {name}")
