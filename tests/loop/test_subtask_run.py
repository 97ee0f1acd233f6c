"""One subtask's attempts, driven by a fake executor and the in-memory reflection store.

The executor here writes files as a model's reply would have; git, the checks and the
plan file are real. Each test reads as what a user would see after the run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from projects import git, init_repo, judged_in

from orchestrator.config import ProjectConfig
from orchestrator.executors import ExecutionRequest, ExecutionResult
from orchestrator.git.repo import Repo
from orchestrator.layout import Layout
from orchestrator.loop.parts import LoopParts
from orchestrator.loop.plan import SubtaskPlan, single_subtask_plan
from orchestrator.loop.steps import REASK_TEMPERATURE
from orchestrator.loop.subtask import SubtaskRun
from orchestrator.runlog import RunLog
from orchestrator.tasks import Task, TaskBoard
from reflection.meter import Meter
from reflection.service import ReflectionService
from reflection.store import InMemoryReflectionStore

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
CHECK = "from calc import add\nassert add(2, 3) == 5, f'add(2, 3) == {add(2, 3)}'\nprint('1 passed')\n"
Reply = dict[str, str] | ExecutionResult


class FakeExecutor:
    """Plays a list of replies: files to write, or a result that could not be applied."""

    name = "fake"

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[ExecutionRequest] = []

    async def execute(self, request: ExecutionRequest) -> ExecutionResult:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, ExecutionResult):
            return reply
        for rel, text in reply.items():
            (request.repo_dir / rel).write_text(text)
        return ExecutionResult(ok=True, touched=sorted(reply))


class Harness:
    def __init__(self, root: Path, executor: FakeExecutor, *, retries: int = 3, budget: list[str] | None = None):
        self.root, self.executor = root, executor
        self.events: list[dict] = []
        self.store = InMemoryReflectionStore()
        runlog = RunLog(root, persist=False)
        runlog.subscribe(self.events.append)
        config = ProjectConfig.model_validate({
            "testCommands": [f"{sys.executable} check.py"],
            "reflexion": {"maxRetries": retries},
            "retry": {"flakyReruns": 0},
        })
        stops = list(budget or [])
        tasks = Layout(root).tasks
        tasks.parent.mkdir(exist_ok=True)
        tasks.write_text('{"id": "T-1", "title": "Make add add"}\n')
        self.parts = LoopParts(
            project_dir=root, config=config, repo=Repo(root), board=TaskBoard.for_project(root),
            runlog=runlog, executor=executor, planner=None,
            reflections=ReflectionService(self.store), session_id="run-1", meter=Meter(),
            budget_check=(lambda: stops.pop(0) or None) if budget is not None else None,
        )
        self.task = Task(id="T-1", title="Make add add")
        self.plan = single_subtask_plan(self.task)
        self.subtask = self.plan.subtasks[0]

    async def run(self):
        run = SubtaskRun(self.parts, self.task, self.plan, self.subtask, baseline=None,
                         **judged_in(self.parts, self.root.parent / "judge"))
        return run, await run.run()

    def named(self, name: str) -> list[dict]:
        return [e for e in self.events if e["event"] == name]

    def saved_plan(self) -> SubtaskPlan:
        plan = SubtaskPlan.load(self.parts.layout.plan("T-1"))
        assert plan is not None
        return plan


@pytest.fixture
def root(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    (repo / "calc.py").write_text(BROKEN)
    (repo / "check.py").write_text(CHECK)
    (repo / ".gitignore").write_text(".openagents/\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "calc with a bug")
    return repo


def head_file(root: Path, rel: str) -> str:
    return git(root, "show", f"HEAD:{rel}")


@pytest.mark.anyio
async def test_a_first_attempt_that_passes_is_committed_and_recorded(root: Path) -> None:
    h = Harness(root, FakeExecutor({"calc.py": FIXED}))
    run, result = await h.run()

    assert result.end == "passed" and result.commit
    assert head_file(root, "calc.py") == FIXED
    assert [a.outcome for a in h.saved_plan().subtasks[0].attempts] == ["passed"]
    assert run.attempt == 1 and h.store.count() == 0


@pytest.mark.anyio
async def test_a_retry_starts_from_the_failed_tree_and_reads_the_failure_and_the_reflection(root: Path) -> None:
    h = Harness(root, FakeExecutor({"calc.py": "def add(a, b):\n    return a * b\n"}, {"calc.py": FIXED}))
    run, result = await h.run()

    assert result.end == "passed" and run.attempt == 2
    retry = h.executor.requests[1]
    assert "add(2, 3) == 6" in retry.prompt  # the failure digest of attempt 1
    assert "return a * b" in retry.prompt  # its diff
    assert h.store.count() == 1 and h.store.recent("T-1.1")[0].analysis in retry.prompt
    assert retry.hint_paths == ["calc.py"]
    assert [a.outcome for a in h.saved_plan().subtasks[0].attempts] == ["failed", "passed"]


@pytest.mark.anyio
async def test_the_same_failed_code_again_is_asked_for_once_more_then_counted_without_running_the_checks(
    root: Path,
) -> None:
    wrong = {"calc.py": "def add(a, b):\n    return a * b\n"}
    h = Harness(root, FakeExecutor(wrong, wrong, wrong, {"calc.py": FIXED}))
    run, result = await h.run()

    assert result.end == "passed"
    asked_again = h.executor.requests[2]
    assert asked_again.temperature == REASK_TEMPERATURE and "Start over" in asked_again.prompt
    assert [e["action"] for e in h.named("repeat")] == ["asked again", "counted as a failed attempt"]
    assert len(h.named("verdict")) == 2  # attempt 1 and the final one; the repeat was not verified
    assert [a.outcome for a in h.saved_plan().subtasks[0].attempts] == ["failed", "repeat", "passed"]


@pytest.mark.anyio
async def test_a_reply_that_cannot_be_applied_runs_no_check_and_teaches_the_next_attempt(root: Path) -> None:
    unapplied = ExecutionResult(ok=False, error="no edit blocks found in the reply", failure_kind="edit",
                                repair="Reply with the complete new code of calc.py")
    h = Harness(root, FakeExecutor(unapplied, {"calc.py": FIXED}))
    run, result = await h.run()

    assert result.end == "passed"
    assert len(h.named("verdict")) == 1
    retry = h.executor.requests[1].prompt
    assert "no edit blocks found" in retry and "Reply with the complete new code of calc.py" in retry
    assert h.store.recent("T-1.1")[0].source == "heuristic"
    assert h.saved_plan().subtasks[0].attempts[0].summary.startswith("the reply could not be applied")


@pytest.mark.anyio
async def test_after_the_last_retry_the_tree_is_restored_and_the_users_files_are_kept(root: Path) -> None:
    (root / "notes.txt").write_text("my own notes\n")
    h = Harness(root, FakeExecutor(*({"calc.py": f"def add(a, b):\n    return a - b - {i}\n"} for i in range(3))),
                retries=2)
    run, result = await h.run()

    assert result.end == "escalated" and result.escalation and result.escalation.exists()
    assert (root / "calc.py").read_text() == BROKEN
    assert (root / "notes.txt").read_text() == "my own notes\n"
    assert h.saved_plan().subtasks[0].status == "failed"


@pytest.mark.anyio
async def test_a_budget_stop_puts_the_subtask_back_with_the_tree_restored(root: Path) -> None:
    h = Harness(root, FakeExecutor({"calc.py": "def add(a, b):\n    return 0\n"}),
                budget=["", "task cost budget: $0.0100 spent of $0.0100"])
    run, result = await h.run()

    assert result.end == "budget" and "task cost budget" in result.reason
    assert run.attempt == 1 and (root / "calc.py").read_text() == BROKEN
    assert h.saved_plan().subtasks[0].status == "pending"
