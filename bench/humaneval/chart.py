"""The harness's page for a browser: pass-after-k of each mode as a chart, beside the table.

`results.html` is written next to `results.md` whenever the markdown is; it is one
self-contained file (inline SVG and CSS, no script), so it opens from disk offline.
"""

from __future__ import annotations

import html
from pathlib import Path

from bench.humaneval.modes import MAX_ATTEMPTS
from bench.humaneval.report import SUMMARY_HEAD, header, summary_row
from bench.humaneval.results import ModeSummary, ResultFile, summarize

WIDTH, HEIGHT, PAD = 560, 300, 44
COLOURS = ("#1565c0", "#c62828", "#2e7d32", "#ef6c00", "#6a1b9a")


def render_html(results: ResultFile) -> str:
    summaries = [summarize(results, mode) for mode in results.modes]
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in summary_row(s)) + "</tr>" for s in summaries)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in SUMMARY_HEAD)
    return (
        "<!doctype html><html lang=en><meta charset=utf-8><title>HumanEval with goldenloop</title>"
        "<style>body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1000px;padding:0 1rem}"
        "table{border-collapse:collapse}td,th{padding:.3rem .5rem;border-bottom:1px solid #ddd;text-align:left}"
        "svg text{font:12px system-ui,sans-serif}</style><body>"
        f"<h1>HumanEval with goldenloop</h1><p>{html.escape(header(results))}</p>"
        "<h2>Pass rate after attempt k</h2>" + chart(summaries) +
        f"<h2>Every mode</h2><table><tr>{head}</tr>{rows}</table></body></html>\n"
    )


def chart(summaries: list[ModeSummary]) -> str:
    """One line per mode over attempts 1..MAX_ATTEMPTS, 0 to 100% on the vertical axis."""
    def x(k: int) -> float:
        return PAD + (WIDTH - 2 * PAD) * (k - 1) / max(1, MAX_ATTEMPTS - 1)

    def y(share: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * share

    parts = [f'<line x1={PAD} y1={y(0)} x2={WIDTH - PAD} y2={y(0)} stroke="#999"/>']
    parts += [f'<text x=4 y={y(t) + 4:.0f}>{t:.0%}</text><line x1={PAD} y1={y(t):.0f} x2={WIDTH - PAD} '
              f'y2={y(t):.0f} stroke="#eee"/>' for t in (0.25, 0.5, 0.75, 1.0)]
    parts += [f'<text x={x(k) - 4:.0f} y={HEIGHT - PAD + 18}>{k}</text>' for k in range(1, MAX_ATTEMPTS + 1)]
    for i, s in enumerate(summaries):
        colour = COLOURS[i % len(COLOURS)]
        points = [(x(k + 1), y(share)) for k, share in enumerate(s.pass_after) if share is not None]
        if not points:
            continue
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2.5"/>')
        parts += [f'<circle cx={px:.1f} cy={py:.1f} r=3.5 fill="{colour}"/>' for px, py in points]
        parts.append(f'<text x={WIDTH - PAD + 6} y={20 + 16 * i} fill="{colour}">{html.escape(s.label)}</text>')
    return f'<svg width={WIDTH + 200} height={HEIGHT} role=img>{"".join(parts)}</svg>'


def write_html(results: ResultFile, path: Path) -> Path:
    scratch = path.with_suffix(".html.tmp")
    scratch.write_text(render_html(results))
    scratch.replace(path)
    return path
