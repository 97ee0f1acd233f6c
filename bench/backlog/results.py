"""Each task's result, read back from its copy of the repository, and the tables.

A task's status comes from `tasks.jsonl`, its attempts from `subtasks/<taskId>.json`, the
lessons shown to it from the `lessons_injected` events, and its model calls and tokens
from the `model_call` events that follow its `task_started` (one task at a time).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.backlog.spec import PITFALL

PASSING = ("passed", "flaky", "waived", "preexisting")


@dataclass
class TaskResult:
    task_id: str
    pitfall: bool
    status: str  # closed, blocked, or open/in_progress when it has not run (yet)
    passed_at: int | None = None
    attempts: int = 0
    lessons_from: list[str] = field(default_factory=list)  # the tasks whose lessons its first prompt showed
    calls: int = 0
    tokens: int = 0


@dataclass
class Summary:
    """One mode's row: every task run, then the pitfall tasks after its first encounter."""

    mode: str
    tasks: int
    closed: int
    pass1: int
    first_encounter: str | None
    after: int  # pitfall tasks after the first encounter
    after_pass1: int
    after_closed: int
    after_attempts: int
    shown_lessons: int  # tasks whose first prompt carried lessons
    calls: int
    tokens: int


def read_repo(repo: Path) -> list[TaskResult]:
    """Every task of the copy's backlog, in backlog order."""
    meta = repo / ".openagents"
    tasks = [json.loads(line) for line in (meta / "tasks.jsonl").read_text().splitlines() if line.strip()]
    results = {t["id"]: TaskResult(t["id"], t["id"] in PITFALL, t.get("status", "open")) for t in tasks}
    for result in results.values():
        attempts = _attempts(meta / "subtasks" / f"{result.task_id}.json")
        result.attempts = len(attempts)
        result.passed_at = next((n for n, a in enumerate(attempts, 1) if a.get("outcome") in PASSING), None)
        if result.status != "closed":
            result.passed_at = None
    _add_events(results, meta / "runs")
    return list(results.values())


def _attempts(path: Path) -> list[dict]:
    try:
        plan = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    return [a for s in plan.get("subtasks", []) for a in s.get("attempts", [])]


def _add_events(results: dict[str, TaskResult], runs: Path) -> None:
    for path in sorted(runs.glob("*.jsonl")):
        current: TaskResult | None = None
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a kill
            kind = event.get("event")
            if kind == "task_started":
                current = results.get(event.get("taskId"))
            elif kind == "lessons_injected" and event.get("taskId") in results:
                shown = results[event["taskId"]].lessons_from
                shown += [lesson["fromTask"] for lesson in event.get("lessons", []) if lesson["fromTask"] not in shown]
            elif kind == "model_call" and current is not None:
                current.calls += 1
                current.tokens += (event.get("inputTokens") or 0) + (event.get("outputTokens") or 0)


def summarize(mode: str, results: list[TaskResult]) -> Summary:
    ran = [r for r in results if r.attempts]
    first = next((r.task_id for r in ran if r.pitfall), None)
    index = [r.task_id for r in ran].index(first) if first else len(ran)
    after = [r for r in ran[index + 1:] if r.pitfall]
    return Summary(
        mode=mode, tasks=len(ran), closed=sum(r.status == "closed" for r in ran),
        pass1=sum(r.passed_at == 1 for r in ran), first_encounter=first, after=len(after),
        after_pass1=sum(r.passed_at == 1 for r in after), after_closed=sum(r.status == "closed" for r in after),
        after_attempts=sum(r.attempts for r in after), shown_lessons=sum(bool(r.lessons_from) for r in ran),
        calls=sum(r.calls for r in ran), tokens=sum(r.tokens for r in ran),
    )


def share(part: int, whole: int) -> str:
    return "—" if whole == 0 else f"{part / whole:.1%} ({part}/{whole})"


SUMMARY_HEAD = ["mode", "tasks run", "closed", "pass@1, all tasks", "first encounter",
                "pass@1 after it (pitfall tasks)", "closed after it", "attempts after it (mean)",
                "tasks shown lessons", "model calls", "tokens"]


def summary_row(s: Summary) -> list[str]:
    mean = f"{s.after_attempts / s.after:.2f} ({s.after_attempts})" if s.after else "—"
    return [s.mode, str(s.tasks), share(s.closed, s.tasks), share(s.pass1, s.tasks), s.first_encounter or "—",
            share(s.after_pass1, s.after), share(s.after_closed, s.after), mean, str(s.shown_lessons),
            str(s.calls), f"{s.tokens:,}"]


def outcome(r: TaskResult) -> str:
    if not r.attempts:
        return "—"
    text = f"pass at {r.passed_at}" if r.passed_at else f"{r.status} after {r.attempts}"
    return text + (f" · lessons of {', '.join(r.lessons_from)}" if r.lessons_from else "")


def table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def render(model: str, by_mode: dict[str, list[TaskResult]]) -> str:
    summaries = [summarize(mode, results) for mode, results in by_mode.items()]
    ids = list(dict.fromkeys(r.task_id for results in by_mode.values() for r in results))
    rows = [[i, "yes" if i in PITFALL else "", *(outcome(next(r for r in res if r.task_id == i))
                                                    for res in by_mode.values())] for i in ids]
    return "\n\n".join([
        "# The backlog benchmark: memory on and off",
        f"Model `{model}`; the bookshop's backlog, one copy per mode.",
        table(SUMMARY_HEAD, [summary_row(s) for s in summaries]),
        "## Per task",
        table(["task", "pitfall", *by_mode], rows),
    ]) + "\n"


def save(path: Path, model: str, by_mode: dict[str, list[TaskResult]]) -> None:
    body = {"model": model, "modes": {m: [asdict(r) for r in rs] for m, rs in by_mode.items()},
            "summaries": [asdict(summarize(m, rs)) for m, rs in by_mode.items()]}
    path.write_text(json.dumps(body, indent=1) + "\n")
    path.with_suffix(".md").write_text(render(model, by_mode))
