"""Benchmark of the JSONL reflection store: appends, recent() latency, cold open.

    .venv/bin/python bench/store_bench.py [--sizes 10000,100000,1000000]

Prints one figure per line, then a summary table. Targets: >= 20,000 appends/s in one
process; recent(..., 3) median under 1 ms at 1M records in a warm process; a cold open
of the largest file within 2x of a bare loop that reads it and orjson.loads every line.
Everything happens in a temp dir that is removed afterwards.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a plain checkout works too

from reflection.schema import FailureCategory, FailureType, Reflection, Usage  # noqa: E402
from reflection.store import JsonlReflectionStore  # noqa: E402

RECORDS_PER_SUBTASK = 50


def sample(subtask: str, attempt: int = 1) -> Reflection:
    """A reflection the size of a real one, with every optional key set."""
    return Reflection(
        session_id="session-bench",
        task_id="task-42",
        subtask_id=subtask,
        attempt_number=attempt,
        category=FailureCategory.ROOT_CAUSE,
        analysis="The parser drops the last field when the input has no trailing newline, "
        "so test_parse_tail fails with a missing key.",
        suggestion="Flush the pending field after the loop instead of only on a separator.",
        action_items=["Handle EOF in parse_row", "Add a test for input without newline"],
        confidence=0.7,
        failure_type=FailureType.TEST_FAILURE,
        error_signature="9f1c2e7ab4d05a11",
        files_modified=["src/csvlite/parser.py", "tests/test_parser.py"],
        source="llm",
        model="anthropic/claude-sonnet-4-5",
        usage=Usage(input_tokens=1834, output_tokens=212, cost_usd=0.00867),
    )


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_appends(path: Path, n: int) -> float:
    records = [sample(f"sub-{i % 100}", 1 + i % 3) for i in range(n)]
    store = JsonlReflectionStore(path)
    seconds = timed(lambda: [store.append(r) for r in records])
    store.close()
    return n / seconds


def _append_worker(path: str, n: int, barrier: Any, results: Any) -> None:
    records = [sample(f"sub-{i % 100}") for i in range(n)]
    store = JsonlReflectionStore(Path(path))
    barrier.wait()
    start = time.monotonic()  # system-wide clock, comparable across processes
    for record in records:
        store.append(record)
    results.put((start, time.monotonic()))


def bench_parallel_appends(path: Path, procs: int, per_proc: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    args = (str(path), per_proc, barrier, results)
    workers = [ctx.Process(target=_append_worker, args=args) for _ in range(procs)]
    for worker in workers:
        worker.start()
    spans = [results.get() for _ in workers]
    for worker in workers:
        worker.join()
    lines = path.read_bytes().count(b"\n")
    if lines != procs * per_proc:
        raise SystemExit(f"parallel appends lost lines: {lines} != {procs * per_proc}")
    return procs * per_proc / (max(end for _, end in spans) - min(start for start, _ in spans))


def write_file(path: Path, size: int) -> list[str]:
    """size records over size/RECORDS_PER_SUBTASK subtasks, written directly (fast)."""
    proto = sample("x").to_dict()
    subtasks = [f"sub-{i}" for i in range(max(1, size // RECORDS_PER_SUBTASK))]
    with path.open("wb") as out:
        for i in range(size):
            proto["id"] = f"{i:032x}"
            proto["subtaskId"] = subtasks[i % len(subtasks)]
            proto["attemptNumber"] = 1 + i // len(subtasks)
            out.write(orjson.dumps(proto) + b"\n")
    return subtasks


def bench_recent(
    store: JsonlReflectionStore, subtasks: list[str], queries: int
) -> tuple[float, float]:
    """Median and p99 of recent(..., 3) in ms, on a warm store."""
    store.count()  # warm: index built
    rng = random.Random(7)
    latencies = []
    for _ in range(queries):
        sid = rng.choice(subtasks)
        start = time.perf_counter_ns()
        got = store.recent(sid, 3)
        latencies.append((time.perf_counter_ns() - start) / 1e6)
        if len(got) != 3:
            raise SystemExit(f"recent({sid!r}) returned {len(got)} records")
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.99) - 1]


def floor_read(path: Path) -> None:
    with path.open("rb") as src:
        for line in src:
            orjson.loads(line)


def cold_open(path: Path) -> None:
    store = JsonlReflectionStore(path)
    store.recent("sub-0", 3)
    store.close()


@dataclass
class Figures:
    rows: list[tuple[str, str, str]]

    def add(self, name: str, value: str, target: str = "") -> None:
        print(f"{name}: {value}", flush=True)
        self.rows.append((name, value, target))

    def table(self) -> None:
        width = max(len(name) for name, _, _ in self.rows)
        vwidth = max(len(value) for _, value, _ in self.rows)
        print()
        print(f"{'figure':<{width}}  {'value':>{vwidth}}  target")
        print(f"{'-' * width}  {'-' * vwidth}  ------")
        for name, value, target in self.rows:
            print(f"{name:<{width}}  {value:>{vwidth}}  {target}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="store sizes for recent()")
    parser.add_argument("--appends", type=int, default=20000, help="appends in one process")
    parser.add_argument("--procs", type=int, default=4, help="processes appending at once")
    parser.add_argument("--queries", type=int, default=2000, help="recent() calls per size")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the cold open; best counts")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    figures = Figures([])
    with tempfile.TemporaryDirectory(prefix="store-bench-") as tmp:
        root = Path(tmp)
        rate = bench_appends(root / "one.jsonl", args.appends)
        figures.add("appends/s, 1 process", f"{rate:,.0f}", ">= 20,000")
        rate = bench_parallel_appends(root / "many.jsonl", args.procs, args.appends // args.procs)
        figures.add(f"appends/s, {args.procs} processes", f"{rate:,.0f}")
        for size in sizes:
            path = root / f"recent-{size}.jsonl"
            subtasks = write_file(path, size)
            store = JsonlReflectionStore(path)
            median, p99 = bench_recent(store, subtasks, args.queries)
            store.close()
            target = "< 1 ms" if size >= 1_000_000 else ""
            figures.add(f"recent(3) median ms, {size:,} records", f"{median:.3f}", target)
            figures.add(f"recent(3) p99 ms, {size:,} records", f"{p99:.3f}")
            if size != max(sizes):
                path.unlink()
        largest = root / f"recent-{max(sizes)}.jsonl"
        floor_read(largest)  # page cache warm for both
        floor = min(timed(lambda: floor_read(largest)) for _ in range(args.repeat))
        cold = min(timed(lambda: cold_open(largest)) for _ in range(args.repeat))
        figures.add(f"floor s (read + orjson.loads), {max(sizes):,}", f"{floor:.2f}")
        figures.add(f"cold open s, {max(sizes):,} records", f"{cold:.2f}")
        figures.add("cold open / floor", f"{cold / floor:.2f}x", "<= 2x")
    figures.table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
