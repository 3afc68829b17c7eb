"""Recording identity kept in the artist-history index file, beside the variants it links.

A variant (the index's distinct row form: title, artist as shown, credits, ids) is linked once, when an index run
has written it: `link_new` links every variant after the last one linked, in id order, in one transaction, so
identity is current as soon as the index run that follows a crawl, import or backfill commits. The linker's state
is kept in `identity_state` (pickled, with the last variant it has seen); a state of another layout, or none, is
rebuilt from the variants already linked, in id order, which gives the same links.

Tables: `identity_links` (a variant's recording, tier, confidence and rule: its provenance; its title and artist as
printed, what a chart entry is looked up by), `identity_recordings` (id, the first title and artist printed, ambiguous,
the title's compacted name for search), `identity_ids` (every id type and
value a recording carries), `identity_artist_names` (every artist name the index knows, by its key, with its artist
id and a name as printed) and `identity_recording_artists` (the artist keys a recording's rows are indexed under).
The artists are the index's: the names its credits parser (`chartgw.index.credits`) splits a variant's credit into,
keyed as `artists.key` and `appearance_artists` key them, joined into artists by identity's rules (`Artists`: a
name printed in two scripts is one artist; a member's bracketed band is not, once the band is named in the member's
script); the linker's own reading of a credit is evidence for linking only. `identity_enrichment` and
`musicbrainz_replies` are `chartgw enrich musicbrainz`'s (`chartgw/index/identity/enrich.py`): each index run gives the
enrichment kept for a recording's row forms back to it (`_apply_enrichment`), which is how a rebuild keeps it.
"""

from __future__ import annotations

import gc
import json
import pickle
import sqlite3
from functools import lru_cache

from chartgw.core.text import artist_aliases, artist_key
from chartgw.index.identity.linker import Artists, Link, Linker, Recording, Row
from chartgw.index.identity.names import Credit, parse_title
from chartgw.store import Query, transaction

__all__ = ["COLUMN_ID_TYPES", "ENRICHMENT_TABLES", "IDENTITY_INDEX_QUERIES", "KEPT_ENRICHMENT", "SCHEMA", "STATE_VERSION",
           "Linking", "add_enrichment", "credited", "link_new", "row_of"]

ENRICHMENT_TABLES = ("identity_enrichment", "musicbrainz_replies")
KEPT_ENRICHMENT: dict[str, tuple[Query, Query]] = {
    "identity_enrichment": (Query("kept identity_enrichment", "SELECT * FROM identity_enrichment"),
                            Query("keep identity_enrichment",
                                  "INSERT INTO identity_enrichment VALUES (?, ?, ?, ?, ?, ?, ?, ?)")),
    "musicbrainz_replies": (Query("kept musicbrainz_replies", "SELECT * FROM musicbrainz_replies"),
                            Query("keep musicbrainz_replies", "INSERT INTO musicbrainz_replies VALUES (?, ?, ?, ?)")),
}
"""What a rebuild reads of each enrichment table before it drops the file, and how it puts the rows back."""
"""What `chartgw enrich musicbrainz` learnt (`chartgw/index/identity/enrich.py`): kept when the index is rebuilt or
migrated, as the Genius lookups are, since it came from an upstream and not from the groups' files."""

STATE_VERSION = 3
"""The pickled linker's layout (3: the linker and the index's artists); a state of another is rebuilt from the
variants."""

COLUMN_ID_TYPES: dict[str, str] = {
    "isrc": "isrc",
    "streaming_track_id": "spotify_track",
    "download_store_track_id": "apple_track",
    "recognition_track_id": "shazam_track",
    "video_id": "youtube_video",
    "asin": "amazon_asin",
    "analytics_track": "chartmetric_track",
    "lyrics_song_id": "genius_song",
}
"""The index's id columns (the spec's parameter names) as identity's id types."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS identity_links (
    variant_id INTEGER PRIMARY KEY,
    recording INTEGER NOT NULL,
    tier TEXT NOT NULL,
    confidence REAL NOT NULL,
    rule TEXT NOT NULL,
    artist TEXT NOT NULL,
    title TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS identity_links_by_recording ON identity_links (recording);
CREATE INDEX IF NOT EXISTS identity_links_by_text ON identity_links (artist, title);
CREATE TABLE IF NOT EXISTS identity_recordings (
    number INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    title TEXT NOT NULL,
    artist TEXT NOT NULL,
    ambiguous INTEGER NOT NULL,
    title_key TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS identity_recordings_by_id ON identity_recordings (id);
CREATE INDEX IF NOT EXISTS identity_recordings_by_title ON identity_recordings (title_key);
CREATE TABLE IF NOT EXISTS identity_ids (
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    recording INTEGER NOT NULL,
    PRIMARY KEY (kind, value, recording)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS identity_ids_by_recording ON identity_ids (recording);
CREATE TABLE IF NOT EXISTS identity_artist_names (
    name TEXT PRIMARY KEY,
    artist_id TEXT NOT NULL,
    printed TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS identity_artist_names_by_id ON identity_artist_names (artist_id);
CREATE TABLE IF NOT EXISTS identity_recording_artists (
    recording INTEGER NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (recording, name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS identity_recording_artists_by_name ON identity_recording_artists (name);
CREATE TABLE IF NOT EXISTS identity_enrichment (
    key TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    artist TEXT NOT NULL,
    mbid TEXT,
    isrc TEXT,
    rule TEXT NOT NULL,
    query TEXT NOT NULL,
    asked_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS musicbrainz_replies (
    request TEXT PRIMARY KEY,
    status INTEGER NOT NULL,
    body BLOB NOT NULL,
    asked_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS identity_state (
    only INTEGER PRIMARY KEY CHECK (only = 1),
    version INTEGER NOT NULL,
    last_variant INTEGER NOT NULL,
    state BLOB NOT NULL
);
"""


_COLUMNS = tuple(COLUMN_ID_TYPES)
_VARIANTS = Query("identity_variants_after",
                  f"SELECT id, title, artist, platform_id, {', '.join(_COLUMNS)}, credits FROM variants"
                  " WHERE id > ?1 AND (?2 IS NULL OR id <= ?2)"
                  " ORDER BY id")
_LINKED = Query("identity_last_linked", "SELECT coalesce(max(variant_id), 0) FROM identity_links")
_LAST_VARIANT = Query("identity_last_variant", "SELECT coalesce(max(id), 0) FROM variants")
_STATE = Query("identity_state", "SELECT version, last_variant, state FROM identity_state")
_SAVE_STATE = Query("identity_save_state", "INSERT OR REPLACE INTO identity_state VALUES (1, ?1, ?2, ?3)")
_SAVE_LINK = Query("identity_save_link", "INSERT OR REPLACE INTO identity_links VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
_IDS_TAKEN = Query("identity_ids_taken", "SELECT id, min(number) FROM identity_recordings"
                                         " WHERE id IN (SELECT value FROM json_each(?)) GROUP BY id")
_SAVE_ID = Query("identity_save_id", "INSERT OR IGNORE INTO identity_ids VALUES (?1, ?2, ?3)")
_SAVE_MAIN = Query("identity_save_main_artist", "INSERT OR IGNORE INTO identity_recording_artists VALUES (?1, ?2)")
_SAVE_RECORDING = Query("identity_save_recording",
                        "INSERT OR REPLACE INTO identity_recordings VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
_ANY_ENRICHED = Query("identity_any_enriched", "SELECT 1 FROM identity_enrichment LIMIT 1")
_ENRICHED = Query("identity_enriched", "SELECT key, mbid, isrc FROM identity_enrichment WHERE mbid IS NOT NULL"
                                       " AND key IN (SELECT value FROM json_each(?))")
_ISRC_ELSEWHERE = Query("identity_isrc_elsewhere",
                        "SELECT 1 FROM identity_ids WHERE kind = 'isrc' AND value = ?1 AND recording != ?2 LIMIT 1")
_HAS_ISRC = Query("identity_has_isrc", "SELECT 1 FROM identity_ids WHERE kind = 'isrc' AND recording = ? LIMIT 1")
_PRINTED = Query("identity_printed_names", "SELECT name, printed FROM identity_artist_names")
_SAVE_NAME = Query("identity_save_artist_name", "INSERT OR REPLACE INTO identity_artist_names VALUES (?1, ?2, ?3)")
IDENTITY_INDEX_QUERIES = (_VARIANTS, _LINKED, _LAST_VARIANT, _STATE, _SAVE_STATE, _SAVE_LINK, _IDS_TAKEN, _SAVE_ID, _SAVE_MAIN,
                          _SAVE_RECORDING, _PRINTED, _SAVE_NAME, _ANY_ENRICHED, _ENRICHED, _ISRC_ELSEWHERE,
                          _HAS_ISRC, *(query for pair in KEPT_ENRICHMENT.values() for query in pair))
"""Every statement the index's identity step runs (compiled against the index's tables in tests)."""


def row_of(title: str | None, artist: str, ids: dict[str, str], platform_id: str | None = None) -> Row:
    """A variant's (or an entry's) title, artist and ids as identity reads them; `platform_id` is a platform's own
    song id as the index keeps it ("melon_song:38123338", `EntryMapping.platform_ids`), tried first."""
    isrc = ids.get("isrc") or None
    pairs = tuple((COLUMN_ID_TYPES[c], v) for c, v in sorted(ids.items()) if v and c != "isrc" and c in COLUMN_ID_TYPES)
    if platform_id:
        kind, _, value = platform_id.partition(":")
        pairs = ((kind, value), *pairs)
    return Row(title or "", artist, isrc, pairs)


@lru_cache(maxsize=50_000)
def credited(credits: str) -> tuple[tuple[Credit, str], ...]:
    """A variant's credited artists as the index split them (its `credits`, `chartgw.index.credits`), each as an
    artist credit of identity's: its index key (what `artists.key` and `appearance_artists` hold) the main name,
    the names outside and inside its brackets the aliases; with the name as printed."""
    out = []
    for name in json.loads(credits):
        key = artist_key(name)
        out.append((Credit(key, frozenset(artist_aliases(name)) | {key}), name.strip()))
    return tuple(out)


def _variants(db: sqlite3.Connection, after: int, upto: int | None = None) -> list[tuple[int, Row, str]]:
    return [(int(r[0]), row_of(r[1], r[2], dict(zip(_COLUMNS, r[4:-1], strict=True)), r[3]), r[-1])
            for r in db.execute(_VARIANTS.sql, (after, upto))]


def _load(db: sqlite3.Connection, linked: int) -> tuple[Linker, Artists]:
    """The linker and the index's artists as they stood after variant `linked`: the kept state, else rebuilt from
    the variants."""
    found = db.execute(_STATE.sql).fetchone()
    if found is not None and found[0] == STATE_VERSION and found[1] == linked:
        try:
            state = pickle.loads(found[2])
        except Exception:  # a state this code cannot read: rebuilt below
            state = None
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], Linker) \
                and isinstance(state[1], Artists):
            return state[0], state[1]
    linker, artists = Linker(), Artists()
    for _, row, credits in _variants(db, 0, linked):
        linker.link(row)
        for credit, _ in credited(credits):
            artists.add(credit)
    return linker, artists


class Linking:
    """The linker as it stands after every variant of the index file, linking the variants an index run writes as
    it writes them (their recording is the track their rows are kept under: `chartgw.index.write`), and what it
    linked since the links last kept, until `save` keeps them. Loaded from the kept state, then every variant after
    it linked in id order, so a run that links variants in the order it numbers them gives the links a rebuild
    from the variants gives."""

    def __init__(self, linker: Linker, artists: Artists, kept: int) -> None:
        self.linker = linker
        self.artists = artists
        """The index's artists: every credited name of the variants linked, joined by identity's rules."""
        self.kept = kept
        """The last variant whose link is kept (`identity_links`)."""
        self.pending: list[tuple[int, Row, Link, str]] = []
        """Variants linked since, in id order (with their credits as the index stores them)."""

    @classmethod
    def load(cls, db: sqlite3.Connection) -> Linking:
        kept = int(db.execute(_LINKED.sql).fetchone()[0])
        linking = cls(*_load(db, kept), kept)
        linking.linker.changed.clear()
        for variant_id, row, credits in _variants(db, kept):
            linking.link(variant_id, row, credits)
        return linking

    @property
    def upto(self) -> int:
        """The last variant linked."""
        return self.pending[-1][0] if self.pending else self.kept

    def link(self, variant_id: int, row: Row, credits: str) -> Link:
        """Link the next variant (ids in order: `variant_id` is after `upto`), its credits (the index's `credits`
        JSON) adding to the artists."""
        link = self.linker.link(row)
        for credit, _ in credited(credits):
            self.artists.add(credit)
        self.pending.append((variant_id, row, link, credits))
        return link

    def save(self, db: sqlite3.Connection) -> int:
        """Keep the links made since the last kept, with the linker's state, in one transaction; the number kept.
        Another indexer may have kept links or written variants meanwhile: then the links are made again from the
        file (the same ones, the variants being linked in id order either way)."""
        with transaction(db):
            if int(db.execute(_LINKED.sql).fetchone()[0]) != self.kept or \
                    int(db.execute(_LAST_VARIANT.sql).fetchone()[0]) != self.upto:
                fresh = Linking.load(db)
                self.linker, self.artists, self.kept, self.pending = fresh.linker, fresh.artists, fresh.kept, \
                    fresh.pending
            if not self.pending:
                return 0
            pending, linker = self.pending, self.linker
            db.executemany(_SAVE_LINK.sql, [(v, link.recording.number, link.tier, link.confidence, link.rule, row.artist,
                                             row.title) for v, row, link, _ in pending])
            _write_recordings(db, linker.changed)
            _apply_enrichment(db, linker.changed)
            _write_artists(db, self.artists, pending)
            db.execute(_SAVE_STATE.sql, (STATE_VERSION, pending[-1][0],
                                         pickle.dumps((linker, self.artists), protocol=pickle.HIGHEST_PROTOCOL)))
        linker.changed.clear()
        self.kept, self.pending = pending[-1][0], []
        return len(pending)


def link_new(db: sqlite3.Connection, linking: Linking | None = None) -> int:
    """Keep the links of every variant written since the last run (in one transaction): `linking`'s, the run's that
    linked them as it wrote them, else linked now; the number kept. The cyclic garbage collector is paused
    meanwhile: the linker makes hundreds of thousands of objects and no garbage cycles, and the collector's passes
    over them were half of linking's time (1M rows: 4.0 CPU s with it, 2.0 without)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        if linking is None:
            if int(db.execute(_LINKED.sql).fetchone()[0]) == int(db.execute(_LAST_VARIANT.sql).fetchone()[0]):
                return 0
            linking = Linking.load(db)
        return linking.save(db)
    finally:
        if enabled:
            gc.enable()


def _write_recordings(db: sqlite3.Connection, changed: set[Recording]) -> None:
    """Each changed recording's row and ids. An id two recordings would share (one ISRC on both) goes to the
    lower-numbered; the other takes its exact key's."""
    ordered = sorted(changed, key=lambda r: r.number)
    wanted = [rec.id for rec in ordered]
    first: dict[str, int] = {}  # each id's lowest-numbered holder already written
    distinct = sorted(set(wanted))
    for start in range(0, len(distinct), 5000):
        first.update(db.execute(_IDS_TAKEN.sql, (json.dumps(distinct[start:start + 5000]),)).fetchall())
    rows, ids = [], []
    for rec, rec_id in zip(ordered, wanted, strict=True):
        if first.get(rec_id, rec.number) < rec.number:
            rec_id = rec.key_id
        rows.append((rec.number, rec_id, rec.title, rec.artist, int(rec.ambiguous), parse_title(rec.title).name))
        ids += [("isrc", isrc, rec.number) for isrc in rec.isrcs] + [(k, v, rec.number) for k, v in rec.ids]
    db.executemany(_SAVE_ID.sql, ids)
    db.executemany(_SAVE_RECORDING.sql, rows)


def _write_artists(db: sqlite3.Connection, artists: Artists, pending: list[tuple[int, Row, Link, str]]) -> None:
    """Each new variant's recording's artists (the index keys its rows are indexed under), and every artist name's
    id as it stands (a new alias can join two artists: all are written again), with a name as printed."""
    printed: dict[str, str] = {}
    keys: set[tuple[int, str]] = set()
    for _, _, link, credits in pending:
        for credit, shown in credited(credits):
            printed.setdefault(credit.main, shown)
            keys.add((link.recording.number, credit.main))
    db.executemany(_SAVE_MAIN.sql, sorted(keys))
    known = dict(db.execute(_PRINTED.sql).fetchall())
    db.executemany(_SAVE_NAME.sql, [(name, artists.id_of(name), known.get(name) or printed.get(name) or name)
                                    for name in artists.all_names()])


def add_enrichment(db: sqlite3.Connection, recording: int, mbid: str, isrc: str | None) -> bool:
    """Give a recording the MusicBrainz recording id found for it, and the ISRC MusicBrainz gives when the recording
    has none and no other recording carries it (an enrichment never makes an id ambiguous); True if the ISRC went in.
    In the caller's transaction."""
    db.execute(_SAVE_ID.sql, ("musicbrainz_recording", mbid, recording))
    if isrc is None or db.execute(_HAS_ISRC.sql, (recording,)).fetchone() is not None \
            or db.execute(_ISRC_ELSEWHERE.sql, (isrc, recording)).fetchone() is not None:
        return False
    db.execute(_SAVE_ID.sql, ("isrc", isrc, recording))
    return True


def _apply_enrichment(db: sqlite3.Connection, changed: set[Recording]) -> None:
    """The enrichment kept for any row form of a changed recording, (re)applied: after a rebuild every recording is
    new, so what `chartgw enrich musicbrainz` found is given back to the recording holding the row form it was
    asked for (`identity_enrichment` is keyed by that row form's exact key, the stablest evidence a recording has)."""
    if not changed or db.execute(_ANY_ENRICHED.sql).fetchone() is None:
        return
    holder = {key: rec for rec in changed for key in rec.exact_keys}
    keys = sorted(holder)
    for start in range(0, len(keys), 5000):
        chunk = json.dumps(keys[start:start + 5000])
        for key, mbid, isrc in db.execute(_ENRICHED.sql, (chunk,)).fetchall():
            add_enrichment(db, holder[key].number, mbid, isrc)
