"""The offline smoke run: the scripted model on the backlog, checking the mechanism.

The script answers each task with the code of `smoke/<task>.py` in the shapes small
models write (samples of Qwen2.5-Coder-1.5B: a path line then the code in a fenced
block, a made-up `src/` folder, a sentence naming the file; the function or method
alone, merged into the file). On a task where the pitfall bites it writes the code a
model that has not met the convention writes, `raise ValueError(...)`, unless its
prompt carries what goldenloop learned about it:

- a retry whose reflections name ValidationError gets the right code (the reflection,
  scripted too, says why the tests failed), so the first encounter passes at attempt 2;
- a first attempt whose lessons from earlier tasks (or project rules) name
  ValidationError gets it right at once.

So with the memory on every pitfall task after the first passes at attempt 1, and with
it off at attempt 2: the figures are the script's, by construction. What the run shows
is the mechanism: that the lesson reaches those prompts (`check_mechanism`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench.backlog.results import TaskResult
from bench.backlog.spec import FILES, PITFALL, SMOKE_CODE

PRICING = {"inputCostPerToken": 0.000001, "outputCostPerToken": 0.000002}
_BEFORE_FILES = r"(?:(?!\n# Repository files)[\s\S])*"  # within the prompt, not the files shown
TAUGHT = rf"{_BEFORE_FILES}(?:## Lessons from earlier tasks|Project rules \(learned){_BEFORE_FILES}ValidationError"
REFLECTED = rf"{_BEFORE_FILES}Reflections from Previous Attempts{_BEFORE_FILES}ValidationError"
REFLECTION = {
    "category": "wrong_approach",
    "analysis": "The test expects shop.errors.ValidationError with field set to the argument's name, "
                "but the code raised a bare ValueError, which the test does not accept.",
    "suggestion": "Refuse bad input with raise ValidationError(field, message) from shop.errors, the field "
                  "naming the argument at fault; this project never raises ValueError for input it refuses.",
    "actionItems": ["Import ValidationError from shop.errors", "Raise it with the argument's name as field"],
    "confidence": 0.8,
}
OTHER_REFLECTION = {**REFLECTION, "category": "logic_error", "confidence": 0.3,
                    "analysis": "The checks failed for a reason the script does not foresee.",
                    "suggestion": "Read the failing assertion and fix the code it points at.",
                    "actionItems": ["Fix what the assertion shows"]}


def right_code(task_id: str) -> str:
    return (SMOKE_CODE / f"{task_id}.py").read_text()


def wrong_code(code: str) -> str:
    """What a model that has not met the convention writes: a bare ValueError."""
    code = re.sub(r'raise ValidationError\("\w+", (f?"[^"]*")\)', r"raise ValueError(\1)", code)
    code = re.sub(r"^from shop\.errors import ValidationError\n\n?", "", code, flags=re.MULTILINE)
    return code.replace("NotFound, ValidationError", "NotFound")


def reply(task_id: str, number: int, code: str) -> str:
    """The code as a small model writes it, in one of three shapes by the task's number."""
    path = FILES[task_id]
    shape = number % 3 if (SMOKE_CODE.parent / "template" / path).exists() else 0  # a new file: its real path
    if shape == 1:
        return f"src/{path}\n```python\n{code}```\n"
    if shape == 2:
        return f"Here is the updated {path}:\n\n```python\n{code}```\n"
    return f"{path}\n```python\n{code}```\n"


def script_replies(task_ids: list[str]) -> list[dict[str, object]]:
    replies: list[dict[str, object]] = []
    for number, task_id in enumerate(task_ids, start=1):
        asked, right = f"# Task {task_id}:", reply(task_id, number, right_code(task_id))
        if task_id in PITFALL:
            replies += [{"match": asked + TAUGHT, "reply": right, "times": None},
                        {"match": asked + REFLECTED, "reply": right, "times": None},
                        {"match": asked, "reply": reply(task_id, number, wrong_code(right_code(task_id))),
                         "times": None}]
        else:
            replies.append({"match": asked, "reply": right, "times": None})
    replies.append({"match": r"Failure digest[\s\S]*ValueError", "reply": json.dumps(REFLECTION), "times": None})
    replies.append({"match": "Failure digest", "reply": json.dumps(OTHER_REFLECTION), "times": None})
    return replies


def write_script(task_ids: list[str], path: Path) -> str:
    """The script for these tasks; returns its model name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pricing": PRICING, "replies": script_replies(task_ids)}, indent=1) + "\n")
    return f"scripted/{path.resolve()}"


def check_mechanism(by_mode: dict[str, list[TaskResult]]) -> list[str]:
    """What did not happen as the script dictates; empty when the mechanism works."""
    broken = []
    for mode, results in by_mode.items():
        first = next((r.task_id for r in results if r.pitfall), None)
        for r in results:
            met = r.pitfall and r.task_id != first
            lesson = mode == "memory-on" and met
            want = 1 if not r.pitfall or lesson else 2
            if (r.status, r.passed_at) != ("closed", want):
                broken.append(f"{mode} {r.task_id}: {r.status}, passed at {r.passed_at}; expected attempt {want}")
            if lesson and first not in r.lessons_from:
                broken.append(f"{mode} {r.task_id}: its first prompt showed no lesson of {first}")
            if mode == "memory-off" and r.lessons_from:
                broken.append(f"{mode} {r.task_id}: shown lessons of {r.lessons_from} with the memory off")
    return broken
