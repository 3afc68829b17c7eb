"""Genie (genie.co.kr): the TOP 200 web chart page, plus the Genie app's JSON chart API.

Web (`requests_for` / `parse`): `GET /chart/top200?ditc=D&rtm=Y|N` / `ditc=W&rtm=N`, 50 rows a page, so pages
`pg=1` and `pg=2` make the top 100. Row markup from real HTML pasted in several projects (no full page was
captured): `tr.list[songid]`, rank = first text node of `td.number`, change in `span.rank-up|rank-down|rank-none`
(number + hidden word), `a.cover` with `fnViewAlbumLayer('<albumId>')` and a protocol-relative img,
`a.title` / `a.artist` (`fnViewArtist('<id>')`) / `a.albumtitle` in `td.info`.
- New entries: no sample shows them; a `rank-new` span, any other marker, or no marker at all reads as new.
- `a.title` may carry badges `<span class="icon icon-title">TITLE</span>`: spans whose class is `icon`/`icon-*`
  are dropped. `span.t_point` is NOT dropped: in the only markup seen (a Genie search-page test) it wraps part of
  the title itself (`<span class="t_point">How We Came</span> (Feat. pH-1)`), so it is read as text.
- Artists: the page prints all credited artists as ONE `a.artist` ("Marshmello & Anne-Marie") with the first
  artist's id only (the rest load by AJAX behind the "외" button). We keep that text as it is: artist = text,
  artists = [text], artist_ids = [that id]. Several `a.artist` elements, if a page ever has them, give one each.
- The page's chart date/hour markup is unknown, so chart_date/chart_hour stay None.

App (`requests_for_app` / `parse_app`): POST form to app.genie.co.kr (upstream "GENIE_APP"), JSON
`Result.RetCode/RetMsg`, `PageInfo.ChartTime`, `DataSet.DATA[]` of strings with percent-encoded names/paths.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from selectolax.lexbor import LexborNode

from chartgw.store.records import KoreaEntry, ParsedChart, korea_entry
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, check_chart_type, declare_upstream
from chartgw.upstreams.fields import (
    Page,
    absolute_url,
    clean,
    first_int,
    has_class,
    js_arg,
    node_text,
    parse_pages,
    required,
)

UPSTREAM = declare_upstream("GENIE", "https://www.genie.co.kr")
UPSTREAM_APP = declare_upstream("GENIE_APP", "https://app.genie.co.kr")
"""The app API lives on another origin (https://app.genie.co.kr), so it has its own override name."""
CHART_TYPES: tuple[str, ...] = ("realtime", "daily", "weekly")

PAGES = 2
PAGE_SIZE = 50
APP_PAGE_SIZE = 100

_SOURCE_PARAMS: dict[str, tuple[tuple[str, str], ...]] = {
    "realtime": (("ditc", "D"), ("rtm", "Y")),
    "daily": (("ditc", "D"), ("rtm", "N")),
    "weekly": (("ditc", "W"), ("rtm", "N")),
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
_APP_HEADERS: tuple[tuple[str, str], ...] = (("Content-Type", "application/x-www-form-urlencoded"),)


def requests_for(chart_type: str) -> list[UpstreamRequest]:
    """The two top200 pages (ranks 1-50, 51-100) of the current chart, as a browser asks for them."""
    check_chart_type("Genie", chart_type, CHART_TYPES)
    return [
        UpstreamRequest(
            upstream=UPSTREAM,
            path="/chart/top200",
            params=(*_SOURCE_PARAMS[chart_type], ("pg", str(page))),
            headers=_BROWSER_HEADERS,
        )
        for page in range(1, PAGES + 1)
    ]


# --- web page ---------------------------------------------------------------------------------------------


def _title(row: LexborNode, where: str) -> str:
    """`a.title` text without icon badges (TITLE, 19금...); the title attribute is only "재생", not the name."""
    link = row.css_first("a.title")
    if link is None:
        raise UpstreamFormatError(f"{where}: no a.title")
    for span in link.css("span"):
        classes = (span.attributes.get("class") or "").split()
        if any(c == "icon" or c.startswith("icon-") for c in classes):
            span.decompose()
    return required(node_text(link), "title text", where)


def _rank_change(row: LexborNode, where: str) -> int | None:
    """+n for rank-up, -n for rank-down, 0 for rank-none; None (new entry) for rank-new or anything else."""
    marker = row.css_first("span.rank-up, span.rank-down, span.rank-none, span.rank-new")
    if marker is None or has_class(marker, "rank-new"):
        return None
    if has_class(marker, "rank-none"):
        return 0
    amount = first_int(marker.text(deep=False))
    if amount is None:
        amount = first_int(marker.text())
    amount = required(amount, "number in the rank-up/rank-down marker", where)
    return amount if has_class(marker, "rank-up") else -amount


def _row(row: LexborNode, where: str) -> KoreaEntry:
    number = row.css_first("td.number")
    if number is None:
        raise UpstreamFormatError(f"{where}: no td.number")
    rank = required(first_int(number.text(deep=False)), "rank (first text of td.number)", where)
    where = f"{where} (rank {rank})"
    title = _title(row, where)

    album_link = row.css_first("a.albumtitle")
    cover = row.css_first("a.cover")
    image = row.css_first("a.cover img")
    album_id = js_arg(cover.attributes.get("onclick") if cover else None, "fnViewAlbumLayer") or js_arg(
        album_link.attributes.get("onclick") if album_link else None, "fnViewAlbumLayer"
    )
    return korea_entry(
        rank=rank,
        title=title,
        artists=[(js_arg(a.attributes.get("onclick"), "fnViewArtist"), node_text(a)) for a in row.css("a.artist")],
        album=node_text(album_link) or None,
        image_url=absolute_url(image.attributes.get("src") if image else None),
        song_id=row.attributes.get("songid") or None,
        album_id=album_id,
        rank_change=_rank_change(row, where),
    )


def parse(chart_type: str, bodies: list[bytes]) -> ParsedChart:
    """Rows of every page in order; a page without `tr.list[songid]` rows is not a chart page."""
    entries: list[KoreaEntry] = []

    def no_rows(page: Page) -> str:
        return f"Genie {chart_type} page {page.number}: no tr.list[songid] rows (not a chart page)"

    for page in parse_pages("Genie", chart_type, CHART_TYPES, bodies, "tr.list[songid]", no_rows):
        entries.extend(_row(row, f"Genie {chart_type} page {page.number}") for row in page.rows)
    return ParsedChart(entries=entries)


# --- app JSON API -----------------------------------------------------------------------------------------


def requests_for_app(chart_type: str) -> list[UpstreamRequest]:
    """One POST for the top 100 from the app API.

    Realtime: `/chart/j_RealTimeRankSongList.json` (form pg, pgSize); daily/weekly: `/chart/j_RankSongList.json`
    (form ditc=D|W, pg, pgSize). Projects send pgSize=200 (realtime) or page with pgSize=25; 100 is our choice.
    """
    check_chart_type("Genie", chart_type, CHART_TYPES)
    page = (("pg", "1"), ("pgSize", str(APP_PAGE_SIZE)))
    form: tuple[tuple[str, str], ...]
    if chart_type == "realtime":
        path, form = "/chart/j_RealTimeRankSongList.json", page
    else:
        path, form = "/chart/j_RankSongList.json", (("ditc", "D" if chart_type == "daily" else "W"), *page)
    return [UpstreamRequest(upstream=UPSTREAM_APP, path=path, method="POST", headers=_APP_HEADERS, form=form)]


def _field(item: dict[str, Any], key: str) -> str:
    """A DATA[] string field, percent-decoded ("AKMU %28악뮤%29" → "AKMU (악뮤)") and whitespace-cleaned."""
    value = item.get(key)
    return clean(unquote(str(value))) if value is not None else ""


def _app_change(item: dict[str, Any], rank: int) -> int | None:
    """PRE_RANK_NO - RANK_NO. ASSUMPTION (no captured new entry): PRE_RANK_NO "0", empty or absent = new entry."""
    previous = first_int(str(item.get("PRE_RANK_NO") or ""))
    return None if not previous else previous - rank


def _app_item(item: Any, where: str) -> KoreaEntry:
    if not isinstance(item, dict):
        raise UpstreamFormatError(f"{where}: DATA element is not an object")
    rank = required(first_int(str(item.get("RANK_NO") or "")), "RANK_NO", where)
    where = f"{where} (rank {rank})"
    return korea_entry(
        rank=rank,
        title=required(_field(item, "SONG_NAME"), "SONG_NAME", where),
        artists=[(_field(item, "ARTIST_ID"), _field(item, "ARTIST_NAME"))],
        album=_field(item, "ALBUM_NAME") or None,
        image_url=absolute_url(_field(item, "ALBUM_IMG_PATH") or _field(item, "THUMBNAIL_IMG_PATH")),
        song_id=_field(item, "SONG_ID") or None,
        album_id=_field(item, "ALBUM_ID") or None,
        rank_change=_app_change(item, rank),
    )


def parse_app(chart_type: str, bodies: list[bytes]) -> ParsedChart:
    """App API bodies → entries; chart_hour from `PageInfo.ChartTime` ("HH:MM") for the realtime chart only."""
    check_chart_type("Genie", chart_type, CHART_TYPES)
    if not bodies:
        raise UpstreamFormatError("Genie app: no bodies to parse")
    entries: list[KoreaEntry] = []
    chart_hour: int | None = None
    for page, body in enumerate(bodies, start=1):
        where = f"Genie app {chart_type} body {page}"
        try:
            payload = json.loads(body.decode("utf-8", errors="replace"))
        except ValueError as exc:
            raise UpstreamFormatError(f"{where}: not JSON ({exc})") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("Result"), dict):
            raise UpstreamFormatError(f"{where}: no Result object")
        result = payload["Result"]
        if str(result.get("RetCode")) != "0":
            raise UpstreamFormatError(f"{where}: RetCode {result.get('RetCode')!r}: {result.get('RetMsg')!r}")
        dataset = payload.get("DataSet")
        data = dataset.get("DATA") if isinstance(dataset, dict) else None
        if not isinstance(data, list) or not data:
            raise UpstreamFormatError(f"{where}: DataSet.DATA missing or empty")
        entries.extend(_app_item(item, where) for item in data)
        page_info = payload.get("PageInfo")
        chart_time = page_info.get("ChartTime") if isinstance(page_info, dict) and chart_type == "realtime" else None
        if chart_hour is None and isinstance(chart_time, str) and ":" in chart_time:
            chart_hour = first_int(chart_time.split(":", 1)[0])
    return ParsedChart(entries=entries, chart_hour=chart_hour)
