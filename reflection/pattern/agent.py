"""The agent a Reflection pattern drives: anything that turns a prompt into an output.

`as_agent` adapts what callers have: an object with `async run(prompt, max_tokens=)`
(an `Agent` already), a `reflection.llm.ChatModel` (asked through `complete`), or a
callable, sync or async, taking the prompt and returning a str or an `AgentOutput`.
An `AgentOutput` may report what happened on the way (steps, tool results, an error),
which the pattern's triggers read.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from reflection.llm import ChatModel
from reflection.schema import Usage


@dataclass(frozen=True)
class ToolResult:
    """What one tool call returned during a run; `ok` False when the tool failed."""

    tool: str
    output: str
    ok: bool = True


@dataclass(frozen=True)
class AgentStep:
    """One intermediate step of a multi-step run: its text and what went wrong, if anything."""

    text: str
    tool: ToolResult | None = None
    error: str | None = None


@dataclass(frozen=True)
class AgentOutput:
    """An agent's answer to one prompt, and what it reported on the way."""

    text: str
    usage: Usage | None = None
    steps: Sequence[AgentStep] = ()
    tool_results: Sequence[ToolResult] = ()
    error: str | None = None  # the run failed; `text` is what it left, maybe nothing

    def all_tool_results(self) -> list[ToolResult]:
        """Tool results reported directly and inside steps, in order."""
        return [*self.tool_results, *(s.tool for s in self.steps if s.tool is not None)]


@runtime_checkable
class Agent(Protocol):
    """What the pattern needs: one prompt in, one output out."""

    async def run(self, prompt: str, *, max_tokens: int | None = None) -> AgentOutput: ...


SYSTEM = "You produce the requested work in full. Reply with the work itself, nothing around it."


@dataclass
class ModelAgent:
    """A ChatModel as an agent: the prompt is the user message."""

    model: ChatModel
    system: str = SYSTEM
    timeout_s: float | None = None

    async def run(self, prompt: str, *, max_tokens: int | None = None) -> AgentOutput:
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": prompt}]
        reply = await self.model.complete(messages, timeout=self.timeout_s, max_tokens=max_tokens)
        usage = Usage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens, cost_usd=reply.cost_usd)
        return AgentOutput(reply.text, usage=usage)


AgentFunction = Callable[[str], "str | AgentOutput | Awaitable[str | AgentOutput]"]


@dataclass
class CallableAgent:
    """A function (sync or async) of the prompt returning a str or an AgentOutput."""

    function: AgentFunction

    async def run(self, prompt: str, *, max_tokens: int | None = None) -> AgentOutput:
        result = self.function(prompt)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, AgentOutput):
            return result
        if isinstance(result, str):
            return AgentOutput(result)
        raise TypeError(f"the agent returned {type(result).__name__}; expected str or AgentOutput")


def as_agent(agent: object) -> Agent:
    """Any supported agent shape as an `Agent`; TypeError naming the shapes otherwise."""
    if isinstance(agent, Agent):
        return agent
    if isinstance(agent, ChatModel):
        return ModelAgent(agent)
    if callable(agent):
        return CallableAgent(agent)  # type: ignore[arg-type]
    raise TypeError(
        f"{type(agent).__name__} is not an agent: give an object with async run(prompt), "
        "a ChatModel, or a function of the prompt returning str or AgentOutput"
    )
