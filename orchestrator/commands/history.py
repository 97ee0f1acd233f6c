"""`goldenloop history TASK`: a task's improvement journey, attempt by attempt.

Each attempt's score (the review's weighted score, else the share of tests passing),
what it was asked to improve, what was found, what it cost, and which version is best;
`--patch N` prints attempt N's tree as a patch against its subtask's base, so any
version can be put back with `git apply`. Exit codes: 0 done, 1 no history for that
task or no such attempt, 2 usage.
"""

from __future__ import annotations

import argparse
import os
import sys

import orjson

from orchestrator.layout import find_project
from orchestrator.loop.attempt_history import StoredAttempt, read_attempts
from reflection.meter import cached_words
from reflection.pattern.history import select_best

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2


def run_history(args: argparse.Namespace) -> int:
    try:
        project = find_project(args.dir)
    except ValueError as exc:
        return _fail(str(exc), EXIT_USAGE)
    if args.json and args.patch is not None:
        return _fail("--patch prints the patch itself; leave out --json", EXIT_USAGE)
    every = read_attempts(project, args.task)
    attempts = [a for a in every if args.subtask in (None, a.subtask_id)]
    if not attempts:
        if every:
            known = ", ".join(dict.fromkeys(a.subtask_id for a in every))
            return _fail(f"task {args.task} has no subtask {args.subtask} (its subtasks: {known})", EXIT_NOT_FOUND)
        return _fail(f"no attempt history for task {args.task} (it has not run since history was kept, "
                     "or the id is wrong)", EXIT_NOT_FOUND)
    try:
        if args.patch is not None:
            return _print_patch(attempts, args.patch)
        if args.json:
            sys.stdout.write(orjson.dumps(_as_json(attempts), option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            print(journey(args.task, attempts))
    except BrokenPipeError:  # `... | head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_OK


def _fail(message: str, code: int) -> int:
    print(f"goldenloop history: {message}", file=sys.stderr)
    return code


def _print_patch(attempts: list[StoredAttempt], number: int) -> int:
    found = [a for a in attempts if a.number == number]
    if not found:
        known = ", ".join(str(a.number) for a in attempts)
        several = len({a.subtask_id for a in attempts}) > 1
        return _fail(f"no attempt {number} (attempts kept: {known})" + ("; add --subtask to choose" if several else ""),
                     EXIT_NOT_FOUND)
    if len(found) > 1:
        names = ", ".join(a.subtask_id for a in found)
        return _fail(f"attempt {number} exists in several subtasks ({names}); add --subtask", EXIT_USAGE)
    sys.stdout.write(found[0].patch())
    return EXIT_OK


def _as_json(attempts: list[StoredAttempt]) -> list[dict[str, object]]:
    return [{**a.version.as_dict(), "subtaskId": a.subtask_id, "patchPath": str(a.patch_path)} for a in attempts]


def journey(task_id: str, attempts: list[StoredAttempt]) -> str:
    """The attempts as a human reads them, one block per subtask."""
    lines: list[str] = []
    for subtask in dict.fromkeys(a.subtask_id for a in attempts):
        mine = [a for a in attempts if a.subtask_id == subtask]
        lines.append(f"{subtask}: {len(mine)} attempt{'s' if len(mine) != 1 else ''}")
        lines += [line for a in mine for line in _attempt_lines(a)]
        best = select_best([a.version for a in mine], "highest_score")
        committed = next((a for a in mine if a.extra.get("commit")), None)
        if best is not None:
            lines.append(f"  Best version: attempt {best.iteration} (score {best.score:.2f})"
                         + (f"; committed: attempt {committed.number} ({str(committed.extra['commit'])[:10]})"
                            if committed else ""))
            base = str(best.extra.get("base") or "")[:12] or "<the subtask's base>"
            lines.append(f"  Recover it on its base: git checkout {base} && goldenloop history {task_id} "
                         f"--subtask {subtask} --patch {best.iteration} | git apply")
    return "\n".join(lines)


def _attempt_lines(a: StoredAttempt) -> list[str]:
    e, x = a.version.evaluation, a.extra
    source = f", {x['reviewSource']} review" if x.get("reviewSource") else ""
    lines = [f"  Iteration {a.number}: Score {e.overall_score:.2f}  {x.get('outcome', '?')}{source}"
             f"  {x.get('summary', '')}".rstrip()]
    if a.version.improvements_applied:
        lines.append("    Asked to improve: " + "; ".join(a.version.improvements_applied))
    lines += [f"    {d.name}: {d.score:.2f} ({d.evaluator}) {d.reasoning}".rstrip() for d in e.details]
    if e.issues and not e.satisfactory:
        lines.append("    Issues: " + "; ".join(e.issues))
    usage = a.version.token_usage
    cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    cached = f" ({cached_words(x['cachedTokens'])})" if "cachedTokens" in x else ""
    lines.append(f"    Tokens {usage.input_tokens or 0} in{cached} / {usage.output_tokens or 0} out, cost {cost}, "
                 f"{x.get('durationS') or 0:.1f} s")
    return lines
