"""Each step of one attempt on its own (loop/steps.py), driven by a fake executor and the
in-memory reflection store: what it hands on, and how it ends an attempt early.

git, the checks and the plan file are real; the subtask has begun (its journal written)
before each step is called, as `SubtaskRun.run` does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from projects import git, init_repo, judged_in

from orchestrator.budget import BudgetExceeded
from orchestrator.checks.convergence import StopReason
from orchestrator.config import ProjectConfig
from orchestrator.executors import ExecutionRequest, ExecutionResult
from orchestrator.git.repo import Repo
from orchestrator.layout import Layout
from orchestrator.loop.attempt import Attempt, Escalate, PutBack, Retry
from orchestrator.loop.parts import LoopParts
from orchestrator.loop.plan import single_subtask_plan
from orchestrator.loop.state import SubtaskState
from orchestrator.loop.steps import execute, guard, judge, prepare, review
from orchestrator.loop.subtask import SubtaskRun
from orchestrator.runlog import RunLog
from orchestrator.tasks import Task, TaskBoard
from reflection.llm import ModelError
from reflection.meter import Meter
from reflection.service import ReflectionService
from reflection.store import InMemoryReflectionStore

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
CHECK = "from calc import add\nassert add(2, 3) == 5, f'add(2, 3) == {add(2, 3)}'\nprint('1 passed')\n"


class FakeExecutor:
    """Writes the files of its next reply, or returns or raises what it is given."""

    name = "fake"

    def __init__(self, *replies: dict[str, str] | ExecutionResult | Exception) -> None:
        self.replies = list(replies)
        self.requests: list[ExecutionRequest] = []

    async def execute(self, request: ExecutionRequest) -> ExecutionResult:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, ExecutionResult):
            return reply
        for rel, text in reply.items():
            (request.repo_dir / rel).write_text(text)
        return ExecutionResult(ok=True, touched=sorted(reply))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    (repo / "calc.py").write_text(BROKEN)
    (repo / "check.py").write_text(CHECK)
    (repo / ".gitignore").write_text(".openagents/*\n!.openagents/project.json\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "calc with a bug")
    return repo


async def begun(root: Path, executor: FakeExecutor, *, stop: str | None = None) -> tuple[SubtaskState, list[dict]]:
    """A subtask's state as its first attempt finds it, and the events it writes."""
    events: list[dict] = []
    runlog = RunLog(root, persist=False)
    runlog.subscribe(events.append)
    config = ProjectConfig.model_validate({"testCommands": [f"{sys.executable} check.py"],
                                           "retry": {"flakyReruns": 0}})
    Layout(root).tasks.parent.mkdir(exist_ok=True)
    Layout(root).tasks.write_text('{"id": "T-1", "title": "Make add add"}\n')
    parts = LoopParts(project_dir=root, config=config, repo=Repo(root), board=TaskBoard.for_project(root),
                      runlog=runlog, executor=executor, planner=None,
                      reflections=ReflectionService(InMemoryReflectionStore()), session_id="run-1", meter=Meter(),
                      budget_check=(lambda: stop) if stop is not None else None)
    task = Task(id="T-1", title="Make add add")
    plan = single_subtask_plan(task)
    run = SubtaskRun(parts, task, plan, plan.subtasks[0], baseline=None, **judged_in(parts, root.parent / "judge"))
    await run.begin()
    return run.state, events


def named(events: list[dict], name: str) -> list[dict]:
    return [e for e in events if e["event"] == name]


@pytest.mark.anyio
async def test_prepare_counts_the_attempt_and_writes_its_prompt(root: Path) -> None:
    s, events = await begun(root, FakeExecutor())
    attempt = prepare(s)

    assert attempt.number == s.attempt == 1
    assert "Make add add" in attempt.request.prompt and attempt.request.repo_dir == root
    started = named(events, "attempt_started")[0]
    assert (started["attempt"], started["of"], started["promptChars"]) == (1, 4, len(attempt.request.prompt))


@pytest.mark.anyio
async def test_prepare_puts_the_subtask_back_when_the_budget_says_stop_and_counts_nothing(root: Path) -> None:
    s, _ = await begun(root, FakeExecutor(), stop="task cost budget: $0.0100 spent of $0.0100")
    with pytest.raises(PutBack) as stopped:
        prepare(s)

    assert (stopped.value.end, stopped.value.reason) == ("budget", "task cost budget: $0.0100 spent of $0.0100")
    assert s.attempt == 0


@pytest.mark.anyio
@pytest.mark.parametrize(("error", "outcome"), [
    (BudgetExceeded("run cost budget: the next call could cost more than the $0.01 left"), PutBack),
    (ModelError("connection refused", kind="connection"), PutBack),
    (ModelError("prompt is too long", kind="context_window"), Escalate),
])
async def test_execute_tells_a_model_failure_from_the_tasks_own(root: Path, error: Exception, outcome: type) -> None:
    s, _ = await begun(root, FakeExecutor(error))
    with pytest.raises(outcome) as ended:
        await execute(s, prepare(s))

    if isinstance(ended.value, Escalate):  # the task's prompt: an attempt on record, the subtask stops
        assert ended.value.why == StopReason.ENVIRONMENT
        assert [a.outcome for a in s.subtask.attempts] == ["model_refused"]
    else:  # nobody's fault: nothing recorded, to run again later
        assert s.subtask.attempts == []


@pytest.mark.anyio
async def test_guard_folds_an_agents_own_commit_back_into_changes(root: Path) -> None:
    s, events = await begun(root, FakeExecutor({"calc.py": FIXED}))
    attempt = prepare(s)
    executed = await execute(s, attempt)
    git(root, "commit", "-qam", "the agent's own commit")

    await guard(s, attempt, executed)

    assert s.changed == ["calc.py"] and Repo(root).head() == s.tree.base
    assert named(events, "agent_commits_folded")[0]["paths"] == ["calc.py"]


@pytest.mark.anyio
async def test_guard_puts_back_a_file_that_judges_attempts_and_ends_the_attempt(root: Path) -> None:
    project = root / ".openagents" / "project.json"
    project.parent.mkdir()
    project.write_text('{"testCommands": ["true"]}\n')
    git(root, "add", ".")
    git(root, "commit", "-qm", "the project's config")
    s, events = await begun(root, FakeExecutor({".openagents/project.json": "{}\n", "calc.py": FIXED}))
    attempt = prepare(s)
    executed = await execute(s, attempt)
    with pytest.raises(Retry):
        await guard(s, attempt, executed)

    assert project.read_text() == '{"testCommands": ["true"]}\n'
    assert named(events, "config_tampered") and named(events, "verdict")[0]["outcome"] == "integrity"
    assert [a.outcome for a in s.subtask.attempts] == ["integrity"]


@pytest.mark.anyio
async def test_judge_runs_no_check_for_a_reply_that_was_not_applied(root: Path) -> None:
    unapplied = ExecutionResult(ok=False, error="no edit blocks found in the reply", failure_kind="edit")
    s, events = await begun(root, FakeExecutor(unapplied))
    attempt = prepare(s)
    executed = await execute(s, attempt)
    await guard(s, attempt, executed)
    with pytest.raises(Retry):
        await judge(s, attempt, executed)

    assert named(events, "verdict") == []
    assert s.last is not None and not s.last.applied and "no edit blocks found" in s.last.failure


@pytest.mark.anyio
async def test_a_passing_attempt_is_judged_and_without_a_review_keeps_its_summary(root: Path) -> None:
    s, _ = await begun(root, FakeExecutor({"calc.py": FIXED}))
    attempt: Attempt = prepare(s)
    executed = await execute(s, attempt)
    await guard(s, attempt, executed)
    verdict, judged = await judge(s, attempt, executed)

    assert verdict.passed and judged.passed and attempt.patch
    assert await review(s, attempt, verdict, judged, executed) == judged.summary
    assert s.subtask.attempts == []  # recorded once committed, by the subtask run


@pytest.mark.anyio
async def test_a_failing_attempt_is_recorded_reflected_on_and_sets_up_the_retry(root: Path) -> None:
    s, _ = await begun(root, FakeExecutor({"calc.py": "def add(a, b):\n    return a * b\n"}))
    attempt = prepare(s)
    executed = await execute(s, attempt)
    await guard(s, attempt, executed)
    with pytest.raises(Retry):
        await judge(s, attempt, executed)

    assert [a.outcome for a in s.subtask.attempts] == ["failed"] and s.reflections == 1
    assert s.start == 1 and s.last is not None and "add(2, 3) == 6" in s.last.failure
    assert s.earlier.failed_tree(s.earlier.patches[1]) == 1  # the same code again is known
