"""/uk-charts end to end: the app over a data folder the real crawler filled from rendered pages (a crawl of the
latest week, then a backfill of five weeks before it, for every default chart), the real captures through the
crawler, failed crawls keeping the last good week, pages of another week than asked, and backfills that resume."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from chartgw import cli
from chartgw.api.group import crawl_group
from chartgw.core.clock import fixed
from chartgw.crawl.context import Context
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import Reply, request_key
from chartgw.demo.samples import officialcharts as samples
from chartgw.groups import uk_charts
from chartgw.groups.uk_charts import GROUP, backfill
from chartgw.groups.uk_charts.charts import CHARTS_SETTING, DEFAULT_CHARTS, credited_artists, latest_published_week
from chartgw.groups.uk_charts.crawl import keyable, targets
from chartgw.upstreams import officialcharts
from chartgw.upstreams.officialcharts import UPSTREAM, requests_for
from tests.fixtures import (
    FIXED_NOW,
    KEY_HEADERS,
    api_fixture,
    client,
    configure,
    copy_data,
    data_dir,
    environment,
    get,
    group_data,
    replay_upstreams,
)
from tests.fixtures import settings as run_settings

NOW = FIXED_NOW  # Friday 2026-11-20 05:30 UTC: the week of 2026-11-20 is not out yet
LATEST = date(2026, 11, 13)
OLDEST = LATEST - timedelta(weeks=5)
WEEKS = [(LATEST - timedelta(weeks=n)).isoformat() for n in range(6)]  # newest first


@pytest.fixture(scope="module")
def uk_data(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return group_data(all_groups_data, tmp_path_factory.mktemp("uk-charts"), GROUP.name)


api = api_fixture(GROUP, "uk_data")


def _sample_entries(key: str, variant: int, limit: int | None = None) -> list[dict[str, Any]]:
    """What the rendered page of week `variant` (0 = oldest) says, as entries."""
    rows = samples.sample_week(key, variant)[:limit]
    return [{"rank": r.rank, "title": r.title, "artist": r.artist, "last_week": r.last_week, "peak": r.peak,
             "weeks_on_chart": r.weeks, "label": None, "is_new": r.is_new, "is_reentry": r.is_reentry,
             "image": samples.cover_url(r.song, 247)} for r in rows]


# --- every endpoint -------------------------------------------------------------------------------

def test_health_is_public_with_chart_count_and_latest_week_per_chart(api: TestClient) -> None:
    body = api.get("/uk-charts/health").json()
    assert (body["status"], body["service"], body["chart_count"]) == ("ok", "uk-charts", len(DEFAULT_CHARTS))
    assert [c["chart_key"] for c in body["charts"]] == list(DEFAULT_CHARTS)
    assert all(c == {"chart_key": c["chart_key"], "latest_week_start": "2026-11-13", "latest_week_end": "2026-11-19"}
               for c in body["charts"])
    assert [t["target"] for t in body["targets"]] == list(DEFAULT_CHARTS)
    assert all(t["chart_date"] == "2026-11-13" and not t["stale"] for t in body["targets"])


def test_charts_lists_every_key_with_its_coverage(api: TestClient) -> None:
    body = get(api, "/uk-charts/charts").json()
    assert body["count"] == len(officialcharts.CHARTS)
    keys = [c["chart_key"] for c in body["charts"]]
    assert keys[:len(DEFAULT_CHARTS)] == list(DEFAULT_CHARTS) and keys[-1] == "singles-top-40"
    assert body["charts"][0] == {
        "chart_key": "singles", "title": "Official Singles Chart Top 100", "kind": "singles", "size": 100,
        "configured": True, "url": "https://www.officialcharts.com/charts/singles-chart/",
        "first_week_start": OLDEST.isoformat(), "last_week_start": "2026-11-13", "last_week_end": "2026-11-19",
        "weeks_held": 6}
    dance = next(c for c in body["charts"] if c["chart_key"] == "dance-albums")
    assert (dance["kind"], dance["size"], dance["weeks_held"]) == ("albums", 40, 6)
    assert body["charts"][-1] | {"title": None} == {
        "chart_key": "singles-top-40", "title": None, "kind": "singles", "size": 40, "configured": False,
        "url": "https://www.officialcharts.com/charts/uk-top-40-singles-chart/", "first_week_start": None,
        "last_week_start": None, "last_week_end": None, "weeks_held": 0}


def test_snapshots_newest_fetch_first_filtered_and_limited(api: TestClient) -> None:
    body = get(api, "/uk-charts/snapshots?limit=500").json()
    assert body["chart_key"] is None and body["count"] == 6 * len(DEFAULT_CHARTS)
    ids = [s["id"] for s in body["snapshots"]]
    assert ids == sorted(ids, reverse=True)
    body = get(api, "/uk-charts/snapshots?chart_key=albums").json()
    assert body["chart_key"] == "albums" and body["count"] == 6
    first = body["snapshots"][0]  # the last week the backfill fetched: the oldest
    assert (first["chart_key"], first["target"], first["week_start"], first["week_end"], first["chart_date"]) == (
        "albums", "albums", OLDEST.isoformat(), (OLDEST + timedelta(days=6)).isoformat(), OLDEST.isoformat())
    assert first["row_count"] == 100 and first["cadence_seconds"] == 604800 and first["stale"] is False
    assert first["source"].endswith(f"/charts/albums-chart/{OLDEST:%Y%m%d}/7502/")
    assert sorted(s["week_start"] for s in body["snapshots"]) == sorted(WEEKS)
    assert get(api, "/uk-charts/snapshots?limit=3").json()["count"] == 3


def test_latest_is_the_newest_week_with_exact_rows(api: TestClient) -> None:
    body = get(api, "/uk-charts/singles/latest").json()
    assert (body["chart_key"], body["title"], body["kind"]) == ("singles", "Official Singles Chart Top 100", "singles")
    assert (body["week_start"], body["week_end"], body["requested_date"]) == ("2026-11-13", "2026-11-19", None)
    assert (body["previous_week_start"], body["next_week_start"]) == ("2026-11-06", None)
    assert body["snapshot"]["source"].endswith("/charts/singles-chart/") and body["count"] == 100
    assert body["entries"] == _sample_entries("singles", 5)
    limited = get(api, "/uk-charts/dance-singles/latest?limit=5").json()
    assert limited["count"] == 5 and limited["entries"] == _sample_entries("dance-singles", 5, 5)


def test_demo_weeks_have_movers_debuts_and_reentries(api: TestClient) -> None:
    for week in WEEKS:
        entries = get(api, f"/uk-charts/albums/{week}").json()["entries"]
        assert any(e["is_new"] for e in entries) and any(e["is_reentry"] for e in entries)
        assert any(e["last_week"] and e["last_week"] > e["rank"] for e in entries)
        assert any(e["last_week"] and e["last_week"] < e["rank"] for e in entries)


@pytest.mark.parametrize("offset", range(7))
def test_any_day_of_a_week_finds_that_week(api: TestClient, offset: int) -> None:
    day = date(2026, 10, 23) + timedelta(days=offset)
    body = get(api, f"/uk-charts/singles/{day.isoformat()}?limit=3").json()
    assert (body["week_start"], body["week_end"], body["requested_date"]) == ("2026-10-23", "2026-10-29",
                                                                              day.isoformat())
    assert (body["previous_week_start"], body["next_week_start"]) == ("2026-10-16", "2026-10-30")
    assert body["entries"] == _sample_entries("singles", 2, 3)


def test_the_oldest_week_has_no_previous_week(api: TestClient) -> None:
    body = get(api, f"/uk-charts/indie-singles/{OLDEST.isoformat()}").json()
    assert (body["previous_week_start"], body["next_week_start"]) == (None, WEEKS[4])
    assert body["count"] == 50 and body["entries"] == _sample_entries("indie-singles", 0)


def test_search_is_newest_week_first_with_chart_date_and_rank(api: TestClient) -> None:
    song = samples.sample_week("singles", 5)[0]
    body = get(api, f"/uk-charts/search?q={song.song.title.lower()}&chart_key=singles").json()
    assert (body["q"], body["chart_key"]) == (song.song.title.lower(), "singles")
    hits = body["hits"]
    assert hits and [h["chart_date"] for h in hits] == sorted((h["chart_date"] for h in hits), reverse=True)
    assert len({h["chart_date"] for h in hits}) == len(hits)  # one hit per week of one chart
    top = hits[0]
    assert (top["chart_key"], top["chart_date"], top["week_start"], top["week_end"], top["rank"]) == (
        "singles", "2026-11-13", "2026-11-13", "2026-11-19", 1)
    assert top["entry"] == _sample_entries("singles", 5, 1)[0]
    every_chart = get(api, f"/uk-charts/search?q={song.song.title}&limit=500").json()
    assert every_chart["count"] > body["count"] and {h["chart_key"] for h in every_chart["hits"]} > {"singles"}
    dates = [h["chart_date"] for h in every_chart["hits"]]
    assert dates == sorted(dates, reverse=True)
    assert get(api, f"/uk-charts/search?q={song.song.title}&limit=2").json()["count"] == 2


def test_search_ignores_case_accents_and_punctuation_and_matches_artists(api: TestClient) -> None:
    row = samples.sample_week("albums", 5)[3]
    plain = get(api, f"/uk-charts/search?q={row.song.title}&chart_key=albums").json()
    accented = "".join(ch + "\u0301" if ch in "aeiouAEIOU" else ch for ch in row.song.title.swapcase()) + "!"
    assert get(api, f"/uk-charts/search?q={accented}&chart_key=albums").json()["hits"] == plain["hits"]
    artist = row.song.artists[0]
    hits = get(api, f"/uk-charts/search?q={artist}&chart_key=albums&limit=500").json()["hits"]
    assert hits and all(artist.upper() in h["entry"]["artist"] or artist.upper() in h["entry"]["title"]
                        for h in hits)


def test_fetch_logs_list_crawls_and_backfilled_weeks(api: TestClient) -> None:
    body = get(api, "/uk-charts/fetch-logs?limit=1000").json()
    assert body["count"] == 6 * len(DEFAULT_CHARTS) and all(e["status"] == "ok" for e in body["entries"])
    assert {e["target"] for e in body["entries"]} >= {"singles", f"singles@{OLDEST.isoformat()}"}


# --- errors ---------------------------------------------------------------------------------------

DATA_ROUTES = ["/uk-charts/charts", "/uk-charts/snapshots", "/uk-charts/search?q=love", "/uk-charts/singles/latest",
               "/uk-charts/singles/2026-11-13", "/uk-charts/fetch-logs"]


@pytest.mark.parametrize("url", DATA_ROUTES)
def test_data_routes_need_a_key(api: TestClient, url: str) -> None:
    assert api.get(url).status_code == 401
    assert get(api, url).status_code == 200


def test_root_health_and_openapi_are_public(api: TestClient) -> None:
    root = api.get("/uk-charts/").json()
    assert root["service"] == "uk-charts" and root["openapi"] == "/uk-charts/openapi.json"
    document = api.get("/uk-charts/openapi.json").json()
    assert set(document["paths"]) == {r.path for r in GROUP.routes} | {"/", "/openapi.json", "/fetch-logs", "/diff", "/exports", "/exports/{name}"}
    week = document["paths"]["/{chart_key}/{week_start}"]["get"]
    assert [p["name"] for p in week["parameters"]] == ["chart_key", "week_start", "limit", "format", "include", "If-None-Match"]
    entry = document["components"]["schemas"]["UkChartEntry"]["properties"]
    assert {"rank", "title", "artist", "last_week", "peak", "weeks_on_chart", "label", "is_new", "is_reentry"} <= set(entry)


@pytest.mark.parametrize("url,detail", [
    ("/uk-charts/hot-100/latest", "Unknown chart key 'hot-100'; the chart keys are listed at /uk-charts/charts"),
    ("/uk-charts/hot-100/2026-11-13", "Unknown chart key 'hot-100'; the chart keys are listed at /uk-charts/charts"),
    ("/uk-charts/snapshots?chart_key=hot-100", "Unknown chart key 'hot-100'; the chart keys are listed at /uk-charts/charts"),
    ("/uk-charts/search?q=love&chart_key=hot-100",
     "Unknown chart key 'hot-100'; the chart keys are listed at /uk-charts/charts"),
    ("/uk-charts/singles-top-40/latest",
     "Chart 'singles-top-40' is not configured (CHARTGW_UK_CHARTS) and has no stored weeks; see /uk-charts/charts"),
    ("/uk-charts/singles/2026-11-20",
     "No singles chart is held for the week 2026-11-20 to 2026-11-26; the weeks held run from 2026-10-09 to "
     "2026-11-13 (6 weeks; nearest: 2026-11-13 before, none after); see /uk-charts/charts"),
    ("/uk-charts/albums/1999-01-03",
     "No albums chart is held for the week 1999-01-01 to 1999-01-07; the weeks held run from 2026-10-09 to "
     "2026-11-13 (6 weeks; nearest: none before, 2026-10-09 after); see /uk-charts/charts"),
    ("/uk-charts/singles/0001-01-01",
     "No singles chart is held for the week of 0001-01-01; the weeks held run from 2026-10-09 to 2026-11-13 (6 weeks; "
     "nearest: none before, 2026-10-09 after); see /uk-charts/charts"),
    ("/uk-charts/singles/9999-12-31",
     "No singles chart is held for the week of 9999-12-31; the weeks held run from 2026-10-09 to 2026-11-13 (6 weeks; "
     "nearest: 2026-11-13 before, none after); see /uk-charts/charts"),
])
def test_not_found_says_what_exists(api: TestClient, url: str, detail: str) -> None:
    response = get(api, url)
    assert (response.status_code, response.json()) == (404, {"detail": detail})


def test_422_bodies_are_fastapis(api: TestClient) -> None:
    assert get(api, "/uk-charts/singles/2026-11-1").json() == {"detail": [{
        "type": "date_from_datetime_parsing", "loc": ["path", "week_start"],
        "msg": "Input should be a valid date or datetime, input is too short", "input": "2026-11-1",
        "ctx": {"error": "input is too short"}}]}
    assert get(api, "/uk-charts/singles/2026-02-30").json()["detail"][0]["msg"] == (
        "Input should be a valid date or datetime, day value is outside expected range")
    assert get(api, "/uk-charts/search?q=%20!%3F%20").json() == {"detail": [{
        "type": "value_error", "loc": ["query", "q"],
        "msg": "Value error, must contain at least one letter or digit (case, accents and punctuation are ignored)",
        "input": " !? ", "ctx": {"error": {}}}]}
    assert get(api, "/uk-charts/search").json() == {"detail": [{
        "type": "missing", "loc": ["query", "q"], "msg": "Field required", "input": None}]}


@pytest.mark.parametrize("url,loc", [
    ("/uk-charts/snapshots?limit=0", ["query", "limit"]),
    ("/uk-charts/snapshots?limit=501", ["query", "limit"]),
    ("/uk-charts/search?q=", ["query", "q"]),
    ("/uk-charts/search?q=love&limit=x", ["query", "limit"]),
    ("/uk-charts/singles/latest?limit=201", ["query", "limit"]),
    ("/uk-charts/singles/2026-11-13?limit=0", ["query", "limit"]),
    ("/uk-charts/singles/last-friday", ["path", "week_start"]),
])
def test_bad_parameters_are_422(api: TestClient, url: str, loc: list[str]) -> None:
    response = get(api, url)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == loc


def test_legacy_prefix_answers_as_the_public_one(api: TestClient) -> None:
    for path in ("/charts", "/singles/latest?limit=3", "/albums/2026-10-20", "/search?q=love"):
        assert get(api, "/uk-charts-api" + path).content == get(api, "/uk-charts" + path).content
    assert api.get("/uk-charts-api/health").status_code == 200
    assert api.get("/uk-charts-api/charts").status_code == 401


def test_empty_store_answers_404_not_500(tmp_path: Path) -> None:
    with client(tmp_path, [GROUP]) as empty:
        for url in ("/uk-charts/singles/latest", "/uk-charts/singles/2026-11-13"):
            response = get(empty, url)
            assert (response.status_code, response.json()) == (
                404, {"detail": "No week of singles is held yet; see /uk-charts/charts"})
        assert get(empty, "/uk-charts/search?q=love").json()["count"] == 0
        assert get(empty, "/uk-charts/charts").json()["charts"][0]["weeks_held"] == 0
        health = empty.get("/uk-charts/health").json()
        assert health["status"] == "degraded" and health["charts"][0]["latest_week_start"] is None


def test_a_bad_chart_setting_is_a_503_naming_it(uk_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_UK_CHARTS", "singles,hot-100")
    with client(uk_data, [GROUP]) as api:
        response = api.get("/uk-charts/health")
        assert response.status_code == 503 and "CHARTGW_UK_CHARTS: unknown chart key(s) hot-100" in response.json()["detail"]


def test_configured_charts_follow_the_setting(uk_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_UK_CHARTS", "Albums, singles")
    assert run_settings().get(CHARTS_SETTING) == ("albums", "singles")
    assert [t.key for t in targets({"chart": None}, FIXED_NOW, settings=run_settings())] == ["albums", "singles"]
    assert [t.key for t in targets({"chart": "singles-top-40"}, FIXED_NOW, settings=run_settings())] == ["singles-top-40"]
    with client(uk_data, [GROUP]) as api:
        health = api.get("/uk-charts/health").json()
        assert health["chart_count"] == 2 and [c["chart_key"] for c in health["charts"]] == ["albums", "singles"]
        # a chart no longer configured still serves the weeks held
        assert get(api, "/uk-charts/dance-singles/latest").json()["week_start"] == "2026-11-13"
        listed = get(api, "/uk-charts/charts").json()["charts"]
        assert [(c["chart_key"], c["configured"]) for c in listed[:4]] == [
            ("albums", True), ("singles", True), ("singles-top-40", False), ("compilations", False)]
        dance = next(c for c in listed if c["chart_key"] == "dance-singles")
        assert (dance["configured"], dance["weeks_held"]) == (False, 6)


# --- crawls: failures keep the last good week, pages of another week ------------------------------

def _crawl(path: Path, replies: dict, selection: dict[str, str | None], now: datetime) -> list[Outcome]:
    with data_dir(path), replay_upstreams({UPSTREAM: replies}):
        return asyncio.run(crawl_group(GROUP, selection, now=lambda: now, settings=run_settings()))


def _latest_request() -> Any:
    return request_key(requests_for("singles")[0])


def _logs(path: Path, target: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path / "uk-charts.sqlite") as db:
        return db.execute("SELECT status, http_status, rows, error FROM fetch_log WHERE target = ? ORDER BY id",
                          (target,)).fetchall()


def _snapshot_count(path: Path, target: str) -> int:
    with sqlite3.connect(path / "uk-charts.sqlite") as db:
        return int(db.execute("SELECT count(*) FROM snapshots WHERE target = ?", (target,)).fetchone()[0])


NEXT_WEEK = date(2026, 11, 20)
LATER = datetime(2026, 11, 20, 19, 45, tzinfo=UTC)
NEXT_PAGE = samples.render_new("singles", NEXT_WEEK, samples.sample_week("singles", 6))


@pytest.mark.parametrize("reply,error", [
    (Reply(samples.render_new("singles", NEXT_WEEK, samples.sample_week("singles", 6, size=60)), 200),
     "short page, 60 of 100 rows"),
    (Reply(NEXT_PAGE.replace(b"chart-item", b"chart-row"), 200), "no chart rows"),
    (Reply(NEXT_PAGE[: len(NEXT_PAGE) // 2], 200), "truncated page"),
    (Reply(b"", 200), "empty body"),
    (Reply(b"<html><head><title>Just a moment...</title></head><body>cf-chl</body></html>", 403),
     "robot check / block page ('cf-chl') (HTTP 403; not retried)"),
    (Reply(b"<html><body>oops</body></html>", 500), "answered HTTP 500"),
])
def test_a_failed_or_short_crawl_keeps_the_last_good_week(uk_data: Path, tmp_path: Path, reply: Reply,
                                                          error: str) -> None:
    path = copy_data(uk_data, tmp_path / "data")
    with client(path, [GROUP]) as before:
        kept = get(before, "/uk-charts/singles/latest").content
    with data_dir(path), replay_upstreams({UPSTREAM: {_latest_request(): reply}}) as servers:
        (outcome,) = asyncio.run(crawl_group(GROUP, {"chart": "singles"}, now=lambda: LATER, settings=run_settings()))
        asked = len(servers[UPSTREAM].seen)
    assert outcome.status == "failed" and error in (outcome.error or "")
    assert asked == (1 if reply.status == 403 else 3 if reply.status == 500 else 1)
    assert _logs(path, "singles")[-1][0] == "failed" and error in _logs(path, "singles")[-1][3]
    with client(path, [GROUP]) as after:
        assert get(after, "/uk-charts/singles/latest").content == kept
        assert after.get("/uk-charts/health").json()["targets"][0]["chart_date"] == "2026-11-13"


def test_a_new_week_is_stored_under_the_week_the_page_prints(uk_data: Path, tmp_path: Path) -> None:
    path = copy_data(uk_data, tmp_path / "data")
    (outcome,) = _crawl(path, {_latest_request(): Reply(NEXT_PAGE)}, {"chart": "singles"}, LATER)
    assert (outcome.status, outcome.rows) == ("ok", 100)
    with client(path, [GROUP]) as after:
        body = get(after, "/uk-charts/singles/latest").json()
        assert (body["week_start"], body["previous_week_start"]) == ("2026-11-20", "2026-11-13")
        assert get(after, "/uk-charts/singles/2026-11-13").json()["next_week_start"] == "2026-11-20"


def test_an_older_week_served_as_latest_is_stored_as_that_week(uk_data: Path, tmp_path: Path) -> None:
    path = copy_data(uk_data, tmp_path / "data")
    older = OLDEST - timedelta(weeks=1)
    page = samples.render_new("singles", older, samples.sample_week("singles", 7))
    (outcome,) = _crawl(path, {_latest_request(): Reply(page)}, {"chart": "singles"}, LATER)
    assert outcome.status == "ok"
    with client(path, [GROUP]) as after:
        assert get(after, "/uk-charts/singles/latest").json()["week_start"] == "2026-11-13"
        body = get(after, f"/uk-charts/singles/{older.isoformat()}").json()
        assert (body["week_start"], body["previous_week_start"], body["next_week_start"]) == (
            older.isoformat(), None, OLDEST.isoformat())


def test_an_unchanged_week_stores_nothing_and_a_corrected_one_is_stored_again(uk_data: Path, tmp_path: Path) -> None:
    path = copy_data(uk_data, tmp_path / "data")
    table = samples.chart_replies("singles", LATEST, weeks=6)
    (outcome,) = _crawl(path, table, {"chart": "singles"}, LATER)
    assert (outcome.status, outcome.rows, outcome.snapshot_id) == ("ok", None, None)
    assert _snapshot_count(path, "singles") == 6
    rows = list(samples.sample_week("singles", 5))
    rows[0], rows[1] = replace(rows[1], rank=1), replace(rows[0], rank=2)
    corrected = samples.render_new("singles", LATEST, rows)
    (outcome,) = _crawl(path, {_latest_request(): Reply(corrected)}, {"chart": "singles"}, LATER)
    assert outcome.status == "ok" and outcome.rows == 100 and _snapshot_count(path, "singles") == 7
    with client(path, [GROUP]) as after:
        body = get(after, "/uk-charts/singles/2026-11-13?limit=2").json()
        assert [e["title"] for e in body["entries"]] == [rows[0].title, rows[1].title]
        assert get(after, "/uk-charts/search?q=" + rows[1].song.title + "&chart_key=singles").json()["hits"][0][
            "entry"]["rank"] == 2  # printed rank, and the corrected week counts once


# --- the real captures through the crawler --------------------------------------------------------

CAPTURES = Path("officialcharts")


def test_real_1952_first_chart_backfills_with_tied_ranks(shared_upstream: Path, tmp_path: Path) -> None:
    page = (shared_upstream / CAPTURES / "uk-singles-19521114.html").read_bytes()
    first = date(1952, 11, 14)
    table = {request_key(requests_for("singles", first)[0]): Reply(page)}
    with data_dir(tmp_path), replay_upstreams({UPSTREAM: table}):
        outcomes = asyncio.run(backfill("singles", date(1950, 1, 1), date(1952, 11, 20), now=lambda: NOW, settings=run_settings()))
    assert [(o.target, o.status, o.rows) for o in outcomes] == [("singles@1952-11-14", "ok", 15)]
    with client(tmp_path, [GROUP]) as api:
        body = get(api, "/uk-charts/singles/1952-11-18").json()
        assert (body["week_start"], body["week_end"], body["count"]) == ("1952-11-14", "1952-11-20", 15)
        assert [e["rank"] for e in body["entries"]] == [1, 2, 3, 4, 5, 6, 7, 7, 8, 8, 9, 10, 11, 11, 12]
        assert body["entries"][7] == {
            "rank": 7, "title": "HIGH NOON (DO NOT FORSAKE ME)", "artist": "FRANKIE LAINE", "last_week": None,
            "peak": 7, "weeks_on_chart": 1, "label": None, "is_new": None, "is_reentry": None,
            "image": "http://coverartarchive.org/release/17811857-256e-4b59-9aa0-1b1de2b1864b/30403015695-250.jpg"}
        hit = get(api, "/uk-charts/search?q=sugarbush").json()["hits"][0]
        assert (hit["chart_date"], hit["rank"], hit["entry"]["artist"]) == ("1952-11-14", 8,
                                                                           "DORIS DAY AND FRANKIE LAINE")
        run = api.get("/uk-charts/fetch-logs", headers=KEY_HEADERS).json()["entries"][0]
        assert run["target"] == "singles@1952-11-14" and run["rows"] == 15
    with sqlite3.connect(tmp_path / "uk-charts.sqlite") as db:
        (detail,) = db.execute("SELECT detail FROM crawl_runs WHERE kind = 'backfill'").fetchone()
    assert b'"stopped":"the week of 1952-11-14 is the first of the site\'s archive"' in detail


@pytest.mark.parametrize("name,key,week,rows,first", [
    ("uk-singles-20240503.html", "singles", "2024-05-03", 100, ("ESPRESSO", "SABRINA CARPENTER", None)),
    ("uk-albums-20240503.html", "albums", "2024-05-03", 100, ("THE TORTURED POETS DEPARTMENT", "TAYLOR SWIFT", None)),
    ("dance-singles-chart_2018-09-21_old-layout_ben04rogers.html", "dance-singles", "2018-09-21", 40,
     ("PROMISES", "CALVIN HARRIS & SAM SMITH", "COLUMBIA")),
])
def test_real_pages_crawl_as_the_latest_week(shared_upstream: Path, tmp_path: Path, name: str, key: str, week: str,
                                             rows: int, first: tuple[str, str, str | None]) -> None:
    page = (shared_upstream / CAPTURES / name).read_bytes()
    (outcome,) = _crawl(tmp_path, {request_key(requests_for(key)[0]): Reply(page)}, {"chart": key}, NOW)
    assert (outcome.status, outcome.rows) == ("ok", rows)
    with client(tmp_path, [GROUP]) as api:
        body = get(api, f"/uk-charts/{key}/latest").json()
        assert (body["week_start"], body["count"]) == (week, rows)
        entry = body["entries"][0]
        assert (entry["rank"], entry["title"], entry["artist"], entry["label"]) == (1, *first)
        assert [e["rank"] for e in body["entries"]] == list(range(1, rows + 1))


def test_a_title_of_symbols_only_is_stored_and_searchable(shared_upstream: Path, tmp_path: Path) -> None:
    page = (shared_upstream / CAPTURES / "uk-albums-20240503.html").read_bytes()
    _crawl(tmp_path, {request_key(requests_for("albums")[0]): Reply(page)}, {"chart": "albums"}, NOW)
    with client(tmp_path, [GROUP]) as api:
        (hit,) = get(api, "/uk-charts/search?q=equals").json()["hits"]
        assert (hit["rank"], hit["entry"]["title"], hit["entry"]["artist"]) == (81, "=", "ED SHEERAN")
    assert keyable("=") == "EQUALS SIGN" and keyable("!!!") == (
        "EXCLAMATION MARK EXCLAMATION MARK EXCLAMATION MARK") and keyable("ABBA") == "ABBA"


# --- backfill -------------------------------------------------------------------------------------

def test_backfill_skips_held_weeks_and_resumes_after_an_interruption(tmp_path: Path) -> None:
    table = samples.chart_replies("dance-singles", LATEST, weeks=6)

    def interrupt(week: date, outcome: Outcome | None, fetched: int, skipped: int) -> None:
        if fetched == 2:
            raise KeyboardInterrupt

    with data_dir(tmp_path), replay_upstreams({UPSTREAM: table}) as servers:
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(backfill("dance-singles", OLDEST, now=lambda: NOW, progress=interrupt, settings=run_settings()))
        assert len(servers[UPSTREAM].seen) == 2
        outcomes = asyncio.run(backfill("dance-singles", OLDEST, now=lambda: NOW, settings=run_settings()))
        paths = [key[1] for key, _ in servers[UPSTREAM].seen]
    assert [o.target for o in outcomes] == [f"dance-singles@{w}" for w in WEEKS[2:]]
    assert paths[2:] == [f"/charts/dance-singles-chart/{w.replace('-', '')}/104/" for w in WEEKS[2:]]
    assert _snapshot_count(tmp_path, "dance-singles") == 6
    with sqlite3.connect(tmp_path / "uk-charts.sqlite") as db:
        runs = db.execute("SELECT kind, targets, ok FROM crawl_runs ORDER BY id").fetchall()
    assert runs == [("backfill", 2, 2), ("backfill", 4, 4)]
    with client(tmp_path, [GROUP]) as api:
        body = get(api, "/uk-charts/dance-singles/latest").json()
        assert body["week_start"] == "2026-11-13" and body["entries"] == _sample_entries("dance-singles", 5)
        assert get(api, "/uk-charts/charts").json()["charts"][3]["weeks_held"] == 6


def test_a_failing_week_is_recorded_and_fetched_again_by_the_next_run(tmp_path: Path) -> None:
    table = samples.chart_replies("albums", LATEST, weeks=6)
    failing = request_key(requests_for("albums", date.fromisoformat(WEEKS[2]))[0])
    good = table[failing]
    table[failing] = Reply(b"gateway", 502)
    with data_dir(tmp_path), replay_upstreams({UPSTREAM: table}) as servers:
        first = asyncio.run(backfill("albums", OLDEST, now=lambda: NOW, settings=run_settings()))
        servers[UPSTREAM].replies[failing] = good
        second = asyncio.run(backfill("albums", OLDEST, now=lambda: NOW, settings=run_settings()))
    assert [o.status for o in first] == ["ok", "ok", "failed", "ok", "ok", "ok"]
    assert "answered HTTP 502" in (first[2].error or "")
    assert [(o.target, o.status) for o in second] == [(f"albums@{WEEKS[2]}", "ok")]
    assert _snapshot_count(tmp_path, "albums") == 6


def test_backfill_stops_at_a_refusal_or_three_failures_in_a_row(tmp_path: Path) -> None:
    robot = Reply(b"<html><title>Access denied</title></html>", 403)
    with data_dir(tmp_path), replay_upstreams({UPSTREAM: {}}) as servers:
        missing = asyncio.run(backfill("albums", OLDEST, now=lambda: NOW, settings=run_settings()))
        servers[UPSTREAM].replies.update({request_key(requests_for("albums", date.fromisoformat(w))[0]): robot
                                          for w in WEEKS})
        refused = asyncio.run(backfill("albums", OLDEST, now=lambda: NOW, settings=run_settings()))
    assert [o.status for o in missing] == ["failed"] * 3
    assert len(refused) == 1 and "not retried" in (refused[0].error or "")
    with sqlite3.connect(tmp_path / "uk-charts.sqlite") as db:
        stops = [row[0] for row in db.execute("SELECT json_extract(detail, '$.options.stopped') FROM crawl_runs")]
    assert stops == ["3 failures in a row (last at the week of 2026-10-30)", "refused at the week of 2026-11-13"]


def test_backfill_stops_where_the_site_answers_a_later_week(tmp_path: Path) -> None:
    table = samples.chart_replies("singles", LATEST, weeks=2)
    before = LATEST - timedelta(weeks=2)
    table[request_key(requests_for("singles", before)[0])] = table[request_key(requests_for("singles", LATEST -
                                                                                             timedelta(weeks=1))[0])]
    with data_dir(tmp_path), replay_upstreams({UPSTREAM: table}) as servers:
        outcomes = asyncio.run(backfill("singles", date(2000, 1, 1), now=lambda: NOW, settings=run_settings()))
        asked = len(servers[UPSTREAM].seen)
    assert asked == 3 and [o.status for o in outcomes] == ["ok", "ok", "ok"]
    assert outcomes[2].rows is None  # the week answered is held with the same rows: nothing stored
    with sqlite3.connect(tmp_path / "uk-charts.sqlite") as db:
        (stopped,) = db.execute("SELECT json_extract(detail, '$.options.stopped') FROM crawl_runs").fetchone()
        weeks = [r[0] for r in db.execute("SELECT chart_date FROM snapshots ORDER BY chart_date")]
    assert stopped.startswith(f"asked for the week of {before.isoformat()}, the site answered the later week")
    assert weeks == [WEEKS[1], WEEKS[0]]


def test_a_backfilled_page_of_another_week_is_stored_under_its_own_week(tmp_path: Path) -> None:
    asked = LATEST - timedelta(weeks=1)
    other = LATEST - timedelta(weeks=3)
    page = samples.render_new("singles", other, samples.sample_week("singles", 2))
    table = {request_key(requests_for("singles", asked)[0]): Reply(page)}
    with data_dir(tmp_path), replay_upstreams({UPSTREAM: table}):
        (outcome,) = asyncio.run(backfill("singles", asked, asked, now=lambda: NOW, settings=run_settings()))
    assert outcome.status == "ok" and outcome.rows == 100
    with sqlite3.connect(tmp_path / "uk-charts.sqlite") as db:
        (chart_date, source) = db.execute("SELECT chart_date, source FROM snapshots").fetchone()
    assert chart_date == other.isoformat()
    assert source.endswith(f"(asked for the week of {asked.isoformat()}; the page is the week of {other.isoformat()})")


def test_the_backfill_command_is_silent_off_a_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (command,) = GROUP.commands
    assert command.verb == "backfill"
    assert [(a.name, a.default) for a in command.args] == [("chart", "singles"), ("since", date(1952, 11, 14)),
                                                           ("until", None)]
    table = samples.chart_replies("singles", LATEST, weeks=2)
    with data_dir(tmp_path), replay_upstreams({UPSTREAM: table}):
        outcomes = command.run(Context(clock=fixed(FIXED_NOW), settings=run_settings()), {"chart": "singles", "since": LATEST - timedelta(weeks=1), "until": LATEST})
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert capsys.readouterr().err == ""


def test_the_backfill_counts_its_weeks_in_the_progress_shown(tmp_path: Path) -> None:
    """Held weeks count as done; the step's line off a terminal says how many weeks of how many."""
    import io

    from chartgw.core.progress import Progress

    table = samples.chart_replies("singles", LATEST, weeks=3)
    stream = io.StringIO()
    with data_dir(tmp_path), replay_upstreams({UPSTREAM: table}):
        asyncio.run(backfill("singles", LATEST - timedelta(weeks=1), LATEST, now=lambda: NOW, settings=run_settings()))
        with Progress("backfill", stream, terminal=False) as shown, shown.step("singles") as step:
            asyncio.run(backfill("singles", LATEST - timedelta(weeks=2), LATEST, now=lambda: NOW, settings=run_settings()))
    assert (step.total, step.done, step.unit) == (3, 3, "weeks")
    assert stream.getvalue().startswith("backfill singles: 3 weeks in ")


def test_the_cli_verbs_crawl_and_backfill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "GROUPS", (GROUP,))
    table = samples.all_replies(LATEST, weeks=3, keys=("singles", "albums"))
    with data_dir(tmp_path), replay_upstreams({UPSTREAM: table}):
        assert cli.main(["crawl", "uk-charts", "--chart", "albums", "--at", "2026-11-20T05:30:00"], run_settings()) == 0
        assert cli.main(["backfill", "uk-charts", "--chart", "albums", "--since", "2026-10-31", "--until", "2026-11-13", "--json"], run_settings()) == 0
        outcomes = json.loads(capsys.readouterr().out)
        assert [(o["target"], o["status"]) for o in outcomes] == [("albums@2026-11-06", "ok"), ("albums@2026-10-30", "ok")]
        assert cli.main(["backfill", "uk-charts", "--chart", "albums", "--since", "2026-10-31", "--until", "2026-11-13"], run_settings()) == 0  # all held
        with pytest.raises(SystemExit):
            cli.main(["backfill", "uk-charts", "--chart", "hot-100"], run_settings())
        with pytest.raises(SystemExit):
            cli.main(["backfill", "uk-charts", "--since", "31/10/2026"], run_settings())
    assert _snapshot_count(tmp_path, "albums") == 3
    tab = cli.crontab(("/opt/chartgw/bin/chartgw",), Path("/srv/chartgw"))
    assert "CRON_TZ=Europe/London\n# UK charts: every configured chart's new week" in tab
    assert "45 19 * * 5 CHARTGW_DATA_DIR=/srv/chartgw /opt/chartgw/bin/chartgw crawl uk-charts --wait 240" in tab
    assert "30 9 * * 6 CHARTGW_DATA_DIR=/srv/chartgw /opt/chartgw/bin/chartgw crawl uk-charts --wait 240" in tab


def test_backfill_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown chart key"):
        asyncio.run(backfill("hot-100", OLDEST, now=lambda: NOW, settings=run_settings()))
    with pytest.raises(ValueError, match="is after the newest week to fill"):
        asyncio.run(backfill("singles", date(2030, 1, 1), now=lambda: NOW, settings=run_settings()))
    with pytest.raises(ValueError, match=r"2030-01-01 is after the newest week to fill \(2026-11-13\)"):
        asyncio.run(backfill("singles", date(2030, 1, 1), date(9999, 12, 31), now=lambda: NOW, settings=run_settings()))
    assert uk_charts._date_arg("1952-11-14") == date(1952, 11, 14)
    with pytest.raises(Exception, match="use YYYY-MM-DD"):
        uk_charts._date_arg("14/11/1952")


def test_the_backfill_delay_setting_is_used_against_real_upstreams(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    seen: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        seen.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    configure("CHARTGW_UK_CHARTS_BACKFILL_DELAY_SECONDS", "0.5")
    table = samples.chart_replies("singles", LATEST, weeks=1)
    with data_dir(tmp_path), replay_upstreams({UPSTREAM: table}), environment({"CHARTGW_CRAWL_DELAY_SECONDS": "0.2"}):
        outcomes = asyncio.run(backfill("singles", LATEST, now=lambda: NOW, settings=run_settings()))
    assert [o.status for o in outcomes] == ["ok"]
    assert len(seen) == 1 and 0.5 <= seen[0] <= 0.6


# --- cadence, weeks, mapping ----------------------------------------------------------------------

@pytest.mark.parametrize("moment,week", [
    (datetime(2026, 11, 20, 5, 30, tzinfo=UTC), date(2026, 11, 13)),   # Friday morning: last week's chart
    (datetime(2026, 11, 20, 17, 59, tzinfo=UTC), date(2026, 11, 13)),  # 17:59 GMT: not announced yet
    (datetime(2026, 11, 20, 18, 0, tzinfo=UTC), date(2026, 11, 20)),   # 18:00 GMT: out
    (datetime(2026, 7, 3, 17, 30, tzinfo=UTC), date(2026, 7, 3)),      # 18:30 BST: out
    (datetime(2026, 7, 3, 16, 30, tzinfo=UTC), date(2026, 6, 26)),     # 17:30 BST: not yet
    (datetime(2026, 11, 19, 23, 0, tzinfo=UTC), date(2026, 11, 13)),   # Thursday night
    (datetime(2026, 11, 21, 9, 0, tzinfo=UTC), date(2026, 11, 20)),    # Saturday
])
def test_latest_published_week(moment: datetime, week: date) -> None:
    assert latest_published_week(moment) == week


def test_schedules_run_on_friday_evening_and_saturday_in_london_time() -> None:
    assert [(s.cron, s.timezone, s.args) for s in GROUP.schedules] == [
        ("45 19 * * 5", "Europe/London", ()), ("30 9 * * 6", "Europe/London", ())]
    assert GROUP.retention_days == {}  # weekly snapshots are kept forever


def test_settings_and_upstream_are_declared() -> None:
    assert [s.variable for s in GROUP.settings] == ["CHARTGW_UK_CHARTS", "CHARTGW_UK_CHARTS_BACKFILL_DELAY_SECONDS"]
    assert GROUP.upstreams == ("OFFICIALCHARTS",)
    assert GROUP.crawl_options == (("chart", officialcharts.DEFAULT_KEYS),)
    assert "singles-top-40" not in DEFAULT_CHARTS and {"singles", "albums", "dance-singles", "scottish-albums"} <= set(
        DEFAULT_CHARTS)


def test_entries_map_to_the_uk_market_for_artist_history(api: TestClient) -> None:
    mapping = GROUP.entries
    assert mapping is not None
    entry = get(api, "/uk-charts/singles/latest?limit=1").json()["entries"][0]
    mapped = mapping.read("singles", entry)
    assert mapped is not None
    assert (mapped.artist, mapped.artists, mapped.title, mapped.market, mapped.ids) == (
        entry["artist"], [entry["artist"]], entry["title"], "gb", {})


def test_stored_keys_for_the_artist_history_join(uk_data: Path) -> None:
    with sqlite3.connect(uk_data / "uk-charts.sqlite") as db:
        rows = db.execute("SELECT e.rank, e.title_key, e.artist_key, e.search_key FROM entries e JOIN snapshots s"
                          " ON s.id = e.snapshot_id WHERE s.target = 'singles' AND s.chart_date = '2026-11-13'"
                          " ORDER BY e.position").fetchall()
    first = samples.sample_week("singles", 5)[0]
    assert rows[0][0] == 1 and rows[0][1] == "".join(ch for ch in first.song.title.lower() if ch.isalnum())
    assert rows[0][2] and rows[0][3].startswith(rows[0][1] + "|")


@pytest.mark.parametrize("credit,artists", [
    ("TAYLOR SWIFT FT POST MALONE", ["TAYLOR SWIFT", "POST MALONE"]),
    ("CALVIN HARRIS & SAM SMITH", ["CALVIN HARRIS", "SAM SMITH"]),
    ("RUDIMENTAL/MAJOR LAZER/ANNE", ["RUDIMENTAL", "MAJOR LAZER", "ANNE"]),
    ("CENTRAL CEE X DAVE", ["CENTRAL CEE", "DAVE"]),
    ("AC/DC", ["AC/DC"]),
    ("DORIS DAY AND FRANKIE LAINE", ["DORIS DAY AND FRANKIE LAINE"]),
    ("X AMBASSADORS", ["X AMBASSADORS"]),
])
def test_credited_artists(credit: str, artists: list[str]) -> None:
    assert credited_artists(credit) == artists
