"""The markdown table of a result file, and two result files side by side.

    python bench/humaneval/report.py results.json             # the table of one run
    python bench/humaneval/report.py before.json after.json   # two runs compared

Pass rates are cumulative and over every selected problem: "after 2" is the share of
problems that passed at attempt 1 or 2; a problem not run yet counts as not passed (the
"finished" column says how many ran). A mode with fewer attempts shows "—" beyond them.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench.humaneval` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.humaneval.matching import matched_rows
from bench.humaneval.modes import MAX_ATTEMPTS
from bench.humaneval.results import CACHED_PRICE, ModeSummary, ProblemResult, ResultFile, summarize

DASH = "—"
SUMMARY_HEAD = (
    ["mode", "finished"]
    + [f"after {k}" for k in range(1, MAX_ATTEMPTS + 1)]
    + ["reflections", "model calls", "input tokens", "output tokens", "tokens per solved",
       "at cache prices", "lessons aside", "calls per solved", "cost", "wall"]
)


def rate(summary: ModeSummary, k: int) -> str:
    n, share = summary.passed_after[k], summary.pass_after[k]
    return DASH if n is None or share is None else f"{share:.1%} ({n})"


def cost_text(cost: float | None, calls: int) -> str:
    if cost is None:
        return "unknown"
    return "$0" if calls == 0 else f"${cost:.4f}"


def per_solved(tokens: float | None) -> str:
    return DASH if tokens is None else f"{tokens:,.0f}"


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min {secs:02d} s"


def summary_row(summary: ModeSummary, name: str | None = None) -> list[str]:
    return [
        name or summary.label,
        f"{summary.finished}/{summary.problems}",
        *(rate(summary, k) for k in range(MAX_ATTEMPTS)),
        str(summary.reflections),
        str(summary.calls),
        f"{summary.input_tokens:,}",
        f"{summary.output_tokens:,}",
        per_solved(summary.tokens_per_solved),
        per_solved(summary.tokens_per_solved_cached),
        per_solved(summary.tokens_per_solved_lessons_aside),
        DASH if summary.calls_per_solved is None else f"{summary.calls_per_solved:.1f}",
        cost_text(summary.cost_usd, summary.calls),
        duration(summary.wall_s),
    ]


REPLIES_HEAD = [
    "mode", "first replies applied", "all replies applied", "formats asked",
    "repeats asked again", "repeats counted",
]


def share(part: int, whole: int) -> str:
    return DASH if whole == 0 else f"{part / whole:.1%} ({part}/{whole})"


def replies_row(summary: ModeSummary, name: str | None = None) -> list[str]:
    """Aider-style well-formedness: how many edit replies goldenloop could apply."""
    asked = ", ".join(f"{name} {count}" for name, count in sorted(summary.formats_asked.items())) or DASH
    return [
        name or summary.label,
        share(summary.first_applied, summary.first_replies),
        share(summary.replies_applied, summary.replies),
        asked,
        str(summary.repeats_asked_again),
        str(summary.repeats_counted),
    ]


def table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def outcome_text(result: ProblemResult | None) -> str:
    if result is None:
        return DASH
    if result.passed_at is not None:
        return f"pass at {result.passed_at}"
    return f"fail ({result.attempts})"


def header(results: ResultFile) -> str:
    m = results.machine
    machine = f"{m.get('cpus')} CPUs, {m.get('memoryGiB')} GiB, Python {m.get('python')}, {m.get('platform')}"
    return (
        f"Model `{results.model}` · {len(results.selection)} problem(s) · "
        f"{results.dataset.get('package')} · {machine} · updated {results.updated_at:%Y-%m-%d %H:%M} UTC"
    )


def render(results: ResultFile) -> str:
    """The whole report of one result file: modes, then problems."""
    modes = list(results.modes)
    summaries = [summary_row(summarize(results, m)) for m in modes]
    replies = [replies_row(summarize(results, m)) for m in modes if m != "control"]
    rows = [
        [pid, *(outcome_text(results.modes[m].problems.get(pid)) for m in modes)] for pid in results.selection
    ]
    return "\n\n".join(
        [
            "# HumanEval with goldenloop",
            header(results),
            "Pass rate after attempt k, cumulative, over all selected problems:",
            table(SUMMARY_HEAD, summaries),
            ("`at cache prices`: tokens per solved with the input a prompt cache serves priced at "
             f"{CACHED_PRICE:g} of a fresh token: the cached tokens the provider reported, else each "
             "prompt's start that an earlier prompt of the same problem began with. `lessons aside`: "
             "tokens per solved without the calls made after a task ended (its outcome reflection, "
             "a lesson for later tasks; HumanEval's problems share none)."),
            "Edit replies: the share goldenloop could apply (first attempts, then every reply, "
            "re-asks included), the formats asked for, and retries that gave back a failed "
            "attempt's code (asked again; still the same, so counted as a failed attempt):",
            table(REPLIES_HEAD, replies) if replies else "None.",
            *matched_section(results),
            "## Per problem",
            "`pass at k`: passed at attempt k; `fail (n)`: not passed after n attempts; "
            f"`{DASH}`: not run yet.",
            table(["problem", *(results.modes[m].settings.label for m in modes)], rows),
        ]
    ) + "\n"


def matched_section(results: ResultFile) -> list[str]:
    """Reflexion against resampling at equal tokens, when the file holds both modes."""
    rows = matched_rows(results)
    if not rows:
        return []
    cells = [[r.label, f"{r.solved}/{r.problems}", f"{r.tokens:,}", per_solved(r.tokens_per_solved)] for r in rows]
    return [
        "## Repair against resampling at equal tokens",
        ("Over the problems both modes finished. The last row gives resampling reflexion's total "
         "tokens, spent breadth-first (every problem's first sample, then a second for those still "
         "unsolved, ...) until the next sample does not fit: what a run with that budget would "
         "have scored:"),
        table(["mode", "solved", "tokens", "tokens per solved"], cells),
    ]


def write_markdown(results: ResultFile, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".md.tmp")
    scratch.write_text(render(results))
    scratch.replace(path)
    return path


def compare(a: ResultFile, b: ResultFile, names: tuple[str, str] = ("A", "B")) -> str:
    """Two result files side by side: each mode's row for both, then problems that differ."""
    modes = list(dict.fromkeys([*a.modes, *b.modes]))
    rows = []
    for mode in modes:
        for name, results in zip(names, (a, b), strict=True):
            if mode in results.modes:
                label = f"{results.modes[mode].settings.label} · {name}"
                rows.append(summary_row(summarize(results, mode), label))
    shared = [m for m in modes if m in a.modes and m in b.modes]  # a missing mode is no difference
    differing = []
    for pid in dict.fromkeys([*a.selection, *b.selection]):
        cells = [tuple(outcome_text(r.modes[m].problems.get(pid)) for r in (a, b)) for m in shared]
        if any(x != y for x, y in cells):
            differing.append([pid, *(f"{x} → {y}" if x != y else x for x, y in cells)])
    parts = [
        f"# HumanEval: {names[0]} vs {names[1]}",
        f"{names[0]}: {header(a)}",
        f"{names[1]}: {header(b)}",
        table(SUMMARY_HEAD, rows),
        f"## Problems whose outcome differs ({len(differing)})",
        table(["problem", *(a.modes[m].settings.label for m in shared)], differing) if differing else "None.",
    ]
    return "\n\n".join(parts) + "\n"


def merged(files: list[ResultFile]) -> ResultFile:
    """One report of modes run in separate work folders (one client per mode, as on a CPU):
    the first file's header and selection, every file's modes."""
    first = files[0].model_copy(deep=True)
    for other in files[1:]:
        first.modes.update({name: record for name, record in other.modes.items() if name not in first.modes})
    return first


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    merge = bool(args) and args[0] == "--merge"
    paths = [Path(p) for p in args[merge:]]
    if not paths or (len(paths) > 2 and not merge):
        print("usage: report.py RESULTS.json [OTHER.json] | report.py --merge RESULTS.json ...")
        return 2
    loaded = []
    for path in paths:
        results = ResultFile.load(path)
        if results is None:
            print(f"report: no such file: {path}")
            return 2
        loaded.append(results)
    if len(loaded) == 1 or merge:
        print(render(merged(loaded)), end="")
    else:
        same = paths[0].name == paths[1].name  # e.g. two work dirs' results.json
        names = (str(paths[0]), str(paths[1])) if same else (paths[0].name, paths[1].name)
        print(compare(loaded[0], loaded[1], names), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
