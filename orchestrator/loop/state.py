"""What one subtask's attempts share in a run, and how each attempt is written down.

The subtask run (loop/subtask.py) owns one `SubtaskState`; the steps of each attempt
(loop/steps.py, loop/failure.py) read and update it: the attempt count, the tree, the
progress tracker, what earlier attempts left (`Earlier`), the versions that passed a
review, and what the next prompt says about the last attempt. Each attempt ends as one
`AttemptRecord` in the plan file, one version in the history, and its events.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.checks.convergence import AttemptScore, Decision, ProgressTracker
from orchestrator.checks.preflight import Baseline
from orchestrator.checks.verify import Verdict
from orchestrator.checks.waivers import Waivers
from orchestrator.config import RetryConfig
from orchestrator.executors import ExecutionResult
from orchestrator.judging.judge import Ground, Judge
from orchestrator.judging.judgement import PASSING_OUTCOMES, Judgement
from orchestrator.layout import Layout
from orchestrator.loop.attempt import Attempt
from orchestrator.loop.attempt_history import attempt_version, write_attempt
from orchestrator.loop.escalation import AttemptSnapshot
from orchestrator.loop.judging_files import JudgingFiles
from orchestrator.loop.parts import LoopParts
from orchestrator.loop.plan import AttemptOutcome, AttemptRecord, Subtask, SubtaskPlan
from orchestrator.loop.prompt import LastAttempt
from orchestrator.loop.remember import record_use
from orchestrator.loop.retry_choice import RetryChoices
from orchestrator.loop.search import TreeSearch
from orchestrator.loop.tree import SubtaskTree
from orchestrator.recovery.journal import Journal
from orchestrator.tasks import Task
from reflection.pattern.history import ReflectionVersion
from reflection.schema import FailureContext


@dataclass
class Earlier:
    """What the subtask's earlier attempts in this run left, by attempt number."""

    snapshots: list[AttemptSnapshot] = field(default_factory=list)  # for the escalation packet
    patches: dict[int, str] = field(default_factory=dict)  # its tree, as a binary patch against the base
    failed_trees: dict[str, int] = field(default_factory=dict)  # tree hash -> the failed attempt that left it
    failures: dict[int, str] = field(default_factory=dict)  # what its retry was told
    judgements: dict[int, Judgement] = field(default_factory=dict)  # how its verdict was judged
    scores: dict[int, AttemptScore] = field(default_factory=dict)  # as the tracker saw it

    def snapshot(self, number: int) -> AttemptSnapshot | None:
        return next((s for s in self.snapshots if s.number == number), None)

    def failed_tree(self, patch: str) -> int | None:
        """The failed attempt that left this tree, if one did."""
        return self.failed_trees.get(tree_key(patch))

    def tree_failed(self, number: int, patch: str) -> None:
        self.patches[number] = patch
        self.failed_trees[tree_key(patch)] = number


class SubtaskState:
    def __init__(self, parts: LoopParts, task: Task, plan: SubtaskPlan, subtask: Subtask,
                 baseline: Baseline | None, *, ground: Ground, base_tree: str, final: bool, notes: str = "",
                 signatures: Sequence[str] = ()) -> None:
        self.p, self.task, self.plan, self.subtask = parts, task, plan, subtask
        self.notes = notes  # the task's notes from earlier runs, shown before its description
        self.signatures = signatures  # of the checks failing before the task: lessons about them rank higher
        self.lessons, self.lesson_ids = "", []  # other tasks' lessons, for this run's first attempt
        c = parts.config
        self.max_attempts = c.reflexion.max_retries + 1
        self.baseline = baseline
        self.waivers = Waivers.of(c.checks_config.known_failures)
        # Every verdict against the task's base, in the judge's tree (orchestrator/judging/); the
        # task's own proof (fail-to-pass, its tests) when its last subtask ends.
        self.judge = Judge(ground, baseline, base_tree=base_tree, task_text=task_text(task), task_type=task.type,
                           final=final)
        self.tracker = progress_tracker(c.retry)
        # retry.strategy "tree": the search that picks each retry's starting tree (loop/search.py)
        self.search = TreeSearch(c.retry.tree_width, c.retry.tree_depth) if c.retry.strategy == "tree" else None
        self.decision: Decision | None = None  # the tracker's last word
        self.attempt = 0  # this run's attempts: "attempt k/N"
        self.reflections = 0  # reflections written
        self.tree = SubtaskTree(parts, self.event)
        self.journal: Journal  # written as the subtask begins, before the first attempt
        self.judging = JudgingFiles(parts.repo.root, {})  # read as the subtask begins
        self.linked: dict[str, tuple[int, int]] = {}  # what the checkout's linked .venv held as it began
        self.strangers: set[int] = set()  # processes already outside their session: not ours
        self.earlier = Earlier()
        self.changed: list[str] = []  # the tree's changes against the base; the next attempt's hints
        self.start: int | None = None  # the attempt whose tree the next attempt starts from; None: base
        self.last: LastAttempt | None = None  # what the next prompt says about the last attempt
        self.previous_signature: str | None = None  # the last failure's error signature
        self.latest_patch: str | None = None  # the tree the executor last left, once taken
        self.passing: list[ReflectionVersion] = []  # reviewed attempts that passed the checks
        self.revisions = 0  # revision attempts a review asked for
        self.next_applying: list[str] = []  # what the next attempt will be asked to improve
        # A failure whose reflection the retry's reply will write (reflexion.oneCall)
        self.pending: FailureContext | None = None
        # retry.strategy "adaptive": the failure class and choice the next attempt was made by
        self.choice: tuple[str, str] | None = None

    async def roll_back_to(self, attempt: int | None, *, event: str | None = None) -> None:
        """The tree as `attempt` left it; None: as the subtask found it."""
        await self.tree.restore()
        if attempt is not None:
            await self.tree.apply(self.earlier.patches[attempt])
        self.changed = await self.tree.changed_files()
        if event == "rolled_back":
            self.start = attempt
            self.event(event, toAttempt=attempt)
        elif event is not None:
            self.event(event, attempt=self.attempt, toAttempt=attempt)

    @property
    def shares_links(self) -> bool:
        """Whether the judge's tree links paths of the checkout (`worktree.link`: a `.venv`)
        that the attempt could change: an agent in its sandbox cannot."""
        in_worktree = self.p.repo.root != self.p.project_dir  # the checkout's own .venv is beneath the grant
        if in_worktree and getattr(self.p.executor, "sandboxed", False):
            return False
        judges = self.p.judges
        return judges is not None and judges.provided is not None and bool(judges.provided.link)

    @property
    def converges(self) -> bool:
        """Whether the retries are a sequence the convergence rules judge: not the tree
        search's siblings, not retry.fresh's independent samples."""
        return self.search is None and not self.p.config.retry.fresh

    def track(self, score: AttemptScore, *, always_log: bool) -> Decision:
        decision = self.decision = self.tracker.record(score)
        if not self.converges:  # a verdict nothing acts on must not be printed
            return decision
        if always_log or decision.action != "continue" or decision.repeated_signature:
            self.event("progress", attempt=self.attempt, **decision.as_event())
        return decision

    # -- records ------------------------------------------------------------------------

    def record(self, attempt: Attempt, outcome: AttemptOutcome, summary: str, verdict: Verdict | None = None,
               reflection_id: str | None = None, *, executed: ExecutionResult | None = None,
               judged: Judgement | None = None) -> None:
        """The attempt in the plan file and the history; did the lessons shown to it help?"""
        s = self.subtask
        digest = verdict.digest if verdict else None
        s.attempts.append(AttemptRecord(
            number=s.next_number,
            outcome=outcome,
            failure_type=verdict.failure_type if verdict and verdict.failure_type else None,
            summary=summary,
            error_signature=digest.signature if digest else None,
            tests_passed=verdict.tests_passed if verdict else None,
            tests_failed=verdict.tests_failed if verdict else None,
            files_changed=self.changed,
            reflection_id=reflection_id,
            duration_s=round(time.monotonic() - attempt.started, 3),
            format_asked=executed.format_asked if executed else None,
            format_received=executed.format_received if executed else None,
            verdict=judged.parts.as_event() if judged is not None and judged.parts is not None else None,
        ))
        if outcome not in ("passed", "reviewed"):
            s.failure_count += 1
            s.last_failure_reason = summary
        self.save()
        self._keep_history(attempt, s.attempts[-1], verdict, executed.transcript if executed else None)
        if self.choice is not None:  # what the adaptive choice came to, for the project's record
            klass, choice = self.choice
            self.choice = None
            RetryChoices(Layout(self.p.project_dir).retry_choices).record(klass, choice, outcome in PASSING_OUTCOMES)
        if attempt.number == 1:  # the attempt the lessons were shown to
            record_use(self.p, self.lesson_ids, self.task, s.attempts[-1].number, outcome in ("passed", "waived"))

    def _keep_history(self, attempt: Attempt, record: AttemptRecord, verdict: Verdict | None,
                      transcript: str | None) -> None:
        """The attempt as a version of the Reflection pattern, with its patch, on disk."""
        review = attempt.review if record.outcome in (*PASSING_OUTCOMES, "reviewed") else None
        version = attempt_version(record, verdict, review, spent=self.p.meter.since(attempt.spent),
                                  asked=attempt.applying, subtask=self.subtask)
        version.extra.update(attempt.agent_run)
        patch = self.earlier.patches.get(attempt.number, attempt.patch or "")
        try:
            write_attempt(self.p.project_dir, self.task.id, self.subtask.id, version, patch, transcript)
        except OSError as exc:  # the journey is for humans: a full disk must not stop the loop
            self.event("history_failed", attempt=attempt.number, error=str(exc))

    def log_verdict(self, verdict: Verdict, judged: Judgement) -> None:
        """The attempt's one verdict, the checks as judged: kept for later attempts, and
        logged as every view shows it (its parts: pass-to-pass, fail-to-pass, the tests named)."""
        self.earlier.judgements[self.attempt] = judged
        self.event("verdict", attempt=self.attempt, outcome=judged.outcome, passed=judged.passed,
                   checksPassed=verdict.passed, failureType=verdict.failure_type, summary=judged.summary,
                   waived=list(judged.waived), testsPassed=verdict.tests_passed, testsFailed=verdict.tests_failed,
                   errorSignature=verdict.digest.signature if verdict.digest else None,
                   durationS=round(verdict.duration_s, 3), filesChanged=self.changed,
                   parts=judged.parts.as_event() if judged.parts is not None else None)

    def best_judgement(self) -> Judgement | None:
        """The judgement of the attempt that got furthest (the highest score, the latest of
        equals), which a blocked task's reason names; else the last judged."""
        judged = self.earlier.judgements
        if not judged:
            return None
        scored = [n for n in judged if n in self.earlier.scores]
        if not scored:
            return judged[max(judged)]
        return judged[max(scored, key=lambda n: (self.earlier.scores[n].score, n))]

    def save(self) -> None:
        self.plan.save(self.p.layout.plan(self.plan.task_id))

    def event(self, name: str, **fields: Any) -> None:
        self.p.runlog.event(name, taskId=self.task.id, subtaskId=self.subtask.id, **fields)


def progress_tracker(r: RetryConfig) -> ProgressTracker:
    return ProgressTracker(plateau_window=r.plateau_window, stop_on_plateau=r.stop_on_plateau,
                           stop_on_oscillation=r.stop_on_oscillation,
                           # a search picks its own starting trees: no "starts from the best" for it
                           rollback_regressions=r.rollback_regressions and r.strategy == "linear",
                           improvement_threshold=r.improvement_threshold if r.stop_on_diminishing_returns else 0.0)


def tree_key(patch: str) -> str:
    """A tree's identity, from its snapshot against the subtask's base."""
    return hashlib.sha256(patch.encode("utf-8", "surrogateescape")).hexdigest()


def task_text(task: Task) -> str:
    """What the task says, for telling its own tests and modules from others."""
    criteria = task.acceptance_criteria or ""
    if isinstance(criteria, list):
        criteria = "\n".join(criteria)
    return "\n".join((task.title, task.description, criteria))
