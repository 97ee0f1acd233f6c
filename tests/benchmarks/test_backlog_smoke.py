"""The backlog benchmark, offline: the scripted model on the bookshop's first tasks.

Checks the mechanism the benchmark measures, never a pass rate (the script decides the
outcomes): the first task to meet the bookshop's convention fails until its reflection
says why; with the memory on, what it taught reaches the first prompt of a later task
that meets it again, which then passes at once; with the memory off, it does not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from reflection.litellm_setup import load_litellm

litellm = load_litellm()  # offline: the bundled price list, no download at import
from litellm.integrations.custom_logger import CustomLogger  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.backlog.build import backlog_lines  # noqa: E402
from bench.backlog.results import read_repo  # noqa: E402
from bench.backlog.run import main  # noqa: E402
from bench.backlog.smoke import check_mechanism, script_replies, wrong_code  # noqa: E402
from bench.backlog.spec import ACCEPTANCE, FILES, PITFALL, SMOKE_CODE  # noqa: E402


class Prompts(CustomLogger):
    """The last user message of every model call, as litellm sent it (the model's side)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time) -> None:  # noqa: ANN001
        self.sent.append(kwargs["messages"][-1]["content"])


@pytest.fixture
def prompts():
    seen = Prompts()
    litellm.callbacks.append(seen)
    yield seen
    litellm.callbacks.remove(seen)


def first_prompt(sent: list[str], task_id: str) -> str:
    return next(p for p in sent if f"# Task {task_id}:" in p)


@pytest.mark.slow
def test_the_lesson_of_the_first_encounter_reaches_a_later_tasks_prompt(tmp_path, prompts):
    work = tmp_path / "work"

    assert main(["--smoke", "--limit", "4", "--modes", "memory-on", "--work", str(work)]) == 0
    on = read_repo(work / "memory-on")
    sent_on = list(prompts.sent)
    assert main(["--smoke", "--limit", "4", "--modes", "memory-off", "--work", str(work)]) == 0
    off = read_repo(work / "memory-off")

    assert check_mechanism({"memory-on": on, "memory-off": off}) == []
    # T-02 meets the convention first: it fails, is reflected on, passes at attempt 2.
    assert [(r.task_id, r.passed_at) for r in on] == [("T-01", 1), ("T-02", 2), ("T-03", 1), ("T-04", 1)]
    assert [(r.task_id, r.passed_at) for r in off] == [("T-01", 1), ("T-02", 2), ("T-03", 1), ("T-04", 2)]
    # What T-02 left in the memory is in T-04's first prompt, word for word.
    memory = work / "memory-on" / ".openagents" / "memory" / "reflections.jsonl"
    (lesson,) = [r for r in map(json.loads, memory.read_text().splitlines()) if r.get("kind") == "outcome"]
    assert lesson["taskId"] == "T-02" and "ValidationError" in lesson["strategy"]
    prompt = first_prompt(sent_on, "T-04")
    assert "## Lessons from earlier tasks" in prompt and "task T-02)" in prompt
    assert lesson["strategy"][:120] in prompt
    assert "Lessons from earlier tasks" not in first_prompt(sent_on, "T-02")  # nothing learned yet
    assert "Lessons from earlier tasks" not in first_prompt(prompts.sent[len(sent_on):], "T-04")  # memory off
    table = (work / "results.md").read_text()
    assert "| memory-off | 4 | 100.0% (4/4) | 50.0% (2/4) | T-02 | 0.0% (0/1) |" in table


def test_the_backlog_is_realistic_and_the_script_covers_it():
    tasks = [json.loads(line) for line in backlog_lines(None)]
    assert 15 <= len(tasks) <= 30 and len({t["id"] for t in tasks}) == len(tasks)
    assert all("ValidationError" not in t["description"] for t in tasks)  # the convention is never spelt out
    assert set(FILES) == {t["id"] for t in tasks} and PITFALL < set(FILES)
    for task in tasks:  # one acceptance test file per task, and the scripted model's code for it
        assert len(list(ACCEPTANCE.glob(f"test_{task['id'].lower().replace('-', '')}_*.py"))) == 1
        code = (SMOKE_CODE / f"{task['id']}.py").read_text()
        assert ("ValidationError" in code) == (task["id"] in PITFALL)
        assert "ValidationError" not in wrong_code(code)
    replies = script_replies([t["id"] for t in tasks])
    assert sum("Lessons from earlier tasks" in str(r["match"]) for r in replies) == len(PITFALL)


def test_a_model_that_cannot_answer_stops_the_run_with_one_sentence(tmp_path, capsys):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [{"error": "auth", "times": None}]}))
    work = tmp_path / "work"

    code = main(["--model", f"scripted/{script}", "--limit", "2", "--modes", "memory-off", "--work", str(work)])

    assert code == 1
    said = capsys.readouterr().out
    assert "backlog: memory-off: overnight stopped with tasks still open (" in said and "run the same" in said
    assert json.loads((work / "results.json").read_text())["modes"]["memory-off"][0]["status"] == "open"
    with pytest.raises(SystemExit) as usage:
        main(["--smoke", "--limit", "0"])
    assert usage.value.code == 2
    assert main(["--smoke", "--work", str(ROOT / "backlog-work")]) == 2  # inside the checkout
    assert not (ROOT / "backlog-work").exists()
