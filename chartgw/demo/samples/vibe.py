"""VIBE chart payloads in both forms the API answers: JSON (`render`) and XML (`render_xml`).

No raw capture exists, so the shape follows third-party parsers (NOTES section 5). The XML form
has the same names as child elements, lists wrapped (`artists > artist`). Each track's album
carries its own `artists` (the album's main artist), a trap for parsers that search descendants.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime
from typing import Any

from chartgw.demo.samples import SampleRow
from chartgw.demo.samples.bodies import api_id, json_body
from chartgw.upstreams import check_chart_type
from chartgw.upstreams.vibe import CHART_TYPES

TITLES: dict[str, str] = {
    "daily_top100": "오늘 Top 100",
    "domestic_rising": "국내 급상승",
    "oversea_rising": "해외 급상승",
}


def image_url(album_id: str, when: datetime) -> str:
    """A musicmeta-phinf.pstatic.net album image URL in the real format (`album/032/261/32261031.jpg`)."""
    number = int(album_id)
    folder = f"{number // 1_000_000:03d}/{number // 1000 % 1000:03d}"
    return f"https://musicmeta-phinf.pstatic.net/album/{folder}/{album_id}.jpg?type=r500Fll&v={when:%Y%m%d%H%M%S}"


def render(chart_type: str, rows: list[SampleRow[Any]], when: datetime) -> list[bytes]:
    """The JSON answer (what `Accept: application/json` gets); `chart.date` is `when` in epoch ms."""
    return [json_body({"response": {"result": {"chart": _chart(chart_type, rows, when)}}})]


def render_xml(chart_type: str, rows: list[SampleRow[Any]], when: datetime) -> list[bytes]:
    """The XML answer the same URL gives without `Accept: application/json`."""
    root = ET.Element("response")
    _to_xml(ET.SubElement(root, "result"), "chart", _chart(chart_type, rows, when))
    return [b'<?xml version="1.0" encoding="UTF-8"?>' + ET.tostring(root, encoding="unicode").encode("utf-8")]


def _chart(chart_type: str, rows: list[SampleRow[Any]], when: datetime) -> dict[str, Any]:
    check_chart_type("vibe", chart_type, CHART_TYPES)
    return {
        "title": TITLES[chart_type],
        "date": int(when.timestamp() * 1000),
        "chartTotalCount": len(rows),
        "items": {"tracks": [_track(row, when) for row in rows]},
    }


def _track(row: SampleRow[Any], when: datetime) -> dict[str, Any]:
    """One track; a new entry has rankVariation 0 and isNew true, as the API marks it."""
    song = row.song
    artists = [
        {"artistId": api_id(i), "artistName": n} for i, n in zip(song.artist_ids, song.artists, strict=True)
    ]
    return {
        "trackId": api_id(song.song_id),
        "trackTitle": song.title,
        "artists": artists,
        "album": {
            "albumId": api_id(song.album_id),
            "albumTitle": song.album,
            "imageUrl": image_url(song.album_id, when),
            "artists": artists[:1],
        },
        "rank": {
            "currentRank": row.rank,
            "rankVariation": row.rank_change or 0,
            "isNew": row.rank_change is None,
        },
    }


# Element names of list items: the XML wraps each JSON list in its plural element.
_ITEM_TAGS = {"tracks": "track", "artists": "artist"}


def _to_xml(parent: ET.Element, tag: str, value: Any) -> None:
    """Write a JSON value as XML child elements (booleans as true/false, lists as repeated items)."""
    node = ET.SubElement(parent, tag)
    if isinstance(value, dict):
        for key, child in value.items():
            _to_xml(node, key, child)
    elif isinstance(value, list):
        for child in value:
            _to_xml(node, _ITEM_TAGS[tag], child)
    elif isinstance(value, bool):
        node.text = "true" if value else "false"
    else:
        node.text = str(value)
