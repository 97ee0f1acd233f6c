"""The four ways each problem is run through goldenloop, and the retry protocol they share.

A fixed-trial protocol, as in the Reflexion paper and Aider's benchmark: a problem gets
exactly its attempts unless one passes. goldenloop's early stops (plateau, oscillation,
rolling a worse attempt back) and its judgement calls (preflight, flaky reruns,
routing by failure class) are switched off, so that the modes
differ only in what a retry is told. The test-integrity guard stays on: an attempt that
edits the test file is a failed attempt.

`resample` is the baseline of Olausson et al.: the same attempt budget spent on fresh,
independent samples (`retry.fresh`: the original tree, the first prompt, nothing about
the failures), the first that passes the checks kept. It must sample: at temperature 0
every draw is the first one, so it has a temperature of its own (`--resample-temperature`,
RESAMPLE_TEMPERATURE by default; 0 is refused), and `--temperature` sets the other modes'.
One run then holds greedy retries and sampled resampling side by side.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

MAX_ATTEMPTS = 4  # the table's columns: pass rate after attempt 1, 2, 3 and 4
RESAMPLE_TEMPERATURE = 0.8  # resample's temperature unless --resample-temperature says otherwise

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
    fresh: bool = False  # every retry a fresh sample (retry.fresh)
    one_call: bool = False  # reflexion.oneCall: the retry's reply writes the reflection

    @property
    def retry(self) -> dict[str, Any]:
        """The project's `retry` block: the fixed-trial protocol, the mode's strategy and freshness."""
        strategy = {} if self.strategy == "linear" else {"strategy": self.strategy}
        return {**FIXED_TRIALS, **strategy, "fresh": self.fresh}

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1

    def temperature(self, asked: float | None, resample: float = RESAMPLE_TEMPERATURE) -> float | None:
        """The sampling temperature this mode runs at: --resample-temperature for fresh samples,
        --temperature (None: the provider's default) for the others."""
        return resample if self.fresh else asked


MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode(name="single", label="single attempt", reflexion=False, max_retries=0),
        Mode(name="raw", label="retries, raw test output", reflexion=False, max_retries=MAX_ATTEMPTS - 1),
        Mode(name="reflexion", label="reflexion retries", reflexion=True, max_retries=MAX_ATTEMPTS - 1),
        Mode(name="resample", label="fresh samples (resampling)", reflexion=False, max_retries=MAX_ATTEMPTS - 1,
             fresh=True),
    )
}


# Opt-in (`--modes ...,reflexion1`): reflexion retries at one call each, the reflection
# written by the retry's own reply (reflexion.oneCall).
ONE_CALL = Mode(name="reflexion1", label="reflexion, one call per retry", reflexion=True,
                max_retries=MAX_ATTEMPTS - 1, one_call=True)
# Opt-in (`--modes ...,adaptive`): one call per retry, each failure repaired or started
# afresh by its class and the record (retry.strategy "adaptive").
ADAPTIVE = Mode(name="adaptive", label="adaptive: repair or resample", reflexion=True,
                max_retries=MAX_ATTEMPTS - 1, one_call=True, strategy="adaptive")
# Not goldenloop: the model asked directly, once per problem (see control.py).
CONTROL = Mode(name="control", label="direct prompt (control)", reflexion=False, max_retries=0)
# Opt-in (`--modes ...,tree`): reflexion retries as a tree search, `retry.strategy: "tree"`
# (width 2, depth 2): two candidates from the stub, then two from the better one.
TREE = Mode(name="tree", label="reflexion, tree search", reflexion=True, max_retries=MAX_ATTEMPTS - 1,
            strategy="tree")


def parse_modes(text: str) -> list[Mode]:
    known = {**MODES, CONTROL.name: CONTROL, TREE.name: TREE, ONE_CALL.name: ONE_CALL,
             ADAPTIVE.name: ADAPTIVE}
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"--modes takes a comma-separated list of {', '.join(known)} (got {text!r})")
    return [known[n] for n in dict.fromkeys(names)]


def greedy_resampling(modes: list[Mode], resample_temperature: float) -> str | None:
    """Why these modes cannot run at this temperature, in one sentence; None if they can."""
    if resample_temperature == 0 and any(m.fresh for m in modes):
        return ("--modes resample draws independent samples, and at --resample-temperature 0 (greedy) every "
                f"draw is the first attempt again: leave it out (resample then uses {RESAMPLE_TEMPERATURE}) or "
                "set it above 0")
    return None
