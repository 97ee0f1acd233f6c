"""Where an agent may write: the attempt's tree, temporary folders, its own homes.

An agent runs under the sandbox (orchestrator/sandbox) unless the project switched it off
(`executor.sandbox: false`). It may then change files only beneath

- the attempt's tree, never the git folder a worktree's `.git` file points to, so the
  history, refs and index stay goldenloop's;
- a temporary folder of the attempt's own, which TMPDIR names, and the system's temporary
  folder too unless that holds the user's checkout or goldenloop's own folder (a checkout
  under /tmp would otherwise be writable through it);
- its own configuration and cache folders in the home folder (its preset's `homes`), made
  when missing so that a first run can log in and keep its settings;
- what the project lists in `executor.writable` (`~` is the home folder).

Everything else (the user's checkout, a `.venv` linked into the tree, the home folder) it
may read and run, not change. Where Landlock is missing, the agent still runs, still dies
with goldenloop, and the run says once that it could write anywhere.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from orchestrator.checks.verify import Wrap
from orchestrator.private_home import private_home
from orchestrator.sandbox import unavailable_reason, wrap
from orchestrator.tempfiles import temp_prefix


@dataclass(frozen=True)
class Confinement:
    """One agent's grants."""

    homes: tuple[str, ...] = ()  # home-relative; a folder ends in "/"
    home_variables: tuple[str, ...] = ()  # variables naming a folder of its own, when set
    extra: tuple[str, ...] = ()  # executor.writable, as the user wrote them
    keep_out: tuple[Path, ...] = ()  # never granted through the system's temporary folder
    restrict: bool = True  # False: the agent only dies with goldenloop

    def writable(self, tree: Path, temp: Path, env: Mapping[str, str]) -> list[Path]:
        home = Path.home()
        for name in self.homes:
            if name.endswith("/"):
                (home / name).mkdir(parents=True, exist_ok=True, mode=0o700)
        grants = [tree, temp, *(home / name for name in self.homes)]
        grants += [Path(env[name]) for name in self.home_variables if env.get(name)]
        system = Path(tempfile.gettempdir()).resolve()
        if not any(system == kept or system in kept.parents for kept in (*self.keep_out, private_home().resolve())):
            grants.append(system)
        return grants + [Path(os.path.expanduser(path)) for path in self.extra]

    @contextmanager
    def attempt(self, tree: Path, env: Mapping[str, str], *also: Path) -> Iterator[tuple[Wrap, dict[str, str]]]:
        """For one attempt in `tree` with environment `env` (and `also`, the agent's scratch
        folder): what turns the agent's command line into the sandboxed one, and `env` with
        its own temporary folder (TMPDIR, and TMUX_TMPDIR for tmux's sockets), removed
        afterwards."""
        temp = Path(tempfile.mkdtemp(prefix=temp_prefix("agent")))  # a killed run's: swept by the next
        try:
            grants = [*self.writable(tree, temp, env), *also] if self.restrict else []
            own = {**env, "TMPDIR": str(temp), "TMUX_TMPDIR": str(temp)}
            yield (lambda argv: wrap(argv, writable=grants, restrict=self.restrict)), own
        finally:
            shutil.rmtree(temp, ignore_errors=True)


def confinement(homes: Sequence[str] = (), extra: Sequence[str] = (), *, sandbox: bool = True,
                keep_out: Sequence[Path] = (), home_variables: Sequence[str] = ()) -> Confinement:
    """The agent's grants; writes are restricted when the project wants it and the kernel can."""
    return Confinement(tuple(homes), tuple(home_variables), tuple(extra), tuple(Path(p).resolve() for p in keep_out),
                       restrict=sandbox and unavailable_reason() is None)


def sandbox_notice(sandbox: bool) -> str | None:
    """The sentence a run says once when its agent could write outside its tree; None when it cannot."""
    if not sandbox:
        return ("executor.sandbox is false: the agent may change any file you can; it still stops when "
                "goldenloop stops")
    reason = unavailable_reason()
    if reason is None:
        return None
    return (f"the agent runs without a sandbox ({reason}): it may change files outside its worktree; "
            "`goldenloop doctor` says more")
