"""The Korean sites' song ids kept by the artist-history index (`EntryMapping.platform_ids`), on a real Melon
capture: every variant carries its site's id, identity's `platform_id` tier links a row by it where no text tier
could, and `/identity/lookup?melon_song=` finds the recording."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from chartgw.groups import GROUPS
from chartgw.groups.korea_chart import SONG_ID_TYPES, stored
from chartgw.index import artist_history as ah
from chartgw.index import history as index
from chartgw.index.identity.linker import ID_TYPES
from chartgw.upstreams import melon
from tests import fixtures
from tests.fixtures import client
from tests.test_artist_history import add_snapshot, build_index

CAPTURE = "melon/chart-index_realtime_2018-01-25_KBSure-Crawler.html"
TARGET = "portal-a/realtime"
get = partial(fixtures.get, as_json=True)


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    ah.register_sources(GROUPS)


def _records(shared_upstream: Path) -> list[dict[str, Any]]:
    """The capture's rows as the crawl stores them (`korea_chart.stored`)."""
    parsed = melon.parse("realtime", [(shared_upstream / CAPTURE).read_bytes()])
    assert len(parsed.entries) == 100 and all(e.song_id for e in parsed.entries)
    return [json.loads(stored(entry).record) for entry in parsed.entries]


def _links(path: Path) -> dict[tuple[str, str], tuple[int, str, str | None]]:
    with sqlite3.connect(path / f"{index.INDEX_NAME}.sqlite") as db:
        return {(title, artist): (recording, tier, platform) for title, artist, recording, tier, platform in db.execute(
            "SELECT v.title, v.artist, l.recording, l.tier, v.platform_id FROM variants v"
            " JOIN identity_links l ON l.variant_id = v.id")}


def test_song_ids_are_kept_and_link_a_row_no_text_tier_could(shared_upstream: Path, tmp_path: Path) -> None:
    assert set(SONG_ID_TYPES.values()) <= set(ID_TYPES)
    records = _records(shared_upstream)
    path = tmp_path / "data"
    path.mkdir()
    add_snapshot(path, "korea-chart", f"{TARGET}@2018-01-25T14", "2018-01-25", 14, records)
    build_index(path)
    first = _links(path)
    assert {(r["title"], r["artist"]): f"melon_song:{r['song_id']}" for r in records} == \
        {key: platform for key, (_, _, platform) in first.items()}

    # The next day: the top song printed in another script (no text tier links "Like That Day" by "Jang Deok-cheol"
    # to "그날처럼" by "장덕철"), under its own song id; and the same new text under a song id never seen.
    top = records[0]
    again = {**top, "title": "Like That Day", "artist": "Jang Deok-cheol", "artists": ["Jang Deok-cheol"]}
    stranger = {**again, "rank": 2, "title": "Like That Day (Acoustic Ver.)", "song_id": "99999999"}
    add_snapshot(path, "korea-chart", f"{TARGET}@2018-01-26T14", "2018-01-26", 14, [again, stranger])
    build_index(path)
    links = _links(path)
    original = first[(top["title"], top["artist"])][0]
    assert links[("Like That Day", "Jang Deok-cheol")][:2] == (original, "platform_id")
    assert links[(stranger["title"], "Jang Deok-cheol")][0] != original
    assert links[(stranger["title"], "Jang Deok-cheol")][1] == "none"

    # Its id is derived from the song id (its strongest evidence: no ISRC), and a lookup by it finds it.
    expected = "rec_" + hashlib.blake2b(f"melon_song:{top['song_id']}".encode(), digest_size=8).hexdigest()
    with client(path) as api:
        found = get(api, "/identity/lookup", melon_song=top["song_id"])
        assert found["id"] == expected and found["title"] == top["title"]
        assert found["ids"]["melon_song"] == [top["song_id"]]
        get(api, "/identity/lookup", status=404, genie_song=top["song_id"])  # another site's id of the same value
        assert get(api, "/identity/lookup", status=422, melon_song="x1")["detail"][0]["loc"] == ["query", "melon_song"]


def test_include_identity_takes_the_row_form_of_the_entrys_own_site(shared_upstream: Path, tmp_path: Path) -> None:
    """Melon's and Genie's rows of one song print the same title and artist under their own song ids: two row forms
    of one recording (Genie's linked to Melon's). `include=identity` on Genie's chart gives each entry the link of
    Genie's row form (its song id), not the first row form of that text (Melon's, which made the recording)."""
    records = _records(shared_upstream)[:5]
    path = tmp_path / "data"
    path.mkdir()
    add_snapshot(path, "korea-chart", TARGET, "2018-01-25", 14, records)
    genie = [{**r, "song_id": str(90_000_000 + i)} for i, r in enumerate(records)]
    add_snapshot(path, "korea-chart", "portal-b/realtime", "2018-01-25", 14, genie)
    build_index(path)
    with sqlite3.connect(path / f"{index.INDEX_NAME}.sqlite") as db:
        tiers = dict(db.execute("SELECT v.platform_id, l.tier FROM variants v JOIN identity_links l ON l.variant_id = v.id"))
    with client(path) as api:
        for site, kind, shown in (("portal-a", "melon_song", records), ("portal-b", "genie_song", genie)):
            entries = get(api, f"/korea-chart/{site}/charts/realtime", include="identity")["entries"]
            assert len(entries) == len(shown)
            for entry, record in zip(entries, shown, strict=True):
                assert entry["identity"]["match"] == tiers[f"{kind}:{record['song_id']}"], (site, entry)
        melon = get(api, "/korea-chart/portal-a/charts/realtime", include="identity")["entries"]
        genie_entries = get(api, "/korea-chart/portal-b/charts/realtime", include="identity")["entries"]
        assert [e["identity"]["recording_id"] for e in melon] == [e["identity"]["recording_id"] for e in genie_entries]
        assert {e["identity"]["match"] for e in melon} != {e["identity"]["match"] for e in genie_entries}
