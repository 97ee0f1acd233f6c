"""Every attempt's history on disk: its patch, verdict, evaluation, tokens and cost.

`.openagents/history/<taskId>/<subtaskId>.attempt-<n>.json` is a `ReflectionVersion` of
the Reflection pattern (the loop's attempts are that pattern's versions), and the
`.patch` beside it is the attempt's tree against the subtask's base, so any version,
the best one above all, can be put back with `git apply` long after its run ended.
`goldenloop history TASK` prints the journey. Files are written atomically; a damaged
one is skipped when read, never fatal. A patch is written there masked (`redact`); when
masking changed it, its exact bytes are kept in the project's private folder outside the
repository (`orchestrator.private_home`), where `history --patch` reads them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from orchestrator.layout import Layout, safe_name
from orchestrator.loop.plan import AttemptRecord, Subtask
from orchestrator.private_home import project_home
from reflection.fileio import atomic_write
from reflection.meter import Meter
from reflection.pattern.evaluation import ReflectionEvaluation
from reflection.pattern.history import ReflectionVersion
from reflection.redact import redact
from reflection.schema import Usage

if TYPE_CHECKING:
    from orchestrator.checks.review import Review
    from orchestrator.checks.verify import Verdict

PASSING = ("passed", "flaky", "waived", "preexisting")  # preexisting: written by older versions

log = logging.getLogger("goldenloop.history")


@dataclass(frozen=True)
class StoredAttempt:
    """One attempt as the history holds it: its version and where its patch lies."""

    subtask_id: str
    version: ReflectionVersion
    patch_path: Path
    exact_path: Path | None = None  # the exact bytes, outside the repository, when the patch had to be masked

    @property
    def number(self) -> int:
        return self.version.iteration

    @property
    def extra(self) -> dict[str, Any]:
        return self.version.extra

    def patch(self) -> str:
        """The attempt's exact patch where it was kept, else the one in `.openagents/`."""
        for path in (self.exact_path, self.patch_path):
            try:
                if path is not None:
                    return path.read_text(encoding="utf-8", errors="surrogateescape")
            except FileNotFoundError:
                continue
        return ""


def attempt_version(record: AttemptRecord, verdict: Verdict | None, review: Review | None, *, spent: Meter,
                    asked: list[str], subtask: Subtask) -> ReflectionVersion:
    """An attempt as a version: the review's evaluation, else one from its checks (the
    share of tests passing; 0 for an attempt rejected or never verified)."""
    if review is not None:
        evaluation = review.evaluation
    else:
        score = verdict.score if verdict is not None and record.outcome not in ("integrity", "no_change") else 0.0
        evaluation = ReflectionEvaluation(overall_score=score, criteria_scores={"checks": score},
                                          satisfactory=record.outcome in PASSING,
                                          issues=[] if record.outcome in PASSING else [record.summary])
    extra = {"subtaskId": subtask.id, "outcome": record.outcome, "summary": record.summary,
             "testsPassed": record.tests_passed, "testsFailed": record.tests_failed,
             "failureType": record.failure_type, "reflectionId": record.reflection_id,
             "durationS": record.duration_s, "commit": subtask.commit if record.outcome in PASSING else None,
             "modelCalls": spent.calls, "reviewSource": review.source if review else None,
             "base": subtask.base_commit}  # what the patch applies to
    if spent.calls:  # None: no provider said what its cache served (absent in histories before it was kept)
        extra["cachedTokens"] = spent.cached_or_none
    usage = Usage(input_tokens=spent.input_tokens, output_tokens=spent.output_tokens,
                  cost_usd=spent.cost_usd if spent.calls else 0.0)
    return ReflectionVersion(iteration=record.number, output="", evaluation=evaluation, improvements_applied=list(asked),
                             timestamp=record.started_at, token_usage=usage, extra=extra)


def history_dir(project_dir: Path, task_id: str) -> Path:
    return Layout(project_dir).history / safe_name(task_id)


def write_attempt(project_dir: Path, task_id: str, subtask_id: str, version: ReflectionVersion, patch: str,
                  transcript: str | None = None) -> Path:
    """Keep one attempt: the patch first, so a version on disk always has its tree; a coding
    agent's transcript (already redacted) beside it, made durable by the record's own
    directory fsync (a record without its transcript is still whole)."""
    folder = history_dir(project_dir, task_id)
    stem = f"{safe_name(subtask_id)}.attempt-{version.iteration}"
    shown = redact(patch)
    if shown != patch:  # the exact bytes where no commit or push can take them
        exact = exact_patch(project_dir, task_id, stem, make=True)
        exact.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(exact, patch.encode("utf-8", "surrogateescape"))
        exact.chmod(0o600)
    atomic_write(folder / f"{stem}.patch", shown.encode("utf-8", "surrogateescape"))
    record = {**version.as_dict(), "subtaskId": subtask_id, "patch": f"{stem}.patch"}
    if transcript is not None:
        atomic_write(folder / f"{stem}.transcript.txt", transcript.encode("utf-8", "surrogateescape"),
                     folder_synced=False)
        record["transcript"] = f"{stem}.transcript.txt"
    path = folder / f"{stem}.json"
    atomic_write(path, orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
    return path


def exact_patch(project_dir: Path, task_id: str, stem: str, *, make: bool = False) -> Path:
    """Where an attempt's exact patch is kept when the one in `.openagents/` is masked."""
    return project_home(project_dir, make=make) / "history" / safe_name(task_id) / f"{stem}.patch"


def read_attempts(project_dir: Path, task_id: str) -> list[StoredAttempt]:
    """The task's attempts on disk, by subtask then number; damaged files skipped."""
    folder = history_dir(project_dir, task_id)
    found: list[StoredAttempt] = []
    for path in folder.glob("*.attempt-*.json") if folder.is_dir() else ():
        try:
            data = orjson.loads(path.read_bytes())
            version = ReflectionVersion.from_dict(data)
        except (OSError, orjson.JSONDecodeError, ValueError, TypeError, KeyError) as exc:
            log.warning("skipping unreadable attempt history %s: %s", path, exc)
            continue
        subtask = str(data.get("subtaskId") or path.name.partition(".attempt-")[0])
        patch = folder / str(data.get("patch") or path.with_suffix(".patch").name)
        exact = exact_patch(project_dir, task_id, patch.stem)
        found.append(StoredAttempt(subtask, version, patch, exact if exact.is_file() else None))
    return sorted(found, key=lambda a: (_natural(a.subtask_id), a.number))


def _natural(subtask_id: str) -> tuple[Any, ...]:
    """T-1.10 after T-1.9."""
    return tuple(int(p) if p.isdigit() else p for p in subtask_id.replace("-", ".").split("."))
