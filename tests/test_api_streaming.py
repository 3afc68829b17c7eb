"""/streaming end to end: the app over a data folder the real crawler and CSV import filled from the samples."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from datetime import date, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from chartgw import cli
from chartgw.api.group import crawl_group
from chartgw.api.params import InvalidParams
from chartgw.core.clock import fixed
from chartgw.crawl.context import Context
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import ReplayTransport, Reply, request_key
from chartgw.demo.samples import streaming as samples
from chartgw.groups import streaming
from chartgw.groups.streaming import GROUP, import_csv
from chartgw.upstreams import spotify
from tests import fixtures
from tests.fixtures import FIXED_NOW, KEY_HEADERS, api_fixture, client, copy_data, data_dir, environment, group_data
from tests.fixtures import settings as run_settings

NOW = FIXED_NOW
COUNTRIES = ("global", "us", "kr")
TOKEN_ENV = {"CHARTGW_SPOTIFY_TOKEN": samples.DEMO_TOKEN, "CHARTGW_STREAMING_COUNTRIES": samples.DEMO_COUNTRIES}
PUBLIC_ENV: dict[str, str | None] = {"CHARTGW_SPOTIFY_TOKEN": None, "CHARTGW_STREAMING_COUNTRIES": None}
DAILY = samples.chart_date("regional-daily", NOW.date())
WEEKLY = samples.chart_date("regional-weekly", NOW.date())


@pytest.fixture(scope="module")
def streaming_data(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo seed: a legacy CSV import, then token crawls of 3 countries two days back, one day back and now."""
    return group_data(all_groups_data, tmp_path_factory.mktemp("streaming-data"), "streaming")


api = api_fixture(GROUP, "streaming_data", TOKEN_ENV)


get = partial(fixtures.get, as_json=True)
"""The module's GET: `tests.fixtures.get` with its options."""


def crawl(path: Path, replies: dict, selection: dict[str, str | None] | None = None,
          env: dict[str, str | None] | None = None) -> tuple[list[Outcome], Any]:
    """One crawl of the group against `replies`, in process; returns the outcomes and the transport."""
    transport = ReplayTransport({"SPOTIFY": replies})
    with data_dir(path), environment(env or TOKEN_ENV):
        outcomes = asyncio.run(crawl_group(GROUP, selection or {}, now=lambda: NOW + timedelta(minutes=5),
                                           transport=transport, settings=run_settings()))
    return outcomes, transport


# --- the charts ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("chart_type", spotify.CHART_TYPES)
@pytest.mark.parametrize("country", COUNTRIES)
def test_latest_of_every_chart_is_the_newest_crawl(api: TestClient, chart_type: str, country: str) -> None:
    body = get(api, f"/streaming/latest?country={country}&chart_type={chart_type}")
    size = samples.chart_size(chart_type)
    expected_date = DAILY if chart_type.endswith("daily") else WEEKLY
    assert (body["country"], body["chart_type"], body["chart_date"]) == (country, chart_type, expected_date)
    assert body["snapshot"]["target"] == f"{chart_type}/{country}" and body["snapshot"]["stale"] is False
    assert body["snapshot"]["source"].endswith(f"/auth/v0/charts/{spotify.alias(chart_type, country)}/latest")
    assert body["count"] == size == len(body["entries"])
    rows = samples.chart_rows(chart_type, country, 2)
    streams = samples.streams_by_rank(chart_type, country, 2)
    for row, entry in zip(rows, body["entries"], strict=True):
        assert (entry["rank"], entry["title"], entry["artists"]) == (row.rank, row.song.title, list(row.song.artists))
        assert entry["track_id"] == samples.track_id(row.song) and entry["previous_rank"] == row.previous_rank
        assert entry["streams"] == (streams[row.rank - 1] if chart_type.startswith("regional") else None)
        assert entry["artist"] == ", ".join(entry["artists"])


def test_latest_defaults_and_limit(api: TestClient) -> None:
    body = get(api, "/streaming/latest?limit=3")
    assert (body["country"], body["chart_type"], body["count"]) == ("global", "regional-daily", 3)
    assert [e["rank"] for e in body["entries"]] == [1, 2, 3]
    assert set(body["entries"][0]) == set(spotify.StreamingEntry.__struct_fields__)


def test_latest_is_the_newest_chart_date_even_after_an_older_import(api: TestClient, streaming_data: Path,
                                                                    tmp_path: Path) -> None:
    path = copy_data(streaming_data, tmp_path / "data")
    csv_file = tmp_path / "regional-global-daily-2020-01-01.csv"
    csv_file.write_bytes(samples.render_legacy_csv("regional-daily", "global", samples.chart_rows("regional-daily", "x")))
    with data_dir(path):
        (outcome,) = import_csv(Context(clock=fixed(NOW), settings=run_settings()), {"file": str(csv_file)})
    assert outcome.status == "ok"
    with environment(TOKEN_ENV), client(path, [GROUP]) as c:
        assert get(c, "/streaming/latest?limit=1")["chart_date"] == DAILY
        assert get(c, "/streaming/dates")["dates"][-1] == "2020-01-01"


def test_chart_by_date(api: TestClient) -> None:
    yesterday = (date.fromisoformat(DAILY) - timedelta(days=1)).isoformat()
    body = get(api, f"/streaming/chart?country=us&chart_date={yesterday}&limit=5")
    assert (body["chart_date"], body["count"]) == (yesterday, 5)
    assert [e["title"] for e in body["entries"]] == [r.song.title for r in samples.chart_rows("regional-daily", "us", 1)[:5]]
    weekly = get(api, f"/streaming/chart?country=kr&chart_type=regional-weekly&chart_date={WEEKLY}")
    assert weekly["count"] == 200 and weekly["snapshot"]["cadence_seconds"] == 7 * 86400


def test_chart_of_the_imported_legacy_date(api: TestClient) -> None:
    dates = get(api, "/streaming/dates")["dates"]
    imported = dates[-1]
    body = get(api, f"/streaming/chart?chart_date={imported}")
    assert body["snapshot"]["source"].startswith("csv import of regional-global-daily-") and body["count"] == 200
    assert all(e["previous_rank"] is None and e["image_url"] is None for e in body["entries"])
    assert all(isinstance(e["streams"], int) for e in body["entries"])


def test_chart_of_a_date_without_a_chart_is_404(api: TestClient) -> None:
    response = api.get("/streaming/chart?chart_date=2001-01-01", headers=KEY_HEADERS)
    assert response.status_code == 404
    assert response.json() == {"detail": "No regional-daily chart of 'global' for 2001-01-01; see /streaming/dates "
                                         "for the dates there are"}


def test_malformed_chart_date_is_the_exact_422(api: TestClient) -> None:
    response = api.get("/streaming/chart?chart_date=2026-13-01", headers=KEY_HEADERS)
    assert response.status_code == 422
    assert response.json() == {"detail": [{
        "type": "date_from_datetime_parsing", "loc": ["query", "chart_date"],
        "msg": "Input should be a valid date or datetime, month value is outside expected range of 1-12",
        "input": "2026-13-01", "ctx": {"error": "month value is outside expected range of 1-12"}}]}
    missing = api.get("/streaming/chart", headers=KEY_HEADERS).json()
    assert missing == {"detail": [{"type": "missing", "loc": ["query", "chart_date"], "msg": "Field required",
                                   "input": None}]}


def test_dates_newest_first(api: TestClient) -> None:
    body = get(api, "/streaming/dates")
    assert body["count"] == 4 and body["dates"] == sorted(body["dates"], reverse=True)  # 3 crawls + the import
    assert body["dates"][0] == DAILY
    weekly = get(api, "/streaming/dates?country=us&chart_type=regional-weekly")
    assert weekly["dates"] == [(date.fromisoformat(WEEKLY) - timedelta(weeks=n)).isoformat() for n in range(3)]


def test_countries_with_data(api: TestClient) -> None:
    body = get(api, "/streaming/countries")
    assert [c["code"] for c in body["countries"]] == ["global", "kr", "us"] and body["count"] == 3
    korea = body["countries"][1]
    assert (korea["name"], korea["crawled"]) == ("South Korea", True)
    assert [(c["chart_type"], c["latest_chart_date"]) for c in korea["chart_types"]] == [
        ("regional-daily", DAILY), ("regional-weekly", WEEKLY), ("viral-daily", DAILY)]


def test_unknown_country_is_422_and_an_uncrawled_one_404(api: TestClient) -> None:
    response = api.get("/streaming/latest?country=zz", headers=KEY_HEADERS)
    assert response.status_code == 422
    assert response.json() == {"detail": [{
        "type": "value_error", "loc": ["query", "country"],
        "msg": "Value error, unknown country 'zz'; use 'global' or an ISO 3166-1 alpha-2 code such as 'us'",
        "input": "zz", "ctx": {"error": {}}}]}
    response = api.get("/streaming/dates?country=fr", headers=KEY_HEADERS)
    assert response.status_code == 404
    assert response.json() == {"detail": "No data for country 'fr': it is not crawled (countries: global, us, kr)"}


@pytest.mark.parametrize("url,loc", [
    ("/streaming/latest?chart_type=viral-weekly", ["query", "chart_type"]),
    ("/streaming/latest?limit=201", ["query", "limit"]),
    ("/streaming/chart?chart_date=2026-11-01&limit=0", ["query", "limit"]),
    ("/streaming/search?q=a&limit=501", ["query", "limit"]),
    ("/streaming/search?q=a&country=xyz", ["query", "country"]),
    ("/streaming/fetch-logs?status=bad", ["query", "status"]),
])
def test_bad_parameters_are_422(api: TestClient, url: str, loc: list[str]) -> None:
    response = api.get(url, headers=KEY_HEADERS)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == loc


# --- search and history ----------------------------------------------------------------------------------------


def test_search_is_accent_and_case_insensitive(api: TestClient) -> None:
    body = get(api, "/streaming/search?q=estas&limit=500")
    assert body["count"] > 0 and {h["entry"]["title"] for h in body["hits"]} == {"Si No Estás"}
    assert get(api, "/streaming/search?q=SI%20NO%20EST%C3%81S&limit=500")["count"] == body["count"]
    by_artist = get(api, "/streaming/search?q=INIGO%20quintero&limit=500")
    assert by_artist["count"] == body["count"]


def test_search_finds_hangul(api: TestClient) -> None:
    body = get(api, "/streaming/search?q=%ED%83%80%EC%9E%84%EC%BA%A1%EC%8A%90&country=kr")  # 타임캡슐
    assert body["count"] > 0 and all(h["entry"]["title"] == "타임캡슐" and h["country"] == "kr" for h in body["hits"])
    assert all(h["entry"]["artist"] == "다비치" for h in body["hits"])


def test_search_hits_newest_chart_first_once_per_chart(api: TestClient) -> None:
    body = get(api, "/streaming/search?q=greedy&chart_type=regional-daily&limit=500")
    keys = [(h["chart_date"], h["country"]) for h in body["hits"]]
    assert len(keys) == len(set(keys))
    assert [h["chart_date"] for h in body["hits"]] == sorted((h["chart_date"] for h in body["hits"]), reverse=True)
    assert all(h["chart_type"] == "regional-daily" for h in body["hits"])
    assert len(get(api, "/streaming/search?q=greedy&chart_type=regional-daily&limit=2")["hits"]) == 2


def test_search_needs_a_letter_or_digit(api: TestClient) -> None:
    response = api.get("/streaming/search?q=%21%3F", headers=KEY_HEADERS)
    assert response.status_code == 422
    assert response.json() == {"detail": [{"type": "value_error", "loc": ["query", "q"],
                                           "msg": "Value error, must contain at least one letter or digit (case, accents and punctuation are ignored)",
                                           "input": "!?", "ctx": {"error": {}}}]}
    empty = api.get("/streaming/search?q=", headers=KEY_HEADERS).json()
    assert empty == {"detail": [{"type": "string_too_short", "loc": ["query", "q"],
                                 "msg": "String should have at least 1 character", "input": "",
                                 "ctx": {"min_length": 1}}]}


def test_history_lists_every_appearance_oldest_first(api: TestClient) -> None:
    body = get(api, "/streaming/history?artist=tate%20mcrae&title=Greedy&country=global&chart_type=regional-daily")
    appearances = body["appearances"]
    assert body["count"] == len(appearances) >= 2
    assert [a["chart_date"] for a in appearances] == sorted(a["chart_date"] for a in appearances)
    for appearance in appearances:
        chart = get(api, f"/streaming/chart?chart_date={appearance['chart_date']}")
        (entry,) = [e for e in chart["entries"] if e["title"] == "greedy"]
        assert (appearance["rank"], appearance["streams"]) == (entry["rank"], entry["streams"])
    everywhere = get(api, "/streaming/history?artist=Tate%20McRae&title=greedy")
    assert everywhere["count"] > body["count"]
    assert {(a["country"], a["chart_type"]) for a in everywhere["appearances"]} > {("global", "regional-daily")}
    viral = [a for a in everywhere["appearances"] if a["chart_type"] == "viral-daily"]
    assert all(a["streams"] is None for a in viral)


def test_history_of_a_featured_title_ignores_the_credit(api: TestClient) -> None:
    body = get(api, "/streaming/history?artist=Latto&title=Seven%20(Explicit%20Ver.)&country=us")
    assert body["count"] > 0


def test_dates_take_a_limit_newest_first(api: TestClient) -> None:
    """Every date by default (today's answer); `limit` keeps the newest."""
    every = get(api, "/streaming/dates?country=global")
    assert every["count"] == len(every["dates"]) >= 3
    newest = get(api, "/streaming/dates?country=global&limit=2")
    assert (newest["count"], newest["dates"]) == (2, every["dates"][:2])
    assert api.get("/streaming/dates?limit=5001", headers=KEY_HEADERS).json()["detail"][0]["type"] == "less_than_equal"


def test_title_keys_fold_version_marks_like_featuring_credits() -> None:
    from chartgw.core.text import title_key

    for title in ("Seven", "Seven (feat. Latto) (Explicit Ver.)", "Seven (Explicit Ver.) (feat. Latto)",
                  "Seven (feat. Latto) - Clean Ver.", "SEVEN [Clean]", "Seven (Remastered 2011)", "Seven - 2011 Remaster",
                  "Seven - Live", "Seven (Live at Wembley)", "Seven - Radio Edit", "Seven (Single Version)", "Seven - Mono",
                  "Seven (Explicit) - Live"):
        assert title_key(title) == "seven", title
    for title, key in (("Seven (Remix)", "sevenremix"), ("Seven (Sped Up)", "sevenspedup"), ("Anti-Hero", "antihero"),
                       ("Love Story (Taylor's Version)", "lovestorytaylorsversion"), ("Seven (Live) (Remix)", "sevenliveremix"),
                       ("(Live)", "live"), ("Re-Live", "relive"), ("Delivered", "delivered")):
        assert title_key(title) == key, title


def test_history_finds_a_title_with_version_marks_by_the_song(api: TestClient) -> None:
    """`title=Seven` finds "Seven (feat. Latto) (Explicit Ver.)", as the full title does; each appearance names the
    title the chart printed."""
    plain = get(api, "/streaming/history?artist=Jung%20Kook&title=Seven")
    assert plain["count"] > 0 and plain["title"] == "Seven"
    assert {a["title"] for a in plain["appearances"]} == {"Seven (feat. Latto) (Explicit Ver.)"}
    full = get(api, "/streaming/history?artist=Jung%20Kook&title=Seven%20(feat.%20Latto)%20(Explicit%20Ver.)")
    assert full["appearances"] == plain["appearances"]
    assert get(api, "/streaming/history?artist=Jung%20Kook&title=seven%20-%20live")["appearances"] == plain["appearances"]
    missing = api.get("/streaming/history?artist=Jung%20Kook&title=Seven%20(Remix)", headers=KEY_HEADERS)
    assert missing.status_code == 404


def test_history_reads_keys_stored_before_versions_were_folded(streaming_data: Path, tmp_path: Path) -> None:
    """A snapshot stored with the former keys ("sevencleanver") is found by the song's key; a longer title that only
    starts like it is not; two versions on one chart are one appearance, the best ranked."""
    import json

    from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry

    path = copy_data(streaming_data, tmp_path / "data")

    def row(rank: int, title: str, key: str) -> StoredEntry:
        record = {"rank": rank, "title": title, "artist": "Jung Kook", "artists": ["Jung Kook"], "streams": 10 - rank}
        return StoredEntry(rank, key, "jungkook", None, json.dumps(record).encode(), f"{key}|jungkook")

    entries = [row(1, "Seven Nation Army", "sevennationarmy"), row(2, "Seven (Clean Ver.)", "sevencleanver"),
               row(3, "Seven (feat. Latto) (Explicit Ver.)", "sevenexplicitver")]
    with SnapshotWriter(path / "streaming.sqlite") as writer:
        writer.commit([NewSnapshot("regional-daily/us", "2026-11-25", None, NOW, "test", entries)],
                      FetchLogRow("regional-daily/us", NOW, 1, "ok", 200, len(entries)))
    with environment(TOKEN_ENV), client(path, [GROUP]) as c:
        body = get(c, "/streaming/history?artist=jung%20kook&title=Seven&country=us&chart_type=regional-daily")
    last = body["appearances"][-1]
    assert (last["chart_date"], last["rank"], last["title"], last["streams"]) == ("2026-11-25", 2, "Seven (Clean Ver.)", 8)
    assert len({a["chart_date"] for a in body["appearances"]}) == body["count"]


def test_history_404_and_422(api: TestClient) -> None:
    response = api.get("/streaming/history?artist=Nobody&title=Nothing", headers=KEY_HEADERS)
    assert response.status_code == 404 and response.json() == {"detail": "'Nothing' by 'Nobody' is on no stored chart"}
    missing = api.get("/streaming/history?title=greedy", headers=KEY_HEADERS)
    assert missing.status_code == 422
    assert missing.json() == {"detail": [{"type": "missing", "loc": ["query", "artist"], "msg": "Field required",
                                          "input": None}]}


# --- service endpoints --------------------------------------------------------------------------------------------


def test_health_is_public_and_covers_every_target(api: TestClient) -> None:
    body = api.get("/streaming/health").json()
    assert (body["status"], body["token_mode"], body["countries"]) == ("ok", "token", list(COUNTRIES))
    assert {t["target"] for t in body["targets"]} == {f"{ct}/{c}" for ct in spotify.CHART_TYPES for c in COUNTRIES}
    assert all(t["snapshot_id"] and not t["stale"] for t in body["targets"])


def test_data_routes_need_a_key(api: TestClient) -> None:
    for path in ("countries", "latest", "chart?chart_date=2026-11-01", "dates", "search?q=a", "history?artist=a&title=b",
                 "fetch-logs"):
        assert api.get(f"/streaming/{path}").status_code == 401, path
    assert api.get("/streaming/").status_code == 200 and api.get("/streaming/openapi.json").status_code == 200


def test_legacy_prefix(api: TestClient) -> None:
    for path in ("/latest?country=us&limit=3", "/dates?chart_type=viral-daily", "/search?q=estas"):
        assert api.get("/streaming-api" + path, headers=KEY_HEADERS).content == \
            api.get("/streaming" + path, headers=KEY_HEADERS).content
    assert api.get("/streaming-api/health").status_code == 200
    assert api.get("/streaming-api/countries").status_code == 401


def test_openapi_lists_every_route(api: TestClient) -> None:
    document = api.get("/streaming/openapi.json").json()
    assert set(document["paths"]) == {"/", "/health", "/countries", "/latest", "/chart", "/dates", "/search",
                                      "/history", "/fetch-logs", "/diff", "/exports", "/exports/{name}", "/openapi.json"}
    latest = {p["name"]: p for p in document["paths"]["/latest"]["get"]["parameters"]}
    assert latest["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 200, "default": 200}
    assert latest["chart_type"]["schema"]["enum"] == list(spotify.CHART_TYPES)
    assert latest["country"]["schema"]["default"] == "global"
    search = {p["name"]: p for p in document["paths"]["/search"]["get"]["parameters"]}
    assert search["limit"]["schema"]["maximum"] == 500 and search["q"]["required"] is True
    assert "security" not in document["paths"]["/health"]["get"]
    assert "StreamingEntry" in document["components"]["schemas"]


def test_fetch_logs_of_the_crawls_and_the_import(api: TestClient) -> None:
    body = get(api, "/streaming/fetch-logs?status=ok&limit=1000")
    assert body["count"] == 1 + 3 * 9
    assert any(e["target"].startswith("regional-daily/global@") and e["url"].startswith("csv import")
               for e in body["entries"])
    assert get(api, "/streaming/fetch-logs?status=failed")["count"] == 0


# --- crawls -------------------------------------------------------------------------------------------------------


def test_crawl_sends_the_token_and_an_unchanged_chart_stores_nothing(streaming_data: Path, tmp_path: Path) -> None:
    path = copy_data(streaming_data, tmp_path / "data")
    replies = samples.chart_replies(DAILY, WEEKLY, 2, COUNTRIES, samples.DEMO_TOKEN)
    outcomes, server = crawl(path, replies, {"country": "us"})
    assert [o.target for o in outcomes] == [f"{ct}/us" for ct in spotify.CHART_TYPES]
    assert all(o.status == "ok" and o.snapshot_id is None for o in outcomes)
    assert {headers["authorization"] for _, headers in server.seen} == {f"Bearer {samples.DEMO_TOKEN}"}
    with environment(TOKEN_ENV), client(path, [GROUP]) as c:
        assert get(c, "/streaming/dates?country=us")["count"] == 3


@pytest.mark.parametrize("reply", [
    Reply(b"<html><body>Internal Server Error</body></html>", 500),
    Reply(b"<!DOCTYPE html><html><body>Log in to Spotify</body></html>", 200, "text/html"),
    Reply(b'{"displayChart":{"date":"2026-11-20"},"entries":[{"chartEntryData":', 200, "application/json"),
], ids=["http-500", "html", "truncated-json"])
def test_a_failed_upstream_keeps_the_last_good_chart(streaming_data: Path, tmp_path: Path, reply: Reply) -> None:
    path = copy_data(streaming_data, tmp_path / "data")
    with environment(TOKEN_ENV), client(path, [GROUP]) as c:
        before = get(c, "/streaming/latest?limit=1")["snapshot"]["id"]
    key = request_key(spotify.chart_request("regional-daily", "global", samples.DEMO_TOKEN))
    (outcome,), _ = crawl(path, {key: reply}, {"chart_type": "regional-daily", "country": "global"})
    assert outcome.status == "failed" and outcome.error
    with environment(TOKEN_ENV), client(path, [GROUP]) as c:
        assert get(c, "/streaming/latest?limit=1")["snapshot"]["id"] == before
        (failed,) = get(c, "/streaming/fetch-logs?status=failed")["entries"]
        assert failed["target"] == "regional-daily/global" and failed["error"] == outcome.error


def test_a_short_chart_is_refused(streaming_data: Path, tmp_path: Path) -> None:
    path = copy_data(streaming_data, tmp_path / "data")
    rows = samples.chart_rows("viral-daily", "kr", 3)[:30]
    body = samples.render_chart("viral-daily", "kr", rows, NOW.date().isoformat(), 3)
    key = request_key(spotify.chart_request("viral-daily", "kr", samples.DEMO_TOKEN))
    (outcome,), _ = crawl(path, {key: Reply(body, 200, "application/json")}, {"chart_type": "viral-daily", "country": "kr"})
    assert outcome.status == "failed" and outcome.error == "viral-daily/kr: expected 50 rows, upstream gave 30"
    with environment(TOKEN_ENV), client(path, [GROUP]) as c:
        assert get(c, "/streaming/latest?country=kr&chart_type=viral-daily")["count"] == 50
        assert get(c, "/streaming/fetch-logs?status=failed")["entries"][0]["rows"] is None


def test_without_a_token_only_the_public_overview_is_crawled(tmp_path: Path) -> None:
    outcomes, server = crawl(tmp_path, samples.overview_replies(NOW.date()), env=PUBLIC_ENV)
    assert [(o.target, o.status, o.rows) for o in outcomes] == [("regional-weekly/global", "ok", 50)]
    assert [key[1] for key, _ in server.seen] == ["/public/v0/charts"]
    assert "authorization" not in server.seen[0][1]
    with environment(PUBLIC_ENV), client(tmp_path, [GROUP]) as c:
        body = get(c, "/streaming/latest?chart_type=regional-weekly")
        assert body["count"] == 50 and all(e["streams"] is None for e in body["entries"])
        assert "public overview" in body["snapshot"]["source"]
        health = c.get("/streaming/health").json()
        # Honest health: 1 chart of the configured ones is covered without a token, so the group is degraded.
        assert (health["status"], health["token_mode"]) == ("degraded", "public")
        states = {t["target"]: t["state"] for t in health["targets"]}
        assert states.pop("regional-weekly/global") == "fresh" and set(states.values()) == {"never crawled"}
        response = c.get("/streaming/latest", headers=KEY_HEADERS)
        assert response.status_code == 404
        assert response.json()["detail"] == ("No regional-daily chart of 'global' yet (without CHARTGW_SPOTIFY_TOKEN "
                                              "only regional-weekly/global is crawled)")


def test_without_a_token_other_selections_say_why(tmp_path: Path) -> None:
    with environment(PUBLIC_ENV), pytest.raises(InvalidParams) as raised:
        streaming.targets({"chart_type": "viral-daily", "country": None}, NOW, settings=run_settings())
    assert "without CHARTGW_SPOTIFY_TOKEN" in raised.value.errors[0]["msg"]


def test_token_crawl_covers_every_chart_type_and_configured_country() -> None:
    with environment({"CHARTGW_SPOTIFY_TOKEN": "x", "CHARTGW_STREAMING_COUNTRIES": None}):
        keys = [t.key for t in streaming.targets({}, NOW, settings=run_settings())]
        assert len(keys) == 3 * 8 and "viral-daily/br" in keys and "regional-weekly/kr" in keys
        assert [t.expected_rows for t in streaming.targets({"country": "jp"}, NOW, settings=run_settings())] == [200, 200, 50]


# --- CSV import ---------------------------------------------------------------------------------------------------


def _import(path: Path, file: Path, **options: str) -> list[Outcome]:
    with data_dir(path):
        return import_csv(Context(clock=fixed(NOW), settings=run_settings()), {"file": str(file), "country": None, "chart_type": None, "date": None, **options})


def test_import_the_real_downloads(shared_upstream: Path, tmp_path: Path) -> None:
    folder = shared_upstream / "spotify"
    download = folder / "charts-spotify-com-download-regional-global-weekly-2023-11-16.csv"
    assert [o.status for o in _import(tmp_path, download)] == ["ok"]
    with pytest.raises(ValueError, match="--date"):
        _import(tmp_path, folder / "spotifycharts-legacy-regional-global-daily-2017.csv")
    assert _import(tmp_path, folder / "spotifycharts-legacy-regional-global-daily-2017.csv", date="2017-03-16")[0].rows == 200
    assert _import(tmp_path, folder / "spotifycharts-legacy-regional-global-daily-2020.csv", date="2020-09-05")[0].rows == 200
    viral = _import(tmp_path, folder / "spotifycharts-legacy-viral-global-daily.csv", date="2020-10-04")
    assert (viral[0].target, viral[0].rows) == ("viral-daily/global@2020-10-04", 50)
    with environment(TOKEN_ENV), client(tmp_path, [GROUP]) as c:
        weekly = get(c, "/streaming/chart?chart_type=regional-weekly&chart_date=2023-11-16&limit=2")["entries"]
        assert (weekly[1]["title"], weekly[1]["streams"], weekly[1]["previous_rank"]) == ("Si No Estás", 32618623, 4)
        assert get(c, "/streaming/dates")["dates"] == ["2020-09-05", "2017-03-16"]
        top = get(c, "/streaming/chart?chart_type=viral-daily&chart_date=2020-10-04&limit=1")["entries"][0]
        assert (top["title"], top["streams"]) == ("Put Your Records On", None)
        history = get(c, "/streaming/history?artist=Ed%20Sheeran&title=Shape%20of%20You")["appearances"]
        assert history[0] == {"country": "global", "chart_type": "regional-daily", "chart_date": "2017-03-16",
                              "rank": 1, "streams": 7656858, "title": "Shape of You"}


@pytest.mark.parametrize("layout", ["download", "legacy"])
def test_import_our_rendered_files(tmp_path: Path, layout: str) -> None:
    rows = samples.chart_rows("regional-daily", "de", 4)
    file = tmp_path / "regional-de-daily-2026-10-01.csv"
    render = samples.render_download_csv if layout == "download" else samples.render_legacy_csv
    file.write_bytes(render("regional-daily", "de", rows, 4))
    (outcome,) = _import(tmp_path / "data", file)
    assert (outcome.target, outcome.status, outcome.rows) == ("regional-daily/de@2026-10-01", "ok", 200)
    with environment(TOKEN_ENV), client(tmp_path / "data", [GROUP]) as c:
        body = get(c, "/streaming/chart?country=de&chart_date=2026-10-01")
        assert [e["streams"] for e in body["entries"]] == samples.streams_by_rank("regional-daily", "de", 4)
        assert [e["track_id"] for e in body["entries"]] == [samples.track_id(r.song) for r in rows]
        country = get(c, "/streaming/countries")["countries"][0]
        assert (country["code"], country["crawled"]) == ("de", False)


def test_import_refuses_what_is_not_a_chart_csv(tmp_path: Path) -> None:
    page = tmp_path / "regional-global-daily-2026-10-01.csv"
    page.write_bytes(b"<!DOCTYPE html><html><body>Log in</body></html>")
    with pytest.raises(ValueError, match="not a CSV file"):
        _import(tmp_path / "data", page)
    assert not (tmp_path / "data" / "streaming.sqlite").exists()
    legacy_viral = tmp_path / "chart.csv"
    legacy_viral.write_bytes(samples.render_legacy_csv("viral-daily", "global", samples.chart_rows("viral-daily", "g")))
    with pytest.raises(ValueError, match="has no streams column, so it is not a regional-daily chart"):
        _import(tmp_path / "data", legacy_viral, chart_type="regional-daily", country="global", date="2020-01-01")
    with pytest.raises(ValueError, match="contradicts"):
        _import(tmp_path / "data", page, country="us")
    with pytest.raises(ValueError, match="not served"):
        _import(tmp_path / "data", tmp_path / "viral-global-weekly-2020-01-02.csv")
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        _import(tmp_path / "data", legacy_viral, chart_type="viral-daily", country="global", date="01/01/2020")


def test_cli_import_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`chartgw import streaming FILE` once the group is registered: 0 on success, 2 for a file that is no chart."""
    monkeypatch.setattr(cli, "GROUPS", (GROUP,))
    good = tmp_path / "regional-us-weekly-2026-10-01.csv"
    good.write_bytes(samples.render_download_csv("regional-weekly", "us", samples.chart_rows("regional-weekly", "us")))
    bad = tmp_path / "notes.csv"
    bad.write_text("just some text\n")
    with data_dir(tmp_path / "data"):
        assert cli.main(["import", "streaming", str(good), "--json"], run_settings()) == 0
        assert cli.main(["import", "streaming", str(bad), "--country", "us", "--chart-type", "regional-daily",
                         "--date", "2026-10-01"], run_settings()) == 2
    assert "no header row" in capsys.readouterr().err


def test_a_misconfigured_country_list_is_a_503_naming_it(streaming_data: Path) -> None:
    with environment({**TOKEN_ENV, "CHARTGW_STREAMING_COUNTRIES": "global,xx"}), \
            client(streaming_data, [GROUP]) as c:
        response = c.get("/streaming/health")
        assert response.status_code == 503 and "CHARTGW_STREAMING_COUNTRIES" in response.json()["detail"]


def test_cli_crawl_without_a_token_refuses_other_charts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "GROUPS", (GROUP,))
    with data_dir(tmp_path), environment(PUBLIC_ENV):
        assert cli.main(["crawl", "streaming", "--chart-type", "viral-daily"], run_settings()) == 2
    assert "without CHARTGW_SPOTIFY_TOKEN only regional-weekly/global" in capsys.readouterr().err


def test_a_malformed_file_is_a_503_to_try_again_not_a_500(streaming_data: Path, tmp_path: Path) -> None:
    """A group file whose pages are damaged (on a replica: a transaction the writer lost, until its next commit
    heals it) answers 503 with Retry-After and a JSON detail, never a 500 with nothing to go on."""
    folder = copy_data(streaming_data, tmp_path / "data")
    path = folder / "streaming.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("PRAGMA journal_mode=DELETE")
    size = path.stat().st_size
    fd = os.open(path, os.O_RDWR)
    for offset in range(4096, size, 4096):
        os.pwrite(fd, b"\xff" * 4096, offset)  # every page but the first: the schema reads, the tables do not
    os.close(fd)
    with environment(TOKEN_ENV), client(folder, [GROUP]) as c:
        response = c.get("/streaming/dates", headers=KEY_HEADERS)
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "5" and "malformed" in response.json()["detail"]
