"""/korea-chart end to end: the app over a data folder the real crawlers filled from the samples."""

from __future__ import annotations

import gzip

import pytest
from starlette.testclient import TestClient

from chartgw.demo.samples import sample_rows
from chartgw.groups.korea_chart import GROUP, SITES, compare_charts
from chartgw.store.records import KoreaEntry
from tests.fixtures import KEY_HEADERS, api_fixture, get

api = api_fixture(GROUP, "korea_data")


@pytest.mark.parametrize("site,chart_type", [(s.site, ct) for s in SITES.values() for ct in s.chart_types])
def test_every_site_and_chart_type_serves_its_latest_snapshot(api: TestClient, site: str, chart_type: str) -> None:
    body = get(api, f"/korea-chart/{site}/charts/{chart_type}?limit=5").json()
    assert body["site"] == site and body["chart_type"] == chart_type and body["source"] == SITES[site].source
    assert body["snapshot"]["target"] == f"{site}/{chart_type}" and body["snapshot"]["stale"] is False
    assert 1 <= body["count"] <= 5 and [e["rank"] for e in body["entries"]] == list(range(1, body["count"] + 1))
    for entry in body["entries"]:
        assert entry["title"] and entry["artist"] and entry["artists"]
        assert entry["rank_status"] in {"up", "down", "same", "new"}
        assert (entry["rank_change"] is None) == (entry["rank_status"] == "new")


def test_melon_realtime_rows_match_the_sample_chart(api: TestClient) -> None:
    """What the crawler read from the rendered Melon page is what the sample chart holds, field by field."""
    rows = sample_rows("melon", "portal-a/realtime", 0)
    entries = get(api, "/korea-chart/charts?site=portal-a&limit=100").json()["entries"]
    assert len(entries) == 100
    for row, entry in zip(rows, entries):
        assert (entry["rank"], entry["title"], entry["artists"], entry["song_id"]) == (
            row.rank, row.song.title, list(row.song.artists), row.song.song_id)
        assert entry["rank_change"] == row.rank_change
    multi = [e for e in entries if len(e["artists"]) > 1]
    assert multi and all(e["artist"] == ", ".join(e["artists"]) for e in multi)


def test_charts_query_defaults_to_the_sites_first_chart_type(api: TestClient) -> None:
    assert get(api, "/korea-chart/charts?site=portal-d").json()["chart_type"] == "all_age"
    assert get(api, "/korea-chart/charts?site=portal-e&limit=1").json()["chart_type"] == "daily_top100"


def test_rising_rows_carry_their_gain(api: TestClient) -> None:
    body = get(api, "/korea-chart/portal-d/charts/rising").json()
    gains = [e["gain"] for e in body["entries"]]
    assert gains and all(g > 0 for g in gains) and gains == sorted(gains, reverse=True)
    assert "derived from portal-d/all_age observations" in body["snapshot"]["source"]
    for e in body["entries"]:
        expected = e["previous_chart_rank"] - e["chart_rank"] if e["previous_chart_rank"] else None
        assert e["rank_change"] == expected


def test_health_is_public_and_lists_every_chart(api: TestClient) -> None:
    body = api.get("/korea-chart/health").json()
    assert body["status"] == "ok"
    assert [s["site"] for s in body["sites"]] == list(SITES)
    assert len(body["snapshots"]) == sum(len(s.chart_types) for s in SITES.values())
    assert all(s["snapshot_id"] and s["age_seconds"] >= 0 and not s["stale"] for s in body["snapshots"])


def test_sites_needs_a_key(api: TestClient) -> None:
    response = api.get("/korea-chart/sites")
    assert response.status_code == 401 and response.headers["www-authenticate"]
    assert get(api, "/korea-chart/sites").json()["sites"][3]["chart_types"] == ["all_age", "rising", "rising_hourly"]


@pytest.mark.parametrize("url,loc", [
    ("/korea-chart/charts", ["query", "site"]),
    ("/korea-chart/charts?site=portal-z", ["query", "site"]),
    ("/korea-chart/charts?site=portal-c&chart_type=hot100_d30", ["query", "chart_type"]),
    ("/korea-chart/charts?site=portal-a&limit=0", ["query", "limit"]),
    ("/korea-chart/portal-a/charts/all_age", ["path", "chart_type"]),
    ("/korea-chart/portal-q/charts/realtime", ["path", "site"]),
    ("/korea-chart/charts/compare?chart_type=hot100_d100", ["query", "chart_type"]),
    ("/korea-chart/charts/compare?limit=301", ["query", "limit"]),
])
def test_bad_parameters_are_422(api: TestClient, url: str, loc: list[str]) -> None:
    response = get(api, url)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == loc


def test_legacy_prefix_answers_exactly_as_the_public_one(api: TestClient) -> None:
    for path in ("/portal-b/charts/daily?limit=3", "/charts/compare?limit=4", "/sites"):
        assert get(api, "/korea-chart-api" + path).content == get(api, "/korea-chart" + path).content
    assert api.get("/korea-chart-api/health").status_code == 200
    assert api.get("/korea-chart-api/sites").status_code == 401


def test_etag_304_and_gzip(api: TestClient) -> None:
    first = get(api, "/korea-chart/portal-a/charts/realtime")
    assert first.headers["cache-control"] == "private, no-cache"
    again = get(api, "/korea-chart/portal-a/charts/realtime", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    raw = api.get("/korea-chart/portal-a/charts/realtime", headers={**KEY_HEADERS, "Accept-Encoding": "gzip"})
    assert raw.headers["content-encoding"] == "gzip" and raw.json() == first.json()
    assert gzip.compress(first.content)  # the body is large enough to be worth compressing


def test_unknown_paths_and_methods_are_json(api: TestClient) -> None:
    assert get(api, "/korea-chart/nothing-here").json() == {"detail": "Not Found"}
    response = api.post("/korea-chart/sites", headers=KEY_HEADERS)
    assert response.status_code == 405 and response.json() == {"detail": "Method Not Allowed"}


def test_compare_merges_spellings_across_sites(api: TestClient) -> None:
    body = get(api, "/korea-chart/charts/compare?limit=300").json()
    assert set(body["snapshots"]) == {"portal-a", "portal-b", "portal-c"}
    songs = body["songs"]
    assert [s["combined_rank"] for s in songs] == list(range(1, len(songs) + 1))
    assert [s["score"] for s in songs] == sorted(s["score"] for s in songs)
    assert any(s["sites_charting"] == 3 for s in songs)
    keyword = get(api, "/korea-chart/charts/compare?keyword=golden").json()["songs"]
    assert keyword and all("golden" in s["title"].lower() or "golden" in s["artist"].lower() for s in keyword)


def _entry(rank: int, title: str, artist: str) -> KoreaEntry:
    return KoreaEntry(rank=rank, title=title, artist=artist, artists=[artist])


def test_compare_meets_korean_latin_and_combined_artist_names() -> None:
    """"아이유", "아이유(IU)" and "IU" are one artist once any site prints the combined credit."""
    merged = compare_charts({
        "portal-a": [_entry(1, "Celebrity", "아이유"), _entry(2, "Love Lee", "AKMU (악뮤)")],
        "portal-b": [_entry(1, "Love Lee", "악뮤"), _entry(2, "Celebrity", "아이유(IU)")],
        "portal-c": [_entry(1, "celebrity", "IU")],
    })
    celebrity = next(s for s in merged if s.title == "Celebrity")
    assert celebrity.ranks == {"portal-a": 1, "portal-b": 2, "portal-c": 1} and celebrity.combined_rank == 1
    love_lee = next(s for s in merged if s.title == "Love Lee")
    assert love_lee.ranks == {"portal-a": 2, "portal-b": 1, "portal-c": None}
    assert love_lee.score == round((2 + 1 + 2) / 3, 2)
    assert len(merged) == 2


def test_compare_keeps_same_title_by_different_artists_apart() -> None:
    merged = compare_charts({"portal-a": [_entry(1, "Home", "A")], "portal-b": [_entry(1, "Home", "B")],
                             "portal-c": []})
    assert len(merged) == 2
