"""The checks and what is read from them: running the commands, the baseline before any
model call, environment failures, the user's waivers, the review and when to stop
retrying (the chapters of docs/RETRY_INTELLIGENCE.md). The judge that makes an attempt's
verdict from them is `orchestrator.judging`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from orchestrator.checks.convergence import ProgressTracker, StopReason
    from orchestrator.checks.preflight import Baseline, preflight
    from orchestrator.checks.review import Review, ReviewGate
    from orchestrator.checks.settings import CheckSettings
    from orchestrator.checks.verify import Verdict, run_command, verify

_HOMES = {
    **dict.fromkeys(("ProgressTracker", "StopReason"), "orchestrator.checks.convergence"),
    **dict.fromkeys(("Baseline", "preflight"), "orchestrator.checks.preflight"),
    **dict.fromkeys(("Review", "ReviewGate"), "orchestrator.checks.review"),
    "CheckSettings": "orchestrator.checks.settings",
    **dict.fromkeys(("Verdict", "run_command", "verify"), "orchestrator.checks.verify"),
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = ["Baseline", "CheckSettings", "ProgressTracker", "Review", "ReviewGate", "StopReason", "Verdict",
           "preflight", "run_command", "verify"]
