"""Judging an attempt: running the checks and reading the verdict, the baseline before any
model call, environment failures, flaky reruns, test integrity and when to stop retrying
(the chapters of docs/RETRY_INTELLIGENCE.md)."""
