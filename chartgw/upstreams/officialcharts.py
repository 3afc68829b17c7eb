"""Official Charts Company (officialcharts.com) weekly UK charts: one HTML page per chart week (NOTES section 7).

Requests: `/charts/{chart-path}/` is the latest week, `/charts/{chart-path}/{YYYYMMDD}/{chart-id}/` a given week,
asked by the week's Friday start as the site's own week links do today (2018 pages linked the Thursday end
instead, `/charts/dance-singles-chart/20180920/104`). The site may answer with another week than asked, so the week
always comes from the page itself, never from the URL.

Page layouts, one parser each, chosen by what the page holds:
- new (2023+, Nuxt/Tailwind), verified against three real captures (singles and albums of 2024-05-03, singles of
  1952-11-14): rows `div.chart-item` minus the ad slots (`.chart-ad`, one nested inside the #1 row), rank in
  `span.chart-key strong`, title the last `span` of `a.chart-name` (a `span.movement-icon` precedes it), artist
  `a.chart-artist > span`, stats `li.movement` "LW: n|New|RE", `li.peak`, `li.weeks`, covers
  `img.chart-image-large|small` (a `/fallback/artwork-*.svg` placeholder when there is none). The week is
  `p.text-brand-cobalt` "3 May 2024<span> - 9 May 2024</span>". No record label on these pages (label is null).
  The 1952 page has tied ranks (7, 7, 8, 8, ...) and an empty movement cell (no last week, new/re-entry unknown).
- old (<=2022, table), verified against one real capture (Dance Singles of 2018-09-21): rows
  `table.chart-positions tr` with a `span.position` (headings, ad and action rows skipped), `span.last-week`
  n / "New" / "Re", `.title-artist .title a`, `.artist a`, `span.label`, peak and weeks in the 4th and 5th cells,
  cover `.cover img` (`/img/60x60.gif` placeholder when none); week `p.article-date` "21 September 2018 - 27
  September 2018".
The chart families and their ids are the site's own chart menu (the new pages' Nuxt payload, the 2018 page's
`data-chart-id`/`data-chart-name` menu); row counts per chart are from the page titles where seen (Top 100, Dance
Top 40, Compilations Top 100) and otherwise from memory of the site: see `CHARTS`.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Literal, NamedTuple
from urllib.parse import urlsplit

import msgspec
from selectolax.lexbor import LexborHTMLParser, LexborNode

from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, declare_upstream
from chartgw.upstreams.fields import absolute_url, clean, decode, node_text, parse_html, snippet
from chartgw.upstreams.json_api import BROWSER_UA

UPSTREAM = declare_upstream("OFFICIALCHARTS", "https://www.officialcharts.com")
SITE = "https://www.officialcharts.com"
"""Relative image URLs on the pages are resolved against the real site, whatever origin served the page."""

Kind = Literal["singles", "albums"]
Layout = Literal["new", "old"]


# --- the charts ------------------------------------------------------------------------------------------------


class ChartInfo(NamedTuple):
    """One chart of the site: our key, its URL path segment and id, the title the site gives it, what it ranks, and
    the row count of a complete current page."""

    key: str
    path: str
    chart_id: str
    title: str
    kind: Kind
    size: int


CHARTS: tuple[ChartInfo, ...] = (
    ChartInfo("singles", "singles-chart", "7501", "Official Singles Chart Top 100", "singles", 100),
    ChartInfo("albums", "albums-chart", "7502", "Official Albums Chart Top 100", "albums", 100),
    ChartInfo("singles-top-40", "uk-top-40-singles-chart", "750140", "Official Singles Chart Top 40", "singles", 40),
    ChartInfo("compilations", "official-compilations-chart", "7503", "Official Compilations Chart", "albums", 100),
    ChartInfo("dance-singles", "dance-singles-chart", "104", "Official Dance Singles Chart", "singles", 40),
    ChartInfo("dance-albums", "dance-albums-chart", "105", "Official Dance Albums Chart", "albums", 40),
    ChartInfo("indie-singles", "independent-singles-chart", "130", "Official Independent Singles Chart", "singles",
              50),
    ChartInfo("indie-albums", "independent-albums-chart", "131", "Official Independent Albums Chart", "albums", 50),
    ChartInfo("rnb-singles", "official-hip-hop-and-r-and-b-singles-chart", "114",
              "Official Hip Hop and R&B Singles Chart", "singles", 40),
    ChartInfo("rnb-albums", "official-hip-hop-and-r-and-b-albums-chart", "115",
              "Official Hip Hop and R&B Albums Chart", "albums", 40),
    ChartInfo("rock-metal-singles", "rock-and-metal-singles-chart", "111", "Official Rock & Metal Singles Chart",
              "singles", 40),
    ChartInfo("rock-metal-albums", "rock-and-metal-albums-chart", "112", "Official Rock & Metal Albums Chart",
              "albums", 40),
    ChartInfo("vinyl-singles", "vinyl-singles-chart", "897", "Official Vinyl Singles Chart", "singles", 40),
    ChartInfo("vinyl-albums", "vinyl-albums-chart", "9", "Official Vinyl Albums Chart", "albums", 40),
    ChartInfo("downloads-singles", "singles-downloads-chart", "7000", "Official Singles Downloads Chart", "singles",
              100),
    ChartInfo("downloads-albums", "albums-downloads-chart", "7003", "Official Album Downloads Chart", "albums", 100),
    ChartInfo("sales-singles", "singles-sales-chart", "7509", "Official Singles Sales Chart", "singles", 100),
    ChartInfo("sales-albums", "albums-sales-chart", "7511", "Official Albums Sales Chart", "albums", 100),
    ChartInfo("streaming", "audio-streaming-chart", "7507", "Official Audio Streaming Chart", "singles", 100),
    ChartInfo("streaming-albums", "albums-streaming-chart", "7512", "Official Albums Streaming Chart", "albums", 100),
    ChartInfo("physical-singles", "physical-singles-chart", "1", "Official Physical Singles Chart", "singles", 100),
    ChartInfo("physical-albums", "physical-albums-chart", "2", "Official Physical Albums Chart", "albums", 100),
    ChartInfo("scottish-singles", "scottish-singles-chart", "41", "Official Scottish Singles Chart", "singles", 100),
    ChartInfo("scottish-albums", "scottish-albums-chart", "40", "Official Scottish Albums Chart", "albums", 100),
    ChartInfo("soundtrack-albums", "soundtrack-albums-chart", "140", "Official Soundtrack Albums Chart", "albums", 50),
    ChartInfo("record-store", "record-store-chart", "530", "Official Record Store Chart", "albums", 40),
)
"""The default charts of /uk-charts. Paths and ids: the site's chart menu (2024 payload; `scottish-singles-chart` 41
only in the 2018 menu). Sizes: singles/albums/compilations 100 and dance 40 as the pages title them; the others are
the site's usual "Top N" from memory, not verified against a page (`expected_size`)."""

CHARTS_BY_KEY: dict[str, ChartInfo] = {chart.key: chart for chart in CHARTS}
CHARTS_BY_PATH: dict[str, ChartInfo] = {chart.path: chart for chart in CHARTS}
LEGACY_PATHS: dict[str, str] = {
    "r-and-b-singles-chart": "rnb-singles",
    "r-and-b-albums-chart": "rnb-albums",
}
"""Paths the 2018 site used for charts renamed since (the R&B charts became "Hip Hop and R&B")."""
DEFAULT_KEYS: tuple[str, ...] = tuple(chart.key for chart in CHARTS)

_PATH = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_CHART_ID = re.compile(r"[A-Za-z0-9]+")


def chart_info(key: str) -> ChartInfo | None:
    """The known chart of that key, or None for a chart outside the table."""
    return CHARTS_BY_KEY.get(key)


def check_key(key: str) -> ChartInfo:
    """The chart of that key; ValueError naming the known keys otherwise."""
    info = CHARTS_BY_KEY.get(key)
    if info is None:
        raise ValueError(f"officialcharts: unknown chart key {key!r}; known: {', '.join(DEFAULT_KEYS)}")
    return info


def expected_size(key: str) -> int | None:
    """How many rows a complete current page of that chart has (singles 100, dance-singles 40, ...); None if unknown."""
    info = CHARTS_BY_KEY.get(key)
    return info.size if info else None


def key_for_path(path: str) -> str | None:
    """Our chart key for a site path segment ("singles-chart" → "singles"), old R&B paths included."""
    info = CHARTS_BY_PATH.get(path)
    return info.key if info else LEGACY_PATHS.get(path)


# --- chart weeks -----------------------------------------------------------------------------------------------

FRIDAY = 4
FIRST_CHART_WEEK = date(1952, 11, 14)
"""The first UK singles chart (a Friday); the archive starts there."""


def week_start_for(day: date) -> date:
    """The Friday that starts the UK chart week containing `day` (a week runs Friday to Thursday)."""
    return day - timedelta(days=(day.weekday() - FRIDAY) % 7)


def week_end_for(day: date) -> date:
    """The Thursday that ends the UK chart week containing `day`."""
    return week_start_for(day) + timedelta(days=6)


def chart_week(day: date) -> tuple[date, date]:
    """(Friday start, Thursday end) of the chart week containing `day`."""
    start = week_start_for(day)
    return start, start + timedelta(days=6)


def previous_week_start(day: date) -> date:
    """The Friday one chart week before the week of `day` (the backfill's step back)."""
    return week_start_for(day) - timedelta(days=7)


def next_week_start(day: date) -> date:
    """The Friday one chart week after the week of `day`."""
    return week_start_for(day) + timedelta(days=7)


# --- requests --------------------------------------------------------------------------------------------------

HEADERS: tuple[tuple[str, str], ...] = (
    ("User-Agent", BROWSER_UA),
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    ("Accept-Language", "en-GB,en;q=0.9"),
)
"""A browser's headers. A 2024 downloader fetched 4,615 weekly pages with plain requests; one scraper also sends
consent cookies, which we do not (a consent wall is refused by the parser, see `parse`)."""


def chart_path(key: str, week: date | None = None) -> str:
    """`/charts/{path}/` (latest) or `/charts/{path}/{YYYYMMDD}/{id}/` with the Friday start of the week of `week`."""
    info = check_key(key)
    if week is None:
        return f"/charts/{info.path}/"
    return f"/charts/{info.path}/{week_start_for(week):%Y%m%d}/{info.chart_id}/"


def requests_for(key: str, week: date | None = None) -> list[UpstreamRequest]:
    """One GET of the chart page: the latest week, or the week containing `week` (asked by its Friday start, so the
    same week is always the same URL)."""
    return [UpstreamRequest(upstream=UPSTREAM, path=chart_path(key, week), headers=HEADERS)]


# --- records ---------------------------------------------------------------------------------------------------


class UkChartEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One row of a UK chart week, normalised; null where the page has no value."""

    rank: int
    """The position as printed; tied positions repeat (the 1952 chart has two 7s)."""
    title: str
    """The song or album, as the site prints it (upper case)."""
    artist: str
    """One string, as credited ("TAYLOR SWIFT FT POST MALONE")."""
    last_week: int | None
    """Last week's position; null for a new entry, a re-entry, or a page without movement data (1952)."""
    peak: int | None
    """Best position so far, this week included."""
    weeks_on_chart: int | None
    """Weeks on the chart, this week included."""
    label: str | None
    """The record label (old layout only; the 2023+ pages do not print it)."""
    is_new: bool | None
    """A new entry ("New"); null when the page says nothing about movement."""
    is_reentry: bool | None
    """A re-entry ("RE"/"Re"); null when the page says nothing about movement."""
    image: str | None
    """The cover URL (247x247 on the new pages, 60x60 on old ones); null for the site's placeholder artwork."""


class UkChartWeek(msgspec.Struct, kw_only=True):
    """One week of one chart as the page states it."""

    chart_key: str | None
    """Our key of the chart the page says it is (its week links, else og:url or the old date form); null when it does
    not say or the chart is outside `CHARTS`."""
    chart_path: str | None
    """The site's path segment of that chart ("singles-chart")."""
    chart_id: str | None
    """The site's chart id ("7501")."""
    title: str | None
    """The chart's title as the page prints it ("Official Singles Chart Top 100")."""
    week_start: str
    """YYYY-MM-DD, the first day of the week as printed: the week really served, whatever week was asked."""
    week_end: str
    """YYYY-MM-DD, the last day as printed (start + 6 days when the page prints only the start)."""
    previous_week_start: str | None
    """The Friday start of the week the page's "previous" link goes to; null at the first week or without links."""
    next_week_start: str | None
    """The Friday start of the week the page's "next" link goes to; null at the latest week or without links."""
    layout: Layout
    entries: list[UkChartEntry]


def require_size(chart: UkChartWeek, key: str, size: int | None = None) -> UkChartWeek:
    """The chart itself when it has at least `size` rows (default: the key's `expected_size`); a short page is an
    UpstreamFormatError (a fetch that keeps the last good snapshot). Use it on current weeks: old weeks were shorter
    (the 1952 chart has 15 rows)."""
    wanted = size if size is not None else expected_size(key)
    if wanted is not None and len(chart.entries) < wanted:
        raise UpstreamFormatError(
            f"officialcharts {key} {chart.week_start}: short page, {len(chart.entries)} of {wanted} rows"
        )
    return chart


# --- parsing ---------------------------------------------------------------------------------------------------

_ROBOT_MARKERS = (
    "captcha", "cf-chl", "just a moment...", "attention required", "access denied", "request unsuccessful",
    "are you a robot", "verify you are human", "px-captcha", "incapsula", "_incapsula_resource",
)
_CONSENT_MARKERS = ("we value your privacy", "qc-cmp2", "consent-page", "manage your consent", "cookie consent")
_PATH_IN_URL = re.compile(r"^/charts/([a-z0-9]+(?:-[a-z0-9]+)*)/")
_CHART_LINK = re.compile(r"/charts/([a-z0-9-]+)/(\d{8})/([A-Za-z0-9]+)")
_DAY_MONTH_YEAR = re.compile(r"(\d{1,2})\s+([A-Za-z]+)\s+(\d{4})")
_SLASHED = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})")
_PLACEHOLDERS = ("/fallback/artwork", "/img/60x60.gif")


def parse(key: str, body: bytes) -> UkChartWeek:
    """The rows, week, title and week links of one chart page (new or old layout).

    Refuses an empty body, a robot check or consent wall, a page without rows (changed layout), a truncated page,
    ranks that do not run from 1 upwards, a row without its fields, and a page of another chart than `key`. Does
    not check the row count against the chart's size: see `require_size`.
    """
    info = check_key(key)
    where = f"officialcharts {key}"
    if not body.strip():
        raise UpstreamFormatError(f"{where}: empty body")
    text = decode(body)
    tree = parse_html(body)
    new_rows = tree.css("div.chart-item:not(.chart-ad)")
    old_rows = [row for row in tree.css("table.chart-positions tr") if row.css_first("span.position") is not None]
    if not new_rows and not old_rows:
        raise UpstreamFormatError(_no_rows_reason(where, tree, text))
    if b"</html>" not in body[-4096:].lower():
        raise UpstreamFormatError(f"{where}: truncated page ({len(new_rows or old_rows)} rows, no closing </html>)")
    layout: Layout = "new" if new_rows else "old"
    page_path, page_id, previous_day, next_day = _week_links(tree, layout)
    if page_path is not None and page_path != info.path and LEGACY_PATHS.get(page_path) != key:
        raise UpstreamFormatError(f"{where}: the page is the {page_path!r} chart")
    start, end = _page_week(tree, layout, where)
    where = f"{where} {start.isoformat()}"
    if layout == "new":
        entries = [_new_entry(row, f"{where} row {n}") for n, row in enumerate(new_rows, start=1)]
    else:
        entries = [_old_entry(row, f"{where} row {n}") for n, row in enumerate(old_rows, start=1)]
    _check_ranks([entry.rank for entry in entries], where)
    return UkChartWeek(
        chart_key=key_for_path(page_path) if page_path else None,
        chart_path=page_path,
        chart_id=page_id,
        title=_page_title(tree, layout),
        week_start=start.isoformat(),
        week_end=end.isoformat(),
        previous_week_start=week_start_for(previous_day).isoformat() if previous_day else None,
        next_week_start=week_start_for(next_day).isoformat() if next_day else None,
        layout=layout,
        entries=entries,
    )


def refusal(status: int, body: bytes) -> str | None:
    """Reads an answer that is not a 200: a robot check or block page (a Cloudflare/Incapsula challenge sent as 403,
    429 or 503) is a refusal, to be logged and never retried; None for an ordinary error (a 404, a plain 5xx)."""
    head = decode(body[:200000]).lower()
    for marker in _ROBOT_MARKERS:
        if marker in head:
            return f"officialcharts: robot check / block page ({marker!r})"
    return None


def _no_rows_reason(where: str, tree: LexborHTMLParser, text: str) -> str:
    """Why a page has no chart rows: a robot check, a consent wall, or (by default) a changed layout."""
    head = text[:200000].lower()
    title = node_text(tree.css_first("title"))
    for marker in _ROBOT_MARKERS:
        if marker in head:
            return f"{where}: robot check / block page ({marker!r}; title {title!r})"
    for marker in _CONSENT_MARKERS:
        if marker in head:
            return f"{where}: consent page without chart rows ({marker!r}; title {title!r})"
    if not text.lstrip().startswith("<"):
        return f"{where}: not an HTML page: {snippet(text)!r}"
    return f"{where}: no chart rows (div.chart-item or table.chart-positions; layout changed?); title {title!r}"


# --- page-level fields -----------------------------------------------------------------------------------------


def _link_date(href: str | None) -> tuple[str, str, date] | None:
    """(path, id, date) of a `/charts/{path}/{YYYYMMDD}/{id}` link; None for other links and impossible dates."""
    match = _CHART_LINK.search(urlsplit(href or "").path)
    if match is None:
        return None
    try:
        day = datetime.strptime(match.group(2), "%Y%m%d").date()
    except ValueError:
        return None
    return match.group(1), match.group(3), day


def _week_links(tree: LexborHTMLParser, layout: Layout) -> tuple[str | None, str | None, date | None, date | None]:
    """(chart path, chart id, previous week's date, next week's date) from the page's own week arrows.

    New layout: the two `a.chevron` links; the one at an end of the archive points at the page itself
    (`aria-current="page"`, href ending in "#"), which is no neighbour. Old layout: `a.prev` / `a.next`
    (`chart-date-directions`), dated by the week's Thursday end; the chart id also sits in `input#this-chart-type`.
    """
    path: str | None = None
    chart_id: str | None = None
    days: dict[str, date | None] = {"previous": None, "next": None}
    if layout == "new":
        for link in tree.css("a.chevron"):
            found = _link_date(link.attributes.get("href"))
            if found is None:
                continue
            path, chart_id = found[0], found[1]
            direction = node_text(link.css_first("span.sr-only")).lower()
            if direction in days and link.attributes.get("aria-current") != "page":
                days[direction] = found[2]
    else:
        for css, direction in (("a.prev.chart-date-directions", "previous"), ("a.next.chart-date-directions", "next")):
            arrow = tree.css_first(css)
            found = _link_date(arrow.attributes.get("href") if arrow is not None else None)
            if found is not None:
                path, chart_id, days[direction] = found
        chart_type = tree.css_first("input#this-chart-type")
        stated = clean(chart_type.attributes.get("value")) if chart_type is not None else ""
        if _CHART_ID.fullmatch(stated):
            chart_id = stated
    if path is None:
        path = _stated_path(tree)
    return path, chart_id, days["previous"], days["next"]


def _stated_path(tree: LexborHTMLParser) -> str | None:
    """The chart path from `og:url` (new layout, "/charts/singles-chart/") or the old date form's
    `data-chart-name`, for pages without week arrows."""
    og_url = tree.css_first('meta[property="og:url"]')
    match = _PATH_IN_URL.search(urlsplit(og_url.attributes.get("content") or "").path) if og_url else None
    if match is not None:
        return match.group(1)
    form = tree.css_first("input.chart-date-submit[data-chart-name]")
    name = clean(form.attributes.get("data-chart-name")) if form is not None else ""
    return name if _PATH.fullmatch(name) else None


def _day_month_year(text: str) -> date | None:
    match = _DAY_MONTH_YEAR.search(text)
    if match is None:
        return None
    try:
        return datetime.strptime(" ".join(match.groups()), "%d %B %Y").date()
    except ValueError:
        return None


def _page_week(tree: LexborHTMLParser, layout: Layout, where: str) -> tuple[date, date]:
    """(start, end) as printed: "3 May 2024 - 9 May 2024" (new `p.text-brand-cobalt`, old `p.article-date`); else
    the new heading's " on 3/5/2024" (day/month/year) or the date picker, ending 6 days later."""
    node = tree.css_first("p.text-brand-cobalt" if layout == "new" else "p.article-date")
    printed = node_text(node)
    parts = [_day_month_year(part) for part in re.split(r"\s[-\u2013]\s", printed)] if printed else []
    start = parts[0] if parts else None
    end = parts[1] if len(parts) > 1 else None
    if start is None and layout == "new":
        start = _heading_date(tree)
    if start is None:
        raise UpstreamFormatError(f"{where}: no chart week printed (p.text-brand-cobalt / p.article-date)")
    if end is None:
        end = start + timedelta(days=6)
    if not timedelta(0) <= end - start <= timedelta(days=13):
        raise UpstreamFormatError(f"{where}: printed week {printed!r} is not one week")
    return start, end


def _heading_date(tree: LexborHTMLParser) -> date | None:
    """The new layout's `h1 span.sr-only` " on 3/5/2024", else the date picker's value."""
    match = _SLASHED.search(node_text(tree.css_first("h1 span.sr-only")))
    if match is not None:
        day, month, year = (int(group) for group in match.groups())
        try:
            return date(year, month, day)
        except ValueError:
            pass
    picker = tree.css_first('input[name="date"][type="date"]')
    try:
        return date.fromisoformat(clean(picker.attributes.get("value"))) if picker is not None else None
    except ValueError:
        return None


def _page_title(tree: LexborHTMLParser, layout: Layout) -> str | None:
    """The heading without its screen-reader date ("Official Singles Chart Top 100")."""
    css = "div.prose h1" if layout == "new" else "h1.article-heading"
    heading = tree.css_first(css) or tree.css_first("h1")
    if heading is None:
        return None
    hidden = node_text(heading.css_first("span.sr-only"))
    title = node_text(heading)
    if hidden and title.endswith(hidden):
        title = title[: -len(hidden)].strip()
    return title or None


# --- rows ------------------------------------------------------------------------------------------------------


def _number(text: str, what: str, where: str) -> int | None:
    """A stat: digits → int; empty or a dash → None; anything else is a changed format."""
    text = clean(text)
    if text in ("", "-", "--", "\u2013", "\u2014"):
        return None
    if not text.isdigit():
        raise UpstreamFormatError(f"{where}: {what} is not a number: {text!r}")
    return int(text)


def _last_week(text: str, where: str) -> tuple[int | None, bool | None, bool | None]:
    """(last week, is_new, is_reentry) from a last-week cell: a number, "New", "RE"/"Re"; empty means unknown."""
    word = clean(text).upper().replace("-", "").replace(" ", "")
    if word == "NEW":
        return None, True, False
    if word in ("RE", "REENTRY"):
        return None, False, True
    if word == "":
        return None, None, None
    return _number(text, "last week", where), False, False


def _image(src: str | None) -> str | None:
    """An absolute image URL; the site's placeholders (fallback artwork, the 60x60 gif) are no image."""
    src = clean(src)
    if not src or any(marker in src for marker in _PLACEHOLDERS):
        return None
    if src.startswith("/") and not src.startswith("//"):
        return SITE + src
    return absolute_url(src)


def _new_entry(row: LexborNode, where: str) -> UkChartEntry:
    rank = _number(node_text(row.css_first("div.position span.chart-key strong")), "rank", where)
    if rank is None:
        raise UpstreamFormatError(f"{where}: no rank (span.chart-key strong)")
    where = f"{where} (rank {rank})"
    name = row.css_first("a.chart-name") or row.css_first(".chart-name")
    spans = [span for span in (name.css("span") if name is not None else [])
             if "movement-icon" not in (span.attributes.get("class") or "").split()]
    title = node_text(spans[-1]) if spans else ""
    artist = node_text(row.css_first("a.chart-artist > span") or row.css_first(".chart-artist span"))
    if not title:
        raise UpstreamFormatError(f"{where}: empty title (a.chart-name span)")
    if not artist:
        raise UpstreamFormatError(f"{where}: empty artist (a.chart-artist span)")
    movement = row.css_first('li.movement span[title="Last week"] span')
    last_week, is_new, is_reentry = _last_week(node_text(movement), where)
    icon = name.css_first("span.movement-icon") if name is not None else None
    if icon is not None and is_new is None:
        # A movement icon without a last-week value: the icon alone says new / re-entry / a move.
        badge = clean(icon.attributes.get("title")).lower()
        is_new, is_reentry = badge == "new entry", badge == "re entry"
    image = row.css_first("img.chart-image-large") or row.css_first("img.chart-image-small")
    return UkChartEntry(
        rank=rank,
        title=title,
        artist=artist,
        last_week=last_week,
        peak=_number(node_text(row.css_first("li.peak span")), "peak", where),
        weeks_on_chart=_number(node_text(row.css_first("li.weeks span")), "weeks", where),
        label=None,
        is_new=is_new,
        is_reentry=is_reentry,
        image=_image(image.attributes.get("src") if image is not None else None),
    )


def _old_entry(row: LexborNode, where: str) -> UkChartEntry:
    rank = _number(node_text(row.css_first("span.position")), "rank", where)
    if rank is None:
        raise UpstreamFormatError(f"{where}: no rank (span.position)")
    where = f"{where} (rank {rank})"
    title = node_text(row.css_first(".title-artist .title a") or row.css_first(".title-artist .title"))
    artist = node_text(row.css_first(".title-artist .artist a") or row.css_first(".title-artist .artist"))
    if not title:
        raise UpstreamFormatError(f"{where}: empty title (.title-artist .title)")
    if not artist:
        raise UpstreamFormatError(f"{where}: empty artist (.title-artist .artist)")
    cells = [child for child in row.iter() if child.tag == "td"]
    if len(cells) < 5:
        raise UpstreamFormatError(f"{where}: {len(cells)} cells, expected 5 or more (pos, lw, track, peak, weeks)")
    last_week, is_new, is_reentry = _last_week(node_text(row.css_first("span.last-week")), where)
    image = row.css_first(".track .cover img")
    return UkChartEntry(
        rank=rank,
        title=title,
        artist=artist,
        last_week=last_week,
        peak=_number(node_text(cells[3]), "peak", where),
        weeks_on_chart=_number(node_text(cells[4]), "weeks", where),
        label=node_text(row.css_first("span.label")) or None,
        is_new=is_new,
        is_reentry=is_reentry,
        image=_image(image.attributes.get("src") if image is not None else None),
    )


def _check_ranks(ranks: list[int], where: str) -> None:
    """Ranks start at 1 and never fall back; ties repeat a rank (1952: 7, 7, 8, 8) but no rank is past its row."""
    for row, rank in enumerate(ranks, start=1):
        previous = ranks[row - 2] if row > 1 else 1
        if rank < previous or rank > row or (row == 1 and rank != 1):
            raise UpstreamFormatError(f"{where}: ranks out of order at row {row} (rank {rank} after {previous})")
