"""The reflections in an agent's own memory file (CLAUDE.md, AGENTS.md) for one attempt.

The prompt file always carries them; with executor.memoryFile on, they are also added
to the file the agent reads on its own, and the file is put back byte for byte after
the run (or removed, if it did not exist), so the loop never finds a change to commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from reflection.prompts import HEADING as REFLECTIONS_HEADING  # the block is the prompt's last part

MARK = "<!-- goldenloop: reflections for this attempt; removed after it -->"


def reflections_block(prompt: str) -> str:
    """The prompt's reflections block, or "" when it has none (a first attempt)."""
    at = prompt.find(REFLECTIONS_HEADING)
    return "" if at < 0 else prompt[at:].strip() + "\n"


class AgentMemory:
    """One memory file of the repository, changed for one run and put back."""

    def __init__(self, repo_dir: Path, name: str | None) -> None:
        self.path = repo_dir / name if name else None

    @contextmanager
    def holding(self, block: str) -> Iterator[None]:
        if self.path is None or not block:
            yield
            return
        before = self.path.read_bytes() if self.path.exists() else None
        text = (before or b"").decode("utf-8", "surrogateescape")
        joined = f"{text.rstrip()}\n\n{MARK}\n{block}" if text.strip() else f"{MARK}\n{block}"
        self.path.write_text(joined, encoding="utf-8", errors="surrogateescape")
        try:
            yield
        finally:  # whatever the agent did to it meanwhile
            if before is None:
                self.path.unlink(missing_ok=True)
            else:
                self.path.write_bytes(before)
