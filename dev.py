#!/usr/bin/env python3
"""Set up goldenloop's own environment, then run the demo or the tests.

    python3 dev.py demo     run do-one-task on a copy of examples/demo, offline
    python3 dev.py test     run the whole test suite (extra args go to pytest)

The first call creates `.venv/` next to this file and installs what the command needs
into it: the package and pytest for the demo, the package with its test extra for the tests (a
PostgreSQL server among them, hundreds of MB). pip shows its own progress. Later calls
reinstall only when pyproject.toml changed. Only the standard library is used here, so a
machine with Python >= 3.11 and git is enough.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
EXTRAS = {"demo": "[demo]", "test": "[test]"}  # what each command needs installed (pytest both)


def stamp(extra: str) -> Path:
    """The file that says which pyproject.toml `extra` was last installed from."""
    return VENV / f".goldenloop-installed-{extra.strip('[]')}"


def venv_python() -> Path:
    bindir = "Scripts" if os.name == "nt" else "bin"
    return VENV / bindir / ("python.exe" if os.name == "nt" else "python")


def ensure_environment(command: str) -> Path:
    """Create the virtual environment and (re)install what `command` needs when
    pyproject.toml changed since it was installed."""
    if sys.version_info < (3, 11):
        sys.exit(f"goldenloop needs Python 3.11 or newer; this is {sys.version.split()[0]}.")
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    python, extra = venv_python(), EXTRAS[command]
    done = [stamp(e) for e in {extra, EXTRAS["test"]}]  # the test extra holds the demo's needs too
    if python.exists() and any(s.exists() and s.read_text() == wanted for s in done):
        return python
    if not python.exists():
        print("Creating .venv (first run only) ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    what = {"[demo]": "goldenloop and pytest", "[test]": "goldenloop and its test tools (a PostgreSQL server "
            "among them)"}[extra]
    print(f"Installing {what} into .venv; pip shows its progress ...", flush=True)
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "on"]
    subprocess.run([*pip, "--editable", f"{ROOT}{extra}"], check=True)
    stamp(extra).write_text(wanted)
    return python


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"demo", "test"}:
        print(__doc__.strip())
        return 2
    try:
        python = ensure_environment(argv[0])
    except subprocess.CalledProcessError as exc:
        print(f"Installing the environment failed (exit {exc.returncode}); see pip's output above.")
        return 2
    command, rest = argv[0], argv[1:]
    if command == "demo":
        args = [str(python), str(ROOT / "examples" / "run_demo.py"), *rest]
    else:
        args = [str(python), "-m", "pytest", *rest]
    return subprocess.call(args, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
