"""Clipped text keeps every redaction placeholder whole or drops it whole."""

from __future__ import annotations

import re

from reflection.text import clip_middle

SUMMARY = ("test_failure: 1 failed — test_calc.py::test_add (AssertionError: cannot connect to "
           "postgresql://[REDACTED:url_credentials]@[REDACTED:internal_host]/app as [REDACTED:email] with "
           "[REDACTED:slack_token] [REDACTED:stripe_key] [REDACTED:aws_access_key] [REDACTED:github_token])")


def test_a_clipped_summary_never_shows_half_a_placeholder() -> None:
    for limit in range(20, len(SUMMARY)):
        clipped = clip_middle(SUMMARY, limit)
        left = re.sub(r"\[REDACTED:\w+\]", "", clipped)

        assert "[" not in left and "]" not in left, clipped  # "[REDACTED:sl" or "ED:stripe_key]" would be
        assert len(clipped) <= limit
        assert clipped.startswith("test_failure") and clipped.endswith(")")


def test_text_without_placeholders_is_clipped_as_before() -> None:
    assert clip_middle("a" * 50 + "b" * 50, 40) == "a" * 30 + " … " + "b" * 7
