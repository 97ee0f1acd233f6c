"""`retry.strategy: "tree"`: retries as a small tree search over candidate attempts
(LATS, seed 003), instead of each retry building on the last attempt.

A node is a failed attempt's tree, scored by the checks (the share of tests passing,
`Verdict.score`); the root is the subtask's start. The next attempt's starting tree:

- **another candidate** from the same starting tree while it has fewer than `width`
  children: the tree goes back to that start, and the prompt shows the failed candidate
  as an approach to avoid ("try another way");
- else **the best node expanded**: of the nodes that may still have children (less than
  `depth` deep, fewer than `width` children, not an attempt that weakened the tests or
  changed nothing), the highest score, the latest of equals; the tree becomes that
  node's, and the prompt shows its diff and failure as a linear retry would;
- the subtask's start again when no node is left to expand.

What stays as in the linear loop: the attempts are bounded by `reflexion.maxRetries`;
nothing is committed unless the checks pass (a candidate that passes ends the search);
each tree change is a roll-back (`SubtaskState.roll_back_to`), which keeps the user's
files; reflections are written after each failed candidate and shown to the next. The
convergence rules that read a sequence of retries (plateau, oscillation, diminishing
returns, regression) do not stop a search: siblings are no sequence. An environment
failure still stops it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from orchestrator.loop.escalation import AttemptSnapshot
from orchestrator.loop.prompt import LastAttempt


class _Earlier(Protocol):
    def snapshot(self, number: int) -> AttemptSnapshot | None: ...


class SearchState(Protocol):
    """What the search uses of the subtask's state (loop/state.py's SubtaskState)."""

    earlier: _Earlier
    start: int | None

    async def roll_back_to(self, attempt: int | None, *, event: str | None = None) -> None: ...

    def event(self, name: str, **fields: Any) -> None: ...

BARREN = ("integrity", "no_change")  # outcomes whose tree is never a starting point


@dataclass
class Node:
    attempt: int | None  # None: the subtask's start
    depth: int
    score: float
    expandable: bool
    diff: str = ""
    failure: str = ""
    children: int = 0


class TreeSearch:
    """One subtask's search tree in one run."""

    def __init__(self, width: int, depth: int) -> None:
        self.width, self.depth = width, depth
        self.root = Node(None, 0, 0.0, expandable=True)
        self.nodes: dict[int, Node] = {}
        self.current = self.root  # the node the attempt under way started from

    async def branch(self, s: SearchState, number: int, diff: str, failure: str, outcome: str) -> LastAttempt:
        """Add failed attempt `number` under the node it started from, put the tree where
        the next attempt starts, and return what that attempt's prompt says about it."""
        parent = self.current
        snapshot = s.earlier.snapshot(number)
        node = Node(number, parent.depth + 1, snapshot.score if snapshot else 0.0,
                    expandable=outcome not in BARREN and parent.depth + 1 < self.depth, diff=diff, failure=failure)
        self.nodes[number] = node
        parent.children += 1
        start = parent if parent.children < self.width else self._best()
        await s.roll_back_to(start.attempt)
        s.start, self.current = start.attempt, start
        kind = "sibling" if start is parent else "expand"
        # with every score 0 the "best" is only the latest: the console must not call it best
        unscored = all(n.score == 0 for n in self.nodes.values())
        s.event("tree_search", attempt=number, score=round(node.score, 4), depth=node.depth, parent=parent.attempt,
                next=kind, startsFrom=start.attempt, width=self.width, maxDepth=self.depth, noneScored=unscored)
        if start is parent or start.attempt is None:
            return LastAttempt(number, diff, failure, other_way_from=_from(start))
        return LastAttempt(start.attempt or number, start.diff, start.failure, tree_moved=start.attempt != number)

    async def restart(self, s: SearchState) -> None:
        """After an attempt that gave back a failed attempt's code: its start again."""
        await s.roll_back_to(self.current.attempt)
        s.start = self.current.attempt

    def _best(self) -> Node:
        open_ = [n for n in self.nodes.values() if n.expandable and n.children < self.width]
        if not open_:
            return self.root
        return max(open_, key=lambda n: (n.score, n.attempt or 0))


def _from(node: Node) -> str:
    """Where a candidate started, in the words of its prompt."""
    if node.attempt is None:
        return "the subtask's start"
    return f"attempt {node.attempt}'s changes, which failed like this:\n```\n{node.failure}\n```"
