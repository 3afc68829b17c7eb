"""Bugs (music.bugs.co.kr): the track chart web pages, one request of 100 rows each.

URLs: realtime `/chart/track/realtime/total`, daily `/chart/track/day/total` (both in many projects); weekly
`/chart/track/week/total` is a GUESS by analogy (no code seen requests a weekly HTML page; only the mobile
API's `period_tp=week` is known).
Row markup from real HTML printed in a notebook (~2020) and in project tests: `table.trackList` rows
`tr[rowType="track"]` with camelCase `trackId`/`albumId`/`artistId`/`multiArtist` attributes (lexbor lowercases
them, so selectors use `rowtype`, `trackid`...), rank `div.ranking > strong`, change `p.change.up|down|none > em`,
`a.thumbnail img`, `p.title a` (title attribute / text), `p.artist a`, `a.album`.
- New entries: `p.change.new` (class not seen in a capture) and any unknown change class read as new. The one
  other class seen, `p.change.duration <em>6일</em>` (on a rank 1 row of a daily chart), is read as "held the
  place" (0) — an unverified reading.
- Artists: one `a` per artist in `p.artist`; a multiArtist="Y" row that shows one `a` keeps its text as one
  artist (we do not split names on commas or "&", which belong to some names). Ids from each link's
  `/artist/<id>`, else the row's `artistId`.
- Chart date: `time[datetime]` "YYYY.MM.DD[ HH:MM]" (code-only: one TS parser reads it); the hour only counts
  for the realtime chart. None when the page has no such element.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborNode

from chartgw.store.records import KoreaEntry, ParsedChart, korea_entry
from chartgw.upstreams import UpstreamRequest, check_chart_type, declare_upstream
from chartgw.upstreams.fields import (
    Page,
    absolute_url,
    clean,
    dotted_date,
    first_int,
    has_class,
    node_text,
    parse_pages,
    required,
)

UPSTREAM = declare_upstream("BUGS", "https://music.bugs.co.kr")
CHART_TYPES: tuple[str, ...] = ("realtime", "daily", "weekly")

PATHS: dict[str, str] = {
    "realtime": "/chart/track/realtime/total",
    "daily": "/chart/track/day/total",
    "weekly": "/chart/track/week/total",  # guess, see the module docstring
}
_BROWSER_HEADERS: tuple[tuple[str, str], ...] = (
    (
        "User-Agent",
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/124.0.0.0 Safari/537.36",
    ),
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    ("Accept-Language", "ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7"),
)
_ARTIST_HREF = re.compile(r"/artist/(\d+)")


def requests_for(chart_type: str) -> list[UpstreamRequest]:
    """The chart page of the current chart (no `chartdate` parameter = the latest one)."""
    check_chart_type("Bugs", chart_type, CHART_TYPES)
    return [UpstreamRequest(upstream=UPSTREAM, path=PATHS[chart_type], headers=_BROWSER_HEADERS)]


def _rank_change(row: LexborNode, where: str) -> int | None:
    """up → +em, down → -em, none → 0, duration → 0 (see docstring), new or anything else → None."""
    marker = row.css_first("div.ranking p.change")
    if marker is None:
        return None
    if has_class(marker, "none") or has_class(marker, "duration"):
        return 0
    if has_class(marker, "up") or has_class(marker, "down"):
        amount = required(first_int(node_text(marker.css_first("em"))), "number in p.change > em", where)
        return amount if has_class(marker, "up") else -amount
    return None


def _artists(row: LexborNode) -> list[tuple[str | None, str]]:
    """(id, name) from each named `p.artist a` (one link per artist), else the text of `p.artist`;
    when no link gives an id, the row's artistId is the first artist's."""
    pairs: list[tuple[str | None, str]] = []
    for link in row.css("p.artist a"):
        name = node_text(link) or clean(link.attributes.get("title"))
        if name:
            match = _ARTIST_HREF.search(link.attributes.get("href") or "")
            pairs.append((match.group(1) if match else None, name))
    if not pairs:
        pairs = [(None, node_text(row.css_first("p.artist")))]
    if not any(artist_id for artist_id, _ in pairs) and row.attributes.get("artistid"):
        pairs[0] = (row.attributes["artistid"], pairs[0][1])
    return pairs


def _row(row: LexborNode, where: str) -> KoreaEntry:
    rank = required(first_int(node_text(row.css_first("div.ranking > strong"))), "rank (div.ranking > strong)", where)
    where = f"{where} (rank {rank})"
    title_link = row.css_first("p.title a")
    title = clean(title_link.attributes.get("title")) if title_link else ""
    title = required(title or node_text(title_link) or node_text(row.css_first("p.title")), "title (p.title a)", where)
    album_link = row.css_first("a.album")
    album = (clean(album_link.attributes.get("title")) or node_text(album_link)) if album_link else ""
    image = row.css_first("a.thumbnail img") or row.css_first("img")
    return korea_entry(
        rank=rank,
        title=title,
        artists=_artists(row),
        album=album or None,
        image_url=absolute_url(image.attributes.get("src") if image else None),
        song_id=row.attributes.get("trackid") or None,
        album_id=row.attributes.get("albumid") or None,
        rank_change=_rank_change(row, where),
    )


def parse(chart_type: str, bodies: list[bytes]) -> ParsedChart:
    """The chart rows and, when the page has `time[datetime]`, its date (and hour for realtime)."""
    entries: list[KoreaEntry] = []
    chart_date: str | None = None
    chart_hour: int | None = None
    rows_css = 'table.trackList tr[rowtype="track"]'

    def no_rows(page: Page) -> str:
        return f'Bugs {chart_type} body {page.number}: no table.trackList tr[rowType="track"] rows (not a chart page)'

    for page in parse_pages("Bugs", chart_type, CHART_TYPES, bodies, rows_css, no_rows):
        entries.extend(_row(row, f"Bugs {chart_type} body {page.number}") for row in page.rows)
        stamp = page.tree.css_first("time[datetime]")
        stated = dotted_date(stamp.attributes.get("datetime")) if stamp is not None else None
        if stated and chart_date is None:
            chart_date = stated[0]
            chart_hour = stated[1] if chart_type == "realtime" else None
    return ParsedChart(entries=entries, chart_date=chart_date, chart_hour=chart_hour)
