"""Official Charts Company sample chart pages, written in the markup of the real captures (NOTES section 7).

New layout (what the site serves today): the frame, week arrows, heading, week line and `div.chart-item` rows of
the real 2024-05-03 singles capture (officialcharts/uk-singles-20240503.html), ad slots included (one nested in the
#1 row, one after every tenth row); no record label, as on the real pages. Old layout (tests, imports of old weeks):
the table rows of the real 2018 Dance Singles capture, with `span.label` from the song pool's labels.

Consecutive `variant`s are consecutive chart weeks of one chart: `sample_weeks` walks the shared global sample
charts week by week and keeps each song's run, so last week, peak, weeks on chart, new entries and re-entries agree
from one week to the next. Songs on the week before week 0, and some entries never seen before, get a made-up run before
week 0, so every week has long-runners, debuts and re-entries. Titles and credits are upper-cased, as the site prints
them; covers, ids and links are made up but stable per song.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache
from html import escape
from typing import Literal

from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples import GlobalSong, global_rows
from chartgw.demo.samples.bodies import stable_hex, stable_number
from chartgw.upstreams.officialcharts import (
    DEFAULT_KEYS,
    ChartInfo,
    check_key,
    requests_for,
    week_start_for,
)

CONTENT_TYPE = "text/html;charset=utf-8"
SITE = "https://www.officialcharts.com"
Layout = Literal["new", "old"]


@dataclass(frozen=True)
class UkSampleRow:
    """One row of a sample chart week, with the values its page prints."""

    rank: int
    song: GlobalSong
    last_week: int | None
    peak: int
    weeks: int
    is_new: bool
    is_reentry: bool

    @property
    def title(self) -> str:
        return self.song.title.upper()

    @property
    def artist(self) -> str:
        return artist_credit(self.song.artists)


def artist_credit(artists: tuple[str, ...]) -> str:
    """One credit as the site prints it: "A", "A & B", "A/B/C" (upper case)."""
    names = [name.upper() for name in artists]
    if len(names) == 2:
        return f"{names[0]} & {names[1]}"
    return "/".join(names)


# --- the weeks -------------------------------------------------------------------------------------------------


@dataclass
class _Run:
    weeks: int
    peak: int


def _pool_key(key: str) -> str:
    return f"officialcharts/{key}"


@cache
def sample_weeks(key: str, count: int, size: int | None = None) -> tuple[tuple[UkSampleRow, ...], ...]:
    """`count` consecutive weeks (variants 0..count-1) of sample chart `key`, `size` rows each (default: the
    chart's expected size, at most 217)."""
    info = check_key(key)
    size = size if size is not None else info.size
    runs: dict[str, _Run] = {}
    last_ranks: dict[str, int] = {}
    weeks: list[tuple[UkSampleRow, ...]] = []
    for variant in range(count):
        rows = global_rows(_pool_key(key), variant, size)
        if variant == 0:
            last_ranks = {row.song.title: row.previous_rank for row in rows if row.previous_rank is not None}
            runs = {row.song.title: _Run(weeks=1 + number % 40, peak=1 + number % row.previous_rank)
                    for row in rows if row.previous_rank is not None
                    for number in (stable_number(key, row.song.title, "run"),)}
        _give_earlier_runs(key, [row.song for row in rows if row.song.title not in last_ranks
                                 and row.song.title not in runs], runs, size)
        week: list[UkSampleRow] = []
        for row in rows:
            title = row.song.title
            run = runs.get(title)
            last = last_ranks.get(title)
            now = _Run(weeks=(run.weeks if run else 0) + 1, peak=min(run.peak, row.rank) if run else row.rank)
            week.append(UkSampleRow(rank=row.rank, song=row.song, last_week=last, peak=now.peak, weeks=now.weeks,
                                    is_new=run is None, is_reentry=run is not None and last is None))
            runs[title] = now
        last_ranks = {row.song.title: row.rank for row in week}
        weeks.append(tuple(week))
    return tuple(weeks)


def _give_earlier_runs(key: str, entering: list[GlobalSong], runs: dict[str, _Run], size: int) -> None:
    """Decide which of this week's entries never seen before had a run before week 0 (so they re-enter rather than
    debut): one in three by a stable hash, and at least one of each kind when two or more enter."""
    numbers = [stable_number(key, song.title, "run") for song in entering]
    chosen = [number % 3 == 0 for number in numbers]
    if len(entering) >= 2:
        if not any(chosen):
            chosen[-1] = True
        if all(chosen):
            chosen[0] = False
    for song, number, earlier in zip(entering, numbers, chosen, strict=True):
        if earlier:
            runs[song.title] = _Run(weeks=1 + number % 15, peak=1 + number % size)


def sample_week(key: str, variant: int = 0, size: int | None = None) -> tuple[UkSampleRow, ...]:
    """Week `variant` of sample chart `key` (variant n+1 is the week after n)."""
    return sample_weeks(key, variant + 1, size)[variant]


# --- shared bits -----------------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "item"


def _cover_token(song: GlobalSong) -> str:
    return stable_hex(song.title, *song.artists, "cover", digits=8)


def _has_cover(song: GlobalSong) -> bool:
    """One song in nine has no cover: the site shows its placeholder artwork (parsed as no image)."""
    return stable_number(song.title, "cover") % 9 != 0


def cover_url(song: GlobalSong, box: int) -> str | None:
    """The new layout's made-up mzstatic cover of `box` px, or None when the song has no cover."""
    if not _has_cover(song):
        return None
    token = _cover_token(song)
    host = 1 + stable_number(song.title) % 5
    return (f"https://is{host}-ssl.mzstatic.com/image/thumb/Music211/v4/{token[:2]}/{token[2:4]}/{token[4:6]}/"
            f"{token}-{stable_hex(song.title, 'uuid', digits=4)}/{stable_number(song.title) % 10**12:012d}.jpg/"
            f"{box}x{box}bb.jpg")


def old_cover_url(song: GlobalSong) -> str | None:
    """The old layout's chartsdb artwork URL, or None when the song has no cover."""
    if not _has_cover(song):
        return None
    digest = "".join(stable_hex(song.title, str(part), digits=8) for part in range(4))
    return f"http://live.chartsdb.officialcharts.com/img/small?url=/images/artwork/{digest}.jpg"


def _label(song: GlobalSong) -> str:
    """The song's label as the old pages print it (upper case); the pool's Korean extras have none."""
    return (song.label or "INDEPENDENT").upper()


def _week_url(info: ChartInfo, day: date) -> str:
    return f"/charts/{info.path}/{day:%Y%m%d}/{info.chart_id}/"


def _long_date(day: date) -> str:
    return f"{day.day} {day:%B} {day.year}"


def _short_date(day: date) -> str:
    return f"{day.day}/{day.month}/{day.year}"


# --- new layout ------------------------------------------------------------------------------------------------

_CHEVRON = "btn chevron chevron-centre text-center w-[54px]"
_CURRENT = "router-link-active router-link-exact-active "
_ITEM_COLOURS = ("#b6d1e4", "#edece8", "#eee8dc", "#e6e1f0")


def _movement_icon(row: UkSampleRow) -> str:
    if row.is_new or row.is_reentry:
        title, text = ("New entry", "New") if row.is_new else ("Re entry", "RE")
        return (f'<span class="movement-icon text-brand-pink new text-xs md:text-sm w-auto !-left-3 uppercase" '
                f'title="{title}">{text}</span><!---->')
    assert row.last_week is not None
    move = " movement-up" if row.last_week > row.rank else " movement-down" if row.last_week < row.rank else ""
    return f'<!----><span class="movement-icon{move}"></span>'


def _last_week_cell(row: UkSampleRow) -> str:
    if row.last_week is None:
        text = "New" if row.is_new else "RE"
        return f'<span title="Last week">LW: <span class="text-brand-pink font-bold">{text}</span></span><!---->'
    return (f'<!--[--><span title="Last week">LW: <span class="text-brand-pink font-bold">{row.last_week}</span>'
            f'</span><!--]--><span class="hidden sm:inline-block">, </span>')


def _images_new(row: UkSampleRow) -> str:
    alt = escape(f"{row.title} cover art")
    small = cover_url(row.song, 80)
    large = cover_url(row.song, 247)
    if small is None or large is None:
        colour = ("pink", "cobalt")[stable_number(row.song.title) % 2]
        small = large = f"/fallback/artwork-{colour}.svg"
    return (f'<img alt="{alt}" loading="lazy" class="chart-image-small rounded-md shadow-sm" src="{escape(small)}" '
            f'width="80" height="80"><img alt="{alt}" loading="lazy" class="chart-image-large rounded-lg shadow-md '
            f'absolute md:static w-[210px] top-[80px] right-0 sm:right-auto" src="{escape(large)}" width="247" '
            f'height="247">')


def render_item_new(info: ChartInfo, row: UkSampleRow, instance: int, index: int, ad: str = "") -> str:
    """One `div.chart-item` of the new layout (`ad` is the slot the #1 row carries inside it)."""
    kind = "songs" if info.kind == "singles" else "albums"
    artist_slug = _slug(row.song.artists[0])
    artist_id = 1000 + stable_number(row.song.artists[0], "artist") % 90000
    digits = f"digits{len(str(row.rank))}"
    primis = "primis " if index == 0 else ""
    colour = _ITEM_COLOURS[stable_number(row.song.title, "bg") % len(_ITEM_COLOURS)]
    return (
        f'<!--[--><div class="{primis}chart-item relative text-right" style="background-color: {colour};" '
        f'data-item="item-{instance}-{index}" data-info="info-{instance}-{index}" '
        f'data-player="player-{instance}-{index}"><div class="chart-item-content relative flex w-full">'
        f'<div class="position"><span class="{digits} chart-key font-bold"><span class="sr-only">Number </span>'
        f'<strong>{row.rank}</strong></span><div class="chart-image">{_images_new(row)}</div></div>'
        f'<div class="description block"><p><a href="/{kind}/{_slug(row.artist)}-{_slug(row.title)}/" '
        f'class="chart-name font-bold inline-block">{_movement_icon(row)}<span>{escape(row.title)}</span></a><br>'
        f'<a href="/artist/{artist_id}/{artist_slug}/" class="chart-artist text-lg inline-block">'
        f'<span>{escape(row.artist)}</span></a></p><div class="stats"><ol class="text-2xs sm:text-sm">'
        f'<li class="movement px-2 py-1 rounded-md inline-block mr-1 sm:mr-2">{_last_week_cell(row)}</li>'
        f'<li class="peak px-2 py-1 rounded-md inline-block mr-1 sm:mr-2">Peak: '
        f'<span class="text-brand-cobalt font-bold">{row.peak}</span><span>, </span></li>'
        f'<li class="weeks px-2 py-1 rounded-md inline-block mr-1 sm:mr-2">Weeks: '
        f'<span class="text-brand-pink font-bold">{row.weeks}</span><!----></li><!----></ol>'
        f'<button aria-label="Read more data about this item" class="more-info self-start relative"></button>'
        f'</div></div></div>{ad}<div class="duration-1000 item-info ease-out transition-max-height"><!----><!---->'
        f'</div></div><!---->'
    )


_PRIMIS_AD = ('<div class="chart-item chart-ad primis-ad py-4 overflow-x-hidden bg-design-greige">'
              '<div class="bg-gray-400 relative w-full mx-auto whitespace-nowrap primis-wrapper"></div></div>')
_AD = ('<div class="chart-item chart-ad py-4 overflow-x-hidden bg-design-greige"><div class="relative flex '
       'justify-center items-center" style="height:250px;"><div class="ci-ad-728x90"></div></div></div>')


def render_new(key: str, week_start: date, rows: tuple[UkSampleRow, ...] | list[UkSampleRow],
               latest_week: date | None = None, first_week: date | None = None) -> bytes:
    """A new-layout page of chart `key` for the week containing `week_start`: rows, the week printed as
    "3 May 2024 - 9 May 2024", and week arrows (the "next" arrow points at the page itself on `latest_week`, the
    "previous" one on `first_week`, as the site's do at the ends of its archive)."""
    info = check_key(key)
    start = week_start_for(week_start)
    end = start + timedelta(days=6)
    latest = week_start_for(latest_week) if latest_week else start
    here = _week_url(info, start)
    prev_link = (f'<a aria-current="page" href="{here}#" class="{_CURRENT}{_CHEVRON} rotate-180">'
                 if first_week is not None and week_start_for(first_week) >= start
                 else f'<a href="{_week_url(info, start - timedelta(days=7))}" class="{_CHEVRON} rotate-180">')
    next_link = (f'<a aria-current="page" href="{here}#" class="{_CURRENT}{_CHEVRON} bg-gray-300 cursor-default">'
                 if start >= latest else f'<a href="{_week_url(info, start + timedelta(days=7))}" class="{_CHEVRON}">')
    title = escape(info.title)
    instance = 400000 + stable_number(key, start.isoformat()) % 99999
    items: list[str] = []
    for index, row in enumerate(rows):
        items.append(render_item_new(info, row, instance, index, _PRIMIS_AD if index == 0 else ""))
        if index % 10 == 9 and index + 1 < len(rows):
            items.append(_AD)
    page = f"""<!DOCTYPE html><html  lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} on {escape(_short_date(start)).replace("/", "&#x2F;")} | Official Charts</title>
<meta name="title" content="{title} on {_short_date(start)} | Official Charts">
<meta property="og:site_name" content="Official Charts">
<meta property="og:type" content="Chart">
<meta property="og:url" content="{SITE}/charts/{info.path}/">
<meta property="og:title" content="{title} on {_short_date(start)}">
</head><body  class="bg-design-greige text-black oc-2023 anonymous"><div id="__nuxt"><div><div class="flex flex-col \
lg:flex-row items-stretch lg:container space-y-8 lg:space-y-0 lg:space-x-8 px-0"><main class="lg:flex-grow flex \
flex-col space-y-8 overflow-x-clip"><section class="gutter"><div class="flex space-x-1 justify-start mb-4">{prev_link}\
<span class="sr-only">Previous</span></a><form class="flex flex-col flex-grow max-w-xs"><label for="date" \
class="sr-only">Change date</label><input aria-label="Select chart date" type="date" name="date" \
value="{start.isoformat()}" class="!mb-0 w-full" max="{(latest + timedelta(days=5)).isoformat()}" required></form>\
{next_link}<span class="sr-only">Next</span></a></div><div class="prose"><h1>{title}<span class="sr-only"> on \
{_short_date(start)}</span></h1><p class="text-brand-cobalt text-sm sm:text-lg lg:text-xl basis-full font-bold !my-4">\
{_long_date(start)}<span> - {_long_date(end)}</span></p></div></section><!--[--><div class="contents"><section \
class="chart-list hidden" style="" element="drupal-block-chart-list"><div class="list-mode relative"><div \
class="chart-content"><div class="no-intro chart-items"><!--[-->{"".join(items)}<!--]--></div><!----><!----></div>\
</div></section></div><!--]--></main></div></div></div></body></html>"""
    return page.encode("utf-8")


# --- old layout ------------------------------------------------------------------------------------------------


def _old_last_week(row: UkSampleRow) -> tuple[str, str]:
    """(class modifier, text) of the old `span.last-week`: icon-up/icon-down, or none for level, New and Re."""
    if row.last_week is None:
        return "", "New" if row.is_new else "Re"
    if row.last_week > row.rank:
        return "icon-up", str(row.last_week)
    if row.last_week < row.rank:
        return "icon-down", str(row.last_week)
    return "", str(row.last_week)


def render_row_old(info: ChartInfo, row: UkSampleRow) -> str:
    """One old-layout chart row with its mobile and action rows, as the 2018 page writes them."""
    modifier, last = _old_last_week(row)
    kind = "singles" if info.kind == "singles" else "albums"
    cover = old_cover_url(row.song) or "/img/60x60.gif"
    artist_id = 1000 + stable_number(row.song.artists[0], "artist") % 90000
    n = row.rank
    return f"""
        <tr>
            <td>
                <span class="position">{row.rank}</span>
            </td>
            <td>

                <span class="last-week {modifier}">
                    {last}
                </span>
            </td>

            <td>
                <div class="track">
                    <div class="cover" style="height:60px;width:60px">
                        <img src="{escape(cover)}" alt="{escape(row.title)}" width="60" height="60" />
                    </div>
                    <div class="title-artist">
                        <div class="title">
                                <a href="/search/{kind}/{_slug(row.title)}/">{escape(row.title)}</a>
                        </div>
                        <div class="artist">

                            <a href="/artist/{artist_id}/{_slug(row.artist)}/">{escape(row.artist)}</a>
                        </div>
                        <div class="label-cat"><span class="label">{escape(_label(row.song))}</span></div>
                    </div>
                </div>
            </td>

                <!-- Peak Position-->
                <td>{row.peak}</td>
                <!-- Wks -->
                <td>{row.weeks}</td>

            <td>
                <div class="actions">
                        <a href="" data-toggle="actions-view-buy-{n}">Buy</a>
                </div>
            </td>


        </tr>
        <tr class="mobile-actions">
            <td colspan="6">
                <div class="actions">
                        <a href="" data-toggle="actions-view-buy-{n}">Buy</a>
                </div>
            </td>
        </tr>
        <tr class="actions-view actions-view-buy-{n}">
            <td colspan="6">
                <div>
                </div>
                <a href="" class="close"></a>
            </td>
        </tr>"""


_OLD_AD_ROW = """
    <tr>
        <td colspan="6">
            <div class="adspace">
                <div id="div-gpt-ad-1484752108703-5"></div>
            </div>
        </td>
    </tr>"""


def render_old(key: str, week_start: date, rows: tuple[UkSampleRow, ...] | list[UkSampleRow],
               latest_week: date | None = None) -> bytes:
    """An old-layout (<=2022) page of chart `key` for the week containing `week_start`; its week links carry the
    Thursday end dates as the 2018 page's do, and the latest week has no "next" link."""
    info = check_key(key)
    start = week_start_for(week_start)
    end = start + timedelta(days=6)
    latest = week_start_for(latest_week) if latest_week else start
    heading = escape(f"{info.title} Top {len(rows)}" if "Top" not in info.title else info.title)
    prev_end = end - timedelta(days=7)
    links = (f'        <a href="/charts/{info.path}/{prev_end:%Y%m%d}/{info.chart_id}" '
             f'data-chart-id="{info.chart_id}-{prev_end:%Y%m%d}" rel="prev" '
             f'class="prev chart-date-directions">prev</a>')
    if start < latest:
        next_end = end + timedelta(days=7)
        links += (f'\n\n        <a href="/charts/{info.path}/{next_end:%Y%m%d}/{info.chart_id}" '
                  f'data-chart-id="{info.chart_id}-{next_end:%Y%m%d}" rel="next" '
                  f'class="next chart-date-directions">next</a>')
    body_rows = "".join(render_row_old(info, row) + (_OLD_AD_ROW if row.rank == 30 and len(rows) > 30 else "")
                        for row in rows)
    page = f"""
<!doctype html>
<html class="no-js" lang="en">
<head>
<meta charset="utf-8" />
<title>{heading} | Official Charts Company</title>
</head>
<body>
<div id="main" role="main">
    <input id="this-chart-type" type="hidden" value="{info.chart_id}" />
    <input id="this-chart-id" type="hidden" value="{info.chart_id}-{end:%Y%m%d}" />
    <article class="page">
        <div class="grid">
            <div class="grid__cell unit-2-3--desktop">
                <div class="charts-header-panel">
                    <header class="charts-header">
                        <h1 class="article-heading">
                                {heading}
                        </h1>

                                <p class="article-date">
                                    {_long_date(start)} -  {_long_date(end)}
                                </p>
                    </header>
<nav class="charts-nav">
{links}

</nav>
                </div>

<section class="chart">
<table class="chart-positions">

<tr class="headings">
    <th class="h-position">Pos</th>
    <th class="h-last-week">LW</th>
    <th class="h-title-artist">Title, Artist</th>
        <th class="h-peak">Peak<br />Pos</th>
        <th class="h-weeks"><abbr title="Weeks on Chart">WoC</abbr></th>
    <th class="h-actions"></th>
</tr>
{body_rows}

</table>
</section>
            </div>
        </div>
    </article>
</div>
</body>
</html>
"""
    return page.encode("utf-8")


# --- pages and replay tables -----------------------------------------------------------------------------------


def render(key: str, week_start: date, variant: int = 0, size: int | None = None, layout: Layout = "new",
           latest_week: date | None = None) -> bytes:
    """The page of sample week `variant` of chart `key`, printed as the week containing `week_start`."""
    rows = sample_week(key, variant, size)
    if layout == "old":
        return render_old(key, week_start, rows, latest_week)
    return render_new(key, week_start, rows, latest_week)


def chart_replies(key: str, latest_week: date, weeks: int = 4, size: int | None = None,
                  layout: Layout = "new") -> dict[ReplayKey, Reply]:
    """Replies for `weeks` consecutive weeks of chart `key` ending with the week containing `latest_week`: each
    week's dated URL (variant 0 is the oldest week), and the latest URL answering the newest week."""
    latest = week_start_for(latest_week)
    first = latest - timedelta(days=7 * (weeks - 1))
    replies: dict[ReplayKey, Reply] = {}
    for variant in range(weeks):
        start = first + timedelta(days=7 * variant)
        rows = sample_week(key, variant, size)
        body = render_old(key, start, rows, latest) if layout == "old" else render_new(key, start, rows, latest)
        (request,) = requests_for(key, start)
        replies[request_key(request)] = Reply(body, 200, CONTENT_TYPE)
        if variant == weeks - 1:
            (latest_request,) = requests_for(key)
            replies[request_key(latest_request)] = Reply(body, 200, CONTENT_TYPE)
    return replies


def all_replies(latest_week: date, weeks: int = 4, keys: tuple[str, ...] = DEFAULT_KEYS) -> dict[ReplayKey, Reply]:
    """`chart_replies` for every chart key (default: every chart of `CHARTS`)."""
    replies: dict[ReplayKey, Reply] = {}
    for key in keys:
        replies.update(chart_replies(key, latest_week, weeks))
    return replies
