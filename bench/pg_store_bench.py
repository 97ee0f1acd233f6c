"""The memory on JSONL files and on a team's PostgreSQL, side by side.

    .venv/bin/python bench/pg_store_bench.py [--sizes 10000,1000000] [--lessons 100000]
        [--repeat 3] [--queries 500] [--rank-queries 200] [--only store|rank]

It starts its own PostgreSQL 16 with pgvector (pgserver, from the `test` extra) in a temp
dir that is removed afterwards, with the server's default settings (fsync and
synchronous_commit on). Every figure is a pair, JSONL | PostgreSQL, a median of
`--repeat` runs where a run is repeated (times vary on a small, busy machine; they are
printed, never asserted):

- appends/s through `ReflectionStore.append`, 1 process and 4 processes at once;
- `recent(3)` median and p99 ms at each size (the JSONL file written directly as
  store_bench.py writes it, the same records loaded into PostgreSQL with COPY);
- cold open: a new store's first `recent` on the largest memory (for PostgreSQL a new
  connection and the schema check; for JSONL the index built from the file);
- lesson ranking at `--lessons` lessons (memory_bench.py's synthetic outcome records and
  realistic queries): `LessonIndex` (SQLite FTS5) against `PostgresLessonIndex`, by
  words and by meaning (a deterministic 64-dimension embedder: words hashed, as the
  scripted model's embeddings are), median and p99 ms, and how often both put the same
  lesson first, or a lesson alike (see `agreement`). The PostgreSQL lessons, keys and vectors are loaded with COPY from
  what `add_lessons` would write; the one-off builds (SQLite sync, HNSW index) are timed
  on their own.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a plain checkout works too

from benchkit import Postgres  # noqa: E402
from memory_bench import pct, synthetic_queries, write_memory  # noqa: E402
from store_bench import cold_open, sample, timed, write_file  # noqa: E402

from reflection.backends import open_store  # noqa: E402
from reflection.lesson_index import LessonIndex, lesson_keys  # noqa: E402
from reflection.lessons import Lesson  # noqa: E402
from reflection.store import JsonlReflectionStore  # noqa: E402

PROJECT = "bench/app"
DIMS = 64


# -- appends ---------------------------------------------------------------------------


def appends_per_s(url: str | None, memory_dir: Path, n: int) -> float:
    records = [sample(f"sub-{i % 100}", 1 + i % 3) for i in range(n)]
    store = open_store(url, memory_dir, project=PROJECT)
    store.append(sample("warm-up"))  # the first connection, or the file's creation, is not an append
    seconds = timed(lambda: [store.append(r) for r in records])
    store.close()
    return n / seconds


def _append_worker(url: str | None, memory_dir: str, n: int, barrier: Any, results: Any) -> None:
    records = [sample(f"sub-{i % 100}") for i in range(n)]
    store = open_store(url, Path(memory_dir), project=PROJECT)
    store.append(sample("warm-up"))
    barrier.wait()
    start = time.monotonic()
    for record in records:
        store.append(record)
    results.put((start, time.monotonic()))
    store.close()


def parallel_appends_per_s(url: str | None, memory_dir: Path, procs: int, per_proc: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    workers = [ctx.Process(target=_append_worker, args=(url, str(memory_dir), per_proc, barrier, results))
               for _ in range(procs)]
    for worker in workers:
        worker.start()
    spans = [results.get() for _ in workers]
    for worker in workers:
        worker.join()
    return procs * per_proc / (max(end for _, end in spans) - min(start for start, _ in spans))


# -- recent() ----------------------------------------------------------------------------


def copy_records(url: str, jsonl: Path) -> None:
    """The JSONL file's records into goldenloop_reflections with COPY, then ANALYZE."""
    import psycopg

    from reflection.postgres.store import record_row

    open_store(url, jsonl.parent, project=PROJECT).close()  # the tables
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        sql = ("COPY goldenloop_reflections (project, id, kind, subtask_id, task_id, agent, created_at,"
               " archived_at, body) FROM STDIN")
        with cur.copy(sql) as copy, jsonl.open("rb") as lines:
            for line in lines:
                copy.write_row(record_row(PROJECT, orjson.loads(line)))
        conn.execute("VACUUM ANALYZE goldenloop_reflections")


def recent_ms(store: Any, subtasks: list[str], queries: int) -> tuple[float, float]:
    """Median and p99 of recent(..., 3) in ms, on a warm store."""
    store.recent(subtasks[0], 3)
    latencies = []
    for i in range(queries):
        sid = subtasks[(i * 7919) % len(subtasks)]
        start = time.perf_counter_ns()
        got = store.recent(sid, 3)
        latencies.append((time.perf_counter_ns() - start) / 1e6)
        if len(got) != 3:
            raise SystemExit(f"recent({sid!r}) returned {len(got)} records")
    return statistics.median(latencies), pct(latencies, 0.99)


def pg_cold_open(url: str) -> None:
    store = open_store(url, Path("."), project=PROJECT)
    store.recent("sub-0", 3)
    store.close()


# -- lessons ---------------------------------------------------------------------------


def bag_of_words(texts: list[str]) -> list[list[float]]:
    """A deterministic embedder: each word hashed into one of DIMS dimensions, normalised."""
    vectors = []
    for text in texts:
        vector = [0.0] * DIMS
        for word in text.lower().split():
            vector[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % DIMS] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        vectors.append([v / norm for v in vector])
    return vectors


def copy_lessons(url: str, jsonl: Path, vectors: bool) -> None:
    """Each outcome record of the file, its lesson, keys and (with `vectors`) its vector,
    into PostgreSQL with COPY: the rows append_outcome and _embed_missing would write."""
    import psycopg

    from reflection.postgres.connection import apply_schema
    from reflection.postgres.lessons import vector_literal
    from reflection.postgres.schema import VECTOR_COMPONENT, VECTOR_MIGRATIONS
    from reflection.postgres.store import record_row

    open_store(url, jsonl.parent, project=PROJECT).close()
    bodies = [orjson.loads(line) for line in jsonl.read_bytes().splitlines()]
    lessons = [Lesson.from_record(body) for body in bodies]
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        apply_schema(conn, VECTOR_COMPONENT, VECTOR_MIGRATIONS)
        with cur.copy("COPY goldenloop_reflections (seq, project, id, kind, subtask_id, task_id, agent, created_at,"
                      " archived_at, body) FROM STDIN") as copy:
            for seq, body in enumerate(bodies, 1):
                copy.write_row((seq, *record_row(PROJECT, body)))
        conn.execute("SELECT setval('goldenloop_reflections_seq_seq', %s)", (len(bodies),))
        with cur.copy("COPY goldenloop_lessons (record_seq, project, lesson_id, task_id, lesson, search, vector_dims)"
                      " FROM STDIN") as copy:
            for seq, lesson in enumerate(lessons, 1):
                if lesson is not None:
                    copy.write_row((seq, PROJECT, lesson.id, lesson.task_id, lesson.to_json().decode(),
                                    lesson.search_text, [DIMS] if vectors else []))
        with cur.copy("COPY goldenloop_lesson_keys (key, record_seq) FROM STDIN") as copy:
            for seq, lesson in enumerate(lessons, 1):
                for key in sorted(lesson_keys(lesson)) if lesson is not None else ():
                    copy.write_row((key, seq))
        if vectors:
            embedded = bag_of_words([lesson.search_text if lesson else "" for lesson in lessons])
            with cur.copy("COPY goldenloop_lesson_vectors (record_seq, dims, embedding) FROM STDIN") as copy:
                for seq, (lesson, vector) in enumerate(zip(lessons, embedded, strict=True), 1):
                    if lesson is not None:
                        copy.write_row((seq, DIMS, vector_literal(vector)))
        conn.execute("VACUUM ANALYZE")


def build_hnsw(url: str) -> float:
    """Seconds to create the HNSW (and not-yet-embedded) indexes of DIMS, as a first query would."""
    import psycopg

    from reflection.postgres.schema import vector_index_statements

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        start = time.perf_counter()
        for statement in vector_index_statements(DIMS):
            conn.execute(statement)
        conn.execute("ANALYZE goldenloop_lesson_vectors")
        return time.perf_counter() - start


KEYS_OF_A_MATCH = ("files", "signature", "labels", "task_type")


def rank_ms(index: Any, queries: list) -> tuple[float, float, list]:
    """Median and p99 ms of `rank(query, 3)`, and each query's first lesson (None: nothing found)."""
    index.rank(queries[0], limit=3)  # warm
    times, firsts = [], []
    for query in queries:
        start = time.perf_counter()
        ranked = index.rank(query, limit=3)
        times.append((time.perf_counter() - start) * 1000)
        firsts.append(ranked[0] if ranked else None)
    return statistics.median(times), pct(times, 0.99), firsts


def agreement(a: list, b: list) -> str:
    """How often both put the same lesson first, and how often their first lessons match the
    query alike (the same file, signature, label and type components: a near tie that only
    the text's weighting, bm25 or idf-sum, or a tie-break decided)."""
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    same = sum(x.lesson.id == y.lesson.id for x, y in pairs)
    alike = sum(all(x.why[k] == y.why[k] for k in KEYS_OF_A_MATCH) for x, y in pairs)
    return f"{same} / {alike} of {len(a)}"


# -- the report -------------------------------------------------------------------------


class Pairs:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []

    def add(self, name: str, jsonl: str, postgres: str) -> None:
        print(f"{name}: JSONL {jsonl} | PostgreSQL {postgres}", flush=True)
        self.rows.append((name, jsonl, postgres))

    def table(self) -> None:
        width = max(len(name) for name, _, _ in self.rows)
        print(f"\n{'figure':<{width}}  {'JSONL':>14}  {'PostgreSQL':>14}")
        print(f"{'-' * width}  {'-' * 14}  {'-' * 14}")
        for name, jsonl, postgres in self.rows:
            print(f"{name:<{width}}  {jsonl:>14}  {postgres:>14}")


def median_of(repeat: int, run: Callable[[], float]) -> float:
    return statistics.median(run() for _ in range(repeat))


def bench_store(root: Path, server: Postgres, pairs: Pairs, args: argparse.Namespace) -> None:
    url = server.new_database()
    folders = iter(root / f"appends-{n}" for n in range(1000))
    one = [(appends_per_s(None, next(folders), args.appends), appends_per_s(url, root, args.pg_appends))
           for _ in range(args.repeat)]
    pairs.add("appends/s, 1 process", f"{statistics.median(j for j, _ in one):,.0f}",
              f"{statistics.median(p for _, p in one):,.0f}")
    many = [(parallel_appends_per_s(None, next(folders), 4, args.appends // 4),
             parallel_appends_per_s(url, root, 4, args.pg_appends // 4)) for _ in range(args.repeat)]
    pairs.add("appends/s, 4 processes", f"{statistics.median(j for j, _ in many):,.0f}",
              f"{statistics.median(p for _, p in many):,.0f}")
    largest = max(args.sizes)
    for size in args.sizes:
        memory = root / f"recent-{size}"
        memory.mkdir()
        path = memory / "reflections.jsonl"
        subtasks = write_file(path, size)
        db = server.new_database()
        start = time.perf_counter()
        copy_records(db, path)
        print(f"loaded {size:,} records into PostgreSQL with COPY in {time.perf_counter() - start:.1f} s", flush=True)
        jsonl, postgres = JsonlReflectionStore(path), open_store(db, memory, project=PROJECT)
        jsonl.count()  # the index built, as in a long-lived process
        (jm, jp), (pm, pp) = recent_ms(jsonl, subtasks, args.queries), recent_ms(postgres, subtasks, args.queries)
        jsonl.close()
        postgres.close()
        pairs.add(f"recent(3) median ms, {size:,} records", f"{jm:.3f}", f"{pm:.3f}")
        pairs.add(f"recent(3) p99 ms, {size:,} records", f"{jp:.3f}", f"{pp:.3f}")
        if size == largest:
            cold_j = median_of(args.repeat, lambda: timed(lambda: cold_open(path)))
            cold_p = median_of(args.repeat, lambda: timed(lambda: pg_cold_open(db)))
            pairs.add(f"cold open s, {size:,} records", f"{cold_j:.3f}", f"{cold_p:.3f}")
        else:
            path.unlink()


def bench_rank(root: Path, server: Postgres, pairs: Pairs, args: argparse.Namespace) -> None:
    from reflection.postgres.lessons import PostgresLessonIndex

    memory = root / "lessons"
    write_memory(memory, args.lessons, args.seed)
    path = memory / "reflections.jsonl"
    queries = synthetic_queries(args.rank_queries, args.seed)
    db = server.new_database()
    start = time.perf_counter()
    copy_lessons(db, path, vectors=True)
    print(f"loaded {args.lessons:,} lessons with keys and vectors into PostgreSQL with COPY in "
          f"{time.perf_counter() - start:.1f} s; HNSW index built in {build_hnsw(db):.1f} s", flush=True)

    sqlite = LessonIndex(memory)
    start = time.perf_counter()
    sqlite.sync()
    print(f"SQLite index of {args.lessons:,} lessons built (sync) in {time.perf_counter() - start:.1f} s", flush=True)
    postgres = PostgresLessonIndex(db, project="bench/other")  # a team member's project asking
    jm, jp, jfirst = rank_ms(sqlite, queries)
    pm, pp, pfirst = rank_ms(postgres, queries)
    pairs.add(f"rank by words median ms, {args.lessons:,} lessons", f"{jm:.2f}", f"{pm:.2f}")
    pairs.add(f"rank by words p99 ms, {args.lessons:,} lessons", f"{jp:.2f}", f"{pp:.2f}")
    pairs.add("first lesson same / alike, by words", agreement(jfirst, pfirst), "")
    sqlite.close()
    postgres.close()

    few = queries[: args.vector_queries]
    sqlite = LessonIndex(memory, embedder=bag_of_words)
    start = time.perf_counter()
    sqlite.sync()
    print(f"SQLite vectors of {args.lessons:,} lessons embedded in {time.perf_counter() - start:.1f} s", flush=True)
    postgres = PostgresLessonIndex(db, project="bench/other", embedder=bag_of_words)
    jm, jp, jfirst = rank_ms(sqlite, few)
    pm, pp, pfirst = rank_ms(postgres, few)
    pairs.add(f"rank by meaning median ms, {args.lessons:,} lessons", f"{jm:.2f}", f"{pm:.2f}")
    pairs.add(f"rank by meaning p99 ms, {args.lessons:,} lessons", f"{jp:.2f}", f"{pp:.2f}")
    pairs.add("first lesson same / alike, by meaning", agreement(jfirst, pfirst), "")
    sqlite.close()
    postgres.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,1000000", help="store sizes for recent(), comma-separated")
    parser.add_argument("--appends", type=int, default=8000, help="JSONL appends per run (split over 4 processes)")
    parser.add_argument("--pg-appends", type=int, default=2000, help="PostgreSQL appends per run")
    parser.add_argument("--queries", type=int, default=500, help="recent() calls per size")
    parser.add_argument("--lessons", type=int, default=100_000)
    parser.add_argument("--rank-queries", type=int, default=200)
    parser.add_argument("--vector-queries", type=int, default=20, help="the SQLite side scans every vector")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=["store", "rank"])
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    pairs = Pairs()
    with tempfile.TemporaryDirectory(prefix="pg-store-bench-") as tmp:
        root = Path(tmp)
        server = Postgres(root)
        try:
            if args.only in (None, "store"):
                bench_store(root, server, pairs, args)
            if args.only in (None, "rank"):
                bench_rank(root, server, pairs, args)
        finally:
            server.stop()
    pairs.table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
