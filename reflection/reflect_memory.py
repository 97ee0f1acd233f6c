"""A reflection made through the Reflect API, as a lesson in the project's memory.

The golden loop ranks the outcome records of reflections.jsonl as lessons for the next
task's first prompt (reflection/lessons.py). A session reflected through the API taught
something in the same way a task did, so it leaves the same kind of record:

- **partial**, when the reflection is not satisfactory: what happened (the insights),
  what went wrong (each weak criterion's reasoning) and what to do differently (the
  improvements);
- **success**, when it is satisfactory after errors met and resolved on the way (a
  procedure worth replaying), or always with `success_procedures="always"`;
- nothing when there is nothing to teach: a clean pass (unless "always"), a weak
  reflection without an improvement, or `success_procedures="never"` for successes.

Its `taskId` is `reflect:<sessionId>`, its `agent` "reflect-api", and every text is cut
to the record's limits like every other record's. The reflection's own sentences
(insights, reasoning, improvements, strengths) are not redacted again (`fit_redacted`):
they were made from the redacted conversation and its history line holds them as they
are, and redaction is the dear part of a lesson. The pieces cut out of a redacted text
(the task's first line, the file paths) are, through `fit_text`: out of their context
they are short and cheap to check once more.
"""

from __future__ import annotations

from reflection.outcome import OutcomeReflection, SuccessProcedures
from reflection.reflect_skill import MIN_CONFIDENCE, Reflected
from reflection.schema import ITEM_CHARS, TEXT_CHARS, fit_redacted, fit_text

AGENT = "reflect-api"
TASK_PREFIX = "reflect:"


def lesson_of(reflected: Reflected, *, success_procedures: SuccessProcedures = "after_failure"
              ) -> OutcomeReflection | None:
    """The outcome record a reflection leaves in memory, or None when it teaches nothing."""
    result, facts = reflected.result, reflected.facts
    common = {
        "session_id": result.session_id,
        "task_id": fit_redacted(TASK_PREFIX + result.session_id, ITEM_CHARS),
        "agent": AGENT,
        "title": fit_text(_title(reflected), ITEM_CHARS),
        "files": [fit_text(path, ITEM_CHARS) for path in facts.files[:20]],
        "what_happened": fit_redacted("; ".join(result.insights), TEXT_CHARS) or None,
        "source": result.source,
    }
    if result.confidence < MIN_CONFIDENCE:
        return None  # most criteria could not be judged: no lesson to trust, either way
    if not result.satisfactory:
        if not result.improvements:
            return None
        weak = [c.reasoning for c in result.criterion_scores if c.name in reflected.weak]
        return OutcomeReflection(outcome="partial", **common,
                                 what_went_wrong=fit_redacted(" ".join(weak), TEXT_CHARS) or None,
                                 what_to_do_differently=fit_redacted("; ".join(result.improvements), TEXT_CHARS))
    met_errors = bool(facts.errors)
    if success_procedures == "never" or (success_procedures == "after_failure" and not met_errors):
        return None
    how = "; ".join(result.strengths) or "the session met the bar"
    errors = f" after {', '.join(facts.errors[:3])} on the way" if met_errors else ""
    return OutcomeReflection(outcome="success", **common, strategy=fit_redacted(f"{how}{errors}", TEXT_CHARS),
                             why_it_worked=fit_redacted(_why(reflected), TEXT_CHARS) or None)


def _title(reflected: Reflected) -> str:
    first = next((line.strip() for line in reflected.task.splitlines() if line.strip()), "")
    return first or f"session {reflected.result.session_id}, reflected through the API"


def _why(reflected: Reflected) -> str:
    """The reasoning of the criteria that met their bar."""
    return " ".join(c.reasoning for c in reflected.result.criterion_scores
                    if c.score is not None and c.name not in reflected.weak)
