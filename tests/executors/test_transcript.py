"""An agent's transcript keeps no piece of a secret that a cut to size went through.

The output is cut by `run_command`, as every check's output is: only whole lines are kept
on each side of a cut, so that what is kept is redacted with its line.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from orchestrator.checks.settings import DEFAULT_OUTPUT_CAP
from orchestrator.executors import CommandExecutor
from orchestrator.executors.base import ExecutionRequest
from orchestrator.executors.presets import Scratch
from orchestrator.executors.transcript import agent_transcript

SECRET = "hunter2" + "xyz"
LINE = f"password={SECRET}\n"


def pieces_of(secret: str) -> list[str]:
    return [secret[i : i + 4] for i in range(len(secret) - 3)]


@pytest.mark.anyio
@pytest.mark.parametrize("cut", [4, 12], ids=["in-the-name", "in-the-value"])
async def test_the_output_kept_after_a_cut_holds_whole_redacted_lines_only(tmp_path: Path, cut: int) -> None:
    # A megabyte of A's, more password lines than the output's tail keeps, then as many dots
    # as put the start of the tail `cut` characters into one of them (`word=...`, `ter2xyz`).
    tail = DEFAULT_OUTPUT_CAP - DEFAULT_OUTPUT_CAP // 8
    trailer = "." * ((cut + tail) % len(LINE))
    script = tmp_path / "agent.py"
    script.write_text(
        f"import sys\nw = sys.stdout.write\nw('A' * 1_000_000 + '\\n')\n"
        f"for _ in range(12_000):\n    w({LINE!r})\nw({trailer!r})\n"
    )
    executor = CommandExecutor(f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {{prompt_file}}")

    result = await executor.execute(ExecutionRequest(repo_dir=tmp_path, prompt="fix it", attempt=1))

    transcript = result.transcript or ""
    _, cut_mark, after_cut = transcript.partition(" bytes omitted ...]\n")
    assert cut_mark, "the output was not cut"
    assert not any(piece in transcript for piece in pieces_of(SECRET)), after_cut[:100]
    assert after_cut.startswith("password=[REDACTED:password]\n")


def test_a_run_file_is_redacted_before_it_is_cut_to_size(tmp_path: Path) -> None:
    scratch = Scratch(tmp_path)
    lines = "".join(f"password={SECRET}{n:06d}\n" for n in range(20_000))  # five times what is kept
    (tmp_path / "trajectory.json").write_text(lines)

    transcript = agent_transcript("", scratch)

    assert "## trajectory.json\npassword=[REDACTED:password]\n" in transcript
    assert re.search(r"\d", transcript) is None, "a piece of a secret survived the cut"
