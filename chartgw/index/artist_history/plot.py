"""/artist-history/plot: an SVG of an artist's chart runs (rank against date, one line per chart run)."""

from __future__ import annotations

import math
from datetime import date
from html import escape
from itertools import pairwise

from chartgw.index.artist_history.responses import Appearance

# --- the plot -----------------------------------------------------------------------------------

SVG = b"image/svg+xml"
PLOT_MAX_LINES = 24
"""Runs drawn (the longest); the rest are counted in the caption."""
PLOT_MAX_DOTS = 1500
"""Points marked with a dot while the drawn runs have no more than this many (beyond, lines only)."""
_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
            "#7f7f7f", "#393b79", "#637939")
_FONTS = "system-ui, 'Noto Sans', 'Noto Sans CJK KR', 'Apple SD Gothic Neo', 'Malgun Gothic', sans-serif"
"""Fonts with Hangul and kana first: titles and names are shown in their own scripts."""
_RANK_TICKS = (1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 300, 500, 1000, 2000, 5000, 10000)

RunKey = tuple[str, str, str, str]
"""(source, chart, market, track): one line of the plot."""


def _runs(rows: list[Appearance]) -> list[tuple[RunKey, list[Appearance]]]:
    """The rows by track, chart and market: the longest runs first, then the highest charting."""
    runs: dict[RunKey, list[Appearance]] = {}
    for row in rows:
        runs.setdefault((row.source, row.chart, row.market, row.title or row.artist), []).append(row)
    return sorted(runs.items(), key=lambda kv: (-len(kv[1]), min(r.rank for r in kv[1]), kv[0]))


def _segments(days: list[int]) -> list[list[int]]:
    """Indexes of a run's points (sorted by day) split where the track was off the chart: a gap longer than
    twice the run's own step (a daily chart's missing days, a weekly chart's missing weeks)."""
    step = min((b - a for a, b in pairwise(days) if b > a), default=1)
    segments: list[list[int]] = [[0]]
    for i in range(1, len(days)):
        if days[i] - days[i - 1] > 2 * step:
            segments.append([])
        segments[-1].append(i)
    return segments


def _date_ticks(first: int, last: int) -> list[tuple[int, str]]:
    """(ordinal, label) of date ticks: days, weeks, months or years, whichever gives 2 to 8 of them."""
    span = last - first
    start, end = date.fromordinal(first), date.fromordinal(last)
    if span <= 14:
        ticks = [(d, date.fromordinal(d).isoformat()) for d in range(first, last + 1)]
    elif span <= 120:
        ticks = [(d, date.fromordinal(d).isoformat()) for d in range(first, last + 1) if date.fromordinal(d).weekday() == 0]
    elif span <= 1100:
        months = [date(y, m, 1) for y in range(start.year, end.year + 1) for m in range(1, 13)]
        ticks = [(m.toordinal(), m.strftime("%Y-%m")) for m in months if first <= m.toordinal() <= last]
    else:
        ticks = [(date(y, 1, 1).toordinal(), str(y)) for y in range(start.year, end.year + 1)
                 if first <= date(y, 1, 1).toordinal() <= last]
    every = max(1, math.ceil(len(ticks) / 8))
    return ticks[::every] or [(first, start.isoformat())]


def render_plot(title: str, rows: list[Appearance], *, more: bool = False, width: int = 1000, height: int = 560) -> str:
    """An SVG of chart runs, readable at a glance: chart date across, rank down (rank 1 on top, a log
    scale so the top of a 200-row chart is not squeezed), one line per track, chart and market (broken
    where the track left the chart), the longest runs first with a legend; each line's `<title>` names it."""
    runs = _runs(rows)
    shown, hidden = runs[:PLOT_MAX_LINES], max(0, len(runs) - PLOT_MAX_LINES)
    left, right, top, bottom = 64, 340, 52, 52
    plot_w, plot_h = width - left - right, height - top - bottom
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
             f' font-family="{_FONTS}" font-size="11">',
             f'<title>{escape(title)}</title>',
             f'<rect width="{width}" height="{height}" fill="#fff"/>',
             f'<text x="{left}" y="22" font-size="15" font-weight="bold">{escape(title)}</text>']
    if not rows:
        parts.append(f'<text x="{left}" y="{top + 20}">No chart appearances matched.</text></svg>')
        return "".join(parts)
    charts = len({(r.source, r.chart) for r in rows})
    caption = (f"{len(rows)} appearances, {len(runs)} runs on {charts} charts in {len({r.source for r in rows})} sources"
               + (f"; the {PLOT_MAX_LINES} longest runs drawn" if hidden else "")
               + ("; older rows on the next page (cursor)" if more else ""))
    parts.append(f'<text x="{left}" y="38" fill="#555">{escape(caption)}</text>')
    ordinals = [date.fromisoformat(r.chart_date).toordinal() for r in rows]
    first, last = min(ordinals), max(ordinals)
    worst = max(10, max(r.rank for r in rows))

    def x(day: int) -> float:
        return left + (day - first) / (last - first) * plot_w if last > first else left + plot_w / 2

    def y(rank: int) -> float:
        return top + math.log(max(rank, 1)) / math.log(worst) * plot_h

    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#bbb"/>')
    for tick in (t for t in _RANK_TICKS if t <= worst):
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>'
                     f'<text class="rank-tick" x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick}</text>')
    for day, label in _date_ticks(first, last):
        parts.append(f'<line x1="{x(day):.1f}" x2="{x(day):.1f}" y1="{top}" y2="{top + plot_h}" stroke="#f2f2f2"/>'
                     f'<text class="date-tick" x="{x(day):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 10}" text-anchor="middle" fill="#555">chart date</text>'
                 f'<text x="16" y="{top + plot_h / 2:.1f}" text-anchor="middle" fill="#555"'
                 f' transform="rotate(-90 16 {top + plot_h / 2:.1f})">rank (1 at the top)</text>')
    dots = sum(len(points) for _, points in shown) <= PLOT_MAX_DOTS
    for n, ((source, chart, market, track), points) in enumerate(shown):
        color = _PALETTE[n % len(_PALETTE)]
        dash = '' if n < len(_PALETTE) else ' stroke-dasharray="5 3"'
        ordered = sorted(points, key=lambda p: (p.chart_date, p.rank))
        coords = [(x(date.fromisoformat(p.chart_date).toordinal()), y(p.rank)) for p in ordered]
        days = [date.fromisoformat(p.chart_date).toordinal() for p in ordered]
        path = " ".join("M" + " L".join(f"{coords[i][0]:.1f} {coords[i][1]:.1f}" for i in segment)
                        + (" l0 0" if len(segment) == 1 else "") for segment in _segments(days))
        label = f"{track} - {source}:{chart} ({market})"
        best = min(p.rank for p in points)
        parts.append(f'<path class="run" d="{path}" fill="none" stroke="{color}" stroke-width="1.8"'
                     f' stroke-linejoin="round" stroke-linecap="round"{dash}>'
                     f'<title>{escape(label)}: {len(points)} days, best rank {best}</title></path>')
        if dots:
            parts += [f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.2" fill="{color}"/>' for cx, cy in coords]
        ly = top + n * 17
        short = f"{_clip(track, 18)} - {_clip(f'{source}:{chart} ({market})', 27)}"  # the chart stays readable
        parts.append(f'<line x1="{left + plot_w + 12}" x2="{left + plot_w + 30}" y1="{ly + 5}" y2="{ly + 5}" stroke="{color}"'
                     f' stroke-width="3"{dash}/><text x="{left + plot_w + 36}" y="{ly + 9}" font-size="10">'
                     f'{escape(short)}</text>')
    if hidden:
        parts.append(f'<text x="{left + plot_w + 12}" y="{top + len(shown) * 17 + 12}" fill="#555">'
                     f'and {hidden} shorter runs</text>')
    parts.append("</svg>")
    return "".join(parts)


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"
