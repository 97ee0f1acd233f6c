"""The Reflection pattern by the seed's section 6, and the stability of code without an
embedding.

    .venv/bin/python bench/pattern_bench.py [--model NAME] [--judge-repeats 3]

**Success metrics.** Five small coding tasks, each run through `ReflectionPattern` with
two criteria: `tests` (a function that runs the task's checks on the output) and
`correctness` (the model judge, asked `--judge-repeats` times). Printed per run: the
scores, improvement per iteration, the iteration that met the bar, the judge's widest
spread; then the seed's figures over the runs: final (best) above initial, satisfactory
within 3 iterations, judgements within 0.1, stopped by a rule rather than the limit.
Without `--model` the scripted model writes the drafts and judges them: the figures
then check the measuring, not a model (the script decides every score). With `--model`
(any litellm name; the same model drafts and judges) they measure that model.

**Stability.** One-token fixes and repeats of functions of 7 to 40 lines
(bench/pattern_stability.py), compared the way the lexical fallback did before (the
share of common tokens) and does now (1 / (1 + tokens changed)); a pair at or above the
default threshold 0.9 stops a run as "stable".
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import orjson  # noqa: E402
from pattern_stability import FIXES, repeats  # noqa: E402

from reflection.llm import LiteLLMModel  # noqa: E402
from reflection.pattern import QualityCriterion, ReflectionPattern, ReflectionResult  # noqa: E402
from reflection.pattern.stability import lexical_similarity  # noqa: E402
from reflection.scripted import scripted_script  # noqa: E402

THRESHOLD = 0.9  # ConvergenceSettings' default stability threshold
_OLD_TOKENS = re.compile(r"[^\W_]+|[+\-*/%<>=!&|^~]+")  # the fallback's tokens before the change

# name -> (task, checks run on the output, a first draft and its fix for the scripted model)
TASKS: dict[str, tuple[str, str, str, str]] = {
    "clamp": ("Write clamp(x, lo, hi) in Python.", "assert clamp(5, 0, 3) == 3 and clamp(-1, 0, 3) == 0",
              "def clamp(x, lo, hi):\n    return min(x, hi)\n",
              "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"),
    "is_leap": ("Write is_leap(year) in Python.", "assert is_leap(2000) and not is_leap(1900) and is_leap(2024)",
                "def is_leap(year):\n    return year % 4 == 0\n",
                "def is_leap(year):\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n"),
    "mean": ("Write mean(xs) in Python; 0.0 for an empty list.", "assert mean([]) == 0.0 and mean([1, 2]) == 1.5",
             "def mean(xs):\n    return sum(xs) / len(xs)\n",
             "def mean(xs):\n    return sum(xs) / len(xs) if xs else 0.0\n"),
    "chunks": ("Write chunks(xs, n) in Python: lists of n items, the last shorter.",
               "assert chunks([1, 2, 3], 2) == [[1, 2], [3]]",
               "def chunks(xs, n):\n    return [xs[i:i + n] for i in range(0, len(xs), n)]\n",
               "def chunks(xs, n):\n    return [xs[i:i + n] for i in range(0, len(xs), n)]\n"),
    "slug": ("Write slug(title) in Python: lower case, words joined by '-'.",
             "assert slug('Hello  World') == 'hello-world'",
             "def slug(title):\n    return title.lower().replace(' ', '-')\n",
             "def slug(title):\n    return '-'.join(title.lower().split())\n"),
}


def checks_pass(checks: str):
    def run(output: str) -> tuple[bool, str]:
        code = output.strip().removeprefix("```python").removeprefix("```").removesuffix("```")
        space: dict[str, object] = {}
        try:
            exec(compile(code, "<output>", "exec"), space)  # noqa: S102 - the bench's own tasks
            exec(checks, space)  # noqa: S102
        except Exception as exc:  # noqa: BLE001 - any failure is a failed check
            return False, f"{type(exc).__name__}: {exc}"
        return True, "the checks pass"

    return run


def _judge_entry(code: str, scores: list[float]) -> list[dict[str, object]]:
    """The scripted judge's answers for one draft: one per repeat, spread as given."""
    return [{"match": r"## The work to judge[\s\S]*" + re.escape(code.splitlines()[1].strip()),
             "reply": orjson.dumps({"scores": [{"name": "correctness", "score": s, "reasoning": "read the code"}],
                                    "issues": ["an edge case is missing"] if s < 0.8 else [],
                                    "confidence": 0.7}).decode()} for s in scores]


def scripted(folder: Path, repeats_n: int) -> str:
    """A script that drafts each task (a first try, then its fix; one task right at once)
    and judges the drafts, its repeated judgements spread by 0.05, on one task in four by 0.2."""
    replies: list[dict[str, object]] = []
    for index, (_name, (task, _checks, first, fixed)) in enumerate(TASKS.items()):
        wide = 0.2 if index % 4 == 0 else 0.05
        if fixed != first:
            replies += _judge_entry(first, [0.5 + wide * (k % 2) for k in range(repeats_n)])
        replies += _judge_entry(fixed, [0.9 - wide * (k % 2) for k in range(repeats_n)])
        replies += [{"match": r"## The task\n" + re.escape(task), "reply": fixed, "times": None},
                    {"match": re.escape(task), "reply": first}]
    return scripted_script(replies, dir=folder)


async def run_all(model_name: str, repeats_n: int) -> list[tuple[str, ReflectionResult]]:
    model = LiteLLMModel(model_name)
    results = []
    for name, (task, checks, _first, _fixed) in TASKS.items():
        pattern = ReflectionPattern(
            max_iterations=4, quality_threshold=0.8, reflection_model=model, judge_repeats=repeats_n,
            quality_criteria=[
                QualityCriterion("tests", weight=2.0, evaluator="function",
                                 evaluator_config={"function": checks_pass(checks)}),
                QualityCriterion("correctness", description="the function does what the task asks"),
            ])
        results.append((name, await pattern.execute(model, task)))
    return results


def _share(flags: list[bool]) -> str:
    return f"{sum(flags)}/{len(flags)} ({100 * sum(flags) / len(flags):.0f}%)"


def print_metrics(results: list[tuple[str, ReflectionResult]]) -> None:
    print("| task | scores | improvement per iteration | met at | judge spread | stopped by |")
    print("| --- | --- | --- | --- | --- | --- |")
    improved, within3, consistent, by_rule = [], [], [], []
    for name, result in results:
        m = result.history.metrics
        assert m is not None
        scores = ", ".join(f"{v.evaluation.overall_score:.2f}" for v in result.history.versions)
        steps = ", ".join(f"{d:+.2f}" for d in m.improvement_per_iteration) or "-"
        spread = "-" if m.judge_spread is None else f"{m.judge_spread:.2f}"
        print(f"| {name} | {scores} | {steps} | {m.iterations_to_threshold or 'never'} | {spread} "
              f"| {result.convergence_reason.value} |")
        improved.append(m.improvement > 0)
        within3.append(m.iterations_to_threshold is not None and m.iterations_to_threshold <= 3)
        consistent += [not v.evaluation.judge_disagreement for v in result.history.versions
                       if v.evaluation.judgements > 1]
        by_rule.append(result.convergence_reason.value != "max_iterations")
    print()
    print(f"quality improvement (best above initial; seed: 80%+): {_share(improved)}")
    print(f"convergence (satisfactory within 3 iterations; seed: 70%+): {_share(within3)}")
    if consistent:
        print(f"evaluation consistency (judgements within 0.1; seed: all): {_share(consistent)}")
    print(f"efficient termination (a rule, not the limit, stopped it; seed: 90%+): {_share(by_rule)}")


def print_stability() -> None:
    print("| code | change | before (share of tokens) | now (1 / (1 + tokens changed)) |")
    print("| --- | --- | --- | --- |")
    before_fix, now_fix, before_repeat, now_repeat = [], [], [], []
    for name, original, fixes in FIXES:
        for fixed in fixes:
            old = difflib.SequenceMatcher(None, _OLD_TOKENS.findall(original), _OLD_TOKENS.findall(fixed),
                                          autojunk=False).ratio()
            before_fix.append(old)
            now_fix.append(lexical_similarity(original, fixed))
            print(f"| {name} | one-token fix | {old:.3f} | {now_fix[-1]:.3f} |")
        for again in repeats(original):
            before_repeat.append(1.0 if again.split() == original.split() else difflib.SequenceMatcher(
                None, _OLD_TOKENS.findall(original), _OLD_TOKENS.findall(again), autojunk=False).ratio())
            now_repeat.append(lexical_similarity(original, again))
        print(f"| {name} | 3 repeats (re-indented, blank lines, trailing spaces) | {min(before_repeat[-3:]):.3f} "
              f"| {min(now_repeat[-3:]):.3f} |")
    print()
    for label, fix, repeat in (("before", before_fix, before_repeat), ("now", now_fix, now_repeat)):
        print(f"{label}: one-token fixes {min(fix):.3f}..{max(fix):.3f} (median {statistics.median(fix):.3f}), "
              f"{sum(s >= THRESHOLD for s in fix)}/{len(fix)} called stable; repeats {min(repeat):.3f}..."
              f"{max(repeat):.3f}, {sum(s >= THRESHOLD for s in repeat)}/{len(repeat)} called stable")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a litellm model name; default: the scripted model")
    parser.add_argument("--judge-repeats", type=int, default=3)
    args = parser.parse_args()
    print("## Stability of code without an embedding\n")
    print_stability()
    print(f"\n## Success metrics ({args.model or 'scripted model'}, judge asked {args.judge_repeats}x)\n")
    with tempfile.TemporaryDirectory() as folder:
        name = args.model or scripted(Path(folder), args.judge_repeats)
        print_metrics(asyncio.run(run_all(name, args.judge_repeats)))


if __name__ == "__main__":
    main()
