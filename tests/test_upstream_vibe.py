"""VIBE chart API: requests, the JSON and the XML answer (the Accept-header trap), errors, round trips.

No raw VIBE capture exists; the payloads below follow the field paths of NOTES section 5.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from chartgw.demo.samples import sample_rows
from chartgw.demo.samples import vibe as vibe_samples
from chartgw.upstreams import UpstreamFormatError, vibe
from chartgw.upstreams.json_api import KST

WHEN = datetime(2026, 1, 1, 15, 0, tzinfo=KST)
# 2026-01-01T00:00:00Z = 09:00 KST.
NEW_YEAR_UTC_MS = 1767225600000
IMG = "https://musicmeta-phinf.pstatic.net/album/032/261/32261031.jpg?type=r500Fll&v=20251231120000"


def _track(
    rank: int, title: str, artists: list[tuple[int, str]], *, variation: int = 0, new: bool = False
) -> dict[str, Any]:
    people = [{"artistId": i, "artistName": n} for i, n in artists]
    return {
        "trackId": 90000000 + rank,
        "trackTitle": title,
        "artists": people,
        "album": {
            "albumId": 32261031,
            "albumTitle": f"{title} - Single",
            "imageUrl": IMG,
            "artists": people[:1],
        },
        "rank": {"currentRank": rank, "rankVariation": variation, "isNew": new},
    }


def _json(tracks: list[dict[str, Any]], date: int | None = NEW_YEAR_UTC_MS) -> list[bytes]:
    chart = {"title": "오늘 Top 100", "date": date, "chartTotalCount": len(tracks), "items": {"tracks": tracks}}
    return [json.dumps({"response": {"result": {"chart": chart}}}, ensure_ascii=False).encode()]


TRACKS = [
    _track(1, "Good Goodbye", [(6001, "화사 (HWASA)")], variation=2),
    _track(2, "APT.", [(6002, "로제 (ROSÉ)"), (6003, "Bruno Mars")], variation=-1),
    _track(3, "  Drowning\n", [(6004, "WOODZ")]),
    _track(4, "사랑은 늘 도망가", [(6005, "임영웅")], new=True),
]

XML = """<?xml version="1.0" encoding="UTF-8"?>
<response><result><chart><title>국내 급상승</title><date>1767225600000</date><chartTotalCount>2</chartTotalCount>
<items><tracks>
<track><trackId>90000001</trackId><trackTitle>Die With A Smile</trackTitle>
  <artists><artist><artistId>7001</artistId><artistName>Lady Gaga</artistName></artist>
           <artist><artistId>7002</artistId><artistName>Bruno Mars</artistName></artist></artists>
  <album><albumId>32261031</albumId><albumTitle>Die With A Smile</albumTitle><imageUrl>{img}</imageUrl>
    <artists><artist><artistId>7001</artistId><artistName>Lady Gaga</artistName></artist></artists></album>
  <rank><currentRank>1</currentRank><rankVariation>3</rankVariation><isNew>false</isNew></rank></track>
<track><trackId>90000002</trackId><trackTitle>우리에게 안녕</trackTitle>
  <artists><artist><artistId>7003</artistId><artistName>임영웅</artistName></artist></artists>
  <album><albumId>10490844</albumId><albumTitle>IM HERO 2</albumTitle><imageUrl>{img}</imageUrl></album>
  <rank><currentRank>2</currentRank><rankVariation>0</rankVariation><isNew>true</isNew></rank></track>
</tracks></items></chart></result></response>
""".replace("{img}", IMG.replace("&", "&amp;"))


@pytest.mark.parametrize(
    ("chart_type", "segment"),
    [("daily_top100", "total"), ("domestic_rising", "domestic"), ("oversea_rising", "oversea")],
)
def test_requests_ask_for_json(chart_type: str, segment: str) -> None:
    (request,) = vibe.requests_for(chart_type)
    assert request.upstream == "VIBE"
    assert request.path == f"/vibeWeb/musicapiweb/vibe/v1/chart/track/{segment}"
    assert request.params == (("start", "1"), ("display", "100"))
    headers = dict(request.headers)
    assert headers["Accept"] == "application/json"
    assert headers["Origin"] == "https://vibe.naver.com"
    assert headers["Referer"].startswith("https://vibe.naver.com")
    assert headers["User-Agent"].startswith("Mozilla/5.0")


def test_unknown_chart_type() -> None:
    with pytest.raises(ValueError):
        vibe.requests_for("billboard_kpop")


def test_json_rows() -> None:
    chart = vibe.parse("daily_top100", _json(TRACKS))
    assert (chart.chart_date, chart.chart_hour) == ("2026-01-01", 9)
    one, two, three, four = chart.entries
    assert (one.rank, one.title, one.artist, one.song_id) == (1, "Good Goodbye", "화사 (HWASA)", "90000001")
    assert (one.album, one.album_id, one.image_url) == ("Good Goodbye - Single", "32261031", IMG)
    assert (one.rank_change, one.rank_status) == (2, "up")
    assert two.artists == ["로제 (ROSÉ)", "Bruno Mars"]
    assert two.artist == "로제 (ROSÉ), Bruno Mars"
    assert two.artist_ids == ["6002", "6003"]
    assert (two.rank_change, two.rank_status) == (-1, "down")
    assert (three.title, three.rank_change, three.rank_status) == ("Drowning", 0, "same")
    assert (four.title, four.rank_change, four.rank_status) == ("사랑은 늘 도망가", None, "new")


def test_xml_answer_reads_like_json() -> None:
    chart = vibe.parse("domestic_rising", [XML.encode()])
    assert (chart.chart_date, chart.chart_hour) == ("2026-01-01", 9)
    first, second = chart.entries
    # Track artists, not the album's `artists` (only Lady Gaga) nested under <album>.
    assert first.artists == ["Lady Gaga", "Bruno Mars"]
    assert first.artist_ids == ["7001", "7002"]
    assert (first.rank, first.title, first.song_id, first.album_id) == (1, "Die With A Smile", "90000001", "32261031")
    assert first.image_url == IMG
    assert (first.rank_change, first.rank_status) == (3, "up")
    assert (second.title, second.artist, second.album) == ("우리에게 안녕", "임영웅", "IM HERO 2")
    assert (second.rank_change, second.rank_status) == (None, "new")


def test_xml_with_leading_whitespace_is_still_xml() -> None:
    chart = vibe.parse("domestic_rising", [b"\n  " + XML.encode()])
    assert [e.rank for e in chart.entries] == [1, 2]


def test_no_date_gives_no_chart_time() -> None:
    chart = vibe.parse("daily_top100", _json(TRACKS[:1], date=None))
    assert (chart.chart_date, chart.chart_hour) == (None, None)


def test_string_numbers_are_accepted() -> None:
    track = _track(5, "Title", [(1, "A")], variation=-3)
    track["rank"] = {"currentRank": "5", "rankVariation": "-3", "isNew": "false"}
    (row,) = vibe.parse("daily_top100", _json([track])).entries
    assert (row.rank, row.rank_change) == (5, -3)


def test_doctype_is_refused_before_parsing() -> None:
    bomb = b'<?xml version="1.0"?><!DOCTYPE response [<!ENTITY a "aaaaaaaaaa">]><response>&a;</response>'
    with pytest.raises(UpstreamFormatError, match="DOCTYPE"):
        vibe.parse("daily_top100", [bomb])


@pytest.mark.parametrize(
    "body",
    [
        b'{"response":{"result":null}}',
        b'{"response":{"result":{"chart":{"items":{"tracks":[]}}}}}',
        b"{}",
        b"[]",
        b"not json",
        b"",
        b"<!DOCTYPE html><html><body>\xec\x9e\xa0\xec\x8b\x9c \xed\x9b\x84 \xeb\x8b\xa4\xec\x8b\x9c</body></html>",
        b"<html><head><title>Error</title></head><body><p>503<br></body></html>",
        b"<response><result/></response>",
        b"<response><result><chart><items><tracks/></items></chart></result></response>",
        b"<response><result><chart><items><tracks><track><trackTitle>T</trackTitle><artists><artist>"
        b"<artistName>A</artistName></artist></artists><rank><rankVariation>1</rankVariation></rank>"
        b"</track></tracks></items></chart></result></response>",
        b"<response><result><chart><items><tracks><track><trackTitle>T</trackTitle>"
        b"<rank><currentRank>1</currentRank></rank></track></tracks></items></chart></result></response>",
    ],
    ids=[
        "result-null", "no-rows", "empty-object", "array", "garbage", "empty", "html-doctype", "html",
        "xml-no-chart", "xml-no-rows", "xml-no-rank", "xml-no-artist",
    ],
)
def test_not_a_chart_raises(body: bytes) -> None:
    with pytest.raises(UpstreamFormatError):
        vibe.parse("daily_top100", [body])


def test_missing_title_raises() -> None:
    track = _track(1, "x", [(1, "A")])
    track["trackTitle"] = " "
    with pytest.raises(UpstreamFormatError, match="trackTitle"):
        vibe.parse("daily_top100", _json([track]))


@pytest.mark.parametrize("chart_type", vibe.CHART_TYPES)
def test_json_and_xml_renders_round_trip_to_identical_entries(chart_type: str) -> None:
    rows = sample_rows("melon", chart_type, variant=1)
    from_json = vibe.parse(chart_type, vibe_samples.render(chart_type, rows, WHEN))
    from_xml = vibe.parse(chart_type, vibe_samples.render_xml(chart_type, rows, WHEN))
    assert from_json == from_xml
    assert (from_json.chart_date, from_json.chart_hour) == ("2026-01-01", 15)
    assert len(from_json.entries) == len(rows) == 100
    for row, got in zip(rows, from_json.entries, strict=True):
        song = row.song
        assert (got.rank, got.title, got.artists, got.album) == (row.rank, song.title, list(song.artists), song.album)
        assert (got.song_id, got.album_id, got.artist_ids) == (song.song_id, song.album_id, list(song.artist_ids))
        assert got.rank_change == row.rank_change
    multi = [e for e in from_xml.entries if len(e.artists) > 1]
    assert multi and all(", " in e.artist for e in multi)
    new = sum(row.previous_rank is None for row in rows)
    assert new > 0 and sum(e.rank_status == "new" for e in from_xml.entries) == new


def test_rendered_xml_is_the_xml_form() -> None:
    rows = sample_rows("melon", "daily_top100")[:2]
    (body,) = vibe_samples.render_xml("daily_top100", rows, WHEN)
    text = body.decode()
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?><response><result><chart>')
    assert "<title>오늘 Top 100</title>" in text
    assert "<items><tracks><track><trackId>" in text
    assert "<isNew>false</isNew>" in text
    (json_body,) = vibe_samples.render("daily_top100", rows, WHEN)
    assert json.loads(json_body)["response"]["result"]["chart"]["date"] == 1767247200000


def test_rendered_image_url_format() -> None:
    assert vibe_samples.image_url("32261031", WHEN) == (
        "https://musicmeta-phinf.pstatic.net/album/032/261/32261031.jpg?type=r500Fll&v=20260101150000"
    )
