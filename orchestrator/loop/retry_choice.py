"""retry.strategy "adaptive": after a failed attempt, repair it or start afresh.

Repair (the failed code and its feedback, in the same chat) pays when the feedback is
precise and the draft is close; a fresh sample from the base (told only how the attempt
failed and the reflections' lessons, never shown its code) wins when the draft is far
off (Olausson et al., "Is Self-Repair a Silver Bullet for Code Generation?"). The choice
is made per failure class: by a rule at first, then by the project's own record of which
choice solved that class, once both have been tried often enough to tell. A rule's
choice that has passed none of its first tries in a class gives way to the other until
that one has been tried as often, so the record can tell the two apart.

The record is `.openagents/memory/retry-choices.json`: per failure class and choice, the
retries made and those that passed. Small, rewritten atomically under a lock, committed
with the other memory files, like the edit-format record.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import orjson

from orchestrator.checks.verify import Verdict
from orchestrator.judging.judgement import Judgement
from reflection.fileio import LockTimeout, atomic_write, file_lock
from reflection.schema import FailureType

log = logging.getLogger("goldenloop.loop.retry_choice")

Choice = Literal["repair", "resample"]
FailureClass = Literal["crash", "near_miss", "far_off", "timeout", "judged"]
# The rule before the record says more: an exception or a syntax error names its line, and
# most tests passing means the draft is close; wrong output on most tests, or a hang, is a
# draft far off. The judge's own reasons (tests weakened, no change) are repaired: the
# reason says exactly what to do.
RULE: dict[FailureClass, Choice] = {
    "crash": "repair", "near_miss": "repair", "judged": "repair", "far_off": "resample", "timeout": "resample",
}
CHOICES: tuple[Choice, ...] = ("repair", "resample")
WORDS: dict[Choice, str] = {"repair": "repair", "resample": "a fresh start"}
MIN_TRIES = 3  # retries of each choice in a class before the record overrules the rule
NEAR = 0.5  # share of the judged tests passing from which a wrong output is a near miss


def failure_class(verdict: Verdict, judged: Judgement, score: float) -> FailureClass:
    """What kind of failure the attempt had, as far as choosing the next attempt goes."""
    if judged.outcome != "failed":
        return "judged"
    if verdict.failure_type == FailureType.TIMEOUT:
        return "timeout"
    if verdict.failure_type in (FailureType.RUNTIME_ERROR, FailureType.TYPECHECK_FAILURE):
        return "crash"
    first = (judged.first_error or (verdict.digest.first_error if verdict.digest else None) or "")
    if first and "AssertionError" not in first and "assert " not in first:
        return "crash"  # the code raised: the traceback points at the line
    return "near_miss" if score >= NEAR else "far_off"


class RetryChoices:
    """Per failure class and choice: retries made and retries that passed, across runs."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, dict[str, dict[str, int]]]:
        try:
            data = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return {}
        classes = data.get("classes") if isinstance(data, dict) else None
        return classes if isinstance(classes, dict) else {}

    def choose(self, klass: FailureClass) -> tuple[Choice, str]:
        """The choice for a failure of `klass`, and why, in words for the run log."""
        counts = self.load().get(klass)
        tried = {c: _count(counts, c, "tried") for c in CHOICES}
        rates = {c: _count(counts, c, "passed") / max(tried[c], 1) for c in CHOICES}
        rule, name = RULE[klass], klass.replace("_", " ")
        other: Choice = "resample" if rule == "repair" else "repair"
        if tried[rule] >= MIN_TRIES and rates[rule] == 0 and tried[other] < MIN_TRIES:
            # the rule never worked here: without trying the other, the record could never overrule it
            return other, (f"{WORDS[rule]} passed none of its {tried[rule]} tries for a {name} in this "
                           f"project, so {WORDS[other]} is tried")
        if min(tried.values()) < MIN_TRIES:
            return rule, f"the rule for a {name}"
        if rates["repair"] == rates["resample"]:
            return rule, f"the rule for a {name} (the record is even)"
        best: Choice = "repair" if rates["repair"] > rates["resample"] else "resample"
        return best, (f"this project's record for a {name}: repair passed "
                      f"{rates['repair']:.0%}, a fresh start {rates['resample']:.0%}")

    def record(self, klass: str, choice: str, passed: bool) -> None:
        try:
            with file_lock(self.path.with_name(self.path.name + ".lock"), timeout_s=5):
                classes = self.load()
                counts = classes.setdefault(klass, {}).setdefault(choice, {"tried": 0, "passed": 0})
                counts["tried"] = counts.get("tried", 0) + 1
                counts["passed"] = counts.get("passed", 0) + int(passed)
                body = orjson.dumps({"classes": classes}, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
                atomic_write(self.path, body + b"\n")
        except (OSError, LockTimeout, AttributeError, TypeError) as exc:  # a hint, maybe hand-edited: never fatal
            log.warning("cannot update %s: %s", self.path, exc)


def _count(counts: object, choice: str, key: str) -> int:
    """One number of the record; 0 where a hand-edited file holds something else."""
    entry = counts.get(choice) if isinstance(counts, dict) else None
    value = entry.get(key) if isinstance(entry, dict) else None
    return value if isinstance(value, int) and value >= 0 else 0
