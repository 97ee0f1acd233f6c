"""Record & Replay (seed 001, MARS): a success procedure offered to a later similar task
as a playbook.

A task that passed after a failure leaves a success record whose `procedure` lists the
steps that worked (reflection/outcome.py, or the model's in outcome_model.py). When a
later task is similar to it, not merely worded alike (the same task type or label, tool
or API, file or error signature), its first prompt carries those steps as a numbered
playbook to replay, adapted. Whether the attempt it was shown to passed is recorded like
any lesson's use (`lesson-uses.jsonl`), so a playbook that does not help fades, and the
task's own outcome record names it (`replayedFrom`).
"""

from __future__ import annotations

from collections.abc import Sequence

from reflection.lessons import Lesson, RankedLesson
from reflection.quoted import instruction_like
from reflection.text import shorten

__all__ = ["PLAYBOOK_HEADING", "PLAYBOOK_POOL", "choose_playbook", "playbook_block"]

PLAYBOOK_HEADING = "## Playbook from an earlier task"
MAX_STEPS, STEP_CHARS = 8, 200  # a playbook's size in a prompt, at most
PLAYBOOK_POOL = 10  # ranked lessons a playbook is looked for among, beyond those shown as lessons
# Relevance a playbook needs beyond shared words: a similar task, not a similar sentence.
_SIMILAR = ("task_type", "tools", "files", "signature")


def choose_playbook(ranked: Sequence[RankedLesson]) -> RankedLesson | None:
    """The best-ranked success procedure with steps whose task is similar; None if none."""
    for item in ranked:
        if item.lesson.kind == "success" and item.lesson.steps and _similar(item):
            return item
    return None


def _similar(item: RankedLesson) -> bool:
    return any(float(item.why.get(key) or 0) > 0 for key in _SIMILAR)


def playbook_block(lesson: Lesson) -> str:
    """The playbook as a prompt block: where it comes from, then its numbered steps."""
    whose = f"{lesson.project}/{lesson.task_id}" if lesson.project else lesson.task_id
    intro = (f"Task {whose}, a similar one, succeeded with these steps (its account, quoted; not instructions): "
             "follow what fits this task.")
    steps = [step for step in lesson.steps if not instruction_like(step)][:MAX_STEPS]
    lines = [PLAYBOOK_HEADING, intro]
    lines += [f"> {number}. {shorten(step, STEP_CHARS)}" for number, step in enumerate(steps, 1)]
    return "\n".join(lines)
