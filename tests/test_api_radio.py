"""/radio end to end: the directory crawled from sample radio-browser answers whose stream URLs point at
local Icecast / SHOUTcast / ICY servers, plays recorded by the real monitor from those servers (the demo
seeder), and every endpoint over that file, answered as if at FIXED_NOW."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import subprocess
import sys
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from chartgw.api.group import crawl_group
from chartgw.api.params import SEARCH_RULE
from chartgw.core.settings import Settings
from chartgw.crawl.runner import CrawlContext
from chartgw.demo import radio as demo
from chartgw.demo.replay import ReplayServer
from chartgw.demo.samples import radio as samples
from chartgw.groups.radio import GROUP, directory
from chartgw.groups.radio.settings import COUNTRIES_SETTING
from chartgw.store import group_db_path
from chartgw.upstreams import radio_browser as rb
from tests import fixtures
from tests.fixtures import (
    FIXED_NOW,
    KEY_HEADERS,
    api_fixture,
    client,
    copy_data,
    data_dir,
    environment,
    group_data,
    replay_upstreams,
)
from tests.fixtures import settings as run_settings

NOW = FIXED_NOW


def ISO(moment: Any) -> str:
    return str(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
KEYED = ("/stations", "/current", "/history", "/tracks", "/summary", "/fetch-logs")


@pytest.fixture(scope="module")
def seeded(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return group_data(all_groups_data, tmp_path_factory.mktemp("radio"), GROUP.name)


api = api_fixture(GROUP, "seeded")


get = partial(fixtures.get, as_json=True)
"""The module's GET: `tests.fixtures.get` with its options."""


def db(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path / "radio.sqlite")


def pool() -> list[samples.SampleStation]:
    return demo.sample_pool(settings=run_settings())


def gone() -> samples.SampleStation:
    """The station the second directory crawl no longer lists (samples.listed, variant 1)."""
    first = pool()[0].countrycode
    return [s for s in pool() if s.countrycode == first][-1]


# --- public and keyed ----------------------------------------------------------------------------------


def test_root_openapi_and_health_are_public(api: TestClient) -> None:
    root = api.get("/radio/").json()
    paths = {(e["method"], e["path"]) for e in root["endpoints"]}
    for path in ("/radio/stations", "/radio/stations/{station_id}", "/radio/current", "/radio/current/{station_id}",
                 "/radio/history", "/radio/tracks", "/radio/summary", "/radio/health", "/radio/openapi.json"):
        assert ("GET", path) in paths
    assert api.get("/radio-api/openapi.json").json()["paths"]
    health = api.get("/radio/health").json()
    assert health["service"] == "radio"
    assert {t["target"] for t in health["targets"]} == set(directory.directory_targets(settings=run_settings()))
    assert not any(t["stale"] for t in health["targets"])
    # The seeder's monitor has stopped: the data is there, the monitor is not running.
    assert health["monitor"]["running"] is False and health["monitor"]["stopped_at"] is not None
    assert health["status"] == "degraded"
    assert health["monitor"]["stations_watched"] == len(pool()) - 1
    assert health["monitor"]["stations_failing"] == 1


@pytest.mark.parametrize("path", (*KEYED, "/stations/x", "/current/x"))
def test_keyed_routes_need_a_key(api: TestClient, path: str) -> None:
    assert api.get(f"/radio{path}").status_code == 401
    assert api.get(f"/radio-api{path}").status_code == 401


# --- the directory -------------------------------------------------------------------------------------


def test_stations_list_active_first_inactive_kept(api: TestClient) -> None:
    body = get(api, "/radio/stations?limit=500")
    assert body["total"] == body["count"] == len(pool())
    stations = body["stations"]
    assert [s["active"] for s in stations] == [True] * (len(pool()) - 1) + [False]
    last = stations[-1]
    origin = ISO(demo.seed_times(NOW, pool())[0])
    assert last["station_id"] == gone().station_id and last["inactive_since"] == "2026-11-20T04:30:00Z"
    assert last["first_seen_at"] == last["last_seen_at"] == origin
    active = [s for s in stations if s["active"]]
    assert [s["clickcount"] for s in active] == sorted((s["clickcount"] for s in active), reverse=True)
    one = active[0]
    assert isinstance(one["hls"], bool) and isinstance(one["lastcheckok"], bool) and one["tags"]
    assert one["url"].startswith("http://127.0.0.1:") and one["monitored"] is True


def test_stations_paging(api: TestClient) -> None:
    whole = [s["station_id"] for s in get(api, "/radio/stations?limit=500")["stations"]]
    page = get(api, "/radio/stations?limit=7&offset=7")
    assert page["total"] == len(whole) and [s["station_id"] for s in page["stations"]] == whole[7:14]


def test_station_filters_fold_case_and_accents(api: TestClient) -> None:
    city = get(api, "/radio/stations?q=CITY%20fm")["stations"]
    assert city and all("City FM" in s["name"] for s in city)
    berlin = get(api, "/radio/stations?city=B%C3%89RLIN")["stations"]
    assert berlin and {s["countrycode"] for s in berlin} == {"DE"}
    dance = get(api, "/radio/stations?genre=Dance&limit=500")["stations"]
    assert dance and all(any("dance" in t for t in s["tags"]) for s in dance)
    both = get(api, "/radio/stations?genre=dance&city=seoul")["stations"]
    assert both and all(s["countrycode"] == "KR" for s in both)
    assert get(api, "/radio/stations?q=zzzz-no-such")["total"] == 0


@pytest.mark.parametrize("query", ["q=!!", "genre=%20-%20", "city=..."])
def test_search_without_letters_is_422(api: TestClient, query: str) -> None:
    response = api.get(f"/radio/stations?{query}", headers=KEY_HEADERS)
    assert response.status_code == 422
    error = response.json()["detail"][0]
    assert error["type"] == "value_error" and error["msg"] == f"Value error, {SEARCH_RULE}"


@pytest.mark.parametrize("url", ["/radio/stations?limit=0", "/radio/stations?offset=-1", "/radio/current?limit=501",
                                 "/radio/history?limit=x", "/radio/tracks?q=%3F%3F", "/radio/current?artist=--",
                                 "/radio/history?title=.."])
def test_bad_parameters_are_422(api: TestClient, url: str) -> None:
    assert api.get(url, headers=KEY_HEADERS).status_code == 422


def test_station_detail_with_monitoring_state(api: TestClient) -> None:
    ok = next(s for s in pool() if s.kind == "icecast")
    body = get(api, f"/radio/stations/{ok.station_id}")
    assert body["station"]["name"] == ok.name
    monitoring = body["monitoring"]
    assert monitoring["monitored"] is True and monitoring["status"] == "ok" and monitoring["method"] == "icecast"
    assert monitoring["last_title"] and monitoring["last_error"] is None and monitoring["failures"] == 0
    assert body["current"]["stream_title"] == monitoring["last_title"] and body["plays"] > 1
    methods = {s.kind: get(api, f"/radio/stations/{s.station_id}")["monitoring"]["method"] for s in pool()[:3]}
    assert methods == {"icecast": "icecast", "icy": "icy", "shoutcast1": "shoutcast1"}


def test_broken_station_backs_off_with_its_reason(api: TestClient) -> None:
    broken = demo.unreachable(pool())
    monitoring = get(api, f"/radio/stations/{broken.station_id}")["monitoring"]
    assert monitoring["monitored"] is True and monitoring["status"] == "backoff"
    assert monitoring["error_reason"] == "unreachable" and "ConnectError" in monitoring["last_error"]
    assert monitoring["failures"] >= 2 and monitoring["next_attempt_at"] >= monitoring["error_at"]
    assert monitoring["method"] is None and monitoring["last_title"] is None


def test_inactive_station_is_unwatched_and_keeps_its_plays(api: TestClient) -> None:
    body = get(api, f"/radio/stations/{gone().station_id}")
    assert body["station"]["active"] is False and body["monitoring"]["monitored"] is False
    assert body["monitoring"]["status"] == "unwatched" and body["current"] is None and body["plays"] > 0
    history = get(api, f"/radio/history?station_id={gone().station_id}")
    assert history["total"] == body["plays"] and all(p["started_at"] < "2026-11-18" for p in history["plays"])


def test_unknown_station_is_404(api: TestClient) -> None:
    for url in ("/radio/stations/nope", "/radio/current/nope", "/radio/history?station_id=nope"):
        response = api.get(url, headers=KEY_HEADERS)
        assert response.status_code == 404
        assert "/radio/stations" in response.json()["detail"]


# --- plays ---------------------------------------------------------------------------------------------


def test_current_lists_every_heard_station(api: TestClient, seeded: Path) -> None:
    body = get(api, "/radio/current?limit=500")
    heard = {s.station_id for s in pool()} - {gone().station_id, demo.unreachable(pool()).station_id}
    missing = heard - {p["station_id"] for p in body["plays"]}
    with db(seeded) as conn:
        states = [conn.execute("SELECT * FROM station_state WHERE station_id = ?", (s,)).fetchall() for s in missing]
    assert not missing, states
    assert body["silence_seconds"] == 300 and body["total"] == body["count"] == len(heard)
    assert all(p["ended_at"] is None and p["last_heard_at"] == "2026-11-20T05:30:00Z" for p in body["plays"])
    starts = [p["started_at"] for p in body["plays"]]
    assert starts == sorted(starts, reverse=True)
    with db(seeded) as conn:
        open_titles = dict(conn.execute("SELECT station_id, stream_title FROM plays WHERE ended_at IS NULL"))
    assert all(open_titles[p["station_id"]] == p["stream_title"] for p in body["plays"])


def test_current_filters(api: TestClient) -> None:
    plays = get(api, "/radio/current?limit=500")["plays"]
    track = next(p for p in plays if p["kind"] == "track")
    artist = track["artist"].split(",")[0].upper()
    by_artist = get(api, f"/radio/current?artist={artist}")["plays"]
    assert track["id"] in {p["id"] for p in by_artist}
    assert all(p["kind"] == "track" for p in by_artist)
    by_title = get(api, f"/radio/current?title={track['title'].lower()}")["plays"]
    assert track["id"] in {p["id"] for p in by_title}
    assert get(api, "/radio/current?limit=2&offset=1")["plays"] == plays[1:3]


def test_current_of_one_station(api: TestClient) -> None:
    station = pool()[0]
    body = get(api, f"/radio/current/{station.station_id}")
    assert body["station_name"] == station.name and body["monitored"] is True and body["silent_since"] is None
    assert body["current"]["station_id"] == station.station_id and body["current"]["ended_at"] is None
    broken = get(api, f"/radio/current/{demo.unreachable(pool()).station_id}")
    assert broken["current"] is None and broken["monitoring"]["status"] == "backoff"


def test_silent_stations_are_not_current(seeded: Path) -> None:
    later = NOW + timedelta(minutes=10)
    with client(seeded, [GROUP], now=later) as c:
        assert c.get("/radio/current", headers=KEY_HEADERS).json()["total"] == 0
        station = c.get(f"/radio/current/{pool()[0].station_id}", headers=KEY_HEADERS).json()
        assert station["current"] is None and station["silent_since"] is not None
    with environment({"CHARTGW_RADIO_SILENCE_SECONDS": "3600"}), client(seeded, [GROUP], now=later) as c:
        assert c.get("/radio/current", headers=KEY_HEADERS).json()["total"] == len(pool()) - 2


def test_history_newest_first_and_filters(api: TestClient, seeded: Path) -> None:
    with db(seeded) as conn:
        total = conn.execute("SELECT count(*) FROM plays").fetchone()[0]
    body = get(api, "/radio/history?limit=500")
    assert body["total"] == total and body["count"] == min(total, 500)
    every = [p for offset in range(0, total, 500) for p in get(api, f"/radio/history?limit=500&offset={offset}")["plays"]]
    keys = [(p["started_at"], p["id"]) for p in every]
    assert len(every) == total and keys == sorted(keys, reverse=True)
    assert {p["kind"] for p in every} == {"track", "ident", "ad"}
    ident = next(p for p in every if p["kind"] == "ident")
    assert ident["artist"] is None and ident["title"] is None and "Your Number One Hit Music Station" in ident["stream_title"]
    station = pool()[3].station_id
    own = get(api, f"/radio/history?station_id={station}&limit=500")["plays"]
    assert own and all(p["station_id"] == station for p in own)
    # One play ends where the next begins (or at the last reading before a gap).
    ordered = sorted(own, key=lambda p: p["id"])
    for before, after in itertools.pairwise(ordered):
        assert before["ended_at"] is not None and before["ended_at"] <= after["started_at"]
        assert before["stream_title"] != after["stream_title"]
    track = next(p for p in body["plays"] if p["kind"] == "track")
    found = get(api, f"/radio/history?artist={track['artist'].lower()}&title={track['title'].upper()}&limit=500")
    assert track["id"] in {p["id"] for p in found["plays"]}
    assert get(api, "/radio/history?limit=3&offset=2")["plays"] == body["plays"][2:5]


def test_tracks(api: TestClient, seeded: Path) -> None:
    with db(seeded) as conn:
        track_plays = conn.execute("SELECT count(*) FROM plays WHERE kind = 'track'").fetchone()[0]
        distinct = conn.execute("SELECT count(DISTINCT title_key || '|' || artist_key) FROM plays"
                                " WHERE kind = 'track'").fetchone()[0]
    body = get(api, "/radio/tracks?limit=500")
    assert body["total"] == distinct == body["count"]
    assert sum(t["plays"] for t in body["tracks"]) == track_plays
    assert [t["plays"] for t in body["tracks"]] == sorted((t["plays"] for t in body["tracks"]), reverse=True)
    top = body["tracks"][0]
    assert 1 <= top["stations"] <= top["plays"] and top["first_played_at"] <= top["last_played_at"]
    found = get(api, f"/radio/tracks?q={top['title'].upper()}")["tracks"]
    assert (top["artist"], top["title"]) in {(t["artist"], t["title"]) for t in found}
    assert get(api, "/radio/tracks?limit=2&offset=1")["tracks"] == body["tracks"][1:3]


def test_summary(api: TestClient, seeded: Path) -> None:
    body = get(api, "/radio/summary")
    assert (body["stations_in_directory"], body["stations_active"], body["stations_monitored"]) == (
        len(pool()), len(pool()) - 1, len(pool()) - 1)
    day, week = body["windows"]
    assert (day["window"], week["window"]) == ("24h", "7d")
    assert day["since"] == "2026-11-19T05:30:00Z" and week["since"] == "2026-11-13T05:30:00Z"
    with db(seeded) as conn:
        recent = conn.execute("SELECT count(*) FROM plays WHERE started_at >= '2026-11-19T05:30:00Z'").fetchone()[0]
        every = conn.execute("SELECT count(*) FROM plays").fetchone()[0]
    assert (day["plays"], week["plays"]) == (recent, every) and recent < every
    for window in (day, week):
        assert 0 < window["distinct_tracks"] <= window["track_plays"] < window["plays"]
        assert 0 < len(window["top_tracks"]) <= 10 and 0 < len(window["top_artists"]) <= 10
        plays = [t["plays"] for t in window["top_tracks"]]
        assert plays == sorted(plays, reverse=True)
        artists = [a["plays"] for a in window["top_artists"]]
        assert artists == sorted(artists, reverse=True) and all("," not in a["artist"] for a in window["top_artists"])


def test_plays_roll_up_as_hourly_entries_for_artist_history(seeded: Path) -> None:
    with db(seeded) as conn:
        rows = conn.execute("SELECT target, chart_date, chart_hour, row_count FROM snapshots WHERE target GLOB 'plays/*'"
                            " ORDER BY target").fetchall()
        record = conn.execute("SELECT e.record FROM entries e JOIN snapshots s ON s.id = e.snapshot_id"
                              " WHERE s.target = 'plays/us' AND e.rank = 1").fetchone()[0]
    assert {r[0] for r in rows} == {f"plays/{cc}" for cc in run_settings().get(COUNTRIES_SETTING)}
    # Completed hours only: 05h three days ago (session one); today's 05h (session two) is not over yet.
    assert {(r[1], r[2]) for r in rows} == {("2026-11-17", 5)} and all(r[3] > 0 for r in rows)
    import json

    entry = GROUP.entries.read("plays/us", json.loads(record)) if GROUP.entries else None
    assert entry is not None and entry.market == "us" and entry.title and entry.artists
    assert GROUP.entries is not None and GROUP.entries.is_sub_daily("plays/us")
    assert GROUP.entries.read("directory/us", {"artist": "x", "title": "y"}) is None


def test_fetch_logs(api: TestClient) -> None:
    body = get(api, "/radio/fetch-logs?limit=1000")
    targets = {e["target"] for e in body["entries"]}
    assert {"servers", "directory/us", "directory-tag/top 40", "plays/us"} <= targets
    assert all(e["status"] == "ok" for e in body["entries"])


# --- the crawl -----------------------------------------------------------------------------------------


def _replies(variant: int = 0) -> dict[Any, Any]:
    urls = {s.station_id: f"http://127.0.0.1:9/{s.station_id}" for s in pool()}
    return demo.demo_replies(pool(), urls, variant, settings=run_settings())


def test_directory_fails_over_to_the_next_server(seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = copy_data(seeded, tmp_path / "data")
    down = f"http://127.0.0.1:{samples.free_port()}"
    broken = ReplayServer({}).start()  # answers 404 to everything: a server out of sync
    try:
        with replay_upstreams({rb.UPSTREAM: _replies(1)}) as servers, data_dir(data):
            live = servers[rb.UPSTREAM].origin

            def origins(ctx: CrawlContext, settings: Settings) -> list[str]:
                return [down, broken.origin, live]

            monkeypatch.setattr(directory, "directory_origins", origins)
            outcomes = asyncio.run(crawl_group(GROUP, {}, now=lambda: NOW + timedelta(hours=1), settings=run_settings()))
    finally:
        broken.stop()
    assert all(o.status == "ok" for o in outcomes), outcomes
    with sqlite3.connect(data / "radio.sqlite") as conn:
        source = conn.execute("SELECT source FROM snapshots WHERE target = 'directory/de' ORDER BY id DESC").fetchone()[0]
    assert source.startswith(live + "/json/stations/bycountrycodeexact/DE?order=clickcount")


def test_failed_crawl_keeps_the_last_good_directory(seeded: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    data = copy_data(seeded, tmp_path / "data")
    with sqlite3.connect(data / "radio.sqlite") as conn:
        before = conn.execute("SELECT station_id, active, record FROM stations ORDER BY station_id").fetchall()
        latest = conn.execute("SELECT max(id) FROM snapshots WHERE target = 'directory/us'").fetchone()[0]
    down = f"http://127.0.0.1:{samples.free_port()}"
    with replay_upstreams({rb.UPSTREAM: {}}), data_dir(data):  # the server list itself is a 404 too
        monkeypatch.setattr(directory, "directory_origins", lambda ctx, settings: [down])
        outcomes = asyncio.run(crawl_group(GROUP, {}, now=lambda: NOW + timedelta(days=1), settings=run_settings()))
        assert all(o.status == "failed" for o in outcomes)
        assert "every server failed" in (next(o for o in outcomes if o.target == "directory/us").error or "")
        with client(data, [GROUP], now=NOW + timedelta(days=1)) as c:
            logs = c.get("/radio/fetch-logs?status=failed", headers=KEY_HEADERS).json()
            assert {e["target"] for e in logs["entries"]} >= {"servers", "directory/us"}
    with sqlite3.connect(data / "radio.sqlite") as conn:
        assert conn.execute("SELECT station_id, active, record FROM stations ORDER BY station_id").fetchall() == before
        assert conn.execute("SELECT max(id) FROM snapshots WHERE target = 'directory/us'").fetchone()[0] == latest


def test_a_station_listed_again_is_active_again(seeded: Path, tmp_path: Path) -> None:
    data = copy_data(seeded, tmp_path / "data")
    with replay_upstreams({rb.UPSTREAM: _replies(0)}), data_dir(data):
        outcomes = asyncio.run(crawl_group(GROUP, {}, now=lambda: NOW + timedelta(days=1), settings=run_settings()))
    assert all(o.status == "ok" for o in outcomes)
    with sqlite3.connect(data / "radio.sqlite") as conn:
        row = conn.execute("SELECT active, inactive_since, first_seen_at FROM stations WHERE station_id = ?",
                           (gone().station_id,)).fetchone()
        assert row == (1, None, ISO(demo.seed_times(NOW, pool())[0]))
        assert conn.execute("SELECT count(*) FROM stations").fetchone()[0] == len(pool())


def test_directory_limit_and_configured_lists(seeded: Path) -> None:
    with environment({"CHARTGW_RADIO_COUNTRIES": "de,kr", "CHARTGW_RADIO_TAGS": "Dance, 80s/90s",
                      "CHARTGW_RADIO_DIRECTORY_LIMIT": "7"}):
        chosen = directory.targets({}, FIXED_NOW, settings=run_settings())
        assert [t.key for t in chosen] == ["directory/de", "directory/kr", "directory-tag/dance", "directory-tag/80s-90s"]
    with environment({"CHARTGW_RADIO_COUNTRIES": "xx"}), pytest.raises(ValueError):
        directory.targets({}, FIXED_NOW, settings=run_settings())


# --- the monitor command -------------------------------------------------------------------------------


CLI = """
import sys
from chartgw import cli
from chartgw.demo import radio as demo
from chartgw.groups import radio
if radio.GROUP not in cli.GROUPS:  # until the group is registered in chartgw.groups
    cli.GROUPS = (*cli.GROUPS, radio.GROUP)
sys.exit(cli.main(sys.argv[1:]))
"""


def test_monitor_command_runs_and_stops(seeded: Path, tmp_path: Path) -> None:
    """`chartgw monitor radio --run-for 1.5`: the real CLI path (outside the crawl lock); the sample streams are
    gone, so every station fails and backs off, the run is recorded, and the outcome line says why."""
    data = copy_data(seeded, tmp_path / "data")
    env = {"CHARTGW_DATA_DIR": str(data), "CHARTGW_RADIO_READ_TIMEOUT_SECONDS": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", CLI, "monitor", "radio", "--run-for", "1.5"], env=env,
                          capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert "monitor" in done.stderr and "station errors: {" in done.stderr and "'unreachable': " in done.stderr  # any order
    with sqlite3.connect(data / "radio.sqlite") as conn:
        runs = conn.execute("SELECT stations, stopped_at FROM monitor_runs ORDER BY id DESC").fetchall()
        failing = conn.execute("SELECT count(*) FROM station_state WHERE status = 'backoff'").fetchone()[0]
    assert len(runs) == 3 and runs[0][0] == len(pool()) - 1 and runs[0][1] is not None
    assert failing == len(pool()) - 1
    with data_dir(data):
        assert group_db_path("radio", settings=run_settings()) == data / "radio.sqlite"


def test_before_any_crawl_nothing_is_a_500(tmp_path: Path) -> None:
    with client(tmp_path, [GROUP]) as c:
        for path in KEYED:
            response = c.get(f"/radio{path}", headers=KEY_HEADERS)
            assert response.status_code == 200, (path, response.text)
        assert c.get("/radio/stations", headers=KEY_HEADERS).json() == {"total": 0, "count": 0, "stations": []}
        assert c.get("/radio/current/x", headers=KEY_HEADERS).status_code == 404
        health = c.get("/radio/health").json()
        assert health["status"] == "degraded" and health["monitor"]["running"] is False


def test_openapi_documents_the_routes() -> None:
    from chartgw.http.app import service_routes

    routes = service_routes(GROUP)
    document = next(r for r in routes if r.path == "/openapi.json")
    doc: Any = asyncio.run(document.handler(None))  # type: ignore[arg-type]  # the document handler ignores its call
    for route in routes:
        operation = doc["paths"][route.path][route.method.lower()]
        assert [p["name"] for p in operation["parameters"] if p["in"] != "header"] == [p.name for p in route.params]
    station = doc["components"]["schemas"]["DirectoryStation"]["properties"]
    assert {"station_id", "tags", "hls", "active", "inactive_since", "monitored"} <= set(station)


def test_seeding_again_refreshes_the_directory_only(seeded: Path, tmp_path: Path) -> None:
    """`chartgw demo --keep-fresh` seeds every 10 minutes: plays are not seeded twice, and while the live
    demo monitor runs (a fresh heartbeat) the file is left to it."""
    data = copy_data(seeded, tmp_path / "data")
    later = NOW + timedelta(minutes=10)
    with sqlite3.connect(data / "radio.sqlite") as conn:
        plays = conn.execute("SELECT count(*) FROM plays").fetchone()[0]
    with data_dir(data):
        outcomes = asyncio.run(demo.seed(later, settings=run_settings()))
    assert outcomes and all(o.status == "ok" for o in outcomes)
    with sqlite3.connect(data / "radio.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM plays").fetchone()[0] == plays
        assert conn.execute("SELECT max(fetched_at) FROM snapshots WHERE target = 'directory/us'").fetchone()[0] == \
            ISO(later)
        conn.execute("INSERT INTO monitor_runs (pid, started_at, heartbeat_at, stations, plays) VALUES (1, ?, ?, 0, 0)",
                     (ISO(later), ISO(later)))
    with data_dir(data):
        assert asyncio.run(demo.seed(later + timedelta(seconds=30), settings=run_settings())) == []
