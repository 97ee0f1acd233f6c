"""Where a project keeps its reflections (docs/ARCHITECTURE.md, "Files").

A module of its own so that knowing the path costs no import of the store or the schema.
"""

from __future__ import annotations

from pathlib import Path

REFLECTIONS_PATH = Path(".openagents/memory/reflections.jsonl")  # relative to the project's root
# One JSON object per project: the task reflections, keyed by task identity (task_reflection.py).
TASK_REFLECTIONS_PATH = Path(".openagents/memory/task-reflections.json")
