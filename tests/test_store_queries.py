"""The reader's queries the chart groups share: snapshots by pattern, dates, a chart by date, search,
track history, raw payloads and recorded runs; and the schema migration of older files."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec

from chartgw.store import FetchLogRow, NewSnapshot, SnapshotReader, SnapshotWriter, glob_escape
from chartgw.store.records import stored_entry

NOW = datetime(2026, 11, 20, 5, 30, 0, tzinfo=UTC)


class Row(msgspec.Struct):
    rank: int
    title: str
    artists: list[str]


def _snapshot(target: str, day: int, songs: list[tuple[str, list[str]]], raw: bytes | None = None) -> NewSnapshot:
    entries = [stored_entry(Row(rank, title, artists), rank=rank, title=title, artists=artists, item_id=None)
               for rank, (title, artists) in enumerate(songs, start=1)]
    return NewSnapshot(target, f"2026-11-{day:02d}", None, NOW - timedelta(days=20 - day), "test", entries, raw=raw,
                       raw_type="application/json")


SONGS = [("Si No Estás", ["iñigo quintero"]), ("Cruel Summer", ["Taylor Swift"]),
         ("Seven (feat. Latto)", ["Jung Kook", "Latto"]), ("밤양갱", ["비비 (BIBI)"])]


def _build(path: Path) -> Path:
    with SnapshotWriter(path) as store:
        for day in (18, 19, 20):
            songs = SONGS if day != 19 else list(reversed(SONGS))
            store.commit([_snapshot("regional-daily/us", day, songs, raw=b'{"day":%d}' % day),
                          _snapshot("regional-daily/gb", day, songs[:2])],
                         FetchLogRow("regional-daily/us", NOW, 1, "ok"))
        store.record_run("crawl", NOW, NOW + timedelta(seconds=3), 2, 2, b'{"options":{},"outcomes":[]}')
        store.record_run("backfill", NOW, NOW, 4, 3, b'{"options":{"weeks":4},"outcomes":[]}')
    return path


def _run(coro):
    return asyncio.run(coro)


def test_snapshots_by_pattern_dates_and_a_chart_by_date(tmp_path: Path) -> None:
    path = _build(tmp_path / "g.sqlite")

    async def check() -> None:
        reader = SnapshotReader(path)
        try:
            assert [r.target for r in await reader.snapshots("regional-daily/u*", 10)] == ["regional-daily/us"] * 3
            assert len(await reader.snapshots(None, 4)) == 4
            assert await reader.dates("regional-daily/us") == ["2026-11-20", "2026-11-19", "2026-11-18"]
            on = await reader.snapshot_on("regional-daily/us", "2026-11-19")
            assert on is not None and on.chart_date == "2026-11-19"
            assert await reader.snapshot_on("regional-daily/us", "2026-11-01") is None
            assert [r.target for r in await reader.latest_per_target("*/gb")] == ["regional-daily/gb"]
            latest = await reader.latest("regional-daily/us")
            assert latest is not None and await reader.raw(latest.id) == ("application/json", b'{"day":20}')
        finally:
            await reader.close()

    _run(check())


def test_search_is_case_accent_and_script_insensitive_and_never_spans_fields(tmp_path: Path) -> None:
    path = _build(tmp_path / "g.sqlite")

    async def titles(needle: str, pattern: str | None = None) -> list[str]:
        reader = SnapshotReader(path)
        try:
            return [msgspec.json.decode(record)["title"] for _, _, record in await reader.search(needle, pattern, 100)]
        finally:
            await reader.close()

    from chartgw.core.text import compact

    assert set(_run(titles(compact("ESTAS")))) == {"Si No Estás"}
    assert _run(titles(compact("estás"), "*/us")) == ["Si No Estás"] * 3
    assert set(_run(titles(compact("밤양")))) == {"밤양갱"}
    assert set(_run(titles(compact("bibi")))) == {"밤양갱"}
    assert set(_run(titles(compact("latto")))) == {"Seven (feat. Latto)"}
    assert _run(titles(compact("summertaylor"))) == []  # title tail + artist head is not a match
    assert _run(titles("100%_")) == []


def test_history_lists_every_appearance_oldest_first(tmp_path: Path) -> None:
    path = _build(tmp_path / "g.sqlite")

    async def check() -> None:
        from chartgw.core.text import compact, title_key

        reader = SnapshotReader(path)
        try:
            rows = await reader.history(title_key("seven"), compact("jung kook"), "*/us")
            assert [(r.chart_date, rank) for r, rank, _ in rows] == [("2026-11-18", 3), ("2026-11-19", 2), ("2026-11-20", 3)]
            assert await reader.history(title_key("seven"), compact("taylor swift"), None) == []
            everywhere = await reader.history(title_key("Cruel Summer"), compact("taylor"), None)
            assert len(everywhere) == 5  # every us chart; gb on the 18th and 20th (its 19th is the reversed top 2)
        finally:
            await reader.close()

    _run(check())


def test_runs_are_listed_by_kind_newest_first(tmp_path: Path) -> None:
    path = _build(tmp_path / "g.sqlite")

    async def check() -> None:
        reader = SnapshotReader(path)
        try:
            (backfill,) = await reader.runs("backfill", 10)
            assert (backfill.targets, backfill.ok) == (4, 3)
            assert msgspec.json.decode(backfill.detail)["options"] == {"weeks": 4}
            assert await reader.runs("import", 10) == []
        finally:
            await reader.close()

    _run(check())


def test_a_file_from_before_the_search_column_is_migrated_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""CREATE TABLE entries (snapshot_id INTEGER NOT NULL, position INTEGER NOT NULL,
        rank INTEGER NOT NULL, title_key TEXT NOT NULL, artist_key TEXT NOT NULL, item_id TEXT,
        record BLOB NOT NULL, PRIMARY KEY (snapshot_id, position)) WITHOUT ROWID;""")
    db.close()
    with SnapshotWriter(path) as store:
        store.commit([_snapshot("t", 20, SONGS)], FetchLogRow("t", NOW, 1, "ok"))
    columns = [row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(entries)")]
    assert columns[-1] == "search_key"


def test_glob_escape_matches_literally() -> None:
    assert glob_escape("a*b?[c]") == "a[*]b[?][[]c[]]"


def test_latest_is_the_newest_chart_even_when_an_older_one_is_committed_later(tmp_path: Path) -> None:
    path = _build(tmp_path / "g.sqlite")
    with SnapshotWriter(path) as store:
        store.commit([_snapshot("regional-daily/us", 2, SONGS)], FetchLogRow("regional-daily/us@2026-11-02", NOW, 1, "ok"))

    async def check() -> None:
        reader = SnapshotReader(path)
        try:
            latest = await reader.latest("regional-daily/us")
            assert latest is not None and latest.chart_date == "2026-11-20"
            per_target = {r.target: r.chart_date for r in await reader.latest_per_target()}
            assert per_target == {"regional-daily/gb": "2026-11-20", "regional-daily/us": "2026-11-20"}
            assert (await reader.snapshots("regional-daily/us", 1))[0].chart_date == "2026-11-02"  # newest fetch first
        finally:
            await reader.close()

    _run(check())
