"""Which lessons of other tasks a task is shown, in seed 001's order: same task type, then
the same tool or API, then recency; shared words only refine."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from projects import FIX_ADD, do_one_task, events_of, goldenloop, make_project, task

MEMORY = Path(".openagents") / "memory"
OAUTH_TASK = task("T-1", "Refresh the OAuth access token", type="feature",
                  description="Calls to the billing service fail after an hour: refresh the token before it "
                              "expires, and ship it in the next release. Keep add() in calc.py as it is.")


def lesson(lesson_id: str, created: str, advice: str, task_type: str, title: str = "an old task") -> dict:
    return {"id": lesson_id, "kind": "outcome", "outcome": "failed", "sessionId": "old", "taskId": f"OLD-{lesson_id}",
            "agent": "coder", "title": title, "createdAt": created, "taskType": task_type, "files": [],
            "labels": [], "whatToDoDifferently": advice, "source": "heuristic"}


LESSONS = [
    lesson("type-old", "2026-09-01T00:00:00Z", "Keep the flag off until the docs land.", "feature"),
    lesson("type-new", "2026-10-01T00:00:00Z", "Announce the flag in the team channel.", "feature"),
    lesson("oauth", "2026-11-01T00:00:00Z", "Ask the provider for a new grant when it answers 401.", "bug",
           title="OAuth login loops"),
    lesson("words", "2026-11-02T00:00:00Z", "Cache the access token between calls.", "chore"),
    lesson("changelog", "2026-11-03T00:00:00Z", "List every merged change under the release heading.", "chore",
           title="Write the changelog"),
]


def project_with_lessons(git_repo: Path) -> Path:
    repo = make_project(git_repo, [{"match": "Task T-1:", "reply": FIX_ADD}], tasks=[OAUTH_TASK],
                        config={"reflexion": {"useLLM": False}, "memory": {"lessonsPerTask": 5}})
    (repo / MEMORY).mkdir(parents=True, exist_ok=True)
    (repo / MEMORY / "reflections.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in LESSONS))
    return repo


def test_a_task_is_shown_same_type_lessons_first_then_same_tool_then_shared_words(git_repo: Path) -> None:
    repo = project_with_lessons(git_repo)

    assert do_one_task(repo) == 0

    (shown,) = events_of(repo, "lessons_injected", "T-1")
    ids = [item["id"] for item in shown["lessons"]]
    assert ids == ["type-new", "type-old", "oauth", "words"]  # recency breaks the tie of the two of its type
    assert "changelog" not in ids  # "release" alone, the one word it shares, is no relevance
    why = {item["id"]: item["why"] for item in shown["lessons"]}
    assert why["oauth"]["tools"] == 1.0 and why["words"]["shared_words"] >= 2


def test_memory_search_ranks_by_tool_then_by_how_many_words_match(git_repo: Path, capsys) -> None:
    repo = project_with_lessons(git_repo)

    assert goldenloop(repo, "memory", "search", "Refresh the OAuth token before the release", "--json") == 0

    found = json.loads(capsys.readouterr().out)
    # A person searching finds "changelog" by its one shared word ("release"), ranked last;
    # a task is still not shown it (the test above).
    assert [hit["id"] for hit in found] == ["oauth", "words", "changelog"]
    assert found[2]["why"]["shared_words"] == 1
