"""/video end to end: the app over a data folder the real crawler filled from the rendered samples
(a 4-week shorts backfill, then a pull of every catalogue chart), plus failed and partial pulls,
backfills with a failing week, and the catalogue's configuration."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import date, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from chartgw.api.group import crawl_group
from chartgw.api.params import InvalidParams
from chartgw.demo.replay import ReplayTransport, Reply, request_key
from chartgw.demo.samples import global_rows
from chartgw.demo.samples import video as samples
from chartgw.groups.video import (
    GROUP,
    Chart,
    backfill,
    catalogue,
    targets,
)
from chartgw.upstreams import youtube
from chartgw.upstreams.youtube import latest_week_end, past_week_ends
from tests.fixtures import FIXED_NOW, api_fixture, client, configure, copy_data, data_dir, get, group_data
from tests.fixtures import settings as run_settings

NOW = FIXED_NOW
TODAY = NOW.date()
WEEK = latest_week_end(TODAY).isoformat()
DAY = (TODAY - timedelta(days=1)).isoformat()
BACKFILLED = past_week_ends(TODAY, samples.BACKFILL_WEEKS)


@pytest.fixture(scope="module")
def video_data(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return group_data(all_groups_data, tmp_path_factory.mktemp("video-data"), "video")


api = api_fixture(GROUP, "video_data")


# --- every endpoint -----------------------------------------------------------------------------

def test_health_is_public_and_lists_every_catalogue_chart(api: TestClient) -> None:
    body = api.get("/video/health").json()
    assert body["status"] == "ok" and body["service"] == "video"
    assert [s["target"] for s in body["targets"]] == [c.target for c in catalogue(settings=run_settings())]
    assert all(s["snapshot_id"] and not s["stale"] for s in body["targets"])


def test_snapshots_newest_first_with_limit(api: TestClient) -> None:
    body = get(api, "/video/snapshots").json()
    assert body["count"] == 29 + 4 and len(body["snapshots"]) == body["count"]
    ids = [s["id"] for s in body["snapshots"]]
    assert ids == sorted(ids, reverse=True)
    weekly = next(s for s in body["snapshots"] if s["target"] == "top-songs/weekly/us")
    assert weekly["cadence_seconds"] == 7 * 86400 and weekly["chart_date"] == WEEK and weekly["row_count"] == 100
    assert get(api, "/video/snapshots?limit=3").json()["count"] == 3


def test_latest_is_the_pull_with_every_chart(api: TestClient) -> None:
    body = get(api, "/video/latest").json()
    assert body["run"]["kind"] == "crawl" and body["run"]["targets"] == body["run"]["ok"] == 29
    assert body["count"] == 29 == len(body["charts"])
    dates = {c["target"]: c["snapshot"]["chart_date"] for c in body["charts"]}
    assert dates["shorts/weekly/global"] == WEEK and dates["trending/daily/us"] == DAY
    songs = next(c for c in body["charts"] if c["target"] == "top-songs/weekly/global")
    assert songs["count"] == 100 and songs["entries"][0]["rank"] == 1 and songs["entries"][0]["video_id"]


def test_pull_json_is_the_raw_browse_payloads(api: TestClient) -> None:
    body = get(api, "/video/pull.json").json()
    assert body["run"]["kind"] == "crawl" and body["count"] == 29
    payload = next(p for p in body["payloads"] if p["target"] == "top-artists/weekly/kr")["payload"]
    content = payload["contents"]["sectionListRenderer"]["contents"][0]["musicAnalyticsSectionRenderer"]["content"]
    assert len(content["artists"][0]["artistViews"]) == 100


def test_countries_lists_configured_countries_and_their_charts(api: TestClient) -> None:
    body = get(api, "/video/countries").json()
    assert [c["code"] for c in body["countries"]] == ["global", "us", "kr", "jp", "br", "in", "gb"]
    glob = body["countries"][0]
    assert glob["name"] == "Global" and glob["configured"] is True
    assert {(c["chart_type"], c["period"]) for c in glob["charts"]} == {
        ("top-songs", "weekly"), ("top-videos", "weekly"), ("top-artists", "weekly"), ("shorts", "weekly"),
        ("shorts", "daily")}
    kr = body["countries"][2]
    assert kr["name"] == "South Korea" and all(c["latest_date"] and c["snapshot_id"] for c in kr["charts"])
    assert {c["chart_type"] for c in kr["charts"]} == {"top-songs", "top-videos", "top-artists", "trending"}


def test_country_latest_bundles_every_chart_of_the_country(api: TestClient) -> None:
    body = get(api, "/video/kr/latest").json()
    assert (body["country"], body["name"], body["count"]) == ("kr", "South Korea", 4)
    assert {c["target"] for c in body["charts"]} == {"top-songs/weekly/kr", "top-videos/weekly/kr",
                                                     "top-artists/weekly/kr", "trending/daily/kr"}
    artists = next(c for c in body["charts"] if c["target"] == "top-artists/weekly/kr")
    assert artists["entries"][0]["name"] and artists["snapshot"]["cadence_seconds"] == 7 * 86400
    assert get(api, "/video/global/latest").json()["count"] == 5


@pytest.mark.parametrize("url", ["/video/latest", "/video/kr/latest"])
def test_bundles_take_a_limit_per_chart(api: TestClient, url: str) -> None:
    """Every chart's 100 rows by default (today's answer); `limit` keeps the top rows of each."""
    whole = get(api, url)
    assert get(api, f"{url}?limit=100").content == whole.content
    top = get(api, f"{url}?limit=2").json()
    assert top["count"] == whole.json()["count"]
    assert all(c["count"] == len(c["entries"]) == 2 for c in top["charts"])
    assert [c["target"] for c in top["charts"]] == [c["target"] for c in whole.json()["charts"]]
    assert get(api, f"{url}?limit=101").json()["detail"][0]["loc"] == ["query", "limit"]


def test_charts_catalogue(api: TestClient) -> None:
    body = get(api, "/video/charts").json()
    assert body["count"] == 29
    by_target = {c["target"]: c for c in body["charts"]}
    assert "trending/daily/global" not in by_target and "shorts/weekly/us" not in by_target
    shorts = by_target["shorts/weekly/global"]
    assert (shorts["upstream_chart_type"], shorts["latest_date"], shorts["dates"]) == (
        "SHORTS_TRACKS_BY_USAGE", WEEK, samples.BACKFILL_WEEKS)
    assert by_target["trending/daily/br"]["upstream_chart_type"] == "TRENDING_VIDEOS"
    assert by_target["top-videos/weekly/in"] == {
        "chart_type": "top-videos", "period": "weekly", "country": "in", "target": "top-videos/weekly/in",
        "upstream_chart_type": "VIDEOS", "cadence_seconds": 604800, "latest_date": WEEK, "dates": 1}


def test_dated_song_chart_matches_the_sample_rows(api: TestClient) -> None:
    body = get(api, f"/video/charts/top-songs/weekly/us/{WEEK}").json()
    assert (body["chart_type"], body["period"], body["country"], body["upstream_chart_type"]) == (
        "top-songs", "weekly", "us", "TRACKS")
    assert body["snapshot"]["target"] == "top-songs/weekly/us" and body["count"] == 100
    rows = global_rows("top-songs/weekly/us", samples.BACKFILL_WEEKS, 100)
    for row, entry in zip(rows, body["entries"]):
        assert (entry["rank"], entry["title"], entry["artists"], entry["previous_rank"]) == (
            row.rank, row.song.title, list(row.song.artists), row.previous_rank)
        assert isinstance(entry["views"], int)
    assert get(api, f"/video/charts/top-songs/weekly/us/{WEEK}?limit=5").json()["count"] == 5


@pytest.mark.parametrize("chart_type,period,key", [
    ("top-videos", "weekly", "channel_name"), ("trending", "daily", "channel_name"), ("top-artists", "weekly", "artist_id"),
    ("shorts", "daily", "video_id"),
])
def test_dated_chart_of_every_kind(api: TestClient, chart_type: str, period: str, key: str) -> None:
    country = "global" if chart_type == "shorts" else "gb"
    day = DAY if period == "daily" else WEEK
    body = get(api, f"/video/charts/{chart_type}/{period}/{country}/{day}?limit=2").json()
    assert body["chart_type"] == chart_type and body["count"] == 2 and body["entries"][0][key]


def test_shorts_backfills_and_the_latest_one(api: TestClient) -> None:
    body = get(api, "/video/shorts/backfills").json()
    assert body["count"] == 1
    run = body["runs"][0]
    assert (run["kind"], run["targets"], run["ok"]) == ("backfill", 4, 4)
    assert run["detail"]["options"] == {"chart": "shorts/weekly/global", "weeks": 4, "period": "weekly",
                                        "end_dates": BACKFILLED}
    assert [o["target"] for o in run["detail"]["outcomes"]] == [f"shorts/weekly/global@{d}" for d in BACKFILLED]
    assert all(o["rows"] == 50 and o["snapshot_id"] for o in run["detail"]["outcomes"])
    assert get(api, "/video/shorts/backfills/latest").json() == run


def test_shorts_global_chart_of_a_backfilled_week(api: TestClient) -> None:
    oldest = BACKFILLED[-1]
    body = get(api, f"/video/shorts/global/weekly/{oldest}?limit=3").json()
    assert body["snapshot"]["chart_date"] == oldest and body["count"] == 3
    assert "chart_params_end_date=" + oldest.replace("-", "") in body["snapshot"]["source"]
    rows = global_rows("shorts/weekly/global", 1, 50)
    assert [e["title"] for e in body["entries"]] == [r.song.title for r in rows[:3]]
    assert get(api, f"/video/shorts/global/daily/{DAY}").json()["count"] == 50


# --- errors -------------------------------------------------------------------------------------

DATA_ROUTES = ["/video/snapshots", "/video/latest", "/video/pull.json", "/video/countries", "/video/us/latest",
               "/video/charts", f"/video/charts/top-songs/weekly/us/{WEEK}", "/video/shorts/backfills",
               "/video/shorts/backfills/latest", f"/video/shorts/global/weekly/{WEEK}"]


@pytest.mark.parametrize("url", DATA_ROUTES)
def test_data_routes_need_a_key(api: TestClient, url: str) -> None:
    response = api.get(url)
    assert response.status_code == 401
    assert get(api, url).status_code == 200


@pytest.mark.parametrize("url,detail", [
    (f"/video/charts/trending/daily/global/{DAY}", "trending/daily/global is not in the catalogue (see /video/charts)"),
    ("/video/charts/top-songs/weekly/us/2001-01-04",
     "No snapshot of top-songs/weekly/us for 2001-01-04 (see /video/charts for its dates)"),
    ("/video/shorts/global/weekly/2001-01-04",
     "No snapshot of shorts/weekly/global for 2001-01-04 (see /video/charts for its dates)"),
    ("/video/fr/latest", "No video chart of France (fr is not in CHARTGW_VIDEO_COUNTRIES)"),
])
def test_not_found(api: TestClient, url: str, detail: str) -> None:
    response = get(api, url)
    assert response.status_code == 404 and response.json() == {"detail": detail}


def test_empty_store_answers_404_not_500(tmp_path: Path) -> None:
    with client(tmp_path, [GROUP]) as empty:
        for url, detail in (("/video/latest", "No pull has been stored yet"),
                            ("/video/pull.json", "No pull has been stored yet"),
                            ("/video/shorts/backfills/latest", "No shorts backfill has run yet"),
                            ("/video/us/latest", "No video chart of United States yet")):
            response = get(empty, url)
            assert (response.status_code, response.json()) == (404, {"detail": detail})
        assert get(empty, "/video/shorts/backfills").json() == {"count": 0, "runs": []}
        assert empty.get("/video/health").json()["status"] == "degraded"


def test_422_bodies_are_fastapis(api: TestClient) -> None:
    assert get(api, "/video/snapshots?limit=0").json() == {"detail": [{
        "type": "greater_than_equal", "loc": ["query", "limit"], "msg": "Input should be greater than or equal to 1",
        "input": "0", "ctx": {"ge": 1}}]}
    assert get(api, "/video/charts/top-songs/weekly/us/2026-11-1").json() == {"detail": [{
        "type": "date_from_datetime_parsing", "loc": ["path", "date"],
        "msg": "Input should be a valid date or datetime, input is too short", "input": "2026-11-1",
        "ctx": {"error": "input is too short"}}]}
    assert get(api, f"/video/charts/top-albums/monthly/us/{WEEK}").json() == {"detail": [
        {"type": "literal_error", "loc": ["path", "chart_type"],
         "msg": "Input should be 'top-songs', 'top-videos', 'top-artists', 'trending' or 'shorts'",
         "input": "top-albums", "ctx": {"expected": "'top-songs', 'top-videos', 'top-artists', 'trending' or 'shorts'"}},
        {"type": "literal_error", "loc": ["path", "period"], "msg": "Input should be 'weekly' or 'daily'",
         "input": "monthly", "ctx": {"expected": "'weekly' or 'daily'"}}]}
    assert get(api, "/video/zz/latest").json() == {"detail": [{
        "type": "value_error", "loc": ["path", "country"],
        "msg": "Value error, unknown country 'zz'; use 'global' or an ISO 3166-1 alpha-2 code such as 'us'",
        "input": "zz", "ctx": {"error": {}}}]}


@pytest.mark.parametrize("url,loc", [
    ("/video/snapshots?limit=501", ["query", "limit"]),
    ("/video/shorts/backfills?limit=201", ["query", "limit"]),
    (f"/video/charts/top-songs/weekly/us/{WEEK}?limit=101", ["query", "limit"]),
    (f"/video/shorts/global/hourly/{WEEK}", ["path", "period"]),
    ("/video/shorts/global/weekly/yesterday", ["path", "date"]),
    (f"/video/charts/shorts/weekly/xx/{WEEK}", ["path", "country"]),
])
def test_bad_parameters_are_422(api: TestClient, url: str, loc: list[str]) -> None:
    response = get(api, url)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == loc


def test_legacy_prefix_answers_exactly_as_the_public_one(api: TestClient) -> None:
    for path in ("/charts", f"/charts/top-songs/weekly/jp/{WEEK}?limit=3", "/shorts/backfills", "/jp/latest"):
        assert get(api, "/video-api" + path).content == get(api, "/video" + path).content
    assert api.get("/video-api/health").status_code == 200
    assert api.get("/video-api/charts").status_code == 401


def test_openapi_lists_every_route(api: TestClient) -> None:
    document = api.get("/video/openapi.json").json()
    assert set(document["paths"]) == {r.path for r in GROUP.routes} | {"/", "/openapi.json", "/fetch-logs", "/diff", "/exports", "/exports/{name}"}
    dated = document["paths"]["/charts/{chart_type}/{period}/{country}/{date}"]["get"]
    assert [p["name"] for p in dated["parameters"]] == ["chart_type", "period", "country", "date", "limit", "format", "include", "If-None-Match"]
    assert len(dated["responses"]["200"]["content"]["application/json"]["schema"]["anyOf"]) == 3


# --- failed, partial and later crawls -----------------------------------------------------------

def _crawl_with(path: Path, replies: dict, selection: dict[str, str | None]) -> list:
    with data_dir(path):
        return asyncio.run(crawl_group(GROUP, selection, now=lambda: NOW + timedelta(hours=1),
                                       transport=ReplayTransport({youtube.UPSTREAM: replies}), settings=run_settings()))


def _failed_logs(path: Path, target: str) -> list[tuple]:
    with sqlite3.connect(path / "video.sqlite") as db:
        return db.execute("SELECT status, http_status, error FROM fetch_log WHERE target = ? AND status = 'failed'",
                          (target,)).fetchall()


US_SONGS = Chart("top-songs", "weekly", "us")
US_SELECTION: dict[str, str | None] = {"chart_type": "top-songs", "period": "weekly", "country": "us"}


@pytest.mark.parametrize("reply,error", [
    (Reply(b'{"error":{"code":500}}', 500, "application/json"), "answered HTTP 500"),
    (Reply(b"<html><body>Our systems have detected unusual traffic</body></html>", 200), "got markup"),
    (Reply(samples.render(US_SONGS, WEEK)[:5000], 200, samples.JSON_TYPE), "body is not JSON"),
    (Reply(samples.render(US_SONGS, WEEK, size=60), 200, samples.JSON_TYPE), "expected 100 rows, upstream gave 60"),
])
def test_failed_or_partial_pull_keeps_the_last_good_snapshot(video_data: Path, tmp_path: Path, reply: Reply,
                                                             error: str) -> None:
    path = copy_data(video_data, tmp_path / "data")
    with client(path, [GROUP]) as before:
        kept = get(before, "/video/us/latest").json()
    table = samples.replies(catalogue(settings=run_settings()), NOW)
    table[request_key(youtube.browse_request("top-songs", "weekly", "us"))] = reply
    (outcome,) = _crawl_with(path, table, US_SELECTION)
    assert outcome.status == "failed" and error in (outcome.error or "")
    (log,) = _failed_logs(path, "top-songs/weekly/us")
    assert error in log[2]
    with client(path, [GROUP]) as after:
        assert get(after, "/video/us/latest").json() == kept
        assert get(after, "/video/charts").json()["charts"][1]["dates"] == 1


def test_a_later_backfill_does_not_replace_the_latest_chart(video_data: Path, tmp_path: Path) -> None:
    path = copy_data(video_data, tmp_path / "data")
    with data_dir(path):
        outcomes = asyncio.run(backfill(2, now=lambda: NOW + timedelta(hours=1),
                                        transport=ReplayTransport({youtube.UPSTREAM: samples.replies(catalogue(settings=run_settings()), NOW)}), settings=run_settings()))
    assert [o.status for o in outcomes] == ["ok", "ok"]
    with client(path, [GROUP]) as after:
        bundle = get(after, "/video/global/latest").json()
        shorts = next(c for c in bundle["charts"] if c["target"] == "shorts/weekly/global")
        assert shorts["snapshot"]["chart_date"] == WEEK
        latest = {c["target"]: c["snapshot"]["chart_date"] for c in get(after, "/video/latest").json()["charts"]}
        assert latest["shorts/weekly/global"] == WEEK
        assert get(after, "/video/shorts/backfills").json()["count"] == 2


def test_a_failing_week_is_recorded_and_the_others_commit(video_data: Path, tmp_path: Path) -> None:
    path = copy_data(video_data, tmp_path / "data")
    table = samples.backfill_replies(TODAY, 3)
    middle = BACKFILLED[1]
    table[request_key(youtube.browse_request("shorts", "weekly", "global", middle))] = Reply(b"gateway", 502)
    with data_dir(path):
        outcomes = asyncio.run(backfill(3, now=lambda: NOW, transport=ReplayTransport({youtube.UPSTREAM: table}), settings=run_settings()))
    assert [o.status for o in outcomes] == ["ok", "failed", "ok"]
    with client(path, [GROUP]) as after:
        run = get(after, "/video/shorts/backfills/latest").json()
        assert (run["targets"], run["ok"]) == (3, 2)
        assert run["detail"]["outcomes"][1]["error"].endswith("answered HTTP 502")
    assert _failed_logs(path, f"shorts/weekly/global@{middle}")


def test_a_week_other_than_the_one_asked_for_is_refused(video_data: Path, tmp_path: Path) -> None:
    path = copy_data(video_data, tmp_path / "data")
    wrong = samples.render(Chart("shorts", "weekly", "global"), BACKFILLED[0])
    table = {request_key(youtube.browse_request("shorts", "weekly", "global", BACKFILLED[1])): Reply(wrong, 200),
             **{k: v for k, v in samples.backfill_replies(TODAY, 1).items()}}
    with data_dir(path):
        outcomes = asyncio.run(backfill(2, now=lambda: NOW, transport=ReplayTransport({youtube.UPSTREAM: table}), settings=run_settings()))
    assert outcomes[1].status == "failed"
    assert f"asked for the chart ending {BACKFILLED[1]}, upstream sent {BACKFILLED[0]}" in (outcomes[1].error or "")


@pytest.mark.parametrize("weeks", [0, 105])
def test_backfill_weeks_are_bounded(weeks: int) -> None:
    with pytest.raises(ValueError, match="weeks must be 1 to 104"):
        asyncio.run(backfill(weeks, settings=run_settings()))


def test_backfill_command_declaration() -> None:
    (command,) = GROUP.commands
    assert command.verb == "backfill"
    assert [(a.name, a.type, a.default, a.choices) for a in command.args] == [
        ("weeks", int, 8, None), ("period", str, "weekly", ("weekly",))]


# --- catalogue and dates ------------------------------------------------------------------------

@pytest.mark.parametrize("today,expected", [
    (date(2026, 11, 20), date(2026, 11, 19)),  # Friday: yesterday's Thursday
    (date(2026, 11, 19), date(2026, 11, 12)),  # Thursday: this week is not complete
    (date(2026, 11, 18), date(2026, 11, 12)),
])
def test_latest_week_end_is_the_last_thursday_before_today(today: date, expected: date) -> None:
    assert latest_week_end(today) == expected
    assert past_week_ends(today, 3) == [(expected - timedelta(weeks=n)).isoformat() for n in range(3)]


def test_catalogue_follows_the_configured_countries(monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_VIDEO_COUNTRIES", "global, FR")
    assert [c.target for c in catalogue(settings=run_settings())] == [
        "top-songs/weekly/global", "top-songs/weekly/fr", "top-videos/weekly/global", "top-videos/weekly/fr",
        "top-artists/weekly/global", "top-artists/weekly/fr", "trending/daily/fr", "shorts/weekly/global",
        "shorts/daily/global"]
    assert [t.key for t in targets({"chart_type": "trending", "period": None, "country": None}, FIXED_NOW, settings=run_settings())] == ["trending/daily/fr"]
    with pytest.raises(InvalidParams):
        targets({"chart_type": "trending", "period": None, "country": "global"}, FIXED_NOW, settings=run_settings())
    configure("CHARTGW_VIDEO_COUNTRIES", "global,atlantis")
    with pytest.raises(ValueError, match="CHARTGW_VIDEO_COUNTRIES"):
        catalogue(settings=run_settings())
