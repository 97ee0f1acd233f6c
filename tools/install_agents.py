#!/usr/bin/env python3
"""Install the real coding agents the integration suite drives, into `.agents/` here.

    python3 tools/install_agents.py            every agent below
    python3 tools/install_agents.py aider      some of them

Each agent goes into a folder of its own under `.agents/` (git-ignored): a Python agent
into a virtual environment of its own (their dependency pins clash with goldenloop's),
an npm agent under `.agents/npm`. `tests/agents/programs.py` finds them there. The
versions are the ones tried and documented in docs/AGENTS.md. Only the standard library
is used: CI runs this before `python3 dev.py test`. An agent that fails to install is
named and skipped (exit 1 at the end), so the others still run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / ".agents"

# name -> ("pypi" | "npm", the package spec); the program's path is in tests/agents/programs.py
PACKAGES: dict[str, tuple[str, str]] = {
    "claude-code": ("npm", "@anthropic-ai/claude-code@2.1.197"),
    "codex": ("npm", "@openai/codex@0.169.0"),
    "aider": ("pypi", "aider-chat==0.86.2"),
    "mini-swe-agent": ("pypi", "mini-swe-agent==2.4.6"),
    "openhands": ("pypi", "openhands==1.16.0"),  # the CLI; openhands-ai has no `openhands` command
}
# The Python an agent's virtual environment needs, when not this one: OpenHands 1.16
# requires Python 3.12 exactly.
PYTHONS: dict[str, str] = {"openhands": "python3.12"}


TICK_S = 30.0  # how often a long install says it is still at work


def install(name: str, place: str = "") -> bool:
    source, spec = PACKAGES[name]
    print(f"{place}installing {name} ({spec}) ...", flush=True)
    started = time.monotonic()
    with _ticking(name, started):
        done = _install(name, source, spec)
    print(f"{place}{name} {'installed' if done else 'NOT installed'} in {_clock(time.monotonic() - started)}",
          flush=True)
    return done


@contextmanager
def _ticking(name: str, started: float) -> Iterator[None]:
    """A line every TICK_S while `name` installs: a large one takes minutes."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(TICK_S):
            print(f"  still installing {name}: {_clock(time.monotonic() - started)} so far", flush=True)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()


def _clock(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def _install(name: str, source: str, spec: str) -> bool:
    try:
        if source == "pypi":
            folder = AGENTS / name
            if not (folder / "bin" / "python").exists():
                _venv(name, folder)
            _run([str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                  spec])
        else:
            _run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--save-exact", "--prefix", str(AGENTS / "npm"),
                  spec])  # exact: installing the next npm agent keeps this one's version
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"{name} was not installed: {exc}", flush=True)
        return False
    return True


def _venv(name: str, folder: Path) -> None:
    if name in PYTHONS:
        _run([_python(PYTHONS[name]), "-m", "venv", str(folder)])
    else:
        venv.EnvBuilder(with_pip=True).create(folder)


def _python(command: str) -> str:
    """A `command` (python3.X) that runs: on PATH, else one pyenv installed but did not select."""
    version = command.removeprefix("python")
    pyenv = sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/{command}"), reverse=True)
    for candidate in [shutil.which(command), *map(str, pyenv)]:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    raise OSError(f"{command} is needed and was not found")


def _run(argv: list[str]) -> None:
    subprocess.run(argv, check=True, timeout=1200)


def main(argv: list[str]) -> int:
    names = argv or list(PACKAGES)
    unknown = [n for n in names if n not in PACKAGES]
    if unknown:
        print(f"unknown agent(s): {', '.join(unknown)}; known: {', '.join(PACKAGES)}")
        return 2
    AGENTS.mkdir(exist_ok=True)
    failed = [name for n, name in enumerate(names, 1) if not install(name, f"[{n}/{len(names)}] ")]
    if failed:
        print(f"not installed: {', '.join(failed)}; their tests are skipped, saying so", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
