"""An agent command reads its prompt from a temporary file: gone once the attempt ends,
whatever the agent did, so a night of attempts leaves nothing in the temporary folder."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from orchestrator.executors import CommandExecutor, ExecutionRequest


@pytest.mark.anyio
@pytest.mark.parametrize("command", ["cat {prompt_file} > /dev/null", "test -f {prompt_file} && exit 3", "no-such-agent-program {prompt_file}"])
async def test_the_prompt_file_is_removed_when_the_attempt_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    request = ExecutionRequest(repo_dir=tmp_path, prompt="Fix add", attempt=1)

    await CommandExecutor(command, timeout_s=30).execute(request)

    assert list(temp.glob("goldenloop-prompt-*")) == []
