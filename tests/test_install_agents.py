"""tools/install_agents.py as CI runs it: each agent named, with its place and its time."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = [sys.executable, str(ROOT / "tools" / "install_agents.py")]


@pytest.mark.skipif(not (ROOT / ".agents" / "mini-swe-agent" / "bin" / "mini").exists(),
                    reason="mini-swe-agent is not installed here (python3 tools/install_agents.py): nothing to check")
def test_an_install_names_the_agent_its_place_and_how_long_it_took() -> None:
    done = subprocess.run([*TOOL, "mini-swe-agent"], capture_output=True, text=True, timeout=1200, check=False)

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[1/1] installing mini-swe-agent (mini-swe-agent==2.4.6) ..."
    assert re.fullmatch(r"\[1/1\] mini-swe-agent installed in \d+:\d\d", lines[-1])


def test_an_unknown_agent_is_named_with_the_known_ones() -> None:
    done = subprocess.run([*TOOL, "aidr"], capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 2
    assert done.stdout.startswith("unknown agent(s): aidr; known: claude-code, codex, aider")
