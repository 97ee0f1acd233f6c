"""Clipped text keeps every redaction placeholder whole or drops it whole."""

from __future__ import annotations

import re

from reflection.text import clip_middle, error_gist

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


CRASH = ("agent command exited with code 1: python agent.py --prompt /tmp/goldenloop-prompt-1.md\n"
         "--- last output ---\nTraceback (most recent call last):\n"
         + "".join(f'  File "/root/.pyenv/versions/3.12/lib/python3.12/module{n}.py", line {n}, in f{n}\n'
                   f"    call_{n}()\n" for n in range(8))
         + "    ^^^^^^^^\nFileNotFoundError: [Errno 2] No such file or directory: '--prompt'\n")


def test_a_traceback_keeps_its_exception_and_innermost_frame_after_the_head() -> None:
    gist = error_gist(CRASH, 300)
    assert len(gist) <= 300 and gist.startswith("agent command exited with code 1")
    assert gist.endswith('module7.py", line 7, in f7 call_7() '
                         "FileNotFoundError: [Errno 2] No such file or directory: '--prompt'")
    assert "^^" not in gist


def test_a_long_error_without_a_traceback_keeps_its_head_and_its_tail() -> None:
    gist = error_gist("started " + "x" * 400 + " ended with: disk full", 100)
    assert len(gist) <= 100 and gist.startswith("started") and gist.endswith("ended with: disk full")
