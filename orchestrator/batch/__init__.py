"""Batch runs: the overnight engine, parallel worktrees, the live board and progress.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from orchestrator.batch.engine import Budget, OvernightOptions, run_overnight_async
    from orchestrator.batch.summary import RepoReport

_HOMES = {
    **dict.fromkeys(("Budget", "OvernightOptions", "run_overnight_async"), "orchestrator.batch.engine"),
    "RepoReport": "orchestrator.batch.summary",
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = ["Budget", "OvernightOptions", "RepoReport", "run_overnight_async"]
