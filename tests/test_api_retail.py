"""/retail-physical, /retail-digital and /retail-music end to end: the app over data folders their real
crawlers filled from rendered Amazon pages on replay servers (five daily crawls), every endpoint and its
401/404/422 paths, product history, and what happens when Amazon says no: refusals with their own reason,
a marketplace stopped after its first robot check, the last good snapshot kept, and the backoff."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from starlette.testclient import TestClient

from chartgw.api.group import Group, crawl_group
from chartgw.api.params import InvalidParams
from chartgw.core.clock import fixed
from chartgw.core.config import SettingError
from chartgw.crawl.runner import Outcome
from chartgw.demo import retail_digital as digital_demo
from chartgw.demo import retail_physical as physical_demo
from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples import amazon as samples
from chartgw.groups import retail, retail_digital, retail_music, retail_physical
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry, group_db_path
from chartgw.upstreams import amazon
from chartgw.upstreams.amazon import RetailEntry
from tests.fixtures import (
    FIXED_NOW,
    api_fixture,
    build_group_db,
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

NOW = FIXED_NOW
DAYS = [(NOW - timedelta(days=4 - d)).date().isoformat() for d in range(5)]
STAMP = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
PHYSICAL = retail_physical.GROUP
DIGITAL = retail_digital.GROUP
MUSIC = retail_music.GROUP
SMALL = {"CHARTGW_RETAIL_MARKETS": "us,gb", "CHARTGW_RETAIL_PHYSICAL_CATEGORIES": "cds-vinyl,rock,pop"}


@pytest.fixture(scope="module")
def physical_data(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo seed with the default settings: 4 marketplaces, every category with a known path, 5 days."""
    return group_data(all_groups_data, tmp_path_factory.mktemp("retail-physical"), PHYSICAL.name)


physical = api_fixture(PHYSICAL, "physical_data", name="physical")


@pytest.fixture(scope="module")
def digital_data(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return group_data(all_groups_data, tmp_path_factory.mktemp("retail-digital"), DIGITAL.name)


digital = api_fixture(DIGITAL, "digital_data", name="digital")


@pytest.fixture(scope="module")
def music_data(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return group_data(all_groups_data, tmp_path_factory.mktemp("retail-music"), MUSIC.name)


music = api_fixture(MUSIC, "music_data", name="music")


@pytest.fixture(scope="module")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """/retail-physical seeded for us and gb and three categories: the base of the crawl tests (copy it)."""
    with environment(dict(SMALL)):
        return build_group_db(tmp_path_factory.mktemp("retail-small"), PHYSICAL, NOW)


def sample_asins(market: str, kind: amazon.Group, slug: str, variant: int) -> list[str]:
    found = samples.page_category(market, kind, slug)
    return [samples.product(market, found, row.song).asin for row in samples.sample_rows(market, kind, slug, variant)]


# --- /retail-physical -----------------------------------------------------------------------------------------

def test_physical_health_is_public_with_every_target_and_marketplace(physical: TestClient) -> None:
    body = physical.get("/retail-physical/health").json()
    assert body["status"] == "ok" and body["service"] == "retail-physical"
    targets = [t["target"] for t in body["targets"]]
    assert len(targets) == 21 and targets[0] == "us/cds-vinyl" and "de/vinyl" in targets and "gb/rock" not in targets
    assert all(not t["stale"] for t in body["targets"])
    assert [(m["market"], m["state"], m["consecutive_failures"], m["last_ok"]) for m in body["markets"]] == [
        (m, "ok", 0, STAMP) for m in ("us", "gb", "de", "jp")]


def test_categories_name_marketplace_and_category_with_coverage(physical: TestClient) -> None:
    body = get(physical, "/retail-physical/categories").json()
    assert (body["default"], body["cadence_seconds"], body["count"]) == ("us-cds-vinyl", 86400, 21)
    by_key = {c["key"]: c for c in body["categories"]}
    assert by_key["us-rock"] == {
        "key": "us-rock", "market": "us", "category": "rock", "name": "Rock",
        "url": "https://www.amazon.com/gp/bestsellers/music/40/", "path_guessed": False, "configured": True,
        "snapshots": 5, "first_chart_date": DAYS[0], "last_chart_date": DAYS[-1], "last_fetched_at": STAMP}
    assert by_key["de-vinyl"]["path_guessed"] is True and by_key["jp-cds-vinyl"]["url"].startswith("https://www.amazon.co.jp")


def test_best_sellers_latest_is_the_last_crawl(physical: TestClient) -> None:
    body = get(physical, "/retail-physical/best-sellers/latest").json()
    assert (body["key"], body["market"], body["category"], body["name"], body["count"]) == (
        "us-cds-vinyl", "us", "cds-vinyl", "CDs & Vinyl", 100)
    snapshot = body["snapshot"]
    assert (snapshot["target"], snapshot["chart_date"], snapshot["fetched_at"], snapshot["row_count"]) == (
        "us/cds-vinyl", DAYS[-1], STAMP, 100)
    assert snapshot["source"].endswith("/gp/bestsellers/music/") and snapshot["stale"] is False
    assert [e["asin"] for e in body["entries"]] == sample_asins("us", "retail-physical", "cds-vinyl", 4)
    assert [e["rank"] for e in body["entries"]] == list(range(1, 101))
    assert all("raw" not in e for e in body["entries"])
    first = body["entries"][0]
    row = samples.sample_rows("us", "retail-physical", "cds-vinyl", 4)[0]
    expected = samples.product("us", amazon.category("retail-physical", "cds-vinyl"), row.song)
    assert (first["title"], first["artist"], first["format"], first["price"], first["rating"], first["review_count"]) == (
        expected.title, expected.artist, expected.format, expected.price, expected.rating, expected.review_count)
    assert first["url"] == f"https://www.amazon.com/dp/{expected.asin}" and first["has_card"] is True
    assert body["entries"][30]["has_card"] is False and body["entries"][30]["title"] is None


def test_include_raw_and_limit(physical: TestClient) -> None:
    body = get(physical, "/retail-physical/best-sellers/latest?category=gb-cds-vinyl&limit=3&include_raw=true").json()
    assert body["count"] == 3 and body["key"] == "gb-cds-vinyl"
    raw = body["entries"][0]["raw"]
    assert raw["badge"] == "#1" and "/dp/" in raw["href"] and raw["list_metadata"]["render.zg.rank"] == "1"
    plain = get(physical, "/retail-physical/best-sellers/latest?category=gb-cds-vinyl&limit=3").json()
    assert [{k: v for k, v in e.items() if k != "raw"} for e in body["entries"]] == plain["entries"]


@pytest.mark.parametrize(("category", "key"), [("rock", "us-rock"), ("us-rock", "us-rock"), ("de-vinyl", "de-vinyl"),
                                               ("vinyl", "de-vinyl"), ("jp-cds-vinyl", "jp-cds-vinyl")])
def test_category_keys_and_bare_categories(physical: TestClient, category: str, key: str) -> None:
    assert get(physical, f"/retail-physical/best-sellers/latest?category={category}&limit=1").json()["key"] == key


@pytest.mark.parametrize("url", [
    "/retail-physical/best-sellers/latest?category=us-polka", "/retail-physical/best-sellers/latest?category=gb-rock",
    "/retail-physical/best-sellers/rank/1?category=polka", "/retail-physical/best-sellers/snapshots?category=xx-rock",
    "/retail-physical/products/B0NYD1KPFL/history?category=jp-rock"])
def test_unknown_category_is_404_naming_the_list(physical: TestClient, url: str) -> None:
    response = get(physical, url)
    assert response.status_code == 404
    assert response.json()["detail"].endswith("; /retail-physical/categories lists them")
    assert response.json()["detail"].startswith("Unknown category '")


def test_rank_lookup(physical: TestClient) -> None:
    asins = sample_asins("us", "retail-physical", "rock", 4)
    body = get(physical, "/retail-physical/best-sellers/rank/7?category=us-rock").json()
    assert (body["key"], body["entry"]["rank"], body["entry"]["asin"]) == ("us-rock", 7, asins[6])
    assert "raw" not in body["entry"] and body["snapshot"]["row_count"] == 100
    listed = get(physical, "/retail-physical/best-sellers/rank/100?category=rock&include_raw=1").json()["entry"]
    assert (listed["asin"], listed["has_card"], listed["raw"]["badge"]) == (asins[99], False, None)


@pytest.mark.parametrize(("url", "kind"), [
    ("/retail-physical/best-sellers/rank/0", "greater_than_equal"),
    ("/retail-physical/best-sellers/rank/101", "less_than_equal"),
    ("/retail-physical/best-sellers/rank/first", "int_parsing"),
    ("/retail-physical/best-sellers/latest?limit=0", "greater_than_equal"),
    ("/retail-physical/best-sellers/latest?limit=101", "less_than_equal"),
    ("/retail-physical/best-sellers/latest?include_raw=maybe", "bool_parsing"),
    ("/retail-physical/best-sellers/snapshots?limit=1001", "less_than_equal"),
    ("/retail-physical/products/B0NYD1KPFL/history?limit=0", "greater_than_equal"),
])
def test_bad_parameters_are_422(physical: TestClient, url: str, kind: str) -> None:
    response = get(physical, url)
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["type"] == kind and set(error) >= {"loc", "msg", "type", "input"}


def test_rank_past_the_rows_of_the_snapshot_is_404(physical_data: Path, tmp_path: Path) -> None:
    """A snapshot with fewer rows (committed directly: the crawl itself refuses short lists)."""
    path = copy_data(physical_data, tmp_path / "data")
    page = samples.render_grid_page("us", "retail-physical", "jazz",
                                    samples.sample_rows("us", "retail-physical", "jazz", 9, 45), 1)
    chart = amazon.parse_grid("us", [page])
    later = NOW + timedelta(days=1)
    with data_dir(path), SnapshotWriter(group_db_path(PHYSICAL.name, settings=run_settings())) as store:
        store.commit([NewSnapshot("us/jazz", later.date().isoformat(), None, later, "test",
                                  [retail.stored(e) for e in chart.entries])], FetchLogRow("us/jazz", later, 1, "ok"))
    with client(path, [PHYSICAL], now=later) as api:
        assert get(api, "/retail-physical/best-sellers/rank/45?category=us-jazz").status_code == 200
        response = get(api, "/retail-physical/best-sellers/rank/46?category=us-jazz")
        assert response.status_code == 404
        assert response.json() == {"detail": "Rank 46 is past the 45 rows of us-jazz's latest snapshot"}


def test_best_seller_snapshots(physical: TestClient) -> None:
    body = get(physical, "/retail-physical/best-sellers/snapshots?category=us-pop").json()
    assert body["count"] == 5 and [s["chart_date"] for s in body["snapshots"]] == DAYS[::-1]
    assert {s["target"] for s in body["snapshots"]} == {"us/pop"}
    every = get(physical, "/retail-physical/best-sellers/snapshots?limit=1000").json()
    assert every["count"] == 21 * 5
    ids = [s["id"] for s in every["snapshots"]]
    assert ids == sorted(ids, reverse=True)
    assert get(physical, "/retail-physical/best-sellers/snapshots").json()["count"] == 50


def _expected_history(asin: str) -> list[tuple[str, str, int]]:
    """(category key, chart date, rank) of every listing of `asin` in the seeded samples, newest first."""
    seen = []
    for market, slug in retail_physical.configured(settings=run_settings()):
        for variant, day in enumerate(DAYS):
            for rank, found in enumerate(sample_asins(market, "retail-physical", slug, variant), start=1):
                if found == asin:
                    seen.append((f"{market}-{slug}", day, rank))
    return sorted(seen, key=lambda s: s[1], reverse=True)


def test_product_history(physical: TestClient) -> None:
    asin = sample_asins("us", "retail-physical", "cds-vinyl", 4)[0]
    body = get(physical, f"/retail-physical/products/{asin}/history").json()
    expected = _expected_history(asin)
    assert len(expected) >= 5
    assert body["snapshots"] == body["count"] == len(expected)
    assert sorted((a["category"], a["chart_date"], a["rank"]) for a in body["appearances"]) == sorted(expected)
    assert [a["chart_date"] for a in body["appearances"]] == sorted((a["chart_date"] for a in body["appearances"]),
                                                                    reverse=True)
    assert (body["first_seen"], body["last_seen"]) == (min(e[1] for e in expected), max(e[1] for e in expected))
    assert body["best_rank"] == min(e[2] for e in expected) == 1 and body["category"] is None
    latest = body["appearances"][0] if body["appearances"][0]["category"] == "us-cds-vinyl" else next(
        a for a in body["appearances"] if a["category"] == "us-cds-vinyl" and a["chart_date"] == DAYS[-1])
    row = samples.sample_rows("us", "retail-physical", "cds-vinyl", 4)[0]
    product = samples.product("us", amazon.category("retail-physical", "cds-vinyl"), row.song)
    assert (latest["rank"], latest["price"], latest["price_text"], latest["currency"], latest["rating"]) == (
        1, product.price, product.price_text, "USD", product.rating)
    assert body["title"] == product.title and body["artist"] == product.artist


def test_product_history_filters_and_limits(physical: TestClient) -> None:
    asin = sample_asins("us", "retail-physical", "cds-vinyl", 4)[0]
    only = get(physical, f"/retail-physical/products/{asin}/history?category=us-cds-vinyl").json()
    expected = [e for e in _expected_history(asin) if e[0] == "us-cds-vinyl"]
    assert only["category"] == "us-cds-vinyl" and only["snapshots"] == len(expected)
    assert {a["category"] for a in only["appearances"]} == {"us-cds-vinyl"}
    limited = get(physical, f"/retail-physical/products/{asin}/history?limit=2").json()
    assert limited["count"] == 2 and limited["snapshots"] == len(_expected_history(asin))
    assert limited["appearances"][0]["chart_date"] == DAYS[-1]


def test_product_never_seen_is_404_and_a_bad_asin_is_422(physical: TestClient) -> None:
    response = get(physical, "/retail-physical/products/B000000000/history")
    assert response.status_code == 404
    assert response.json() == {"detail": "ASIN B000000000 was never seen; it has appeared in no stored best-seller list"}
    for bad in ("B0abcdefgh", "B0NYD1KPF", "B0NYD1KPFLX", "B0NYD-KPFL"):
        response = get(physical, f"/retail-physical/products/{bad}/history")
        assert response.status_code == 422, bad
        assert response.json() == {"detail": [{
            "type": "value_error", "loc": ["path", "asin"],
            "msg": "Value error, an ASIN is 10 characters of A-Z and 0-9, such as B0CHX1W1XY", "input": bad,
            "ctx": {"error": {}}}]}


# --- /retail-digital ------------------------------------------------------------------------------------------

def test_digital_charts_list_keys_with_marketplace_category_and_coverage(digital: TestClient) -> None:
    body = get(digital, "/retail-digital/charts").json()
    keys = [c["key"] for c in body["charts"]]
    assert keys[:3] == ["us-digital-music", "us-digital-albums", "us-digital-songs"]
    assert {"us-landing-digital-albums", "us-landing-digital-songs", "us-landing-cds-vinyl", "jp-landing-cds-vinyl"} <= set(keys)
    assert body["count"] == len(keys) == 4 * 3 + 4 * 3
    landing = next(c for c in body["charts"] if c["key"] == "gb-landing-digital-songs")
    assert landing == {"key": "gb-landing-digital-songs", "market": "gb", "category": "landing-digital-songs",
                       "source": "landing", "name": "Digital Music: Songs", "url": "https://www.amazon.co.uk/gp/bestsellers/",
                       "configured": True, "snapshots": 5, "first_chart_date": DAYS[0], "last_chart_date": DAYS[-1],
                       "last_fetched_at": STAMP, "row_count": 20}
    albums = next(c for c in body["charts"] if c["key"] == "de-digital-albums")
    assert (albums["source"], albums["row_count"], albums["url"]) == (
        "list", 100, "https://www.amazon.de/gp/bestsellers/dmusic/digital-music-album/")


def test_digital_latest_summarises_every_chart(digital: TestClient) -> None:
    body = get(digital, "/retail-digital/latest").json()
    assert body["run"]["kind"] == "crawl" and body["run"]["targets"] == body["run"]["ok"] == 16
    assert body["count"] == 24 and all(c["snapshot"]["chart_date"] == DAYS[-1] for c in body["charts"])
    assert "entries" not in body["charts"][0]


def test_digital_charts_json_is_the_raw_feed(digital: TestClient) -> None:
    body = get(digital, "/retail-digital/charts.json").json()
    assert body["count"] == 24
    chart = next(c for c in body["charts"] if c["key"] == "us-landing-digital-albums")
    assert chart["count"] == 20 and chart["snapshot"]["row_count"] == 20
    first = msgspec.convert(chart["entries"][0], RetailEntry)
    assert first.raw.badge == "#1" and first.raw.list_metadata == {"render.zg.rank": "1"} and first.price is None
    rows = samples.sample_rows("us", "retail-digital", "digital-albums", 4, samples.CAROUSEL_SIZE)
    found = amazon.category("retail-digital", "digital-albums")
    assert [e["asin"] for e in chart["entries"]] == [samples.product("us", found, r.song).asin for r in rows]


def test_digital_charts_json_takes_a_limit_per_chart(digital: TestClient) -> None:
    """Up to 100 rows of every chart by default (today's answer); `limit` keeps the top rows of each."""
    whole = get(digital, "/retail-digital/charts.json")
    assert get(digital, "/retail-digital/charts.json?limit=100").content == whole.content
    top = get(digital, "/retail-digital/charts.json?limit=3").json()
    assert top["count"] == whole.json()["count"] == 24
    for chart, full in zip(top["charts"], whole.json()["charts"], strict=True):
        assert chart["entries"] == full["entries"][:3] and chart["count"] == 3
    assert get(digital, "/retail-digital/charts.json?limit=0").json()["detail"][0]["type"] == "greater_than_equal"


def test_digital_chart_latest(digital: TestClient) -> None:
    body = get(digital, "/retail-digital/charts/jp-digital-songs/latest?limit=5").json()
    assert (body["key"], body["market"], body["category"], body["count"]) == ("jp-digital-songs", "jp", "digital-songs", 5)
    assert [e["asin"] for e in body["entries"]] == sample_asins("jp", "retail-digital", "digital-songs", 4)[:5]
    assert body["entries"][0]["currency"] == "JPY" and "raw" not in body["entries"][0]
    assert get(digital, "/retail-digital/charts/us-landing-cds-vinyl/latest").json()["count"] == 20


@pytest.mark.parametrize("key", ["us-polka", "xx-digital-songs", "digital-songs", "in-digital-songs", "us-landing-toys"])
def test_unknown_chart_key_is_404_naming_the_list(digital: TestClient, key: str) -> None:
    response = get(digital, f"/retail-digital/charts/{key}/latest")
    assert response.status_code == 404
    assert response.json() == {"detail": f"Unknown chart key '{key}'; /retail-digital/charts lists them"}


def test_digital_snapshots_and_limits(digital: TestClient) -> None:
    body = get(digital, "/retail-digital/snapshots?limit=500").json()
    assert body["count"] == 24 * 5
    assert get(digital, "/retail-digital/snapshots?limit=0").status_code == 422
    assert get(digital, "/retail-digital/charts/us-digital-songs/latest?limit=101").status_code == 422


def test_digital_health(digital: TestClient) -> None:
    body = digital.get("/retail-digital/health").json()
    assert body["status"] == "ok" and len(body["targets"]) == 12 and len(body["markets"]) == 4


# --- /retail-music --------------------------------------------------------------------------------------------

def test_top_songs_latest_rank_and_snapshots(music: TestClient) -> None:
    body = get(music, "/retail-music/top-songs/latest?limit=10").json()
    assert (body["key"], body["name"], body["count"]) == ("us-top-songs", "Best-selling digital songs", 10)
    assert body["snapshot"]["source"].endswith("/gp/bestsellers/dmusic/digital-music-track/")
    asins = sample_asins("gb", "retail-music", "top-songs", 4)
    assert [e["asin"] for e in get(music, "/retail-music/top-songs/latest?market=gb").json()["entries"]] == asins
    rank = get(music, "/retail-music/top-songs/rank/3?market=gb").json()
    assert (rank["key"], rank["entry"]["rank"], rank["entry"]["asin"]) == ("gb-top-songs", 3, asins[2])
    assert get(music, "/retail-music/top-songs/snapshots").json()["count"] == 20
    dated = get(music, "/retail-music/top-songs/snapshots?market=de&limit=3").json()
    assert [s["chart_date"] for s in dated["snapshots"]] == DAYS[::-1][:3]
    assert music.get("/retail-music/health").json()["status"] == "ok"


def test_top_songs_errors(music: TestClient) -> None:
    response = get(music, "/retail-music/top-songs/latest?market=fr")
    assert response.status_code == 404
    assert response.json() == {"detail": "Marketplace 'fr' is not crawled; configured: us, gb, de, jp "
                                         "(/retail-music/health lists them)"}
    assert get(music, "/retail-music/top-songs/latest?market=br").status_code == 422
    for rank in ("0", "101", "x"):
        assert get(music, f"/retail-music/top-songs/rank/{rank}").status_code == 422


# --- every group ----------------------------------------------------------------------------------------------

DATA_ROUTES = {
    "retail-physical": ["/categories", "/best-sellers/latest", "/best-sellers/rank/1", "/best-sellers/snapshots",
                        "/products/B0NYD1KPFL/history", "/fetch-logs"],
    "retail-digital": ["/snapshots", "/latest", "/charts.json", "/charts", "/charts/us-digital-songs/latest",
                       "/fetch-logs"],
    "retail-music": ["/top-songs/latest", "/top-songs/rank/1", "/top-songs/snapshots", "/fetch-logs"],
}


@pytest.mark.parametrize("name", list(DATA_ROUTES))
def test_data_routes_need_a_key_and_the_legacy_prefix_answers_alike(name: str, request: pytest.FixtureRequest) -> None:
    api: TestClient = request.getfixturevalue({"retail-physical": "physical", "retail-digital": "digital",
                                               "retail-music": "music"}[name])
    for path in DATA_ROUTES[name]:
        response = api.get(f"/{name}{path}")
        assert response.status_code == 401 and response.headers["www-authenticate"], path
        assert api.get(f"/{name}-api{path}").status_code == 401
        good = get(api, f"/{name}{path}")
        assert good.status_code == 200, (path, good.text)
        assert get(api, f"/{name}-api{path}").content == good.content
    for public in ("/", "/health", "/openapi.json"):
        assert api.get(f"/{name}{public}").status_code == 200


@pytest.mark.parametrize("group", [PHYSICAL, DIGITAL, MUSIC], ids=lambda g: g.name)
def test_openapi_and_root_list_every_route(group: Group, tmp_path: Path) -> None:
    with client(tmp_path, [group]) as api:
        document = api.get(f"/{group.name}/openapi.json").json()
        assert set(document["paths"]) == {"/", "/openapi.json", "/fetch-logs", "/diff", "/exports", "/exports/{name}", *(r.path for r in group.routes)}
        assert "RetailListing" in document["components"]["schemas"]
        root = api.get(f"/{group.name}/").json()
        assert root["service"] == group.name and len(root["endpoints"]) == len(group.routes) + 6


@pytest.mark.parametrize("group", [PHYSICAL, DIGITAL, MUSIC], ids=lambda g: g.name)
def test_no_data_yet_is_404_never_500(group: Group, tmp_path: Path) -> None:
    with client(tmp_path, [group]) as api:
        for path in DATA_ROUTES[group.name]:
            response = get(api, f"/{group.name}{path}")
            assert response.status_code in (200, 404), (path, response.text)
        assert api.get(f"/{group.name}/health").json()["status"] == "degraded"


def test_group_declarations() -> None:
    assert [g.name for g in (PHYSICAL, DIGITAL, MUSIC)] == ["retail-physical", "retail-digital", "retail-music"]
    for group in (PHYSICAL, DIGITAL, MUSIC):
        assert group.per_upstream == 1 and group.delay_seconds is not None and group.delay_seconds(run_settings()) == 5.0
        assert {"AMAZON_US", "AMAZON_GB", "AMAZON_DE", "AMAZON_JP", "AMAZON_IN"} <= set(group.upstreams)
        assert [s.cron for s in group.schedules] and group.entries is not None
        names = {s.variable for s in group.settings}
        assert {"CHARTGW_RETAIL_MARKETS", "CHARTGW_RETAIL_DELAY_SECONDS", "CHARTGW_RETAIL_HEADERS"} <= names
    assert [g.schedules[0].cron for g in (PHYSICAL, DIGITAL, MUSIC)] == ["10 4 * * *", "40 4 * * *", "10 5 * * *"]


def test_entry_mapping_reads_market_artist_title_and_asin() -> None:
    chart = amazon.parse_grid("de", [samples.grid_replies("de", "retail-physical", "cds-vinyl")[k].body for k in
                                     [request_key(r) for r in amazon.grid_requests("de", "retail-physical", "cds-vinyl")]])
    record = msgspec.json.decode(msgspec.json.encode(chart.entries[0]))
    assert PHYSICAL.entries is not None and DIGITAL.entries is not None
    mapped = PHYSICAL.entries.read("de/cds-vinyl", record)
    assert mapped is not None
    assert (mapped.market, mapped.title, mapped.artist, mapped.ids) == (
        "de", chart.entries[0].title, chart.entries[0].artist, {"asin": chart.entries[0].asin})
    unlisted = msgspec.json.decode(msgspec.json.encode(chart.entries[40]))
    assert PHYSICAL.entries.read("de/cds-vinyl", unlisted) is None
    assert DIGITAL.entries.read("us/landing-digital-songs", record) is None
    stored = retail.stored(chart.entries[0])
    assert stored.item_id == chart.entries[0].asin and stored.title_key and stored.artist_key
    unlisted_row = retail.stored(chart.entries[40])
    assert unlisted_row.title_key == unlisted_row.artist_key == ""
    assert unlisted_row.search_key.endswith("|" + chart.entries[40].asin.lower())


# --- settings and targets ---------------------------------------------------------------------------------------

def test_targets_follow_the_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    configure("CHARTGW_DATA_DIR", str(tmp_path))
    configure("CHARTGW_RETAIL_MARKETS", "DE,us")
    configure("CHARTGW_RETAIL_PHYSICAL_CATEGORIES", "vinyl,rock")
    assert [t.key for t in retail_physical.targets({}, FIXED_NOW, settings=run_settings())] == ["de/vinyl", "us/rock"]
    assert [t.key for t in retail_physical.targets({"market": "us", "category": "jazz"}, FIXED_NOW, settings=run_settings())] == ["us/jazz"]
    with pytest.raises(InvalidParams):
        retail_physical.targets({"market": "jp"}, FIXED_NOW, settings=run_settings())
    with pytest.raises(ValueError, match="no known path for category 'jazz'"):
        retail_physical.targets({"market": "de", "category": "jazz"}, FIXED_NOW, settings=run_settings())
    first, second = retail_physical.targets({"market": "us"}, FIXED_NOW, settings=run_settings())[0].requests
    assert (first.path, first.params, second.params) == ("/gp/bestsellers/music/40/", (), (("pg", "2"),))
    configure("CHARTGW_RETAIL_DIGITAL_SOURCES", "landing,digital-songs")
    assert [t.key for t in retail_digital.targets({}, FIXED_NOW, settings=run_settings())] == ["de/landing", "de/digital-songs", "us/landing",
                                                             "us/digital-songs"]
    assert [t.key for t in retail_music.targets({"market": "de"}, FIXED_NOW, settings=run_settings())] == ["de/top-songs"]
    assert PHYSICAL.delay_seconds is not None
    checks = (("CHARTGW_RETAIL_MARKETS", "us,br", lambda: retail_music.targets({}, FIXED_NOW, settings=run_settings())),
              ("CHARTGW_RETAIL_PHYSICAL_CATEGORIES", "polka", lambda: retail_physical.targets({}, FIXED_NOW, settings=run_settings())),
              ("CHARTGW_RETAIL_HEADERS", "no colon here", lambda: retail_music.targets({}, FIXED_NOW, settings=run_settings())),
              ("CHARTGW_RETAIL_HEADERS", "Accept: x", lambda: retail_music.targets({}, FIXED_NOW, settings=run_settings())),
              ("CHARTGW_RETAIL_DELAY_SECONDS", "-1", lambda: PHYSICAL.delay_seconds(run_settings())),
              ("CHARTGW_RETAIL_BACKOFF_HOURS", "0", lambda: retail_music.targets({}, FIXED_NOW, settings=run_settings())),
              ("CHARTGW_RETAIL_DIGITAL_SOURCES", "toys", lambda: retail_digital.targets({}, FIXED_NOW, settings=run_settings())))
    for name, bad, call in checks:
        with environment({name: bad}), pytest.raises(SettingError, match=name):
            call()


# --- crawls: refusals, the gate, the last good snapshot, backoff --------------------------------------------------

def _tables(variant: int, overrides: dict[str, dict[ReplayKey, Reply]] | None = None) -> dict[str, dict[ReplayKey, Reply]]:
    tables = physical_demo.replies(variant, settings=run_settings())
    for upstream, table in (overrides or {}).items():
        tables[upstream] = {**tables[upstream], **table}
    return tables


def _crawl(path: Path, at: datetime, tables: dict[str, dict[ReplayKey, Reply]], monkeypatch: pytest.MonkeyPatch,
           group: Group = PHYSICAL) -> tuple[list[Outcome], dict[str, list[ReplayKey]]]:
    with data_dir(path), replay_upstreams(tables) as servers:
        outcomes = asyncio.run(crawl_group(group, {}, now=fixed(at), settings=run_settings()))
    return outcomes, {name: [key for key, _ in server.seen] for name, server in servers.items()}


@pytest.fixture
def small(small_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, value in SMALL.items():
        configure(name, value)
    return copy_data(small_data, tmp_path / "data")


def _latest(path: Path, key: str, at: datetime) -> Any:
    with client(path, [PHYSICAL], now=at) as api:
        return get(api, f"/retail-physical/best-sellers/latest?category={key}").json()


def _health(path: Path, at: datetime) -> Any:
    with client(path, [PHYSICAL], now=at) as api:
        return api.get("/retail-physical/health").json()


def _refused(kind: str, market: str = "us", slug: str = "cds-vinyl") -> dict[str, dict[ReplayKey, Reply]]:
    return {amazon.MARKETPLACES[market].upstream: samples.refusal_replies(market, "retail-physical", slug, kind)}


@pytest.mark.parametrize(("kind", "status"), [("robot_check", 503), ("sorry_503", 503), ("sign_in", 200)])
def test_a_refusal_fails_with_its_reason_stops_the_marketplace_and_keeps_the_last_good_snapshot(
        small: Path, monkeypatch: pytest.MonkeyPatch, kind: str, status: int) -> None:
    at = NOW + timedelta(days=1)
    before = _latest(small, "us-cds-vinyl", at)
    outcomes, seen = _crawl(small, at, _tables(5, _refused(kind)), monkeypatch)
    by_key = {o.target: o for o in outcomes}
    refused = by_key["us/cds-vinyl"]
    assert refused.status == "failed" and refused.http_status == status and kind in (refused.error or "")
    for key in ("us/rock", "us/pop"):
        assert by_key[key].status == "failed"
        assert (by_key[key].error or "").startswith(f"skipped: amazon us answered {kind} to us/cds-vinyl")
    assert by_key["gb/cds-vinyl"].status == "ok"
    us_paths = [key[1] for key in seen["AMAZON_US"]]
    if status == 503:  # refused before anything else was asked: one request, not retried, nothing more sent
        assert us_paths == ["/gp/bestsellers/music/"]
    else:  # a 200 refusal is found by the parser, after the target's pages
        assert len(us_paths) < 6
    assert _latest(small, "us-cds-vinyl", at) == before
    assert _latest(small, "us-rock", at)["snapshot"]["chart_date"] == DAYS[-1]
    assert _latest(small, "gb-cds-vinyl", at)["snapshot"]["chart_date"] == at.date().isoformat()
    health = _health(small, at)
    us = health["markets"][0]
    assert health["status"] == "degraded"
    assert (us["market"], us["state"], us["consecutive_failures"], us["reason"], us["since"], us["retry_after"]) == (
        "us", "backing_off", 1, kind, at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        (at + timedelta(hours=20)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert kind in us["error"]
    later = _health(small, at + timedelta(hours=21))["markets"][0]
    assert (later["state"], later["retry_after"], later["consecutive_failures"]) == ("failing", None, 1)
    assert health["markets"][1]["state"] == "ok"
    with client(small, [PHYSICAL], now=at) as api:
        failed = get(api, "/retail-physical/fetch-logs?status=failed").json()["entries"]
        assert {e["target"] for e in failed} == {"us/cds-vinyl", "us/rock", "us/pop"}


@pytest.mark.parametrize(("name", "body", "error"), [
    ("layout gone", b"<!doctype html><html><head><title>Amazon.com</title></head><body><div id='zg'></div></body></html>",
     "layout_gone"),
    ("truncated", None, "truncated"),
    ("short list", b"short", "expected 100 rows"),
    ("server error", b"<html><body>Internal error</body></html>", "answered HTTP 500"),
])
def test_a_broken_page_fails_that_list_only_and_keeps_the_last_good_snapshot(
        small: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: bytes | None, error: str) -> None:
    at = NOW + timedelta(days=1)
    before = _latest(small, "us-rock", at)
    first, second = amazon.grid_requests("us", "retail-physical", "rock")
    good = samples.grid_replies("us", "retail-physical", "rock", 5)
    if name == "short list":
        rows = samples.sample_rows("us", "retail-physical", "rock", 5, 60)
        override = {request_key(first): Reply(samples.render_grid_page("us", "retail-physical", "rock", rows, 1)),
                    request_key(second): Reply(samples.render_grid_page("us", "retail-physical", "rock", rows, 2))}
    elif body is None:
        page = good[request_key(first)].body
        override = {request_key(first): Reply(page[: len(page) // 2])}
    elif name == "server error":  # an ordinary error, not a refusal: retried, and the marketplace goes on
        override = {request_key(first): Reply(body, 500)}
    else:
        override = {request_key(first): Reply(body)}
    outcomes, seen = _crawl(small, at, _tables(5, {"AMAZON_US": override}), monkeypatch)
    by_key = {o.target: o for o in outcomes}
    assert by_key["us/rock"].status == "failed" and error in (by_key["us/rock"].error or "")
    asked = [key for key in seen["AMAZON_US"] if key == request_key(first)]
    assert len(asked) == (3 if name == "server error" else 1)
    assert by_key["us/cds-vinyl"].status == by_key["us/pop"].status == "ok"  # not a refusal: the rest goes on
    assert _latest(small, "us-rock", at) == before
    us = _health(small, at)["markets"][0]
    assert us["state"] == "ok"  # other lists of the marketplace committed


def test_a_refused_landing_page_stops_retail_digital_in_that_marketplace(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_RETAIL_MARKETS", "us,jp")
    configure("CHARTGW_RETAIL_DIGITAL_SOURCES", "landing,digital-songs")
    path = build_group_db(tmp_path / "data", DIGITAL, NOW)
    at = NOW + timedelta(days=1)
    with client(path, [DIGITAL], now=at) as api:
        before = get(api, "/retail-digital/charts/us-landing-digital-albums/latest").json()
    tables = digital_demo.replies(5, settings=run_settings())
    tables["AMAZON_US"][request_key(amazon.landing_request("us"))] = Reply(samples.render_robot_check("us"), 503)
    outcomes, seen = _crawl(path, at, tables, monkeypatch, DIGITAL)
    by_key = {o.target: o for o in outcomes}
    assert by_key["us/landing"].status == "failed" and "robot_check" in (by_key["us/landing"].error or "")
    assert (by_key["us/digital-songs"].error or "").startswith("skipped: amazon us answered robot_check to us/landing")
    assert [key[1] for key in seen["AMAZON_US"]] == ["/gp/bestsellers/"]
    assert by_key["jp/landing"].status == by_key["jp/digital-songs"].status == "ok"
    with client(path, [DIGITAL], now=at) as api:
        assert get(api, "/retail-digital/charts/us-landing-digital-albums/latest").json() == before
        assert get(api, "/retail-digital/charts/jp-landing-digital-albums/latest").json()["snapshot"]["chart_date"] == (
            at.date().isoformat())
        health = api.get("/retail-digital/health").json()
        assert health["status"] == "degraded"
        assert [(m["market"], m["state"], m["reason"]) for m in health["markets"]] == [
            ("us", "backing_off", "robot_check"), ("jp", "ok", None)]


def test_backoff_is_exponential_capped_and_shown_in_health(small: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refusing = _tables(5, {"AMAZON_US": {k: v for slug in ("cds-vinyl", "rock", "pop") for k, v in
                                         samples.refusal_replies("us", "retail-physical", slug, "robot_check").items()}})
    day1 = NOW + timedelta(days=1)
    _crawl(small, day1, refusing, monkeypatch)
    iso1 = day1.strftime("%Y-%m-%dT%H:%M:%SZ")
    # An hour later (a manual crawl): us is inside its 20 h window, so nothing is asked of it.
    outcomes, seen = _crawl(small, day1 + timedelta(hours=1), refusing, monkeypatch)
    assert seen["AMAZON_US"] == [] and len(seen["AMAZON_GB"]) == 2
    us_outcomes = [o for o in outcomes if o.target.startswith("us/")]
    assert all((o.error or "").startswith("skipped: amazon us is backing off after 1 failed crawl(s) in a row since "
                                          f"{iso1} (last: robot_check); next attempt after ") for o in us_outcomes)
    us = _health(small, day1 + timedelta(hours=1))["markets"][0]
    assert (us["state"], us["consecutive_failures"], us["reason"], us["since"], us["retry_after"]) == (
        "backing_off", 1, "robot_check", iso1, (day1 + timedelta(hours=20)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    # The next day it is asked again (one request: the robot check stops it), and fails: 40 h now.
    day2 = day1 + timedelta(days=1)
    _, seen = _crawl(small, day2, refusing, monkeypatch)
    assert len(seen["AMAZON_US"]) == 1
    us = _health(small, day2 + timedelta(hours=30))["markets"][0]
    assert (us["state"], us["consecutive_failures"], us["since"], us["retry_after"]) == (
        "backing_off", 2, iso1, (day2 + timedelta(hours=40)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    _, seen = _crawl(small, day2 + timedelta(days=1), refusing, monkeypatch)
    assert seen["AMAZON_US"] == []
    # Two days later Amazon answers again: the streak ends and the lists move on.
    day4 = day2 + timedelta(days=2)
    outcomes, seen = _crawl(small, day4, _tables(6), monkeypatch)
    assert all(o.status == "ok" for o in outcomes) and len(seen["AMAZON_US"]) == 6
    health = _health(small, day4)
    assert health["status"] == "ok" and health["markets"][0]["state"] == "ok"
    assert _latest(small, "us-rock", day4)["entries"][0]["asin"] == sample_asins("us", "retail-physical", "rock", 6)[0]


def test_streaks_cap_and_ignore_skipped_targets() -> None:
    def run(*outcomes: tuple[str, str, str | None]) -> bytes:
        return msgspec.json.encode({"options": {}, "outcomes": [
            {"target": t, "status": s, "error": e} for t, s, e in outcomes]})

    runs = [(f"2026-11-{20 - i:02d}T04:10:00Z", run(("us/rock", "failed", "x: robot_check: captcha"),
                                                    ("us/pop", "failed", "skipped: closed"), ("gb/rock", "ok", None)))
            for i in range(12)]
    runs.append(("2026-11-01T04:10:00Z", run(("us/rock", "ok", None))))
    found = retail.streaks(runs, ["us", "gb", "de"])
    us = found["us"]
    assert (us.failures, us.reason, us.since, us.last_failure, us.last_ok) == (
        12, "robot_check", "2026-11-09T04:10:00Z", "2026-11-20T04:10:00Z", "2026-11-01T04:10:00Z")
    assert us.retry_after(20, 168) == datetime.fromisoformat("2026-11-27T04:10:00+00:00")  # capped at 7 days
    assert found["gb"].failures == 0 and found["de"] == retail.Streak("de", 0, None, None, None, None, None)
    skipped_only = retail.streaks([("2026-11-20T04:10:00Z", run(("us/rock", "failed", "skipped: backing off")))], ["us"])
    assert skipped_only["us"].failures == 0


def test_custom_headers_are_sent_with_the_marketplace_language(small: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_RETAIL_HEADERS", "User-Agent: TestBrowser/1.0|Accept: text/html|Accept-Language: xx")
    with data_dir(small), replay_upstreams(_tables(5)) as servers:
        asyncio.run(crawl_group(PHYSICAL, {"market": "gb"}, now=fixed(NOW + timedelta(days=1)), settings=run_settings()))
    headers = servers["AMAZON_GB"].seen[0][1]
    assert (headers["user-agent"], headers["accept"], headers["accept-language"]) == (
        "TestBrowser/1.0", "text/html", "en-GB,en;q=0.9")
    assert servers["AMAZON_US"].seen == []


def test_landing_page_of_the_real_capture_becomes_chart_keys(shared_upstream: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The real amazon.in capture crawled as /retail-digital's landing source: one chart per carousel."""
    configure("CHARTGW_RETAIL_MARKETS", "in")
    configure("CHARTGW_RETAIL_DIGITAL_SOURCES", "landing")
    body = (shared_upstream / "amazon/amazon-in-bestsellers-2024.html").read_bytes()
    tables = {"AMAZON_IN": {request_key(amazon.landing_request("in")): Reply(body)}}
    (outcome,), _ = _crawl(tmp_path, NOW, tables, monkeypatch, DIGITAL)
    assert outcome.status == "ok" and outcome.target == "in/landing"
    with client(tmp_path, [DIGITAL]) as api:
        keys = [c["key"] for c in get(api, "/retail-digital/charts").json()["charts"]]
        assert keys == ["in-landing-apparel", "in-landing-automotive", "in-landing-beauty", "in-landing-industrial",
                        "in-landing-musical-instruments", "in-landing-toys"]
        chart = get(api, "/retail-digital/charts/in-landing-musical-instruments/latest").json()
        assert chart["name"] == "Musical Instruments" and chart["count"] == 20
        assert [e["asin"] for e in chart["entries"][:3]] == ["B08SCG35MG", "B017NPCSLI", "B076B8G5D8"]
        assert (chart["entries"][0]["rating"], chart["entries"][0]["review_count"]) == (3.9, 18665)


def test_history_over_a_year_of_ten_daily_categories(tmp_path: Path) -> None:
    """365 daily snapshots x 10 categories x 100 rows, committed directly; one product's whole run."""
    slugs = [c.slug for c in amazon.categories("retail-physical") if "us" in c.paths][:10]
    build_year(tmp_path, slugs, 365)
    later = NOW + timedelta(days=1)
    with client(tmp_path, [PHYSICAL], now=later) as api:
        body = get(api, "/retail-physical/products/B0YEAR0007/history?limit=10000").json()
        assert body["snapshots"] == body["count"] == 365 * 10
        assert body["best_rank"] == 1 and body["first_seen"] == (NOW - timedelta(days=364)).date().isoformat()
        assert body["last_seen"] == NOW.date().isoformat()
        first = body["appearances"][0]
        assert first["chart_date"] == NOW.date().isoformat() and first["price"] is not None
        rock = get(api, "/retail-physical/products/B0YEAR0007/history?category=us-rock&limit=3").json()
        assert (rock["snapshots"], rock["count"]) == (365, 3)


def build_year(path: Path, slugs: list[str], days: int) -> None:
    """A /retail-physical file of `days` daily snapshots of `slugs` in us: ASIN B0YEAR0000+n holds rank
    1 + (n + day) % 100 (so every product moves through every rank). Committed a month at a time."""
    encode = msgspec.json.Encoder().encode
    names = [retail.stored(_year_entry(n, 1, 0)) for n in range(100)]
    with data_dir(path), SnapshotWriter(group_db_path(PHYSICAL.name, settings=run_settings())) as store:
        store.db.execute("PRAGMA synchronous=OFF")
        snapshots: list[NewSnapshot] = []
        for day in range(days):
            at = NOW - timedelta(days=days - 1 - day)
            for slug in slugs:
                entries = sorted((_year_entry(n, 1 + (n + day) % 100, day) for n in range(100)), key=lambda e: e.rank)
                snapshots.append(NewSnapshot(f"us/{slug}", at.date().isoformat(), None, at, "test", [
                    StoredEntry(e.rank, names[int(e.asin[6:])].title_key, names[int(e.asin[6:])].artist_key, e.asin,
                                encode(e), names[int(e.asin[6:])].search_key) for e in entries]))
            if day % 30 == 29 or day == days - 1:
                store.commit(snapshots, FetchLogRow("year", at, 1, "ok"))
                snapshots = []


def _year_entry(n: int, rank: int, day: int) -> RetailEntry:
    return RetailEntry(rank=rank, asin=f"B0YEAR{n:04d}", title=f"Album {n}", artist=f"Artist {n}", format="Audio CD",
                       price=10.0 + day % 7, price_text=f"${10 + day % 7}.00", currency="USD", rating=4.5,
                       review_count=100 + day, image=None, url=f"https://www.amazon.com/dp/B0YEAR{n:04d}", has_card=True,
                       raw=amazon.RetailRaw(badge=f"#{rank}", href=None, rating_text=None, review_text=None,
                                            list_metadata={}))


def test_a_card_without_a_title_is_layout_gone() -> None:
    pages = [samples.grid_replies("us", "retail-physical", "rock")[request_key(r)].body
             for r in amazon.grid_requests("us", "retail-physical", "rock")]
    entries = amazon.parse_grid("us", pages).entries
    retail.check_cards(entries, "us", "us/rock")  # list-only ranks (no card) have no title, and that is fine
    entries[4].title = None
    with pytest.raises(amazon.AmazonPageError, match="card #5 .* has no title") as exc:
        retail.check_cards(entries, "us", "us/rock")
    assert exc.value.reason == "layout_gone"
