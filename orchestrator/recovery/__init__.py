"""What a killed run left behind, and how the next run puts it right.

Attempts run in worktrees of their own, so a killed run leaves nothing in the user's
checkout to undo: `journal` says which subtask was in flight and which processes to stop,
`landing` which commits were on their way to the branch, and `killed_run` reads both when
a run opens, stops what is left, finishes a landing and opens the task again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from orchestrator.recovery.journal import Journal, stop_leftovers
    from orchestrator.recovery.killed_run import KilledRun

_HOMES = {
    "Journal": "orchestrator.recovery.journal",
    "stop_leftovers": "orchestrator.recovery.journal",
    "KilledRun": "orchestrator.recovery.killed_run",
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = ["Journal", "KilledRun", "stop_leftovers"]
