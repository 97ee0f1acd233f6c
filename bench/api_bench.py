"""How many heuristic reflections per second does `goldenloop serve` answer, and how fast?

The app (orchestrator/api) is served by uvicorn, one worker, in a child process on a
free loopback port, with a temp folder as its only root. The client (httpx, this
process) keeps `--concurrency` POST /api/skills/reflect requests in flight, each with
its own sessionId and a realistic 12-turn conversation (files, tools, a failing then
passing test run, a secret for the redactor), until `--requests` are answered; each
answer must be 200 and lands in the project's history file (fsynced per line). That
is one repeat; `--repeats` of them follow one warm-up repeat. Prints requests per
second and p50/p99 latency of each repeat, then their medians. Client and server share
the machine: on a small one the client's own CPU is part of the figure.

F5, the server's CPU per request against a minimal Starlette endpoint on the same uvicorn:
a second child serves one POST route that reads the body and answers a small JSON, with
the same uvicorn settings (`server_config`). Each repeat sends the same requests to both
servers, taking turns which goes first; the CPU of each server process (user + sys, from
/proc/<pid>/stat) over its batch, divided by the requests, gives a paired ratio per
repeat; the medians are printed.

    .venv/bin/python bench/api_bench.py [--requests 500] [--concurrency 16] [--repeats 5] [--memory on|off]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a plain checkout works too

from orchestrator.api.settings import ApiSettings  # noqa: E402

CONVERSATION = [
    {"role": "user", "content": "The CSV parser drops the last field when a line has no trailing newline. Fix it."},
    {"role": "tool", "name": "Read", "content": "src/csvlite/parser.py\n" + "def parse_row(line):\n    ...\n" * 20},
    {"role": "tool", "name": "Grep", "content": "src/csvlite/parser.py:12: fields.append(current)"},
    {"role": "tool", "name": "Bash",
     "content": "pytest -q\nFAILED tests/test_parser.py::test_tail\n"
                "AssertionError: assert ['a', 'b'] == ['a', 'b', 'c']\n1 failed, 9 passed"},
    {"role": "assistant", "content": "The loop only flushes on a separator. I'll flush after the loop too."},
    {"role": "tool", "name": "Edit", "content": "src/csvlite/parser.py: 1 edit applied"},
    {"role": "tool", "name": "Write", "content": "tests/test_parser.py: added test_no_trailing_newline"},
    {"role": "assistant",
     "content": "Set OPENAI_API_KEY=sk-proj-4fGh8JkLmN2pQrStUvWxYz01AbCdEf in CI for the smoke run."},
    {"role": "tool", "name": "Bash", "content": "pytest -q\n10 passed in 0.05s"},
    {"role": "assistant", "content": "Both tests pass now; try/except around the file open reports a clear error."},
    {"role": "user", "content": "Thanks, anything else?"},
    {"role": "assistant", "content": "Done: parse_row keeps the last field and all tests pass."},
]


def _serve(root: str, to_memory: bool, ports: Any) -> None:
    """The child: uvicorn, one worker, heuristic only, on a port it tells the parent."""
    import uvicorn

    from orchestrator.api.settings import ReflectConfig

    from orchestrator.api.server import server_config
    from orchestrator.commands.serve import listen

    listener = listen("127.0.0.1", 0, backlog=1024)
    ports.put(listener.getsockname()[1])
    settings = ApiSettings(roots=(Path(root),), reflect=ReflectConfig(to_memory=to_memory))
    uvicorn.Server(server_config(settings, log_level="warning")).run(sockets=[listener])


def _serve_minimal(ports: Any) -> None:
    """The child of the denominator: one Starlette POST route, the same uvicorn settings."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from orchestrator.api.server import server_config
    from orchestrator.commands.serve import listen

    async def answer(request: Request) -> JSONResponse:
        await request.body()
        return JSONResponse({"success": True})

    app = Starlette(routes=[Route("/api/skills/reflect", answer, methods=["POST"]),
                            Route("/api/health", lambda request: JSONResponse({"ok": True}))])
    listener = listen("127.0.0.1", 0, backlog=1024)
    ports.put(listener.getsockname()[1])
    config = server_config(ApiSettings(roots=(Path("/"),)), log_level="warning")
    config.app = app
    uvicorn.Server(config).run(sockets=[listener])


def cpu_seconds(pid: int) -> float:
    """User + sys CPU of a process so far."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _wait_until_up(client: httpx.AsyncClient) -> None:
    with anyio.fail_after(30):
        while True:
            try:
                if (await client.get("/api/health")).status_code == 200:
                    return
            except httpx.TransportError:
                await anyio.sleep(0.05)


async def one_repeat(client: httpx.AsyncClient, project: Path, tag: str, requests: int, concurrency: int
                     ) -> tuple[float, float, float]:
    """(requests per second, p50 ms, p99 ms) of one batch."""
    latencies: list[float] = []
    next_n = 0

    async def worker() -> None:
        nonlocal next_n
        while next_n < requests:
            n, next_n = next_n, next_n + 1
            body = {"projectPath": str(project), "sessionId": f"{tag}-{n}", "conversation": CONVERSATION,
                    "taskDescription": "Keep the last CSV field", "maxInsights": 5}
            start = time.perf_counter()
            response = await client.post("/api/skills/reflect", json=body)
            latencies.append(time.perf_counter() - start)
            if response.status_code != 200:
                raise SystemExit(f"request {n} answered {response.status_code}: {response.text}")

    began = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(worker)
    elapsed = time.perf_counter() - began
    cuts = statistics.quantiles(latencies, n=100)
    return requests / elapsed, cuts[49] * 1000, cuts[98] * 1000


async def run(args: argparse.Namespace, servers: dict[str, tuple[int, int]], project: Path
              ) -> tuple[list[tuple[float, float, float]], list[tuple[float, float]]]:
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    (port, pid), (min_port, min_pid) = servers["ours"], servers["minimal"]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=60) as client, \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{min_port}", limits=limits, timeout=60) as minimal:
        await _wait_until_up(client)
        await _wait_until_up(minimal)
        await one_repeat(client, project, "warm", max(50, args.requests // 5), args.concurrency)
        await one_repeat(minimal, project, "warm", max(50, args.requests // 5), args.concurrency)
        figures, cpu = [], []
        for repeat in range(args.repeats):
            for side in ((0, 1) if repeat % 2 else (1, 0)):
                if side:
                    start = cpu_seconds(min_pid)
                    await one_repeat(minimal, project, f"m{repeat}", args.requests, args.concurrency)
                    floor = (cpu_seconds(min_pid) - start) / args.requests
                else:
                    start = cpu_seconds(pid)
                    rate, p50, p99 = await one_repeat(client, project, f"r{repeat}", args.requests,
                                                      args.concurrency)
                    ours = (cpu_seconds(pid) - start) / args.requests
            print(f"repeat {repeat + 1}: {rate:,.0f} req/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms; server CPU "
                  f"{ours * 1000:.2f} ms/request, minimal endpoint {floor * 1000:.2f} ms, ratio {ours / floor:.2f}",
                  flush=True)
            figures.append((rate, p50, p99))
            cpu.append((ours, floor))
    lines = (project / ".openagents" / "memory" / "reflect-history.jsonl").read_bytes().count(b"\n")
    expected = max(50, args.requests // 5) + args.requests * args.repeats
    if lines != expected:
        raise SystemExit(f"the history holds {lines} records, not {expected}")
    return figures, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="requests per repeat")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight at once")
    parser.add_argument("--repeats", type=int, default=5, help="measured repeats (after one warm-up)")
    parser.add_argument("--memory", choices=("on", "off"), default="on",
                        help="REFLECT_TO_MEMORY of the server (default on, as served): each reflection "
                             "also leaves a lesson in the project's memory")
    args = parser.parse_args(argv)
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="api-bench-") as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        children, servers = [], {}
        try:
            for name, target, extra in (("ours", _serve, (tmp, args.memory == "on")), ("minimal", _serve_minimal, ())):
                ports = ctx.Queue()
                child = ctx.Process(target=target, args=(*extra, ports), daemon=True)
                child.start()
                children.append(child)
                servers[name] = (ports.get(timeout=60), child.pid)
            figures, cpu = anyio.run(run, args, servers, project.resolve())
        finally:
            for child in children:
                child.terminate()
                child.join(10)
    rate, p50, p99 = (statistics.median(column) for column in zip(*figures, strict=True))
    ours, floor = (statistics.median(column) for column in zip(*cpu, strict=True))
    ratio = statistics.median(o / f for o, f in cpu)
    print(f"\nconcurrency {args.concurrency}, {args.requests} requests x {args.repeats} repeats, medians:")
    print(f"  {rate:,.0f} req/s   p50 {p50:.2f} ms   p99 {p99:.2f} ms")
    print(f"  server CPU per request {ours * 1000:.2f} ms, minimal Starlette endpoint {floor * 1000:.2f} ms")
    print(f"  F5: ratio {ratio:.2f} (median of the paired ratios; target <= 5), lessons to memory {args.memory}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
