"""/digital-sales end to end: the app over a data folder the real crawler filled from sample feeds."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from chartgw.api.group import crawl_group
from chartgw.api.params import InvalidParams
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import ReplayTransport, Reply, request_key
from chartgw.demo.samples import digital_sales as samples
from chartgw.groups.digital_sales import COMBOS, COMBOS_BY_SLUG, GROUP, targets
from chartgw.store import SnapshotReader, group_db_path
from chartgw.upstreams.itunes import UPSTREAM, requests_for
from tests.fixtures import (
    FIXED_NOW,
    KEY_HEADERS,
    api_fixture,
    build_group_db,
    client,
    configure,
    copy_data,
    data_dir,
    environment,
    get,
)
from tests.fixtures import settings as run_settings

NOW = FIXED_NOW
SEEDED = ("us", "gb", "jp", "kr")
ROUTES = ("/snapshots", "/latest", "/pull.json", "/combos", "/top-songs/us/latest")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo seed (two pulls) for four of the default eight countries, so health has some missing."""
    with environment({"CHARTGW_DIGITAL_SALES_COUNTRIES": ",".join(SEEDED)}):
        return build_group_db(tmp_path_factory.mktemp("digital-sales"), GROUP.name, NOW)


api = api_fixture(GROUP, "seeded", {"CHARTGW_DIGITAL_SALES_COUNTRIES": ",".join(SEEDED)})
"""The app with the seeded countries configured."""


@pytest.mark.parametrize("combo", COMBOS, ids=[c.slug for c in COMBOS])
@pytest.mark.parametrize("country", SEEDED)
def test_every_combo_and_country_serves_the_latest_pull(api: TestClient, combo: Any, country: str) -> None:
    body = get(api, f"/digital-sales/{combo.slug}/{country}/latest?limit=5").json()
    assert (body["combo"], body["country"], body["count"]) == (combo.slug, country, 5)
    snapshot = body["snapshot"]
    assert snapshot["target"] == f"{combo.slug}/{country}" and snapshot["row_count"] == 100
    assert snapshot["stale"] is False and snapshot["cadence_seconds"] == 10800
    assert snapshot["fetched_at"] == NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert snapshot["chart_date"] == NOW.date().isoformat()
    assert snapshot["source"].endswith(f"/{country}/rss/{combo.feed}/limit=100/json")
    rows = samples.sample_rows(combo, country, 1, 100)[:5]
    assert [(e["rank"], e["title"], e["artist"]) for e in body["entries"]] == [
        (r.rank, r.song.title, samples.artist_credit(r.song.artists)) for r in rows]
    assert all(e["store_id"].isdigit() and e["artist_id"].isdigit() for e in body["entries"])


def test_entry_fields_per_media(api: TestClient) -> None:
    song = get(api, "/digital-sales/top-songs/us/latest?limit=1").json()["entries"][0]
    album = get(api, "/digital-sales/top-albums/gb/latest?limit=1").json()["entries"][0]
    video = get(api, "/digital-sales/top-music-videos/jp/latest?limit=1").json()["entries"][0]
    assert set(song) == set(album) == set(video)
    assert song["collection"] and song["collection_id"] and song["preview_url"].endswith(".m4a")
    assert song["duration_ms"] == 30000 and (song["price"], song["currency"]) == (1.29, "USD")
    assert album["collection"] is None and album["preview_url"] is None and album["currency"] == "GBP"
    assert video["preview_url"].endswith(".m4v") and video["currency"] == "JPY"


def test_limit_default_and_bounds(api: TestClient) -> None:
    assert get(api, "/digital-sales/top-songs/kr/latest").json()["count"] == 100
    assert get(api, "/digital-sales/top-songs/kr/latest?limit=200").json()["count"] == 100
    assert get(api, "/digital-sales/top-songs/kr/latest?limit=2").json()["country"] == "kr"
    # a code in upper case is not what the document's enum lists: a 422 saying which to use
    upper = api.get("/digital-sales/top-songs/KR/latest", headers=KEY_HEADERS)
    assert upper.status_code == 422 and upper.json()["detail"][0]["loc"] == ["path", "country"]
    assert "use 'kr', not 'KR'" in upper.json()["detail"][0]["msg"]


def test_snapshots_list_both_pulls_newest_first(api: TestClient) -> None:
    body = get(api, "/digital-sales/snapshots").json()
    assert body["count"] == len(body["snapshots"]) == 24  # 3 combos x 4 countries x 2 pulls, under the default 50
    ids = [s["id"] for s in body["snapshots"]]
    assert ids == sorted(ids, reverse=True)
    earlier = (NOW - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert {s["fetched_at"] for s in body["snapshots"]} == {NOW.strftime("%Y-%m-%dT%H:%M:%SZ"), earlier}
    assert get(api, "/digital-sales/snapshots?limit=5").json()["count"] == 5


def test_latest_is_the_last_pull_of_every_combo_and_country(api: TestClient) -> None:
    body = get(api, "/digital-sales/latest").json()
    assert body["run"]["kind"] == "crawl" and (body["run"]["targets"], body["run"]["ok"]) == (12, 12)
    assert body["count"] == 12
    assert [c["target"] for c in body["charts"]] == [f"{c.slug}/{cc}" for c in COMBOS for cc in SEEDED]
    for chart in body["charts"]:
        assert chart["count"] == 100 and chart["snapshot"]["fetched_at"] == NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert [e["rank"] for e in chart["entries"]] == list(range(1, 101))


def test_latest_takes_a_limit_per_chart(api: TestClient) -> None:
    """The whole pull is 100 rows of every chart (today's answer, the default); `limit` keeps the top of each."""
    whole = get(api, "/digital-sales/latest").content
    assert get(api, "/digital-sales/latest?limit=100").content == whole
    top = get(api, "/digital-sales/latest?limit=3").json()
    assert top["count"] == 12 and len(get(api, "/digital-sales/latest?limit=3").content) < len(whole) / 10
    for chart in top["charts"]:
        assert chart["count"] == 3 and [e["rank"] for e in chart["entries"]] == [1, 2, 3]
    for bad, kind in (("0", "greater_than_equal"), ("101", "less_than_equal"), ("x", "int_parsing")):
        response = get(api, f"/digital-sales/latest?limit={bad}")
        assert response.status_code == 422 and response.json()["detail"][0]["type"] == kind
    document = get(api, "/digital-sales/openapi.json").json()
    (limit,) = document["paths"]["/latest"]["get"]["parameters"][:1]
    assert (limit["name"], limit["schema"]) == ("limit", {"type": "integer", "minimum": 1, "maximum": 100, "default": 100})


def test_pull_json_gives_the_feeds_exactly_as_received(api: TestClient) -> None:
    response = get(api, "/digital-sales/pull.json")
    body = response.json()
    assert body["count"] == 12 and body["run"]["kind"] == "crawl"
    payload = next(p for p in body["payloads"] if p["target"] == "top-albums/kr")
    combo = COMBOS_BY_SLUG["top-albums"]
    sent = samples.render(combo.feed, "kr", samples.sample_rows(combo, "kr", 1, 100), NOW, 100)
    assert sent in response.content  # spliced byte for byte
    assert payload["payload"] == json.loads(sent)


def test_combos_describe_feeds_and_dates(api: TestClient) -> None:
    body = get(api, "/digital-sales/combos").json()
    assert (body["cadence_seconds"], body["feed_limit"]) == (10800, 100)
    assert [(c["combo"], c["feed"], c["media"]) for c in body["combos"]] == [
        ("top-songs", "topsongs", "songs"), ("top-albums", "topalbums", "albums"),
        ("top-music-videos", "topmusicvideos", "music videos")]
    for combo in body["combos"]:
        assert combo["description"]
        assert [c["country"] for c in combo["countries"]] == list(SEEDED)
        assert combo["countries"][3]["country_name"] == "South Korea"
        assert all(c["chart_date"] == NOW.date().isoformat() for c in combo["countries"])


def test_health_is_public_and_ok(api: TestClient) -> None:
    body = api.get("/digital-sales/health").json()
    assert body["status"] == "ok" and body["service"] == "digital-sales"
    assert len(body["targets"]) == 12 and not any(t["stale"] for t in body["targets"])


def test_health_is_degraded_for_configured_countries_without_data(seeded: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_DIGITAL_SALES_COUNTRIES", None)  # the default 8 countries
    with client(seeded, [GROUP]) as fresh:
        body = fresh.get("/digital-sales/health").json()
        assert body["status"] == "degraded" and len(body["targets"]) == 24
        missing = [t["target"] for t in body["targets"] if t["snapshot_id"] is None]
        assert "top-songs/de" in missing and "top-songs/us" not in missing
        response = get(fresh, "/digital-sales/top-songs/de/latest")
        assert response.status_code == 404
        assert response.json() == {"detail": "No snapshot of top-songs in de yet"}
        dates = {c["country"]: c["chart_date"] for c in get(fresh, "/digital-sales/combos").json()["combos"][0]["countries"]}
        assert dates["de"] is None and dates["us"] == NOW.date().isoformat()


@pytest.mark.parametrize("country", ["br", "global"])
def test_country_not_crawled_is_404_naming_the_configured_ones(api: TestClient, country: str) -> None:
    response = get(api, f"/digital-sales/top-songs/{country}/latest")
    assert response.status_code == 404
    assert response.json() == {"detail": f"Country '{country}' is not crawled; configured countries: us, gb, jp, kr"}


def test_no_data_yet_is_404(tmp_path: Path) -> None:
    with client(tmp_path, [GROUP]) as empty:
        for path in ("/latest", "/pull.json", "/top-songs/us/latest"):
            assert get(empty, "/digital-sales" + path).status_code == 404, path
        assert get(empty, "/digital-sales/snapshots").json() == {"count": 0, "snapshots": []}
        assert empty.get("/digital-sales/health").json()["status"] == "degraded"


def test_unknown_combo_is_422_with_fastapis_body(api: TestClient) -> None:
    response = get(api, "/digital-sales/top-singles/us/latest")
    assert response.status_code == 422
    expected = "'top-songs', 'top-albums' or 'top-music-videos'"
    assert response.json() == {"detail": [{"type": "literal_error", "loc": ["path", "combo"],
                                           "msg": f"Input should be {expected}", "input": "top-singles",
                                           "ctx": {"expected": expected}}]}


def test_unknown_country_is_422_with_fastapis_body(api: TestClient) -> None:
    response = get(api, "/digital-sales/top-songs/zz/latest?limit=0")
    assert response.status_code == 422
    assert response.json() == {"detail": [
        {"type": "value_error", "loc": ["path", "country"],
         "msg": "Value error, unknown country 'zz'; use 'global' or an ISO 3166-1 alpha-2 code such as 'us'",
         "input": "zz", "ctx": {"error": {}}},
        {"type": "greater_than_equal", "loc": ["query", "limit"], "msg": "Input should be greater than or equal to 1",
         "input": "0", "ctx": {"ge": 1}},
    ]}


@pytest.mark.parametrize("url,loc,kind", [
    ("/digital-sales/snapshots?limit=501", ["query", "limit"], "less_than_equal"),
    ("/digital-sales/snapshots?limit=x", ["query", "limit"], "int_parsing"),
    ("/digital-sales/top-songs/us/latest?limit=201", ["query", "limit"], "less_than_equal"),
])
def test_bad_limits_are_422(api: TestClient, url: str, loc: list[str], kind: str) -> None:
    response = get(api, url)
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert (error["loc"], error["type"]) == (loc, kind)


@pytest.mark.parametrize("path", ROUTES)
def test_data_routes_need_a_key(api: TestClient, path: str) -> None:
    response = api.get("/digital-sales" + path)
    assert response.status_code == 401 and response.headers["www-authenticate"]
    assert api.get("/digital-sales-api" + path).status_code == 401


def test_legacy_prefix_answers_exactly_as_the_public_one(api: TestClient) -> None:
    for path in ("/combos", "/top-albums/jp/latest?limit=3", "/snapshots?limit=2"):
        assert get(api, "/digital-sales-api" + path).content == get(api, "/digital-sales" + path).content
    assert api.get("/digital-sales-api/health").status_code == 200


def test_openapi_lists_every_route(api: TestClient) -> None:
    document = api.get("/digital-sales/openapi.json").json()
    paths = set(document["paths"])
    assert paths == {"/", "/health", "/snapshots", "/latest", "/pull.json", "/combos", "/{combo}/{country}/latest",
                     "/openapi.json", "/fetch-logs", "/diff", "/exports", "/exports/{name}"}
    assert "DigitalSalesEntry" in document["components"]["schemas"]


def test_targets_follow_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_DIGITAL_SALES_COUNTRIES", "us,GB")
    configure("CHARTGW_DIGITAL_SALES_FEED_LIMIT", "25")
    keys = [(t.key, t.requests[0].path, t.expected_rows) for t in targets({"combo": "top-albums", "country": None}, FIXED_NOW, settings=run_settings())]
    assert keys == [("top-albums/us", "/us/rss/topalbums/limit=25/json", None),
                    ("top-albums/gb", "/gb/rss/topalbums/limit=25/json", None)]
    assert len(targets({}, FIXED_NOW, settings=run_settings())) == 6
    with pytest.raises(InvalidParams):
        targets({"combo": None, "country": "jp"}, FIXED_NOW, settings=run_settings())
    for bad in ("0", "201", "ten"):
        configure("CHARTGW_DIGITAL_SALES_FEED_LIMIT", bad)
        with pytest.raises(ValueError, match="FEED_LIMIT"):
            targets({}, FIXED_NOW, settings=run_settings())
    assert GROUP.schedules[0].cron == "25 */3 * * *" and GROUP.upstreams == ("ITUNES",)


# --- crawls against a private copy ------------------------------------------------------------

def _crawl_us_songs(path: Path, reply: Reply, monkeypatch: pytest.MonkeyPatch, limit: int = 100) -> Outcome:
    configure("CHARTGW_DIGITAL_SALES_COUNTRIES", "us")
    configure("CHARTGW_DIGITAL_SALES_FEED_LIMIT", str(limit))
    (request,) = requests_for("us", "topsongs", limit)
    transport = ReplayTransport({UPSTREAM: {request_key(request): reply}})
    with data_dir(path):
        (outcome,) = asyncio.run(crawl_group(GROUP, {"combo": "top-songs", "country": "us"}, transport=transport, settings=run_settings()))
    return outcome


def _failed_log(path: Path) -> list[tuple[Any, ...]]:
    with data_dir(path):
        reader = SnapshotReader(group_db_path(GROUP.name, settings=run_settings()))

        async def read() -> list[tuple[Any, ...]]:
            try:
                return await reader.fetch_log("failed", 10)
            finally:
                await reader.close()

        return asyncio.run(read())


def _feed_body(rows: int, limit: int = 100) -> bytes:
    combo = COMBOS_BY_SLUG["top-songs"]
    return samples.render(combo.feed, "us", samples.sample_rows(combo, "us", 2, rows), NOW, limit)


FEED = _feed_body(100)


@pytest.mark.parametrize("reply,status,error", [
    (Reply(b"<html><body>Internal error</body></html>", 500), 500, "HTTP 500"),
    (Reply(b"<!DOCTYPE html><html><body>Apple - Temporarily unavailable</body></html>", 200), 200, "markup"),
    (Reply(FEED[: len(FEED) // 2], 200, samples.CONTENT_TYPE), 200, "not JSON"),
    (Reply(json.dumps({"feed": {"updated": {"label": "2026-11-20T01:00:00-07:00"}}}).encode(), 200), 200,
     "no entries"),
], ids=["http-500", "html", "truncated", "no-entries"])
def test_a_failed_crawl_keeps_the_last_good_snapshot(seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      reply: Reply, status: int, error: str) -> None:
    path = copy_data(seeded, tmp_path / "data")
    configure("CHARTGW_DIGITAL_SALES_COUNTRIES", ",".join(SEEDED))
    with client(path, [GROUP]) as before_client:
        before = get(before_client, "/digital-sales/top-songs/us/latest").json()
    outcome = _crawl_us_songs(path, reply, monkeypatch)
    assert outcome.status == "failed" and outcome.http_status == status and error in (outcome.error or "")
    configure("CHARTGW_DIGITAL_SALES_COUNTRIES", ",".join(SEEDED))
    with client(path, [GROUP]) as after_client:
        assert get(after_client, "/digital-sales/top-songs/us/latest").json() == before
    (log,) = _failed_log(path)
    assert log[1] == "top-songs/us" and error in log[-1]


def test_a_short_feed_is_kept_and_a_single_entry_object_is_read(seeded: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer rows than asked is a valid chart; limit=1 answers `entry` as a bare object."""
    path = copy_data(seeded, tmp_path / "data")
    short = _crawl_us_songs(path, Reply(_feed_body(40), 200, samples.CONTENT_TYPE), monkeypatch)
    assert (short.status, short.rows) == ("ok", 40)
    single_body = _feed_body(1, limit=1)
    assert isinstance(json.loads(single_body)["feed"]["entry"], dict)
    single = _crawl_us_songs(path, Reply(single_body, 200, samples.CONTENT_TYPE), monkeypatch, limit=1)
    assert (single.status, single.rows) == ("ok", 1)
    with client(path, [GROUP]) as after:
        body = get(after, "/digital-sales/top-songs/us/latest").json()
        assert body["count"] == 1 and body["snapshot"]["id"] == single.snapshot_id
        assert body["entries"][0]["title"] == samples.sample_rows(COMBOS[0], "us", 2, 1)[0].song.title
        assert get(after, "/digital-sales/snapshots?limit=2").json()["snapshots"][1]["row_count"] == 40
    assert _failed_log(path) == []


def test_a_feed_cut_to_a_few_rows_is_refused_and_the_last_chart_stays(seeded: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3-row feed asked with limit=100 is a feed gone wrong, not a chart: failed, logged, nothing replaced."""
    path = copy_data(seeded, tmp_path / "data")
    with client(path, [GROUP]) as before:
        kept = get(before, "/digital-sales/top-songs/us/latest").json()["snapshot"]["id"]
    cut = _crawl_us_songs(path, Reply(_feed_body(3), 200, samples.CONTENT_TYPE), monkeypatch)
    assert (cut.status, cut.error) == ("failed", "top-songs/us: expected at least 25 rows, upstream gave 3")
    with client(path, [GROUP]) as after:
        assert get(after, "/digital-sales/top-songs/us/latest").json()["snapshot"]["id"] == kept
        status = next(t for t in after.get("/digital-sales/health").json()["targets"] if t["target"] == "top-songs/us")
        assert status["state"] == "fresh"  # the last good chart still serves, and health says what failed since
        assert status["last_failure"].endswith(": top-songs/us: expected at least 25 rows, upstream gave 3")
