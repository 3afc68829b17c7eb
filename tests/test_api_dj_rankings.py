"""/dj-rankings end to end: the app over a data folder the real crawler filled from sample DJ Mag pages and
MusicBrainz answers (five poll years, profiles, paged discographies), the crawl's caching and pacing,
failures keeping the last good snapshot, and the backfill command."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import chartgw.crawl.runner
from chartgw.api.group import crawl_group, group_policy
from chartgw.core.clock import fixed
from chartgw.crawl.context import Context
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import ReplayServer, Reply, request_key
from chartgw.demo.samples import dj_rankings as samples
from chartgw.groups.dj_rankings import GROUP, backfill
from chartgw.groups.dj_rankings.crawl import targets
from chartgw.groups.dj_rankings.records import LIST, PLAN
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, group_db_path
from chartgw.upstreams import djmag, musicbrainz
from chartgw.upstreams.djmag import DjRankEntry
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
YEARS = samples.sample_years()  # 2021..2025
LATEST = YEARS[-1]
ROUTES = ("/years", "/latest", f"/{LATEST}", f"/{LATEST}/1", "/djs/david-guetta", "/search?q=guetta", "/fetch-logs")


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def kept_djs() -> dict[str, samples.SampleDj]:
    """Every DJ on the five sample years' lists, by slug."""
    return {row.dj.slug: row.dj for year in YEARS for row in samples.year_ranking(year)}


@pytest.fixture(scope="module")
def seeded(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return group_data(all_groups_data, tmp_path_factory.mktemp("dj-rankings"), GROUP.name)


api = api_fixture(GROUP, "seeded")


get = partial(fixtures.get, prefix="/dj-rankings")
"""The module's GET: `tests.fixtures.get` with its options."""


# --- lists ----------------------------------------------------------------------------------------------


def test_years_lists_every_poll_held_newest_first(api: TestClient) -> None:
    body = get(api, "/years").json()
    assert (body["count"], body["latest"]) == (5, LATEST)
    assert [y["year"] for y in body["years"]] == list(reversed(YEARS))
    latest = body["years"][0]
    assert latest == {"year": LATEST, "count": 100, "chart_date": f"{LATEST}-12-31", "fetched_at": iso(NOW),
                      "source": latest["source"], "path": f"/dj-rankings/{LATEST}"}
    assert latest["source"].endswith("/top100djs")  # the latest poll's own page
    assert body["years"][1]["source"].endswith(f"/top100djs/{LATEST - 1}")  # backfilled
    assert body["years"][1]["fetched_at"] == iso(NOW - timedelta(days=2))


def test_the_latest_list_is_the_real_order_completed_from_the_djs_pages(api: TestClient) -> None:
    body = get(api, f"/{LATEST}").json()
    assert (body["year"], body["count"], body["previous_year"]) == (LATEST, 100, LATEST - 1)
    snapshot = body["snapshot"]
    assert (snapshot["target"], snapshot["row_count"], snapshot["stale"]) == (f"list/{LATEST}", 100, False)
    assert snapshot["cadence_seconds"] == 7 * 86400  # November: weekly
    for entry, row in zip(body["entries"], samples.year_ranking(LATEST), strict=True):
        assert entry == {
            "rank": row.rank, "name": row.dj.name, "name_from_slug": False, "slug": row.dj.slug,
            "country": djmag.country_of(row.dj.home), "genre": row.dj.style,
            "image": samples.image_url(LATEST, row.dj), "change": row.change,
            "url": djmag.dj_url(LATEST, row.rank, row.dj.slug)}
    dvlm = body["entries"][3]
    assert (dvlm["name"], dvlm["slug"], dvlm["country"]) == ("Dimitri Vegas & Like Mike", "dimitri-vegas-mike", "Belgium")


def test_past_years_derive_their_changes_from_the_year_before(api: TestClient) -> None:
    oldest = get(api, f"/{YEARS[0]}").json()
    assert oldest["previous_year"] is None
    newest = {row.dj.slug: year for year in YEARS for row in samples.year_ranking(year)}
    for entry, row in zip(oldest["entries"], samples.year_ranking(YEARS[0]), strict=True):
        # no year before is held: only a DJ whose own page is of that year has DJ Mag's word for it
        assert entry["change"] == (row.change if newest[row.dj.slug] == YEARS[0] else None)
    for year in YEARS[1:-1]:
        entries = get(api, f"/{year}").json()["entries"]
        for entry, row in zip(entries, samples.year_ranking(year), strict=True):
            assert entry["slug"] == row.dj.slug
            if isinstance(row.change, int):
                assert entry["change"] == row.change, (year, row.dj.slug)
            else:  # judged over the years held here, DJ Mag's over all years
                assert entry["change"] in ("new", "re-entry"), (year, row.dj.slug)


def test_limit_and_its_bounds(api: TestClient) -> None:
    body = get(api, f"/{LATEST}?limit=3").json()
    assert body["count"] == 3 and [e["rank"] for e in body["entries"]] == [1, 2, 3]
    for bad, kind in (("0", "greater_than_equal"), ("101", "less_than_equal"), ("x", "int_parsing")):
        response = get(api, f"/{LATEST}?limit={bad}")
        assert response.status_code == 422
        (error,) = response.json()["detail"]
        assert (error["loc"], error["type"]) == (["query", "limit"], kind)


def test_latest_is_the_newest_years_list(api: TestClient) -> None:
    assert get(api, "/latest").content == get(api, f"/{LATEST}").content
    assert get(api, "/latest?limit=2&genre=house").content == get(api, f"/{LATEST}?limit=2&genre=house").content


def test_no_list_held_yet_makes_latest_a_404(tmp_path: Path) -> None:
    with client(tmp_path, [GROUP]) as empty:
        response = empty.get("/dj-rankings/latest", headers=KEY_HEADERS)
    assert response.status_code == 404 and response.json() == {"detail": "No Top 100 is held yet; see /dj-rankings/health"}


@pytest.mark.parametrize("year", [str(LATEST), "latest", str(YEARS[0])])
def test_lists_filter_by_country_and_genre(api: TestClient, year: str) -> None:
    """`country` takes an ISO code (lower case, as the document's enum) of the country the entries name, `genre` a folded part of the style;
    ranks stay the poll's and `limit` counts what is left."""
    every = get(api, f"/{year}").json()["entries"]
    dutch = get(api, f"/{year}?country=nl").json()
    assert dutch["count"] == len(dutch["entries"]) == sum(e["country"] == "Netherlands" for e in every) > 5
    assert dutch["entries"] == [e for e in every if e["country"] == "Netherlands"]
    techno = get(api, f"/{year}?genre=TECHNO").json()["entries"]
    assert techno == [e for e in every if e["genre"] and "techno" in e["genre"].lower()]
    assert {e["genre"] for e in techno} > {"Techno"}  # Melodic techno, Hard techno... too
    both = get(api, f"/{year}?country=de&genre=tech-house&limit=1").json()
    assert both["count"] <= 1 and all(e["country"] == "Germany" and e["genre"] == "Tech house" for e in both["entries"])
    assert get(api, f"/{year}?country=global").json()["entries"] == every
    assert get(api, f"/{year}?country=aq").json()["entries"] == []  # a valid code no DJ is from: nothing, not an error


@pytest.mark.parametrize("query,kind", [("country=zz", "value_error"), ("country=", "value_error"),
                                        ("genre=%21%3F", "value_error"), ("genre=", "value_error")])
def test_bad_filters_are_422_as_in_the_other_groups(api: TestClient, query: str, kind: str) -> None:
    for path in ("/latest", f"/{LATEST}"):
        response = get(api, f"{path}?{query}")
        assert response.status_code == 422
        (error,) = response.json()["detail"]
        assert (error["loc"][:2], error["type"]) == (["query", query.split("=")[0]], kind)


def test_one_rank_of_one_year(api: TestClient) -> None:
    body = get(api, f"/{LATEST}/4").json()
    assert body["entry"]["name"] == "Dimitri Vegas & Like Mike" and body["entry"]["rank"] == 4
    assert body["dj"] == "/dj-rankings/djs/dimitri-vegas-mike" and body["snapshot"]["target"] == f"list/{LATEST}"
    last = get(api, f"/{YEARS[0]}/100").json()["entry"]
    assert last["slug"] == samples.year_ranking(YEARS[0])[99].dj.slug


@pytest.mark.parametrize("path,loc,kind", [
    ("/abc", ["path", "year"], "int_parsing"),
    (f"/{LATEST}/0", ["path", "rank"], "greater_than_equal"),
    (f"/{LATEST}/101", ["path", "rank"], "less_than_equal"),
    (f"/{LATEST}/first", ["path", "rank"], "int_parsing"),
    ("/20x5/1", ["path", "year"], "int_parsing"),
])
def test_bad_years_and_ranks_are_422(api: TestClient, path: str, loc: list[str], kind: str) -> None:
    response = get(api, path)
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert (error["loc"], error["type"]) == (loc, kind)


@pytest.mark.parametrize("path", ["/1999", "/1999/1", "/2026"])
def test_a_year_not_held_is_404_naming_the_years_endpoint(api: TestClient, path: str) -> None:
    response = get(api, path)
    assert response.status_code == 404
    detail = response.json()["detail"]
    assert "/dj-rankings/years" in detail and "2025, 2024, 2023, 2022, 2021" in detail


def test_a_rank_past_a_short_list_is_404(seeded: Path, tmp_path: Path) -> None:
    path = copy_data(seeded, tmp_path / "data")
    entries = [DjRankEntry(rank=r.rank, name=r.dj.name, name_from_slug=False, slug=r.dj.slug, country=None, genre=None,
                           image=None, change=None, url=djmag.dj_url(2010, r.rank, r.dj.slug))
               for r in samples.year_ranking(LATEST)[:20]]
    from chartgw.groups.dj_rankings.records import stored_list_entry

    with data_dir(path), SnapshotWriter(group_db_path(GROUP.name, settings=run_settings())) as store:
        store.commit([NewSnapshot("list/2010", "2010-12-31", None, NOW, "import", [stored_list_entry(e) for e in entries])],
                     FetchLogRow("list/2010", NOW, 0, "ok", None, 20))
    with client(path, [GROUP]) as fresh:
        assert get(fresh, "/2010/20").json()["entry"]["rank"] == 20
        response = get(fresh, "/2010/21")
        assert response.status_code == 404
        assert response.json() == {"detail": "The 2010 list held has 20 DJs; no rank 21 (see /dj-rankings/2010)"}


# --- DJs --------------------------------------------------------------------------------------------------


def test_a_dj_has_profile_every_years_rank_and_discography(api: TestClient) -> None:
    dj = kept_djs()["dimitri-vegas-mike"]
    body = get(api, "/djs/dimitri-vegas-mike").json()
    assert (body["name"], body["name_from_slug"], body["country"], body["home"], body["genre"]) == (
        "Dimitri Vegas & Like Mike", False, "Belgium", "Willebroek, Belgium", "Big room")
    assert body["best_known_for"] == "Big room sets around the world"
    assert body["bio"].startswith("Dimitri Vegas & Like Mike slips one place to No. 4 in the 2025 poll")
    assert "Advertisement" not in body["bio"]
    assert body["image"] == samples.image_url(LATEST, dj)
    assert (body["url"], body["profile_year"]) == (djmag.dj_url(LATEST, 4, dj.slug), LATEST)
    assert body["profile_fetched_at"] == iso(NOW - timedelta(days=2) + timedelta(hours=1))
    expected = [(y, r.rank) for y in reversed(YEARS) for r in samples.year_ranking(y) if r.dj.slug == dj.slug]
    assert [(r["year"], r["rank"]) for r in body["rankings"]] == expected
    discography = body["discography"]
    assert discography["status"] == "complete" and discography["reason"] is None
    assert discography["artist"] == {"mbid": samples.sample_mbid(dj.slug), "name": dj.name, "type": "Group",
                                     "country": "BE", "disambiguation": "DJ and producer", "match": "name",
                                     "searched_at": iso(NOW - timedelta(days=2) + timedelta(hours=1))}
    groups = samples.release_groups(dj)
    assert discography["count"] == len(groups) == len(discography["release_groups"])
    first = discography["release_groups"][0]
    assert first == {"id": groups[0]["id"], "title": groups[0]["title"], "primary_type": groups[0]["primary-type"],
                     "secondary_types": groups[0]["secondary-types"],
                     "first_release_date": groups[0]["first-release-date"] or None, "disambiguation": None}
    assert [g["id"] for g in discography["release_groups"]] == [g["id"] for g in groups]


def test_a_discography_of_several_pages_is_complete(api: TestClient) -> None:
    dj = next(d for d in kept_djs().values() if samples.release_group_count(d) > 100 and samples.has_musicbrainz_match(d))
    discography = get(api, f"/djs/{dj.slug}").json()["discography"]
    assert discography["status"] == "complete" and discography["fetched_at"] == iso(NOW)
    assert discography["count"] == samples.release_group_count(dj) == len(discography["release_groups"])
    assert "offset=0" in discography["source"]


def test_a_dj_without_musicbrainz_artist_says_so(api: TestClient) -> None:
    dj = next(d for d in kept_djs().values() if not samples.has_musicbrainz_match(d))
    discography = get(api, f"/djs/{dj.slug}").json()["discography"]
    assert discography["status"] == "no-match" and discography["artist"] is None
    assert dj.name in discography["reason"] and discography["release_groups"] == []


def test_dj_slugs_any_case_unknown_404_and_bad_422(api: TestClient) -> None:
    assert get(api, "/djs/David-Guetta").json()["slug"] == "david-guetta"
    response = get(api, "/djs/nobody-at-all")
    assert response.status_code == 404
    assert response.json()["detail"] == "No DJ 'nobody-at-all' is on any list held; find one with /dj-rankings/search?q="
    response = get(api, "/djs/w&w")
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["path", "slug"]


# --- search -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("q,slug", [
    ("tiesto", "tiesto"), ("TIËSTO", "tiesto"), ("Dimitri Vegas & Like Mike", "dimitri-vegas-mike"),
    ("dimitri-vegas-mike", "dimitri-vegas-mike"), ("kolsch", "kolsch"), ("martin garrix", "martin-garrix"),
])
def test_search_ignores_case_accents_and_punctuation(api: TestClient, q: str, slug: str) -> None:
    body = get(api, f"/search?q={q.replace('&', '%26')}").json()
    assert body["q"] == q and body["djs"][0]["slug"] == slug


def test_search_hits_carry_years_and_exact_names_come_first(api: TestClient) -> None:
    body = get(api, "/search?q=alok").json()
    hit = body["djs"][0]
    assert (hit["name"], hit["latest_year"], hit["latest_rank"], hit["dj"]) == ("Alok", LATEST, 3, "/dj-rankings/djs/alok")
    assert hit["years_on_list"] == sum(any(r.dj.slug == "alok" for r in samples.year_ranking(y)) for y in YEARS)
    many = get(api, "/search?q=a&limit=5").json()
    assert many["count"] == 5
    assert get(api, "/search?q=zzqqxx").json() == {"q": "zzqqxx", "count": 0, "djs": []}


@pytest.mark.parametrize("query,kind", [("q=%26%21", "value_error"), ("q=", "string_too_short"), ("", "missing"),
                                       ("q=a&limit=0", "greater_than_equal")])
def test_search_needs_a_letter_or_digit(api: TestClient, query: str, kind: str) -> None:
    response = get(api, f"/search?{query}")
    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == kind
    if kind == "value_error":
        assert "letter or digit" in response.json()["detail"][0]["msg"]


# --- health, keys, documents ------------------------------------------------------------------------------


def test_health_is_public_and_ok(api: TestClient) -> None:
    body = api.get("/dj-rankings/health").json()
    assert (body["status"], body["service"], body["years"]) == ("ok", "dj-rankings", list(reversed(YEARS)))
    assert body["latest_list"] == {"year": LATEST, "fetched_at": iso(NOW), "age_seconds": 0,
                                   "cadence_seconds": 7 * 86400, "stale": False}
    details = body["details"]
    djs = len(kept_djs())
    matched = sum(samples.has_musicbrainz_match(d) for d in kept_djs().values())
    assert details == {"djs": djs, "pages": djs, "pages_fresh": djs, "searched": djs, "matched": matched,
                       "discographies": matched, "discographies_fresh": matched, "refresh_days": 7}
    assert body["musicbrainz_user_agent"] == musicbrainz.USER_AGENT


def test_health_degrades_as_the_data_ages_and_without_data(seeded: Path, tmp_path: Path) -> None:
    with client(seeded, [GROUP], now=NOW + timedelta(days=20)) as later:
        body = later.get("/dj-rankings/health").json()
        assert body["status"] == "degraded" and body["latest_list"]["stale"] is True
        assert body["details"]["pages_fresh"] == 0
    with client(tmp_path, [GROUP]) as empty:
        body = empty.get("/dj-rankings/health").json()
        assert body["status"] == "degraded" and body["years"] == [] and body["latest_list"]["year"] is None
        assert get(empty, "/years").json() == {"count": 0, "latest": None, "years": []}
        assert "held: none yet" in get(empty, "/2025").json()["detail"]


def test_a_bad_setting_is_a_503_naming_it(seeded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_DJ_RANKINGS_YEARS", "0")
    with client(seeded, [GROUP]) as fresh:
        response = fresh.get("/dj-rankings/health")
        assert response.status_code == 503 and "CHARTGW_DJ_RANKINGS_YEARS" in response.json()["detail"]


@pytest.mark.parametrize("path", ROUTES)
def test_data_routes_need_a_key(api: TestClient, path: str) -> None:
    assert api.get("/dj-rankings" + path).status_code == 401
    assert api.get("/dj-rankings-api" + path).status_code == 401


def test_legacy_prefix_answers_as_the_public_one(api: TestClient) -> None:
    for path in ("/years", f"/{LATEST}?limit=2", "/djs/alok", "/search?q=guetta"):
        assert api.get("/dj-rankings-api" + path, headers=KEY_HEADERS).content == get(api, path).content
    assert api.get("/dj-rankings").status_code == 200 and api.get("/dj-rankings-api/health").status_code == 200


def test_openapi_lists_every_route(api: TestClient) -> None:
    response = api.get("/dj-rankings/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert set(document["paths"]) == {"/", "/health", "/openapi.json", "/fetch-logs", "/diff", "/exports", "/exports/{name}", "/years", "/search",
                                      "/djs/{slug}", "/latest", "/{year}", "/{year}/{rank}"}
    for path in ("/latest", "/{year}"):
        params = {p["name"]: p["schema"] for p in document["paths"][path]["get"]["parameters"] if p["in"] == "query"}
        assert set(params) == {"limit", "country", "genre", "format", "include"}
        assert params["country"] == {"$ref": "#/components/schemas/Country"} and params["genre"]["type"] == "string"
    assert {"DjRankEntry", "ReleaseGroup", "DjResponse"} <= set(document["components"]["schemas"])
    assert document["paths"]["/{year}"]["get"]["parameters"][0]["schema"] == {"type": "integer"}


def test_fetch_logs_show_every_crawl(api: TestClient) -> None:
    body = get(api, "/fetch-logs?limit=1000").json()
    targets_seen = {e["target"] for e in body["entries"]}
    assert {"list", PLAN, "list/2021", "dj/alok", "musicbrainz/alok", "discography/alok"} <= targets_seen
    assert all(e["status"] == "ok" for e in body["entries"])


def test_entries_map_for_artist_history(seeded: Path) -> None:
    import sqlite3

    mapping = GROUP.entries
    assert mapping is not None
    db = sqlite3.connect(seeded / "dj-rankings.sqlite")
    rows = db.execute("SELECT s.target, e.record FROM entries e JOIN snapshots s ON s.id = e.snapshot_id"
                      " ORDER BY e.snapshot_id, e.position").fetchall()
    mapped = [(target, mapping.read(target, json.loads(record))) for target, record in rows]
    kept = [(t, m) for t, m in mapped if m is not None]
    assert {t.split("/")[0] for t, _ in kept} == {"list"} and len(kept) == 600  # the latest poll crawled twice
    first = next(m for t, m in kept if t == f"list/{LATEST}")
    assert first == ("David Guetta", ["David Guetta"], None, "global", {})


def test_schedules_crawl_options_and_targets(seeded: Path) -> None:
    assert [(s.cron, s.args) for s in GROUP.schedules] == [
        ("20 4 * 10-12 1", ("--part", "list")), ("20 4 1 1-9 *", ("--part", "list")),
        ("50 4 * * *", ("--part", "details"))]
    assert GROUP.crawl_options == (("part", ("list", "details")),) and GROUP.upstreams == ("DJMAG", "MUSICBRAINZ")
    with data_dir(seeded):
        assert [t.key for t in targets({"part": "list"}, FIXED_NOW, settings=run_settings())] == ["list"]
        # the last crawl's plan: the second pages of the discographies longer than one
        assert {t.key.split("/")[0] for t in targets({"part": "details"}, FIXED_NOW, settings=run_settings())} == {"discography"}
    assert LIST.make("2025") == "list/2025"


# --- crawls on a private copy -----------------------------------------------------------------------------


def _crawl(path: Path, selection: dict[str, str | None], at: datetime,
           tables: dict[str, dict[Any, Reply]] | None = None) -> tuple[list[Outcome], dict[str, ReplayServer]]:
    with data_dir(path), replay_upstreams(tables or samples.all_replies(NOW)) as servers:
        outcomes = asyncio.run(crawl_group(GROUP, selection, now=fixed(at), settings=run_settings()))
    return outcomes, servers


def _list_reply(reply: Reply) -> dict[str, dict[Any, Reply]]:
    tables = samples.all_replies(NOW)
    tables[djmag.UPSTREAM][request_key(djmag.list_request())] = reply
    return tables


def _truncated_page() -> bytes:
    page = samples.render_list_page(LATEST, current=True).decode()
    graph = json.loads(re.search(r'<script type="application/ld\+json">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]  # the sample has one
    items = graph["@graph"][1]["itemListElement"]
    graph["@graph"][1]["itemListElement"] = items[:50]
    return re.sub(r'(<script type="application/ld\+json">)(.*?)(</script>)',
                  lambda m: m.group(1) + json.dumps(graph) + m.group(3), page, flags=re.S).encode()


CHALLENGE = b"<html><head><title>Just a moment...</title></head><body>cf-browser-verification</body></html>"


@pytest.mark.parametrize("reply,status,error,requests", [
    (Reply(b"<html><body>Internal error</body></html>", 500), 500, "HTTP 500", 3),
    (Reply(CHALLENGE, 403), 403, "bot check", 1),
    (Reply(CHALLENGE, 200), 200, "bot check", 1),
    (Reply(_truncated_page(), 200), 200, "expected 100 DJs, the page lists 50", 1),
    (Reply(b"<html><body><p>Top 100 DJs</p></body></html>", 200), 200, "layout changed", 1),
], ids=["http-500", "refused-403", "challenge-200", "truncated", "layout"])
def test_a_failed_list_crawl_keeps_the_last_good_snapshot(seeded: Path, tmp_path: Path, reply: Reply, status: int,
                                                          error: str, requests: int) -> None:
    path = copy_data(seeded, tmp_path / "data")
    with client(path, [GROUP]) as before_client:
        before = get(before_client, f"/{LATEST}").json()
    outcomes, servers = _crawl(path, {"part": "list"}, NOW + timedelta(hours=1), _list_reply(reply))
    outcome = next(o for o in outcomes if o.target == "list")
    assert outcome.status == "failed" and outcome.http_status == status and error in (outcome.error or "")
    assert sum(key[1] == "/top100djs" for key, _ in servers[djmag.UPSTREAM].seen) == requests  # a refusal is not retried
    with client(path, [GROUP]) as after_client:
        assert get(after_client, f"/{LATEST}").json() == before
        log = get(after_client, "/fetch-logs?status=failed").json()["entries"]
        assert [(e["target"], e["http_status"]) for e in log] == [("list", status)] and error in log[0]["error"]


def test_a_failed_dj_page_or_discography_keeps_the_last_good_one(seeded: Path, tmp_path: Path) -> None:
    path = copy_data(seeded, tmp_path / "data")
    with client(path, [GROUP]) as before_client:
        before = get(before_client, "/djs/alok").json()
    tables = samples.all_replies(NOW)
    alok = samples.year_ranking(LATEST)[2]
    tables[djmag.UPSTREAM][request_key(djmag.dj_request(LATEST, 3, "alok"))] = Reply(CHALLENGE, 503)
    rg = musicbrainz.release_groups_request(samples.sample_mbid(alok.dj.slug), 0)
    tables[musicbrainz.UPSTREAM][request_key(rg)] = Reply(b'{"error": "Your requests are exceeding the allowable rate limit"}',
                                                         200, samples.JSON_TYPE)
    # another DJ's page at a DJ's address, and a count that moves between two browse pages
    guetta = samples.year_ranking(LATEST)[0]
    tables[djmag.UPSTREAM][request_key(djmag.dj_request(LATEST, 2, "martin-garrix"))] = Reply(samples.render_dj_page(guetta))
    long = next(d for d in kept_djs().values() if samples.release_group_count(d) > 100 and samples.has_musicbrainz_match(d))
    second = json.loads(samples.render_release_groups(long, 100))
    second["release-group-count"] += 1
    tables[musicbrainz.UPSTREAM][request_key(musicbrainz.release_groups_request(samples.sample_mbid(long.slug), 100))] = (
        Reply(json.dumps(second).encode(), 200, samples.JSON_TYPE))
    outcomes, _ = _crawl(path, {"part": "details"}, NOW + timedelta(days=8), tables)
    failed = {o.target: o.error for o in outcomes if o.status == "failed"}
    assert set(failed) == {"dj/alok", "discography/alok", "dj/martin-garrix", f"discography/{long.slug}"}
    assert "bot check" in (failed["dj/alok"] or "") and "rate limit" in (failed["discography/alok"] or "")
    assert "'david-guetta' does not describe 'martin-garrix'" in (failed["dj/martin-garrix"] or "")
    assert "count changed between pages" in (failed[f"discography/{long.slug}"] or "")
    with client(path, [GROUP], now=NOW + timedelta(days=8)) as after_client:
        after = get(after_client, "/djs/alok").json()
        assert after["profile_fetched_at"] == before["profile_fetched_at"]
        assert after["discography"] == before["discography"]
        assert get(after_client, "/djs/david-guetta").json()["profile_fetched_at"] == iso(NOW + timedelta(days=8))


def test_details_are_fetched_again_only_when_due(seeded: Path, tmp_path: Path) -> None:
    path = copy_data(seeded, tmp_path / "data")
    outcomes, servers = _crawl(path, {"part": "details"}, NOW + timedelta(days=1))
    assert [o.target for o in outcomes] == [PLAN]  # nothing due a day later: no request at all
    assert servers[djmag.UPSTREAM].seen == [] and servers[musicbrainz.UPSTREAM].seen == []
    outcomes, servers = _crawl(path, {"part": "details"}, NOW + timedelta(days=8))
    assert all(o.status == "ok" for o in outcomes)
    djs = kept_djs()
    matched = [d for d in djs.values() if samples.has_musicbrainz_match(d)]
    mb_paths = [key[1] for key, _ in servers[musicbrainz.UPSTREAM].seen]
    # a week later: every page and every discography again; searches only where nothing matched
    assert mb_paths.count("/ws/2/artist") == len(djs) - len(matched)
    pages = sum((samples.release_group_count(d) + 99) // 100 for d in matched)
    assert mb_paths.count("/ws/2/release-group") == pages
    assert len(servers[djmag.UPSTREAM].seen) == len(djs)


def test_musicbrainz_is_asked_one_request_a_second_with_a_descriptive_user_agent(
        seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = copy_data(seeded, tmp_path / "data")
    with environment({"CHARTGW_CRAWL_DELAY_SECONDS": "0.2"}):
        policy = group_policy(GROUP, settings=run_settings())
    assert (policy.per_upstream, policy.delay_seconds, policy.jitter) == (1, 1.0, 0.5)
    pauses: list[float] = []
    real_sleep = asyncio.sleep

    async def no_wait(seconds: float) -> None:
        pauses.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(chartgw.crawl.runner.asyncio, "sleep", no_wait)  # type: ignore[attr-defined]  # the runner's own
    configure("CHARTGW_MUSICBRAINZ_CONTACT", "dj-rankings@example.net")
    with data_dir(path), replay_upstreams(samples.all_replies(NOW)) as servers, \
            environment({"CHARTGW_CRAWL_DELAY_SECONDS": "0.2"}):  # pacing on (replay servers turn it off)
        outcomes = asyncio.run(crawl_group(GROUP, {"part": "details"}, now=fixed(NOW + timedelta(days=8)), settings=run_settings()))
    assert all(o.status == "ok" for o in outcomes)
    seen = servers[musicbrainz.UPSTREAM].seen + servers[djmag.UPSTREAM].seen
    # paced, a crawl plans at most CHARTGW_DJ_RANKINGS_REQUESTS_PER_CRAWL requests per upstream (default 40)
    assert len(servers[musicbrainz.UPSTREAM].seen) == 40 and len(servers[djmag.UPSTREAM].seen) == 40
    assert len(pauses) == len(seen) and all(1.0 <= p <= 1.5 for p in pauses)
    agents = {headers["user-agent"] for _, headers in servers[musicbrainz.UPSTREAM].seen}
    assert agents == {"chartgw/0.1 ( dj-rankings@example.net )"}


def test_a_name_from_a_slug_never_replaces_a_real_one(seeded: Path, tmp_path: Path) -> None:
    path = copy_data(seeded, tmp_path / "data")
    page = samples.render_list_page(LATEST, current=True).decode()
    nameless = re.sub(r'<section class="top100-list">.*?</section>', "", page, flags=re.S).encode()
    assert djmag.parse_list(nameless).entries[3].name == "Dimitri Vegas Mike"  # what the page alone gives
    outcomes, _ = _crawl(path, {"part": "list"}, NOW + timedelta(hours=1), _list_reply(Reply(nameless)))
    assert [o.status for o in outcomes] == ["ok", "ok"]
    with client(path, [GROUP]) as after:
        entry = get(after, f"/{LATEST}/4").json()["entry"]
        assert (entry["name"], entry["name_from_slug"]) == ("Dimitri Vegas & Like Mike", False)
        assert get(after, f"/{LATEST}/18").json()["entry"]["name"] == "W&W"
        assert get(after, "/years").json()["years"][0]["fetched_at"] == iso(NOW + timedelta(hours=1))
    with data_dir(path), SnapshotWriter(group_db_path(GROUP.name, settings=run_settings())) as store:
        stored = [json.loads(r) for r in store.latest_records(f"list/{LATEST}")]
    assert stored[3]["name"] == "Dimitri Vegas & Like Mike" and not any(e["name_from_slug"] for e in stored)


def test_a_fresh_start_builds_up_over_crawls(tmp_path: Path) -> None:
    """From nothing: the list, then pages and searches, then releases (a second page the crawl after)."""
    outcomes, _ = _crawl(tmp_path, {}, NOW)
    assert [o.target for o in outcomes] == [PLAN, "list"]
    outcomes, _ = _crawl(tmp_path, {}, NOW + timedelta(hours=1))
    kinds = {o.target.split("/")[0] for o in outcomes}
    assert kinds == {PLAN, "list", "dj", "musicbrainz"} and all(o.status == "ok" for o in outcomes)
    outcomes, _ = _crawl(tmp_path, {"part": "details"}, NOW + timedelta(hours=2))
    assert {o.target.split("/")[0] for o in outcomes} == {PLAN, "discography"}
    outcomes, _ = _crawl(tmp_path, {"part": "details"}, NOW + timedelta(hours=3))
    long = [d for d in samples.year_ranking(LATEST) if samples.release_group_count(d.dj) > 100
            and samples.has_musicbrainz_match(d.dj)]
    assert len(outcomes) == 1 + len(long)
    with client(tmp_path, [GROUP], now=NOW + timedelta(hours=3)) as c:
        assert get(c, "/years").json()["latest"] == LATEST
        assert get(c, f"/djs/{long[0].dj.slug}").json()["discography"]["status"] == "complete"


# --- the backfill command ---------------------------------------------------------------------------------


def test_backfill_fills_past_polls_as_one_run(tmp_path: Path) -> None:
    with data_dir(tmp_path), replay_upstreams(samples.all_replies(NOW)) as servers:
        outcomes = asyncio.run(backfill(2019, 2022, now=fixed(NOW), settings=run_settings()))
    assert [(o.target, o.status, o.rows) for o in outcomes] == [
        ("list/2019", "failed", None), ("list/2020", "failed", None), ("list/2021", "ok", 100), ("list/2022", "ok", 100)]
    assert "HTTP 404" in (outcomes[0].error or "")
    assert sorted(key[1] for key, _ in servers[djmag.UPSTREAM].seen if key[1] != "/top100djs/2019"
                  and key[1] != "/top100djs/2020") == ["/top100djs/2021", "/top100djs/2022"]
    with client(tmp_path, [GROUP]) as c:
        assert [y["year"] for y in get(c, "/years").json()["years"]] == [2022, 2021]
        assert get(c, "/2022").json()["previous_year"] == 2021
        runs = get(c, "/fetch-logs?status=ok").json()["entries"]
        assert {r["target"] for r in runs} == {"list/2021", "list/2022"}


@pytest.mark.parametrize("values,message", [
    ({"since": 2024, "until": 2021}, "--until 2021 is before --since 2024"),
    ({"since": 1990, "until": 2000}, "--since must be 1997 (the first poll) or later, got 1990"),
    ({"since": 2020, "until": 2099}, "after this year"),
])
def test_the_backfill_command_refuses_bad_years(values: dict[str, Any], message: str) -> None:
    (command,) = GROUP.commands
    assert command.verb == "backfill" and [a.name for a in command.args] == ["since", "until"]
    with pytest.raises(ValueError, match=re.escape(message)):
        command.run(Context(clock=fixed(FIXED_NOW), settings=run_settings()), values)
