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


def test_every_variant_is_linked_and_a_rebuild_gives_the_same_ids(all_groups_data: Path, tmp_path: Path) -> None:
    path = copy_data(all_groups_data, tmp_path / "data")
    build_index(path)
    variants = rows(path, "SELECT count(*) FROM variants")[0][0]
    linked = rows(path, LINKED)
    assert variants > 100 and len(linked) == variants
    tiers = {tier for _, _, tier in linked}
    assert "none" in tiers and tiers & {"exact", "high", "platform_id", "isrc"}  # the demo's groups share songs
    first = rows(path, LINKED)
    (path / f"{index.INDEX_NAME}.sqlite").unlink()
    build_index(path)
    assert rows(path, LINKED) == first


def test_a_new_variant_is_linked_by_the_run_that_writes_it(all_groups_data: Path, tmp_path: Path) -> None:
    path = copy_data(all_groups_data, tmp_path / "data")
    build_index(path)
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
