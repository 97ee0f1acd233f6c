"""How much does redaction catch, and what ordinary text does it spoil? Before and after.

Reads the corpus `bench/redaction_corpus.txt` (vendor secret formats, personal data and
internal hosts in the places they turn up, and ordinary code, test output and prose; its
header says how it is written) and runs two redactors over it: `reflection/redact.py` as
it was at a baseline commit (loaded from `git show REV:reflection/redact.py` into a
module of its own) and as it is now. For each it prints

- recall: the share of marked spans of which no 8-character slice survives (half a
  token is a leaked token), for secrets and for personal data;
- false positives: the clean texts that do not come back exactly as they were;
- the time to redact the whole corpus (median of `--runs`), since every check's output
  passes through it;

then what the current redactor still misses or changes.

    .venv/bin/python bench/redaction_bench.py [--before 05d77ba] [--runs 5] [--corpus PATH]

Exit codes: 0 the figures were printed, 2 the corpus or the baseline could not be read.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import re
import statistics
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "redaction_corpus.txt"
SLICE = 8  # a surviving slice this long counts as a leak

Redactor = Callable[[str], str]


class CorpusError(Exception):
    """The corpus or the baseline cannot be read; the message is one sentence."""


@dataclass(frozen=True)
class Case:
    group: str  # secret, personal or clean
    label: str
    text: str
    spans: tuple[str, ...]  # what must not survive (empty for clean texts)


# --- reading the corpus ------------------------------------------------------------------

_HEADER = re.compile(r"^=== (secret|personal|clean): (.+)$", re.M)
_GENERATOR = re.compile(r"\{\{([Aa9xX+\-]+):(\d+)\}\}")
_SPAN = re.compile(r"«(.*?)»", re.S)
_CLASSES = {"A": string.ascii_uppercase, "a": string.ascii_lowercase, "9": string.digits,
            "x": "0123456789abcdef", "X": "0123456789ABCDEF", "+": "+/", "-": "-_"}


def _expand(body: str, rng: random.Random) -> str:
    def draw(match: re.Match[str]) -> str:
        alphabet = "".join(_CLASSES[c] for c in dict.fromkeys(match[1]))
        return "".join(rng.choice(alphabet) for _ in range(int(match[2])))

    return _GENERATOR.sub(draw, body)


def _case(group: str, label: str, body: str) -> Case:
    body = _expand(body.strip("\n") + "\n", random.Random(label))
    spans = tuple(_SPAN.findall(body))
    if group != "clean" and not spans:
        raise CorpusError(f"corpus case {label!r} marks nothing to redact with «...».")
    return Case(group, label, _SPAN.sub(r"\1", body), spans)


def read_corpus(path: Path) -> list[Case]:
    """The cases of a corpus file, their generators drawn (the same on every run)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read the corpus {path}: {exc}.") from exc
    # "##" lines are the corpus's own comments; a case's text may hold "# ..." lines.
    text = "\n".join(line for line in text.splitlines() if not line.startswith("##"))
    parts = _HEADER.split(text)[1:]  # group, label, body, group, label, body, ...
    if not parts:
        raise CorpusError(f"the corpus {path} has no cases (each starts with '=== secret: LABEL').")
    return [_case(group, label, body) for group, label, body in zip(*[iter(parts)] * 3, strict=True)]


# --- the redactor at a baseline commit ---------------------------------------------------


def redactor_at(rev: str) -> Redactor:
    """`redact` from reflection/redact.py as it was at `rev`, in a module of its own."""
    done = subprocess.run(["git", "show", f"{rev}:reflection/redact.py"], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        why = done.stderr.strip().rstrip(".")
        raise CorpusError(f"git cannot show reflection/redact.py at {rev!r}: {why}.")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / ("redact_at_" + re.sub(r"\W", "_", rev) + ".py")
        path.write_text(done.stdout)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec and spec.loader
        module: ModuleType = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return module.redact


# --- scoring -------------------------------------------------------------------------------


_PLACEHOLDER = re.compile(r"\[REDACTED:\w+\]")


def leaked(span: str, out: str) -> bool:
    """Whether any SLICE-character piece of `span` (all of it, if shorter) is in `out`,
    the placeholders aside ("[REDACTED:internal_host]" does not leak "db.internal")."""
    out = _PLACEHOLDER.sub("", out)
    width = min(SLICE, len(span))
    return any(span[i : i + width] in out for i in range(len(span) - width + 1))


@dataclass
class Score:
    caught: dict[str, int]
    total: dict[str, int]
    misses: list[str]
    spoiled: list[str]
    seconds: float

    def recall(self, group: str) -> str:
        share = self.caught[group] / self.total[group] if self.total[group] else 1.0
        return f"{share:7.1%} ({self.caught[group]}/{self.total[group]})"


def score(redact: Redactor, cases: list[Case], runs: int) -> Score:
    caught = {"secret": 0, "personal": 0, "clean": 0}
    total = dict.fromkeys(caught, 0)
    misses, spoiled = [], []
    for case in cases:
        out = redact(case.text)
        if case.group == "clean":
            total["clean"] += 1
            if out != case.text:
                spoiled.append(f"{case.label}: {_first_change(case.text, out)}")
            continue
        for span in case.spans:
            total[case.group] += 1
            if leaked(span, out):
                misses.append(f"{case.label}: {span[:40]!r} survives in {out.strip()[:100]!r}")
            else:
                caught[case.group] += 1
    return Score(caught, total, misses, spoiled, _median_seconds(redact, cases, runs))


def _first_change(before: str, after: str) -> str:
    for old, new in zip(before.splitlines(), after.splitlines(), strict=False):
        if old != new:
            return f"{old.strip()[:70]!r} -> {new.strip()[:70]!r}"
    return "line count changed"


def _median_seconds(redact: Redactor, cases: list[Case], runs: int) -> float:
    texts = [case.text for case in cases]
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        for text in texts:
            redact(text)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


# --- the report ----------------------------------------------------------------------------


def report(rev: str, before: Score, after: Score, cases: list[Case]) -> None:
    groups = {g: sum(c.group == g for c in cases) for g in ("secret", "personal", "clean")}
    print(f"redaction bench: {groups['secret']} secret texts ({before.total['secret']} spans), "
          f"{groups['personal']} personal ({before.total['personal']} spans), {groups['clean']} clean")
    print(f"{'':24}{'before (' + rev + ')':>24}{'after':>22}")
    print(f"{'recall, secrets':24}{before.recall('secret'):>24}{after.recall('secret'):>22}")
    print(f"{'recall, personal data':24}{before.recall('personal'):>24}{after.recall('personal'):>22}")
    fp_before, fp_after = (f"{len(s.spoiled)}/{s.total['clean']}" for s in (before, after))
    print(f"{'false positives':24}{fp_before:>24}{fp_after:>22}")
    ms_before, ms_after = (f"{s.seconds * 1000:.2f} ms" for s in (before, after))
    print(f"{'time, whole corpus':24}{ms_before:>24}{ms_after:>22}")
    for title, lines in (("still missed", after.misses), ("clean texts changed", after.spoiled)):
        if lines:
            print(f"\n{title} (after):")
            print("\n".join(f"  {line}" for line in lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="05d77ba", help="the baseline commit (default: 05d77ba)")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the corpus file")
    parser.add_argument("--runs", type=int, default=5, help="timed passes over the corpus (median)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from reflection.redact import redact

    try:
        cases = read_corpus(args.corpus)
        baseline = redactor_at(args.before)
    except CorpusError as exc:
        print(f"redaction_bench: {exc}", file=sys.stderr)
        return 2
    runs = max(1, args.runs)
    report(args.before, score(baseline, cases, runs), score(redact, cases, runs), cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
