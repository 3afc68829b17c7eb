"""FLO (music-flo.com): the FLO chart (chart id 1) from the web player's JSON API (NOTES section 4).

The site is a single-page app, so there is no HTML to scrape; its browse page calls
`/api/display/v1/browser/chart/1/track/list?size=100` on the same origin. The payload has no chart
date or hour, so both stay None and the crawl time stands in. Known only from third-party code
(no raw capture exists): field paths, `code` "2000000" for success, `rank.rankBadge` signed with
positive = moved up, `rank.newYn` "Y" for a new entry.
"""

from __future__ import annotations

from typing import Any

from chartgw.store.records import KoreaEntry, ParsedChart, korea_entry
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, check_chart_type, declare_upstream
from chartgw.upstreams.fields import absolute_url
from chartgw.upstreams.json_api import (
    BROWSER_UA,
    dig,
    flag,
    load_json,
    obj,
    opt_integer,
    opt_text,
    text,
)

UPSTREAM = declare_upstream("FLO", "https://www.music-flo.com")
CHART_TYPES: tuple[str, ...] = ("all_age",)

OK_CODE = "2000000"
# The image size the browse page shows (the korea-derived capture's URLs all end /resize/140x140).
IMAGE_SIZE = 140

_PATH = "/api/display/v1/browser/chart/1/track/list"
_HEADERS: tuple[tuple[str, str], ...] = (
    ("User-Agent", BROWSER_UA),
    ("Accept", "application/json, text/plain, */*"),
    ("Accept-Language", "ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7"),
    ("Referer", "https://www.music-flo.com/browse?chartId=1"),
)


def requests_for(chart_type: str) -> list[UpstreamRequest]:
    """One GET: size=100 returns the whole chart in a single trackList."""
    check_chart_type("flo", chart_type, CHART_TYPES)
    return [UpstreamRequest(upstream=UPSTREAM, path=_PATH, params=(("size", "100"),), headers=_HEADERS)]


def parse(chart_type: str, bodies: list[bytes]) -> ParsedChart:
    """Rows of `data.trackList`; a non-"2000000" `code` is an API error, whatever HTTP status came with it."""
    check_chart_type("flo", chart_type, CHART_TYPES)
    if len(bodies) != 1:
        raise UpstreamFormatError(f"flo: expected 1 body, got {len(bodies)}")
    doc = obj(load_json(bodies[0], "flo"), "flo")
    if "code" not in doc:
        raise UpstreamFormatError(f"flo: no `code` in payload (keys {sorted(doc)[:8]})")
    code = str(doc["code"])
    if code != OK_CODE:
        message = opt_text(doc.get("message"))
        raise UpstreamFormatError(f"flo: API answered code {code}" + (f": {message}" if message else ""))
    tracks = dig(doc, "data.trackList", "flo")
    if not isinstance(tracks, list) or not tracks:
        raise UpstreamFormatError("flo: data.trackList is empty or not a list")
    return ParsedChart(entries=[_entry(pos, item) for pos, item in enumerate(tracks, start=1)])


def pick_image(images: object) -> str | None:
    """The album image URL of size 140, else the smallest one above 140, else the largest one.

    140 is what the browse page itself shows; the API lists 75/140/200/350/500/1000.
    """
    if not isinstance(images, list):
        return None
    sized: list[tuple[int, str]] = []
    unsized: list[str] = []
    for image in images:
        if not isinstance(image, dict) or not opt_text(image.get("url")):
            continue
        url = opt_text(image.get("url")) or ""
        size = image.get("size")
        if isinstance(size, int) and not isinstance(size, bool):
            sized.append((size, url))
        else:
            unsized.append(url)
    big_enough = sorted(item for item in sized if item[0] >= IMAGE_SIZE)
    if big_enough:
        return big_enough[0][1]
    if sized:
        return max(sized)[1]
    return unsized[0] if unsized else None


def _entry(position: int, item: Any) -> KoreaEntry:
    """One trackList item. All artists come from `artistList`; `representationArtist` is only the first.

    A row without `rank.rankBadge` (and not new) gets rank_change None: the change is unknown.
    """
    where = f"flo trackList[{position - 1}]"
    item = obj(item, where)
    artists = _artists(item.get("artistList"), where) or _artists([item.get("representationArtist")], where)
    if not artists:
        raise UpstreamFormatError(f"{where}: no artistList or representationArtist name")
    album = item.get("album") if isinstance(item.get("album"), dict) else {}
    rank_info = item.get("rank") if isinstance(item.get("rank"), dict) else {}
    given_rank = opt_integer(rank_info.get("rank"), f"{where}.rank.rank")
    is_new = flag(rank_info.get("newYn"))
    return korea_entry(
        rank=position if given_rank is None else given_rank,
        title=text(item.get("name"), f"{where}.name"),
        artists=artists,
        album=opt_text(album.get("title")),
        image_url=absolute_url(pick_image(album.get("imgList"))),
        song_id=opt_text(item.get("id")),
        album_id=opt_text(album.get("id")),
        rank_change=None if is_new else opt_integer(rank_info.get("rankBadge"), f"{where}.rank.rankBadge"),
    )


def _artists(items: object, where: str) -> list[tuple[str | None, str]]:
    """(id, name) of each artist object that has a name."""
    if not isinstance(items, list):
        return []
    return [
        (opt_text(a.get("id")), text(a.get("name"), f"{where} artist name"))
        for a in items
        if isinstance(a, dict) and opt_text(a.get("name"))
    ]
