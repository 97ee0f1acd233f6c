"""Judging an attempt: running the checks and reading the verdict, the baseline before any
model call, environment failures, flaky reruns, test integrity and when to stop retrying
(the chapters of docs/RETRY_INTELLIGENCE.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from orchestrator.checks.convergence import ProgressTracker, StopReason
    from orchestrator.checks.judge import Judge, Judgement
    from orchestrator.checks.preflight import Baseline, preflight
    from orchestrator.checks.review import Review, ReviewGate
    from orchestrator.checks.settings import CheckSettings
    from orchestrator.checks.verify import Verdict, run_command, verify

_HOMES = {
    **dict.fromkeys(("ProgressTracker", "StopReason"), "orchestrator.checks.convergence"),
    **dict.fromkeys(("Judge", "Judgement"), "orchestrator.checks.judge"),
    **dict.fromkeys(("Baseline", "preflight"), "orchestrator.checks.preflight"),
    **dict.fromkeys(("Review", "ReviewGate"), "orchestrator.checks.review"),
    "CheckSettings": "orchestrator.checks.settings",
    **dict.fromkeys(("Verdict", "run_command", "verify"), "orchestrator.checks.verify"),
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = ["Baseline", "CheckSettings", "Judge", "Judgement", "ProgressTracker", "Review", "ReviewGate",
           "StopReason", "Verdict", "preflight", "run_command", "verify"]
