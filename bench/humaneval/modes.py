"""The three ways each problem is run, and the retry protocol they share.

A fixed-trial protocol, as in the Reflexion paper and Aider's benchmark: a problem gets
exactly its attempts unless one passes. goldenloop's early stops (plateau, oscillation,
rolling a worse attempt back) and its judgement calls (preflight, flaky reruns,
routing by failure class) are switched off, so that the modes
differ only in what a retry is told. The test-integrity guard stays on: an attempt that
edits the test file is a failed attempt.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

MAX_ATTEMPTS = 4  # the table's columns: pass rate after attempt 1, 2, 3 and 4

FIXED_TRIALS: dict[str, Any] = {
    "preflight": False,  # the stub fails by construction; nothing to learn from a baseline
    "flakyReruns": 0,  # HumanEval checks are deterministic
    "routeByFailure": False,  # every failure, timeouts included, is reflected on and retried
    "stopOnPlateau": False,
    "stopOnOscillation": False,
    "rollbackRegressions": False,
    "testIntegrity": True,
}


class Mode(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    label: str
    reflexion: bool
    max_retries: int
    strategy: str = "linear"  # retry.strategy

    @property
    def retry(self) -> dict[str, Any]:
        """The project's `retry` block: the fixed-trial protocol, and the mode's strategy."""
        return FIXED_TRIALS if self.strategy == "linear" else {**FIXED_TRIALS, "strategy": self.strategy}

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1


MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode(name="single", label="single attempt", reflexion=False, max_retries=0),
        Mode(name="raw", label="retries, raw test output", reflexion=False, max_retries=MAX_ATTEMPTS - 1),
        Mode(name="reflexion", label="reflexion retries", reflexion=True, max_retries=MAX_ATTEMPTS - 1),
    )
}


# Not goldenloop: the model asked directly, once per problem (see control.py).
CONTROL = Mode(name="control", label="direct prompt (control)", reflexion=False, max_retries=0)
# Opt-in (`--modes ...,tree`): reflexion retries as a tree search, `retry.strategy: "tree"`
# (width 2, depth 2): two candidates from the stub, then two from the better one.
TREE = Mode(name="tree", label="reflexion, tree search", reflexion=True, max_retries=MAX_ATTEMPTS - 1,
            strategy="tree")


def parse_modes(text: str) -> list[Mode]:
    known = {**MODES, CONTROL.name: CONTROL, TREE.name: TREE}
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"--modes takes a comma-separated list of {', '.join(known)} (got {text!r})")
    return [known[n] for n in dict.fromkeys(names)]
