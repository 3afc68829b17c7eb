"""/short-video end to end: the app over a data folder the real Chartmetric crawl filled from sample answers, and
the crawl itself (token kept until it expires, renewed on a 401, paging to the chart's length, failures)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import date, timedelta
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
from starlette.testclient import TestClient

from chartgw import cli
from chartgw.api.group import crawl_group, group_policy
from chartgw.core import config
from chartgw.core.clock import fixed
from chartgw.demo.replay import BODY, ReplayKey, Reply, replay_key
from chartgw.demo.samples import short_video as samples
from chartgw.demo.short_video import DEMO_SIZE
from chartgw.groups import GROUPS
from chartgw.groups import short_video as sv
from chartgw.groups.short_video import GROUP, TOKEN_SETTING, targets
from chartgw.store import SnapshotReader, group_db_path
from tests import fixtures
from tests.fixtures import FIXED_NOW, KEY_HEADERS, api_fixture, client, configure, environment, group_data
from tests.fixtures import settings as run_settings

NOW = FIXED_NOW
YESTERDAY = (NOW - timedelta(days=1)).date()
TOKEN_ENV: dict[str, str | None] = {TOKEN_SETTING.variable: samples.SAMPLE_REFRESH_TOKEN}


@pytest.fixture(scope="module")
def video_data(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo seed: daily charts of 3 days and weekly charts of 3 weeks, 150 rows each (two pages)."""
    return group_data(all_groups_data, tmp_path_factory.mktemp("short-video"), GROUP.name)


api = api_fixture(GROUP, "video_data")
"""The app as deployed without a refresh token: it still serves what is stored."""


get = partial(fixtures.get, as_json=True)
"""The module's GET: `tests.fixtures.get` with its options."""


def sample(code2: str | None, interval: str, variant: int) -> list[Any]:
    return samples.chart_rows(code2, interval, variant, DEMO_SIZE)


# --- endpoints ------------------------------------------------------------------------------------


def test_health_is_public_and_says_when_no_token_is_configured(api: TestClient) -> None:
    body = api.get("/short-video/health").json()
    assert body["status"] == "degraded" and body["token_configured"] is False
    assert "CHARTGW_CHARTMETRIC_REFRESH_TOKEN is not set" in body["detail"]
    coverage = {(c["code2"], c["interval"]): c for c in body["coverage"]}
    assert len(coverage) == 20 and all(c["crawled"] and c["row_count"] == 150 for c in coverage.values())
    assert coverage[("us", "daily")]["chart_date"] == YESTERDAY.isoformat()
    assert coverage[("global", "weekly")]["stale"] is False


def test_health_is_ok_with_a_token(video_data: Path) -> None:
    with environment(TOKEN_ENV), client(video_data, [GROUP]) as fresh:
        body = fresh.get("/short-video/health").json()
    assert body["status"] == "ok" and body["token_configured"] is True and "crawling" in body["detail"]


def test_health_counts_stale_charts_a_week_later(video_data: Path) -> None:
    with environment(TOKEN_ENV), client(video_data, [GROUP], now=NOW + timedelta(days=3)) as later:
        body = later.get("/short-video/health").json()
    stale = {(c["code2"], c["interval"]) for c in body["coverage"] if c["stale"]}
    assert body["status"] == "degraded" and ("us", "daily") in stale and ("us", "weekly") not in stale


def test_chart_rows_are_the_sample_chart_field_by_field(api: TestClient) -> None:
    body = get(api, "/short-video/chart?code2=us&interval=daily&limit=150")
    assert (body["code2"], body["interval"], body["total"], body["offset"], body["count"]) == ("us", "daily", 150, 0, 150)
    snapshot = body["snapshot"]
    assert snapshot["target"] == "us/daily" and snapshot["chart_date"] == YESTERDAY.isoformat()
    assert snapshot["cadence_seconds"] == 86400 and snapshot["stale"] is False
    assert f"date={YESTERDAY.isoformat()}" in snapshot["source"] and "code2=US" in snapshot["source"]
    for row, entry in zip(sample("us", "daily", 2), body["entries"], strict=True):
        song = row.song
        assert (entry["rank"], entry["name"], entry["artists"]) == (row.rank, song.title, list(song.artists))
        assert entry["artist"] == ", ".join(song.artists)
        assert entry["previous_rank"] == row.previous_rank
        isrc = samples.isrc(song)
        assert entry["isrc"] == (isrc.upper() if isrc else None)
        assert entry["track_id"] == str(samples.cm_track(song))
        assert entry["sound_id"] == samples.sound_id(song) == entry["sound_ids"][0]
        assert entry["posts"] > 0 and entry["views"] > entry["posts"]
    assert any(len(e["sound_ids"]) > 1 for e in body["entries"])
    assert any(e["isrc"] is None for e in body["entries"])


def test_chart_defaults_offset_and_weekly(api: TestClient) -> None:
    default = get(api, "/short-video/chart")
    assert (default["code2"], default["interval"], default["count"]) == ("global", "daily", 100)
    page = get(api, "/short-video/chart?code2=gb&interval=weekly&limit=20&offset=140")
    assert page["code2"] == "gb" and page["count"] == 10 and [e["rank"] for e in page["entries"]] == list(range(141, 151))
    assert page["snapshot"]["cadence_seconds"] == 7 * 86400
    assert get(api, "/short-video/chart?offset=150")["count"] == 0


@pytest.mark.parametrize("url,loc", [
    ("/short-video/chart?code2=zz", ["query", "code2"]),
    ("/short-video/chart?interval=monthly", ["query", "interval"]),
    ("/short-video/chart?limit=0", ["query", "limit"]),
    ("/short-video/chart?offset=-1", ["query", "offset"]),
    ("/short-video/history?track_id=abc", ["query", "track_id"]),
    ("/short-video/history?sound_id=7x", ["query", "sound_id"]),
    ("/short-video/history?limit=1000", ["query", "limit"]),
])
def test_bad_parameters_are_422(api: TestClient, url: str, loc: list[str]) -> None:
    response = api.get(url, headers=KEY_HEADERS)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == loc


def test_a_chart_not_stored_is_a_404_naming_the_crawled_countries(api: TestClient) -> None:
    response = api.get("/short-video/chart?code2=nz", headers=KEY_HEADERS)
    assert response.status_code == 404 and "crawled countries: global, us" in response.json()["detail"]
    assert api.get("/short-video/history?code2=nz", headers=KEY_HEADERS).status_code == 404


def test_data_endpoints_need_a_key_and_the_legacy_prefix_answers_the_same(api: TestClient) -> None:
    for path in ("/chart", "/history", "/snapshots", "/fetch-logs"):
        assert api.get("/short-video" + path).status_code == 401
    assert api.get("/short-video/").status_code == 200 and api.get("/short-video/openapi.json").status_code == 200
    assert get(api, "/short-video-api/chart?code2=jp&limit=3") == get(api, "/short-video/chart?code2=jp&limit=3")


def test_track_history_by_track_id_and_sound_id(api: TestClient) -> None:
    rows = {variant: {r.song.title: r for r in sample("kr", "daily", variant)} for variant in range(3)}
    song = sample("kr", "daily", 2)[4].song
    track_id = str(samples.cm_track(song))
    body = get(api, f"/short-video/history?code2=kr&track_id={track_id}")
    assert body["track"]["name"] == song.title and body["track"]["track_id"] == track_id
    expected = [(d.isoformat(), rows[v][song.title].rank) for v, d in ((2, YESTERDAY), (1, YESTERDAY - timedelta(1)),
                                                                      (0, YESTERDAY - timedelta(2))) if song.title in rows[v]]
    assert [(a["chart_date"], a["rank"]) for a in body["appearances"]] == expected
    assert all(a["posts"] > 0 for a in body["appearances"]) and body["count"] == len(expected)
    by_sound = get(api, f"/short-video/history?code2=kr&sound_id={samples.sound_id(song)}")
    assert by_sound["appearances"] == body["appearances"]
    both = get(api, f"/short-video/history?code2=kr&sound_id={samples.sound_id(song)}&track_id={track_id}&limit=1")
    assert both["count"] == 1 and both["appearances"][0] == body["appearances"][0]
    nothing = get(api, "/short-video/history?code2=kr&track_id=1")
    assert (nothing["count"], nothing["track"], nothing["appearances"]) == (0, None, [])


def test_history_without_a_filter_is_the_charts_movement(api: TestClient) -> None:
    body = get(api, "/short-video/history?code2=us&interval=weekly")
    assert body["count"] == 3 and [c["chart_date"] for c in body["charts"]] == [
        (YESTERDAY - timedelta(weeks=w)).isoformat() for w in range(3)]
    newest, _, oldest = body["charts"]
    before = {r.song.title: r.rank for r in sample("us", "weekly", 1)}
    now = {r.song.title: r.rank for r in sample("us", "weekly", 2)}
    assert [(m["name"], m["rank"]) for m in newest["entered"]] == sorted(
        ((t, r) for t, r in now.items() if t not in before), key=lambda x: x[1])
    assert [(m["name"], m["previous_rank"]) for m in newest["left"]] == sorted(
        ((t, r) for t, r in before.items() if t not in now), key=lambda x: x[1])
    assert newest["entered"] and newest["left"]
    assert (oldest["previous_chart_date"], oldest["entered"], oldest["left"]) == (None, [], [])
    assert get(api, "/short-video/history?code2=us&interval=weekly&limit=1")["count"] == 1


def test_snapshots_and_fetch_logs(api: TestClient) -> None:
    snapshots = get(api, "/short-video/snapshots?limit=500")
    assert snapshots["count"] == 60
    logs = get(api, "/short-video/fetch-logs")
    assert logs["count"] == 60 and all(e["status"] == "ok" and e["rows"] == 150 for e in logs["entries"])


def test_entries_map_for_artist_history(video_data: Path) -> None:
    import sqlite3

    db = sqlite3.connect(video_data / "short-video.sqlite")
    rows = db.execute("SELECT s.target, e.record FROM entries e JOIN snapshots s ON s.id = e.snapshot_id").fetchall()
    mapping = GROUP.entries
    assert mapping is not None
    mapped = [mapping.read(target, json.loads(record)) for target, record in rows]
    assert all(m is not None for m in mapped)
    markets = {m.market for m in mapped if m is not None}
    assert "global" in markets and "us" in markets
    first = next(m for m in mapped if m is not None and "isrc" in m.ids)
    assert first.ids["analytics_track"].isdigit() and first.title


def test_before_any_crawl_health_lists_the_configured_charts_as_missing(tmp_path: Path) -> None:
    with client(tmp_path, [GROUP]) as empty:
        body = empty.get("/short-video/health").json()
        assert body["status"] == "degraded" and len(body["coverage"]) == 20
        assert all(c["snapshot_id"] is None and c["stale"] for c in body["coverage"])
        assert empty.get("/short-video/chart", headers=KEY_HEADERS).status_code == 404


# --- the crawl ------------------------------------------------------------------------------------


class FakeChartmetric:
    """Chartmetric on an httpx MockTransport: the sample table, requests recorded, chosen tokens refused."""

    def __init__(self, table: dict[ReplayKey, Reply]) -> None:
        self.table = table
        self.seen: list[httpx.Request] = []
        self.refused: set[str] = set()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        params = parse_qsl(request.url.query.decode(), keep_blank_values=True)
        if request.content:
            params.append((BODY, request.content.decode()))
        auth = request.headers.get("authorization", "")
        if auth.removeprefix("Bearer ") in self.refused:
            return httpx.Response(401, content=samples.unauthorized_body())
        reply = self.table.get(replay_key(request.method, request.url.path, params))
        if reply is None:
            return httpx.Response(404, content=b'{"error": "no such chart"}')
        return httpx.Response(reply.status, content=reply.body, headers={"content-type": reply.content_type})

    def crawl(self, selection: dict[str, str | None], at: Any = NOW, answer: Callable[..., Any] | None = None,
              ) -> list[Any]:
        """`chartgw crawl short-video` against this fake (the crawl's transport), or against `answer`, a handler
        in front of it."""
        transport = httpx.MockTransport(answer or self)
        return asyncio.run(crawl_group(GROUP, selection, now=fixed(at), transport=transport, settings=run_settings()))

    def paths(self) -> list[str]:
        return [r.url.path + ("?offset=" + r.url.params["offset"] if "offset" in r.url.params else "") for r in self.seen]


@pytest.fixture
def fake() -> FakeChartmetric:
    table = samples.token_replies()
    for code2 in (None, "us"):
        table.update(samples.chart_replies(code2, "daily", YESTERDAY, 5, 210))
    chartmetric = FakeChartmetric(table)
    configure("CHARTGW_UPSTREAM_CHARTMETRIC", "http://chartmetric.invalid")
    configure(TOKEN_SETTING.variable, samples.SAMPLE_REFRESH_TOKEN)
    return chartmetric


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    configure("CHARTGW_DATA_DIR", str(tmp_path))
    return tmp_path


def test_the_crawl_pages_until_the_charts_length(fake: FakeChartmetric, fresh: Path) -> None:
    outcomes = fake.crawl({"code2": "us", "interval": "daily"})
    assert [(o.target, o.status, o.rows) for o in outcomes] == [("us/daily", "ok", 210)]
    assert fake.paths() == ["/api/token", "/api/charts/tiktok/tracks?offset=0", "/api/charts/tiktok/tracks?offset=100",
                            "/api/charts/tiktok/tracks?offset=200"]
    assert all(r.headers["authorization"] == f"Bearer {samples.SAMPLE_ACCESS_TOKEN}" for r in fake.seen[1:])
    assert json.loads(fake.seen[0].content) == {"refreshtoken": samples.SAMPLE_REFRESH_TOKEN}


def test_the_access_token_is_kept_until_it_expires(fake: FakeChartmetric, fresh: Path) -> None:
    fake.crawl({"code2": "us", "interval": "daily"})
    kept = json.loads((fresh / sv.TOKEN_FILE).read_text())
    assert kept["token"] == samples.SAMPLE_ACCESS_TOKEN and kept["expires_at"] == "2026-11-20T06:30:00Z"
    assert "sample-refresh-token" not in (fresh / sv.TOKEN_FILE).read_text()
    assert oct((fresh / sv.TOKEN_FILE).stat().st_mode & 0o777) == "0o600"
    fake.crawl({"code2": "global", "interval": "daily"}, NOW + timedelta(minutes=50))
    assert [p for p in fake.paths() if p == "/api/token"] == ["/api/token"]
    fake.crawl({"code2": "global", "interval": "daily"}, NOW + timedelta(minutes=59, seconds=30))  # within the margin
    assert [p for p in fake.paths() if p == "/api/token"] == ["/api/token"] * 2


def test_a_changed_refresh_token_never_reuses_the_kept_access_token(fake: FakeChartmetric, fresh: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fake.crawl({"code2": "us", "interval": "daily"})
    configure(TOKEN_SETTING.variable, "another-key")
    outcomes = fake.crawl({"code2": "us", "interval": "daily"}, NOW + timedelta(minutes=1))
    assert outcomes[0].status == "failed" and "token exchange refused" in (outcomes[0].error or "")
    assert "CHARTGW_CHARTMETRIC_REFRESH_TOKEN" in (outcomes[0].error or "")


def test_a_401_renews_the_token_once_and_asks_again(fake: FakeChartmetric, fresh: Path) -> None:
    fake.crawl({"code2": "us", "interval": "daily"})
    fake.refused.add(samples.SAMPLE_ACCESS_TOKEN)
    fake.table.update({k: Reply(samples.token_body("renewed-token"), 200, samples.JSON_TYPE)
                       for k in samples.token_replies()})
    fake.table.update(samples.chart_replies(None, "daily", YESTERDAY, 5, 210, token="renewed-token"))
    fake.seen.clear()
    outcomes = fake.crawl({"code2": "global", "interval": "daily"}, NOW + timedelta(minutes=5))
    assert outcomes[0].status == "ok" and outcomes[0].rows == 210
    assert fake.paths()[:3] == ["/api/charts/tiktok/tracks?offset=0", "/api/token", "/api/charts/tiktok/tracks?offset=0"]
    assert fake.seen[2].headers["authorization"] == "Bearer renewed-token"
    assert json.loads((fresh / sv.TOKEN_FILE).read_text())["token"] == "renewed-token"
    fake.refused.add("renewed-token")
    failed = fake.crawl({"code2": "global", "interval": "daily"}, NOW + timedelta(minutes=6))[0]
    assert failed.status == "failed" and "unauthorized (401)" in (failed.error or "")


def test_the_charts_of_one_crawl_share_one_token_exchange(fake: FakeChartmetric, fresh: Path) -> None:
    async def answer(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.01)  # an answer takes a while, as over a network: the charts' fetches interleave
        return fake(request)

    outcomes = fake.crawl({"interval": "daily"}, answer=answer)
    assert {(o.target, o.status) for o in outcomes} >= {("global/daily", "ok"), ("us/daily", "ok")}
    assert [p for p in fake.paths() if p == "/api/token"] == ["/api/token"]


def test_pages_come_through_the_crawls_fetcher(fake: FakeChartmetric, fresh: Path) -> None:
    """The fetcher's rules hold for Chartmetric too: a redirect to another host is a failed fetch, never followed,
    and the group asks one request at a time with a pause of about a second against the real API."""
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("offset") == "100":
            # A reserved name (RFC 2606 .invalid) that never resolves; every request ends at this MockTransport.
            return httpx.Response(302, headers={"location": "https://elsewhere.invalid/tracks"})
        return fake(request)

    outcome = fake.crawl({"code2": "us", "interval": "daily"}, answer=answer)[0]
    assert outcome.status == "failed" and "redirected to another host (elsewhere.invalid)" in (outcome.error or "")
    assert not [r for r in fake.seen if r.url.host == "elsewhere.invalid"]
    configure("CHARTGW_CRAWL_DELAY_SECONDS", "0.2")
    policy = group_policy(GROUP, settings=run_settings())
    assert (policy.per_upstream, policy.delay_seconds) == (1, sv.POLITE_DELAY_SECONDS)


def _latest_id(target: str) -> int | None:
    async def read() -> int | None:
        reader = SnapshotReader(group_db_path("short-video", settings=run_settings()))
        row = await reader.latest(target)
        await reader.close()
        return row.id if row else None

    return asyncio.run(read())


@pytest.mark.parametrize("breakage", ["missing page", "short chart", "server error", "html"])
def test_a_failed_crawl_keeps_the_last_good_snapshot(fake: FakeChartmetric, fresh: Path, breakage: str) -> None:
    fake.crawl({"code2": "us", "interval": "daily"})
    good = _latest_id("us/daily")
    later = NOW + timedelta(days=1)
    table = samples.chart_replies("us", "daily", later.date() - timedelta(days=1), 6, 210)
    keys = sorted(table, key=lambda k: dict(k[2])["offset"])
    if breakage == "missing page":
        del table[keys[1]]
    elif breakage == "short chart":
        body = json.loads(table[keys[2]].body)
        body["obj"]["data"] = body["obj"]["data"][:5]
        table[keys[2]] = Reply(json.dumps(body).encode(), 200, samples.JSON_TYPE)
    elif breakage == "server error":
        table[keys[0]] = Reply(b'{"error": "internal"}', 503, samples.JSON_TYPE)
    else:
        table[keys[0]] = Reply(b"<html><body>maintenance</body></html>", 200, "text/html")
    fake.table.update(table)
    outcome = fake.crawl({"code2": "us", "interval": "daily"}, later)[0]
    assert outcome.status == "failed" and outcome.error
    assert _latest_id("us/daily") == good
    with client(fresh, [GROUP], now=later) as app:
        logs = get(app, "/short-video/fetch-logs?status=failed")["entries"]
        assert len(logs) == 1 and logs[0]["target"] == "us/daily"
        assert get(app, "/short-video/chart?code2=us")["snapshot"]["id"] == good


def test_without_a_token_the_crawl_stops_naming_the_setting(monkeypatch: pytest.MonkeyPatch, fresh: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    configure(TOKEN_SETTING.variable, None)
    with pytest.raises(config.SettingError, match="CHARTGW_CHARTMETRIC_REFRESH_TOKEN"):
        targets({}, FIXED_NOW, settings=run_settings())
    monkeypatch.setattr(cli, "GROUPS", (*GROUPS, GROUP) if GROUP not in GROUPS else GROUPS)
    assert cli.main(["crawl", "short-video", "--interval", "daily"], run_settings()) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CHARTGW_CHARTMETRIC_REFRESH_TOKEN" in err[0]
    assert not (fresh / "short-video.sqlite").exists() or _latest_id("us/daily") is None


def test_targets_follow_the_settings_and_the_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    configure(TOKEN_SETTING.variable, "x")
    configure("CHARTGW_SHORT_VIDEO_COUNTRIES", "global,KR")
    configure("CHARTGW_SHORT_VIDEO_INTERVALS", "weekly")
    assert [t.key for t in targets({}, FIXED_NOW, settings=run_settings())] == ["global/weekly", "kr/weekly"]
    assert [t.key for t in targets({"code2": "nz", "interval": "daily"}, FIXED_NOW, settings=run_settings())] == ["nz/daily"]
    configure("CHARTGW_SHORT_VIDEO_INTERVALS", "hourly")
    with pytest.raises(config.SettingError, match="CHARTGW_SHORT_VIDEO_INTERVALS"):
        targets({}, FIXED_NOW, settings=run_settings())


def test_the_chart_asked_is_yesterdays() -> None:
    assert sv.chart_date_asked(NOW) == "2026-11-19"
    assert date.fromisoformat(sv.chart_date_asked(NOW.replace(hour=0, minute=0))) == date(2026, 11, 19)


def test_schedules_run_daily_and_weekly_charts() -> None:
    assert [s.args for s in GROUP.schedules] == [("--interval", "daily"), ("--interval", "weekly")]


