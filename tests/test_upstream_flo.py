"""FLO chart API: request shape, parser on hand-made payloads in the real format, renderer round trip.

There is no raw FLO capture; korea-derived/woogamjaa_flo100_1-1-2026.json is a project's parsed
output of the real chart, used here for real names and the real image URL format.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from chartgw.demo.samples import flo as flo_samples
from chartgw.demo.samples import sample_rows
from chartgw.upstreams import UpstreamFormatError, flo
from chartgw.upstreams.json_api import KST

WHEN = datetime(2026, 1, 1, 15, 5, tzinfo=KST)
CAPTURE = "korea-derived/woogamjaa_flo100_1-1-2026.json"
# The real URL shape: album id zero-padded to 10 digits, split from the right as 3/3/2/2 folders.
IMAGE_URL = re.compile(
    r"https://cdn\.music-flo\.com/image/v2/album/(\d{3})/(\d{3})/(\d{2})/(\d{2})/(\d+)_[0-9a-f]+_s\.jpg"
    r"\?\d{13}/dims/resize/140x140/quality/90"
)
REAL_URL_1 = (
    "https://cdn.music-flo.com/image/v2/album/769/501/44/04/444501769_186e4634b49961b6_s.jpg"
    "?1760421698927/dims/resize/140x140/quality/90"
)


def _item(
    name: str,
    artists: list[tuple[int, str]],
    *,
    album: tuple[int, str] = (444501769, "Good Goodbye"),
    badge: int = 0,
    new: str = "N",
    images: list[dict[str, Any]] | None = None,
    rank: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A trackList item in the API's shape (field names from NOTES section 4)."""
    people = [{"id": i, "name": n} for i, n in artists]
    return {
        "id": 500000000 + len(name),
        "name": name,
        "representationArtist": people[0] if people else None,
        "artistList": people,
        "album": {
            "id": album[0],
            "title": album[1],
            "releaseYmd": "20251014",
            "imgList": images if images is not None else [{"size": 140, "url": REAL_URL_1}],
        },
        "rank": rank if rank is not None else {"rankBadge": badge, "newYn": new},
    }


def _body(items: list[dict[str, Any]], code: str = "2000000") -> list[bytes]:
    return [json.dumps({"code": code, "data": {"name": "FLO 차트", "trackList": items}}, ensure_ascii=False).encode()]


def test_request_is_the_browse_page_api_call() -> None:
    (request,) = flo.requests_for("all_age")
    assert request.upstream == "FLO"
    assert request.path == "/api/display/v1/browser/chart/1/track/list"
    assert request.params == (("size", "100"),)
    headers = dict(request.headers)
    assert headers["Referer"] == "https://www.music-flo.com/browse?chartId=1"
    assert headers["User-Agent"].startswith("Mozilla/5.0")
    assert "application/json" in headers["Accept"]
    with pytest.raises(ValueError):
        flo.requests_for("realtime")


def test_rows_from_real_names_korean_and_latin() -> None:
    body = _body(
        [
            _item("Good Goodbye", [(80001, "화사 (HWASA)")], badge=2),
            _item(
                "사랑은 늘 도망가", [(80002, "임영웅")], album=(406716973, "신사와 아가씨 OST Part.2"), badge=-1
            ),
            _item("  Drowning \n", [(80003, " WOODZ ")], album=(411666413, "OO-LI")),
        ]
    )
    chart = flo.parse("all_age", body)
    assert chart.chart_date is None and chart.chart_hour is None
    first, second, third = chart.entries
    assert (first.rank, first.title, first.artist, first.album) == (1, "Good Goodbye", "화사 (HWASA)", "Good Goodbye")
    assert first.song_id == "500000012" and first.album_id == "444501769" and first.artist_ids == ["80001"]
    assert first.image_url == REAL_URL_1
    assert (first.rank_change, first.rank_status) == (2, "up")
    assert (second.rank, second.title, second.album) == (2, "사랑은 늘 도망가", "신사와 아가씨 OST Part.2")
    assert (second.rank_change, second.rank_status) == (-1, "down")
    assert (third.title, third.artist, third.rank_change, third.rank_status) == ("Drowning", "WOODZ", 0, "same")


def test_all_artists_come_from_artist_list_not_representation_artist() -> None:
    item = _item("APT.", [(3001, "로제 (ROSÉ)"), (3002, "Bruno Mars")], album=(18271147, "APT."))
    assert item["representationArtist"]["name"] == "로제 (ROSÉ)"
    (row,) = flo.parse("all_age", _body([item])).entries
    assert row.artists == ["로제 (ROSÉ)", "Bruno Mars"]
    assert row.artist == "로제 (ROSÉ), Bruno Mars"
    assert row.artist_ids == ["3001", "3002"]


def test_representation_artist_is_the_fallback() -> None:
    item = _item("Seven (feat. Latto)", [(7001, "정국")])
    item["artistList"] = []
    (row,) = flo.parse("all_age", _body([item])).entries
    assert (row.artist, row.artist_ids) == ("정국", ["7001"])


def test_new_entry_is_none_even_with_badge_zero() -> None:
    entries = flo.parse("all_age", _body([_item("A", [(1, "B")], new="Y"), _item("C", [(2, "D")], new="N")])).entries
    assert (entries[0].rank_change, entries[0].rank_status) == (None, "new")
    assert (entries[1].rank_change, entries[1].rank_status) == (0, "same")


def test_rank_rank_wins_over_position() -> None:
    items = [
        _item("A", [(1, "B")], rank={"rank": 7, "rankBadge": 3, "newYn": "N"}),
        _item("C", [(2, "D")], rank={"rankBadge": 1, "newYn": "N"}),
    ]
    entries = flo.parse("all_age", _body(items)).entries
    assert [e.rank for e in entries] == [7, 2]


@pytest.mark.parametrize(
    ("sizes", "wanted"),
    [((75, 140, 200, 350, 500, 1000), 140), ((1000, 350, 200, 75), 200), ((75, 100), 100), ((500,), 500)],
)
def test_image_prefers_140_then_smallest_above(sizes: tuple[int, ...], wanted: int) -> None:
    images = [{"size": s, "url": f"//cdn.music-flo.com/x_s.jpg/dims/resize/{s}x{s}/quality/90"} for s in sizes]
    (row,) = flo.parse("all_age", _body([_item("A", [(1, "B")], images=images)])).entries
    assert row.image_url == f"https://cdn.music-flo.com/x_s.jpg/dims/resize/{wanted}x{wanted}/quality/90"


def test_missing_images_give_none() -> None:
    (row,) = flo.parse("all_age", _body([_item("A", [(1, "B")], images=[])])).entries
    assert row.image_url is None


def test_error_code_is_reported_with_its_message() -> None:
    payload = {"code": "4000001", "message": "잘못된 요청입니다.", "data": None}
    body = json.dumps(payload, ensure_ascii=False).encode()
    with pytest.raises(UpstreamFormatError, match=r"4000001.*잘못된 요청입니다"):
        flo.parse("all_age", [body])


@pytest.mark.parametrize(
    "body",
    [
        b"<!DOCTYPE html><html><head><title>FLO</title></head><body>\xec\x98\xa4\xeb\xa5\x98</body></html>",
        b"",
        b"{}",
        b'{"code":"2000000","data":null}',
        b'{"code":"2000000","data":{"name":"FLO \xec\xb0\xa8\xed\x8a\xb8","trackList":[]}}',
        b'{"code":"2000000","data":{"trackList":[{"id":1,"name":"","artistList":[{"id":2,"name":"X"}]}]}}',
        b'{"code":"2000000","data":{"trackList":[{"id":1,"name":"T","artistList":[]}]}}',
        b'{"code":"2000000","data":{"trackList":[{"id":1,"name":"T","artistList":[{"name":"X"}],'
        b'"rank":{"rank":"first"}}]}}',
    ],
    ids=["html", "empty", "no-code", "no-data", "no-rows", "no-title", "no-artist", "bad-rank"],
)
def test_not_a_chart_raises(body: bytes) -> None:
    with pytest.raises(UpstreamFormatError):
        flo.parse("all_age", [body])


def test_exactly_one_body() -> None:
    with pytest.raises(UpstreamFormatError):
        flo.parse("all_age", [])


@pytest.mark.parametrize("variant", [0, 1])
def test_rendered_payload_round_trips(variant: int) -> None:
    rows = sample_rows("flo", "all_age", variant=variant)
    chart = flo.parse("all_age", flo_samples.render("all_age", rows, WHEN))
    assert chart.chart_date is None and chart.chart_hour is None
    assert len(chart.entries) == len(rows) == 100
    for row, got in zip(rows, chart.entries, strict=True):
        song = row.song
        assert (got.rank, got.title, got.artists, got.album) == (row.rank, song.title, list(song.artists), song.album)
        assert (got.song_id, got.album_id, got.artist_ids) == (song.song_id, song.album_id, list(song.artist_ids))
        assert got.rank_change == row.rank_change
        assert got.artist == ", ".join(song.artists)
    assert any(len(e.artists) > 1 for e in chart.entries)
    new = sum(row.previous_rank is None for row in rows)
    assert new > 0 and sum(e.rank_status == "new" for e in chart.entries) == new


def test_rendered_image_url_has_the_real_shape() -> None:
    assert flo_samples.image_url("444501769", 140).startswith(
        "https://cdn.music-flo.com/image/v2/album/769/501/44/04/444501769_"
    )
    rows = sample_rows("flo", "all_age")
    chart = flo.parse("all_age", flo_samples.render("all_age", rows, WHEN))
    for entry in chart.entries:
        match = IMAGE_URL.fullmatch(entry.image_url or "")
        assert match, entry.image_url
        assert "".join(match.groups()[3::-1]).lstrip("0") == entry.album_id


def test_capture_image_urls_share_the_rendered_shape(shared_upstream: Path) -> None:
    """The real 2026 URLs follow the same pattern, including the id-to-folder split."""
    rows = json.loads((shared_upstream / CAPTURE).read_text("utf-8"))
    assert len(rows) == 100
    assert (rows[0]["rank"], rows[0]["title"], rows[0]["artist"]) == ("1", "Good Goodbye", "화사 (HWASA)")
    assert rows[0]["imageURL"] == REAL_URL_1
    real = [r["imageURL"] for r in rows if r["imageURL"].startswith("https://")]
    assert len(real) == 5  # the page lazy-loads images: ranks 6-100 hold a data: placeholder
    for url in real:
        match = IMAGE_URL.fullmatch(url)
        assert match, url
        folders, album_id = match.groups()[:4], match.group(5)
        assert "".join(reversed(folders)) == album_id.zfill(10)


def test_capture_rows_parse_from_a_payload_built_of_them(shared_upstream: Path) -> None:
    """Real titles, artists, albums and image URLs survive the parser unchanged."""
    rows = json.loads((shared_upstream / CAPTURE).read_text("utf-8"))
    items = [
        _item(r["title"], [(900 + n, r["artist"])], album=(n, r["album"]), images=[{"size": 140, "url": r["imageURL"]}])
        for n, r in enumerate(rows, start=1)
    ]
    chart = flo.parse("all_age", _body(items))
    assert [(e.rank, e.title, e.artist, e.album) for e in chart.entries] == [
        (int(r["rank"]), r["title"], r["artist"], r["album"]) for r in rows
    ]
    assert chart.entries[1].image_url == rows[1]["imageURL"]
    assert chart.entries[99].title == "Must Have Love (우리들의 겨울)"
