"""/artist-history-api and its index: built over every group's demo data (a private copy of `all_groups_data`)."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import closing
from datetime import timedelta
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from chartgw.api.group import EntryMapping
from chartgw.core.clock import fixed
from chartgw.crawl.context import Context
from chartgw.demo import artist_history as ah_demo
from chartgw.groups import GROUPS
from chartgw.index import artist_history as ah
from chartgw.index import history as index
from chartgw.index import source
from chartgw.index.artist_history import query
from chartgw.index.artist_history.plot import PLOT_MAX_LINES
from chartgw.index.sums import ArtistSums
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry
from chartgw.store import tables as store_tables
from tests import fixtures
from tests.fixtures import FIXED_NOW, KEY_HEADERS, client, copy_data, data_dir, environment
from tests.fixtures import settings as run_settings

pytestmark = pytest.mark.heavy

API = "/artist-history-api"
HISTORY = f"{API}/artist-history"
COVERAGE = f"{API}/artist-history/coverage"
PLOT = f"{API}/artist-history/plot"
SVG = "http://www.w3.org/2000/svg"


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    """What `chartgw.groups` does once the group is registered: tell the index every group."""
    ah.register_sources(GROUPS)


def build_index(path: Path) -> list[index.IndexResult]:
    with data_dir(path):
        return index.index_all(now=fixed(FIXED_NOW), settings=run_settings())


def add_snapshot(path: Path, group: str, target: str, chart_date: str, chart_hour: int | None,
                 records: list[dict[str, Any]]) -> int:
    """Commit one snapshot into `group`'s file the way a crawl does."""
    entries = [StoredEntry(r["rank"], "t", "a", None, json.dumps(r, ensure_ascii=False).encode()) for r in records]
    with SnapshotWriter(path / f"{group}.sqlite") as writer:
        return writer.commit([NewSnapshot(target, chart_date, chart_hour, FIXED_NOW, "test", entries)],
                             FetchLogRow(target, FIXED_NOW, 1, "ok", 200, len(entries)))[0]


ROW_VIEW = ("SELECT c.source, c.chart, c.market, a.chart_date, t.track_key, a.rank, a.hours, a.hour_mask, a.snapshot_id,"
            " v.title, v.artist, v.credits, " + ", ".join(f"v.{c}" for c in index.ID_COLUMNS)
            + " FROM appearances a JOIN charts c ON c.id = a.chart_id JOIN tracks t ON t.id = a.track_id"
            " JOIN variants v ON v.id = a.variant_id")
"""A row with its chart, track and variant written out (their ids depend on the order things were met)."""


def table_rows(path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The index's rows without their row ids, and the artist keys by natural row key: what a rebuild must equal.
    The key table's copies of a row's chart, track and rank must be the row's."""
    db = sqlite3.connect(path / "artist-history-api.sqlite")
    try:
        rows = sorted(db.execute(ROW_VIEW).fetchall(), key=repr)
        keys = sorted(db.execute(
            "SELECT r.key, c.source, c.chart, c.market, a.chart_date, t.track_key, k.rank FROM appearance_artists k"
            " JOIN artists r ON r.id = k.artist_id"
            " JOIN appearances a ON a.chart_id = k.chart_id AND a.chart_date = k.chart_date AND a.track_id = k.track_id"
            " JOIN charts c ON c.id = a.chart_id JOIN tracks t ON t.id = a.track_id"
            " WHERE k.row_id = a.id AND k.rank = a.rank").fetchall())
        variant_keys = {(c, d, t): index.credit_keys(credits) for c, d, t, credits in db.execute(
            "SELECT a.chart_id, a.chart_date, a.track_id, v.credits FROM appearances a JOIN variants v"
            " ON v.id = a.variant_id")}
        held: dict[tuple[Any, ...], list[str]] = {}
        for key, c, d, t in db.execute("SELECT r.key, k.chart_id, k.chart_date, k.track_id FROM appearance_artists k"
                                       " JOIN artists r ON r.id = k.artist_id"):
            held.setdefault((c, d, t), []).append(key)
        assert {k: sorted(v) for k, v in variant_keys.items()} == {k: sorted(v) for k, v in held.items()}
        summed = sorted(db.execute("SELECT artist_id, chart_id, track_id, count(*), min(chart_date), max(chart_date),"
                                   " min(rank) FROM appearance_artists GROUP BY artist_id, chart_id, track_id").fetchall())
        assert sorted(db.execute("SELECT * FROM artist_tracks").fetchall()) == summed  # the sums coverage reads
        assert len(keys) == db.execute("SELECT count(*) FROM appearance_artists").fetchone()[0]
        counted = dict(db.execute("SELECT c.source, count(*) FROM appearances a JOIN charts c ON c.id = a.chart_id"
                                  " GROUP BY c.source").fetchall())
        assert counted == {s: n for s, n in db.execute("SELECT source, rows FROM sources") if n}
        return rows, keys
    finally:
        db.close()


@pytest.fixture(scope="module")
def indexed(indexed_demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo data with the index built over it. Read-only (the `api` fixture serves it): copy it to change it."""
    return copy_data(indexed_demo, tmp_path_factory.mktemp("ah") / "data")


@pytest.fixture(scope="module")
def indexed_rows(indexed: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """`table_rows` of `indexed`: what any build of the demo data, read in this process, must give."""
    return table_rows(indexed)


@pytest.fixture(scope="module")
def api(indexed: Path) -> Iterator[TestClient]:
    with client(indexed, [ah.GROUP]) as test_client:
        yield test_client


get = partial(fixtures.get, as_json=True)
"""The module's GET: `tests.fixtures.get` with its options."""


def errors(api: TestClient, url: str, **params: Any) -> list[dict[str, Any]]:
    response = api.get(url, params=params, headers=KEY_HEADERS)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    for item in detail:
        assert set(item) >= {"type", "loc", "msg"} and item["loc"][0] == "query"
    return detail


# --- credits --------------------------------------------------------------------------------------

def test_credited_names_split_every_credit() -> None:
    assert index.credited_names("A feat. B", ["A feat. B"]) == ["A", "B"]
    assert index.credited_names("A & B x C", ["A & B x C"]) == ["A", "B", "C"]
    assert index.credited_names("A with B, C", ["A with B, C"]) == ["A", "B", "C"]
    assert index.credited_names("A", ["A"], "Song (feat. j-hope of BTS)") == ["A", "j-hope"]
    assert index.credited_names("싹쓰리 (유두래곤, 린다G)", ["싹쓰리 (유두래곤, 린다G)"]) == ["싹쓰리 (유두래곤, 린다G)"]
    assert index.credited_names("Lil Nas X", ["Lil Nas X"]) == ["Lil Nas X"]
    assert index.name_keys("아이유(IU)") == {"아이유", "iu"}


# --- the index ------------------------------------------------------------------------------------

def test_every_group_with_a_mapping_is_indexed(indexed: Path) -> None:
    db = sqlite3.connect(indexed / "artist-history-api.sqlite")
    sources = dict(db.execute("SELECT source, last_snapshot_id FROM sources").fetchall())
    counted = dict(db.execute("SELECT c.source, count(*) FROM appearances a JOIN charts c ON c.id = a.chart_id"
                              " GROUP BY c.source").fetchall())
    db.close()
    mapped = {g.name for g in GROUPS if g.entries is not None}
    assert set(sources) == mapped
    assert "social-trends" not in counted
    assert all(counted.get(name, 0) > 0 for name in mapped)


def test_incremental_rebuild_and_sub_daily_folding(all_groups_data: Path, tmp_path: Path) -> None:
    path = copy_data(all_groups_data, tmp_path / "data")
    first = build_index(path)
    assert sum(r.snapshots for r in first) > 0
    assert all(r.snapshots == 0 for r in build_index(path))  # idempotent
    before, _ = table_rows(path)
    record = {"rank": 3, "title": "Brand New Song", "artist": "아이유(IU)", "artists": ["아이유(IU)"]}
    add_snapshot(path, "korea-chart", "portal-a/realtime", "2026-11-20", 15, [record])
    add_snapshot(path, "korea-chart", "portal-a/realtime", "2026-11-20", 16, [{**record, "rank": 1}])
    add_snapshot(path, "korea-chart", "portal-a/realtime", "2026-11-20", 16, [{**record, "rank": 2}])  # same hour again
    again = {r.source: r for r in build_index(path)}
    assert again["korea-chart"].snapshots == 3 and again["korea-chart"].rows == 1  # one row, folded in one batch
    assert sum(r.snapshots for r in again.values()) == 3
    incremental = table_rows(path)
    after, _ = incremental
    assert len(after) == len(before) + 1  # three hourly snapshots fold to one row for the day
    db = sqlite3.connect(path / "artist-history-api.sqlite")
    rank, hours = db.execute("SELECT a.rank, a.hours FROM appearances a JOIN variants v ON v.id = a.variant_id"
                             " WHERE v.title = 'Brand New Song'").fetchone()
    db.close()
    assert (rank, hours) == (1, 2)  # best rank of the day, two distinct hours
    with data_dir(path):
        index.rebuild(now=fixed(FIXED_NOW), settings=run_settings())
    assert table_rows(path) == incremental


def test_a_second_reader_process_builds_the_same_rows(all_groups_data: Path, tmp_path: Path, indexed_rows: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A large catch-up reads its batches in other processes (`Prefetch`: two taking turns for a group with
    sub-daily charts); forced here on small batches, it gives the rows the in-process reading gives (`indexed`, the
    same data built in this process)."""
    path = copy_data(all_groups_data, tmp_path / "data")
    started: list[str] = []
    readers: dict[str, int] = {}
    real = index.Prefetch.start

    def counted(*args: Any, **kwargs: Any) -> Any:
        reader = real(*args, **kwargs)
        if reader is not None:
            started.append(str(args[1]))
            readers[Path(args[1]).stem] = len(reader.processes)
        return reader

    monkeypatch.setattr(index.Prefetch, "start", counted)
    monkeypatch.setattr(source, "PREFETCH_BATCHES", 2)
    with data_dir(path):
        results = index.index_all(now=fixed(FIXED_NOW), batch=10, settings=run_settings())
    assert all(r.error is None for r in results) and len(started) >= 3  # several groups read by a second process
    assert readers["korea-chart"] == source.SUB_DAILY_READERS == 2 and readers["streaming"] == 1
    assert table_rows(path) == indexed_rows


@pytest.mark.parametrize("kept", [source._MADE_MAX, 1])
def test_entries_alike_are_made_once_per_kind_of_target(tmp_path: Path, kept: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader keeps what each record's fields were made into (`source._MADE`), by what else than the record its
    entry depends on: the same record on two charts takes each chart's market, its ids only where the mapping reads
    them, its platform id only on that platform's charts, and none on a target of no chart entries; a field holding
    an array in an array is read, not kept.
    Each row is what reading its record alone makes (with a memory of one entry, forgotten at every entry, too)."""
    monkeypatch.setattr(source, "_MADE_MAX", kept)
    mapping = EntryMapping(market="target:1", ids={"isrc": "isrc"}, ids_targets=("songs/*",),
                           platform_ids=(("songs/kr", "melon_song", "song_id"),), skip_targets=("catalogue",))
    record = {"rank": 1, "title": "Love wins all", "artist": "IU", "artists": ["IU"], "isrc": "KRA382400001",
              "song_id": 37145732}
    nested = {**record, "rank": 2, "title": "Odd", "artists": [["IU"], "V"]}
    targets = ("songs/kr", "songs/jp", "albums/kr", "songs/kr")
    for target in targets:
        add_snapshot(tmp_path, "g", target, "2026-11-20", None, [record, nested, {"rank": 3, "artist": ""}])
    add_snapshot(tmp_path, "g", "catalogue", "2026-11-20", None, [record])  # no chart entries: no row
    with closing(sqlite3.connect(tmp_path / "g.sqlite")) as src:
        pending = src.execute(store_tables.SNAPSHOTS_AFTER.sql, (0, 10)).fetchall()
        rows = source.read_batch(src, mapping, pending)
    ids_of = source._ids_maker(mapping)
    expected = []
    for target in targets[:3]:
        for one in (record, nested):
            entry = mapping.read(target, json.loads(json.dumps(one)))
            assert entry is not None
            key = (entry.artist, entry.title, tuple(entry.artists), ids_of(entry.ids) if entry.ids else source._NO_IDS)
            expected.append((target, entry.market, key))
    assert [(chart, market, row[4][source.KEY]) for chart, market, _, row in rows] == expected
    assert [row[3] for *_, row in rows] == [pending[3][0]] * 2 + [pending[1][0]] * 2 + [pending[2][0]] * 2
    keys = [key for *_, key in expected]
    assert keys[0][3] != keys[2][3] != keys[4][3] and keys[4][3] == source._NO_IDS  # kr: isrc and Melon; jp: isrc
    assert keys[1][2] == ("V",)  # the nested array is not an artist


def test_a_readers_backlog_is_bounded_in_bytes() -> None:
    """A reader keeps encoded batches for the writer up to a number of bytes (one at least, however large); past it,
    it waits for the writer to take one; once the writer stopped reading, it stops. (No timed wait: a test must
    pass under faketime, where a timed wait on a lock may never end.)"""
    outbox = source._Outbox(10)
    outbox.put(b"x" * 8)
    assert outbox.full(8) and not outbox.full(2)  # over the budget: a put waits
    waiting = threading.Thread(target=outbox.put, args=(b"y" * 8,))
    waiting.start()
    assert outbox.get() == b"x" * 8  # room: the waiting put goes on
    assert outbox.get() == b"y" * 8
    waiting.join()
    assert not outbox.full(50)  # nothing waits: a frame of any size is taken
    outbox.close()
    with pytest.raises(BrokenPipeError):
        outbox.put(b"z")


def test_a_killed_batch_leaves_the_index_as_it_was(all_groups_data: Path, tmp_path: Path, indexed_rows: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = copy_data(all_groups_data, tmp_path / "data")
    real = index.write_batch
    calls = {"n": 0}

    def dying(*args: Any) -> int:
        calls["n"] += 1
        written = real(*args)
        if calls["n"] == 4:
            raise KeyboardInterrupt  # as a kill after a batch wrote its rows, before it committed
        return written

    monkeypatch.setattr(index, "write_batch", dying)
    monkeypatch.setattr(index, "BATCH_SNAPSHOTS", 25)
    with pytest.raises(KeyboardInterrupt), data_dir(path):
        index.index_all(now=fixed(FIXED_NOW), batch=25, settings=run_settings())
    db = sqlite3.connect(path / "artist-history-api.sqlite")
    done = dict(db.execute("SELECT source, last_snapshot_id FROM sources").fetchall())
    partial = dict(db.execute("SELECT c.source, max(a.snapshot_id) FROM appearances a JOIN charts c"
                              " ON c.id = a.chart_id GROUP BY c.source").fetchall())
    db.close()
    assert done and set(done) == set(partial)  # the interrupted batch left nothing behind
    assert all(partial[s] <= done[s] for s in done)  # nothing past the committed marks
    db = sqlite3.connect(path / "artist-history-api.sqlite")
    assert db.execute("SELECT value FROM meta WHERE name = 'artist_tracks'").fetchone() == ("stale",)  # summed later
    db.close()
    monkeypatch.setattr(index, "write_batch", real)
    build_index(path)  # resumes
    assert table_rows(path) == indexed_rows  # as if never killed: the rows of a build in one go


SUMMED = ("SELECT artist_id, chart_id, track_id, count(*), min(chart_date), max(chart_date), min(rank)"
          " FROM appearance_artists GROUP BY artist_id, chart_id, track_id")
SUMS_STATE = "SELECT value FROM meta WHERE name = 'artist_tracks'"


def test_artist_sums_made_aside_are_the_sums(indexed: Path, tmp_path: Path) -> None:
    """A large run sums `artist_tracks` in another process, into a scratch file copied in at its end: the sums are
    those of the rows; a process that fails raises its error and leaves the sums stale; the scratch files of killed
    indexers go, another's running one stays."""
    file = tmp_path / f"{index.INDEX_NAME}.sqlite"
    with closing(sqlite3.connect(indexed / file.name)) as built, closing(sqlite3.connect(file)) as copy:
        built.backup(copy)
    dead, alive = (tmp_path / f"{file.name}.sums-{pid}" for pid in (2**22 + 1, os.getppid()))  # past any pid; a live one
    dead.write_bytes(b"")
    alive.write_bytes(b"")
    db = index.open_index(file)
    try:
        db.execute("DELETE FROM artist_tracks")
        db.execute("UPDATE meta SET value = 'stale' WHERE name = 'artist_tracks'")
        sums = ArtistSums(file, aside=True)
        try:
            sums.write(db)
        finally:
            sums.close()
        assert sorted(db.execute("SELECT * FROM artist_tracks").fetchall()) == sorted(db.execute(SUMMED).fetchall())
        assert db.execute(SUMS_STATE).fetchone() == ("ok",) and db.execute("SELECT count(*) FROM artist_tracks").fetchone()[0]
        assert not dead.exists() and alive.exists() and not any(path.exists() for path, _ in sums.parts)

        # In parts, as a bulk build makes them: the charts of the groups written so far, then the rest.
        charts = db.execute("SELECT count(*) FROM charts").fetchone()[0]
        assert charts >= 3
        db.execute("DELETE FROM artist_tracks")
        db.execute("UPDATE meta SET value = 'stale' WHERE name = 'artist_tracks'")
        sums = ArtistSums(file, aside=True)
        try:
            sums.begin(2)
            sums.begin(3)  # the first part still runs, or not: either way every chart is summed once
            first = sums.parts[0][1]
            assert first is not None and first.wait() == 0
            sums.begin(charts)
            sums.write(db)
            assert len(sums.parts) >= 3
        finally:
            sums.close()
        assert sorted(db.execute("SELECT * FROM artist_tracks").fetchall()) == sorted(db.execute(SUMMED).fetchall())
        assert db.execute(SUMS_STATE).fetchone() == ("ok",) and not any(path.exists() for path, _ in sums.parts)

        db.execute("UPDATE meta SET value = 'stale' WHERE name = 'artist_tracks'")
        broken = tmp_path / "not-an-index.sqlite"
        sqlite3.connect(broken).close()
        sums = ArtistSums(broken, aside=True)
        try:
            with pytest.raises(sqlite3.OperationalError, match=r"artist sums process failed \(1\): .*no such table"):
                sums.write(db)
        finally:
            sums.close()
        assert db.execute(SUMS_STATE).fetchone() == ("stale",) and not any(path.exists() for path, _ in sums.parts)
    finally:
        db.close()


def test_index_command_and_seeder(all_groups_data: Path, tmp_path: Path) -> None:
    import asyncio

    path = copy_data(all_groups_data, tmp_path / "data")
    with data_dir(path):
        *outcomes, lyrics = asyncio.run(ah_demo.seed(FIXED_NOW, settings=run_settings()))
        assert outcomes and all(o.status == "ok" for o in outcomes)
        # the demo resolves Genius ids of its most charted tracks from sample answers
        assert lyrics.status == "ok" and lyrics.target.startswith(f"lyrics: {ah_demo.DEMO_LYRICS_TRACKS} matched")
        command = next(c for c in ah.GROUP.commands if c.verb == "index")
        assert all(o.rows == 0 for o in command.run(Context(clock=fixed(FIXED_NOW), settings=run_settings()), {"rebuild": "no"}))
        assert sum(o.rows or 0 for o in command.run(Context(clock=fixed(FIXED_NOW), settings=run_settings()), {"rebuild": "yes"})) == sum(o.rows or 0 for o in outcomes)
    with client(path, [ah.GROUP]) as api:
        logs = get(api, f"{API}/fetch-logs")
    assert logs["count"] == len([o for o in outcomes if o.snapshot_id]) and logs["entries"][0]["status"] == "ok"


# --- endpoints ------------------------------------------------------------------------------------

def test_public_and_keyed(api: TestClient) -> None:
    assert api.get(f"{API}/").status_code == 200
    assert api.get(f"{API}/openapi.json").status_code == 200
    assert api.get(f"{API}/health").status_code == 200
    assert api.get(HISTORY, params={"name": "IU"}).status_code == 401
    assert api.get(COVERAGE, params={"name": "IU"}).status_code == 401
    assert api.get(PLOT, params={"name": "IU"}).status_code == 401


def test_the_group_has_no_legacy_prefix(api: TestClient) -> None:
    """The group's name carries the `-api` suffix already: no `/artist-history-api-api/` (the suffix twice)."""
    assert api.get(f"{API}-api/health", headers=KEY_HEADERS).status_code == 404
    assert api.get(f"{API}-api/artist-history", params={"name": "IU"}, headers=KEY_HEADERS).status_code == 404


def test_health_lists_sources_with_lag(api: TestClient, indexed: Path) -> None:
    body = api.get(f"{API}/health").json()
    assert body["status"] == "ok" and body["rows"] > 0
    sources = {s["source"]: s for s in body["sources"]}
    assert set(sources) == {g.name for g in GROUPS if g.entries is not None}
    korea = sources["korea-chart"]
    assert korea["last_indexed_snapshot_id"] == korea["latest_snapshot_id"] and korea["lag_snapshots"] == 0


def test_health_reports_lag(indexed: Path, tmp_path: Path) -> None:
    path = copy_data(indexed, tmp_path / "data")  # the demo data with its index built
    add_snapshot(path, "uk-charts", "singles", "2026-11-20", None, [{"rank": 1, "title": "X", "artist": "Y"}])
    with client(path, [ah.GROUP], now=FIXED_NOW + timedelta(hours=2)) as later:
        body = later.get(f"{API}/health").json()
    uk = next(s for s in body["sources"] if s["source"] == "uk-charts")
    assert uk["lag_snapshots"] == 1 and uk["lag_seconds"] == 7200 and uk["stale"]
    assert body["status"] == "degraded"


def test_names_across_scripts_find_one_history(api: TestClient) -> None:
    latin = get(api, HISTORY, name="IU")
    hangul = get(api, HISTORY, name_local="아이유")
    assert latin["count"] > 0 and latin["rows"] == hangul["rows"]
    assert {"iu", "아이유"} <= set(latin["query"]["keys"]["name"])
    shown = {r["artist"] for r in latin["rows"]}
    assert "아이유" in shown and any("IU" in a for a in shown)  # the plain Hangul credit is found by name=IU
    assert get(api, HISTORY, artist="IU")["rows"] == latin["rows"]
    assert get(api, HISTORY, artist="IU", name="IU")["rows"] == latin["rows"]


def test_history_rows_are_newest_first_with_filters(api: TestClient) -> None:
    body = get(api, HISTORY, name="Taylor Swift", limit=50000)
    rows = body["rows"]
    assert body["next_cursor"] is None and len({r["source"] for r in rows}) >= 5
    assert [r["chart_date"] for r in rows] == sorted((r["chart_date"] for r in rows), reverse=True)
    only = get(api, HISTORY, name="Taylor Swift", sources="streaming,digital-sales", markets="us,global")
    assert only["rows"] and all(r["source"] in {"streaming", "digital-sales"} and r["market"] in {"us", "global"}
                                for r in only["rows"])
    charted = get(api, HISTORY, name="Taylor Swift", sources="streaming:regional-daily")
    assert charted["rows"] and all(r["chart"].startswith("regional-daily/") for r in charted["rows"])
    dates = sorted({r["chart_date"] for r in rows})
    day = dates[len(dates) // 2]
    windowed = get(api, HISTORY, name="Taylor Swift", since=day, until=day, limit=50000)
    assert windowed["rows"] and {r["chart_date"] for r in windowed["rows"]} == {day}
    assert windowed["count"] == sum(r["chart_date"] == day for r in rows)
    for since, until in ((day, day), (day, None), (None, day), (dates[0], dates[-1])):
        window = {k: v for k, v in (("since", since), ("until", until)) if v}
        listed = get(api, HISTORY, name="Taylor Swift", limit=50000, **window)["rows"]
        covered = get(api, COVERAGE, name="Taylor Swift", **window)
        assert covered["rows"] == len(listed) > 0  # sums cut by the dates are counted from their rows
        by_source = {s["source"]: s["rows"] for s in covered["sources"] if s["matched"]}
        assert by_source == {source: sum(r["source"] == source for r in listed) for source in {r["source"] for r in listed}}


def test_ids_identify_an_artist(api: TestClient) -> None:
    rows = get(api, HISTORY, name="Taylor Swift", sources="streaming", limit=1)["rows"]
    track = rows[0]["streaming_track_id"]
    assert track
    by_id = get(api, HISTORY, streaming_track_id=f"{track},nope")
    assert by_id["rows"] and all(r["streaming_track_id"] == track for r in by_id["rows"])
    assert get(api, HISTORY, analytics_artist="12345")["count"] == 0
    assert get(api, HISTORY, analytics_track="1,2", lyrics_song_id="3")["count"] == 0


def test_array_parameters_take_the_repeated_and_the_comma_form_alike(api: TestClient) -> None:
    """`?isrc=A&isrc=B` (what a generated client sends) asks for both ids, as `?isrc=A,B` does."""
    rows = get(api, HISTORY, name="Taylor Swift", limit=50000)["rows"]
    isrcs = sorted({r["isrc"] for r in rows if r["isrc"]})[:2]
    assert len(isrcs) == 2
    for url in (HISTORY, COVERAGE):
        repeated = api.get(url, params=[("isrc", isrcs[0]), ("isrc", isrcs[1])], headers=KEY_HEADERS)
        assert repeated.status_code == 200 and repeated.json()["query"]["ids"] == {"isrc": isrcs}
        assert get(api, url, isrc=",".join(isrcs)) == repeated.json()
    both = get(api, HISTORY, isrc=isrcs, limit=50000)["rows"]
    assert {r["isrc"] for r in both} == set(isrcs)
    assert len(both) == sum(len(get(api, HISTORY, isrc=i, limit=50000)["rows"]) for i in isrcs)
    tracks = api.get(HISTORY, params=[("analytics_track", "11035919"), ("analytics_track", "1")], headers=KEY_HEADERS)
    assert tracks.json()["query"]["ids"] == {"analytics_track": ["11035919", "1"]} and tracks.json()["rows"]
    detail = errors(api, HISTORY, analytics_track=["1", "x"])
    assert detail == [{"type": "int_parsing", "loc": ["query", "analytics_track", 1],
                       "msg": "Input should be a valid integer, unable to parse string as an integer", "input": "x"}]


def test_array_parameters_are_arrays_of_their_item_type_in_the_document(api: TestClient) -> None:
    document = api.get(f"{API}/openapi.json").json()
    for path in ("/artist-history", "/artist-history/coverage", "/artist-history/plot"):
        schemas = {p["name"]: p["schema"] for p in document["paths"][path]["get"]["parameters"] if p["in"] == "query"}
        for name in query.STRING_ID_PARAMS:
            assert schemas[name] == {"type": "array", "items": {"type": "string", "pattern": query.ID_PATTERN},
                                     "minItems": 1, "maxItems": query.MAX_VALUES}, name
        for name in query.INT_LIST_PARAMS:
            assert schemas[name] == {"type": "array", "items": {"type": "integer"}, "minItems": 1,
                                     "maxItems": query.MAX_VALUES}, name
        assert schemas["analytics_artist"] == schemas["lyrics_artist_id"] == {"type": "integer"}
        assert schemas["sources"]["type"] == schemas["markets"]["type"] == "string"  # strings in the spec


def test_name_and_artist_are_compared_normalised(api: TestClient) -> None:
    alone = get(api, HISTORY, name="Taylor Swift")
    assert alone["rows"] and get(api, HISTORY, name="Taylor Swift", artist="taylor swift")["rows"] == alone["rows"]
    assert get(api, COVERAGE, name="TAYLOR SWIFT", artist="Taylor  Swift!")["rows"] == get(api, COVERAGE, name="Taylor Swift")["rows"]
    assert [d["loc"] for d in errors(api, HISTORY, name="Taylor Swift", artist="Taylor")] == [["query", "artist"]]


def test_sub_daily_rows_carry_hours(api: TestClient) -> None:
    rows = get(api, HISTORY, name="IU", sources="korea-chart:portal-a/realtime")["rows"]
    assert rows and all(r["hours_on_chart"] >= 1 for r in rows)
    daily = get(api, HISTORY, name="IU", sources="korea-chart:portal-a/daily")["rows"]
    assert all(r["hours_on_chart"] is None for r in daily)


@pytest.mark.parametrize(("params", "loc", "kind"), [
    ({}, "name", "missing"),
    ({"markets": "kr"}, "name", "missing"),
    ({"name": "IU", "limit": "0"}, "limit", "greater_than_equal"),
    ({"name": "IU", "limit": "50001"}, "limit", "less_than_equal"),
    ({"name": "IU", "limit": "many"}, "limit", "int_parsing"),
    ({"analytics_artist": "abc"}, "analytics_artist", "int_parsing"),
    ({"lyrics_artist_id": "1.5"}, "lyrics_artist_id", "int_parsing"),
    ({"analytics_track": "1,x"}, "analytics_track", "int_parsing"),
    ({"lyrics_song_id": "y"}, "lyrics_song_id", "int_parsing"),
    ({"name": "IU", "since": "2026-13-01"}, "since", "date_from_datetime_parsing"),
    ({"name": "IU", "until": "yesterday"}, "until", "date_from_datetime_parsing"),
    ({"name": "IU", "since": "2026-11-20", "until": "2026-11-01"}, "until", "value_error"),
    ({"name": "IU", "sources": "nowhere"}, "sources", "value_error"),
    ({"name": "IU", "sources": "social-trends"}, "sources", "value_error"),
    ({"name": "IU", "markets": "zz"}, "markets", "value_error"),
    ({"name": "IU", "artist": "BTS"}, "artist", "value_error"),
    ({"name": "!!!"}, "name", "value_error"),
    ({"name": "IU", "cursor": "not a cursor"}, "cursor", "value_error"),
    ({"isrc": ","}, "isrc", "too_short"),
    ({"isrc": "US 123"}, "isrc", "string_pattern_mismatch"),
    ({"video_id": ",".join(f"v{n}" for n in range(101))}, "video_id", "too_long"),
])
def test_422s(api: TestClient, params: dict[str, str], loc: str, kind: str) -> None:
    detail = errors(api, HISTORY, **params)
    assert [(d["loc"][1], d["type"]) for d in detail] == [(loc, kind)]
    assert errors(api, PLOT, **params) == detail  # the plot takes the history's parameters
    if loc not in ("limit", "cursor"):
        assert [(d["loc"][1], d["type"]) for d in errors(api, COVERAGE, **params)] == [(loc, kind)]


def test_cursor_from_another_query_or_altered_is_422(api: TestClient) -> None:
    cursor = get(api, HISTORY, name="Taylor Swift", limit=2)["next_cursor"]
    assert cursor
    assert get(api, HISTORY, name="Taylor Swift", limit=5, cursor=cursor)["count"] == 5  # limit may change
    other = errors(api, HISTORY, name="Bruno Mars", limit=2, cursor=cursor)
    assert "another query" in other[0]["msg"]
    import base64

    text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    date, row_id, fingerprint, signature = text.split("|")
    forged = base64.urlsafe_b64encode(f"{date}|{int(row_id) + 1}|{fingerprint}|{signature}".encode()).decode()
    assert "altered" in errors(api, HISTORY, name="Taylor Swift", cursor=forged)[0]["msg"]


def test_cursor_pages_stay_whole_while_indexing(indexed: Path, tmp_path: Path) -> None:
    path = copy_data(indexed, tmp_path / "data")  # the demo data with its index built
    with client(path, [ah.GROUP]) as live:
        everything = get(live, HISTORY, name="Taylor Swift", limit=50000)["rows"]
        seen: list[dict[str, Any]] = []
        cursor = None
        page = 0
        while True:
            body = get(live, HISTORY, name="Taylor Swift", limit=97, **({"cursor": cursor} if cursor else {}))
            seen += body["rows"]
            cursor = body["next_cursor"]
            page += 1
            if page in (1, 3):  # new snapshots indexed between pages, on the newest date and an old one
                add_snapshot(path, "uk-charts", f"singles-extra-{page}", "2026-11-20", None,
                             [{"rank": 1, "title": f"New {page}", "artist": "Taylor Swift"}])
                add_snapshot(path, "uk-charts", f"singles-old-{page}", "2020-01-01", None,
                             [{"rank": 2, "title": f"Old {page}", "artist": "Taylor Swift"}])
                build_index(path)
            if cursor is None:
                break
    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (row["source"], row["chart"], row["market"], row["chart_date"], row["title"], row["artist"])

    keys = [key(r) for r in seen]
    assert len(keys) == len(set(keys))  # nothing repeated
    assert {key(r) for r in everything} <= set(keys)  # nothing skipped
    assert page > 3


def test_coverage_per_source_and_reasons(api: TestClient) -> None:
    body = get(api, COVERAGE, name="Taylor Swift")
    sources = {s["source"]: s for s in body["sources"]}
    streaming = sources["streaming"]
    assert streaming["matched"] and streaming["rows"] > 0 and streaming["tracks"] > 0 and streaming["charts"] > 0
    assert streaming["first_date"] <= streaming["last_date"] and streaming["best_rank"] >= 1
    assert streaming["matched_by"] == ["name"] and streaming["reason"] is None
    assert sources["social-trends"]["reason"].startswith("not configured")
    assert body["rows"] == len(get(api, HISTORY, name="Taylor Swift", limit=50000)["rows"])
    by_isrc = {s["source"]: s for s in get(api, COVERAGE, isrc="USUG12345678")["sources"]}
    assert by_isrc["streaming"]["reason"].startswith("no ids of the kinds given")
    assert by_isrc["short-video"]["reason"].startswith("no match")
    narrowed = {s["source"]: s for s in get(api, COVERAGE, name="Taylor Swift", sources="streaming")["sources"]}
    assert narrowed["digital-sales"]["reason"].startswith("not requested")
    assert narrowed["streaming"]["matched"]
    korea = {s["source"]: s for s in get(api, COVERAGE, name="IU", name_local="아이유")["sources"]}["korea-chart"]
    assert set(korea["matched_by"]) == {"name", "name_local"} and korea["markets"] == ["kr"]


def test_coverage_no_data(all_groups_data: Path, tmp_path: Path) -> None:
    path = copy_data(all_groups_data, tmp_path / "data")
    (path / "radio.sqlite").unlink()
    build_index(path)
    with client(path, [ah.GROUP]) as fresh:
        sources = {s["source"]: s for s in get(fresh, COVERAGE, name="Taylor Swift")["sources"]}
    assert sources["radio"]["reason"].startswith("no data")


def test_no_index_yet_answers_empty(tmp_path: Path) -> None:
    with client(tmp_path, [ah.GROUP]) as empty:
        assert get(empty, HISTORY, name="IU")["rows"] == []
        assert empty.get(f"{API}/health").json()["status"] == "degraded"


def test_reference_page_lists_every_route_command_and_setting() -> None:
    from chartgw.http.app import service_routes

    body = (Path(__file__).resolve().parents[1] / "docs" / "groups" / "artist-history-api.md").read_text()
    for route in service_routes(ah.GROUP):
        assert f"`{route.method} /{ah.GROUP.name}{route.path}`" in body
    for command in ah.GROUP.commands:
        assert f"chartgw {command.verb} {ah.GROUP.name}" in body
    for setting in ah.GROUP.settings:
        assert f"`{setting.variable}`" in body


def test_names_learned_from_shared_ids_and_the_alias_file(all_groups_data: Path, tmp_path: Path) -> None:
    path = copy_data(all_groups_data, tmp_path / "data")
    song = {"rank": 1, "title": "Flower", "track_id": "0Learned0Track0Id00000"}
    add_snapshot(path, "streaming", "regional-daily/kr", "2026-11-19", None, [{**song, "artist": "Jisoo", "artists": ["Jisoo"]}])
    add_snapshot(path, "streaming", "regional-daily/kr", "2026-11-20", None, [{**song, "artist": "지수", "artists": ["지수"]}])
    build_index(path)
    aliases = tmp_path / "aliases.txt"
    aliases.write_text("# extra names\nZzyzx Band | 지지직스\n", encoding="utf-8")
    with client(path, [ah.GROUP]) as live:
        learned = get(live, HISTORY, name="JISOO")
        assert {r["artist"] for r in learned["rows"]} == {"Jisoo", "지수"}
        assert get(live, HISTORY, name_local="지수")["rows"] == learned["rows"]
    with environment({"CHARTGW_ARTIST_HISTORY_ALIASES_FILE": str(aliases)}), client(path, [ah.GROUP]) as live:
        assert "지지직스" in get(live, HISTORY, name="Zzyzx Band")["query"]["keys"]["name"]
    with environment({"CHARTGW_ARTIST_HISTORY_ALIASES_FILE": str(tmp_path / "missing.txt")}), \
            client(path, [ah.GROUP]) as live:
        response = live.get(HISTORY, params={"name": "Zzyzx"}, headers=KEY_HEADERS)
        assert response.status_code == 503 and "CHARTGW_ARTIST_HISTORY_ALIASES_FILE" in response.json()["detail"]


def _plot(api: TestClient, **params: Any) -> ET.Element:
    response = api.get(PLOT, params=params, headers=KEY_HEADERS)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/svg+xml"
    return ET.fromstring(response.content)


def _first_point(path: ET.Element) -> tuple[float, float]:
    x, y = path.attrib["d"].split()[:2]
    return float(x.lstrip("M")), float(y)


def test_plot_draws_one_line_per_track_and_chart(api: TestClient) -> None:
    rows = get(api, HISTORY, name="Taylor Swift", sources="streaming,uk-charts", limit=50000)["rows"]
    runs: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        runs.setdefault((row["source"], row["chart"], row["market"], row["title"] or row["artist"]), []).append(row)
    root = _plot(api, name="Taylor Swift", sources="streaming,uk-charts", limit=50000)
    assert root.tag == f"{{{SVG}}}svg" and "Chart history: Taylor Swift" in root.findtext(f"{{{SVG}}}title", "")
    paths = [p for p in root.iter(f"{{{SVG}}}path") if p.get("class") == "run"]
    assert len(paths) == min(len(runs), PLOT_MAX_LINES) and len(runs) > PLOT_MAX_LINES
    assert any(f"and {len(runs) - PLOT_MAX_LINES} shorter runs" in (t.text or "") for t in root.iter(f"{{{SVG}}}text"))
    drawn = []
    for path in paths:
        label = path.findtext(f"{{{SVG}}}title", "")
        (run,) = [k for k in runs if label.startswith(f"{k[3]} - {k[0]}:{k[1]} ({k[2]}): ")]
        points = runs[run]
        best = min(r["rank"] for r in points)
        assert label.endswith(f": {len(points)} days, best rank {best}")
        earliest = min(points, key=lambda r: r["chart_date"])
        drawn.append((earliest["rank"], _first_point(path)[1]))  # a line starts at its earliest date
    # rank down: a better rank is drawn higher (a smaller y), rank 1 at the top of the axis
    ordered = sorted(drawn)
    assert all(a[1] <= b[1] for a, b in pairwise(ordered))
    ticks = {t.text: float(t.attrib["y"]) for t in root.iter(f"{{{SVG}}}text") if t.get("class") == "rank-tick"}
    assert ticks["1"] < ticks["10"] < ticks["100"]
    dates = [t.text or "" for t in root.iter(f"{{{SVG}}}text") if t.get("class") == "date-tick"]
    assert dates and all(d[:4].isdigit() for d in dates)


def test_plot_pages_caches_and_refuses_like_the_history(api: TestClient) -> None:
    assert api.get(PLOT, params={"name": "IU"}).status_code == 401
    first = api.get(PLOT, params={"name": "IU"}, headers=KEY_HEADERS)
    assert first.status_code == 200 and first.headers["etag"]
    again = api.get(PLOT, params={"name": "IU"}, headers={**KEY_HEADERS, "If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    zipped = api.get(PLOT, params={"name": "IU"}, headers={**KEY_HEADERS, "Accept-Encoding": "gzip"})
    assert zipped.status_code == 200 and zipped.content == first.content  # the client decompresses
    cursor = get(api, HISTORY, name="IU", limit=3)["next_cursor"]
    page = _plot(api, name="IU", limit=3, cursor=cursor)
    assert "older rows on the next page" in "".join(t.text or "" for t in page.iter(f"{{{SVG}}}text"))
    empty = _plot(api, name="Nobody At All")
    assert any("No chart appearances matched" in (t.text or "") for t in empty.iter(f"{{{SVG}}}text"))
    document = api.get(f"{API}/openapi.json").json()["paths"]["/artist-history/plot"]["get"]["responses"]
    assert document["200"]["content"] == {"image/svg+xml": {"schema": {"type": "string"}}}
    assert "application/json" in document["422"]["content"]


def test_index_source_hook_and_a_stale_second_indexer(indexed: Path, tmp_path: Path) -> None:
    path = copy_data(indexed, tmp_path / "data")  # the demo data with its index built
    with data_dir(path):
        db = index.open_index(index.index_path(run_settings()))
        mark = db.execute("SELECT last_snapshot_id FROM sources WHERE source = 'uk-charts'").fetchone()[0]
        db.close()
    add_snapshot(path, "uk-charts", "singles-hook", "2026-11-20", None, [{"rank": 1, "title": "Hooked", "artist": "Y"}])
    with data_dir(path):
        assert index.index_source("social-trends", settings=run_settings()) is None
        result = index.index_source("uk-charts", now=fixed(FIXED_NOW), settings=run_settings())
        assert result is not None and result.snapshots == 1 and result.rows == 1

        class StaleMark:
            """A second indexer that read the mark before the hook committed."""

            def __init__(self, db: sqlite3.Connection) -> None:
                self.db, self.first = db, True

            def execute(self, sql: str, *args: Any) -> Any:
                if self.first and sql.startswith("SELECT last_snapshot_id"):
                    self.first = False
                    return self.db.execute("SELECT ?", (mark,))
                return self.db.execute(sql, *args)

            def executemany(self, sql: str, *args: Any) -> Any:
                return self.db.executemany(sql, *args)

        group = next(g for g in GROUPS if g.name == "uk-charts")
        db = index.open_index(index.index_path(run_settings()))
        try:
            stale = index.index_group(StaleMark(db), group, now=fixed(FIXED_NOW), settings=run_settings())  # type: ignore[arg-type]  # a proxy
        finally:
            db.close()
    assert stale.snapshots == 0 and stale.last_snapshot_id == result.last_snapshot_id
    once = table_rows(path)
    with data_dir(path):
        index.rebuild(now=fixed(FIXED_NOW), settings=run_settings())
    assert table_rows(path) == once


def test_a_commit_is_indexed_through_the_registry_s_after_commit(indexed: Path, tmp_path: Path) -> None:
    """No hook list is filled at import: the artist-history group declares `after_commit`, and what `chartgw crawl`
    runs once a crawl committed (`after_crawl` over GROUPS) indexes the new snapshot through it."""
    from chartgw.api.group import after_crawl
    from chartgw.groups import GROUPS

    assert [g.name for g in GROUPS if g.after_commit is not None] == [ah.GROUP.name]
    path = copy_data(indexed, tmp_path / "data")
    add_snapshot(path, "uk-charts", "singles-wired", "2026-11-21", None, [{"rank": 1, "title": "Wired In", "artist": "Z"}])
    with data_dir(path):
        after_crawl("uk-charts", GROUPS, settings=run_settings())
        db = index.open_index(index.index_path(run_settings()))
        try:
            found = db.execute("SELECT count(*) FROM variants WHERE title = 'Wired In'").fetchone()[0]
        finally:
            db.close()
    assert found == 1
