"""What the sandbox (orchestrator/sandbox) costs per command, and how fast a tree dies.

Start cost: the wall time of running `true`, from spawn to reaped, four ways in turn each
repeat (the order rotates, so load on the machine hits all alike): directly; a bare
`python -P -c pass` (the interpreter's own start, the floor under the wrapper); through the
wrapper watching its parent only (`restrict=False`); and through the wrapper restricting
writes with Landlock to one folder. Medians of the repeats, and the median of the paired
differences against `true` run directly.

Kill time: a parent process starts the wrapper (Landlock on where available) on a shell
that leaves two daemons behind (setsid, then their shell exits) and runs a foreground
sleep. Once all have written their pid files, the parent is SIGKILLed; the figure is the
time until the wrapper and every process of the command are gone (zombies count as gone),
polled every 0.5 ms.

    .venv/bin/python bench/sandbox_bench.py [--repeats 21] [--kills 10]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import precompile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a plain checkout works too

from orchestrator.sandbox import abi, unavailable_reason, wrap  # noqa: E402

PARENT = r"""
import subprocess, sys
from orchestrator.sandbox import wrap
command, folder, restrict = sys.argv[1:4]
argv = wrap(["/bin/sh", "-c", command], writable=[folder], restrict=restrict == "1")
child = subprocess.Popen(argv, cwd=folder, start_new_session=True)
print(child.pid, flush=True)
child.wait()
"""
ESCAPING = """
setsid sh -c 'sleep 1000 & echo $! > daemon.pid'
setsid sh -c '(sleep 1000; echo late > late.txt) & echo $! > late.pid'
echo $$ > foreground.pid
exec sleep 1000
"""
PID_FILES = ("daemon.pid", "late.pid", "foreground.pid")


def ways(folder: Path) -> dict[str, list[str]]:
    found = {"true": ["true"], "python -P -c pass": [sys.executable, "-P", "-c", "pass"],
             "wrapper, parent only": wrap(["true"], writable=[folder], restrict=False)}
    if abi():
        found["wrapper + Landlock"] = wrap(["true"], writable=[folder])
    return found


def start_ms(repeats: int, folder: Path) -> dict[str, list[float]]:
    """Wall milliseconds of each way to run `true`, per repeat."""
    commands = ways(folder)
    names = list(commands)
    figures: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats + 1):  # the first is a warm-up
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
            began = time.perf_counter()
            subprocess.run(commands[name], cwd=folder, check=True, start_new_session=True)
            if repeat:
                figures[name].append((time.perf_counter() - began) * 1000)
    return figures


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 :].startswith((b"Z", b"X"))


def _pid_in(path: Path) -> int | None:
    text = path.read_text() if path.exists() else ""
    return int(text) if text.endswith("\n") else None


def kill_ms(folder: Path) -> float:
    """Milliseconds from the parent's SIGKILL until the wrapper and the command are gone."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT, ESCAPING, str(folder), "1" if abi() else "0"],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    pids = [int(parent.stdout.readline())]
    deadline = time.monotonic() + 30
    while not all(_pid_in(folder / name) for name in PID_FILES):
        if time.monotonic() > deadline:
            raise SystemExit("the command never wrote its pid files")
        time.sleep(0.005)
    pids += [_pid_in(folder / name) for name in PID_FILES]
    began = time.perf_counter()
    os.kill(parent.pid, signal.SIGKILL)
    while not all(_gone(pid) for pid in pids):
        if time.perf_counter() - began > 30:
            raise SystemExit(f"processes {pids} outlived their parent by 30 s")
        time.sleep(0.0005)
    elapsed = (time.perf_counter() - began) * 1000
    parent.wait()
    parent.stdout.close()
    return elapsed


def table(starts: dict[str, list[float]], kills: list[float]) -> str:
    direct = starts["true"]
    lines = [f"{'run `true`':<24} {'median ms':>10} {'+ over direct':>14}", "-" * 50]
    for name, times in starts.items():
        extra = statistics.median(t - d for t, d in zip(times, direct, strict=True))
        lines.append(f"{name:<24} {statistics.median(times):>10.1f} {extra:>14.1f}")
    if not abi():
        lines.append(f"(no Landlock row: {unavailable_reason()})")
    lines += ["", f"parent SIGKILLed -> tree gone: median {statistics.median(kills):.1f} ms, "
                  f"max {max(kills):.1f} ms over {len(kills)} kills"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21, help="runs of `true` each way (after one warm-up)")
    parser.add_argument("--kills", type=int, default=10, help="parents to SIGKILL")
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        raise SystemExit("the sandbox's guarantees are Linux's: nothing to measure here")
    precompile()
    with tempfile.TemporaryDirectory(prefix="sandbox-bench-") as tmp:
        starts = start_ms(args.repeats, Path(tmp))
        kills = []
        for n in range(args.kills):
            folder = Path(tmp) / f"kill-{n}"
            folder.mkdir()
            kills.append(kill_ms(folder))
    print(f"Landlock ABI {abi()}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}")
    print(table(starts, kills))


if __name__ == "__main__":
    main()
