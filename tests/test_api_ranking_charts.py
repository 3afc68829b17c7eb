"""/ranking-charts end to end: the app over a data folder the real crawler filled from rendered Billboard pages
(per chart: a backfill of the week one year before the latest, a backfill of the last 10 weeks, then the latest
crawl), every endpoint and its errors, the date snapping and presets, failed and short pages keeping the last good
week, pages of another week than asked, and backfills that skip held weeks and resume."""

from __future__ import annotations

import asyncio
import io
import sqlite3
from datetime import date, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from starlette.testclient import TestClient

from chartgw.api.group import crawl_group
from chartgw.core.clock import fixed
from chartgw.core.progress import Progress
from chartgw.crawl.context import Context
from chartgw.crawl.runner import Outcome
from chartgw.demo.ranking_charts import DEMO_WEEKS, demo_replies
from chartgw.demo.replay import Reply, request_key
from chartgw.demo.samples import billboard as samples
from chartgw.groups import ranking_charts
from chartgw.groups.ranking_charts import GROUP, backfill
from chartgw.groups.ranking_charts.charts import newest_published, weeks_back, weeks_between, year_before
from chartgw.groups.ranking_charts.crawl import credited_artists, targets
from chartgw.upstreams import billboard
from chartgw.upstreams.billboard import DEFAULT_SLUGS
from tests import fixtures
from tests.fixtures import (
    FIXED_NOW,
    KEY_HEADERS,
    api_fixture,
    client,
    configure,
    copy_data,
    data_dir,
    group_data,
    replay_upstreams,
)
from tests.fixtures import settings as run_settings

NOW = FIXED_NOW  # Friday 2026-11-20: the newest chart out is dated Saturday 2026-11-21 (published Tuesday 11-17)
LATEST = date(2026, 11, 21)
FIRST = date(2026, 10, 3)
YEAR_AGO = date(2025, 11, 22)
HELD = [(LATEST - timedelta(weeks=n)).isoformat() for n in range(DEMO_WEEKS)] + [YEAR_AGO.isoformat()]
P = "/ranking-charts"


@pytest.fixture(scope="module")
def charts_data(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return group_data(all_groups_data, tmp_path_factory.mktemp("ranking-charts-data"), GROUP.name)


api = api_fixture(GROUP, "charts_data")


get = partial(fixtures.get, as_json=True, prefix=P)
"""The module's GET: `tests.fixtures.get` with its options."""


def error(api: TestClient, url: str, status: int) -> Any:
    response = api.get(P + url, headers=KEY_HEADERS)
    assert response.status_code == status, response.text
    return response.json()["detail"]


def expected_rows(slug: str, variant: int) -> list[tuple[Any, ...]]:
    return [(e.rank, e.title, e.artist, e.image, e.last_week, e.peak, e.weeks, e.is_new, e.is_reentry)
            for e in samples.sample_week(slug, variant)]


def rows_of(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["rank"], e["title"], e["artist"], e["image"], e["last_week"], e["peak"], e["weeks_on_chart"], e["is_new"],
             e["is_reentry"]) for e in entries]


# --- the chart weeks ------------------------------------------------------------------------------------------


def test_demo_dates() -> None:
    assert newest_published(NOW.date()) == LATEST
    assert newest_published(date(2026, 11, 17)) == LATEST  # Tuesday: out today
    assert newest_published(date(2026, 11, 16)) == date(2026, 11, 14)  # Monday: last week's
    assert weeks_back(LATEST, DEMO_WEEKS - 1) == FIRST
    assert year_before(LATEST) == YEAR_AGO
    assert year_before(date(2020, 2, 29)) == date(2019, 3, 2)  # a leap day: the week of 2019-02-28


def test_weeks_back_crosses_the_1962_change_from_mondays() -> None:
    assert weeks_back(date(1962, 1, 13), 1) == date(1962, 1, 6)
    assert weeks_back(date(1962, 1, 13), 2) == date(1961, 12, 25)
    assert weeks_back(date(1962, 1, 13), 3) == date(1961, 12, 18)
    assert weeks_between(date(1961, 12, 18), date(1962, 1, 13)) == 3


def test_credits_split_into_artists() -> None:
    assert credited_artists("Taylor Swift Featuring Ed Sheeran") == ["Taylor Swift", "Ed Sheeran"]
    assert credited_artists("cassö, RAYE & D-Block Europe") == ["cassö", "RAYE", "D-Block Europe"]
    assert credited_artists("Nicki Minaj, Ice Spice & Aqua") == ["Nicki Minaj", "Ice Spice", "Aqua"]


# --- every endpoint -------------------------------------------------------------------------------------------


def test_root_and_health_are_public(api: TestClient) -> None:
    root = api.get(P + "/").json()
    assert root["service"] == "ranking-charts" and root["openapi"] == "/ranking-charts/openapi.json"
    body = api.get(P + "/health").json()
    assert body["status"] == "ok" and body["service"] == "ranking-charts"
    assert [s["target"] for s in body["targets"]] == list(DEFAULT_SLUGS)
    assert all(s["chart_date"] == LATEST.isoformat() and not s["stale"] for s in body["targets"])


def test_charts_lists_every_configured_chart_with_its_weeks(api: TestClient) -> None:
    body = get(api, "/charts")
    assert body["count"] == len(DEFAULT_SLUGS) and [c["slug"] for c in body["charts"]] == list(DEFAULT_SLUGS)
    assert body["charts"][0] == {"slug": "hot-100", "kind": "songs", "title": "Billboard Hot 100", "size": 100,
                                 "configured": True, "first_week": "2025-11-22", "last_week": "2026-11-21",
                                 "weeks_held": DEMO_WEEKS + 1}
    kinds = {c["slug"]: c["kind"] for c in body["charts"]}
    assert (kinds["billboard-200"], kinds["artist-100"], kinds["billboard-global-200"]) == ("albums", "artists", "songs")
    assert all(c["weeks_held"] == DEMO_WEEKS + 1 for c in body["charts"])


@pytest.mark.parametrize("slug", DEFAULT_SLUGS)
def test_every_chart_has_data_for_every_preset(api: TestClient, slug: str) -> None:
    for name in ("top-10", "top-40", "debuts", "re-entries", "gainers", "year-ago"):
        assert get(api, f"/charts/{slug}/preset?preset={name}")["count"] > 0, name


def test_latest_is_the_newest_week_with_its_neighbours(api: TestClient) -> None:
    body = get(api, "/charts/hot-100/latest")
    assert (body["chart_slug"], body["kind"], body["title"]) == ("hot-100", "songs", "Billboard Hot 100")
    assert (body["chart_date"], body["previous_chart_date"], body["next_chart_date"]) == ("2026-11-21", "2026-11-14", None)
    assert (body["weeks_ago"], body["requested_date"], body["preset"]) == (0, None, None)
    assert body["snapshot"]["target"] == "hot-100" and body["snapshot"]["cadence_seconds"] == 604800
    assert "/charts/hot-100/2026-11-21/ (post-2024 layout)" in body["snapshot"]["source"]
    assert body["count"] == 100 and rows_of(body["entries"]) == expected_rows("hot-100", DEMO_WEEKS - 1)
    assert all("raw" not in e for e in body["entries"])
    assert get(api, "/charts/hot-100/latest?limit=5")["count"] == 5
    assert get(api, "/charts/billboard-200/latest")["count"] == 200


def test_include_raw_adds_what_the_page_said(api: TestClient) -> None:
    body = get(api, "/charts/hot-100/latest?include_raw=true")
    week = samples.sample_week("hot-100", DEMO_WEEKS - 1)
    debut = next(i for i, e in enumerate(week) if e.is_new)
    raw = body["entries"][debut]["raw"]
    assert raw == {"rank": str(week[debut].rank), "title": week[debut].title, "artist": week[debut].artist,
                   "image": week[debut].image, "last_week": "-", "peak": str(week[debut].peak),
                   "weeks_on_chart": "1", "marker": "NEW"}
    assert body["entries"][debut]["last_week"] is None
    assert rows_of(body["entries"]) == expected_rows("hot-100", DEMO_WEEKS - 1)


def test_artist_charts_have_no_title(api: TestClient) -> None:
    body = get(api, "/charts/artist-100/latest?limit=3")
    assert body["kind"] == "artists" and [e["title"] for e in body["entries"]] == [None, None, None]
    assert [e["artist"] for e in body["entries"]] == [e.artist for e in samples.sample_week("artist-100", DEMO_WEEKS - 1)[:3]]


def test_dates_newest_first(api: TestClient) -> None:
    body = get(api, "/charts/hot-100/dates")
    assert body == {"chart_slug": "hot-100", "weeks_held": 9, "first_week": "2025-11-22", "last_week": "2026-11-21",
                    "count": 9, "dates": HELD}
    assert get(api, "/charts/hot-100/dates?limit=2")["dates"] == HELD[:2]


def test_snapshots_newest_chart_date_first(api: TestClient) -> None:
    body = get(api, "/charts/hot-rap-songs/snapshots")
    assert body["chart_slug"] == "hot-rap-songs" and body["count"] == 9
    assert [s["chart_date"] for s in body["snapshots"]] == HELD
    assert all(s["target"] == "hot-rap-songs" and s["row_count"] == 25 for s in body["snapshots"])
    assert get(api, "/charts/hot-rap-songs/snapshots?limit=3")["count"] == 3


@pytest.mark.parametrize("day", [(date(2026, 11, 8) + timedelta(days=n)).isoformat() for n in range(7)])
def test_any_day_finds_the_week_containing_it(api: TestClient, day: str) -> None:
    body = get(api, f"/charts/hot-100/{day}")
    assert (body["chart_date"], body["requested_date"]) == ("2026-11-14", day)
    assert (body["previous_chart_date"], body["next_chart_date"], body["weeks_ago"]) == ("2026-11-07", "2026-11-21", 1)
    assert rows_of(body["entries"]) == expected_rows("hot-100", DEMO_WEEKS - 2)


def test_the_oldest_week_has_no_previous_week(api: TestClient) -> None:
    body = get(api, "/charts/hot-100/2025-11-20?limit=1")
    assert (body["chart_date"], body["previous_chart_date"], body["next_chart_date"], body["weeks_ago"]) == (
        "2025-11-22", None, FIRST.isoformat(), 52)
    assert "(2021 layout)" in body["snapshot"]["source"]


def test_a_week_not_held_is_a_404_naming_the_weeks_held(api: TestClient) -> None:
    assert error(api, "/charts/hot-100/1985-07-04", 404) == (
        "The week of 1985-07-04 (chart date 1985-07-06) is not held; hot-100 holds 9 weeks from 2025-11-22 to "
        "2026-11-21 (see /ranking-charts/charts/hot-100/dates)")


def test_a_malformed_date_is_fastapis_422(api: TestClient) -> None:
    assert error(api, "/charts/hot-100/2026-11-1", 422) == [{
        "type": "date_from_datetime_parsing", "loc": ["path", "chart_date"],
        "msg": "Input should be a valid date or datetime, input is too short", "input": "2026-11-1",
        "ctx": {"error": "input is too short"}}]
    assert error(api, "/charts/hot-100/2026-02-30", 422)[0]["msg"] == (
        "Input should be a valid date or datetime, day value is outside expected range")


@pytest.mark.parametrize("n,chart_date", [(0, "2026-11-21"), (1, "2026-11-14"), (7, "2026-10-03"), (52, "2025-11-22")])
def test_weeks_ago(api: TestClient, n: int, chart_date: str) -> None:
    body = get(api, f"/charts/billboard-200/weeks-ago/{n}?limit=2")
    assert (body["chart_date"], body["weeks_ago"], body["count"]) == (chart_date, n, 2)


def test_weeks_ago_404s(api: TestClient) -> None:
    assert error(api, "/charts/hot-100/weeks-ago/20", 404) == (
        "20 weeks ago (chart date 2026-07-04) is not held; hot-100 holds 9 weeks from 2025-11-22 to 2026-11-21 "
        "(see /ranking-charts/charts/hot-100/dates)")
    assert error(api, "/charts/hot-100/weeks-ago/53", 404).startswith(
        "53 weeks ago is before the history held (weeks-ago goes from 0 to 52)")
    assert error(api, "/charts/hot-100/weeks-ago/100000000000", 404).startswith("100000000000 weeks ago is before")


@pytest.mark.parametrize("value,kind", [("-1", "greater_than_equal"), ("1.5", "int_parsing"), ("last", "int_parsing")])
def test_weeks_ago_must_be_a_whole_number_from_0(api: TestClient, value: str, kind: str) -> None:
    (item,) = error(api, f"/charts/hot-100/weeks-ago/{value}", 422)
    assert (item["type"], item["loc"], item["input"]) == (kind, ["path", "weeks_ago"], value)


# --- presets --------------------------------------------------------------------------------------------------


def test_top_10_and_top_40(api: TestClient) -> None:
    body = get(api, "/charts/hot-100/preset?preset=top-10")
    assert (body["preset"], body["chart_date"], body["count"]) == ("top-10", "2026-11-21", 10)
    assert rows_of(body["entries"]) == expected_rows("hot-100", DEMO_WEEKS - 1)[:10]
    assert [e["rank"] for e in get(api, "/charts/billboard-200/preset?preset=top-40")["entries"]] == list(range(1, 41))
    assert get(api, "/charts/hot-100/preset?preset=top-40&limit=5")["count"] == 5


def test_debuts_and_reentries(api: TestClient) -> None:
    week = samples.sample_week("billboard-global-200", DEMO_WEEKS - 1)
    debuts = get(api, "/charts/billboard-global-200/preset?preset=debuts")["entries"]
    assert [e["rank"] for e in debuts] == [e.rank for e in week if e.is_new] and debuts
    assert all(e["is_new"] and e["last_week"] is None and e["weeks_on_chart"] == 1 for e in debuts)
    back = get(api, "/charts/billboard-global-200/preset?preset=re-entries&include_raw=true")["entries"]
    assert [e["rank"] for e in back] == [e.rank for e in week if e.is_reentry] and back
    assert all(e["is_reentry"] and e["raw"]["marker"] == "RE-\nENTRY" for e in back)


def test_gainers_are_the_biggest_climbers_first(api: TestClient) -> None:
    body = get(api, "/charts/hot-100/preset?preset=gainers")
    gains = [e["last_week"] - e["rank"] for e in body["entries"]]
    assert gains and all(g > 0 for g in gains) and gains == sorted(gains, reverse=True)
    week = samples.sample_week("hot-100", DEMO_WEEKS - 1)
    assert body["count"] == sum(1 for e in week if e.last_week is not None and e.last_week > e.rank)


def test_year_ago_is_the_same_week_a_year_earlier(api: TestClient) -> None:
    body = get(api, "/charts/hot-100/preset?preset=year-ago&limit=5")
    assert (body["preset"], body["chart_date"], body["weeks_ago"], body["next_chart_date"]) == (
        "year-ago", "2025-11-22", 52, FIRST.isoformat())
    assert rows_of(body["entries"]) == expected_rows("hot-100", DEMO_WEEKS + 1)[:5]


def test_unknown_preset_is_a_422_listing_the_presets(api: TestClient) -> None:
    expected = "'top-10', 'top-40', 'debuts', 're-entries', 'gainers' or 'year-ago'"
    assert error(api, "/charts/hot-100/preset?preset=top-20", 422) == [{
        "type": "literal_error", "loc": ["query", "preset"], "msg": f"Input should be {expected}", "input": "top-20",
        "ctx": {"expected": expected}}]


def test_preset_is_optional_and_defaults_to_the_top_10(api: TestClient) -> None:
    """The spec lists `preset` without (R): absent, it is the documented default, top-10."""
    body = get(api, "/charts/hot-100/preset")
    assert body == get(api, "/charts/hot-100/preset?preset=top-10")
    assert (body["preset"], body["count"], [e["rank"] for e in body["entries"]]) == ("top-10", 10, list(range(1, 11)))
    assert get(api, "/charts/hot-100/preset?limit=3")["count"] == 3


def test_openapi_lists_every_route_and_the_preset_enum(api: TestClient) -> None:
    document = api.get(P + "/openapi.json").json()
    assert set(document["paths"]) == {r.path for r in GROUP.routes} | {"/", "/openapi.json", "/fetch-logs", "/diff", "/exports", "/exports/{name}"}
    params = document["paths"]["/charts/{chart_slug}/preset"]["get"]["parameters"]
    preset = next(p for p in params if p["name"] == "preset")
    assert preset["schema"]["enum"] == ["top-10", "top-40", "debuts", "re-entries", "gainers", "year-ago"]
    assert preset["required"] is False and preset["schema"]["default"] == "top-10"
    assert preset["description"].endswith("top-10 when absent")


# --- search ---------------------------------------------------------------------------------------------------


def test_search_is_case_and_accent_insensitive_newest_week_first(api: TestClient) -> None:
    body = get(api, "/search?q=SEGUN%20quien&limit=500")
    assert body["q"] == "SEGUN quien" and body["chart_slug"] is None and body["count"] > 1
    assert {h["entry"]["title"] for h in body["hits"]} == {"Según Quién"}
    keys = [(h["chart_date"], -h["rank"]) for h in body["hits"]]
    assert [k[0] for k in keys] == sorted((k[0] for k in keys), reverse=True)
    assert all(h["rank"] == h["entry"]["rank"] and "raw" not in h["entry"] for h in body["hits"])
    hot = get(api, "/search?q=segun-quien&chart_slug=hot-100")
    assert {h["chart_slug"] for h in hot["hits"]} == {"hot-100"} and hot["hits"][0]["chart_title"] == "Billboard Hot 100"
    latest_rank = next(e.rank for e in samples.sample_week("hot-100", DEMO_WEEKS - 1) if e.title == "Según Quién")
    assert hot["hits"][0]["chart_date"] == "2026-11-21" and hot["hits"][0]["rank"] == latest_rank
    assert get(api, "/search?q=segun&limit=2")["count"] == 2


def test_search_finds_artists_of_artist_charts_and_featured_artists(api: TestClient) -> None:
    body = get(api, "/search?q=peso%20pluma&chart_slug=hot-100&limit=1")
    assert body["hits"][0]["entry"]["artist"] == "KAROL G Featuring Peso Pluma"
    week = samples.sample_week("artist-100", DEMO_WEEKS - 1)
    hits = get(api, f"/search?q={week[0].artist}&chart_slug=artist-100")["hits"]
    assert hits[0]["chart_date"] == "2026-11-21" and hits[0]["entry"]["title"] is None


def test_search_needs_a_letter_or_digit(api: TestClient) -> None:
    assert error(api, "/search?q=%20-!", 422) == [{
        "type": "value_error", "loc": ["query", "q"],
        "msg": "Value error, must contain at least one letter or digit (case, accents and punctuation are ignored)",
        "input": " -!", "ctx": {"error": {}}}]
    assert error(api, "/search", 422)[0]["type"] == "missing"
    assert error(api, "/search?q=", 422)[0]["type"] == "string_too_short"
    assert error(api, "/search?q=love&chart_slug=nope", 404).startswith("No chart 'nope'")
    assert get(api, "/search?q=zzzzqqqq") == {"q": "zzzzqqqq", "chart_slug": None, "count": 0, "hits": []}


# --- errors ---------------------------------------------------------------------------------------------------

DATA_ROUTES = ["/charts", "/charts/hot-100/snapshots", "/charts/hot-100/dates", "/charts/hot-100/latest",
               "/charts/hot-100/preset?preset=top-10", "/charts/hot-100/weeks-ago/1", "/charts/hot-100/2026-11-21",
               "/search?q=love", "/fetch-logs"]


@pytest.mark.parametrize("url", DATA_ROUTES)
def test_data_routes_need_a_key(api: TestClient, url: str) -> None:
    assert api.get(P + url).status_code == 401
    assert api.get(P + url, headers=KEY_HEADERS).status_code == 200


@pytest.mark.parametrize("url", [u for u in DATA_ROUTES if u.startswith("/charts/hot-100")])
def test_an_unknown_chart_is_a_404_naming_the_list(api: TestClient, url: str) -> None:
    detail = error(api, url.replace("hot-100", "hot-1000"), 404)
    assert detail.startswith("No chart 'hot-1000'; the charts are listed at /ranking-charts/charts (configured: hot-100,")


def test_a_malformed_slug_is_a_422(api: TestClient) -> None:
    (item,) = error(api, "/charts/Hot_100/latest", 422)
    assert (item["type"], item["loc"]) == ("value_error", ["path", "chart_slug"])


@pytest.mark.parametrize("url,loc", [
    ("/charts/hot-100/latest?limit=0", ["query", "limit"]),
    ("/charts/hot-100/latest?limit=201", ["query", "limit"]),
    ("/charts/hot-100/latest?include_raw=maybe", ["query", "include_raw"]),
    ("/charts/hot-100/dates?limit=0", ["query", "limit"]),
    ("/charts/hot-100/snapshots?limit=5001", ["query", "limit"]),
    ("/search?q=love&limit=501", ["query", "limit"]),
])
def test_bad_parameters_are_422(api: TestClient, url: str, loc: list[str]) -> None:
    assert error(api, url, 422)[0]["loc"] == loc


def test_legacy_prefix_answers_as_the_public_one(api: TestClient) -> None:
    for path in ("/charts", "/charts/hot-100/latest?limit=3", "/charts/hot-100/2026-11-10", "/search?q=love"):
        assert api.get("/ranking-charts-api" + path, headers=KEY_HEADERS).content == \
            api.get(P + path, headers=KEY_HEADERS).content
    assert api.get("/ranking-charts-api/health").status_code == 200


def test_empty_store_answers_404_not_500(tmp_path: Path) -> None:
    with client(tmp_path, [GROUP]) as empty:
        assert error(empty, "/charts/hot-100/latest", 404) == "No week of hot-100 is held yet (its first crawl has not run)"
        assert error(empty, "/charts/hot-100/preset?preset=year-ago", 404).startswith("No week of hot-100")
        charts = get(empty, "/charts")["charts"]
        assert charts[0] == {"slug": "hot-100", "kind": "songs", "title": "Billboard Hot 100", "size": 100,
                             "configured": True, "first_week": None, "last_week": None, "weeks_held": 0}
        assert empty.get(P + "/health").json()["status"] == "degraded"


def test_configured_charts_come_from_the_setting(charts_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_RANKING_CHARTS", "artist-100, hot-100")
    assert [t.key for t in targets({"chart": None}, FIXED_NOW, settings=run_settings())] == ["artist-100", "hot-100"]
    with client(charts_data, [GROUP]) as c:
        listed = get(c, "/charts")["charts"]
        assert [(x["slug"], x["configured"]) for x in listed[:3]] == [
            ("artist-100", True), ("hot-100", True), ("billboard-200", False)]
        assert [s["target"] for s in c.get(P + "/health").json()["targets"]] == ["artist-100", "hot-100"]
    configure("CHARTGW_RANKING_CHARTS", "hot-100,top-gear")
    with pytest.raises(ValueError, match="CHARTGW_RANKING_CHARTS: unknown chart slug.s. top-gear"):
        targets({"chart": None}, FIXED_NOW, settings=run_settings())


def test_a_bad_setting_is_a_503_naming_it(charts_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_RANKING_CHARTS", "hot-100,top-gear")
    with client(charts_data, [GROUP]) as c:
        response = c.get(P + "/charts", headers=KEY_HEADERS)
    assert response.status_code == 503 and "CHARTGW_RANKING_CHARTS" in response.json()["detail"]


# --- entries as the artist-history index reads them -----------------------------------------------------------


def test_entry_mapping(charts_data: Path) -> None:
    assert GROUP.entries is not None
    with sqlite3.connect(charts_data / "ranking-charts.sqlite") as db:
        def first(target: str) -> tuple[dict[str, Any], str, str, str]:
            record, title_key, artist_key, search_key = db.execute(
                "SELECT e.record, e.title_key, e.artist_key, e.search_key FROM entries e JOIN snapshots s"
                " ON s.id = e.snapshot_id WHERE s.target = ? AND s.chart_date = ? ORDER BY e.position LIMIT 1",
                (target, "2026-11-21")).fetchone()
            return msgspec.json.decode(record), title_key, artist_key, search_key

        song, title_key, artist_key, search_key = first("hot-100")
        assert (title_key, artist_key, search_key) == ("qlona", "karolg", "qlona|karolg|pesopluma")
        mapped = GROUP.entries.read("hot-100", song)
        assert mapped is not None
        assert (mapped.artist, mapped.title, mapped.market, mapped.ids) == ("KAROL G Featuring Peso Pluma", "QLONA", "us", {})
        glob = GROUP.entries.read("billboard-global-excl-us", first("billboard-global-excl-us")[0])
        assert glob is not None and glob.market == "global"
        artist, title_key, artist_key, _ = first("artist-100")
        mapped = GROUP.entries.read("artist-100", artist)
        assert mapped is not None and mapped.title is None and mapped.artist == artist["artist"]
        assert title_key == artist_key != ""


# --- crawls ---------------------------------------------------------------------------------------------------

NEXT = date(2026, 11, 28)


def _crawl(path: Path, replies: dict[Any, Reply], selection: dict[str, str | None], hours: int = 1,
           ) -> tuple[list[Outcome], list[Any]]:
    with data_dir(path), replay_upstreams({billboard.UPSTREAM: replies}) as servers:
        outcomes = asyncio.run(crawl_group(GROUP, selection, now=fixed(NOW + timedelta(hours=hours)), settings=run_settings()))
        return outcomes, [key for key, _ in servers[billboard.UPSTREAM].seen]


def _latest_reply(reply: Reply) -> dict[Any, Reply]:
    return {request_key(billboard.requests_for("hot-100")[0]): reply}


def _snapshot_count(path: Path) -> int:
    with sqlite3.connect(path / "ranking-charts.sqlite") as db:
        return int(db.execute("SELECT count(*) FROM snapshots").fetchone()[0])


def _failures(path: Path, target: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path / "ranking-charts.sqlite") as db:
        return db.execute("SELECT http_status, error FROM fetch_log WHERE target = ? AND status = 'failed'",
                          (target,)).fetchall()


def test_a_new_week_becomes_the_latest(charts_data: Path, tmp_path: Path) -> None:
    path = copy_data(charts_data, tmp_path / "data")
    page = samples.render_page("hot-100", NEXT, DEMO_WEEKS, layout="post-2024")
    (outcome,), _ = _crawl(path, _latest_reply(Reply(page, 200, samples.CONTENT_TYPE)), {"chart": "hot-100"}, 24 * 7)
    assert (outcome.target, outcome.status, outcome.rows) == ("hot-100", "ok", 100)
    with client(path, [GROUP], now=NOW + timedelta(days=7)) as after:
        body = get(after, "/charts/hot-100/latest")
        assert (body["chart_date"], body["previous_chart_date"], body["next_chart_date"]) == ("2026-11-28", "2026-11-21",
                                                                                              None)
        assert rows_of(body["entries"]) == expected_rows("hot-100", DEMO_WEEKS)
        assert get(after, "/charts/hot-100/2026-11-21?limit=1")["next_chart_date"] == "2026-11-28"
        assert get(after, "/charts/hot-100/weeks-ago/1?limit=1")["chart_date"] == "2026-11-21"
        runs = get(after, "/fetch-logs?status=ok&limit=1")["entries"]
        assert runs[0]["target"] == "hot-100" and runs[0]["rows"] == 100


def test_an_unchanged_week_stores_nothing_new(charts_data: Path, tmp_path: Path) -> None:
    path = copy_data(charts_data, tmp_path / "data")
    before = _snapshot_count(path)
    replies = demo_replies(DEFAULT_SLUGS, LATEST, DEMO_WEEKS)
    outcomes, seen = _crawl(path, replies, {"chart": None})
    assert [o.target for o in outcomes] == list(DEFAULT_SLUGS) and len(seen) == len(DEFAULT_SLUGS)
    assert all(o.status == "ok" and o.rows is None for o in outcomes)
    assert _snapshot_count(path) == before


@pytest.mark.parametrize("reply,error,requests", [
    (Reply(samples.render_page("hot-100", NEXT, DEMO_WEEKS, size=60), 200), "short page, 60 of 100 rows", 1),
    (Reply(b"", 200), "empty body", 1),
    (Reply(b"<html><body><main><p>Charts</p></main></body></html>", 200), "no ul.o-chart-results-list-row rows", 1),
    (Reply(samples.render_page("hot-100", NEXT, DEMO_WEEKS)[:200_000], 200), "truncated page", 1),
    (Reply(samples.render_page("billboard-200", NEXT, DEMO_WEEKS), 200), "the page is the 'billboard-200' chart", 1),
    (Reply(b"<html><head><title>Just a moment...</title></head><body>cf-chl</body></html>", 403),
     "robot check / block page ('cf-chl') (HTTP 403; not retried)", 1),
    (Reply(b"<html><body>Forbidden</body></html>", 403), "access refused (HTTP 403) (HTTP 403; not retried)", 1),
    (Reply(b"<html><body>bad gateway</body></html>", 502), "answered HTTP 502", 3),
])
def test_a_failed_or_short_page_keeps_the_last_good_week(charts_data: Path, tmp_path: Path, reply: Reply, error: str,
                                                         requests: int) -> None:
    path = copy_data(charts_data, tmp_path / "data")
    with client(path, [GROUP]) as before:
        kept = get(before, "/charts/hot-100/latest")
    (outcome,), seen = _crawl(path, _latest_reply(reply), {"chart": "hot-100"})
    assert outcome.status == "failed" and error in (outcome.error or ""), outcome.error
    assert len(seen) == requests
    assert error in _failures(path, "hot-100")[0][1]
    with client(path, [GROUP]) as after:
        assert get(after, "/charts/hot-100/latest") == kept
        assert get(after, "/fetch-logs?status=failed")["entries"][0]["target"] == "hot-100"


def test_billboard_refusals() -> None:
    assert billboard.refusal(503, b"<html><title>Attention Required! | Cloudflare</title></html>") == (
        "robot check / block page ('attention required')")
    assert billboard.refusal(403, b"") == "access refused (HTTP 403)"
    assert billboard.refusal(404, b"<html>Page not found</html>") is None
    assert billboard.refusal(503, b"<html>down for maintenance</html>") is None


# --- backfills ------------------------------------------------------------------------------------------------


def _weeks(first: date, count: int) -> list[str]:
    return [(first + timedelta(weeks=n)).isoformat() for n in range(count)]


def test_backfill_skips_held_weeks_and_resumes(tmp_path: Path) -> None:
    first = date(2026, 10, 3)
    replies = samples.week_replies("hot-100", first, 6)
    missing = [request_key(billboard.requests_for("hot-100", date.fromisoformat(d))[0]) for d in _weeks(first, 6)[2:4]]
    partial = {k: v for k, v in replies.items() if k not in missing}
    with data_dir(tmp_path), replay_upstreams({billboard.UPSTREAM: partial}) as servers:
        stream = io.StringIO()
        with Progress("backfill", stream, terminal=False) as shown, shown.step("hot-100"):
            outcomes = asyncio.run(backfill("hot-100", first, date(2026, 11, 7), now=fixed(NOW), settings=run_settings()))
        # newest week first, one request per week
        assert [o.target for o in outcomes] == [f"hot-100@{d}" for d in reversed(_weeks(first, 6))]
        assert [o.status for o in outcomes] == ["ok", "ok", "failed", "failed", "ok", "ok"]
        assert stream.getvalue().startswith("backfill hot-100: 6 targets, 2 failed in ") and stream.getvalue().count("\n") == 1
        server = servers[billboard.UPSTREAM]
        server.replies.update(replies)
        server.seen.clear()
        resumed = asyncio.run(backfill("hot-100", first, date(2026, 11, 7), now=fixed(NOW + timedelta(hours=1)), settings=run_settings()))
        assert [(o.target, o.status, o.rows) for o in resumed] == [
            ("hot-100@2026-10-24", "ok", 100), ("hot-100@2026-10-17", "ok", 100)]
        assert [key[1] for key, _ in server.seen] == ["/charts/hot-100/2026-10-24/", "/charts/hot-100/2026-10-17/"]
        server.seen.clear()
        assert asyncio.run(backfill("hot-100", first - timedelta(days=3), date(2026, 11, 4), now=fixed(NOW), settings=run_settings())) == []
        assert server.seen == []
    with client(tmp_path, [GROUP]) as api:
        assert get(api, "/charts/hot-100/dates")["dates"] == list(reversed(_weeks(first, 6)))
        assert rows_of(get(api, "/charts/hot-100/2026-10-24")["entries"]) == expected_rows("hot-100", 3)
    with sqlite3.connect(tmp_path / "ranking-charts.sqlite") as db:
        runs = db.execute("SELECT kind, targets, ok, detail FROM crawl_runs ORDER BY id").fetchall()
    assert [(kind, count, ok) for kind, count, ok, _ in runs] == [("backfill", 6, 4), ("backfill", 2, 2)]
    assert msgspec.json.decode(runs[1][3])["options"] == {"chart": "hot-100", "since": "2026-10-03",
                                                          "until": "2026-11-07", "weeks": 2, "held_skipped": 4}


def test_an_interrupted_backfill_keeps_its_weeks_and_resumes(tmp_path: Path) -> None:
    first = date(2026, 10, 3)
    pages = {f"/charts/hot-rap-songs/{day}/": samples.render_page("hot-rap-songs", date.fromisoformat(day), n)
             for n, day in enumerate(_weeks(first, 5))}
    asked: list[str] = []

    async def stalls_after_two(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        if len(asked) > 2:
            await asyncio.Event().wait()  # hangs until the backfill is interrupted
        return httpx.Response(200, content=pages[request.url.path])

    async def interrupted() -> None:
        await asyncio.wait_for(backfill("hot-rap-songs", first, date(2026, 10, 31), now=fixed(NOW),
                                        transport=httpx.MockTransport(stalls_after_two), settings=run_settings()), timeout=1)

    with data_dir(tmp_path):
        with pytest.raises(TimeoutError):
            asyncio.run(interrupted())
        assert asked == ["/charts/hot-rap-songs/2026-10-31/", "/charts/hot-rap-songs/2026-10-24/",
                         "/charts/hot-rap-songs/2026-10-17/"]
        asked.clear()

        async def answers(request: httpx.Request) -> httpx.Response:
            asked.append(request.url.path)
            return httpx.Response(200, content=pages[request.url.path])

        resumed = asyncio.run(backfill("hot-rap-songs", first, date(2026, 10, 31), now=fixed(NOW),
                                       transport=httpx.MockTransport(answers), settings=run_settings()))
    assert [o.target for o in resumed] == ["hot-rap-songs@2026-10-17", "hot-rap-songs@2026-10-10",
                                           "hot-rap-songs@2026-10-03"]
    assert asked == ["/charts/hot-rap-songs/2026-10-17/", "/charts/hot-rap-songs/2026-10-10/",
                     "/charts/hot-rap-songs/2026-10-03/"]
    with client(tmp_path, [GROUP]) as api:
        assert get(api, "/charts/hot-rap-songs/dates")["dates"] == list(reversed(_weeks(first, 5)))


def test_a_page_of_another_week_is_stored_under_its_own_date(tmp_path: Path) -> None:
    asked, served = date(2026, 8, 29), date(2026, 9, 12)
    (request,) = billboard.requests_for("hot-100", asked)
    replies = {request_key(request): Reply(samples.render_page("hot-100", served, 0), 200, samples.CONTENT_TYPE)}
    with data_dir(tmp_path), replay_upstreams({billboard.UPSTREAM: replies}):
        (outcome,) = asyncio.run(backfill("hot-100", asked, asked, now=fixed(NOW), settings=run_settings()))
    assert outcome.status == "ok" and outcome.rows == 100
    with client(tmp_path, [GROUP]) as api:
        assert get(api, "/charts/hot-100/dates")["dates"] == ["2026-09-12"]
        source = get(api, "/charts/hot-100/latest")["snapshot"]["source"]
        assert source.endswith("asked for the week of 2026-08-29, the page is the week of 2026-09-12")
        assert error(api, "/charts/hot-100/2026-08-29", 404).startswith("The week of 2026-08-29 (chart date 2026-08-29)")


def test_older_weeks_may_be_shorter_than_todays_chart(tmp_path: Path) -> None:
    old, recent = date(1965, 3, 6), date(2020, 3, 7)
    replies = {request_key(billboard.requests_for("billboard-200", day)[0]):
               Reply(samples.render_page("billboard-200", day, 0, size=150), 200) for day in (old, recent)}
    with data_dir(tmp_path), replay_upstreams({billboard.UPSTREAM: replies}):
        outcomes = asyncio.run(backfill("billboard-200", old, old, now=fixed(NOW), settings=run_settings()))
        outcomes += asyncio.run(backfill("billboard-200", recent, recent, now=fixed(NOW), settings=run_settings()))
    assert [(o.status, o.rows) for o in outcomes] == [("ok", 150), ("failed", None)]
    assert "short page, 150 of 200 rows" in (outcomes[1].error or "")


def test_backfill_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    with data_dir(tmp_path):
        with pytest.raises(ValueError, match="the week of 2026-11-28 is not published yet"):
            asyncio.run(backfill("hot-100", date(2026, 1, 1), date(2026, 11, 25), now=fixed(NOW), settings=run_settings()))
        with pytest.raises(ValueError, match="--since 2026-11-20 is after the week of 2026-11-14"):
            asyncio.run(backfill("hot-100", date(2026, 11, 20), date(2026, 11, 10), now=fixed(NOW), settings=run_settings()))
        with pytest.raises(ValueError, match="unknown chart 'top-gear'"):
            asyncio.run(backfill("top-gear", date(2026, 1, 1), now=fixed(NOW), settings=run_settings()))


def test_backfill_command_is_silent_off_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    command, _ = GROUP.commands
    assert command.verb == "backfill"
    assert [(a.name, a.required, a.choices) for a in command.args] == [
        ("chart", True, DEFAULT_SLUGS), ("since", True, None), ("until", False, None)]
    replies = samples.week_replies("hot-country-songs", date(2026, 11, 7), 3)
    with data_dir(tmp_path), replay_upstreams({billboard.UPSTREAM: replies}):
        outcomes = command.run(Context(clock=fixed(NOW), settings=run_settings()), {"chart": "hot-country-songs", "since": date(2026, 11, 5), "until": None})
    assert [(o.target, o.rows) for o in outcomes] == [("hot-country-songs@2026-11-21", 50),
                                                      ("hot-country-songs@2026-11-14", 50),
                                                      ("hot-country-songs@2026-11-07", 50)]
    assert capsys.readouterr().err == ""


def test_backfill_pauses_between_weeks_with_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_CRAWL_DELAY_SECONDS", "0.2")
    configure("CHARTGW_RANKING_CHARTS_BACKFILL_DELAY_SECONDS", "3")
    monkeypatch.setattr(ranking_charts, "held_dates", lambda slug, settings: set())
    monkeypatch.setattr(ranking_charts, "run_targets", _fake_run_targets)
    asyncio.run(backfill("hot-100", date(2026, 11, 1), date(2026, 11, 14), now=fixed(NOW), settings=run_settings()))
    assert _captured["policy"].delay_seconds == 3 and _captured["policy"].per_upstream == 1
    assert _captured["policy"].jitter == 0.5 and _captured["run_kind"] == "backfill"
    assert _captured["keys"] == ["hot-100@2026-11-14", "hot-100@2026-11-07"]
    configure("CHARTGW_CRAWL_DELAY_SECONDS", "0")  # replay servers: no pause at all
    asyncio.run(backfill("hot-100", date(2026, 11, 1), date(2026, 11, 14), now=fixed(NOW), settings=run_settings()))
    assert _captured["policy"].delay_seconds == 0


_captured: dict[str, Any] = {}


async def _fake_run_targets(group: str, chosen: Any, **options: Any) -> list[Outcome]:
    _captured.update(options, group=group, keys=[t.key for t in chosen])
    return []


def test_real_captures_through_the_backfill_and_the_api(shared_upstream: Path, tmp_path: Path) -> None:
    pages = {date(2021, 11, 27): "billboard/hot-100_2021-11-27_rikesahn-SongRecommender.html",
             date(2024, 12, 7): "billboard/hot-100_2024-12-07_browser-saved_Sadavar-si206.html"}
    replies = {request_key(billboard.requests_for("hot-100", day)[0]):
               Reply((shared_upstream / name).read_bytes(), 200, samples.CONTENT_TYPE) for day, name in pages.items()}
    with data_dir(tmp_path), replay_upstreams({billboard.UPSTREAM: replies}):
        outcomes = [o for day in pages for o in asyncio.run(backfill("hot-100", day, day, now=fixed(NOW), settings=run_settings()))]
    assert [(o.target, o.status, o.rows) for o in outcomes] == [("hot-100@2021-11-27", "ok", 100),
                                                                ("hot-100@2024-12-07", "ok", 100)]
    with client(tmp_path, [GROUP]) as api:
        body = get(api, "/charts/hot-100/2021-11-21?include_raw=true")
        assert (body["chart_date"], body["previous_chart_date"], body["next_chart_date"]) == (
            "2021-11-27", None, "2024-12-07")
        assert "(2021 layout)" in body["snapshot"]["source"]
        mariah = body["entries"][35]
        assert rows_of([mariah]) == [(36, "All I Want For Christmas Is You", "Mariah Carey", "https://charts-static."
                                      "billboard.com/img/1994/12/mariah-carey-99g-all-i-want-for-christmas-is-you-3w0-"
                                      "180x180.jpg", None, 1, 45, False, True)]
        assert mariah["raw"]["marker"] == "RE-\nENTER" and mariah["raw"]["last_week"] == "-"
        reentries = get(api, "/charts/hot-100/preset?preset=re-entries")
        assert reentries["chart_date"] == "2024-12-07"
        assert [e["rank"] for e in reentries["entries"]] == [19, 39, 41, 42, 43, 46, 48]
        assert get(api, "/charts/hot-100/preset?preset=top-10&limit=1")["entries"][0]["title"] == "Squabble Up"
        assert get(api, "/charts/hot-100/weeks-ago/158?limit=1")["chart_date"] == "2021-11-27"
        hits = get(api, "/search?q=mariah%20carey")["hits"]
        assert [(h["chart_date"], h["rank"]) for h in hits][-1] == ("2021-11-27", 36)


# --- billboard.py dumps --------------------------------------------------------------------------------------

DUMPS = "billboard/billboard-py-reference"


def test_import_real_dumps_under_their_own_dates(shared_upstream: Path, tmp_path: Path) -> None:
    _, command = GROUP.commands
    assert (command.verb, [a.name for a in command.args]) == ("import", ["file", "chart"])
    with data_dir(tmp_path):
        outcomes = command.run(Context(clock=fixed(NOW), settings=run_settings()), {"file": str(shared_upstream / DUMPS / "1979-08-04-hot-100.json"), "chart": None})
        outcomes += command.run(Context(clock=fixed(NOW), settings=run_settings()), {"file": str(shared_upstream / DUMPS / "2016-02-13-output.json"), "chart": "hot-100"})
        outcomes += command.run(Context(clock=fixed(NOW), settings=run_settings()), {"file": str(shared_upstream / DUMPS / "2014-08-02-artist-100.json"), "chart": None})
        again = command.run(Context(clock=fixed(NOW), settings=run_settings()), {"file": str(shared_upstream / DUMPS / "1979-08-04-hot-100.json"), "chart": None})
    assert [(o.target, o.status, o.rows) for o in outcomes] == [
        ("hot-100@1979-08-04", "ok", 100), ("hot-100@2016-02-13", "ok", 100), ("artist-100@2014-08-02", "ok", 100)]
    assert [(o.status, o.rows) for o in again] == [("ok", None)]  # the same week again stores nothing new
    with client(tmp_path, [GROUP]) as api:
        body = get(api, "/charts/hot-100/1979-07-30?limit=1&include_raw=true")
        assert (body["chart_date"], body["previous_chart_date"], body["next_chart_date"]) == (
            "1979-08-04", None, "2016-02-13")
        first = body["entries"][0]
        assert (first["rank"], first["title"], first["artist"], first["last_week"], first["peak"]) == (
            1, "Bad Girls", "Donna Summer", 1, 1)
        assert first["raw"]["marker"] == "false" and first["raw"]["last_week"] == "1"
        assert body["snapshot"]["source"] == "billboard.py dump 1979-08-04-hot-100.json (billboard.py schema)"
        weeks = get(api, "/charts")["charts"]
        assert (weeks[0]["first_week"], weeks[0]["last_week"], weeks[0]["weeks_held"]) == ("1979-08-04", "2016-02-13", 2)
        hits = get(api, "/search?q=good%20times&chart_slug=hot-100")["hits"]
        assert [(h["chart_date"], h["rank"]) for h in hits] == [("1979-08-04", 2)]
        runs = get(api, "/fetch-logs?limit=10")["entries"]
        assert {r["target"] for r in runs} == {"hot-100@1979-08-04", "hot-100@2016-02-13", "artist-100@2014-08-02"}


def test_import_refuses_what_it_cannot_serve(shared_upstream: Path, tmp_path: Path) -> None:
    _, command = GROUP.commands
    with data_dir(tmp_path):
        with pytest.raises(ValueError, match="'traditional-jazz-albums' chart, which is not served here"):
            command.run(Context(clock=fixed(NOW), settings=run_settings()), {"file": str(shared_upstream / DUMPS / "2006-08-05-traditional-jazz-albums.json"), "chart": None})
        with pytest.raises(ValueError, match="asked for 'billboard-200', the dump is 'hot-100'"):
            command.run(Context(clock=fixed(NOW), settings=run_settings()), {"file": str(shared_upstream / DUMPS / "1979-08-04-hot-100.json"), "chart": "billboard-200"})
        short = tmp_path / "short.json"
        short.write_bytes(samples.render_billboard_py_json("hot-100", date(2026, 11, 21), size=99))
        with pytest.raises(ValueError, match="short page, 99 of 100 rows"):
            command.run(Context(clock=fixed(NOW), settings=run_settings()), {"file": str(short), "chart": None})
    assert not (tmp_path / "ranking-charts.sqlite").exists() or _snapshot_count(tmp_path) == 0


def test_crawl_targets_and_schedules() -> None:
    assert [t.key for t in targets({"chart": "artist-100"}, FIXED_NOW, settings=run_settings())] == ["artist-100"]
    assert [t.key for t in targets({"chart": None}, FIXED_NOW, settings=run_settings())] == list(DEFAULT_SLUGS)
    (request,) = targets({"chart": "hot-100"}, FIXED_NOW, settings=run_settings())[0].requests
    assert (request.upstream, request.path) == ("BILLBOARD", "/charts/hot-100/")
    assert GROUP.crawl_options == (("chart", DEFAULT_SLUGS),)
    assert [(s.cron, s.timezone) for s in GROUP.schedules] == [("0 14 * * 2", "America/New_York"),
                                                               ("0 14 * * 4", "America/New_York")]
    assert GROUP.retention_days == {}
    assert {s.variable for s in GROUP.settings} == {"CHARTGW_RANKING_CHARTS",
                                                    "CHARTGW_RANKING_CHARTS_BACKFILL_DELAY_SECONDS"}
