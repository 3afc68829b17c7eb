"""FLO chart payloads: `code` + `data.trackList[]` as the browse page's JSON API sends them.

No raw capture exists, so the shape follows third-party parsers (NOTES section 4); the image
URLs follow the real ones in the korea-derived capture
(`.../image/v2/album/769/501/44/04/444501769_<hash>_s.jpg?<ms>/dims/resize/140x140/quality/90`:
the album id zero-padded to 10 digits, split from the right into 3/3/2/2 digits).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from chartgw.demo.samples import SampleRow
from chartgw.demo.samples.bodies import api_id, json_body, stable_hex, stable_number
from chartgw.upstreams import check_chart_type
from chartgw.upstreams.flo import CHART_TYPES, OK_CODE

# The sizes the API lists in `album.imgList`, smallest first.
IMAGE_SIZES = (75, 140, 200, 350, 500, 1000)


def image_url(album_id: str, size: int) -> str:
    """A cdn.music-flo.com album image URL in the real format, stable per album."""
    digits = album_id.zfill(10)
    folder = f"{digits[-3:]}/{digits[-6:-3]}/{digits[-8:-6]}/{digits[:-8]}"
    stamp = 1_600_000_000_000 + stable_number(album_id, "stamp") * 37
    return (
        f"https://cdn.music-flo.com/image/v2/album/{folder}/{album_id}_{stable_hex(album_id)}_s.jpg"
        f"?{stamp}/dims/resize/{size}x{size}/quality/90"
    )


def render(chart_type: str, rows: list[SampleRow[Any]], when: datetime) -> list[bytes]:
    """One payload for the single request; `when` is unused because the payload states no chart time."""
    check_chart_type("flo", chart_type, CHART_TYPES)
    payload = {"code": OK_CODE, "data": {"name": "FLO 차트", "trackList": [_item(row) for row in rows]}}
    return [json_body(payload)]


def _item(row: SampleRow[Any]) -> dict[str, object]:
    """One trackList item; `representationArtist` repeats only the first of `artistList`."""
    song = row.song
    artists = [{"id": api_id(i), "name": n} for i, n in zip(song.artist_ids, song.artists, strict=True)]
    change = row.rank_change
    return {
        "id": api_id(song.song_id),
        "name": song.title,
        "representationArtist": artists[0],
        "artistList": artists,
        "album": {
            "id": api_id(song.album_id),
            "title": song.album,
            "imgList": [{"size": size, "url": image_url(song.album_id, size)} for size in IMAGE_SIZES],
        },
        "rank": {"rankBadge": 0 if change is None else change, "newYn": "Y" if change is None else "N"},
    }
