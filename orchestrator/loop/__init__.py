"""The golden loop: one task start to finish (`GoldenLoop`), one subtask's attempts
(`SubtaskRun`, each attempt a pipeline of steps: loop/steps.py), the plan and its saved
state, the prompt each attempt gets, decomposition and escalation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from orchestrator.loop.golden import GoldenLoop
    from orchestrator.loop.outcome import SubtaskResult, TaskOutcome
    from orchestrator.loop.parts import LoopParts
    from orchestrator.loop.plan import Subtask, SubtaskPlan
    from orchestrator.loop.subtask import SubtaskRun

_HOMES = {
    "GoldenLoop": "orchestrator.loop.golden",
    "LoopParts": "orchestrator.loop.parts",
    "SubtaskRun": "orchestrator.loop.subtask",
    "Subtask": "orchestrator.loop.plan",
    "SubtaskPlan": "orchestrator.loop.plan",
    "SubtaskResult": "orchestrator.loop.outcome",
    "TaskOutcome": "orchestrator.loop.outcome",
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = ["GoldenLoop", "LoopParts", "Subtask", "SubtaskPlan", "SubtaskResult", "SubtaskRun", "TaskOutcome"]
