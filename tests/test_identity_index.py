"""Recording identity kept in the artist-history index: every variant linked by the index run that wrote it,
the same ids from a rebuild, and the kept linker state giving what a rebuild from the variants gives."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from chartgw.groups import GROUPS
from chartgw.index import artist_history as ah
from chartgw.index import history as index
from chartgw.index.credits import credit_keys, track_key
from tests.fixtures import copy_data
from tests.fixtures import settings as run_settings
from tests.test_artist_history import add_snapshot, build_index

pytestmark = pytest.mark.heavy

LINKED = ("SELECT v.variant_key, r.id, l.tier FROM variants v JOIN identity_links l ON l.variant_id = v.id"
          " JOIN identity_recordings r ON r.number = l.recording ORDER BY v.id")


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    ah.register_sources(GROUPS)


def rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path / f"{index.INDEX_NAME}.sqlite") as db:
        return db.execute(sql).fetchall()


def test_every_variant_is_linked_and_a_rebuild_gives_the_same_ids(indexed_demo: Path, tmp_path: Path) -> None:
    path = copy_data(indexed_demo, tmp_path / "data")
    variants = rows(path, "SELECT count(*) FROM variants")[0][0]
    linked = rows(path, LINKED)
    assert variants > 100 and len(linked) == variants
    tiers = {tier for _, _, tier in linked}
    assert "none" in tiers and tiers & {"exact", "high", "platform_id", "isrc"}  # the demo's groups share songs
    first = rows(path, LINKED)
    (path / f"{index.INDEX_NAME}.sqlite").unlink()
    build_index(path)
    assert rows(path, LINKED) == first


def test_a_new_variant_is_linked_by_the_run_that_writes_it(indexed_demo: Path, tmp_path: Path) -> None:
    path = copy_data(indexed_demo, tmp_path / "data")
    known = rows(path, "SELECT title, artist FROM variants WHERE title != '' ORDER BY id LIMIT 1")[0]
    record = {"rank": 1, "title": f"{known[0]} (Explicit Ver.)", "artist": known[1], "artists": [known[1]]}
    other = {"rank": 2, "title": f"{known[0]} (Sped Up)", "artist": known[1], "artists": [known[1]]}
    add_snapshot(path, "korea-chart", "portal-a/realtime", "2026-06-02", 10, [record, other])
    build_index(path)
    found = dict((title, (rec, tier)) for title, rec, tier in rows(
        path, "SELECT v.title, l.recording, l.tier FROM variants v JOIN identity_links l ON l.variant_id = v.id"))
    original = rows(path, f"SELECT l.recording FROM variants v JOIN identity_links l ON l.variant_id = v.id"
                          f" WHERE v.title = '{known[0]}' AND v.artist = '{known[1]}'")[0][0]
    assert found[record["title"]][0] == original and found[record["title"]][1] in ("exact", "high")
    assert found[other["title"]] != original and found[other["title"]][1] == "none"


def test_the_kept_state_links_as_a_rebuild_from_the_variants_would(all_groups_data: Path, tmp_path: Path) -> None:
    kept, rebuilt = (copy_data(all_groups_data, tmp_path / name) for name in ("kept", "rebuilt"))
    records = [{"rank": 1, "title": "Completely New Song", "artist": "아일릿(ILLIT)", "artists": ["아일릿(ILLIT)"]},
               {"rank": 2, "title": "Completely New Song", "artist": "ILLIT", "artists": ["ILLIT"]}]
    for path in (kept, rebuilt):
        build_index(path)
        add_snapshot(path, "korea-chart", "portal-a/realtime", "2026-06-02", 11, records)
    with sqlite3.connect(rebuilt / f"{index.INDEX_NAME}.sqlite") as db:
        db.execute("DELETE FROM identity_state")
    for path in (kept, rebuilt):
        build_index(path)
    assert rows(kept, LINKED) == rows(rebuilt, LINKED)
    new = rows(kept, "SELECT l.recording, l.tier FROM variants v JOIN identity_links l ON l.variant_id = v.id"
                     " WHERE v.title = 'Completely New Song' ORDER BY v.id")
    assert [tier for _, tier in new] == ["none", "high"] and new[0][0] == new[1][0]


def test_the_after_crawl_index_links_too(all_groups_data: Path, tmp_path: Path) -> None:
    """What `chartgw crawl` runs once its crawl committed (`index_source`) leaves the new rows linked."""
    from chartgw.core.clock import fixed
    from tests.fixtures import FIXED_NOW, data_dir

    path = copy_data(all_groups_data, tmp_path / "data")
    build_index(path)
    add_snapshot(path, "korea-chart", "portal-a/realtime", "2026-06-02", 12,
                 [{"rank": 1, "title": "Only After The Crawl", "artist": "Nobody", "artists": ["Nobody"]}])
    with data_dir(path):
        index.index_source("korea-chart", now=fixed(FIXED_NOW), settings=run_settings())
    assert rows(path, "SELECT l.tier FROM variants v JOIN identity_links l ON l.variant_id = v.id"
                      " WHERE v.title = 'Only After The Crawl'") == [("none",)]


def test_every_identity_statement_compiles(tmp_path: Path) -> None:
    """The index's identity step, the /identity routes and include=identity prepared against an index file; facts
    against a group's file (what `compile_check` does for the declared tables)."""
    from chartgw.index.identity.facts import FACTS_QUERIES
    from chartgw.index.identity.include import INCLUDE_QUERIES
    from chartgw.index.identity.links import IDENTITY_INDEX_QUERIES
    from chartgw.index.identity.routes import IDENTITY_QUERIES
    from chartgw.store import tables
    from chartgw.store.schema import _explain, compile_check

    db = index.open_index(tmp_path / "index.sqlite")
    try:
        for query in (*IDENTITY_INDEX_QUERIES, *IDENTITY_QUERIES, *INCLUDE_QUERIES):
            _explain(db, query.sql)
    finally:
        db.close()
    assert compile_check(tables.TABLES, FACTS_QUERIES) == {}


ONE_LAYER = ("SELECT (SELECT count(*) FROM variants v LEFT JOIN identity_links l ON l.variant_id = v.id"
             " WHERE l.recording IS NOT v.track_id) + (SELECT count(*) FROM appearances a JOIN variants v"
             " ON v.id = a.variant_id WHERE v.track_id != a.track_id)")
"""Variants whose track is not their recording, and rows whose variant (the form they show) is another track's."""


def _keys_of_rows(path: Path) -> list[tuple[Any, ...]]:
    """(row id, artist key, date, chart, track, rank) of every artist key row of the index, and the same made from
    each row's variant (as it shows): they must be one list."""
    stored = rows(path, "SELECT k.row_id, r.key, k.chart_date, k.chart_id, k.track_id, k.rank FROM appearance_artists k"
                        " JOIN artists r ON r.id = k.artist_id")
    made = [(row_id, key, *rest) for row_id, credits, *rest in rows(path, "SELECT a.id, v.credits, a.chart_date,"
            " a.chart_id, a.track_id, a.rank FROM appearances a JOIN variants v ON v.id = a.variant_id")
            for key in credit_keys(credits)]
    assert sorted(stored) == sorted(made)
    return stored


def _day(path: Path, chart: str, day: str) -> list[tuple[Any, ...]]:
    return rows(path, "SELECT v.title, a.rank, a.hours, l.recording, a.track_id FROM appearances a"
                      " JOIN charts c ON c.id = a.chart_id JOIN variants v ON v.id = a.variant_id"
                      " JOIN identity_links l ON l.variant_id = a.variant_id"
                      f" WHERE c.chart = '{chart}' AND a.chart_date = '{day}' ORDER BY a.rank")


def test_a_track_is_the_recording_and_its_row_forms_one_row(tmp_path: Path) -> None:
    """The index's tracks are identity's recordings (one layer): a song retitled within a day (another name key, the
    same Melon song id) is one row of that day, hours counted once; a live take printed under the same name key is
    a row of its own (the name keys folded it into the studio recording's row)."""
    path = tmp_path / "data"
    path.mkdir()
    song, live = "30851703", "40000000"
    add_snapshot(path, "korea-chart", "portal-a/realtime", "2026-06-02", 10, [
        {"rank": 1, "title": "그날처럼", "artist": "장덕철", "artists": ["장덕철"], "song_id": song},
        {"rank": 2, "title": "Spring Day", "artist": "BTS", "artists": ["BTS"], "song_id": "30313408"}])
    add_snapshot(path, "korea-chart", "portal-a/realtime", "2026-06-02", 11, [
        {"rank": 3, "title": "그날처럼 (Like That Day)", "artist": "장덕철", "artists": ["장덕철"], "song_id": song},
        {"rank": 2, "title": "Spring Day - Live", "artist": "BTS", "artists": ["BTS"], "song_id": live}])
    assert track_key("그날처럼", "장덕철") != track_key("그날처럼 (Like That Day)", "장덕철")
    assert track_key("Spring Day", "BTS") == track_key("Spring Day - Live", "BTS")
    build_index(path)
    day = _day(path, "portal-a/realtime", "2026-06-02")
    # (title of the newest row form, the day's best rank, hours on chart, its variant's recording, the row's track)
    assert [r[:3] for r in day] == [("그날처럼 (Like That Day)", 1, 2), ("Spring Day", 2, 1), ("Spring Day - Live", 2, 1)]
    assert all(recording == track for *_, recording, track in day)
    assert len({track for *_, track in day}) == 3
    assert rows(path, ONE_LAYER) == [(0,)]
    assert rows(path, "SELECT count(*) FROM tracks") == rows(path, "SELECT count(*) FROM identity_recordings") == [(3,)]

    # A later run (not a bulk build) folds a row form of a recording into the day's stored row the same way, and a
    # rebuild from scratch gives the same rows.
    add_snapshot(path, "korea-chart", "portal-a/realtime", "2026-06-02", 12, [
        {"rank": 5, "title": "그날처럼", "artist": "장덕철", "artists": ["장덕철"], "song_id": song}])
    build_index(path)
    day = _day(path, "portal-a/realtime", "2026-06-02")
    assert [r[:3] for r in day] == [("그날처럼", 1, 3), ("Spring Day", 2, 1), ("Spring Day - Live", 2, 1)]
    (path / f"{index.INDEX_NAME}.sqlite").unlink()
    build_index(path)
    assert _day(path, "portal-a/realtime", "2026-06-02") == day
    assert rows(path, ONE_LAYER) == [(0,)]


def test_row_forms_of_one_recording_in_one_snapshot_keep_the_best_rank(tmp_path: Path) -> None:
    """A daily chart listing one recording under two row forms (the same Melon song id): one row, the better rank, as
    a chart listing a track twice always was; the next snapshot of that day (a re-crawl) gives the day its rank."""
    path = tmp_path / "data"
    path.mkdir()
    song = "32183386"
    first = [{"rank": 4, "title": "Love Poem", "artist": "IU", "artists": ["IU"], "song_id": song},
             {"rank": 9, "title": "Love poem (러브 포엠)", "artist": "아이유", "artists": ["아이유"], "song_id": song}]
    add_snapshot(path, "korea-chart", "portal-a/daily", "2026-06-02", None, first)
    build_index(path)
    assert [r[:3] for r in _day(path, "portal-a/daily", "2026-06-02")] == [("Love Poem", 4, None)]
    add_snapshot(path, "korea-chart", "portal-a/daily", "2026-06-02", None, [{**first[1], "rank": 7}])
    build_index(path)
    assert [r[:3] for r in _day(path, "portal-a/daily", "2026-06-02")] == [("Love poem (러브 포엠)", 7, None)]
    # On a realtime chart too: the form listed higher is the row's, whichever comes first.
    add_snapshot(path, "korea-chart", "portal-a/realtime", "2026-06-03", 9, [{**first[1], "rank": 2}, {**first[0], "rank": 6}])
    add_snapshot(path, "korea-chart", "portal-a/realtime", "2026-06-04", 9, [{**first[1], "rank": 8}, {**first[0], "rank": 3}])
    build_index(path)
    assert [r[:3] for r in _day(path, "portal-a/realtime", "2026-06-03")] == [("Love poem (러브 포엠)", 2, 1)]
    assert [r[:3] for r in _day(path, "portal-a/realtime", "2026-06-04")] == [("Love Poem", 3, 1)]
    assert rows(path, ONE_LAYER) == [(0,)]
    # A row's artist keys are its shown form's, at its rank, however many forms a batch folded into it.
    assert {key for _, key, *_ in _keys_of_rows(path)} == {*credit_keys('["IU"]'), *credit_keys('["아이유"]')}


def test_two_indexers_at_once_keep_tracks_and_links_one(all_groups_data: Path, tmp_path: Path) -> None:
    """Two index runs interleaved (cron beside a crawl's hook): one writes a group's batches and links its variants
    in memory, the other indexes another group and keeps the links of both, then the first goes on (its variant
    numbers taken: the batch is written again) and keeps its links. Every variant's track is still its recording,
    and the recordings are those a linking of the variants in id order from scratch gives."""
    from chartgw.core.clock import fixed
    from tests.fixtures import FIXED_NOW, data_dir

    path = copy_data(all_groups_data, tmp_path / "data")
    now, file = fixed(FIXED_NOW), path / f"{index.INDEX_NAME}.sqlite"
    with data_dir(path):
        settings = run_settings()
        first, second = index.open_index(file), index.open_index(file)
        try:
            run = index._begin_run(first)
            index.index_group(first, GROUPS.named("uk-charts"), settings=settings, now=now, run=run)
            assert run.linking is not None and run.linking.pending  # linked, not kept yet
            other = index._begin_run(second)
            index.index_group(second, GROUPS.named("korea-chart"), settings=settings, now=now, run=other)
            index._end_run(second, other, file)
            index.index_group(first, GROUPS.named("ranking-charts"), settings=settings, now=now, run=run)
            index._end_run(first, run, file)
        finally:
            first.close()
            second.close()
    assert rows(path, ONE_LAYER) == [(0,)]
    assert rows(path, "SELECT count(*) FROM variants")[0][0] > 100
    assert rows(path, "SELECT count(*) FROM tracks") == rows(path, "SELECT count(*) FROM identity_recordings")
    linked = rows(path, "SELECT variant_id, recording FROM identity_links ORDER BY variant_id")
    with sqlite3.connect(file) as db:
        db.execute("DELETE FROM identity_links")
        db.execute("DELETE FROM identity_state")
    with sqlite3.connect(file) as db:
        from chartgw.index.identity.links import link_new
        assert link_new(db) == len(linked)
    assert rows(path, "SELECT variant_id, recording FROM identity_links ORDER BY variant_id") == linked


ARTISTS_OF_ROWS = ("SELECT DISTINCT k.track_id, r.key FROM appearance_artists k JOIN artists r ON r.id = k.artist_id"
                   " ORDER BY 1, 2")
"""Every (track, artist key) a row is indexed under: what /artist-history finds rows by."""
ARTIST_NAMES = "SELECT name, artist_id FROM identity_artist_names ORDER BY name"
ARTIST_SNAPSHOTS = [
    ("2026-06-02", [{"rank": 1, "title": "Love wins all", "artist": "아이유(IU)", "artists": ["아이유(IU)"]},
                    {"rank": 2, "title": "Golden", "artist": "HUNTR/X", "artists": ["HUNTR/X"]},
                    {"rank": 3, "title": "Seven (feat. Latto)", "artist": "Jung Kook", "artists": ["Jung Kook"]}]),
    ("2026-06-03", [{"rank": 1, "title": "Love wins all", "artist": "IU", "artists": ["IU"]},
                    {"rank": 2, "title": "Welcome to the Show", "artist": "DAY6 (데이식스)", "artists": ["DAY6 (데이식스)"]},
                    {"rank": 3, "title": "Letter", "artist": "원필 (DAY6)", "artists": ["원필 (DAY6)"]}]),
]


def _artist_index(path: Path, snapshots: list[tuple[str, list[dict[str, Any]]]]) -> Path:
    path.mkdir()
    for hour, (day, records) in enumerate(snapshots):
        add_snapshot(path, "korea-chart", "portal-a/realtime", day, 10 + hour, records)
    build_index(path)
    return path


def test_the_index_artists_are_identity_artists(tmp_path: Path) -> None:
    """One artist layer: identity's artist names are the artist keys the index's rows are found by (one credits
    parser, `chartgw.index.credits`': "HUNTR/X" is two keys, a featured artist in the title is credited), a
    recording's artists are the keys its rows are indexed under, names printed in two scripts are one artist and a
    member is not its band; the same ids from a rebuild and from the rows in another order."""
    path = _artist_index(tmp_path / "data", ARTIST_SNAPSHOTS)
    keyed = rows(path, ARTISTS_OF_ROWS)
    ids = dict(rows(path, ARTIST_NAMES))
    assert {key for _, key in keyed} >= {"아이유", "iu", "huntr", "x", "jungkook", "latto", "day6", "원필"}
    assert {key for _, key in keyed} <= set(ids)  # every key a row is found by is an artist of identity's
    by_recording = rows(path, "SELECT recording, name FROM identity_recording_artists ORDER BY 1, 2")
    assert set(keyed) <= set(by_recording) and {r for r, _ in by_recording} == {t for t, _ in keyed}
    assert ids["아이유"] == ids["iu"] != ids["huntr"] != ids["x"]
    assert ids["day6"] == ids["데이식스"] != ids["원필"]  # the member's credit does not make it the band
    assert ("원필", "day6") in rows(path, "SELECT a, b FROM artist_links")  # /artist-history's name widening (its spec)
    (path / f"{index.INDEX_NAME}.sqlite").unlink()
    build_index(path)
    assert dict(rows(path, ARTIST_NAMES)) == ids
    reordered = _artist_index(tmp_path / "reordered", [(day, records[::-1]) for day, records in ARTIST_SNAPSHOTS[::-1]])
    assert dict(rows(reordered, ARTIST_NAMES)) == ids
