"""Deterministic agents and evaluators for the Reflection pattern's tests.

An output carries its own score as `score=0.62`; the `quality` criterion reads it back,
so a test decides every version's score by what its agent returns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from reflection.pattern import AgentOutput, QualityCriterion


def read_score(output: str) -> float:
    found = re.search(r"score=([0-9.]+)", output)
    return float(found.group(1)) if found else 0.0


QUALITY = QualityCriterion("quality", threshold=0.0, evaluator="function",
                           evaluator_config={"function": read_score})


@dataclass
class Outputs:
    """An agent answering each prompt with the next of `outputs` (str or AgentOutput)."""

    outputs: Sequence[str | AgentOutput | Exception]
    prompts: list[str] = field(default_factory=list)

    async def run(self, prompt: str, *, max_tokens: int | None = None) -> AgentOutput:
        self.prompts.append(prompt)
        item = self.outputs[min(len(self.prompts), len(self.outputs)) - 1]
        if isinstance(item, Exception):
            raise item
        return item if isinstance(item, AgentOutput) else AgentOutput(item)


def scores(result: object) -> list[float]:
    return [round(v.evaluation.overall_score, 2) for v in result.history.versions]  # type: ignore[attr-defined]
