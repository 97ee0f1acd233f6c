"""Embeddings through litellm's real call path, answered by the scripted model."""

from __future__ import annotations

import json
from pathlib import Path

from reflection.embeddings import litellm_embedder


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_words_of_one_concept_embed_alike_and_others_do_not(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"concepts": [["slug", "permalink"]]}))
    embed = litellm_embedder(f"scripted/{script}")
    slug, permalink, other = embed(["build the slug", "build the permalink", "parse dates"])
    assert _dot(slug, permalink) > 0.99
    assert _dot(slug, other) < 0.5


def test_a_secret_never_shapes_what_is_sent(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({}))
    embed = litellm_embedder(f"scripted/{script}")
    one, two = embed(["call it with key sk-proj-4f9Qx2LmZ8rT1vB7nK3wY6uE0aH5sD",
                      "call it with key sk-proj-8Jd3Kq0WvN5bX2mC7tR9yL4pA1gF6e"])
    assert one == two  # both were redacted to the same placeholder before the call
