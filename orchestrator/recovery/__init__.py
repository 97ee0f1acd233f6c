"""What a killed run left behind, and how the next run puts it right.

`journal` is written before anything changes; `recovered` keeps the bytes an undo would
lose; `killed_run` reads both when a run opens and undoes only what the dead run did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from orchestrator.recovery.journal import Journal, stop_leftovers
    from orchestrator.recovery.killed_run import KilledRun
    from orchestrator.recovery.recovered import Keeper

_HOMES = {
    "Journal": "orchestrator.recovery.journal",
    "stop_leftovers": "orchestrator.recovery.journal",
    "KilledRun": "orchestrator.recovery.killed_run",
    "Keeper": "orchestrator.recovery.recovered",
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = ["Journal", "Keeper", "KilledRun", "stop_leftovers"]
