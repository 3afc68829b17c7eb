"""/recognition end to end: the real crawl over the rendered Shazam samples (yesterday's Top 200s, then
discovery and all 275 charts today, each with its track JSON where discovery locates one), then every
route, the refusals, failed upstreams and failed enrichment."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from chartgw.api.group import crawl_group
from chartgw.crawl.runner import KST, CrawlError
from chartgw.demo.replay import ReplayTransport, Reply, request_key
from chartgw.demo.samples import global_rows
from chartgw.demo.samples import recognition as samples
from chartgw.groups.recognition import GROUP, targets
from chartgw.upstreams import shazam
from tests.fixtures import FIXED_NOW, api_fixture, client, copy_data, data_dir, get, group_data
from tests.fixtures import settings as run_settings

NOW = FIXED_NOW
TODAY = NOW.astimezone(KST).date()
YESTERDAY = TODAY - timedelta(days=1)


@pytest.fixture(scope="module")
def recognition_data(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return group_data(all_groups_data, tmp_path_factory.mktemp("recognition-data"), "recognition")


api = api_fixture(GROUP, "recognition_data")


# --- the routes -----------------------------------------------------------------------------------------


def test_health_is_public_with_discovery_counts_and_coverage(api: TestClient) -> None:
    response = api.get("/recognition/health")
    assert response.status_code == 200 and response.headers["cache-control"] == "public, max-age=300"
    body = response.json()
    assert body["status"] == "ok"
    discovery = body["discovery"]
    assert {k: discovery[k] for k in ("paths", "targets", "top_200", "genre", "viral", "top_50")} == {
        "paths": 276, "targets": 275, "top_200": 71, "genre": 37, "viral": 43, "top_50": 124}
    assert discovery["discovered_at"] and discovery["stale"] is False
    assert body["coverage"] == {"targets": 275, "with_snapshot": 275, "fresh": 275, "stale": 0,
                                "latest_chart_date": TODAY.isoformat()}


def test_charts_is_the_discovered_catalogue(api: TestClient) -> None:
    body = get(api, "/recognition/charts").json()
    assert body["count"] == 275 and body["counts"]["top_50"] == 124 and body["snapshot"]["target"] == "catalogue"
    by_path = {c["path"]: c for c in body["charts"]}
    assert by_path["top-50/brazil/brasilia"] == {
        "kind": "top-50", "market": "brazil", "genre": None, "city": "brasilia", "path": "top-50/brazil/brasilia",
        "upstream_paths": ["top-50/brazil/bras%C3%ADlia"], "name": "Top 50 Brasília, Brazil"}
    assert by_path["top-50/turkiye/istanbul"]["upstream_paths"] == ["top-50/t%C3%BCrkiye/istanbul"] * 2


@pytest.mark.parametrize("url,path,rows,storefront", [
    ("/recognition/top-200/brazil/latest", "top-200/brazil", 200, "br"),
    ("/recognition/top-200/world/latest", "top-200/world", 200, "us"),
    ("/recognition/genre/world/randb-soul/latest", "genre/world/randb-soul", 100, None),
    ("/recognition/genre/united-states/country/latest", "genre/united-states/country", 100, "us"),
    ("/recognition/viral/south-korea/latest", "viral/south-korea", 50, None),
    ("/recognition/top-50/turkiye/izmir/latest", "top-50/turkiye/izmir", 50, "tr"),
    ("/recognition/top-50/united-states/washington-d-c/latest", "top-50/united-states/washington-d-c", 50, "us"),
])
def test_every_chart_kind_serves_its_latest_snapshot(api: TestClient, url: str, path: str, rows: int,
                                                     storefront: str | None) -> None:
    """Rows are the CSV's; charts with a legacy list id (not world genres, not viral charts) carry the
    track JSON's url, artwork, store link (the chart's storefront) and track key on every row."""
    response = get(api, url)
    assert response.headers["cache-control"] == "private, max-age=600"  # the spec's 5 to 30 minutes
    body = response.json()
    assert body["chart"]["path"] == path and body["snapshot"]["target"] == path
    assert body["snapshot"]["chart_date"] == TODAY.isoformat() and body["snapshot"]["stale"] is False
    assert body["count"] == rows == body["snapshot"]["row_count"] and "raw" not in body
    assert [e["rank"] for e in body["entries"]] == list(range(1, rows + 1))
    songs = [row.song for row in global_rows(path, 1, rows)]
    for entry, song in zip(body["entries"], songs, strict=True):
        assert entry["artist"] and entry["title"] and entry["artists"] and entry["chart_date"] == TODAY.isoformat()
        if storefront is None:  # no track JSON to ask for: present and null
            assert entry["url"] is entry["artwork_url"] is entry["store_url"] is entry["shazam_track_id"] is None
            continue
        key = samples.track_key(song)
        assert entry["shazam_track_id"] == key and entry["url"].startswith(f"https://www.shazam.com/track/{key}/")
        assert entry["artwork_url"].startswith("https://is1-ssl.mzstatic.com/") and \
            entry["artwork_url"].endswith("/400x400cc.jpg")
        assert entry["store_url"].startswith(f"https://music.apple.com/{storefront}/album/")


def test_limit_and_include_raw(api: TestClient) -> None:
    body = get(api, "/recognition/top-200/brazil/latest?limit=3&include_raw=true").json()
    assert body["count"] == 3 and len(body["entries"]) == 3
    expected = samples.render_csv("top-200/brazil", TODAY, 1, 200).decode("utf-8")
    assert body["raw"] == expected
    assert "raw" not in get(api, "/recognition/viral/world/latest?include_raw=false&limit=1").json()
    assert get(api, "/recognition/viral/world/latest?include_raw=1&limit=1").json()["raw"].startswith("\ufeff\n\"")


def test_snapshots_filters_newest_first(api: TestClient) -> None:
    body = get(api, "/recognition/snapshots?chart_kind=top-200&market=brazil").json()
    assert [(s["snapshot"]["target"], s["snapshot"]["chart_date"]) for s in body["snapshots"]] == [
        ("top-200/brazil", TODAY.isoformat()), ("top-200/brazil", YESTERDAY.isoformat())]
    assert body["snapshots"][0]["snapshot"]["id"] > body["snapshots"][1]["snapshot"]["id"]
    brazil = get(api, "/recognition/snapshots?market=brazil&limit=500").json()
    assert {s["chart_kind"] for s in brazil["snapshots"]} == {"top-200", "viral", "top-50"}
    assert brazil["count"] == 2 + 1 + 3
    pop = get(api, "/recognition/snapshots?genre=pop&limit=500").json()["snapshots"]
    assert {s["market"] for s in pop} == {"world", "united-states", "australia", "germany", "france",
                                          "united-kingdom", "mexico"} and all(s["genre"] == "pop" for s in pop)
    city = get(api, "/recognition/snapshots?city=london").json()["snapshots"]
    assert sorted(s["market"] for s in city) == ["canada", "united-kingdom"]
    ids = [s["snapshot"]["id"] for s in get(api, "/recognition/snapshots?limit=5").json()["snapshots"]]
    assert len(ids) == 5 and ids == sorted(ids, reverse=True)


def test_search_reads_only_the_latest_snapshot_of_each_chart(api: TestClient) -> None:
    body = get(api, "/recognition/search?q=taylor%20swift&chart_kind=top-200&limit=500").json()
    hits = body["hits"]
    assert hits and body["count"] == len(hits)
    assert all(h["chart_date"] == TODAY.isoformat() and h["chart_kind"] == "top-200" for h in hits)
    assert all("Taylor Swift" in h["entry"]["artist"] for h in hits)
    per_chart = [(h["market"], h["entry"]["title"]) for h in hits]
    assert len(per_chart) == len(set(per_chart))  # yesterday's snapshots are not searched
    ranks = [h["entry"]["rank"] for h in hits]
    assert ranks == sorted(ranks)
    brazil = get(api, "/recognition/search?q=TAYLOR&market=brazil&limit=500").json()["hits"]
    assert brazil and {h["market"] for h in brazil} == {"brazil"}
    assert get(api, "/recognition/search?q=zzzz-no-such-song").json() == {"q": "zzzz-no-such-song", "count": 0,
                                                                        "hits": []}
    no_letters = get(api, "/recognition/search?q=!!!")  # one search rule everywhere: a 422 saying why
    assert no_letters.status_code == 422 and no_letters.json()["detail"][0]["msg"] == (
        "Value error, must contain at least one letter or digit (case, accents and punctuation are ignored)")


# --- refusals -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/recognition/charts", "/recognition/top-200/brazil/latest",
                                 "/recognition/snapshots", "/recognition/search?q=a"])
def test_data_routes_need_a_key(api: TestClient, url: str) -> None:
    assert api.get(url).status_code == 401


@pytest.mark.parametrize("url,detail", [
    ("/recognition/top-200/atlantis/latest", "No such chart was discovered: top-200/atlantis"),
    ("/recognition/top-50/brazil/curitiba/latest", "No such chart was discovered: top-50/brazil/curitiba"),
    ("/recognition/top-50/austria/vienna/latest", "No such chart was discovered: top-50/austria/vienna"),
    ("/recognition/genre/brazil/pop/latest", "No such chart was discovered: genre/brazil/pop"),
    ("/recognition/viral/egypt/latest", "No such chart was discovered: viral/egypt"),
])
def test_charts_the_catalogue_does_not_list_are_404(api: TestClient, url: str, detail: str) -> None:
    response = get(api, url)
    assert response.status_code == 404 and response.json() == {"detail": detail}


def test_bad_parameters_are_fastapi_422s(api: TestClient) -> None:
    def detail(url: str) -> list[dict[str, object]]:
        response = get(api, url)
        assert response.status_code == 422
        return response.json()["detail"]

    assert detail("/recognition/top-200/Brazil/latest") == [{
        "type": "value_error", "loc": ["path", "market"],
        "msg": "Value error, must be a slug of lowercase letters a-z, digits 0-9 and '-'", "input": "Brazil",
        "ctx": {"error": {}}}]
    assert detail("/recognition/top-50/brazil/s%C3%A3o-paulo/latest")[0]["loc"] == ["path", "city"]
    assert detail("/recognition/top-200/brazil/latest?limit=201") == [{
        "type": "less_than_equal", "loc": ["query", "limit"], "msg": "Input should be less than or equal to 200",
        "input": "201", "ctx": {"le": 200}}]
    assert detail("/recognition/genre/world/pop/latest?include_raw=maybe")[0]["type"] == "bool_parsing"
    assert detail("/recognition/search") == [{"type": "missing", "loc": ["query", "q"], "msg": "Field required",
                                              "input": None}]
    assert detail("/recognition/search?q=") == [{
        "type": "string_too_short", "loc": ["query", "q"], "msg": "String should have at least 1 character",
        "input": "", "ctx": {"min_length": 1}}]
    assert detail("/recognition/snapshots?chart_kind=daily") == [{
        "type": "literal_error", "loc": ["query", "chart_kind"],
        "msg": "Input should be 'top-200', 'genre', 'viral' or 'top-50'", "input": "daily",
        "ctx": {"expected": "'top-200', 'genre', 'viral' or 'top-50'"}}]
    assert detail("/recognition/snapshots?chart_kind=viral&genre=pop") == [{
        "type": "literal_error", "loc": ["query", "chart_kind"], "msg": "Input should be 'genre'", "input": "viral",
        "ctx": {"expected": "'genre'"}}]
    assert detail("/recognition/snapshots?limit=0")[0]["type"] == "greater_than_equal"
    assert detail("/recognition/snapshots?genre=pop&city=paris")[0]["loc"] == ["query", "city"]


def test_legacy_prefix_answers_as_the_public_one(api: TestClient) -> None:
    for path in ("/top-200/world/latest?limit=2", "/charts", "/search?q=drake&limit=3"):
        assert get(api, "/recognition-api" + path).content == get(api, "/recognition" + path).content
    assert api.get("/recognition-api/health").status_code == 200
    assert api.get("/recognition-api/charts").status_code == 401


def test_openapi_lists_every_route(api: TestClient) -> None:
    document = api.get("/recognition/openapi.json").json()
    assert set(document["paths"]) == {
        "/", "/health", "/charts", "/top-200/{market}/latest", "/genre/{market}/{genre}/latest",
        "/viral/{market}/latest", "/top-50/{market}/{city}/latest", "/snapshots", "/search", "/openapi.json", "/fetch-logs", "/diff", "/exports", "/exports/{name}"}
    entry = document["components"]["schemas"]["RecognitionEntry"]
    assert set(entry["required"]) == {"rank", "artist", "artists", "title", "chart_date"}
    for field in ("url", "artwork_url", "store_url", "shazam_track_id"):
        assert {"type": "null"} in entry["properties"][field]["anyOf"]  # nullable, and the schema says so
    latest = document["paths"]["/top-50/{market}/{city}/latest"]["get"]
    assert [p["name"] for p in latest["parameters"] if p["in"] in ("path", "query")] == [
        "market", "city", "limit", "include_raw", "format", "include"]


def test_openapi_declares_the_discovered_catalogue_as_enums(api: TestClient, tmp_path: Path) -> None:
    """Markets, genres and cities are known only from the catalogue: the document lists what it holds now."""
    charts = get(api, "/recognition/charts").json()["charts"]
    document = api.get("/recognition/openapi.json").json()
    params = {p["name"]: p["schema"] for p in document["paths"]["/top-50/{market}/{city}/latest"]["get"]["parameters"]}
    genre = next(p["schema"] for p in document["paths"]["/genre/{market}/{genre}/latest"]["get"]["parameters"]
                 if p["name"] == "genre")
    assert params["market"]["enum"] == sorted({c["market"] for c in charts})
    assert params["city"]["enum"] == sorted({c["city"] for c in charts if c["city"]})
    assert genre["enum"] == sorted({c["genre"] for c in charts if c["genre"]}) and "world" in params["market"]["enum"]
    with data_dir(tmp_path), client(tmp_path, [GROUP]) as empty:  # before the first discovery: the slug pattern alone
        bare = empty.get("/recognition/openapi.json").json()
    market = next(p["schema"] for p in bare["paths"]["/top-200/{market}/latest"]["get"]["parameters"] if p["name"] == "market")
    assert "enum" not in market and market["pattern"]


def test_group_schedule_and_politeness() -> None:
    (schedule,) = GROUP.schedules
    assert (schedule.cron, schedule.timezone, schedule.args) == ("17 6 * * *", "Asia/Seoul", ())
    assert GROUP.per_upstream == 4 and GROUP.upstreams == ("SHAZAM",) and GROUP.discovery is not None
    assert GROUP.crawl_options == (("chart_kind", ("top-200", "genre", "viral", "top-50")),)


# --- crawls that go wrong -------------------------------------------------------------------------------


def _latest_ids(path: Path) -> dict[str, int]:
    db = sqlite3.connect(path / "recognition.sqlite")
    return dict(db.execute("SELECT target, max(id) FROM snapshots GROUP BY target"))


def _failed_log(path: Path) -> dict[str, str]:
    db = sqlite3.connect(path / "recognition.sqlite")
    return dict(db.execute("SELECT target, error FROM fetch_log WHERE status = 'failed'"))


def test_failed_upstreams_keep_the_last_good_snapshots(recognition_data: Path, tmp_path: Path) -> None:
    path = copy_data(recognition_data, tmp_path / "data")
    before = _latest_ids(path)
    table = samples.replies(TODAY + timedelta(days=1), 2)
    table[request_key(shazam.locations_request())] = Reply(b'{"countries":[{"id":"AE","name":"United Ar', 200,
                                                           "application/json")
    csv = {p: request_key(shazam.csv_request(p)) for p in ("top-200/brazil", "top-200/germany", "top-200/france",
                                                          "top-200/spain")}
    table[csv["top-200/brazil"]] = Reply(b"Internal Server Error", 500, "text/plain")
    table[csv["top-200/germany"]] = Reply(b"<!DOCTYPE html><html><body>Shazam</body></html>", 200, "text/html")
    spain = samples.render_csv("top-200/spain", TODAY + timedelta(days=1), 2, 200)
    table[csv["top-200/spain"]] = Reply(spain[: len(spain) // 2], 200, "text/csv")  # cut mid-transfer
    table[csv["top-200/france"]] = Reply(b'\xef\xbb\xbf\n"Sunday, 26 July 2026"\nRank,Artist,Title\n1,"A","B"\n'
                                         b'2,"C","D"\n4,"E","F"', 200, "text/csv")  # a row missing
    with data_dir(path):
        outcomes = asyncio.run(crawl_group(GROUP, {"chart_kind": "top-200"}, now=lambda: NOW + timedelta(days=1),
                                           transport=ReplayTransport({"SHAZAM": table}), settings=run_settings()))
    status = {o.target: o.status for o in outcomes}
    assert status["catalogue"] == "failed"  # broken JSON: the last catalogue stays in use
    assert {t for t, s in status.items() if s == "failed"} == {"catalogue", "top-200/brazil", "top-200/germany",
                                                            "top-200/spain", "top-200/france"}
    assert sum(s == "ok" for s in status.values()) == 67  # one failing chart does not stop the others
    after = _latest_ids(path)
    for target in ("catalogue", "top-200/brazil", "top-200/germany", "top-200/spain", "top-200/france"):
        assert after[target] == before[target]
    assert after["top-200/italy"] > before["top-200/italy"]
    errors = _failed_log(path)
    assert "HTTP 500" in errors["top-200/brazil"] and "HTML page" in errors["top-200/germany"]
    assert "row" in errors["top-200/spain"] and "expected at least 100 rows, upstream gave 3" in errors["top-200/france"]
    assert "not JSON" in errors["catalogue"]
    with client(path, [GROUP]) as api:
        body = get(api, "/recognition/top-200/brazil/latest?limit=1").json()
        assert body["snapshot"]["id"] == before["top-200/brazil"] and body["snapshot"]["chart_date"] == TODAY.isoformat()
        assert api.get("/recognition/health").json()["discovery"]["targets"] == 275


def test_the_crawl_asks_for_each_located_track_json_once(recognition_data: Path, tmp_path: Path) -> None:
    """Discovery stores where each chart's track JSON is; the chart targets ask for it after the CSV."""
    path = copy_data(recognition_data, tmp_path / "data")
    with data_dir(path):
        crawl = {t.key: t for t in targets({}, FIXED_NOW, settings=run_settings())}
    assert len(crawl) == 275 and all(len(t.requests) == 1 for t in crawl.values())
    located = {key: t.optional[0] for key, t in crawl.items() if t.optional}
    assert len(located) == 71 + 19 + 124  # every Top 200, country genre and city; no viral or world genre chart
    assert not any(key.startswith(("viral/", "genre/world/")) for key in located)
    assert located["top-200/germany"].path == "/shazam/v3/en-US/DE/web/-/tracks/ip-country-chart-DE"
    assert located["top-200/germany"].params == (("pageSize", "200"), ("startFrom", "0"))
    assert located["top-200/world"].path == "/shazam/v3/en-US/US/web/-/tracks/ip-global-chart"
    assert located["genre/germany/hip-hop-rap"].path.endswith("/DE/web/-/tracks/genre-country-chart-DE-2")
    assert located["top-50/turkiye/istanbul"].path.split("/")[-1].startswith("ip-city-chart-")
    # The artist-history index reads the track key as the recognition track id.
    with client(path, [GROUP]) as api:
        entry = get(api, "/recognition/top-200/brazil/latest?limit=1").json()["entries"][0]
    mapped = GROUP.entries.read("top-200/brazil", entry) if GROUP.entries else None
    assert mapped is not None and mapped.ids == {"recognition_track_id": entry["shazam_track_id"]}


def test_failed_enrichment_keeps_the_chart_and_logs_why(recognition_data: Path, tmp_path: Path) -> None:
    """A track JSON that fails (HTTP error, HTML page, broken JSON, another chart) costs only the enrichment:
    the chart is still committed from its CSV, with the best-effort fields null, and the fetch log has a
    failed "<target>#tracks" row saying why. A JSON that lists only some of the chart enriches those rows."""
    path = copy_data(recognition_data, tmp_path / "data")
    before = _latest_ids(path)
    day = TODAY + timedelta(days=1)
    table = samples.replies(day, 2)
    lists = {t.path: t for t in shazam.track_lists(shazam.parse_locations(samples.render_locations()))}
    key = {chart: request_key(shazam.tracks_request(lists[chart]))
           for chart in ("top-200/brazil", "top-200/germany", "top-200/france", "top-200/spain", "top-200/italy")}
    table[key["top-200/brazil"]] = Reply(b"<html><body>no such page</body></html>", 404)
    table[key["top-200/germany"]] = Reply(b"<!DOCTYPE html><html><body>Shazam</body></html>", 200, "text/html")
    table[key["top-200/france"]] = Reply(b'{"properties": {}, "tracks": [{"key": "1", "title": "A", "sub', 200,
                                         "application/json")
    other = json.loads(samples.render_tracks_json("top-200/spain", "ES", 2, 40))
    for i, track in enumerate(other["tracks"]):  # another chart's tracks: none is on this one
        track["title"], track["subtitle"] = f"Another Song {i}", f"Another Artist {i}"
    table[key["top-200/spain"]] = Reply(json.dumps(other).encode(), 200, "application/json")
    italy = json.loads(samples.render_tracks_json("top-200/italy", "IT", 2, 200))
    dropped = {italy["tracks"][i]["key"] for i in (0, 50, 199)}
    italy["tracks"] = [t for t in italy["tracks"] if t["key"] not in dropped][::-1]  # three gone, order reversed
    table[key["top-200/italy"]] = Reply(json.dumps(italy).encode(), 200, "application/json")
    with data_dir(path):
        outcomes = asyncio.run(crawl_group(GROUP, {"chart_kind": "top-200"}, now=lambda: NOW + timedelta(days=1),
                                           transport=ReplayTransport({"SHAZAM": table}), settings=run_settings()))
    assert {o.status for o in outcomes} == {"ok"} and len(outcomes) == 1 + 71  # no chart lost
    after = _latest_ids(path)
    assert all(after[chart] > before[chart] for chart in key)
    errors = _failed_log(path)
    assert set(errors) == {"top-200/brazil#tracks", "top-200/germany#tracks", "top-200/france#tracks",
                           "top-200/spain#tracks"}
    assert all(e.startswith("enrichment failed, chart stored without it: ") for e in errors.values())
    assert "HTTP 404" in errors["top-200/brazil#tracks"] and "markup" in errors["top-200/germany#tracks"]
    assert "not JSON" in errors["top-200/france#tracks"]
    assert "none of its 40 tracks is one of the chart's 200 rows" in errors["top-200/spain#tracks"]
    with client(path, [GROUP]) as api:
        for chart in ("top-200/brazil", "top-200/germany", "top-200/france", "top-200/spain"):
            body = get(api, f"/recognition/{chart}/latest").json()
            assert body["snapshot"]["id"] == after[chart] and body["snapshot"]["chart_date"] == day.isoformat()
            assert all(e["url"] is e["artwork_url"] is e["store_url"] is e["shazam_track_id"] is None
                       for e in body["entries"])
        rows = get(api, "/recognition/top-200/italy/latest").json()["entries"]
        assert [e["rank"] for e in rows] == list(range(1, 201))  # the CSV's ranks, not the JSON's order
        songs = [row.song for row in global_rows("top-200/italy", 2, 200)]
        expected = [None if samples.track_key(song) in dropped else samples.track_key(song) for song in songs]
        assert [e["shazam_track_id"] for e in rows] == expected and expected.count(None) == 3
        assert get(api, "/recognition/top-200/united-kingdom/latest?limit=1").json()["entries"][0]["shazam_track_id"]


def test_a_new_chart_without_a_snapshot_yet_is_404_saying_so(recognition_data: Path, tmp_path: Path) -> None:
    path = copy_data(recognition_data, tmp_path / "data")
    listed = samples.locations()
    listed["countries"][0]["cities"].append({"id": "292968", "countryid": "AE", "name": "Abu Dhabi",  # type: ignore[index]
                                             "listid": "pl.0", "urlName": "abu-dhabi"})
    table = {request_key(shazam.locations_request()): Reply(json.dumps(listed).encode(), 200, "application/json")}
    with data_dir(path):
        outcomes = asyncio.run(crawl_group(GROUP, {"chart_kind": "top-50"}, now=lambda: NOW,
                                           transport=ReplayTransport({"SHAZAM": table}), settings=run_settings()))
    assert outcomes[0].target == "catalogue" and outcomes[0].status == "ok" and outcomes[0].rows == 276
    assert {o.status for o in outcomes[1:]} == {"failed"} and len(outcomes) == 1 + 125
    with client(path, [GROUP]) as api:
        response = get(api, "/recognition/top-50/united-arab-emirates/abu-dhabi/latest")
        assert response.status_code == 404
        assert response.json() == {"detail": "Chart top-50/united-arab-emirates/abu-dhabi was discovered but has "
                                             "no snapshot yet"}
        health = api.get("/recognition/health").json()
        assert health["status"] == "degraded" and health["coverage"]["stale"] == 1


def test_no_catalogue_yet(tmp_path: Path) -> None:
    with data_dir(tmp_path), pytest.raises(CrawlError, match="no chart catalogue stored yet"):
        targets({}, FIXED_NOW, settings=run_settings())
    with client(tmp_path, [GROUP]) as api:
        assert get(api, "/recognition/charts").json() == {"detail": "No chart catalogue has been discovered yet"}
        assert get(api, "/recognition/top-200/world/latest").status_code == 404
        health = api.get("/recognition/health").json()
        assert health["status"] == "degraded" and health["discovery"]["targets"] == 0


def test_requests_in_flight_stay_within_the_per_upstream_limit(tmp_path: Path) -> None:
    body = samples.render_locations()
    in_flight = peak = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.005)
        in_flight -= 1
        if request.url.path == shazam.LOCATIONS_PATH:
            return httpx.Response(200, content=body)
        assert request.url.path.endswith("/") and request.headers["accept-encoding"] == "gzip"
        chart = request.url.raw_path.decode().removeprefix(shazam.CSV_PREFIX).rstrip("/")
        return httpx.Response(200, content=samples.render_csv(chart, TODAY, 0, 50))

    with data_dir(tmp_path):
        outcomes = asyncio.run(crawl_group(GROUP, {"chart_kind": "viral"}, now=lambda: NOW,
                                           transport=httpx.MockTransport(handler), settings=run_settings()))
    assert len(outcomes) == 1 + 43 and {o.status for o in outcomes} == {"ok"}
    assert peak == GROUP.per_upstream


def test_a_catalogue_that_shrinks_past_the_threshold_is_refused(recognition_data: Path, tmp_path: Path) -> None:
    """A catalogue cut to a few entries would silently drop hundreds of charts: refused, the last one stays."""
    path = copy_data(recognition_data, tmp_path / "data")
    listed = samples.locations()
    listed["countries"] = listed["countries"][:2]  # type: ignore[index]
    table = {request_key(shazam.locations_request()): Reply(json.dumps(listed).encode(), 200, "application/json")}
    with data_dir(path):
        outcomes = asyncio.run(crawl_group(GROUP, {"chart_kind": "top-200"}, now=lambda: NOW,
                                           transport=ReplayTransport({"SHAZAM": table}), settings=run_settings()))
    assert outcomes[0].target == "catalogue" and outcomes[0].status == "failed"
    assert outcomes[0].error == ("catalogue: the upstream lists 25 charts, 275 before; a drop of more than 20% is "
                                 "refused and the last catalogue stays in use")
    with client(path, [GROUP]) as api:
        assert get(api, "/recognition/health").json()["discovery"]["paths"] == 276
