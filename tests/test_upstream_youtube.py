"""YouTube charts browse API: request shape, parser on our rendered payloads and hand-made edge cases,
refusal of anything else, and the real values of the DERIVED CSV export carried through the parser.

No raw youtubei capture exists (NOTES section 2): the payload shape is the one public client code
reads, written by `chartgw.demo.samples.video`. The only real file, youtube/DERIVED-...csv, is a CSV
export (not the API); its 100 real rows are put into the documented JSON shape to check that the
parser keeps real titles, artists, view counts and positions intact.
"""

from __future__ import annotations

import csv
import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from chartgw.demo.samples import global_rows
from chartgw.demo.samples import video as samples
from chartgw.groups.video import Chart
from chartgw.upstreams import UpstreamFormatError, youtube
from chartgw.upstreams.youtube import ArtistEntry, VideoChartEntry, VideoEntry

DERIVED_CSV = "youtube/DERIVED-youtube-charts-top-songs-br-weekly-2023-09-21.csv"


def _payload(content: dict[str, Any]) -> bytes:
    doc = {"contents": {"sectionListRenderer": {"contents": [{"musicAnalyticsSectionRenderer": {"content": content}}]}}}
    return json.dumps(doc, ensure_ascii=False).encode()


def _track(rank: int, **overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": f"Song {rank}", "artists": [{"name": f"Artist {rank}", "kgMid": f"/m/0art{rank}"}],
        "encryptedVideoId": f"vid{rank:08d}", "viewCount": str(1000 * rank),
        "chartEntryMetadata": {"currentPosition": rank, "previousPosition": rank + 1, "periodsOnChart": 3},
    }
    row.update(overrides)
    return row


def _tracks(rows: list[dict[str, Any]], end_date: Any = "2024-03-07") -> bytes:
    track_type: dict[str, Any] = {"listType": "TOP_VIEWS_CHART", "trackViews": rows}
    if end_date is not None:
        track_type["endDate"] = end_date
    return _payload({"trackTypes": [track_type]})


# --- requests -----------------------------------------------------------------------------------

def test_request_is_the_charts_web_apps_browse_post() -> None:
    request = youtube.browse_request("top-songs", "weekly", "us")
    assert (request.upstream, request.method, request.path, request.params) == (
        "YOUTUBE", "POST", "/youtubei/v1/browse", (("alt", "json"),))
    assert dict(request.headers)["Content-Type"] == "application/json"
    assert request.body is not None
    body = json.loads(request.body)
    assert body == {
        "context": {"client": {"clientName": "WEB_MUSIC_ANALYTICS", "clientVersion": "2.0", "hl": "en", "gl": "US",
                               "theme": "MUSIC"}},
        "browseId": "FEmusic_analytics_charts_home",
        "query": "perspective=CHART_DETAILS&chart_params_country_code=us&chart_params_chart_type=TRACKS"
                 "&chart_params_period_type=WEEKLY",
    }


@pytest.mark.parametrize("chart_type,upstream_type", [
    ("top-songs", "TRACKS"), ("top-videos", "VIDEOS"), ("top-artists", "ARTISTS"), ("trending", "TRENDING_VIDEOS"),
    ("shorts", "SHORTS_TRACKS_BY_USAGE"),
])
def test_every_chart_type_names_its_upstream_type(chart_type: str, upstream_type: str) -> None:
    query = youtube.browse_query(chart_type, "daily", "kr")
    assert f"chart_params_chart_type={upstream_type}&chart_params_period_type=DAILY" in query
    assert query.startswith(youtube.SHORTS_FLAGS) == (chart_type == "shorts")


def test_shorts_global_past_week_query() -> None:
    request = youtube.browse_request("shorts", "weekly", "global", "2026-11-19")
    body = json.loads(request.body or b"")
    assert body["context"]["client"]["gl"] == "US"
    assert body["query"] == (
        "flags=MusicCharts__enable_apac_and_shorts_charts_expansion&perspective=CHART_DETAILS"
        "&chart_params_country_code=global&chart_params_chart_type=SHORTS_TRACKS_BY_USAGE"
        "&chart_params_period_type=WEEKLY&chart_params_end_date=20261119")


def test_unknown_chart_type_or_period_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown chart type"):
        youtube.browse_request("top-albums", "weekly", "us")
    with pytest.raises(ValueError, match="unknown period"):
        youtube.browse_query("top-songs", "monthly", "us")


# --- parsing our rendered samples ---------------------------------------------------------------

def test_songs_sample_round_trip() -> None:
    chart = Chart("top-songs", "weekly", "us")
    rows = global_rows(chart.target, 2, 100)
    parsed = youtube.parse("top-songs", "weekly", samples.render(chart, "2026-11-19", 2))
    assert parsed.end_date == "2026-11-19" and parsed.latest_end_date == "2026-11-19"
    assert len(parsed.entries) == 100
    for row, entry in zip(rows, parsed.entries):
        assert isinstance(entry, VideoChartEntry)
        assert (entry.rank, entry.title, entry.artists) == (row.rank, row.song.title, list(row.song.artists))
        assert entry.artist == ", ".join(row.song.artists) and len(entry.artist_ids) == len(row.song.artists)
        assert entry.previous_rank == row.previous_rank
        assert isinstance(entry.views, int) and entry.views > 0 and len(entry.video_id) == 11
        assert entry.image_url and entry.image_url.endswith("=w226-h226-l90-rj")  # the widest thumbnail
        assert entry.release_date and date.fromisoformat(entry.release_date)
        assert (entry.percent_views_change is None) == (row.previous_rank is None)
    new = [e for e in parsed.entries if e.previous_rank is None]
    assert {e.rank % 2 for e in new} == {0, 1}  # absent and 0 both read as new


def test_videos_sample_date_comes_from_perspective_metadata() -> None:
    chart = Chart("trending", "daily", "jp")
    parsed = youtube.parse("trending", "daily", samples.render(chart, "2026-11-21", 1))
    assert parsed.end_date is None and parsed.latest_end_date == "2026-11-21"
    assert parsed.chart_date(None) == "2026-11-21" and parsed.chart_date("2026-11-01") == "2026-11-01"
    first = parsed.entries[0]
    row = global_rows(chart.target, 1, 30)[0]
    assert isinstance(first, VideoEntry)
    assert first.channel_name == row.song.artists[0] and first.title.startswith(row.song.artists[0] + " - ")
    assert first.channel_id and first.channel_id.startswith("UC") and len(first.channel_id) == 24
    assert first.duration_seconds and 120 <= first.duration_seconds < 300
    assert first.image_url and first.image_url.endswith("/mqdefault.jpg")


def test_artists_sample_rows_are_unique_artists() -> None:
    parsed = youtube.parse("top-artists", "weekly", samples.render(Chart("top-artists", "weekly", "br"), "2026-11-19", 3))
    names = [e.name for e in parsed.entries if isinstance(e, ArtistEntry)]
    assert len(names) == 100 == len(set(names))
    assert all(e.artist_id and e.artist_id.startswith("/m/") for e in parsed.entries if isinstance(e, ArtistEntry))


def test_names_for_the_store() -> None:
    video = VideoEntry(rank=1, video_id="v", title="T", channel_name="C", channel_id=None, duration_seconds=None,
                       artists=[], artist_ids=[], views=None, previous_rank=None, periods_on_chart=None,
                       percent_views_change=None, image_url=None)
    artist = ArtistEntry(rank=1, name="N", artist_id="/m/1", channel_id=None, views=None, previous_rank=None,
                         periods_on_chart=None, percent_views_change=None, image_url=None)
    assert youtube.entry_names(video) == ("T", ["C"], "v")
    assert youtube.entry_names(artist) == ("N", ["N"], "/m/1")


# --- edge cases on hand-made payloads -----------------------------------------------------------

def test_new_entries_views_and_optional_fields() -> None:
    rows = [
        _track(1, atvExternalVideoId="atv00000001", releaseDate={"year": 2024, "month": 3, "day": 1},
               chartEntryMetadata={"currentPosition": 1, "previousPosition": 0, "periodsOnChart": 1}),
        _track(2, releaseDate={"year": 2024}, chartEntryMetadata={"currentPosition": 2, "periodsOnChart": 1,
                                                                   "percentViewsChange": "12.5"}),
        _track(3, viewCount=None, chartEntryMetadata={"currentPosition": 3, "previousPosition": "7",
                                                      "percentViewsChange": -3}),
    ]
    first, second, third = youtube.parse("top-songs", "weekly", _tracks(rows)).entries
    assert isinstance(first, VideoChartEntry) and isinstance(second, VideoChartEntry)
    assert isinstance(third, VideoChartEntry)
    assert (first.previous_rank, first.art_track_id, first.release_date, first.views) == (
        None, "atv00000001", "2024-03-01", 1000)
    assert (second.previous_rank, second.release_date, second.percent_views_change) == (None, None, 12.5)
    assert (third.previous_rank, third.views, third.percent_views_change, third.image_url) == (7, None, -3.0, None)


@pytest.mark.parametrize("value,expected", [("2024-03-07", "2024-03-07"), ("20240307", "2024-03-07"),
                                            ({"year": 2024, "month": 3, "day": 7}, "2024-03-07"), (None, None)])
def test_end_date_forms(value: Any, expected: str | None) -> None:
    assert youtube.parse("shorts", "weekly", _tracks([_track(1)], value)).end_date == expected


def test_bad_end_date_is_refused() -> None:
    with pytest.raises(UpstreamFormatError, match="endDate: not a date"):
        youtube.parse("shorts", "weekly", _tracks([_track(1)], "last week"))


@pytest.mark.parametrize("value,seconds", [(215, 215), ("215", 215), ("3:35", 215), ("1:02:03", 3723), (None, None)])
def test_video_duration_forms(value: Any, seconds: int | None) -> None:
    view = {"id": "v1", "title": "T", "channelName": "C", "videoDuration": value, "viewCount": "5",
            "chartEntryMetadata": {"currentPosition": 1}}
    (entry,) = youtube.parse("top-videos", "weekly", _payload({"videos": [{"videoViews": [view]}]})).entries
    assert isinstance(entry, VideoEntry) and entry.duration_seconds == seconds and entry.artists == []


# --- refusals -----------------------------------------------------------------------------------

@pytest.mark.parametrize("body,message", [
    (b"", "not JSON"),
    (b"<!DOCTYPE html><html><body>Sorry</body></html>", "got markup"),
    (b'{"contents": {"sectionListRenderer": {"contents": [', "not JSON"),
    (b"{}", "contents is missing"),
    (b"[]", "expected an object"),
    (_payload({}), "trackTypes is missing"),
    (_payload({"trackTypes": []}), "empty or not a list"),
    (_payload({"trackTypes": [{"trackViews": []}]}), "trackViews is missing or empty"),
    (_tracks([_track(1, encryptedVideoId="")]), "encryptedVideoId is missing or empty"),
    (_tracks([_track(1, artists=[])]), "artists is missing or empty"),
    (_tracks([_track(1, name=None)]), "name is missing or empty"),
    (_tracks([_track(1, viewCount="1.2M")]), "expected an integer"),
    (_tracks([_track(1, chartEntryMetadata={"previousPosition": 3})]), "currentPosition is missing"),
    (_tracks([{k: v for k, v in _track(1).items() if k != "chartEntryMetadata"}]), "expected an object"),
    (b'{"error": {"code": 400, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"}}',
     "API error 400 INVALID_ARGUMENT: Request contains an invalid argument"),
])
def test_malformed_bodies_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(UpstreamFormatError, match=message):
        youtube.parse("top-songs", "weekly", body)


def test_a_songs_payload_is_not_a_videos_chart() -> None:
    body = samples.render(Chart("top-songs", "weekly", "us"), "2026-11-19")
    with pytest.raises(UpstreamFormatError, match="videos is missing"):
        youtube.parse("top-videos", "weekly", body)


# --- the real CSV export's values -----------------------------------------------------------------

def test_real_chart_values_survive_the_parser(shared_upstream: Path) -> None:
    """The 100 rows of the DERIVED top-songs CSV (Brazil, week ending 2023-09-21) in the documented
    JSON shape: real titles, artist credits, views, growth and positions come out unchanged."""
    with open(shared_upstream / DERIVED_CSV, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 100 and {r["week_close"] for r in rows} == {"2023-09-21"}
    views = []
    for row in rows:
        meta: dict[str, Any] = {"currentPosition": int(row["Rank"]), "periodsOnChart": int(row["Weeks on Chart"])}
        if row["Previous Rank"]:
            meta["previousPosition"] = int(float(row["Previous Rank"]))
        if row["Weekly Growth"]:
            meta["percentViewsChange"] = float(row["Weekly Growth"].rstrip("%"))
        views.append({"name": row["Track Name"], "artists": [{"name": row["Artist Names"]}],
                      "encryptedVideoId": row["YouTube URL"].rpartition("v=")[2], "viewCount": row["Views"],
                      "chartEntryMetadata": meta})
    body = _tracks(views, row["week_close"].replace("-", ""))
    parsed = youtube.parse("top-songs", "weekly", body)
    assert parsed.end_date == "2023-09-21" and len(parsed.entries) == 100
    for row, entry in zip(rows, parsed.entries):
        assert isinstance(entry, VideoChartEntry)
        assert (entry.rank, entry.title, entry.artist, entry.views) == (
            int(row["Rank"]), row["Track Name"], row["Artist Names"], int(row["Views"]))
        assert entry.previous_rank == (int(float(row["Previous Rank"])) if row["Previous Rank"] else None)
        assert entry.periods_on_chart == int(row["Weeks on Chart"])
        assert f"watch?v={entry.video_id}" in row["YouTube URL"] and len(entry.video_id) == 11
    first = parsed.entries[0]
    assert isinstance(first, VideoChartEntry)
    assert first.views == 14149616 and first.previous_rank == 38 and first.percent_views_change == 337.8
    reentry = parsed.entries[38]
    assert isinstance(reentry, VideoChartEntry)
    assert (reentry.previous_rank, reentry.periods_on_chart) == (None, 21)  # a re-entry has no previous rank
