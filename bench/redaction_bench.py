"""How much does redaction catch, and what ordinary text does it spoil? Before and after.

Reads the corpus `bench/redaction_corpus.txt` (vendor secret formats, personal data and
internal hosts in the places they turn up, and ordinary code, test output and prose; its
header says how it is written) and runs three redactors over it: `reflection/redact.py` as
it was at a baseline commit (loaded from `git show REV:reflection/redact.py` into a
module of its own), as it is now, and as it is now with a project's `redaction.ownDomains`
set to the corpus's company domains (`--own-domain`, acme-corp.com and acme.com). For each
it prints

- recall: the share of marked spans of which no 8-character slice survives (half a
  token is a leaked token), for secrets and for personal data, and for each kind of
  personal data a label names (`[name]`, `[card]`, `[iban]`, `[national_id]`, `[host]`);
- false positives: the clean texts that do not come back exactly as they were, and for
  each kind, the clean texts in which a placeholder of that kind appeared;
- the time to redact the whole corpus (median of `--runs`), since every check's output
  passes through it;

then what the current redactor (with the own domains) still misses or changes.

    .venv/bin/python bench/redaction_bench.py [--before 05d77ba] [--runs 5] [--corpus PATH]
        [--own-domain acme-corp.com --own-domain acme.com]

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
from collections import Counter
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

    @property
    def kind(self) -> str:
        """The kind a label's `[kind]` names; "other" without one."""
        tagged = _KIND_TAG.match(self.label)
        return tagged[1] if tagged else "other"


# --- reading the corpus ------------------------------------------------------------------

_HEADER = re.compile(r"^=== (secret|personal|clean): (.+)$", re.M)
_KIND_TAG = re.compile(r"\[(\w+)\] ")
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


_PLACEHOLDER = re.compile(r"\[REDACTED:(\w+)\]")


def leaked(span: str, out: str) -> bool:
    """Whether any SLICE-character piece of `span` (all of it, if shorter) is in `out`,
    the placeholders aside ("[REDACTED:internal_host]" does not leak "db.internal")."""
    out = _PLACEHOLDER.sub("", out)
    width = min(SLICE, len(span))
    return any(span[i : i + width] in out for i in range(len(span) - width + 1))


@dataclass
class Score:
    caught: Counter[str]  # by group ("secret", "personal") and by personal kind
    total: Counter[str]
    misses: list[str]
    spoiled: list[str]
    spoiled_by: Counter[str]  # clean texts in which a placeholder of this kind appeared
    seconds: float

    def recall(self, group: str) -> str:
        share = self.caught[group] / self.total[group] if self.total[group] else 1.0
        return f"{share:7.1%} ({self.caught[group]}/{self.total[group]})"


def score(redact: Redactor, cases: list[Case], runs: int) -> Score:
    caught: Counter[str] = Counter()
    total: Counter[str] = Counter()
    misses, spoiled, spoiled_by = [], [], Counter()
    for case in cases:
        out = redact(case.text)
        if case.group == "clean":
            total["clean"] += 1
            if out != case.text:
                spoiled.append(f"{case.label}: {_first_change(case.text, out)}")
                spoiled_by.update(set(_PLACEHOLDER.findall(out)) - set(_PLACEHOLDER.findall(case.text)))
            continue
        for span in case.spans:
            keys = (case.group, f"{case.group}:{case.kind}")
            total.update(keys)
            if leaked(span, out):
                misses.append(f"{case.label}: {span[:40]!r} survives in {out.strip()[:100]!r}")
            else:
                caught.update(keys)
    return Score(caught, total, misses, spoiled, spoiled_by, _median_seconds(redact, cases, runs))


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


def report(rev: str, scores: dict[str, Score], cases: list[Case]) -> None:
    groups = {g: sum(c.group == g for c in cases) for g in ("secret", "personal", "clean")}
    first, last = next(iter(scores.values())), list(scores.values())[-1]
    print(f"redaction bench: {groups['secret']} secret texts ({first.total['secret']} spans), "
          f"{groups['personal']} personal ({first.total['personal']} spans), {groups['clean']} clean")

    def row(title: str, cell: Callable[[Score], str]) -> None:
        print(f"{title:30}" + "".join(f"{cell(score):>24}" for score in scores.values()))

    row("", lambda s: next(name for name, each in scores.items() if each is s))
    row("recall, secrets", lambda s: s.recall("secret"))
    row("recall, personal data", lambda s: s.recall("personal"))
    kinds = sorted({c.kind for c in cases if c.group == "personal"})
    for kind in kinds:
        row(f"  {kind}", lambda s, kind=kind: s.recall(f"personal:{kind}"))
    row("false positives (clean texts)", lambda s: f"{len(s.spoiled)}/{s.total['clean']}")
    for kind in sorted(set().union(*(s.spoiled_by for s in scores.values()))):
        row(f"  by a {kind} placeholder", lambda s, kind=kind: f"{s.spoiled_by[kind]}/{s.total['clean']}")
    row("time, whole corpus", lambda s: f"{s.seconds * 1000:.2f} ms")
    for title, lines in (("still missed", last.misses), ("clean texts changed", last.spoiled)):
        if lines:
            print(f"\n{title} ({next(reversed(scores))}):")
            print("\n".join(f"  {line}" for line in lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="05d77ba", help="the baseline commit (default: 05d77ba)")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the corpus file")
    parser.add_argument("--runs", type=int, default=5, help="timed passes over the corpus (median)")
    parser.add_argument("--own-domain", action="append", dest="own_domains",
                        help="a redaction.ownDomains entry for the last column (default: acme-corp.com, acme.com)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from reflection.redact import redact
    from reflection.redaction_policy import RedactionPolicy, policy_in_force

    try:
        cases = read_corpus(args.corpus)
        baseline = redactor_at(args.before)
    except CorpusError as exc:
        print(f"redaction_bench: {exc}", file=sys.stderr)
        return 2
    runs = max(1, args.runs)
    policy = RedactionPolicy.of(args.own_domains or ("acme-corp.com", "acme.com"))

    def with_own_domains(text: str) -> str:
        with policy_in_force(policy):
            return redact(text)

    report(args.before, {f"before ({args.before})": score(baseline, cases, runs),
                         "after": score(redact, cases, runs),
                         "after, ownDomains": score(with_own_domains, cases, runs)}, cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
