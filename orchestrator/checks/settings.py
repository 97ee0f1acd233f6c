"""What the checks are and how they run: one object, handed to every check that runs them.

verify, preflight, flaky reruns and the judge all run the same commands with the same
limits; they read them from here, never from the config each on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

Kind = Literal["typecheck", "test", "agent"]  # agent: an external coding agent run
DEFAULT_OUTPUT_CAP = 256 * 1024  # bytes of a command's output kept (head and tail)


@dataclass(frozen=True)
class CheckSettings:
    typecheck: tuple[str, ...] = ()  # run first; a failure stops the rest
    tests: tuple[str, ...] = ()
    timeout_s: float = 600.0  # each command
    digest_tokens: int = 1500  # the size of a failure's digest
    output_cap_bytes: int = field(default=DEFAULT_OUTPUT_CAP)

    @property
    def steps(self) -> list[tuple[Kind, str]]:
        """Every command in the order it runs."""
        return [("typecheck", c) for c in self.typecheck] + [("test", c) for c in self.tests]

    @property
    def any(self) -> bool:
        return bool(self.typecheck or self.tests)

    @property
    def last_command(self) -> str | None:
        steps = self.steps
        return steps[-1][1] if steps else None

    def only(self, kind: Kind, command: str) -> CheckSettings:
        """The same limits, one command."""
        if kind == "typecheck":
            return replace(self, typecheck=(command,), tests=())
        return replace(self, typecheck=(), tests=(command,))
