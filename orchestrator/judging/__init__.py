"""The judge, by construction: an attempt's verdict made in a tree of its own holding
exactly what would be committed, its old tests run as the base had them, and done meaning
pass-to-pass plus, for a bug or a feature, fail-to-pass (docs/RETRY_INTELLIGENCE.md,
"How a verdict is made")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from orchestrator.judging.about import About, about
    from orchestrator.judging.export import JudgeTree
    from orchestrator.judging.judge import Ground, Judge, judge_base
    from orchestrator.judging.judgement import Judgement
    from orchestrator.judging.verdict import Parts

_HOMES = {
    **dict.fromkeys(("About", "about"), "orchestrator.judging.about"),
    "JudgeTree": "orchestrator.judging.export",
    **dict.fromkeys(("Ground", "Judge", "judge_base"), "orchestrator.judging.judge"),
    "Judgement": "orchestrator.judging.judgement",
    "Parts": "orchestrator.judging.verdict",
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = ["About", "Ground", "Judge", "JudgeTree", "Judgement", "Parts", "about", "judge_base"]
