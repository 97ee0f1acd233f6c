"""`goldenloop doctor`: what this machine lets goldenloop guarantee, each tried for real.

It runs the sandbox's wrapper on a shell that writes inside a granted folder and outside
it, and one that leaves a daemon behind, so each line reports what the kernel did, not
what goldenloop expects of it. In a project it also says which agent the project runs,
whether its program is found, where that agent may write, the checks, and which models
the agent and goldenloop call, where, and whether their keys are set (doctor_models.py).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchestrator.config import ConfigError, load_config
from orchestrator.private_home import private_home
from orchestrator.sandbox import abi, unavailable_reason, wrap

EXIT_READY, EXIT_MISSING = 0, 1
PROBE = 'echo in > "$1/in.txt"; echo out > "$2/out.txt" 2>/dev/null; true'
# Starts a shell under the wrapper that leaves a daemon in a session of its own, says its pid, waits.
STARTER = """
import subprocess, sys
from orchestrator.sandbox import wrap
shell = "setsid sleep 300 > /dev/null 2>&1 & echo $!; exec sleep 300"
child = subprocess.Popen(wrap(["/bin/sh", "-c", shell], writable=[], restrict=False), start_new_session=True)
child.wait()
"""
ENDS_WITHIN_S = 5.0


def run_doctor(args: argparse.Namespace) -> int:
    lines: list[tuple[bool, str]] = [_git(), _confined_writes(), _tree_ends()]
    lines += _project(args.dir.resolve())
    lines.append((True, f"goldenloop's own folder (exact patches, worktrees, judge exports): {private_home()}"))
    for ok, line in lines:
        print(f"{'ok  ' if ok else 'NO  '} {line}")
    return EXIT_READY if all(ok for ok, _ in lines) else EXIT_MISSING


def _git() -> tuple[bool, str]:
    if shutil.which("git") is None:
        return False, "git is not on PATH: goldenloop needs it"
    done = subprocess.run(["git", "--version"], capture_output=True, text=True, check=False)
    return True, done.stdout.strip()


def _confined_writes() -> tuple[bool, str]:
    """Whether a sandboxed shell can write in its grant and not beside it, tried."""
    reason = unavailable_reason()
    if reason:
        return False, f"agents cannot be kept in their worktree: {reason}"
    with tempfile.TemporaryDirectory(prefix="goldenloop-doctor-") as tmp:
        granted, beside = Path(tmp, "granted"), Path(tmp, "beside")
        granted.mkdir()
        beside.mkdir()
        argv = wrap(["/bin/sh", "-c", PROBE, "probe", str(granted), str(beside)], writable=[granted])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, start_new_session=True, check=False)
        wrote_in, wrote_out = (granted / "in.txt").exists(), (beside / "out.txt").exists()
    if done.returncode == 0 and wrote_in and not wrote_out:
        return True, f"agents write only in their worktree, temp and config folders (Landlock ABI {abi()}, tried)"
    detail = done.stderr.strip() or f"exit code {done.returncode}"
    return False, f"the sandbox did not hold when tried (wrote inside: {wrote_in}, outside: {wrote_out}; {detail})"


def _tree_ends() -> tuple[bool, str]:
    """Whether a daemon a sandboxed shell leaves behind dies when its starter is SIGKILLed, tried."""
    if not sys.platform.startswith("linux"):
        return False, "an agent's processes may outlive a goldenloop that is killed: that needs Linux"
    starter = subprocess.Popen([sys.executable, "-c", STARTER], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        daemon = int(starter.stdout.readline() or 0)  # type: ignore[union-attr]
    finally:
        starter.kill()
        starter.wait()
        starter.stdout.close()  # type: ignore[union-attr]
    deadline = time.monotonic() + ENDS_WITHIN_S
    while daemon and _alive(daemon) and time.monotonic() < deadline:
        time.sleep(0.01)
    if daemon and not _alive(daemon):
        return True, "an agent's processes end with goldenloop, even when it is SIGKILLed (tried)"
    return False, f"a process an agent left behind outlived a SIGKILLed goldenloop by {ENDS_WITHIN_S:g} s"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return not state[state.rfind(b")") + 2 :].startswith((b"Z", b"X"))


def _project(folder: Path) -> list[tuple[bool, str]]:
    if not folder.is_dir():
        return [(False, f"{folder}: no such folder (--dir names the project)")]
    try:
        loaded = load_config(folder)
    except ConfigError as exc:
        return [(False, f"{folder}: project.json cannot be used: {exc}")]
    if loaded.path is None:
        return [(True, f"{folder}: no .openagents/project.json, so nothing about a project (`goldenloop init` "
                       "writes one)")]
    from orchestrator.session.opening import lend_agent_model

    config = lend_agent_model(loaded.config)
    from orchestrator.commands.doctor_models import model_lines

    checks = [*config.typecheck_commands, *config.test_commands]
    found = [(True, "checks: " + ", ".join(f"`{c}`" for c in checks)) if checks else
             (False, f"{folder}: project.json sets no testCommands or typecheckCommands: no attempt could be checked")]
    found += model_lines(config)
    executor = config.executor
    if executor.kind == "builtin":
        return [*found, (True, f"{folder}: the builtin editor makes the edits (no agent program to confine)")]
    if executor.kind != "command":
        from orchestrator.executors.presets import PRESETS

        program = executor.program or PRESETS[executor.kind].program
        where = shutil.which(program)
        found.append((where is not None, f"{executor.kind}: {where}" if where else
                      f"{executor.kind}: {program} is not on PATH (install it, or set executor.program)"))
    if not executor.sandbox:
        found.append((False, f"{folder}: executor.sandbox is false: the agent may change any file you can"))
    return found
