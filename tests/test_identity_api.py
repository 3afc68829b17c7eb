"""The identity interface over the demo data: `include=identity` on every chart list, and the /identity routes
(recordings, lookup, search, artists, plot), keyed, in the joined document, with CSV and NDJSON."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, cast

import pytest
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from chartgw.api.endpoints import EndpointApp
from chartgw.groups import GROUPS
from chartgw.http.app import declared_routes
from chartgw.index import artist_history as ah
from chartgw.index import history as index
from chartgw.index.credits import credit_keys
from chartgw.index.identity.include import INCLUDE, ranked
from chartgw.store import Query, SnapshotReader
from tests import fixtures
from tests.fixtures import KEY_HEADERS, client, copy_data
from tests.test_artist_history import add_snapshot, build_index

pytestmark = pytest.mark.heavy

CHART_LISTS = [
    "/streaming/chart?chart_date=2026-11-17&limit=5",
    "/digital-sales/top-songs/us/latest?limit=5",
    "/short-video/chart?limit=5",
    "/recognition/top-200/australia/latest?limit=5",
    "/korea-chart/portal-a/charts/hot100_d100?limit=5",
    "/uk-charts/singles/latest?limit=5",
    "/ranking-charts/charts/hot-100/latest?limit=5",
]
MATCHES = {"isrc", "platform_id", "exact", "high", "low", "none"}


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    ah.register_sources(GROUPS)


@pytest.fixture(scope="module")
def indexed(indexed_demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_data(indexed_demo, tmp_path_factory.mktemp("identity") / "data")


@pytest.fixture(scope="module")
def api(indexed: Path) -> Iterator[TestClient]:
    with client(indexed) as test_client:
        yield test_client


get = partial(fixtures.get, as_json=None)
"""The module's GET: `tests.fixtures.get` with its options."""


def entries_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return next(v for v in body.values() if isinstance(v, list) and v and isinstance(v[0], dict) and "rank" in v[0])


def without_identity(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_identity(v) for k, v in value.items() if k != "identity"}
    if isinstance(value, list):
        return [without_identity(v) for v in value]
    return value


@pytest.mark.parametrize("url", CHART_LISTS)
def test_include_identity_adds_one_object_per_entry_and_changes_nothing_else(api: TestClient, url: str) -> None:
    plain = get(api, url)
    joined = "&" if "?" in url else "?"
    body = get(api, url + joined + "include=identity")
    assert without_identity(body) == plain
    entries = entries_of(body)
    for entry in entries:
        identity = entry["identity"]
        assert set(identity) == {"recording_id", "artist_ids", "match"}
        assert identity["match"] in MATCHES
        assert isinstance(identity["recording_id"], str) and identity["recording_id"].startswith("rec_")
        assert identity["artist_ids"] and all(a.startswith("art_") for a in identity["artist_ids"])
    assert api.get(url, headers=KEY_HEADERS).content == api.get(url, headers=KEY_HEADERS).content  # cached alike


def test_an_entrys_artist_ids_are_those_of_the_keys_its_rows_are_indexed_under(api: TestClient, indexed: Path) -> None:
    """One artist layer: an entry's `artist_ids` are identity's ids of the artist keys the index keeps its row
    form's rows under (its credits as the index split them, featured artists included)."""
    with sqlite3.connect(indexed / f"{index.INDEX_NAME}.sqlite") as db:
        names = dict(db.execute("SELECT name, artist_id FROM identity_artist_names").fetchall())
        forms = {(artist, title): credits for artist, title, credits in db.execute(
            "SELECT v.artist, coalesce(v.title, ''), v.credits FROM variants v")}
    checked = 0
    for url in CHART_LISTS:
        for entry in entries_of(get(api, url + "&include=identity")):
            credits = forms.get((entry["artist"], entry.get("title") or ""))
            if credits is None:
                continue
            assert entry["identity"]["artist_ids"] == list(dict.fromkeys(names[k] for k in credit_keys(credits)))
            checked += 1
    assert checked >= 20


def test_every_route_whose_entries_carry_a_rank_takes_include() -> None:
    """Every group's own route listing ranked entries, in every group with entries (the platform's /diff lists
    changes, not a chart)."""
    ranked_routes = [(g.name, r.path) for g in GROUPS if g.entries is not None for r in g.routes if ranked(r)]
    assert len(ranked_routes) >= 20
    assert {g.name for g in GROUPS if g.entries is not None} >= {"streaming", "digital-sales", "short-video",
                                                                  "recognition", "korea-chart", "uk-charts",
                                                                  "ranking-charts"}
    with_include = [(g.name, r.path) for g, r in declared_routes(GROUPS, identity=object())  # type: ignore[arg-type]
                    if INCLUDE in r.params]
    assert with_include == ranked_routes


def test_include_takes_only_identity(api: TestClient) -> None:
    body = get(api, CHART_LISTS[0] + "&include=chorus", status=422)
    assert body["detail"][0]["loc"] == ["query", "include", 0]


def test_a_recording_lists_its_appearances_ids_and_artists(api: TestClient) -> None:
    entry = entries_of(get(api, CHART_LISTS[0] + "&include=identity"))[0]
    recording_id = entry["identity"]["recording_id"]
    body = get(api, f"/identity/recordings/{recording_id}")
    assert body["id"] == recording_id and body["title"]
    assert {a["id"] for a in body["artists"]} >= set(entry["identity"]["artist_ids"])
    every = get(api, f"/identity/recordings/{recording_id}", limit=500)["appearances"]
    assert ("streaming", "2026-11-17", entry["rank"]) in {(a["group"], a["chart_date"], a["rank"]) for a in every}
    assert all(set(a) == {"group", "chart", "market", "chart_date", "rank", "title", "artist"} for a in body["appearances"])
    dates = [a["chart_date"] for a in body["appearances"]]
    assert dates == sorted(dates, reverse=True)
    assert isinstance(body["ids"], dict) and body["ambiguous"] is False
    first = get(api, f"/identity/recordings/{recording_id}", limit=1)
    if first["next_cursor"]:
        second = get(api, f"/identity/recordings/{recording_id}", limit=1, cursor=first["next_cursor"])
        assert second["appearances"][0] != first["appearances"][0]
    csv = get(api, f"/identity/recordings/{recording_id}", format="csv")
    assert csv.text.splitlines()[0] == "group,chart,market,chart_date,rank,title,artist"
    ndjson = get(api, f"/identity/recordings/{recording_id}", format="ndjson")
    assert len(ndjson.text.splitlines()) == body["count"]
    svg = get(api, f"/identity/recordings/{recording_id}/plot")
    assert svg.headers["content-type"].startswith("image/svg+xml") and "<svg" in svg.text
    get(api, "/identity/recordings/rec_0000000000000000", status=404)
    get(api, "/identity/recordings/nope", status=422)
    get(api, f"/identity/recordings/{recording_id}", status=422, cursor="yesterday")


def test_lookup_by_id(api: TestClient, indexed: Path) -> None:
    with sqlite3.connect(indexed / f"{index.INDEX_NAME}.sqlite") as db:
        kind, value, rec_id = db.execute("SELECT i.kind, i.value, r.id FROM identity_ids i JOIN identity_recordings r"
                                         " ON r.number = i.recording ORDER BY i.kind = 'isrc' DESC LIMIT 1").fetchone()
    assert get(api, "/identity/lookup", **{kind: value})["id"] == rec_id
    get(api, "/identity/lookup", status=404, isrc="USUM79999999")
    assert get(api, "/identity/lookup", status=422, isrc="not-an-isrc")["detail"][0]["loc"] == ["query", "isrc"]
    get(api, "/identity/lookup", status=422)
    get(api, "/identity/lookup", status=422, isrc="USUM79999999", spotify_track="0" * 22)


def test_one_isrc_on_two_recordings_is_a_409_with_candidates(indexed: Path, tmp_path: Path) -> None:
    path = copy_data(indexed, tmp_path / "data")
    with sqlite3.connect(path / f"{index.INDEX_NAME}.sqlite") as db:
        title, isrc = db.execute("SELECT title, isrc FROM variants WHERE isrc IS NOT NULL"
                                         " AND title != '' ORDER BY id LIMIT 1").fetchone()
    with sqlite3.connect(path / "short-video.sqlite") as db:  # the group whose rows carry ISRCs
        (target,) = db.execute("SELECT target FROM snapshots ORDER BY id DESC LIMIT 1").fetchone()
    add_snapshot(path, "short-video", target, "2026-06-03", None, [
        {"rank": 1, "name": "A Song Nobody Else Sang", "artist": "Nobody Else", "artists": ["Nobody Else"], "isrc": isrc}])
    build_index(path)
    with client(path) as api:
        body = get(api, "/identity/lookup", status=409, isrc=isrc)
        assert len(body["candidates"]) == 2 and "kept apart" in body["detail"]
        assert {c["title"] for c in body["candidates"]} == {title, "A Song Nobody Else Sang"}
        assert all(get(api, f"/identity/recordings/{c['recording_id']}")["ambiguous"] for c in body["candidates"])


def test_search_and_artists(api: TestClient) -> None:
    entry = entries_of(get(api, CHART_LISTS[4] + "&include=identity"))[0]
    body = get(api, "/identity/search", title=entry["title"], artist=entry["artist"])
    assert body["candidates"][0]["recording_id"] == entry["identity"]["recording_id"]
    assert body["candidates"][0]["confidence"] == 1.0
    assert get(api, "/identity/search", title=entry["title"])["count"] >= 1
    get(api, "/identity/search", status=422)
    artist = get(api, f"/identity/artists/{entry['identity']['artist_ids'][0]}")
    assert artist["names"] and entry["identity"]["recording_id"] in {r["id"] for r in artist["recordings"]}
    get(api, "/identity/artists/art_0000000000000000", status=404)


def _index_reader(api: TestClient) -> SnapshotReader:
    """The reader the app's /identity routes read the index through."""
    app = cast(Starlette, api.app)
    return next(cast(EndpointApp, r.app).data.reader for r in app.routes
                if isinstance(r, Route) and r.path == "/identity/lookup")


def test_an_identity_answer_is_one_read_of_the_index_then_the_response_caches(
        api: TestClient, indexed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each /identity answer reads the index in one run on its reader's thread (`SnapshotReader.read`: one hop off
    the event loop, where each statement read apart cost three: 27 for a lookup), and the same request again is
    the response cache's: no read at all."""
    reader = _index_reader(api)
    reads: list[str] = []
    real_read, real_fetchall = reader.read, reader.fetchall

    async def read(work: Any) -> Any:
        reads.append("read")
        return await real_read(work)

    async def fetchall(query: Query, params: Any = ()) -> list[tuple[Any, ...]]:
        if query.name != "data_version":  # the response cache's version check, at most once a second
            reads.append(query.name)
        return await real_fetchall(query, params)

    monkeypatch.setattr(reader, "read", read)
    monkeypatch.setattr(reader, "fetchall", fetchall)
    entry = entries_of(get(api, CHART_LISTS[1] + "&include=identity"))[0]
    recording, artist = entry["identity"]["recording_id"], entry["identity"]["artist_ids"][0]
    with sqlite3.connect(indexed / f"{index.INDEX_NAME}.sqlite") as db:
        kind, value = db.execute("SELECT i.kind, i.value FROM identity_ids i JOIN identity_recordings r"
                                 " ON r.number = i.recording WHERE r.id = ? ORDER BY 1, 2 LIMIT 1", [recording]).fetchone()
    reads.clear()
    for url, params in [(f"/identity/recordings/{recording}", {"limit": 37}), ("/identity/lookup", {kind: value, "limit": 37}),
                        ("/identity/search", {"title": entry["title"].swapcase(), "artist": entry["artist"].swapcase()}),
                        (f"/identity/artists/{artist}", {"limit": 37})]:
        first = api.get(url, params=params, headers=KEY_HEADERS)
        assert first.status_code == 200 and (url, reads) == (url, ["read"])
        reads.clear()
        again = api.get(url, params=params, headers=KEY_HEADERS)
        assert again.content == first.content and (url, reads) == (url, [])
    for url in ("/identity/recordings/rec_0000000000000000", "/identity/artists/art_0000000000000000"):
        assert api.get(url, headers=KEY_HEADERS).status_code == 404 and (url, reads) == (url, ["read"])
        reads.clear()


def test_keyed_and_in_the_joined_document(api: TestClient) -> None:
    assert api.get("/identity/search?title=x").status_code == 401
    paths = api.get("/openapi.json").json()["paths"]
    assert {"/identity/recordings/{recording_id}", "/identity/lookup", "/identity/search",
            "/identity/artists/{artist_id}", "/identity/recordings/{recording_id}/plot"} <= set(paths)


def test_no_index_yet_answers_null_identities(all_groups_data: Path, tmp_path: Path) -> None:
    path = copy_data(all_groups_data, tmp_path / "data")
    (path / f"{index.INDEX_NAME}.sqlite").unlink(missing_ok=True)
    with client(path) as api:
        entry = entries_of(get(api, CHART_LISTS[0] + "&include=identity"))[0]
        assert entry["identity"] == {"recording_id": None, "artist_ids": [], "match": "none"}
        get(api, "/identity/lookup", status=404, isrc="USUM79999999")


FACTS = {"previous_rank", "debut_date", "peak_rank", "peak_date", "periods_on_chart", "re_entry"}


def commit_edition(path: Path, target: str, chart_date: str, rows: list[tuple[int, str, str]]) -> None:
    """One edition of a chart, its rows stored under their name keys as a crawl stores them."""
    from chartgw.core.text import artist_key, title_key
    from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry
    from tests.fixtures import FIXED_NOW

    entries = [StoredEntry(rank, title_key(title), artist_key(artist), None, json.dumps(
        {"rank": rank, "title": title, "artist": artist, "artists": [artist]}).encode()) for rank, title, artist in rows]
    with SnapshotWriter(path / "korea-chart.sqlite") as writer:
        writer.commit([NewSnapshot(target, chart_date, None, FIXED_NOW, "test", entries)],
                      FetchLogRow(target, FIXED_NOW, 1, "ok", 200, len(entries)))


def test_facts_are_computed_from_the_charts_history(all_groups_data: Path, tmp_path: Path) -> None:
    path = copy_data(all_groups_data, tmp_path / "data")
    target = "portal-a/weekly"
    commit_edition(path, target, "2026-12-01", [(1, "Alpha", "A"), (2, "Beta", "B"), (3, "Gamma", "C")])
    commit_edition(path, target, "2026-12-08", [(1, "Beta", "B"), (2, "Alpha", "A"), (3, "Delta", "D")])
    commit_edition(path, target, "2026-12-15", [(1, "Gamma", "C"), (2, "Beta", "B"), (3, "Epsilon", "E")])
    with client(path) as api:
        body = get(api, "/korea-chart/portal-a/charts/weekly?include=facts")
        facts = {e["title"]: e["facts"] for e in entries_of(body)}
        assert facts["Gamma"] == {"previous_rank": None, "debut_date": "2026-12-01", "peak_rank": 1,
                                  "peak_date": "2026-12-15", "periods_on_chart": 2, "re_entry": True}
        assert facts["Beta"] == {"previous_rank": 1, "debut_date": "2026-12-01", "peak_rank": 1,
                                 "peak_date": "2026-12-08", "periods_on_chart": 3, "re_entry": False}
        assert facts["Epsilon"] == {"previous_rank": None, "debut_date": "2026-12-15", "peak_rank": 3,
                                    "peak_date": "2026-12-15", "periods_on_chart": 1, "re_entry": False}
        assert body["facts_disagreements"] == []
        both = get(api, "/korea-chart/portal-a/charts/weekly?include=identity,facts")
        assert all({"identity", "facts"} <= set(e) for e in entries_of(both))
        plain = get(api, "/korea-chart/portal-a/charts/weekly")
        assert "facts_disagreements" not in plain and all("facts" not in e for e in entries_of(plain))


def test_facts_keep_what_the_source_prints_and_say_where_it_disagrees(api: TestClient) -> None:
    body = get(api, "/ranking-charts/charts/hot-100/latest?include=facts&limit=20")
    entries = entries_of(body)
    assert all(set(e["facts"]) == FACTS for e in entries)
    for entry in entries:
        if entry.get("peak") is not None:
            assert entry["facts"]["peak_rank"] == entry["peak"]
        if entry.get("weeks_on_chart") is not None:
            assert entry["facts"]["periods_on_chart"] == entry["weeks_on_chart"]
    assert isinstance(body["facts_disagreements"], list)
    for item in body["facts_disagreements"]:
        assert set(item) == {"rank", "fact", "source", "computed"} and item["source"] != item["computed"]
    csv = get(api, "/ranking-charts/charts/hot-100/latest?include=facts&limit=3&format=csv")
    assert "facts" in csv.text.splitlines()[0].split(",")
