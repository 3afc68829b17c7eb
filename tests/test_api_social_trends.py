"""/social-trends end to end: the app over a data folder the real crawl filled from sample X API answers, the
crawl in all three formats, and POST /refresh (body, 404/422/429/502/503, joining a running refresh)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from chartgw import cli
from chartgw.api.endpoints import ApiError, Call, GroupData
from chartgw.api.group import crawl_group
from chartgw.api.params import InvalidParams
from chartgw.core import config
from chartgw.core.clock import fixed
from chartgw.demo.replay import Reply, request_key
from chartgw.demo.samples import social_trends as samples
from chartgw.groups import GROUPS
from chartgw.groups import social_trends as st
from chartgw.groups.social_trends import GROUP, parse_refresh_body, refresh, targets
from chartgw.store import SnapshotReader, group_db_path
from chartgw.upstreams.x_trends import LOCATIONS, LOCATIONS_BY_SLUG, TRENDS24, X_API, trends24_request, v1_request
from tests import fixtures
from tests.fixtures import (
    FIXED_NOW,
    KEY_HEADERS,
    api_fixture,
    client,
    configure,
    copy_data,
    data_dir,
    environment,
    group_data,
    replay_upstreams,
)
from tests.fixtures import settings as run_settings

NOW = FIXED_NOW
STAMP = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
X_API_ENV: dict[str, str | None] = {"CHARTGW_X_BEARER_TOKEN": samples.SAMPLE_TOKEN, "CHARTGW_TRENDS_SOURCE": "x-api"}


@pytest.fixture(scope="module")
def trends_data(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo seed: three crawls of every location through the X API v1.1, an hour apart."""
    return group_data(all_groups_data, tmp_path_factory.mktemp("social-trends"), GROUP.name)


api = api_fixture(GROUP, "trends_data")
"""The app as deployed without a bearer token (source: trends24)."""


get = partial(fixtures.get, as_json=True)
"""The module's GET: `tests.fixtures.get` with its options."""


# --- reading --------------------------------------------------------------------------------------


def test_health_is_public_with_every_crawled_locations_latest_time(api: TestClient) -> None:
    body = api.get("/social-trends/health").json()
    assert (body["status"], body["source"], body["token_configured"]) == ("ok", "trends24", False)
    assert [loc["slug"] for loc in body["locations"]] == [loc.slug for loc in LOCATIONS]
    assert all(loc["fetched_at"] == STAMP and not loc["stale"] for loc in body["locations"])
    assert body["locations"][0] == {"slug": "worldwide", "woeid": 1, "snapshot_id": body["locations"][0]["snapshot_id"],
                                    "fetched_at": STAMP, "age_seconds": 0, "stale": False}


def test_health_names_the_source_in_force(trends_data: Path) -> None:
    with environment({"CHARTGW_X_BEARER_TOKEN": "t", "CHARTGW_SOCIAL_TRENDS_LOCATIONS": "us,tokyo"}), \
            client(trends_data, [GROUP], now=NOW + timedelta(hours=2)) as later:
        body = later.get("/social-trends/health").json()
    assert (body["status"], body["source"], body["token_configured"]) == ("degraded", "x-api", True)
    assert [loc["slug"] for loc in body["locations"]] == ["us", "tokyo"] and all(loc["stale"] for loc in body["locations"])


def test_locations_list_slug_name_woeid_and_kind(api: TestClient) -> None:
    assert api.get("/social-trends/locations").status_code == 401
    body = get(api, "/social-trends/locations")
    assert body["count"] == len(LOCATIONS) == 38 and body["source"] == "trends24"
    by_slug = {loc["slug"]: loc for loc in body["locations"]}
    assert by_slug["worldwide"] == {"slug": "worldwide", "name": "Worldwide", "woeid": 1, "kind": "worldwide",
                                    "country": None, "crawled": True, "fetched_at": STAMP}
    assert (by_slug["us"]["woeid"], by_slug["us"]["kind"]) == (23424977, "country")
    assert (by_slug["new-york"]["woeid"], by_slug["new-york"]["kind"], by_slug["new-york"]["country"]) == (
        2459115, "city", "US")
    assert by_slug["sao-paulo"]["name"] == "São Paulo"


def test_trends_are_the_sample_list_without_the_promoted_trend(api: TestClient) -> None:
    body = get(api, "/social-trends/trends/worldwide")
    assert (body["source"], body["as_of"], body["count"]) == ("x-api-v1.1", STAMP, 50)
    assert body["location"]["slug"] == "worldwide" and body["snapshot"]["target"] == "trends/worldwide"
    assert (body["snapshot"]["chart_date"], body["snapshot"]["chart_hour"]) == ("2026-11-20", 5)
    assert body["snapshot"]["source"].endswith("/1.1/trends/place.json?id=1")
    expected = samples.trend_rows("worldwide", 2, 50)
    assert [(e["rank"], e["name"], e["tweet_volume"]) for e in body["entries"]] == [
        (rank, row.name, row.tweet_volume) for rank, row in enumerate(expected, start=1)]
    assert samples.PROMOTED_NAME not in {e["name"] for e in body["entries"]}
    assert any(e["tweet_volume"] is None for e in body["entries"])
    assert any(not e["name"].isascii() for e in body["entries"])  # Unicode kept as such
    first = body["entries"][0]
    assert first["url"] == expected[0].url and first["query"] == expected[0].query


def test_by_woeid_answers_as_by_slug_and_limit_cuts(api: TestClient) -> None:
    by_slug = get(api, "/social-trends/trends/new-york?limit=5")
    assert get(api, "/social-trends/trends/by-woeid/2459115?limit=5") == by_slug
    assert by_slug["count"] == 5 and [e["rank"] for e in by_slug["entries"]] == [1, 2, 3, 4, 5]
    assert get(api, "/social-trends/trends/US?limit=1")["location"]["slug"] == "us"


def test_unknown_locations_are_404_naming_the_list(api: TestClient) -> None:
    for url, what in (("/social-trends/trends/atlantis", "slug 'atlantis'"), ("/social-trends/trends/by-woeid/42", "WOEID 42")):
        response = api.get(url, headers=KEY_HEADERS)
        assert response.status_code == 404
        assert response.json() == {"detail": f"Unknown location {what}; the locations are listed at /social-trends/locations"}


@pytest.mark.parametrize("url,loc,kind", [
    ("/social-trends/trends/by-woeid/new-york", ["path", "woeid"], "int_parsing"),
    ("/social-trends/trends/worldwide?limit=0", ["query", "limit"], "greater_than_equal"),
    ("/social-trends/trends/worldwide?limit=101", ["query", "limit"], "less_than_equal"),
    ("/social-trends/snapshots?limit=x", ["query", "limit"], "int_parsing"),
])
def test_bad_parameters_are_422(api: TestClient, url: str, loc: list[str], kind: str) -> None:
    response = api.get(url, headers=KEY_HEADERS)
    assert response.status_code == 422
    assert (response.json()["detail"][0]["loc"], response.json()["detail"][0]["type"]) == (loc, kind)


def test_snapshots_fetch_logs_and_legacy_prefix(api: TestClient) -> None:
    snapshots = get(api, "/social-trends/snapshots?limit=500")
    assert snapshots["count"] == 3 * 38
    logs = get(api, "/social-trends/fetch-logs?limit=1000")
    assert logs["count"] == 3 * 38 and {e["status"] for e in logs["entries"]} == {"ok"}
    assert get(api, "/social-trends-api/trends/jp?limit=2") == get(api, "/social-trends/trends/jp?limit=2")
    assert api.get("/social-trends/").status_code == 200 and api.get("/social-trends/openapi.json").status_code == 200


def test_before_any_crawl_health_is_degraded_and_trends_are_404(tmp_path: Path) -> None:
    with client(tmp_path, [GROUP]) as empty:
        health = empty.get("/social-trends/health").json()
        assert health["status"] == "degraded" and all(loc["snapshot_id"] is None for loc in health["locations"])
        response = empty.get("/social-trends/trends/us", headers=KEY_HEADERS)
        assert response.status_code == 404 and response.json()["detail"] == (
            "No trends of us stored yet; see /social-trends/locations")
        assert get(empty, "/social-trends/locations")["locations"][1]["fetched_at"] is None


# --- the crawl ------------------------------------------------------------------------------------


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    configure("CHARTGW_DATA_DIR", str(tmp_path))
    return tmp_path


def latest_entries(target: str) -> tuple[int | None, list[bytes]]:
    async def read() -> tuple[int | None, list[bytes]]:
        reader = SnapshotReader(group_db_path(st.NAME, settings=run_settings()))
        row = await reader.latest(target)
        records = await reader.records(row.id, 100) if row else []
        await reader.close()
        return (row.id if row else None), records

    return asyncio.run(read())


@pytest.mark.parametrize("source,version,kind", [("trends24", "2", "trends24"), ("x-api", "2", "x-api-v2"),
                                                 ("x-api", "1.1", "x-api-v1.1")])
def test_every_source_reads_the_same_list(fresh: Path, source: str, version: str, kind: str) -> None:
    where = LOCATIONS_BY_SLUG["tokyo"]
    settings: dict[str, str | None] = {**X_API_ENV, "CHARTGW_TRENDS_SOURCE": source, "CHARTGW_X_API_VERSION": version}
    with environment(settings), replay_upstreams(samples.location_replies(where, NOW, 1)) as servers:
        outcomes = asyncio.run(crawl_group(GROUP, {"location": "tokyo"}, now=fixed(NOW), settings=run_settings()))
        with client(fresh, [GROUP]) as app:
            body = get(app, "/social-trends/trends/tokyo")
    assert [(o.target, o.status, o.rows) for o in outcomes] == [("trends/tokyo", "ok", 50)]
    assert body["source"] == kind and [e["name"] for e in body["entries"]] == [r.name for r in samples.trend_rows("tokyo", 1)]
    assert [e["tweet_volume"] for e in body["entries"]] == [r.tweet_volume for r in samples.trend_rows("tokyo", 1)]
    upstream = TRENDS24 if source == "trends24" else X_API
    assert len(servers[upstream].seen) == 1
    if source == "x-api":
        assert servers[X_API].seen[0][1]["authorization"] == f"Bearer {samples.SAMPLE_TOKEN}"
    if kind == "x-api-v2":
        assert body["as_of"] is None and body["entries"][0]["url"] is None


def test_the_x_api_without_a_token_stops_the_crawl_naming_the_setting(fresh: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    configure("CHARTGW_TRENDS_SOURCE", "x-api")
    configure("CHARTGW_X_BEARER_TOKEN", None)
    with pytest.raises(config.SettingError, match="CHARTGW_X_BEARER_TOKEN"):
        targets({"location": "us"}, FIXED_NOW, settings=run_settings())
    monkeypatch.setattr(cli, "GROUPS", (*GROUPS, GROUP) if GROUP not in GROUPS else GROUPS)
    assert cli.main(["crawl", "social-trends", "--location", "us"], run_settings()) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CHARTGW_X_BEARER_TOKEN" in err[0]


def test_targets_follow_the_locations_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_SOCIAL_TRENDS_LOCATIONS", "worldwide, JP,london")
    configure("CHARTGW_X_BEARER_TOKEN", None)
    assert [t.key for t in targets({}, FIXED_NOW, settings=run_settings())] == ["trends/worldwide", "trends/jp", "trends/london"]
    assert targets({}, FIXED_NOW, settings=run_settings())[2].requests == (trends24_request(LOCATIONS_BY_SLUG["london"]),)
    assert [t.key for t in targets({"location": "osaka"}, FIXED_NOW, settings=run_settings())] == ["trends/osaka"]
    configure("CHARTGW_SOCIAL_TRENDS_LOCATIONS", "atlantis")
    with pytest.raises(config.SettingError, match="CHARTGW_SOCIAL_TRENDS_LOCATIONS"):
        targets({}, FIXED_NOW, settings=run_settings())


@pytest.mark.parametrize("status,body,reason", [
    (401, samples.unauthorized_body(), "bearer token was refused"),
    (429, samples.rate_limit_body(), "rate limit exceeded"),
    (200, b"<html><body>Just a moment...</body></html>", "expected JSON"),
])
def test_a_failed_crawl_keeps_the_last_good_snapshot(trends_data: Path, tmp_path: Path, status: int, body: bytes,
                                                     reason: str) -> None:
    where = LOCATIONS_BY_SLUG["us"]
    with data_dir(copy_data(trends_data, tmp_path / "data")):
        good, records = latest_entries("trends/us")
        replies = {X_API: {request_key(v1_request(where.woeid, samples.SAMPLE_TOKEN)): Reply(body, status)}}
        with environment({**X_API_ENV, "CHARTGW_X_API_VERSION": "1.1"}), replay_upstreams(replies) as servers:
            outcome = asyncio.run(crawl_group(GROUP, {"location": "us"}, now=fixed(NOW + timedelta(minutes=30)), settings=run_settings()))[0]
        assert outcome.status == "failed" and reason in (outcome.error or "")
        assert len(servers[X_API].seen) == 1  # refusals are not asked again
        assert latest_entries("trends/us") == (good, records)


# --- POST /refresh --------------------------------------------------------------------------------


@pytest.fixture
def refreshing(trends_data: Path, tmp_path: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """A private copy of the data with every location's next list on replay servers (source: trends24)."""
    path = copy_data(trends_data, tmp_path / "data")
    with data_dir(path), replay_upstreams(samples.all_replies(NOW, 3)) as servers:
        yield path, servers


def post(app: TestClient, body: bytes, **headers: str) -> Any:
    return app.post("/social-trends/refresh", content=body, headers={**KEY_HEADERS, **headers})


def test_refresh_crawls_one_location_and_answers_its_snapshot(refreshing: tuple[Path, dict[str, Any]]) -> None:
    path, servers = refreshing
    with client(path, [GROUP]) as app:
        before = get(app, "/social-trends/trends/gb?limit=3")
        response = post(app, b'{"location": "gb"}')
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["location"]["slug"], body["source"], body["joined"], body["count"]) == ("gb", "trends24", False, 50)
        assert body["snapshot"]["target"] == "trends/gb" and body["snapshot"]["id"] > before["snapshot"]["id"]
        assert response.headers["cache-control"] == "no-store"
        after = get(app, "/social-trends/trends/gb?limit=3")
        assert after["snapshot"]["id"] == body["snapshot"]["id"] and after["source"] == "trends24"
        assert [e["name"] for e in after["entries"]] == [r.name for r in samples.trend_rows("gb", 3)[:3]]
        assert len(servers[TRENDS24].seen) == 1
        by_woeid = post(app, b'{"woeid": 44418}')
        assert by_woeid.status_code == 200 and by_woeid.json()["location"]["slug"] == "london"


def test_refresh_needs_a_key(refreshing: tuple[Path, dict[str, Any]]) -> None:
    with client(refreshing[0], [GROUP]) as app:
        assert app.post("/social-trends/refresh", content=b'{"location": "gb"}').status_code == 401


@pytest.mark.parametrize("body,detail", [
    (b"", [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]),
    (b"[1]", [{"type": "model_attributes_type", "loc": ["body"],
               "msg": "Input should be a valid dictionary or object to extract fields from", "input": [1]}]),
    (b'{"location": 7}', [{"type": "string_type", "loc": ["body", "location"], "msg": "Input should be a valid string",
                           "input": 7}]),
    (b'{"woeid": "one"}', [{"type": "int_type", "loc": ["body", "woeid"], "msg": "Input should be a valid integer",
                            "input": "one"}]),
    (b"{}", [{"type": "value_error", "loc": ["body"], "msg": 'Value error, give exactly one of "location" (a slug) or "woeid"',
              "input": {}, "ctx": {"error": {}}}]),
])
def test_a_malformed_refresh_body_is_422(refreshing: tuple[Path, dict[str, Any]], body: bytes, detail: Any) -> None:
    with client(refreshing[0], [GROUP]) as app:
        response = post(app, body)
    assert response.status_code == 422 and response.json() == {"detail": detail}


def test_broken_json_is_422_json_invalid() -> None:
    with pytest.raises(InvalidParams) as caught:
        parse_refresh_body(b'{"location": ')
    assert caught.value.errors[0]["type"] == "json_invalid" and caught.value.errors[0]["loc"] == ["body", 0]
    with pytest.raises(InvalidParams):
        parse_refresh_body(b'{"location": "us", "woeid": 1}')
    assert parse_refresh_body(b'{"woeid": "23424977"}').slug == "us"


def test_refresh_of_an_unknown_location_is_404(refreshing: tuple[Path, dict[str, Any]]) -> None:
    with client(refreshing[0], [GROUP]) as app:
        for body in (b'{"location": "atlantis"}', b'{"woeid": 5}'):
            response = post(app, body)
            assert response.status_code == 404 and "/social-trends/locations" in response.json()["detail"]


def test_refresh_without_a_token_for_the_x_api_is_503(refreshing: tuple[Path, dict[str, Any]]) -> None:
    with environment({"CHARTGW_TRENDS_SOURCE": "x-api", "CHARTGW_X_BEARER_TOKEN": None}), \
            client(refreshing[0], [GROUP]) as app:
        response = post(app, b'{"location": "us"}')
    assert response.status_code == 503 and "CHARTGW_X_BEARER_TOKEN" in response.json()["detail"]
    assert not refreshing[1][X_API].seen


def test_a_second_refresh_within_the_interval_is_429(refreshing: tuple[Path, dict[str, Any]]) -> None:
    path, servers = refreshing
    with client(path, [GROUP]) as app:
        assert post(app, b'{"location": "fr"}').status_code == 200
        again = post(app, b'{"woeid": 23424819}')
        assert again.status_code == 429 and again.headers["retry-after"] == "60"
        assert "fr was refreshed 0 s ago" in again.json()["detail"]
        assert post(app, b'{"location": "de"}').status_code == 200  # another location is not held back
    with client(path, [GROUP], now=NOW + timedelta(seconds=45)) as later:
        held = post(later, b'{"location": "fr"}')
        assert held.status_code == 429 and held.headers["retry-after"] == "15"
    with client(path, [GROUP], now=NOW + timedelta(seconds=60)) as after:
        assert post(after, b'{"location": "fr"}').status_code == 200
    with environment({"CHARTGW_SOCIAL_TRENDS_REFRESH_INTERVAL_SECONDS": "0"}), client(path, [GROUP]) as free:
        assert post(free, b'{"location": "de"}').status_code == 200
    assert len(servers[TRENDS24].seen) == 4


def test_a_key_past_its_refresh_budget_is_429_for_any_location(refreshing: tuple[Path, dict[str, Any]]) -> None:
    path, servers = refreshing
    with environment({"CHARTGW_REFRESHES_PER_KEY_PER_HOUR": "1"}), client(path, [GROUP]) as app:
        assert post(app, b'{"location": "fr"}').status_code == 200
        held = post(app, b'{"location": "de"}')
        assert held.status_code == 429 and 3590 <= int(held.headers["retry-after"]) <= 3600
        assert "CHARTGW_REFRESHES_PER_KEY_PER_HOUR" in held.json()["detail"]
    assert len(servers[TRENDS24].seen) == 1


def test_scheduled_crawls_do_not_count_against_the_interval(refreshing: tuple[Path, dict[str, Any]]) -> None:
    path, _ = refreshing
    asyncio.run(crawl_group(GROUP, {"location": "it"}, now=fixed(NOW), settings=run_settings()))
    with client(path, [GROUP]) as app:
        assert post(app, b'{"location": "it"}').status_code == 200


def test_an_upstream_failure_is_502_and_the_last_snapshot_stays(refreshing: tuple[Path, dict[str, Any]]) -> None:
    path, servers = refreshing
    page = request_key(trends24_request(LOCATIONS_BY_SLUG["es"]))
    servers[TRENDS24].replies[page] = Reply(b"<html><head><title>Just a moment...</title></head></html>", 403)
    with client(path, [GROUP]) as app:
        before = get(app, "/social-trends/trends/es")
        response = post(app, b'{"location": "es"}')
        assert response.status_code == 502
        detail = response.json()["detail"]
        assert "robot check" in detail and "last good snapshot is still served" in detail
        assert get(app, "/social-trends/trends/es") == before
        assert get(app, "/social-trends/fetch-logs?status=failed")["entries"][0]["target"] == "trends/es"


def test_a_refresh_already_running_is_joined_not_started_twice(refreshing: tuple[Path, dict[str, Any]]) -> None:
    servers = refreshing[1]

    async def both() -> tuple[Any, Any]:
        data = GroupData(st.NAME, fixed(NOW), settings=run_settings())
        try:
            first = asyncio.ensure_future(refresh(Call({}, data, NOW, b'{"location": "mx"}')))
            # The second asks once the first's crawl is running (started together, the second's own reads could
            # outlast the whole crawl on a loaded box: it would then find the crawl done and refresh again).
            for _ in range(10_000):
                if "mx" in st._running.get(data, {}):
                    break
                await asyncio.sleep(0.001)
            second = await refresh(Call({}, data, NOW, b'{"woeid": 23424900}'))
            # Another app's data (another app in this process): never joined to this app's crawl, which writes
            # into this app's file; here both have one file, so it finds the refresh just made (429).
            other = GroupData(st.NAME, fixed(NOW), settings=run_settings())
            try:
                with pytest.raises(ApiError) as refused:
                    await refresh(Call({}, other, NOW, b'{"location": "mx"}'))
                assert refused.value.status == 429
            finally:
                await other.reader.close()
            return await first, second
        finally:
            await data.reader.close()

    first, second = asyncio.run(both())
    assert first.snapshot.id == second.snapshot.id and sorted([first.joined, second.joined]) == [False, True]
    assert len(servers[TRENDS24].seen) == 1

    async def third() -> None:
        data = GroupData(st.NAME, fixed(NOW), settings=run_settings())
        try:
            await refresh(Call({}, data, NOW, b'{"location": "mx"}'))
        finally:
            await data.reader.close()

    with pytest.raises(ApiError) as caught:
        asyncio.run(third())
    assert caught.value.status == 429


def test_group_declares_no_entry_mapping_and_a_half_hourly_schedule() -> None:
    assert GROUP.entries is None
    assert [s.cron for s in GROUP.schedules] == ["7,37 * * * *"]


def test_the_refresh_body_is_declared_in_the_document() -> None:
    """The JSON body POST /refresh reads is the operation's requestBody: a generated client can send it."""
    from chartgw.api.openapi import build_document

    doc = build_document(GROUP.name, GROUP.title, GROUP.description, list(GROUP.routes))
    body = doc["paths"]["/refresh"]["post"]["requestBody"]
    assert body["required"] and body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/RefreshBody"}
    schema = doc["components"]["schemas"]["RefreshBody"]
    assert set(schema["properties"]) == {"location", "woeid"} and "exactly one" in schema["description"]
    # every body the schema describes with one of the two is read as that location
    assert parse_refresh_body(b'{"location": "gb"}').slug == "gb" and parse_refresh_body(b'{"woeid": 1}').slug == "worldwide"
