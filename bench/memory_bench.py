"""What does the project's memory cost, and what does it save?

Three measurements, all in this one process and in a temp dir that is removed afterwards
(the machine may be small and busy: times are medians and p99s, never asserted):

- ranking: `LessonIndex.rank` (reflection/lesson_index.py) over synthetic outcome
  records in `<memory>/reflections.jsonl`, one index per size (`--sizes`). The first
  build (`sync`, which reads the JSONL into `lessons.sqlite`) is timed on its own; then
  `--queries` realistic task texts, with the files they name, labels and sometimes an
  error signature, are ranked (limit 3, as `memory.lessonsPerTask` defaults), the indexes
  taking turns query by query: median and p99 ms per size. Two probes follow: does a
  query with a known error signature get a lesson of that signature first, and does a
  task about the backlog's pitfall (below) get the lessons of that pitfall?
- prompt cost: the characters `lessons_block(ranked)` (orchestrator/loop/remember.py)
  adds to a subtask's first prompt for those same queries, and the characters of
  `rules_prompt` (reflection/rules.py) for a rules.md of `--rules` rules.
- saving: a backlog of `--tasks` tasks in a real git repository that all share one
  pitfall: each asks for a function that normalises some text in its own module, and
  the project's test feeds it padded input (`"  Ann "`). The scripted model forgets the
  strip on its first reply, unless the prompt carries a "Lessons from earlier tasks"
  block that mentions the strip and names an earlier task; a retry (after the failing
  tests) writes the right code. Heuristic reflections (`reflexion.useLLM: false`), so
  every model call is the executor's. Two copies of the repository, with
  `memory.crossTaskLessons` on and off, run `do-one-task` in-process once per task,
  taking turns; model calls (`model_call` events) and attempts (`attempt_started`)
  are counted from the run logs, per task and in total, and the `lessons_injected`
  events are checked: the first task is shown nothing, later ones only lessons of
  earlier tasks.

    .venv/bin/python bench/memory_bench.py [--sizes 1000,100000] [--queries 200]
        [--rules 10] [--tasks 6] [--only rank|prompt|backlog] [--seed 1]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import io
import json
import random
import re
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a plain checkout works too

from benchkit import git, init_repo  # noqa: E402

# -- synthetic lessons -------------------------------------------------------------------

AREAS = {  # area: (folder, module names, labels)
    "billing": ("src/billing", ["invoice", "tax", "refunds", "currency", "ledger"], ["billing", "money"]),
    "auth": ("src/auth", ["session", "tokens", "password", "oauth", "permissions"], ["auth", "security"]),
    "export": ("src/export", ["csv_writer", "xlsx", "report", "columns"], ["export", "csv"]),
    "api": ("src/api", ["routes", "pagination", "serializers", "errors", "webhooks"], ["api", "http"]),
    "search": ("src/search", ["indexer", "query_parser", "ranking", "tokenize"], ["search"]),
    "scheduler": ("src/jobs", ["scheduler", "cron", "retry_queue", "worker"], ["jobs", "async"]),
    "users": ("src/users", ["profile", "signup", "usernames", "avatars"], ["users"]),
    "config": ("src/core", ["config_loader", "settings", "env", "paths"], ["config"]),
    "cache": ("src/core", ["cache", "memo", "redis_client"], ["cache", "performance"]),
    "dates": ("src/util", ["dates", "timezones", "calendar"], ["dates", "i18n"]),
    "frontend": ("web/src", ["Cart.tsx", "useFetch.ts", "formatPrice.ts", "router.ts"], ["frontend", "ui"]),
    "cli": ("cmd/tool", ["main.go", "flags.go", "output.go"], ["cli", "go"]),
}
PITFALLS = [  # (what went wrong, what to do differently, tactical rule)
    ("{fn} kept the surrounding whitespace, so '  {word} ' was not found",
     "Strip surrounding whitespace from the input before comparing or storing it",
     "Always strip user input before normalising it."),
    ("the last page of {fn} was missing one item (an off-by-one in the offset)",
     "Compute the offset as (page - 1) * size and test the last partial page",
     "Always test the first, a middle and the last partial page."),
    ("{fn} compared a naive datetime with an aware one and raised TypeError",
     "Make every datetime timezone-aware (UTC) at the boundary before comparing",
     "Never mix naive and aware datetimes."),
    ("{fn} rounded money as floats and was off by a cent",
     "Use Decimal with ROUND_HALF_UP for amounts and round once at the end",
     "Never store or add money as float."),
    ("{fn} crashed on None where the field is optional",
     "Handle the missing value explicitly and return the documented default",
     "Always check optional fields for None before using them."),
    ("{fn} used a mutable default argument, so calls shared one list",
     "Default to None and create the list inside the function",
     "Never use a mutable default argument."),
    ("the regex in {fn} was not anchored and matched inside longer words",
     "Anchor the pattern with ^ and $ (or use fullmatch)",
     "Always anchor validation regexes."),
    ("{fn} forgot to await the coroutine, so the write never happened",
     "Await every coroutine call and let the linter flag unawaited ones",
     "Always await async calls."),
    ("{fn} wrote a CSV field containing a comma without quoting it",
     "Use the csv module's writer with QUOTE_MINIMAL instead of joining strings",
     "Never build CSV lines by joining strings."),
    ("{fn} read the file with the locale encoding and broke on UTF-8 input",
     "Open text files with encoding='utf-8' explicitly",
     "Always pass an encoding when opening text files."),
    ("{fn} compared header names case-sensitively",
     "Compare HTTP header names case-insensitively",
     "Always treat header names as case-insensitive."),
    ("{fn} built the URL with a double slash when the base ended in '/'",
     "Join URL parts with urljoin or strip the trailing slash first",
     "Never concatenate URL parts by hand."),
    ("{fn} retried immediately and hit the rate limit again",
     "Retry with exponential backoff and jitter, and honour Retry-After",
     "Always back off between retries."),
    ("{fn} left the connection open when an exception was raised",
     "Use a context manager so the connection is closed on every path",
     "Always close resources in a with block."),
    ("{fn} returned an unsorted list and the test expected a stable order",
     "Sort by the documented key, with the id as a tie-breaker",
     "Always define an explicit order for returned collections."),
    ("{fn} divided with / and returned a float where an int was expected",
     "Use // for counts and indexes",
     "Always use integer division for indexes."),
    ("{fn} did not escape HTML in the user's name",
     "Escape every user-provided value before rendering it",
     "Never render user input unescaped."),
    ("{fn} treated Feb 29 as invalid in a leap year",
     "Use the calendar module or date arithmetic instead of a fixed days-per-month table",
     "Never hard-code days per month."),
    ("{fn} compared Unicode strings that differ only in normalisation",
     "Normalise to NFC before comparing",
     "Always normalise Unicode before comparing user text."),
    ("{fn} changed the dict while iterating over it",
     "Iterate over a copy of the keys, or build a new dict",
     "Never mutate a collection while iterating over it."),
]
VERBS = ["Fix", "Add", "Handle", "Support", "Refactor", "Validate", "Speed up", "Clean up"]
TOPICS = ["padded input", "the last page", "timezones", "rounding", "missing fields", "repeated calls",
          "partial matches", "slow writes", "quoted values", "non-ASCII names", "mixed-case headers",
          "trailing slashes", "rate limits", "dropped connections", "ordering", "counts", "escaping",
          "leap years", "accented names", "concurrent edits"]
TASK_TYPES = ["bug", "feature", "chore", "refactor"]


def area_file(rng: random.Random, area: str) -> tuple[str, str]:
    """(path, function name) of a module in `area`."""
    folder, modules, _ = AREAS[area]
    module = rng.choice(modules)
    path = f"{folder}/{module}" if "." in module else f"{folder}/{module}.py"
    stem = module.split(".")[0]
    fn = f"{rng.choice(['parse', 'format', 'load', 'normalize', 'compute', 'render', 'fetch'])}_{stem.lower()}"
    return path, fn


def signature(area: str, pitfall: int) -> str:
    """The error signature a pitfall leaves in an area (stable: queries can share it)."""
    return hashlib.sha1(f"{area}/{pitfall}".encode()).hexdigest()[:16]


def synthetic_record(rng: random.Random, n: int, now: datetime) -> dict:
    area = rng.choice(list(AREAS))
    pitfall = rng.randrange(len(PITFALLS))
    wrong, advice, rule = PITFALLS[pitfall]
    path, fn = area_file(rng, area)
    files = [path] + ([area_file(rng, area)[0]] if rng.random() < 0.3 else [])
    outcome = rng.choices(["failed", "partial", "success"], weights=[6, 2, 3])[0]
    word = rng.choice(["Ann", "total", "2026-02-29", "Zoë", "a,b", "X-Request-Id"])
    record = {
        "id": f"L-{n:07d}", "kind": "outcome", "outcome": outcome, "sessionId": f"run-{n // 40:05d}",
        "taskId": f"OLD-{n // 2}", "agent": rng.choice(["gpt-4o-mini", "claude-sonnet", "coder"]),
        "title": f"{rng.choice(VERBS)} {fn} for {rng.choice(TOPICS)}",
        "createdAt": (now - timedelta(minutes=rng.randrange(0, 90 * 24 * 60))).isoformat().replace("+00:00", "Z"),
        "taskType": rng.choice(TASK_TYPES), "labels": rng.sample(AREAS[area][2], k=rng.randint(0, len(AREAS[area][2]))),
        "files": files, "errorSignature": signature(area, pitfall) if rng.random() < 0.8 else None,
        "whatWentWrong": f"Attempt {rng.randint(1, 3)}: the tests failed. {wrong.format(fn=fn, word=word)}.",
        "whatToDoDifferently": f"{advice} in {fn}.", "tacticalRule": rule, "source": rng.choice(["heuristic", "llm"]),
    }
    if outcome == "success":
        record["strategy"] = f"Attempt 2 followed the lesson of attempt 1: {advice}."
        record["whyItWorked"] = f"It overcame the failure of attempt 1, where {wrong.format(fn=fn, word=word)}."
    return record


def write_memory(memory: Path, size: int, seed: int) -> int:
    rng = random.Random(seed)
    now = datetime.now(UTC)
    memory.mkdir(parents=True, exist_ok=True)
    path = memory / "reflections.jsonl"
    with path.open("wb") as out:
        for n in range(size):
            out.write(orjson.dumps(synthetic_record(rng, n, now)) + b"\n")
    return path.stat().st_size


def synthetic_queries(count: int, seed: int) -> list:
    """LessonQuery objects built like lessons_for builds them (title + description, the
    files the text names, the task's type and labels, sometimes a known signature)."""
    from reflection.lessons import LessonQuery

    rng = random.Random(seed + 1000)
    path_re = re.compile(r"[\w./-]+\.\w{1,6}\b")  # the one remember.py uses
    queries = []
    for n in range(count):
        area = rng.choice(list(AREAS))
        pitfall = rng.randrange(len(PITFALLS))
        path, fn = area_file(rng, area)
        title = f"{rng.choice(VERBS)} {fn} for {rng.choice(TOPICS)}"
        description = rng.choice([
            f"{fn}() in {path} fails for some inputs; make the tests pass.",
            f"Users report that {fn} misbehaves with {rng.choice(TOPICS)}. See {path} and its tests.",
            f"Implement {fn} in {path}. It must accept {rng.choice(TOPICS)} and keep the existing API.",
            f"The nightly job calls {fn} ({path}); it broke after the last release. Add a regression test.",
        ])
        text = f"{title}\n{description}"
        sigs = (signature(area, pitfall),) if rng.random() < 0.3 else ()
        labels = tuple(rng.sample(AREAS[area][2], k=rng.randint(0, 1)))
        queries.append(LessonQuery(text=text, task_type=rng.choice(TASK_TYPES), labels=labels,
                                   files=tuple(path_re.findall(text)), error_signatures=sigs,
                                   exclude_task_id=f"NEW-{n}"))
    return queries


def pct(values: list[float], q: float) -> float:
    """The q-quantile by nearest rank (p99 of 200 values is the second largest)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def bench_rank(tmp: Path, sizes: list[int], count: int, seed: int) -> list:
    """Times ranking per size; returns the ranked lists of the largest size (for the prompt part)."""
    indexes = {size: built_index(tmp, size, seed) for size in sizes}
    queries = synthetic_queries(count, seed)
    times, results = timed_queries(indexes, sizes, queries)
    if len(sizes) > 1:
        small, big = sizes[0], sizes[-1]
        ratios = [b / a for a, b in zip(times[small], times[big])]
        print(f"rank: per-query ratio {big:,} vs {small:,} lessons: median {statistics.median(ratios):.2f}, "
              f"p99 {pct(ratios, 0.99):.2f}")
    # Does a query carrying a known signature get a lesson with that signature first?
    biggest = sizes[-1]
    with_sig = [(q, r) for q, r in zip(queries, results[biggest]) if q.error_signatures]
    top_sig = sum(bool(r) and r[0].lesson.error_signature in q.error_signatures for q, r in with_sig)
    print(f"rank: of the {len(with_sig)} queries carrying a known error signature, {top_sig} got a lesson "
          f"with that signature first ({biggest:,} lessons)")
    pitfall_probes(indexes, sizes)
    for index in indexes.values():
        index.close()
    return [results[size] for size in sizes]


def built_index(tmp: Path, size: int, seed: int):
    """A memory of `size` lessons and its index, built and queried once (untimed)."""
    from reflection.lesson_index import LessonIndex
    from reflection.lessons import LessonQuery

    memory = tmp / f"memory-{size}"
    start = time.perf_counter()
    nbytes = write_memory(memory, size, seed)
    written = time.perf_counter() - start
    index = LessonIndex(memory)
    start = time.perf_counter()
    index.sync()
    built = time.perf_counter() - start
    db = sum(p.stat().st_size for p in memory.glob("lessons.sqlite*"))  # the WAL too
    start = time.perf_counter()
    index.rank(LessonQuery(text="warm-up: the first query after the build"), limit=3)
    cold = time.perf_counter() - start
    print(f"rank: {size:,} lessons, reflections.jsonl {nbytes / 2**20:.1f} MiB (written in {written:.1f} s); "
          f"first build (sync) {built * 1000:.0f} ms, lessons.sqlite(+wal) {db / 2**20:.1f} MiB; "
          f"first query (untimed below) {cold * 1000:.1f} ms")
    return index


def timed_queries(indexes: dict, sizes: list[int], queries: list) -> tuple[dict[int, list[float]], dict[int, list]]:
    """Each query on every index, in alternating order; the times and the ranked lists per size."""
    count = len(queries)
    times: dict[int, list[float]] = {size: [] for size in sizes}
    results: dict[int, list] = {size: [] for size in sizes}
    found: dict[int, int] = {size: 0 for size in sizes}
    gc.collect()  # not a pause left over from writing the records, inside a timed query
    for n, query in enumerate(queries):
        order = sizes if n % 2 == 0 else list(reversed(sizes))
        for size in order:
            start = time.perf_counter()
            ranked = indexes[size].rank(query, limit=3)
            times[size].append(time.perf_counter() - start)
            results[size].append(ranked)
            found[size] += bool(ranked)
    for size in sizes:
        t = [s * 1000 for s in times[size]]
        print(f"rank: {size:,} lessons, {count} queries (limit 3): median {statistics.median(t):.2f} ms, "
              f"p99 {pct(t, 0.99):.2f} ms, max {max(t):.2f} ms (query #{t.index(max(t))}); "
              f"{found[size]} of {count} found a lesson")
    return times, results


def pitfall_probes(indexes: dict, sizes: list[int]) -> None:
    from reflection.lessons import LessonQuery

    # The backlog's pitfall (whitespace) among many lessons: found by a task that names it, and by one that does not?
    strip_rule = PITFALLS[0][2]
    named = ("Handle padded input in normalize_usernames\nnormalize_usernames() in src/users/usernames.py "
             "keeps surrounding whitespace; make the tests pass.")
    unnamed = "Add normalize_usernames() in src/users/usernames.py\nReturn the username in lowercase, as stored."
    probes = [("names the pitfall", named), ("does not name it", unnamed)]
    for what, text in probes:
        hits = []
        for size in sizes:
            ranked = indexes[size].rank(LessonQuery(text=text, task_type="feature", labels=("users",),
                                                    files=("src/users/usernames.py",)), limit=3)
            hits.append(f"{sum(r.lesson.rule == strip_rule for r in ranked)} of {len(ranked)} at {size:,}")
        print(f"rank: a users task that {what}: whitespace-pitfall lessons in its top 3: {', '.join(hits)} "
              f"(1 in {len(PITFALLS)} lessons is one)")


def bench_prompt(tmp: Path, sizes: list[int], ranked_per_size: list, rules: int) -> None:
    from orchestrator.loop.remember import lessons_block
    from reflection.rules import RULES_HEADER, rules_prompt

    for size, ranked_lists in zip(sizes, ranked_per_size):
        chars = [len(lessons_block(r)) if r else 0 for r in ranked_lists]
        shown = [len(r) for r in ranked_lists]
        print(f"prompt: lessons block, {size:,} lessons, {len(chars)} first prompts: median {statistics.median(chars):.0f} "
              f"chars, max {max(chars)} chars (lessons shown: median {statistics.median(shown):.0f}, max {max(shown)}; "
              f"0 chars when none)")
    memory = tmp / "rules-memory"
    memory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    bullets = [f"- {rule} <!-- lesson L-{rng.randrange(10**6):07d}; confirmed by {rng.randint(3, 9)} passes -->\n"
               for _, _, rule in PITFALLS[:rules]]
    (memory / "rules.md").write_text(RULES_HEADER + "".join(bullets))
    block = rules_prompt(memory)
    print(f"prompt: rules block, rules.md with {rules} rules: {len(block)} chars in every prompt "
          f"({block.count(chr(10) + '- ')} rules fit the 1500-char cap)")


# -- the backlog with one shared pitfall -------------------------------------------------

PY = sys.executable
NAMES = [  # module, function, what it normalises, padded input, expected
    ("users", "normalize_username", "a username", "  Ann ", "ann"),
    ("tags", "normalize_tag", "a tag", "  Python ", "python"),
    ("emails", "normalize_email", "an email address", "  Bob@Example.COM ", "bob@example.com"),
    ("cities", "normalize_city", "a city name", "  Oslo ", "oslo"),
    ("skus", "normalize_sku", "a product SKU", "  ab-123 ", "AB-123"),
    ("countries", "normalize_country_code", "a country code", "  de ", "DE"),
    ("handles", "normalize_handle", "a social handle", "  @Zoe ", "@zoe"),
    ("colors", "normalize_color", "a hex colour", "  #FFAA00 ", "#ffaa00"),
    ("langs", "normalize_language", "a language tag", "  EN ", "en"),
    ("units", "normalize_unit", "a unit name", "  KG ", "kg"),
]


def case_op(expected: str) -> str:
    return "upper" if expected.isupper() or expected == "AB-123" else "lower"


def pitfall_tests(count: int) -> str:
    lines = ["import pytest", ""]
    for module, fn, _, padded, expected in NAMES[:count]:
        lines += ["", f"def test_{fn}_ignores_surrounding_whitespace():",
                  f'    mod = pytest.importorskip("{module}")',
                  f"    assert mod.{fn}({padded!r}) == {expected!r}", ""]
    return "\n".join(lines)


def module_text(fn: str, what: str, op: str, strip: bool) -> str:
    body = f"value.strip().{op}()" if strip else f"value.{op}()"
    return f'def {fn}(value: str) -> str:\n    """{what[0].upper() + what[1:]}, as stored."""\n    return {body}\n'


def whole_file(path: str, text: str, note: str) -> str:
    """A reply as a model writes it: a sentence, then the file named and fenced."""
    return f"{note}\n\n{path}\n```python\n{text}```\n"


def backlog_with_pitfall(repo: Path, tasks: int, lessons: bool) -> Path:
    meta = init_repo(repo) / ".openagents"
    (repo / "README.md").write_text("# normalisers\n")
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_normalize.py").write_text(pitfall_tests(tasks))
    lines, replies = [], []
    for n, (module, fn, what, _padded, expected) in enumerate(NAMES[:tasks], start=1):
        task_id, path, op = f"T-{n}", f"{module}.py", case_op(expected)
        lines.append(json.dumps({
            "id": task_id, "status": "open", "priority": 2, "type": "feature", "labels": ["normalization"],
            "title": f"Add {fn}() in {path}",
            "description": f"Add {fn}(value) in {path}: it returns {what} in the canonical "
                           f"{'upper' if op == 'upper' else 'lower'} case the database stores. "
                           f"tests/test_normalize.py covers it.",
            "createdAt": f"2026-01-01T00:00:{n:02d}Z"}))
        right = module_text(fn, what, op, strip=True)
        wrong = module_text(fn, what, op, strip=False)
        replies += [
            # A model that reads an earlier task's strip lesson gets it right at once.
            # goldenloop's heuristic lessons name the failing test and its padded assert
            # (`test_..._ignores_surrounding_whitespace`, `' ann ' == 'ann'`), not the word "strip".
            {"match": rf"Task {task_id}:.*Lessons from earlier tasks.*\(\w+, task T-\d+\)[^\n]*"
                      r"(strip|surrounding.whitespace)",
             "reply": whole_file(path, right, f"An earlier task failed on padded input, so {fn} strips it first.")},
            {"match": f"Task {task_id}:",
             "reply": whole_file(path, wrong, f"Here is {fn}; it converts the value to {op} case.")},
            {"match": f"Task {task_id}:",  # the retry, after the failing test
             "reply": f"The test passes padded input; strip it before changing the case.\n\n{path}\n"
                      f"<<<<<<< SEARCH\n    return value.{op}()\n=======\n    return value.strip().{op}()\n"
                      f">>>>>>> REPLACE\n"},
        ]
    (meta / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    (meta / "script.json").write_text(json.dumps({"replies": replies}, indent=1))
    config = {"testCommands": [f"{PY} -m pytest -q -p no:cacheprovider tests"],
              "defaultModel": "scripted/.openagents/script.json", "decomposeMinChars": 0,
              "reflexion": {"useLLM": False}, "retry": {"preflight": False},
              "memory": {"crossTaskLessons": lessons}}
    (meta / "project.json").write_text(json.dumps(config, indent=1))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "normalisers: tests and backlog")
    return repo


def events(repo: Path) -> list[dict]:
    from orchestrator.runlog import read_events

    found = [e for path in sorted((repo / ".openagents" / "runs").glob("*.jsonl")) for e in read_events(path)]
    return sorted(found, key=lambda e: e.get("ts", ""))


def one_task(repo: Path) -> int:
    from orchestrator.cli import do_one_task_main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return do_one_task_main(["--dir", str(repo)])


def bench_backlog(tmp: Path, tasks: int) -> None:
    tasks = min(tasks, len(NAMES))
    copies = {"on": backlog_with_pitfall(tmp / "lessons-on", tasks, True),
              "off": backlog_with_pitfall(tmp / "lessons-off", tasks, False)}
    run_backlogs(copies, tasks)
    counts = {name: call_counts(events(repo), tasks) for name, repo in copies.items()}
    report_savings(counts)
    report_provenance(counts["on"][4], counts["off"][4], tasks)


def run_backlogs(copies: dict[str, Path], tasks: int) -> None:
    """Each task of both copies, the copies taking turns to go first."""
    codes: dict[str, list[int]] = {"on": [], "off": []}
    start = time.perf_counter()
    for n in range(tasks):
        for name in (("on", "off") if n % 2 == 0 else ("off", "on")):
            codes[name].append(one_task(copies[name]))
    print(f"backlog: {tasks} tasks x 2 copies ran in {time.perf_counter() - start:.1f} s; exit codes "
          f"on {codes['on']}, off {codes['off']}")


def call_counts(log: list[dict], tasks: int) -> tuple[dict, dict, int, list[str], list[dict]]:
    """(model calls per task, attempts per task, calls outside a task, purposes, the log)."""
    ids = [f"T-{n}" for n in range(1, tasks + 1)]
    # model_call events carry no taskId: each do-one-task run (runId) is one task
    run_task = {e["runId"]: e["taskId"] for e in log if e["event"] == "task_started"}
    for e in log:
        if e["event"] == "model_call" and "taskId" not in e:
            e["taskId"] = run_task.get(e.get("runId"))
    calls = {i: sum(e["event"] == "model_call" and e.get("taskId") == i for e in log) for i in ids}
    attempts = {i: sum(e["event"] == "attempt_started" and e.get("taskId") == i for e in log) for i in ids}
    untagged = sum(e["event"] == "model_call" and e.get("taskId") not in ids for e in log)
    purposes = sorted({str(e.get("purpose")) for e in log if e["event"] == "model_call"})
    return calls, attempts, untagged, purposes, log


def report_savings(counts: dict[str, tuple]) -> None:
    for name in ("on", "off"):
        calls, attempts, untagged, purposes, _ = counts[name]
        print(f"backlog: lessons {name:3}: model calls {sum(calls.values()) + untagged} "
              f"(per task {list(calls.values())}{f', {untagged} outside a task' if untagged else ''}; "
              f"purposes {'/'.join(purposes)}), attempts {sum(attempts.values())} (per task {list(attempts.values())})")
    on_calls = sum(counts["on"][0].values()) + counts["on"][2]
    off_calls = sum(counts["off"][0].values()) + counts["off"][2]
    on_att, off_att = sum(counts["on"][1].values()), sum(counts["off"][1].values())
    print(f"backlog: saving with lessons: model calls {off_calls - on_calls} of {off_calls} "
          f"({100 * (off_calls - on_calls) / off_calls:.0f}%), attempts {off_att - on_att} of {off_att} "
          f"({100 * (off_att - on_att) / off_att:.0f}%)")


def report_provenance(log_on: list[dict], log_off: list[dict], tasks: int) -> None:
    """Where the lessons shown came from: only earlier tasks' outcome reflections."""
    injected = [e for e in log_on if e["event"] == "lessons_injected"]
    order = {f"T-{n}": n for n in range(1, tasks + 1)}
    outcome_ids = {e["id"]: e["taskId"] for e in log_on if e["event"] == "outcome_reflected"}
    shown_tasks = sorted({e["taskId"] for e in injected}, key=order.get)
    problems = []
    if "T-1" in shown_tasks:
        problems.append("the first task was shown a lesson")
    for e in injected:
        for lesson in e["lessons"]:
            source = outcome_ids.get(lesson["id"])
            if source is None or order.get(source, 10**6) >= order[e["taskId"]]:
                problems.append(f"{e['taskId']} was shown {lesson['id']} of {lesson['fromTask']}, "
                                "not an earlier task's outcome reflection")
    top = [f"{e['taskId']}<-{e['lessons'][0]['fromTask']}({e['lessons'][0]['kind']}, "
           f"text {e['lessons'][0]['why']['text']}, files {e['lessons'][0]['why']['files']})" for e in injected]
    print(f"backlog: lessons shown to {len(shown_tasks)} of {tasks} tasks ({', '.join(shown_tasks) or 'none'}); "
          f"best lesson per task: {'; '.join(top) or '-'}")
    promoted = [rule for e in log_on if e["event"] == "rules_promoted" for rule in e.get("rules", [])]
    print(f"backlog: outcome reflections left: on {len(outcome_ids)}, off "
          f"{sum(e['event'] == 'outcome_reflected' for e in log_off)}; lessons_injected with lessons off: "
          f"{sum(e['event'] == 'lessons_injected' for e in log_off)}; rules promoted (on): {len(promoted)}"
          f"{' ' + json.dumps(promoted) if promoted else ''}")

    def first_prompt(log: list[dict]) -> dict[str, int]:
        return {e["taskId"]: e["promptChars"] for e in log
                if e["event"] == "attempt_started" and e.get("attempt") == 1 and "promptChars" in e}

    first_on, first_off = first_prompt(log_on), first_prompt(log_off)
    extra = [first_on[i] - first_off[i] for i in order if i in first_on and i in first_off]
    print(f"backlog: first-attempt prompt chars (attempt_started promptChars), on minus off, per task: {extra}")
    print(f"backlog: provenance check: {'ok' if not problems else '; '.join(problems)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000", help="lesson counts, comma-separated")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rules", type=int, default=10, help="rules in rules.md (at most 20)")
    parser.add_argument("--tasks", type=int, default=6, help=f"backlog tasks (at most {len(NAMES)})")
    parser.add_argument("--only", choices=["rank", "prompt", "backlog"])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    from reflection.scripted import register_scripted_provider

    register_scripted_provider()
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "rank", "prompt"):
            ranked = bench_rank(Path(tmp), sizes, args.queries, args.seed)
            if args.only in (None, "prompt"):
                bench_prompt(Path(tmp), sizes, ranked, args.rules)
        if args.only in (None, "backlog"):
            bench_backlog(Path(tmp), args.tasks)


if __name__ == "__main__":
    main()
