"""Run-log events rendered for people (one readable line per step) or as JSON lines."""

from __future__ import annotations

import logging
import sys
from datetime import datetime
from typing import Any, TextIO

import orjson

from orchestrator.runlog import Event


def library_warnings_to_stderr() -> None:
    """The library's warnings as one `LEVEL: message` line each on stderr, nothing chattier."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    root = logging.getLogger("goldenloop")
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    root.propagate = False


class JsonLines:
    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout  # looked up late: tests and pipes swap sys.stdout

    def __call__(self, event: Event) -> None:
        self.out.write(orjson.dumps(event).decode() + "\n")
        self.out.flush()


class HumanLines:
    """Terse lines that tell the story: attempt k/N, verdict, reflection, commit."""

    def __init__(self, out: TextIO | None = None, *, prefix_task: bool = False) -> None:
        self._out = out
        self.prefix_task = prefix_task  # overnight workers interleave: name the task

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout

    def __call__(self, event: Event) -> None:
        render = getattr(self, "_" + event["event"], None)
        text = render(event) if render else None
        if text:
            if self.prefix_task and event.get("taskId"):
                where = f"{event['repo']} " if event.get("repo") else ""  # repositories run side by side
                text = f"[{where}{event['taskId']}] {text.strip()}"
            self.out.write(text + "\n")
            self.out.flush()

    def _task_started(self, e: Event) -> str:
        return f"Task {e['taskId']}: {e['title']}"

    def _decomposed(self, e: Event) -> str:
        subtasks = e.get("subtasks", [])
        how = "planned by the model" if e.get("source") == "llm" else "the task as one subtask"
        lines = [f"  plan: {len(subtasks)} subtask(s), {how}"]
        lines += [f"    {s['id']}  {s['title']}" for s in subtasks] if len(subtasks) > 1 else []
        return "\n".join(lines)

    def _plan_resumed(self, e: Event) -> str:
        return f"  resuming: {e['done']} of {e['total']} subtask(s) already done"

    def _attempt_started(self, e: Event) -> str:
        return f"  [{e['subtaskId']}] {attempt_words(e)}"

    def _waiting(self, e: Event) -> str:
        until = datetime.fromtimestamp(float(e["until"])).astimezone()
        seconds = int(e.get("seconds") or 0)
        return (f"  waiting for the usage limit to reset: {until:%H:%M:%S %Z} (in {seconds // 3600}:"
                f"{seconds // 60 % 60:02d}:{seconds % 60:02d}), then {e.get('taskId')} again")

    def _edit_failed(self, e: Event) -> str:
        if e.get("failureKind") == "agent":
            return f"    FAIL  agent run failed: {_first_line(e.get('error'))}"
        asked = f" (asked for {e['formatAsked']}, got {e['formatReceived']})" if e.get("formatAsked") else ""
        return f"    FAIL  reply not applied{asked}: {_first_line(e.get('error'))}"

    def _repeat(self, e: Event) -> str:
        return f"    REPEAT  same code as attempt {e.get('sameAs')}: {e.get('action')}"

    def _verdict(self, e: Event) -> str:
        return f"    {verdict_mark(e)}  {e.get('summary', '')}"

    def _reflection(self, e: Event) -> str:
        where = f"\n      written to {e['path']}" if e.get("path") else ""
        return (
            f"    reflection ({_written_by(e) or 'heuristic'}) [{e.get('category')}]: {e.get('analysis')}\n"
            f"      next: {e.get('suggestion')}{where}"
        )

    def _reflection_failed(self, e: Event) -> str:
        return f"    reflection could not be saved: {e.get('error')}"

    def _committed(self, e: Event) -> str:
        files = e.get("files", [])
        return f"    committed {str(e['sha'])[:10]} ({len(files)} file(s): {', '.join(files[:4])})"

    def _no_changes(self, e: Event) -> str:
        return "    nothing to commit: the checks pass without changes"

    def _model_error(self, e: Event) -> str:
        return f"    model error ({e.get('kind')}) during {e.get('purpose')}: {_first_line(e.get('message'))}"

    def _model_call_refused(self, e: Event) -> str:
        return f"    {e.get('purpose')} call not made: {_first_line(e.get('reason'))}"

    def _escalated(self, e: Event) -> str:
        restored = "tree restored to the subtask's start; " if e.get("restored") else ""
        why = f" ({e['convergence']})" if e.get("convergence") else ""
        return f"  ESCALATED{why}: {restored}packet: {e.get('packet')}"

    def _preflight(self, e: Event) -> str:
        if e.get("environmentError"):
            return f"  preflight: the checks cannot run: {e['environmentError']}"
        failing, waived = e.get("failingAtBaseline") or [], set(e.get("waivedAtBaseline") or [])
        took = "recorded for this tree, not run again" if e.get("recorded") else f"{e.get('durationS')} s"
        if e.get("passed"):
            return f"  preflight: checks pass before any change ({took})"
        about = e.get("aboutTask")
        to_fix = about if about is not None else [t for t in failing if t not in waived]
        others = [t for t in failing if t not in to_fix and t not in waived]
        line = f"  preflight: {len(failing)} test(s) already failing before any change ({took})"
        if to_fix:
            line += f"; the task must make them pass: {_few(to_fix)}"
        if others:
            line += f"; not this task's, left alone: {_few(others)}"
        if waived:
            line += f"; {len(waived)} waived in checks.knownFailures"
        return line

    def _progress(self, e: Event) -> str:
        return f"    progress: {e.get('explanation')}"

    def _reviewed(self, e: Event) -> str:
        mark = "REVIEW OK" if e.get("satisfactory") else "REVIEW LOW"
        scores = ", ".join(f"{c['name']} {c['score']:.2f}" for c in e.get("criteria") or [])
        lines = [f"    {mark}  {e.get('score', 0):.2f} of {e.get('threshold', 0):.2f} needed ({e.get('source')}): {scores}"]
        if e.get("below"):
            lines.append(f"      under their own threshold: {', '.join(e['below'])}")
        lines += [f"      not scored: {problem}" for problem in e.get("problems") or []]
        return "\n".join(lines)

    def _review_accepted_low(self, e: Event) -> str:
        return (f"    committing although the review ({e.get('score', 0):.2f}) is below {e.get('threshold', 0):.2f}: "
                f"{e.get('why')}; the checks pass, and the review only asks for revisions")

    def _revision_asked(self, e: Event) -> str:
        items = e.get("improvements") or []
        return "    revision asked: " + ("; ".join(items[:3]) if items else "raise the review's weakest criteria")

    def _review_kept_best(self, e: Event) -> str:
        return f"    kept attempt {e.get('kept')} (review {e.get('score', 0):.2f}): {e.get('reason')}"

    def _rolled_back(self, e: Event) -> str:
        return f"    rolled back to attempt {e.get('toAttempt')}'s tree (the best so far)"

    def _fresh_retry(self, e: Event) -> str:
        return (f"    fresh sample {e.get('sample')} of {e.get('of')} (retry.fresh): from the subtask's start, "
                "told nothing of the earlier samples")

    def _tree_search(self, e: Event) -> str:
        to = e.get("startsFrom")
        where = f"attempt {to}'s tree" if to else "the subtask's start"
        if e.get("next") == "sibling":
            how = "another candidate from"
        elif e.get("noneScored") and to:
            how = "no candidate passed any test; expanding the latest,"
        else:
            how = "expanding the best candidate,"
        return f"    tree search: {how} {where}"

    def _attempt_undone(self, e: Event) -> str:
        to = e.get("toAttempt")
        where = f"attempt {to}'s tree" if to else "the subtask's start"
        return f"    undid attempt {e.get('attempt')}'s changes: back to {where}"

    def _restored(self, e: Event) -> str:
        paths = e.get("paths") or []
        return f"  restored the tree of {e.get('subtaskId')} ({len(paths)} path(s))"

    def _files_kept(self, e: Event) -> str:
        paths = e.get("paths") or []
        shown = ", ".join(paths[:5]) + (" ..." if len(paths) > 5 else "")
        return f"  kept {len(paths)} file(s) as they were before the undo, in {e.get('folder')}: {shown}"

    def _task_closed(self, e: Event) -> str:
        return f"  closed {e['taskId']} with {len(e.get('commits', []))} commit(s)"

    def _task_reflected(self, e: Event) -> str:
        r = e.get("reflection") or {}
        which = "first notes" if e.get("isFirstReflection") else f"notes #{r.get('runCount')}"
        return f"  task reflection ({which}) kept for the next run of this task"

    def _lessons_injected(self, e: Event) -> str:
        shown = ", ".join(f"{item.get('kind')} of {_task_of(item)}" for item in e.get("lessons") or [])
        return f"  lessons from earlier tasks in the first prompt: {shown}"

    def _playbook_offered(self, e: Event) -> str:
        return f"  playbook of {e.get('fromTask')} in the first prompt: {e.get('steps')} step(s) that worked there"

    def _outcome_reflected(self, e: Event) -> str:
        by = f" (written by the {_written_by(e)})" if _written_by(e) else ""
        return f"  {e.get('outcome')} reflection{by} kept for other tasks: {e.get('page')}"

    def _rules_promoted(self, e: Event) -> str:
        return f"  {len(e.get('rules') or [])} rule(s) joined .openagents/memory/rules.md"

    def _task_reflection_failed(self, e: Event) -> str:
        return f"  task reflection not kept: {_first_line(e.get('error'))}"

    def _task_blocked(self, e: Event) -> str:
        return f"  blocked {e['taskId']}: {e.get('reason')}"

    def _landing_blocked(self, e: Event) -> str:
        """Closed in its worktree, then not landed: a file of the user's was in the way."""
        return f"  blocked {e['taskId']} after all: {e.get('reason')}"

    def _task_reopened(self, e: Event) -> str:
        return f"  put {e['taskId']} back to open ({e.get('reason')})"


# How each judged outcome of an attempt is marked, on the console and in the reports.
MARKS = {"passed": "PASS", "waived": "WAIVED", "flaky": "FLAKY", "failed": "FAIL", "integrity": "REJECT",
         "environment": "ENV", "timeout": "TIMEOUT", "no_change": "NO CHANGE", "preexisting": "PASS*"}


def verdict_mark(event: Event) -> str:
    """PASS, WAIVED, FAIL, ...: the attempt as judged (a log older than `outcome` has `passed`)."""
    outcome = event.get("outcome")
    if outcome in MARKS:
        return MARKS[outcome]
    return "PASS" if event.get("passed") else "FAIL"


def _few(tests: list[str]) -> str:
    return ", ".join(tests[:3]) + (f" and {len(tests) - 3} more" if len(tests) > 3 else "")


def _first_line(text: Any) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0][:300] if lines else ""


def _task_of(lesson: Event) -> str:
    """The task a lesson came from: `shop/T-3` for another project of a shared memory."""
    project = lesson.get("fromProject")
    return f"{project}/{lesson.get('fromTask')}" if project else str(lesson.get("fromTask"))


def attempt_words(e: Event) -> str:
    """"attempt 2, retry 1 of 3": numbered as `show` and `history` number it (counting
    earlier runs), its retries as the config counts them (reflexion.maxRetries)."""
    run_attempt, retries = e["attempt"], e["of"] - 1
    number = e.get("number", run_attempt)
    if run_attempt > 1:
        return f"attempt {number}, retry {run_attempt - 1} of {retries}"
    return f"attempt {number}, " + (f"up to {retries} retr{'y' if retries == 1 else 'ies'}" if retries else "no retry")


def _written_by(e: Event) -> str | None:
    """Who wrote a reflection, in a newcomer's words; None for the heuristic."""
    if e.get("source") != "llm":
        return None
    return "scripted model" if str(e.get("model") or "").startswith("scripted/") else "model"
