"""VIBE (vibe.naver.com): track charts from the Naver music API on apis.naver.com (NOTES section 5).

Trap: the same URL answers XML unless the request says `Accept: application/json`, with the same
names as child elements (`response > result > chart > items > tracks > track`, lists wrapped as
`artists > artist`). We always ask for JSON but `parse` reads both, telling them apart by the
first non-space byte. Each track also carries its album's own `artists`, which are not the
track's artists: only the track's direct `artists` are read.
Known only from third-party code (no raw capture exists): every field path, `chart.date` as
epoch milliseconds, `rank.rankVariation` signed with positive = moved up.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from chartgw.store.records import KoreaEntry, ParsedChart, korea_entry
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, check_chart_type, declare_upstream
from chartgw.upstreams.fields import absolute_url, decode, snippet
from chartgw.upstreams.json_api import (
    BROWSER_UA,
    dig,
    flag,
    integer,
    kst_date_hour,
    load_json,
    looks_like_markup,
    obj,
    opt_integer,
    opt_text,
    text,
)

UPSTREAM = declare_upstream("VIBE", "https://apis.naver.com")
CHART_TYPES: tuple[str, ...] = ("daily_top100", "domestic_rising", "oversea_rising")

# chart_type -> the API's chart segment ("오늘 Top 100", "국내 급상승", "해외 급상승").
SEGMENTS: dict[str, str] = {"daily_top100": "total", "domestic_rising": "domestic", "oversea_rising": "oversea"}

_BASE = "/vibeWeb/musicapiweb/vibe/v1/chart/track/"
# A cross-origin fetch from the web player: browsers send only the origin as Referer.
_HEADERS: tuple[tuple[str, str], ...] = (
    ("User-Agent", BROWSER_UA),
    ("Accept", "application/json"),
    ("Accept-Language", "ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7"),
    ("Origin", "https://vibe.naver.com"),
    ("Referer", "https://vibe.naver.com/"),
)
# Entity declarations are the XML bomb vector; the API never sends a DTD, so any is refused.
_DTD = re.compile(rb"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)


def requests_for(chart_type: str) -> list[UpstreamRequest]:
    """One GET per chart: display=100 returns all rows at once."""
    path = _BASE + SEGMENTS[check_chart_type("vibe", chart_type, CHART_TYPES)]
    return [
        UpstreamRequest(
            upstream=UPSTREAM, path=path, params=(("start", "1"), ("display", "100")), headers=_HEADERS
        )
    ]


def parse(chart_type: str, bodies: list[bytes]) -> ParsedChart:
    """Rows of `response.result.chart.items.tracks` from a JSON or XML body; the chart time from `chart.date`."""
    check_chart_type("vibe", chart_type, CHART_TYPES)
    if len(bodies) != 1:
        raise UpstreamFormatError(f"vibe: expected 1 body, got {len(bodies)}")
    body = bodies[0]
    chart = _xml_chart(body) if looks_like_markup(body) else _json_chart(body)
    tracks = chart.get("tracks")
    if not isinstance(tracks, list) or not tracks:
        raise UpstreamFormatError(f"vibe {chart_type}: chart.items.tracks is empty or not a list")
    chart_date: str | None = None
    chart_hour: int | None = None
    epoch_ms = opt_integer(chart.get("date"), "vibe chart.date")
    if epoch_ms is not None:
        chart_date, chart_hour = kst_date_hour(epoch_ms)
    entries = [_entry(index, track) for index, track in enumerate(tracks)]
    return ParsedChart(entries=entries, chart_date=chart_date, chart_hour=chart_hour)


def _json_chart(body: bytes) -> dict[str, Any]:
    """{"date", "tracks"} from the JSON form; `result: null` (the API's error shape) is an error."""
    doc = obj(load_json(body, "vibe"), "vibe")
    chart = obj(dig(doc, "response.result.chart", "vibe"), "vibe.response.result.chart")
    items = obj(dig(chart, "items", "vibe.response.result.chart"), "vibe.response.result.chart.items")
    return {"date": chart.get("date"), "tracks": items.get("tracks")}


def _xml_chart(body: bytes) -> dict[str, Any]:
    """{"date", "tracks"} from the XML form, each track turned into the JSON form's dict shape."""
    if _DTD.search(body):
        raise UpstreamFormatError(f"vibe: markup with a DOCTYPE/ENTITY is not the chart XML: {snippet(decode(body))!r}")
    try:
        root = ET.fromstring(body.lstrip())  # expat refuses whitespace before <?xml
    except ET.ParseError as exc:
        raise UpstreamFormatError(f"vibe: body is neither JSON nor well-formed XML ({exc})") from None
    if root.tag != "response":
        raise UpstreamFormatError(f"vibe: XML root is <{root.tag}>, not <response>")
    chart = root.find("result/chart")
    if chart is None:
        raise UpstreamFormatError(f"vibe: no response/result/chart in XML: {snippet(decode(body))!r}")
    tracks = chart.find("items/tracks")
    if tracks is None:
        raise UpstreamFormatError("vibe: no chart/items/tracks in XML")
    return {"date": chart.findtext("date"), "tracks": [_xml_track(t) for t in tracks.findall("track")]}


def _xml_track(track: ET.Element) -> dict[str, Any]:
    """The JSON shape of one <track> (direct children only, so album/artists never leak in)."""
    album = track.find("album")
    rank = track.find("rank")
    return {
        "trackId": track.findtext("trackId"),
        "trackTitle": track.findtext("trackTitle"),
        "artists": [
            {"artistId": a.findtext("artistId"), "artistName": a.findtext("artistName")}
            for a in track.findall("artists/artist")
        ],
        "album": None
        if album is None
        else {k: album.findtext(k) for k in ("albumId", "albumTitle", "imageUrl")},
        "rank": None
        if rank is None
        else {k: rank.findtext(k) for k in ("currentRank", "rankVariation", "isNew")},
    }


def _entry(index: int, track: Any) -> KoreaEntry:
    """One track. A new entry has rankVariation 0 and isNew true: its change is None, not 0."""
    where = f"vibe tracks[{index}]"
    track = obj(track, where)
    rank_info = obj(track.get("rank"), f"{where}.rank")
    artists = [
        (opt_text(a.get("artistId")), text(a.get("artistName"), f"{where}.artists[].artistName"))
        for a in track.get("artists") or []
        if isinstance(a, dict)
    ]
    if not artists:
        raise UpstreamFormatError(f"{where}: no artists")
    album = track.get("album") if isinstance(track.get("album"), dict) else {}
    is_new = flag(rank_info.get("isNew"))
    return korea_entry(
        rank=integer(rank_info.get("currentRank"), f"{where}.rank.currentRank"),
        title=text(track.get("trackTitle"), f"{where}.trackTitle"),
        artists=artists,
        album=opt_text(album.get("albumTitle")),
        image_url=absolute_url(opt_text(album.get("imageUrl"))),
        song_id=opt_text(track.get("trackId")),
        album_id=opt_text(album.get("albumId")),
        rank_change=None if is_new else opt_integer(rank_info.get("rankVariation"), f"{where}.rank.rankVariation"),
    )
