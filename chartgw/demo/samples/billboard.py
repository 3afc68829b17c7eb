"""Billboard sample chart weeks: full chart pages in the site's markup, and billboard.py-style JSON dumps.

Pages follow the 2021-2024 layout of the real captures (billboard/hot-100_2021-11-27_*.html: lazy images with
the fallback gif in `src`, NEW / "RE-\\nENTRY" badges in the rank and badge cells, a desktop and a mobile copy of
the LW / peak / weeks cells) or, with `layout="post-2024"`, the re-branded markup known from the notes (labelled
LW / PEAK / WEEKS pairs, artist links, eager images on the first rows, a "WEEKS AT NO. 1" stat on the No. 1 row).

Rows come from the shared global pool: songs for song and album charts (an album is named after its song), the
pool's first artists for artist charts. `variant` n is chart week n of a run of consecutive weeks: ranks and
last-week positions follow `chart_rows`, and weeks on chart, peaks, debuts and re-entries are carried from week
to week, so any two consecutive variants agree (a song's peak never rises, its weeks grow by one, a re-entry has
charted before). Songs charting before week 0 get a made-up but stable past.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from functools import cache
from html import escape
from typing import Literal

from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples import GlobalSong, SampleRow, chart_rows, global_rows, global_songs
from chartgw.demo.samples.bodies import stable_hex, stable_number
from chartgw.upstreams.billboard import (
    DEFAULT_SLUGS,
    chart_date_for,
    chart_info,
    next_chart_date,
    previous_chart_date,
    requests_for,
)

CONTENT_TYPE = "text/html; charset=UTF-8"
ORIGIN = "https://www.billboard.com"
FALLBACK_GIF = "https://www.billboard.com/wp-content/themes/vip/pmc-billboard-2021/assets/public/lazyload-fallback.gif"
PageLayout = Literal["2021", "post-2024"]


@dataclass(frozen=True)
class SampleEntry:
    """One row of a sample chart week, with the values the page prints."""

    rank: int
    title: str | None
    artist: str
    image: str
    last_week: int | None
    peak: int
    weeks: int
    is_new: bool
    is_reentry: bool
    weeks_at_no1: int | None = None
    """Weeks at No. 1 so far, for the No. 1 row only (the post-2024 extra stat)."""


def artist_credit(artists: tuple[str, ...]) -> str:
    """One credit as Billboard prints it: "A", "A Featuring B", "A, B & C"."""
    if len(artists) == 1:
        return artists[0]
    if len(artists) == 2:
        return f"{artists[0]} Featuring {artists[1]}"
    return ", ".join(artists[:-1]) + " & " + artists[-1]


def _slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def chart_size(slug: str, size: int | None = None) -> int:
    """Rows of a sample week: `size`, else the chart's size, else 100."""
    if size is not None:
        return size
    info = chart_info(slug)
    return info.size if info else 100


def chart_title(slug: str) -> str:
    info = chart_info(slug)
    return info.title if info else " ".join(part.capitalize() for part in slug.split("-"))


@cache
def _artist_pool() -> tuple[GlobalSong, ...]:
    """The pool's first artists, once each, as pseudo-songs named after the artist (for artist charts)."""
    seen: dict[str, GlobalSong] = {}
    for song in global_songs():
        name = song.artists[0]
        seen.setdefault(name, GlobalSong(name, (name,), None, None, None))
    return tuple(seen.values())


def _rows(slug: str, variant: int, size: int) -> list[SampleRow[GlobalSong]]:
    info = chart_info(slug)
    if info is not None and info.kind == "artists":
        return chart_rows(list(_artist_pool()), f"global/billboard/{slug}", f"billboard/{slug}", variant, size)
    return global_rows(f"billboard/{slug}", variant, size)


def _image(slug: str, song: GlobalSong) -> str:
    """A charts-static.billboard.com 180x180 image URL, stable per song."""
    number = stable_number(slug, song.title, "image")
    artist = _slugify(song.artists[0]) or stable_hex(song.artists[0], digits=6)
    title = _slugify(song.title) or stable_hex(song.title, digits=6)
    code = stable_hex(song.title, "code", digits=3)
    return (f"https://charts-static.billboard.com/img/{2019 + number % 6}/{1 + number % 12:02d}/"
            f"{artist}-{code}-{title}-{stable_hex(song.artists[0], digits=3)}-180x180.jpg")


def _past(slug: str, song: GlobalSong, previous_rank: int | None, size: int) -> tuple[int, int] | None:
    """(weeks, peak) before week 0: every song on the week before has one; a third of the others charted long ago."""
    number = stable_number(slug, song.title, "past")
    if previous_rank is not None:
        return 1 + number % 30, 1 + (number // 30) % previous_rank
    if number % 3 == 0:
        return 1 + number % 15, 1 + (number // 15) % size
    return None


def _long_ago(slug: str, song: GlobalSong, size: int) -> tuple[int, int]:
    """A stable made-up (weeks, peak) for a song that charted before the sample weeks."""
    number = stable_number(slug, song.title, "past")
    return 1 + number % 15, 1 + (number // 15) % size


@cache
def sample_weeks(slug: str, weeks: int, size: int | None = None) -> tuple[tuple[SampleEntry, ...], ...]:
    """Weeks 0..weeks-1 of a sample chart, each week's rows agreeing with the week before."""
    rows_per_week = chart_size(slug, size)
    info = chart_info(slug)
    artists_chart = info is not None and info.kind == "artists"
    history: dict[str, tuple[int, int]] = {}
    no1_weeks: dict[str, int] = {}
    result: list[tuple[SampleEntry, ...]] = []
    for variant in range(weeks):
        rows = _rows(slug, variant, rows_per_week)
        week: list[SampleEntry] = []
        fresh = 0
        for row in rows:
            song = row.song
            past = history.get(song.title) or _past(slug, song, row.previous_rank, rows_per_week)
            if row.previous_rank is None and song.title not in history:
                # A week's first newcomer unseen in the samples debuts and its second re-enters (from a made-up
                # past), so every week of a chart with two such newcomers shows both markers.
                past = None if fresh == 0 else past if fresh > 1 else past or _long_ago(slug, song, rows_per_week)
                fresh += 1
            weeks_so_far, peak = (past[0] + 1, min(past[1], row.rank)) if past else (1, row.rank)
            at_no1 = None
            if row.rank == 1:
                if variant == 0 and row.previous_rank == 1:
                    no1_weeks[song.title] = 1 + stable_number(slug, song.title, "no1") % 3
                at_no1 = no1_weeks[song.title] = no1_weeks.get(song.title, 0) + 1
            week.append(SampleEntry(
                rank=row.rank,
                title=None if artists_chart else song.title,
                artist=artist_credit(song.artists),
                image=_image(slug, song),
                last_week=row.previous_rank,
                peak=peak,
                weeks=weeks_so_far,
                is_new=past is None,
                is_reentry=past is not None and row.previous_rank is None,
                weeks_at_no1=at_no1,
            ))
        for entry, row in zip(week, rows, strict=True):
            history[row.song.title] = (entry.weeks, entry.peak)
        result.append(tuple(week))
    return tuple(result)


def sample_week(slug: str, variant: int = 0, size: int | None = None) -> tuple[SampleEntry, ...]:
    """Week `variant` (0 = the first) of a sample chart."""
    return sample_weeks(slug, variant + 1, size)[variant]


# --- the 2021-2024 page ----------------------------------------------------------------------------------------

_ARROW_DOWN = ('<div class="c-svg u-height-10@mobile-max u-width-10@mobile-max u-hidden@tablet">\n'
               '<svg xmlns="http://www.w3.org/2000/svg" width="10.157" height="10.157"><path data-name="Arrow" '
               'd="M4.425 7.727V0h1.306v7.727l3.503-3.405.923.897-5.079 4.938-5.079-4.938.923-.9z" '
               'fill="#fb676b" /></svg></div>\n')
_ARROW_UP = _ARROW_DOWN.replace("#fb676b", "#00cc76").replace('data-name="Arrow"', 'data-name="Arrow" '
                                                              'transform="rotate(180 5.0785 5.0785)"')
_STAR = ('<div class="c-svg u-height-17 u-width-18 u-height-13@mobile-max u-width-13@mobile-max '
         'lrv-u-margin-tb-050@mobile-max">\n<svg xmlns="http://www.w3.org/2000/svg" style="width:100%;height:auto" '
         'viewBox="0 0 18.072 17.316"><path data-name="Path 3055" d="M9.072 0L6.984 6.7H0l5.58 4.14-2.052 6.44 '
         '5.508-3.96 5.508 4-2.124-6.448L18.072 6.7h-6.84z" fill="currentColor" /></svg></div>\n')
_CELL = ("o-chart-results-list__item // {extra}u-width-72 u-width-55@mobile-max u-width-55@tablet-only lrv-u-flex "
         "lrv-u-flex-shrink-0 lrv-u-align-items-center lrv-u-justify-content-center lrv-u-border-b-1 "
         "u-border-b-0@mobile-max lrv-u-border-color-grey-light")
_PLUS_MINUS = ('<li class="o-chart-results-list__item // u-width-66 u-width-30@mobile-max u-width-55@tablet-only '
               'lrv-u-flex lrv-u-flex-shrink-0 lrv-u-align-items-center lrv-u-justify-content-center lrv-u-border-b-1 '
               'u-border-b-0@mobile-max lrv-u-border-color-grey-light lrv-u-order-100@mobile-max{hidden}">\n'
               '<div class="a-chart-plus-minus-icon"></div>\n</li>\n')


def _marker(entry: SampleEntry) -> str | None:
    if entry.is_new:
        return "NEW"
    if entry.is_reentry:
        return "RE-\nENTRY"
    return None


def _movement(entry: SampleEntry) -> str:
    if entry.last_week is None or entry.last_week == entry.rank:
        return ""
    return _ARROW_UP if entry.last_week > entry.rank else _ARROW_DOWN


def _stat_cells_2021(entry: SampleEntry, mobile: bool) -> str:
    grow = " lrv-u-flex-grow-1" if mobile else " u-hidden@mobile-max"
    values = ("-" if entry.last_week is None else str(entry.last_week), str(entry.peak), str(entry.weeks))
    award = _STAR if entry.rank == 1 or (entry.last_week is not None and entry.last_week - entry.rank >= 10) else ""
    award_class = _CELL.format(extra="a-chart-bg-color a-chart-color ")
    cells = [f'<li class="{award_class} lrv-u-background-color-grey-lightest{grow}">\n{award}</li>\n']
    for number, value in enumerate(values):
        extra = "a-chart-bg-color a-chart-color " if number == 1 else "a-chart-color "
        cells.append(f'<li class="{_CELL.format(extra=extra)}{grow}">\n'
                     f'<span class="c-label  a-font-primary-m lrv-u-padding-tb-050@mobile-max">\n{value}\n</span>\n'
                     f"</li>\n")
    return "".join(cells)


def _row_2021(slug: str, chart_date: date, entry: SampleEntry) -> str:
    marker = _marker(entry)
    width = "u-width-45" if entry.is_reentry else "u-width-40"
    mobile_badge = (f'<span class="c-label  {width} a-font-primary-bold-xxs lrv-u-background-color-grey-dark '
                    f'u-color-yellow lrv-u-text-align-center u-hidden@tablet">\n{marker}\n</span>\n'
                    if marker else _movement(entry))
    desktop_badge = (f'<span class="c-label  {width} a-font-primary-bold-xxs lrv-u-color-grey-darkest '
                     f'u-background-color-yellow lrv-u-text-align-center">\n{marker}\n</span>\n' if marker else "")
    heading = escape(entry.artist if entry.title is None else entry.title)
    credit = "" if entry.title is None else escape(entry.artist)
    widget = f"https://widget.billboard.com/{slug}/{chart_date:%Y/%m/%d}/{entry.rank - 1}"
    return f"""<div class="o-chart-results-list-row-container">
<ul class="o-chart-results-list-row // lrv-a-unstyle-list lrv-u-flex u-height-100 lrv-u-background-color-white a-chart-has-chart-detail" data-detail-target="{entry.rank}" data-ajax="">
<li class="o-chart-results-list__item // lrv-u-background-color-black lrv-u-color-white u-width-100 u-width-55@mobile-max u-width-55@tablet-only lrv-u-height-100p lrv-u-flex lrv-u-flex-direction-column@mobile-max lrv-u-flex-shrink-0 lrv-u-align-items-center lrv-u-justify-content-center lrv-u-border-b-1 u-border-b-0@mobile-max lrv-u-border-color-grey">
<span class="c-label  a-font-primary-bold-l u-font-size-32@tablet u-letter-spacing-0080@tablet">
{entry.rank}
</span>
{mobile_badge}</li>
<li class="o-chart-results-list__item // u-width-100 u-width-67@mobile-max lrv-u-border-b-1 u-border-b-0@mobile-max lrv-u-border-color-grey u-flex-order-n1@mobile-max">
<div class="c-lazy-image  lrv-u-width-100 u-width-67@mobile-max">
<div class="lrv-a-crop-1x1 a-crop-67x100@mobile-max" style="">
<img class="c-lazy-image__img lrv-u-background-color-grey-lightest lrv-u-width-100p lrv-u-display-block lrv-u-height-auto" src="{FALLBACK_GIF}" data-lazy-src="{escape(entry.image)}" alt="" data-lazy-srcset="" data-lazy-sizes="" height="" width="">
</div>
</div>
</li>
<li class="o-chart-results-list__item // lrv-u-flex u-flex-grow-1@mobile-max lrv-u-flex-shrink-0 lrv-u-align-items-center lrv-u-justify-content-center u-width-66 lrv-u-border-b-1 u-border-b-0@mobile-max lrv-u-border-color-grey-light u-hidden@mobile-max">
{desktop_badge}</li>
<li class="lrv-u-width-100p">
<ul class="lrv-a-unstyle-list lrv-u-flex lrv-u-height-100p lrv-u-flex-direction-column@mobile-max">
<li class="o-chart-results-list__item // lrv-u-flex-grow-1 lrv-u-flex lrv-u-flex-direction-column lrv-u-justify-content-center lrv-u-border-b-1 u-border-b-0@mobile-max lrv-u-border-color-grey-light lrv-u-padding-l-050 lrv-u-padding-l-1@mobile-max">
<h3 id="title-of-a-story" class="c-title  a-no-trucate a-font-primary-bold-s u-letter-spacing-0021 lrv-u-font-size-18@tablet lrv-u-font-size-16 u-line-height-125 u-line-height-normal@mobile-max a-truncate-ellipsis u-max-width-330 u-max-width-230@tablet-only">
{heading}
</h3>
<span class="c-label  a-no-trucate a-font-primary-s lrv-u-font-size-14@mobile-max u-line-height-normal@mobile-max u-letter-spacing-0021 lrv-u-display-block a-truncate-ellipsis-2line u-max-width-330 u-max-width-230@tablet-only">
{credit}
</span>
</li>
{_PLUS_MINUS.format(hidden=" u-hidden@mobile-max")}{_stat_cells_2021(entry, mobile=False)}<li class="lrv-u-width-100p u-hidden@tablet">
<ul class="lrv-a-unstyle-list lrv-u-flex lrv-u-height-100p lrv-u-flex-direction-row u-background-color-grey-lightest@mobile-max">
{_PLUS_MINUS.format(hidden="")}{_stat_cells_2021(entry, mobile=True)}</ul>
</li>
</ul>
</li>
</ul>
<div class="charts-result-detail // lrv-u-flex lrv-u-flex-direction-column@mobile-max lrv-u-padding-lr-150 lrv-u-background-color-white lrv-u-position-relative u-z-index-middle-bottom lrv-a-hidden" data-detail="{entry.rank}">
<div class="lrv-u-display-none" data-tabs-trigger="tab_5">
<a href="#" class="lrv-a-unstyle-button js-chart-copy-to-clipboard" data-value="{ORIGIN}/charts/{slug}/?rank={entry.rank}">
<span class="c-span  lrv-u-margin-l-050 a-font-primary-medium-xxs">
Copy Link
</span>
</a>
<a href="#" class="lrv-a-unstyle-button js-chart-copy-to-clipboard" data-value="&lt;iframe src=&quot;{widget}&quot; style=&quot;border:none;&quot; name=&quot;Billboard Charts&quot; height=&quot;540px&quot; width=&quot;620px&quot;&gt;&lt;/iframe&gt;">
<span class="c-span  lrv-u-margin-l-050 a-font-primary-medium-xxs">
Embed
</span>
</a>
</div>
</div>
</div>
"""


_HEADERS_2021 = ("This Week", "", "", "", "", "Award", "Last Week", "Peak Pos.", "Wks on Chart")


def _page(slug: str, chart_date: date, layout: PageLayout, rows: str) -> bytes:
    """The page frame both layouts share: head, the date picker and the chart list around `rows`."""
    title = chart_title(slug)
    week_of = f"Week of {chart_date:%B} {chart_date.day}, {chart_date.year}"
    link = f"{ORIGIN}/charts/{slug}/" if layout == "2021" else f"{ORIGIN}/charts/{slug}/{chart_date.isoformat()}/"
    header = "".join(
        f'<div class="o-chart-results-list-header__item  // lrv-u-padding-tb-075 u-width-72">\n'
        f'<span class="c-span  a-font-primary-medium-xxs u-font-size-11@mobile-max lrv-u-display-block">\n'
        f"{label}\n</span>\n</div>\n"
        for label in _HEADERS_2021
    ) if layout == "2021" else ""
    theme = "pmc-billboard-2021"
    page = f"""<!DOCTYPE html>
<!--[if IE 6]>
<html id="ie6" lang="en-US">
<![endif]-->
<!--[if !(IE 6) | !(IE 7) | !(IE 8)  ]><!-->
<html lang="en-US">
<!--<![endif]-->
<head>
<meta charset="UTF-8" />
<title>{escape(title)} &#8211; Billboard</title>
<meta property="og:type" content="article" />
<meta property="og:title" content="{escape(title)}" />
<meta property="og:url" content="{ORIGIN}/charts/{slug}/" />
<link rel="canonical" href="{ORIGIN}/charts/{slug}/" />
<link rel="stylesheet" href="{ORIGIN}/wp-content/themes/vip/{theme}/assets/build/css/main.css" />
</head>
<body class="page-template page-template-page-chart">
<div class="lrv-u-position-relative a-show-on-hover-parent a-chart-datepicker-opener">
<div class="a-show-on-hover-on-tab no-transition a-chart-datepicker-container">
<h2 id="section-heading" class="c-heading larva  a-font-primary-medium-xs lrv-u-text-transform-uppercase lrv-u-text-align-center lrv-u-margin-b-075">
{week_of}
</h2>
<div id="chart-date-picker" data-date="{chart_date.isoformat()}" data-link="{link}"></div>
</div>
</div>
<div class="pmc-paywall">
<div class="chart-results-container lrv-u-padding-b-2  lrv-u-background-color-grey-lightest">
<div class="chart-results // lrv-a-wrapper lrv-u-padding-lr-00@mobile-max">
<div class="u-max-width-960 lrv-u-margin-lr-auto">
<h2 id="section-heading" class="c-heading larva  a-font-primary-bold-l u-font-size-30@tablet lrv-u-padding-r-1">
{escape(title)}
</h2>
<p class="c-tagline  a-font-primary-medium-xs lrv-u-text-transform-uppercase lrv-u-margin-a-00">{week_of}</p>
<div class="chart-results-list // lrv-u-padding-t-150 lrv-u-padding-t-050@mobile-max">
<div class="chart-results-list-header // lrv-a-unstyle-list lrv-u-flex lrv-u-align-items-center">
{header}</div>
{rows}</div>
</div>
</div>
</div>
</div>
<footer class="lrv-a-wrapper">&copy; {chart_date.year} Billboard Media, LLC. All Rights Reserved.</footer>
</body>
</html>
"""
    return page.encode("utf-8")


# --- the post-2024 page ----------------------------------------------------------------------------------------

_LABEL = ('<span class="c-span  a-font-secondary u-color-grey-141 lrv-u-text-align-right@desktop '
          'lrv-u-text-align-left u-font-size-12 u-line-height-normal u-width-40">\n\n\t{label}\n</span>\n')
_VALUE = ('<li class="o-chart-results-list__item // a-chart-color lrv-u-flex lrv-u-flex-shrink-0 '
          'lrv-u-align-items-center lrv-u-justify-content-center{hidden}">\n'
          '<span class="c-label  u-font-family-basic@tablet u-font-weight-800@tablet u-font-size-12 '
          'u-line-height-normal u-min-width-30px" >\n\t\n\t{value}\n</span>\n</li>\n')
_ARROW_SVG = ('<div class="c-svg u-margin-l-1px">\n<svg xmlns="http://www.w3.org/2000/svg" width="15" height="12" '
              'fill="none"><path fill="#8D8D8D" d="M14.126 5.144 9.415.259 7.96 1.765l3.06 3.17H1.455v2.13h9.566'
              'l-3.06 3.171 1.455 1.506 4.713-4.884z"/></svg></div>\n')


def _stats_2025(entry: SampleEntry, mobile: bool) -> str:
    pairs = [("LW", "-" if entry.last_week is None else str(entry.last_week)), ("PEAK", str(entry.peak)),
             ("WEEKS", str(entry.weeks))]
    if entry.weeks_at_no1 is not None:
        pairs.insert(2, ("WEEKS AT NO. 1", str(entry.weeks_at_no1)))
    hidden = "" if mobile else " u-hidden@mobile-max"
    cells = "".join(_LABEL.format(label=label) + _VALUE.format(hidden=hidden, value=value) for label, value in pairs)
    if mobile:
        return (f'<li class="lrv-u-width-100p u-hidden@tablet lrv-u-margin-t-050@mobile-max">\n'
                f'<ul class="lrv-a-unstyle-list lrv-u-flex lrv-u-height-100p lrv-u-flex-direction-row">\n'
                f'<div class="lrv-u-flex">\n{cells}</div>\n</ul>\n</li>\n')
    return (f'<div class="lrv-u-flex@desktop lrv-u-flex-direction-column lrv-u-justify-content-center '
            f'lrv-u-display-none@mobile-max u-padding-t-6">\n{cells}</div>\n')


def _row_2025(slug: str, chart_date: date, entry: SampleEntry) -> str:
    marker = _marker(entry)
    badge = ("u-width-40 a-font-secondary-fancy u-font-size-9 lrv-u-color-black lrv-u-background-color-brand-primary "
             "lrv-u-text-align-center u-font-weight-700")
    rank_extra = (f'<span class="c-label  {badge} a-hidden@tablet" >\n\t\n\t{marker}\n</span>\n' if marker
                  else _movement(entry))
    side = (f'<span class="c-label  {badge} u-transform-rotate-n90deg" >\n\t\n\t{marker}\n</span>\n' if marker
            else _ARROW_SVG)
    eager = entry.rank <= 5
    image = (f'src="{escape(entry.image)}" alt="" srcset="" sizes="" height="" width="" decoding="sync"' if eager
             else f'src="{FALLBACK_GIF}" data-lazy-src="{escape(entry.image)}" alt="" data-lazy-srcset="" '
                  f'data-lazy-sizes="" height="" width="" decoding="async"')
    heading = escape(entry.artist if entry.title is None else entry.title)
    if entry.title is None:
        credit = ""
    elif entry.rank % 4:
        credit = f'<a href="{ORIGIN}/artist/{_slugify(entry.artist) or "artist"}/">{escape(entry.artist)}</a>'
    else:  # some acts have no artist page: the credit is plain text
        credit = escape(entry.artist)
    first = ("" if entry.is_new or entry.is_reentry else f"{chart_date:%m/%d/%y}")
    return f"""<div class="o-chart-results-list-row-container">
\t<ul class="o-chart-results-list-row // lrv-a-unstyle-list lrv-u-flex lrv-u-background-color-white a-chart-has-chart-detail u-border-radius-a-6 lrv-u-margin-b-1 lrv-u-padding-tb-050 lrv-u-align-items-center lrv" data-detail-target="{entry.rank}" data-ajax="">
\t\t<li class="o-chart-results-list__item // lrv-u-color-black u-width-60 u-width-45px@mobile-max lrv-u-flex lrv-u-flex-direction-column lrv-u-flex-shrink-0 lrv-u-align-items-center lrv-u-justify-content-center">
<span class="c-label  a-font-basic u-font-size-22@desktop u-font-size-19@mobile-max u-line-height-33px" >
\t
\t{entry.rank}
</span>
{rank_extra}\t\t</li>
\t\t<li class="o-chart-results-list__item // u-width-100 u-width-80px@mobile-max">
<div class="c-lazy-image  lrv-u-width-100 u-width-80px@mobile-max">
<div class="lrv-a-crop-1x1 a-crop-1X1@mobile-max" style="">
<img class="c-lazy-image__img lrv-u-background-color-grey-lightest lrv-u-width-100p lrv-u-display-block lrv-u-height-auto" {image}>
</div>
</div>
\t\t</li>
\t\t<li class="o-chart-results-list__item // lrv-u-flex u-flex-grow-1@mobile-max lrv-u-flex-shrink-0 lrv-u-align-items-center lrv-u-justify-content-center u-width-50 u-hidden@mobile-max">
{side}\t\t</li>
\t\t<li class="lrv-u-width-100p a-chart-result-item-container">
\t\t\t<ul class="lrv-a-unstyle-list lrv-u-flex lrv-u-height-100p lrv-u-flex-direction-column@mobile-max lrv-u-padding-r-075">
\t\t\t\t<li class="o-chart-results-list__item // lrv-u-flex-grow-1 lrv-u-flex lrv-u-flex-direction-column lrv-u-justify-content-center lrv-u-padding-l-050 u-max-width-397">
<h3 id="title-of-a-story" class="c-title  a-font-basic u-letter-spacing-0010 u-max-width-397 lrv-u-font-size-16 u-line-height-22px a-truncate-ellipsis-2line">
\t\t\t\t\t{heading}\t\t
</h3>
\t\t\t\t\t\t<span class="
\t\t\t\t\t\t\tc-label a-no-trucate
\t\t\t\t\t\t\ta-font-secondary u-font-size-15 u-line-height-21px
\t\t\t\t\t\t\tlrv-u-display-block a-truncate-ellipsis-2line u-max-width-397
\t\t\t\t\t\t">
\t\t\t\t\t\t\t{credit}\t\t\t\t\t\t</span>
\t\t\t\t</li>
\t\t\t\t<li class="o-chart-results-list__item // a-chart-bg-color a-chart-color u-width-72 u-width-31@mobile-max lrv-u-flex lrv-u-flex-shrink-0 lrv-u-align-items-center lrv-u-justify-content-center u-hidden@mobile-max">
\t\t\t\t</li>
{_stats_2025(entry, mobile=False)}\t\t\t\t<li class="o-chart-results-list__item // u-width-62 u-width-30@mobile-max lrv-u-flex lrv-u-flex-shrink-0 lrv-u-align-items-center lrv-u-justify-content-center u-hidden@mobile-max">
\t\t\t\t\t<div class="a-chart-plus-minus-icon"></div>
\t\t\t\t</li>
{_stats_2025(entry, mobile=True)}\t\t\t</ul>
\t\t</li>
\t</ul>
<div class="charts-result-detail // lrv-u-background-color-black lrv-u-position-relative u-z-index-middle-bottom lrv-a-hidden" data-detail="{entry.rank}">
<div class="o-chart-position-stats__peak">
<h3 id="" class="c-title  charts-result-detail-title a-font-secondary-fancy-s lrv-u-text-transform-uppercase">
\t\t\t\t\tPeak Position\t\t
</h3>
<div class="o-chart-position-stats__number">
<span class="c-label  a-font-secondary-fancy-xxl lrv-u-color-brand-primary" >
\t
\t{entry.peak}
</span>
<div class="o-chart-position-stats__date">{first}</div>
</div>
</div>
</div>
</div>
"""


# --- renderers -------------------------------------------------------------------------------------------------


def render_page(slug: str, chart_date: date, variant: int = 0, *, size: int | None = None,
                layout: PageLayout = "2021") -> bytes:
    """The chart page of week `variant` of a sample chart, dated `chart_date` (snapped to its chart date), in the
    2021-2024 or post-2024 markup."""
    when = chart_date_for(chart_date)
    entries = sample_week(slug, variant, size)
    render_row = _row_2021 if layout == "2021" else _row_2025
    return _page(slug, when, layout, "".join(render_row(slug, when, entry) for entry in entries))


def render_billboard_py_json(slug: str, chart_date: date, variant: int = 0, *, size: int | None = None) -> bytes:
    """Week `variant` as billboard.py's `ChartData.json()` writes it (sorted keys, indent 4, lastPos 0 = none,
    title "" on artist charts)."""
    when = chart_date_for(chart_date)
    entries = [{
        "artist": entry.artist,
        "image": entry.image.replace("-180x180", "-53x53"),
        "isNew": entry.is_new,
        "lastPos": entry.last_week or 0,
        "peakPos": entry.peak,
        "rank": entry.rank,
        "title": entry.title or "",
        "weeks": entry.weeks,
    } for entry in sample_week(slug, variant, size)]
    dump = {
        "_max_retries": 5,
        "_timeout": 25,
        "date": when.isoformat(),
        "entries": entries,
        "name": slug,
        "nextDate": next_chart_date(when).isoformat(),
        "previousDate": previous_chart_date(when).isoformat(),
        "title": chart_title(slug),
    }
    return json.dumps(dump, sort_keys=True, indent=4, ensure_ascii=False).encode("utf-8")


def week_dates(first_week: date, weeks: int) -> list[date]:
    """The chart dates of `weeks` consecutive weeks from the week containing `first_week`."""
    dates = [chart_date_for(first_week)]
    while len(dates) < weeks:
        dates.append(next_chart_date(dates[-1]))
    return dates


def week_replies(slug: str, first_week: date, weeks: int, *, size: int | None = None,
                 layout: PageLayout = "2021") -> dict[ReplayKey, Reply]:
    """Replies to the requests of `weeks` consecutive weeks (week i = variant i), plus what the site does around
    them: `/charts/{slug}/` answers the last week, and so does the week after it (the site serves the latest
    chart for future weeks; the parser reports the page's own date)."""
    dates = week_dates(first_week, weeks)
    replies: dict[ReplayKey, Reply] = {}
    for variant, when in enumerate(dates):
        (request,) = requests_for(slug, when)
        replies[request_key(request)] = Reply(render_page(slug, when, variant, size=size, layout=layout), 200,
                                              CONTENT_TYPE)
    latest = replies[request_key(requests_for(slug, dates[-1])[0])]
    replies[request_key(requests_for(slug)[0])] = latest
    replies[request_key(requests_for(slug, next_chart_date(dates[-1]))[0])] = latest
    return replies


def all_week_replies(first_week: date, weeks: int, slugs: tuple[str, ...] | None = None, *,
                     layout: PageLayout = "2021") -> dict[ReplayKey, Reply]:
    """`week_replies` of every default chart (or of `slugs`): one replay table for the whole demo run."""
    replies: dict[ReplayKey, Reply] = {}
    for slug in slugs if slugs is not None else DEFAULT_SLUGS:
        replies.update(week_replies(slug, first_week, weeks, layout=layout))
    return replies
