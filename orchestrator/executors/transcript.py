"""An agent's transcript: what it printed and the files of its run, kept for the user.

The scratch folder an agent ran with (Aider's chat history, Codex's last message,
mini-swe-agent's trajectory) is removed after the run, and its output is only the
raw material of a verdict; the transcript keeps both, redacted and bounded, beside the
attempt in `.openagents/history/`, so that "why did the agent fail?" has an answer.

A secret is only recognised with its line: `word=hunter2` is what a cut leaves of
`password=hunter2`, and no rule knows it for a secret. So each file is redacted before it
is cut; the output comes cut to size by `run_command`, which keeps only whole lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reflection.redact import redact
from reflection.text import clip_middle

TRANSCRIPT_CHARS = 200_000  # the head and the tail of a long run
PART_CHARS = 100_000  # of each file of the run

if TYPE_CHECKING:
    from orchestrator.executors.presets import Scratch


def agent_transcript(output: str, scratch: Scratch | None = None) -> str:
    """The output, then each file the run left in its scratch folder, under a heading."""
    parts = [f"## output\n{output}"]
    for path in _files_of(scratch):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        parts.append(f"## {path.name}\n{clip_middle(redact(text), PART_CHARS)}")
    return clip_middle(redact("\n\n".join(parts)), TRANSCRIPT_CHARS)


def _files_of(scratch: Scratch | None) -> list[Path]:
    if scratch is None or not scratch.folder.is_dir():
        return []
    skip = {scratch.prompt.name, scratch.conventions.name}  # goldenloop's own, not the agent's
    return sorted(p for p in scratch.folder.iterdir() if p.is_file() and p.name not in skip)
