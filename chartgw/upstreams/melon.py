"""Melon (melon.com) web chart pages: one HTML page of 100 rows per chart (NOTES section 1a).

Rows are `tr.lst50` (ranks 1-50) then `tr.lst100` (51-100). Each artist link appears twice in a row:
once as a direct child of `div.rank02` and again inside the hidden `span.checkEllipsis`, so only the
direct children are read.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from chartgw.store.records import KoreaEntry, ParsedChart, korea_entry
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, check_chart_type, declare_upstream
from chartgw.upstreams.fields import Page, absolute_url, decode, first_int, node_text, parse_pages

UPSTREAM = declare_upstream("MELON", "https://www.melon.com")
CHART_TYPES: tuple[str, ...] = ("realtime", "hot100_d100", "hot100_d30", "daily", "weekly")

# Path and query of each chart page, as the site's own chart tabs link them.
PAGES: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "realtime": ("/chart/index.htm", ()),
    "hot100_d100": ("/chart/hot100/index.htm", (("chartType", "D100"),)),
    "hot100_d30": ("/chart/hot100/index.htm", (("chartType", "D30"),)),
    "daily": ("/chart/day/index.htm", ()),
    "weekly": ("/chart/week/index.htm", ()),
}

# Plain requests without a browser User-Agent get bot friction; these are what current parsers send.
HEADERS: tuple[tuple[str, str], ...] = (
    (
        "User-Agent",
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/124.0.0.0 Safari/537.36",
    ),
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/webp,*/*;q=0.8"),
    ("Accept-Language", "ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7"),
    ("Referer", "https://www.melon.com/"),
)

# Ids sit in javascript: hrefs (goAlbumDetail('123')); newer pages may link /artist/detail.htm?artistId=123.
_ID_IN_HREF = re.compile(r"(?:Detail\(\s*'|Id=)(\d+)")
_DATE = re.compile(r"(\d{4})\.(\d{1,2})(?:\.(\d{1,2}))?")
_HOUR = re.compile(r"(\d{1,2}):\d{2}")


def requests_for(chart_type: str) -> list[UpstreamRequest]:
    """One GET of the chart page: Melon serves all 100 rows of the current chart on it."""
    path, params = PAGES[check_chart_type("melon", chart_type, CHART_TYPES)]
    return [UpstreamRequest(upstream=UPSTREAM, path=path, params=params, headers=HEADERS)]


def parse(chart_type: str, bodies: list[bytes]) -> ParsedChart:
    """Read every chart row of the page(s) and the chart time from `div.calendar_prid`.

    Dates: "2018.01.25" (+ "15:00" in `span.hour` on hourly charts) gives that day and hour; a
    weekly range "2024.05.06 ~ 2024.05.12" gives its first day; a month-only period "2020.08"
    (monthly page) gives the first of the month, "2020-08-01", so the date still sorts and
    names the period's start.
    """
    entries: list[KoreaEntry] = []
    chart_date: str | None = None
    chart_hour: int | None = None

    def no_rows(page: Page) -> str:
        title = node_text(page.tree.css_first("title"))
        return f"melon {chart_type}: page {page.number} has no chart rows (tr.lst50/tr.lst100); title {title!r}"

    # UTF-8 as Melon serves it; unlike `fields.parse_html`, a <meta charset> is not followed.
    for page in parse_pages("melon", chart_type, CHART_TYPES, bodies, "tr.lst50, tr.lst100", no_rows, decode):
        entries.extend(_entry(row) for row in page.rows)
        if chart_date is None:
            chart_date, chart_hour = _chart_time(page.tree)
    return ParsedChart(entries=entries, chart_date=chart_date, chart_hour=chart_hour)


def _href_id(node: LexborNode | None) -> str | None:
    match = _ID_IN_HREF.search(node.attributes.get("href") or "") if node is not None else None
    return match.group(1) if match else None


def _entry(row: LexborNode) -> KoreaEntry:
    rank_text = node_text(row.css_first("span.rank"))
    if not rank_text.isdigit():
        raise UpstreamFormatError(f"melon: row without a numeric span.rank (got {rank_text!r})")
    rank = int(rank_text)
    title_link = row.css_first("div.rank01 > span > a") or row.css_first("div.rank01 a")
    title = node_text(title_link)
    if not title:
        raise UpstreamFormatError(f"melon: row {rank} has no title link in div.rank01")
    # Direct children only: span.checkEllipsis inside div.rank02 repeats every artist link.
    artist_links = row.css("div.rank02 > a") or row.css("div.rank02 span.checkEllipsis > a")
    album_link = row.css_first("div.rank03 > a")
    image = row.css_first("a.image_typeAll img")
    song_id = row.attributes.get("data-song-no")
    if not song_id:
        check = row.css_first("input.input_check")
        song_id = check.attributes.get("value") if check is not None else None
    return korea_entry(
        rank=rank,
        title=title,
        artists=[(_href_id(a), node_text(a)) for a in artist_links],
        album=node_text(album_link) or None,
        image_url=absolute_url(image.attributes.get("src") if image is not None else None),
        song_id=song_id or None,
        album_id=_href_id(album_link),
        rank_change=_rank_change(row, rank),
    )


def _rank_change(row: LexborNode, rank: int) -> int | None:
    """rank_up/rank_down carry the places in span.up/span.down (or the title "N단계 상승");
    rank_static is 0; rank_new (or no rank_wrap at all) is a new entry."""
    wrap = row.css_first("span.rank_wrap")
    if wrap is None or wrap.css_first("span.rank_new") is not None:
        return None
    if wrap.css_first("span.rank_static") is not None:
        return 0
    for bullet, amount, sign in (("span.rank_up", "span.up", 1), ("span.rank_down", "span.down", -1)):
        if wrap.css_first(bullet) is None:
            continue
        places = first_int(node_text(wrap.css_first(amount)))
        if places is None:
            places = first_int(wrap.attributes.get("title"))
        if places is None:
            raise UpstreamFormatError(f"melon: row {rank} moves without a number of places")
        return sign * places
    raise UpstreamFormatError(f"melon: row {rank} has a rank_wrap of unknown kind {wrap.html!r}")


def _chart_time(tree: LexborHTMLParser) -> tuple[str | None, int | None]:
    """(YYYY-MM-DD, hour) from `div.calendar_prid`; the first date of a range; None where not stated."""
    period = tree.css_first("div.calendar_prid")
    if period is None:
        return None, None
    date = _DATE.search(node_text(period.css_first("span.yyyymmdd")))
    if date is None:
        return None, None
    year, month, day = date.group(1), int(date.group(2)), int(date.group(3) or 1)
    hour = _HOUR.search(node_text(period.css_first("span.hhmm")))
    return f"{year}-{month:02d}-{day:02d}", int(hour.group(1)) if hour else None
