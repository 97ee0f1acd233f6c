"""Semantic stability: is a revision a paraphrase of the version before it, or a new answer?

Two ways to tell, chosen by `similarity_for`:

- **An embedding model** (any litellm embedding name, or a function of a list of texts):
  the cosine of the two outputs' embeddings. A paraphrase that swaps words for synonyms
  stays close; a different answer does not.
- **The lexical fallback**, without a model (`lexical_similarity`). Prose is compared as
  a bag of content words: lower-cased, light suffixes cut (clears, cleared, clearing ->
  clear), filler words dropped, but negations and particles kept ("not", "in", "out"),
  since they turn one answer into another. Word order and inflection do not count, so
  "the cache is cleared when the user logs out" and "when the user logs out, the cache
  gets cleared" are the same answer, while "... logs in" is a new one. Code is compared
  by its tokens' edit distance (`code_similarity`): 1 / (1 + the tokens changed), so
  spacing and line breaks do not count, a repeat is 1.0 and a one-token fix (`a - b`
  for `a + b`, `>=` for `>`) is 0.5 whatever the length of the code. A ratio of shared
  tokens would not do: one token in a 30-token function left 0.97 alike, above any
  useful threshold, and a fix that did not yet raise the score stopped the run as
  "stable". What it cannot see is a synonym ("removed" for "cleared"): that takes the
  embedding.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from collections.abc import Awaitable, Callable

import anyio

Similarity = Callable[[str, str], Awaitable[float]]
Embed = Callable[[list[str]], list[list[float]]]

_WORD = re.compile(r"[^\W_]+|[+\-*/%<>=!&|^~]+")
_CODE_TOKEN = re.compile(r"\w+|[^\w\s]")  # names, numbers, and each operator or bracket character
_CODE_LINE = re.compile(r"^\s*(?:def |class |return\b|import |from \S+ import|if .*:$|for .*:$|[{}]\s*$|.*;\s*$)",
                        re.MULTILINE)
# Words that carry no answer of their own; negations and particles are not among them.
_FILLER = frozenset(
    "a an the is are was were be been being am do does did has have had get gets got getting it its this that "
    "these those there here then than so very just also of to for with by at as and or but if when while which "
    "who whom whose what will would shall should can could may might must i you we they he she them us our your "
    "their his her my me".split()
)
_SUFFIXES = ("ingly", "edly", "ing", "ies", "ied", "ed", "es", "ly", "s")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
    return word


def looks_like_code(text: str) -> bool:
    """At least a third of the non-blank lines (two at the least) read as code."""
    lines = [line for line in text.splitlines() if line.strip()]
    return len(_CODE_LINE.findall(text)) >= max(2, len(lines) // 3) if len(lines) > 1 else bool(_CODE_LINE.match(text))


def content_words(text: str) -> Counter[str]:
    """The words an answer is made of, stemmed, filler dropped."""
    words = (_stem(w) for w in _WORD.findall(text.lower()) if w.isalnum())
    return Counter(w for w in words if w not in _FILLER)


def _cosine(a: Counter[str], b: Counter[str]) -> float:
    if not a or not b:
        return 1.0 if a == b else 0.0
    dot = sum(n * b[w] for w, n in a.items())
    return dot / math.sqrt(sum(n * n for n in a.values()) * sum(n * n for n in b.values()))


def lexical_similarity(a: str, b: str) -> float:
    """0..1 without a model: token order for code, content words for prose (see the module)."""
    if " ".join(a.split()) == " ".join(b.split()):
        return 1.0
    if looks_like_code(a) or looks_like_code(b):
        return code_similarity(a, b)
    return _cosine(content_words(a), content_words(b))


def code_similarity(a: str, b: str) -> float:
    """1 / (1 + the tokens changed): 1.0 for the same tokens, 0.5 for one changed, inserted
    or removed, 0.33 for two. The count is difflib's (each differing block counts its
    longer side), close to the edit distance and fast on long outputs."""
    first, second = _CODE_TOKEN.findall(a), _CODE_TOKEN.findall(b)
    if first == second:
        return 1.0
    blocks = difflib.SequenceMatcher(None, first, second, autojunk=False).get_opcodes()
    changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in blocks if tag != "equal")
    return 1.0 / (1 + changed)


async def lexical(a: str, b: str) -> float:
    return lexical_similarity(a, b)


def embedding_similarity(embed: Embed) -> Similarity:
    """The cosine of two embeddings; the call runs in a worker thread (litellm's is blocking).
    An embedding call that fails falls back to the lexical comparison."""

    async def similar(a: str, b: str) -> float:
        if " ".join(a.split()) == " ".join(b.split()):
            return 1.0
        try:
            first, second = await anyio.to_thread.run_sync(embed, [a, b])
        except Exception:  # noqa: BLE001 - a stop rule never fails a run: the fallback decides
            return lexical_similarity(a, b)
        norm = math.sqrt(sum(x * x for x in first) * sum(y * y for y in second))
        return max(0.0, min(1.0, sum(x * y for x, y in zip(first, second, strict=False)) / norm)) if norm else 0.0

    return similar


def similarity_for(embedding_model: str | Embed | None) -> Similarity:
    """The comparison a pattern uses: the embedding model's when one is given, else lexical."""
    if embedding_model is None:
        return lexical
    if isinstance(embedding_model, str):
        from reflection.embeddings import litellm_embedder

        return embedding_similarity(litellm_embedder(embedding_model))
    return embedding_similarity(embedding_model)
