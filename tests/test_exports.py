"""Exports (issue 22): CSV and NDJSON of every chart and list endpoint, and whole-history SQLite files.

Formats: every group's chart and list routes are walked (each has an example request below that answers 200 over
the demo data), and each answer's CSV and NDJSON, asked by `format` and by Accept, must hold the JSON answer's rows
cell for cell; ETags and 304s hold per representation; a route that is no chart or list answers 406.
Exports: a file built from a group's data opens with sqlite3, passes `PRAGMA integrity_check` and holds exactly
the group's snapshots; built while a crawl commits it holds whole commits only; its URL's bytes never change; a
`kill -9` of `chartgw export` mid-build leaves no listed partial file.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from starlette.routing import compile_path
from starlette.testclient import TestClient

from chartgw.api.endpoints import Route
from chartgw.api.formats import negotiate
from chartgw.cli import crontab, main
from chartgw.core.clock import fixed
from chartgw.groups import GROUPS
from chartgw.http import exports
from chartgw.http.app import declared_routes
from chartgw.index import history as index
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry, group_db_path
from chartgw.store.records import KoreaEntry
from tests.fixtures import FIXED_NOW, KEY_HEADERS, child_env, client, data_dir, environment, group_data
from tests.fixtures import settings as run_settings

EXAMPLES = (
    "/streaming/countries", "/streaming/latest?limit=5", "/streaming/chart?chart_date=2026-11-17&limit=5",
    "/streaming/dates?country=global&chart_type=regional-daily", "/streaming/search?q=love&limit=3",
    "/streaming/history?artist=Taylor%20Swift&title=Cruel%20Summer",
    "/video/snapshots?limit=5", "/video/latest", "/video/pull.json", "/video/countries", "/video/charts",
    "/video/charts/top-songs/weekly/global/2026-11-19?limit=3", "/video/shorts/backfills",
    "/video/shorts/global/weekly/2026-10-29", "/video/kr/latest",
    "/digital-sales/snapshots?limit=5", "/digital-sales/latest", "/digital-sales/pull.json", "/digital-sales/combos",
    "/digital-sales/top-albums/au/latest?limit=5",
    "/korea-chart/sites", "/korea-chart/charts?site=portal-a&chart_type=realtime&limit=5",
    "/korea-chart/charts/compare?chart_type=realtime", "/korea-chart/portal-a/charts/daily?limit=5",
    "/recognition/charts", "/recognition/top-200/brazil/latest?limit=5", "/recognition/genre/australia/dance/latest?limit=5",
    "/recognition/viral/argentina/latest?limit=5", "/recognition/top-50/australia/adelaide/latest?limit=5",
    "/recognition/snapshots?limit=5", "/recognition/search?q=love",
    "/ranking-charts/charts", "/ranking-charts/charts/hot-100/snapshots", "/ranking-charts/charts/hot-100/dates",
    "/ranking-charts/charts/hot-100/latest?limit=5", "/ranking-charts/charts/hot-100/preset?preset=top-10",
    "/ranking-charts/charts/hot-100/weeks-ago/1?limit=5", "/ranking-charts/charts/hot-100/2025-11-22?limit=5",
    "/ranking-charts/search?q=love",
    "/uk-charts/charts", "/uk-charts/snapshots", "/uk-charts/search?q=love", "/uk-charts/singles/latest?limit=5",
    "/uk-charts/albums/2026-10-09?limit=5",
    "/social-trends/snapshots?limit=5", "/social-trends/locations", "/social-trends/trends/us",
    "/social-trends/trends/by-woeid/23424977",
    "/short-video/snapshots?limit=5", "/short-video/chart?code2=br", "/short-video/history?code2=br",
    "/dj-rankings/years", "/dj-rankings/search?q=al", "/dj-rankings/2025", "/dj-rankings/latest",
    "/retail-digital/snapshots?limit=5", "/retail-digital/latest", "/retail-digital/charts.json",
    "/retail-digital/charts", "/retail-digital/charts/de-digital-songs/latest",
    "/retail-music/top-songs/latest", "/retail-music/top-songs/snapshots",
    "/retail-physical/categories", "/retail-physical/best-sellers/latest", "/retail-physical/best-sellers/snapshots",
    "/retail-physical/products/B002GI0NO3/history",
    "/radio/stations?limit=5", "/radio/current", "/radio/history", "/radio/tracks", "/radio/summary",
    "/artist-history-api/artist-history?name=Taylor%20Swift&limit=20",
    "/artist-history-api/artist-history/coverage?name=Taylor%20Swift",
)
"""One request per chart or list route of a group's own (the platform's routes are added per group below)."""
PLATFORM = ("/{g}/fetch-logs?limit=5", "/{g}/exports", "/{g}/diff?target={target}")
NO_EXAMPLE: dict[tuple[str, str], str] = {}
"""Chart and list routes the walk cannot ask with a 200 (with the reason): none."""
csv.field_size_limit(sys.maxsize)  # /pull.json's raw payloads are JSON text in one cell


def _examples(data: Path) -> list[str]:
    urls = list(EXAMPLES)
    for group in GROUPS:
        path = data / f"{group.name}.sqlite"
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            found = db.execute("SELECT target FROM snapshots ORDER BY id DESC LIMIT 1").fetchone() if "snapshots" in tables else None
        for template in PLATFORM:
            if "{target}" not in template or found is not None:
                urls.append(template.format(g=group.name, target=found[0] if found else ""))
    return urls


def _route_of(url: str, routes: list[tuple[str, Route]]) -> tuple[str, Route] | None:
    path = url.split("?")[0]
    return next(((g, r) for g, r in routes if compile_path(f"/{g}{r.path}")[0].match(path)), None)


@pytest.fixture(scope="module")
def walked(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, list[str]]]:
    """The gateway over every group's demo data, with the artist-history index built from /korea-chart's (a copy:
    the shared data stays read-only); and the example requests."""
    path = group_data(all_groups_data, tmp_path_factory.mktemp("walk") / "data", "korea-chart")
    for group in GROUPS:
        if group.name not in ("korea-chart", "artist-history-api"):
            os.symlink(all_groups_data / f"{group.name}.sqlite", path / f"{group.name}.sqlite")
    with data_dir(path):
        index.index_all(now=fixed(FIXED_NOW), settings=run_settings())
    with client(path) as api:
        yield api, _examples(path)


def test_every_chart_and_list_route_has_an_example_that_answers(walked: tuple[TestClient, list[str]]) -> None:
    """The walk covers every route that declares rows, each with a request that answers 200 with rows."""
    _, urls = walked
    routes = [(g.name, r) for g, r in declared_routes(GROUPS) if r.method == "GET"]
    covered = {}
    for url in urls:
        found = _route_of(url, routes)
        assert found is not None and found[1].rows is not None, f"{url} is no chart or list route"
        covered[(found[0], found[1].path)] = url
    tabular = {(g, r.path) for g, r in routes if r.rows is not None}
    assert tabular - set(covered) == set(NO_EXAMPLE)
    assert len(tabular) > 100


def _rows(body: dict[str, Any], route: Route) -> list[Any]:
    names = (route.rows,) if isinstance(route.rows, str) else route.rows or ()
    field = next(name for name in names if name in body)
    return body[field] or []


def _cell_holds(cell: str, value: Any) -> bool:
    if value is None:
        return cell == ""
    if isinstance(value, str):
        return cell == value
    return bool(json.loads(cell) == value)


def test_csv_and_ndjson_hold_the_json_answers_rows(walked: tuple[TestClient, list[str]]) -> None:
    api, urls = walked
    routes = [(g.name, r) for g, r in declared_routes(GROUPS) if r.method == "GET"]
    nonempty = 0
    for url in urls:
        found = _route_of(url, routes)
        assert found is not None
        answer = api.get(url, headers=KEY_HEADERS)
        assert answer.status_code == 200, (url, answer.text[:300])
        rows = _rows(answer.json(), found[1])
        nonempty += bool(rows)
        joiner = "&" if "?" in url else "?"
        for asked, headers in ((f"{url}{joiner}format=csv", {}), (url, {"Accept": "text/csv"})):
            table = api.get(asked, headers={**KEY_HEADERS, **headers})
            assert table.status_code == 200 and table.headers["content-type"] == "text/csv; charset=utf-8", asked
            header, *lines = list(csv.reader(io.StringIO(table.content.decode())))
            assert len(lines) == len(rows), url
            for line, row in zip(lines, rows, strict=True):
                if isinstance(row, dict):
                    assert set(row) <= set(header), url
                    assert all(_cell_holds(cell, row.get(name)) for name, cell in zip(header, line, strict=True)), (url, line)
                else:
                    assert len(header) == 1 and _cell_holds(line[0], row), (url, line)
        for asked, headers in ((f"{url}{joiner}format=ndjson", {}), (url, {"Accept": "application/x-ndjson"})):
            lines_ = api.get(asked, headers={**KEY_HEADERS, **headers})
            assert lines_.status_code == 200 and lines_.headers["content-type"] == "application/x-ndjson", asked
            assert [json.loads(line) for line in lines_.text.splitlines()] == rows, url
    assert nonempty >= len(urls) - 20  # nearly every example has rows (the export listings of unbuilt groups do not)


def test_csv_columns_are_the_entry_types_fields_in_order(walked: tuple[TestClient, list[str]]) -> None:
    api, _ = walked
    table = api.get("/korea-chart/portal-a/charts/realtime?limit=3&format=csv", headers=KEY_HEADERS)
    header = next(csv.reader(io.StringIO(table.text)))
    assert header == [f.encode_name for f in msgspec.structs.fields(KoreaEntry)]
    dates = api.get("/streaming/dates?country=global&chart_type=regional-daily&format=csv", headers=KEY_HEADERS).text
    assert dates.splitlines()[0] == "dates" and dates.splitlines()[1] == api.get(
        "/streaming/dates?country=global&chart_type=regional-daily", headers=KEY_HEADERS).json()["dates"][0]
    assert table.text.endswith("\r\n") and '"[""' in table.text  # RFC 4180 lines; a nested list is its JSON text


def test_each_representation_has_its_own_etag_and_304(walked: tuple[TestClient, list[str]]) -> None:
    api, _ = walked
    url = "/uk-charts/singles/latest?limit=5"
    json_ = api.get(url, headers=KEY_HEADERS)
    csv_ = api.get(url + "&format=csv", headers=KEY_HEADERS)
    csv_by_accept = api.get(url, headers={**KEY_HEADERS, "Accept": "text/csv"})
    ndjson = api.get(url, headers={**KEY_HEADERS, "Accept": "application/x-ndjson"})
    tags = [r.headers["etag"] for r in (json_, csv_, ndjson)]
    assert len(set(tags)) == 3 and csv_by_accept.headers["etag"] == csv_.headers["etag"]
    assert json_.headers["vary"] == csv_by_accept.headers["vary"] == "accept-encoding, accept"
    assert csv_.headers["vary"] == "accept-encoding"  # the URL names it: Accept does not choose
    for answer, asked, headers in ((csv_, url + "&format=csv", {}), (ndjson, url, {"Accept": "application/x-ndjson"}),
                                   (json_, url, {})):
        same = api.get(asked, headers={**KEY_HEADERS, **headers, "If-None-Match": answer.headers["etag"]})
        assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == answer.headers["etag"]
    other = api.get(url + "&format=csv", headers={**KEY_HEADERS, "If-None-Match": json_.headers["etag"]})
    assert other.status_code == 200 and other.content == csv_.content  # the JSON tag is not the CSV body's
    zipped = api.get(url + "&format=ndjson", headers={**KEY_HEADERS, "Accept-Encoding": "gzip"})
    assert zipped.content == ndjson.content  # gzip, when worth it, per representation too


def test_what_is_no_chart_or_list_answers_406_to_csv_and_ndjson(walked: tuple[TestClient, list[str]]) -> None:
    api, _ = walked
    for url in ("/korea-chart/health", "/korea-chart/", "/korea-chart/openapi.json", "/retail-music/top-songs/rank/1",
                "/dj-rankings/djs/alok"):
        for asked, headers in ((url + "?format=csv", {}), (url + "?format=ndjson", {}), (url, {"Accept": "text/csv"}),
                               (url, {"Accept": "application/x-ndjson"})):
            refused = api.get(asked, headers={**KEY_HEADERS, **headers})
            assert refused.status_code == 406 and list(refused.json()) == ["detail"], (asked, headers, refused.text[:200])
        for asked, headers in ((url + "?format=json", {}), (url, {"Accept": "*/*"}), (url, {"Accept": "text/csv, */*;q=0.1"}),
                               (url, {"Accept": "text/html"})):
            answer = api.get(asked, headers={**KEY_HEADERS, **headers})
            assert answer.status_code in (200, 404) and answer.headers["content-type"] == "application/json", asked
    bad = api.get("/korea-chart/portal-a/charts/realtime?format=xml", headers=KEY_HEADERS)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "format"]
    none = api.get("/korea-chart/portal-a/charts/realtime", headers={**KEY_HEADERS, "Accept": "text/csv;q=0"})
    assert none.status_code == 406


def test_accept_negotiation_weighs_and_prefers_exact_types() -> None:
    offered = (b"application/json", b"text/csv; charset=utf-8", b"application/x-ndjson")
    assert negotiate(b"text/csv", offered) == 1
    assert negotiate(b"text/csv, */*", offered) == 1  # exact beats a wildcard of the same weight
    assert negotiate(b"application/x-ndjson;q=0.5, application/json", offered) == 0
    assert negotiate(b"text/csv, application/x-ndjson", offered) == 1  # then the one listed first
    assert negotiate(b"application/x-ndjson, text/csv", offered) == 2
    assert negotiate(b"text/*;q=0.9, application/json;q=0.8", offered) == 1
    assert negotiate(b"text/csv;q=0, image/png", offered) is None
    assert negotiate(b"text/csv;q=junk, */*;q=0.1", offered) == 0
    assert negotiate(b"text/csv", (b"application/json",)) is None


def test_openapi_documents_declare_format_and_the_row_media_types(walked: tuple[TestClient, list[str]]) -> None:
    api, _ = walked
    document = api.get("/korea-chart/openapi.json").json()
    chart = document["paths"]["/charts"]["get"]
    fmt = next(p for p in chart["parameters"] if p["name"] == "format")
    assert fmt["schema"]["enum"] == ["json", "csv", "ndjson"] and fmt["in"] == "query" and not fmt["required"]
    assert set(chart["responses"]["200"]["content"]) == {"application/json", "text/csv", "application/x-ndjson"}
    health = document["paths"]["/health"]["get"]
    assert "format" not in [p["name"] for p in health["parameters"]] and "406" in health["responses"]
    assert set(health["responses"]["200"]["content"]) == {"application/json"}
    joined = api.get("/openapi.json").json()
    assert {"/exports", "/korea-chart/exports", "/korea-chart/exports/{name}"} <= set(joined["paths"])


# --- whole-history exports ------------------------------------------------------------------------------


@pytest.fixture
def korea(korea_data: Path, tmp_path: Path) -> Iterator[Path]:
    """A private copy of /korea-chart's demo data, in force as the data folder."""
    path = group_data(korea_data, tmp_path / "data", "korea-chart")
    with data_dir(path):
        yield path


def _snapshot_ids(path: Path) -> list[int]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return [row[0] for row in db.execute("SELECT id FROM snapshots ORDER BY id")]


def _check_whole(path: Path) -> sqlite3.Connection:
    """The export at `path`, opened: its bytes are its name's SHA-256, it passes integrity_check, and it is a
    rollback-journal file (opened without -wal files)."""
    assert hashlib.sha256(path.read_bytes()).hexdigest() == path.stem
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    return db


def _commit(path: Path, chart_date: str, n: int = 3) -> None:
    """One more snapshot of one chart, as a crawl commits it."""
    entries = [StoredEntry(rank, f"title {rank}", f"artist {rank}", None, b'{"rank":%d}' % rank) for rank in range(1, n + 1)]
    with SnapshotWriter(path) as writer:
        writer.commit([NewSnapshot("portal-a/realtime", chart_date, 15, FIXED_NOW, "test", entries)],
                      FetchLogRow("portal-a/realtime", FIXED_NOW, 1, "ok", 200, n))


def test_an_export_opens_whole_and_holds_exactly_the_groups_snapshots(korea: Path) -> None:
    info = exports.build("korea-chart", run_settings(), lambda: FIXED_NOW)
    assert info is not None and info.built_at == "2026-11-20T05:30:00Z" and info.group == "korea-chart" and info.url == f"/korea-chart/exports/{info.sha256}.sqlite"
    path = exports.exports_dir(run_settings()) / "korea-chart" / f"{info.sha256}.sqlite"
    source = group_db_path("korea-chart", settings=run_settings())
    with _check_whole(path) as db:
        assert [row[0] for row in db.execute("SELECT id FROM snapshots ORDER BY id")] == _snapshot_ids(source)
        assert db.execute("SELECT count(*) FROM entries").fetchone() == sqlite3.connect(source).execute(
            "SELECT count(*) FROM entries").fetchone()
        first, last, count = db.execute("SELECT min(chart_date), max(chart_date), count(*) FROM snapshots").fetchone()
    assert (info.first_chart_date, info.last_chart_date, info.snapshots, info.size) == (first, last, count, path.stat().st_size)
    assert exports.build("korea-chart", run_settings(), lambda: FIXED_NOW) == info  # nothing changed: the same bytes, the same export
    assert [p.name for p in path.parent.glob("*.sqlite")] == [path.name]
    assert exports.build("streaming", run_settings()) is None  # no file: nothing to export


def test_an_export_built_while_a_crawl_commits_holds_whole_commits(korea: Path) -> None:
    source = group_db_path("korea-chart", settings=run_settings())
    stop = threading.Event()
    commits = [0]

    def crawl() -> None:
        day = 0
        while not stop.is_set():
            _commit(source, f"2026-12-{day % 28 + 1:02d}", n=50)
            commits[0] += 1
            day += 1

    def build_after_a_commit() -> exports.ExportInfo | None:
        seen, deadline = commits[0], time.monotonic() + 60
        while commits[0] == seen and time.monotonic() < deadline:  # a loaded box may starve the crawl thread
            time.sleep(0.01)
        return exports.build("korea-chart", run_settings())  # while the crawl goes on committing

    thread = threading.Thread(target=crawl)
    thread.start()
    try:
        built = [build_after_a_commit() for _ in range(4)]
    finally:
        stop.set()
        thread.join()
    assert len({info.sha256 for info in built if info}) >= 2  # commits landed between builds
    committed = _snapshot_ids(source)
    for info in built:
        assert info is not None
        path = exports.exports_dir(run_settings()) / "korea-chart" / f"{info.sha256}.sqlite"
        if not path.exists():
            continue  # pruned (CHARTGW_EXPORTS_KEEP)
        with _check_whole(path) as db:
            ids = [row[0] for row in db.execute("SELECT id FROM snapshots ORDER BY id")]
            assert ids == [i for i in committed if i <= ids[-1]]  # a prefix of the commits, none half
            assert db.execute("SELECT count(*) FROM snapshots s WHERE row_count != (SELECT count(*) FROM entries e"
                              " WHERE e.snapshot_id = s.id)").fetchone() == (0,)
            assert db.execute("SELECT count(*) FROM snapshots WHERE id NOT IN (SELECT snapshot_id FROM changes)"
                              " AND source = 'test'").fetchone() == (0,)


def test_listing_builds_on_request_and_the_url_never_changes_content(korea: Path) -> None:
    with environment({"CHARTGW_EXPORTS_INTERVAL_SECONDS": "0", "CHARTGW_EXPORTS_KEEP": "2"}), client(korea) as api:
        first = _listed_after_build(api)
        url = first["url"]
        body = api.get(url, headers=KEY_HEADERS)
        assert body.status_code == 200 and hashlib.sha256(body.content).hexdigest() == first["sha256"]
        assert body.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert body.headers["etag"] == f'"{first["sha256"]}"' and body.headers["content-type"] == "application/vnd.sqlite3"
        assert api.get(url).status_code == api.get("/exports").status_code == 401  # keyed
        again = api.get("/korea-chart/exports", headers=KEY_HEADERS).json()
        assert again["building"] is False and again["exports"] == [first]  # the data did not change: no build
        _commit(group_db_path("korea-chart", settings=run_settings()), "2026-12-01")
        time.sleep(1.1)  # the version is re-read at most once a second (FRESHNESS_SECONDS)
        second = _listed_after_build(api, count=2)
        assert second["sha256"] != first["sha256"] and second["snapshots"] == first["snapshots"] + 1
        assert api.get(url, headers=KEY_HEADERS).content == body.content  # the old URL: its bytes, still
        ranged = api.get(second["url"], headers={**KEY_HEADERS, "Range": "bytes=0-15"})
        assert ranged.status_code == 206 and ranged.content == b"SQLite format 3\x00"
        unsatisfiable = api.get(second["url"], headers={**KEY_HEADERS, "Range": f"bytes={second['size']}-"})
        assert unsatisfiable.status_code == 416 and unsatisfiable.json() == {"detail": "Range Not Satisfiable"}
        assert api.get(second["url"], headers={**KEY_HEADERS, "Range": "lines=1-2"}).status_code == 200  # ignored
        cached = api.get(url, headers={**KEY_HEADERS, "If-None-Match": f'"{first["sha256"]}"'})
        assert cached.status_code == 304 and cached.content == b""
        everything = api.get("/exports", headers=KEY_HEADERS).json()
        assert everything["exports"] == api.get("/korea-chart/exports", headers=KEY_HEADERS).json()["exports"]
        missing = api.get("/korea-chart/exports/" + "0" * 64 + ".sqlite", headers=KEY_HEADERS)
        assert missing.status_code == 404
        assert api.get("/korea-chart/exports/../korea-chart.sqlite", headers=KEY_HEADERS).status_code in (404, 422)
        assert api.get("/korea-chart/exports/x.sqlite", headers=KEY_HEADERS).status_code == 422
    with _check_whole(exports.exports_dir(run_settings()) / "korea-chart" / f"{second['sha256']}.sqlite") as db:
        assert db.execute("SELECT count(*) FROM snapshots").fetchone() == (second["snapshots"],)


def _listed_after_build(api: TestClient, count: int = 1) -> dict[str, Any]:
    """The newest export, once the build the listing started is whole."""
    for _ in range(200):
        listing = api.get("/korea-chart/exports", headers=KEY_HEADERS).json()
        if not listing["building"] and listing["count"] == count:
            newest: dict[str, Any] = listing["exports"][0]
            return newest
        time.sleep(0.05)
    raise AssertionError(f"no export built: {listing}")


def test_old_exports_are_pruned_and_their_url_is_a_404(korea: Path) -> None:
    with environment({"CHARTGW_EXPORTS_KEEP": "1"}):
        old = exports.build("korea-chart", run_settings())
        _commit(group_db_path("korea-chart", settings=run_settings()), "2026-12-02")
        new = exports.build("korea-chart", run_settings())
        assert old is not None and new is not None and exports.exports_of("korea-chart", run_settings()) == [new]
        with client(korea) as api:
            assert api.get(old.url, headers=KEY_HEADERS).status_code == 404


def test_no_build_on_request_within_the_interval_or_when_off(korea: Path) -> None:
    """The data changed after the newest export: a listing 10 minutes after it was built (the app's clock against the
    file's time) builds nothing with an interval of an hour, nor ever with `off`; a day after, it builds."""
    info = exports.build("korea-chart", run_settings())
    assert info is not None
    built = datetime.strptime(info.built_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    _commit(group_db_path("korea-chart", settings=run_settings()), "2026-12-03")
    for interval, later in (("3600", timedelta(minutes=10)), ("off", timedelta(days=1))):
        with environment({"CHARTGW_EXPORTS_INTERVAL_SECONDS": interval}), client(korea, now=built + later) as api:
            listing = api.get("/korea-chart/exports", headers=KEY_HEADERS).json()
            assert listing["building"] is False and listing["count"] == 1, interval
    with environment({"CHARTGW_EXPORTS_INTERVAL_SECONDS": "3600"}), client(korea, now=built + timedelta(days=1)) as api:
        assert api.get("/korea-chart/exports", headers=KEY_HEADERS).json()["building"] is True
        assert _listed_after_build(api, count=2)["snapshots"] == info.snapshots + 1


def test_a_kill_during_a_build_leaves_no_listed_partial_file(korea: Path) -> None:
    """`chartgw export` killed (-9) while its temp file is being written: the listing shows only whole exports
    (each its name's bytes, integrity ok), and the next build completes and deletes the leftover."""
    source = group_db_path("korea-chart", settings=run_settings())
    with sqlite3.connect(source) as db:  # about 40 MB more, so a build takes long enough to be caught in it
        db.execute("CREATE TABLE padding (blob BLOB)")
        db.executemany("INSERT INTO padding VALUES (randomblob(1000000))", [()] * 40)
    folder = exports.exports_dir(run_settings()) / "korea-chart"
    command = [sys.executable, "-m", "chartgw", "export", "korea-chart"]
    env = child_env(DATA_DIR=str(korea))
    kills = left = 0
    for round_ in range(3):
        before = set(folder.glob(".building-*")) if folder.is_dir() else set()
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            if folder.is_dir() and set(folder.glob(".building-*")) - before:  # this build's temp file: mid-build
                process.send_signal(signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.001)
        process.wait(30)
        left += bool(set(folder.glob(".building-*")) - before)
        listed = exports.exports_of("korea-chart", run_settings())
        for info in listed:
            _check_whole(folder / f"{info.sha256}.sqlite").close()
        with client(korea) as api:
            assert api.get("/korea-chart/exports", headers=KEY_HEADERS).json()["exports"] == [
                msgspec.to_builtins(info) for info in listed]
        _commit(source, f"2026-12-{10 + round_:02d}")  # each round's export a new one
    assert kills >= 2 and left >= 1, f"the builds finished before they could be killed ({kills} kills, {left} left)"
    last = exports.build("korea-chart", run_settings())
    assert last is not None and not list(folder.glob(".building-*"))
    _check_whole(folder / f"{last.sha256}.sqlite").close()


def test_the_export_command_and_its_cron_line(korea: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "korea-chart", "--json"], run_settings()) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["group"] == "korea-chart" and printed["export"]["url"].startswith("/korea-chart/exports/")
    assert main(["export", "nope"], run_settings()) == 2 and "no group named nope" in capsys.readouterr().err
    assert main(["export"], run_settings()) == 2
    assert main(["export", "streaming"], run_settings()) == 0 and "no data file yet" in capsys.readouterr().err
    line = "@daily CHARTGW_DATA_DIR=/var/lib/chartgw /opt/chartgw/bin/chartgw export --all >> /var/lib/chartgw/export.log 2>&1"
    assert line in crontab(("/opt/chartgw/bin/chartgw",), Path("/var/lib/chartgw")).splitlines()
