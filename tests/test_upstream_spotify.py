"""Spotify Charts: requests, the JSON API parsers and the CSV parser, against the real captures
(public/v0 overview, the auth/v0 README entry, three CSV downloads) and our rendered samples."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from chartgw.demo.samples import streaming as samples
from chartgw.upstreams import UpstreamFormatError, spotify

OVERVIEW = "spotify/public-v0-charts-overview.json"
AUTH_EXAMPLE = "spotify/auth-v0-entry-example-from-ArnavSaraogi-README.json"
DOWNLOAD = "spotify/charts-spotify-com-download-regional-global-weekly-2023-11-16.csv"
LEGACY_2017 = "spotify/spotifycharts-legacy-regional-global-daily-2017.csv"
LEGACY_2020 = "spotify/spotifycharts-legacy-regional-global-daily-2020.csv"
LEGACY_VIRAL = "spotify/spotifycharts-legacy-viral-global-daily.csv"


def _csv_rows(path: Path) -> list[list[str]]:
    """The file's data rows as the csv module reads them, for cross-checking the parser."""
    rows = list(csv.reader(io.StringIO(path.read_text("utf-8-sig"), newline="")))
    return [r for r in rows if r and r[0].strip().isdigit()]


# --- requests ---------------------------------------------------------------------------------------------


def test_chart_request_is_auth_v0_latest_with_the_bearer_token() -> None:
    request = spotify.chart_request("viral-daily", "kr", "t0k")
    assert request.upstream == "SPOTIFY" and request.method == "GET"
    assert request.path == "/auth/v0/charts/viral-kr-daily/latest"
    assert dict(request.headers)["Authorization"] == "Bearer t0k"
    assert spotify.chart_request("regional-weekly", "global", "x", "2025-05-15").path == \
        "/auth/v0/charts/regional-global-weekly/2025-05-15"
    with pytest.raises(ValueError):
        spotify.chart_request("viral-weekly", "us", "x")


def test_overview_request_needs_no_token() -> None:
    request = spotify.overview_request()
    assert request.path == "/public/v0/charts" and "Authorization" not in dict(request.headers)


def test_aliases_both_ways() -> None:
    assert spotify.alias("regional-daily", "us") == "regional-us-daily"
    assert spotify.parse_alias("REGIONAL_GLOBAL_WEEKLY") == ("regional-weekly", "global")
    assert spotify.parse_alias("viral-jp-daily") == ("viral-daily", "jp")
    assert spotify.parse_alias("viral-jp-weekly") is None
    assert spotify.parse_alias("album-global-weekly") is None
    assert spotify.parse_alias("regional-zz-daily") is None


# --- the real captures ------------------------------------------------------------------------------------


def test_public_overview_capture(shared_upstream: Path) -> None:
    body = (shared_upstream / OVERVIEW).read_bytes()
    chart = spotify.parse_overview(body)
    assert chart.chart_date == "2025-05-15" and len(chart.entries) == 50
    assert [e.rank for e in chart.entries] == list(range(1, 51))
    first, second = chart.entries[:2]
    assert (first.title, first.artists, first.track_id) == ("Ordinary", ["Alex Warren"], "2RkZ5LkEzeHGRsmDqKwmaJ")
    assert (first.previous_rank, first.entry_status) == (2, "MOVED_UP")
    assert (second.artist, second.artists) == ("Lady Gaga, Bruno Mars", ["Lady Gaga", "Bruno Mars"])
    # The public overview zeroes or omits these; they must come out as null, never as 0.
    assert all(e.streams is None and e.peak_rank is None and e.periods_on_chart is None and e.label is None
               for e in chart.entries)
    raw = json.loads(body)["chartEntryViewResponses"][0]["entries"]
    for entry, item in zip(chart.entries, raw, strict=True):
        track = item["trackMetadata"]
        assert entry.title == track["trackName"] and entry.track_uri == track["trackUri"]
        assert entry.track_id == track["trackUri"].split(":")[-1]
        assert entry.artists == [a["name"] for a in track["artists"]]
        assert entry.image_url == track["displayImageUri"]
        assert entry.entry_status == item["chartEntryData"]["entryStatus"]


def test_overview_has_no_other_chart_of_ours(shared_upstream: Path) -> None:
    body = (shared_upstream / OVERVIEW).read_bytes()
    with pytest.raises(UpstreamFormatError, match="ALBUM_GLOBAL_WEEKLY"):
        spotify.parse_overview(body, "regional-daily", "global")


def test_auth_v0_entry_from_the_readme_example(shared_upstream: Path) -> None:
    """The README shows entries only; they are put into the displayChart envelope auth/v0 returns."""
    example = json.loads((shared_upstream / AUTH_EXAMPLE).read_text("utf-8"))
    body = json.dumps({"displayChart": {"date": "2017-01-01"}, "entries": example["charts"]["2017-01-01"]}).encode()
    (entry,) = spotify.parse_chart(body).entries
    assert (entry.rank, entry.title, entry.artists) == (1, "Bad and Boujee (feat. Lil Uzi Vert)", ["Migos", "Lil Uzi Vert"])
    assert entry.streams == 1371493  # the string "1371493"
    assert entry.previous_rank is None  # -1: a new entry
    assert (entry.peak_rank, entry.periods_on_chart, entry.entry_status) == (1, 1, "NEW_ENTRY")
    assert (entry.track_id, entry.label) == ("4Km5HrUvYTaSUfiSGPJeQR", "Quality Control Music")


def test_charts_download_csv_capture(shared_upstream: Path) -> None:
    path = shared_upstream / DOWNLOAD
    assert path.read_bytes().startswith(b"\xef\xbb\xbfrank,") and b"\r\n" in path.read_bytes()
    chart = spotify.parse_csv(path.read_bytes(), path.name)
    assert (chart.layout, chart.kind, chart.recurrence) == ("charts-download", "regional", "weekly")
    assert len(chart.entries) == 200 and [e.rank for e in chart.entries] == list(range(1, 201))
    estas = chart.entries[1]
    assert (estas.title, estas.artist, estas.streams, estas.label) == ("Si No Estás", "iñigo quintero", 32618623, "Acqustic")
    houdini = chart.entries[5]
    assert (houdini.title, houdini.previous_rank, houdini.streams) == ("Houdini", None, 28741544)
    assert chart.entries[6].artists == ["Jung Kook", "Latto"]
    for entry, row in zip(chart.entries, _csv_rows(path), strict=True):
        assert entry.track_uri == row[1] and entry.track_id == row[1].removeprefix("spotify:track:")
        assert (entry.artist, entry.title, entry.streams) == (row[2], row[3], int(row[8]))
        assert (entry.peak_rank, entry.periods_on_chart) == (int(row[5]), int(row[7]))
        assert entry.previous_rank == (None if row[6] == "-1" else int(row[6]))


@pytest.mark.parametrize("name,first,size", [
    (LEGACY_2017, ("Shape of You", "Ed Sheeran", 7656858, "7qiZfU4dY1lWllzX7mPBI3"), 200),
    (LEGACY_2020, ("WAP (feat. Megan Thee Stallion)", "Cardi B", 6466204, "4Oun2ylbjFKMPTiaSbbCih"), 200),
    (LEGACY_VIRAL, ("Put Your Records On", "Ritt Momney", None, "6AGOKlMZWLCaEJGnaROtF9"), 50),
])
def test_legacy_csv_captures(shared_upstream: Path, name: str, first: tuple[Any, ...], size: int) -> None:
    path = shared_upstream / name
    chart = spotify.parse_csv(path.read_bytes(), path.name)
    assert chart.layout == ("legacy-viral" if "viral" in name else "legacy-regional") and chart.recurrence is None
    assert len(chart.entries) == size and [e.rank for e in chart.entries] == list(range(1, size + 1))
    top = chart.entries[0]
    assert (top.title, top.artist, top.streams, top.track_id) == first
    assert all(e.previous_rank is None and e.peak_rank is None and e.label is None for e in chart.entries)
    for entry, row in zip(chart.entries, _csv_rows(path), strict=True):
        assert (entry.title, entry.artists) == (row[1], [row[2]])
        assert entry.track_id == row[-1].rsplit("/", 1)[-1]
        assert entry.streams == (int(row[3]) if len(row) == 5 else None)


def test_legacy_2020_preface_and_viral_quoted_commas(shared_upstream: Path) -> None:
    assert (shared_upstream / LEGACY_2020).read_text("utf-8").startswith(",,,\"Note that these figures")
    viral = spotify.parse_csv((shared_upstream / LEGACY_VIRAL).read_bytes())
    assert viral.entries[2].title.startswith("Edge of Great (feat. Madison Reyes, Charlie Gillespie,")


def test_real_file_names(shared_upstream: Path) -> None:
    assert spotify.csv_name_info(Path(DOWNLOAD).name) == spotify.CsvName("regional-weekly", "global", "2023-11-16")
    assert spotify.csv_name_info(Path(LEGACY_2017).name) == spotify.CsvName("regional-daily", "global", None)
    assert spotify.csv_name_info(Path(LEGACY_VIRAL).name) == spotify.CsvName("viral-daily", "global", None)


def test_legacy_url_form_names() -> None:
    assert spotify.csv_name_info("regional-us-daily-2020-09-05.csv") == spotify.CsvName("regional-daily", "us", "2020-09-05")
    assert spotify.csv_name_info("regional-global-weekly-2018-01-05--2018-01-12.csv") == \
        spotify.CsvName("regional-weekly", "global", "2018-01-11")
    assert spotify.csv_name_info("viral-DE-daily-latest.csv") == spotify.CsvName("viral-daily", "de", None)
    assert spotify.csv_name_info("chart.csv") == spotify.CsvName(None, None, None)


# --- our rendered samples, and how close they are to the real bytes -----------------------------------------


@pytest.mark.parametrize("chart_type,country", [("regional-daily", "us"), ("regional-weekly", "global"),
                                                ("viral-daily", "kr")])
def test_rendered_chart_round_trips(chart_type: str, country: str) -> None:
    rows = samples.chart_rows(chart_type, country, 1)
    chart = spotify.parse_chart(samples.render_chart(chart_type, country, rows, "2026-11-19", 1))
    assert chart.chart_date == "2026-11-19" and len(chart.entries) == samples.chart_size(chart_type)
    for row, entry in zip(rows, chart.entries, strict=True):
        assert (entry.rank, entry.title, entry.artists) == (row.rank, row.song.title, list(row.song.artists))
        assert entry.track_id == samples.track_id(row.song) and entry.previous_rank == row.previous_rank
        assert entry.peak_rank is not None and entry.peak_rank <= entry.rank
    streams = [e.streams for e in chart.entries]
    if chart_type.startswith("viral"):
        assert streams == [None] * len(streams)
    else:
        assert all(isinstance(s, int) for s in streams) and streams == sorted(streams, reverse=True)  # type: ignore[type-var]
    assert any(e.entry_status == "NEW_ENTRY" for e in chart.entries)
    assert any(len(e.artists) > 1 for e in chart.entries) or chart_type.startswith("viral")


def test_rendered_overview_round_trips() -> None:
    rows = samples.chart_rows("regional-weekly", "global")
    body = samples.render_overview(rows, "2026-11-19")
    chart = spotify.parse_overview(body)
    assert len(chart.entries) == 50 and [e.title for e in chart.entries] == [r.song.title for r in rows[:50]]
    assert all(e.streams is None and e.peak_rank is None for e in chart.entries)
    aliases = [v["displayChart"]["chartMetadata"]["alias"] for v in json.loads(body)["chartEntryViewResponses"]]
    assert aliases == ["REGIONAL_GLOBAL_WEEKLY", "ALBUM_GLOBAL_WEEKLY", "ARTIST_GLOBAL_WEEKLY"]


def test_rendered_overview_has_the_captured_shape(shared_upstream: Path) -> None:
    real = json.loads((shared_upstream / OVERVIEW).read_text("utf-8"))["chartEntryViewResponses"]
    ours = json.loads(samples.render_overview(samples.chart_rows("regional-weekly", "global"), "2026-11-19"))
    for real_view, our_view in zip(real, ours["chartEntryViewResponses"], strict=True):
        assert set(real_view) == set(our_view)
        assert set(real_view["displayChart"]["chartMetadata"]) == set(our_view["displayChart"]["chartMetadata"])
        real_entry, our_entry = real_view["entries"][0], our_view["entries"][0]
        assert set(real_entry) == set(our_entry)
        assert set(real_entry["chartEntryData"]) == set(our_entry["chartEntryData"])


def test_rendered_auth_entry_has_the_readme_shape(shared_upstream: Path) -> None:
    real = json.loads((shared_upstream / AUTH_EXAMPLE).read_text("utf-8"))["charts"]["2017-01-01"][0]
    rows = samples.chart_rows("regional-daily", "global")
    ours = json.loads(samples.render_chart("regional-daily", "global", rows, "2026-11-19"))["entries"][0]
    assert set(real) == set(ours) and set(real["trackMetadata"]) == set(ours["trackMetadata"])
    assert list(real["chartEntryData"]) == list(ours["chartEntryData"])
    assert isinstance(ours["chartEntryData"]["rankingMetric"]["value"], str)


def test_rendered_download_csv_round_trips() -> None:
    rows = samples.chart_rows("regional-daily", "us", 2)
    body = samples.render_download_csv("regional-daily", "us", rows, 2)
    assert body.startswith(b"\xef\xbb\xbfrank,uri,") and body.endswith(b"\r\n") and b"days_on_chart" in body
    chart = spotify.parse_csv(body)
    assert (chart.layout, chart.kind, chart.recurrence) == ("charts-download", "regional", "daily")
    assert [(e.rank, e.title, e.artists, e.previous_rank) for e in chart.entries] == \
        [(r.rank, r.song.title, list(r.song.artists), r.previous_rank) for r in rows]
    assert [e.streams for e in chart.entries] == samples.streams_by_rank("regional-daily", "us", 2)[:200]


def test_rendered_download_header_is_the_real_one(shared_upstream: Path) -> None:
    real = (shared_upstream / DOWNLOAD).read_bytes().split(b"\r\n")
    ours = samples.render_download_csv("regional-weekly", "global", samples.chart_rows("regional-weekly", "global"))
    assert ours.split(b"\r\n")[0] == real[0]
    assert real[1].count(b'"') == ours.split(b"\r\n")[1].count(b'"') == 10  # 4 strings and streams quoted


@pytest.mark.parametrize("preface", [True, False])
def test_rendered_legacy_regional_round_trips(preface: bool) -> None:
    rows = samples.chart_rows("regional-daily", "global")
    body = samples.render_legacy_csv("regional-daily", "global", rows, preface=preface)
    assert body.startswith(b",,,\"Note") == preface
    chart = spotify.parse_csv(body)
    assert chart.layout == "legacy-regional" and len(chart.entries) == 200
    assert [(e.title, e.artists, e.track_id) for e in chart.entries] == \
        [(r.song.title, [r.song.artists[0]], samples.track_id(r.song)) for r in rows]


def test_rendered_legacy_viral_round_trips() -> None:
    rows = samples.chart_rows("viral-daily", "global")
    body = samples.render_legacy_csv("viral-daily", "global", rows)
    assert body.startswith(b"Position,Track Name,Artist,URL\r\n") and not body.endswith(b"\n")
    chart = spotify.parse_csv(body)
    assert chart.layout == "legacy-viral" and [e.title for e in chart.entries] == [r.song.title for r in rows]


def test_rendered_legacy_headers_are_the_real_ones(shared_upstream: Path) -> None:
    regional = samples.render_legacy_csv("regional-daily", "global", samples.chart_rows("regional-daily", "global"))
    assert regional.split(b"\n")[:2] == (shared_upstream / LEGACY_2020).read_bytes().split(b"\n")[:2]
    viral = samples.render_legacy_csv("viral-daily", "global", samples.chart_rows("viral-daily", "global"))
    assert viral.split(b"\r\n")[0] == (shared_upstream / LEGACY_VIRAL).read_bytes().split(b"\r\n")[0]


# --- refusals ---------------------------------------------------------------------------------------------


def _entry(**changes: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "chartEntryData": {"currentRank": 1, "previousRank": -1, "rankingMetric": {"value": "10", "type": "STREAMS"}},
        "trackMetadata": {"trackName": "T", "trackUri": "spotify:track:4Km5HrUvYTaSUfiSGPJeQR",
                          "artists": [{"name": "A"}]},
    }
    for path, value in changes.items():
        node = entry
        *parents, last = path.split("__")
        for key in parents:
            node = node[key]
        node[last] = value
    return entry


def _chart(*entries: dict[str, Any], day: str = "2026-11-19", entity: str = "TRACK") -> bytes:
    return json.dumps({"displayChart": {"date": day, "chartMetadata": {"entityType": entity}},
                       "entries": list(entries)}).encode()


def test_the_refusal_helpers_build_a_valid_chart() -> None:
    (entry,) = spotify.parse_chart(_chart(_entry())).entries
    assert (entry.streams, entry.previous_rank) == (10, None)
    other = spotify.parse_chart(_chart(_entry(chartEntryData__rankingMetric={"value": "0.5", "type": "VIRAL"})))
    assert other.entries[0].streams is None  # a metric that is not STREAMS is not streams


@pytest.mark.parametrize("body", [
    b"<!DOCTYPE html><html><body>Please log in</body></html>",
    b"",
    b"{}",
    b'{"displayChart":{"date":"2026-11-19"},"entries":[{"chartEntryData":{"currentRank":1}',
    b'{"displayChart":{"date":"2026-11-19"},"entries":[]}',
    b'{"error":{"status":401,"message":"Invalid access token"}}',
    _chart(_entry(), day="19/11/2026"),
    _chart(_entry(), entity="ALBUM"),
    _chart(_entry(trackMetadata__trackUri="spotify:episode:4Km5HrUvYTaSUfiSGPJeQR")),
    _chart(_entry(trackMetadata__trackName="")),
    _chart(_entry(trackMetadata__artists=[])),
    _chart(_entry(chartEntryData__currentRank=0)),
    _chart(_entry(chartEntryData__rankingMetric={"value": "many", "type": "STREAMS"})),
], ids=["html", "empty", "no-chart", "truncated", "no-entries", "api-error", "bad-date", "album-chart", "not-a-track",
        "no-title", "no-artist", "rank-0", "bad-streams"])
def test_not_a_chart_raises(body: bytes) -> None:
    with pytest.raises(UpstreamFormatError):
        spotify.parse_chart(body)


@pytest.mark.parametrize("body", [
    b"<html><head><title>Spotify Charts</title></head><body></body></html>",
    b'{"chartEntryViewResponses": []}',
    b"",
    b"\xef\xbb\xbf\r\n",
    b"rank,uri,artist_names,track_name,source,peak_rank,previous_rank,weeks_on_chart,streams\r\n",
    b"Song,Singer\nA,B\n",
    b"Position,Track Name,Artist,URL\n1,T,A,https://example.com/track/1\n",
    b"Position,Track Name,Artist,Streams,URL\n1,T,A,12a,https://open.spotify.com/track/4Km5HrUvYTaSUfiSGPJeQR\n",
    b"Position,Track Name,Artist,Streams,URL\n1,T,A\n",
    b"Position,Track Name,Streams,URL\n1,T,5,https://open.spotify.com/track/4Km5HrUvYTaSUfiSGPJeQR\n",
    b"rank,uri,artist_names,track_name,source,peak_rank,previous_rank,streams\n1,spotify:track:4Km5HrUvYTaSUfiSGPJeQR,A,T,L,1,1,5\n",
], ids=["html", "json", "empty", "bom-only", "header-only", "unknown-header", "not-a-spotify-url", "bad-streams",
        "short-row", "no-artist-column", "no-periods-column"])
def test_not_a_chart_csv_raises(body: bytes) -> None:
    with pytest.raises(UpstreamFormatError):
        spotify.parse_csv(body)
