"""The artist-history index file's tables and every statement the index runs on it, as data.

The layout (`SCHEMA`, with the indexes a bulk build defers and identity's tables beside it) and the statements of
the build, the catch-up and the Genius lookups are declared here once, so tests/test_store_schema.py compiles each
against the tables before anything runs it. The /artist-history reads, composed per request, are
`chartgw.index.artist_history.storage`'s.
"""

from __future__ import annotations

from chartgw.api.group import PLATFORM_ID, EntryMapping
from chartgw.index.identity import links as identity
from chartgw.store import Query

__all__ = ["CREATE", "DEFERRED", "DEFERRED_INDEXES", "ID_COLUMNS", "QUERIES", "ROW_SELECT", "SCHEMA", "SCHEMA_VERSION",
           "VARIANT_ID_COLUMNS"]

ID_COLUMNS: tuple[str, ...] = EntryMapping.ID_KINDS
"""Id columns of a variant, named as the spec's parameters (plus `asin`, which the retail groups carry)."""
VARIANT_ID_COLUMNS: tuple[str, ...] = (*ID_COLUMNS, PLATFORM_ID)
"""A variant's id columns: the spec's, then `platform_id` ("melon_song:38123338": a platform's own song id, what
recording identity's `platform_id` tier links by; no /artist-history response shows it)."""
LYRICS_SONG = ID_COLUMNS.index("lyrics_song_id")
LYRICS_ARTIST = ID_COLUMNS.index("lyrics_artist_id")

BULK_CACHE_KIB = 512 * 1024
"""SQLite page cache of a bulk build (the default is 2 MB): the key and chart indexes stay in memory."""
BULK_CHECKPOINT_PAGES = 100_000
"""WAL pages between checkpoints in a bulk build (the default is 1000): the key index's pages, written by
every batch, are copied into the file a few times instead of after every commit."""
CACHE_KIB = 64 * 1024
"""SQLite page cache of an incremental run."""

SCHEMA_VERSION = 8
"""`PRAGMA user_version` of the layout below; a file of an earlier one is dropped and built again (5: track keys
fold version marks, `chartgw.core.text.title_key`; 6: variants keep a platform's song id, `platform_id`; 7: a track
is recording identity's recording, its id the recording's number; 8: identity's artists are the index's artist
keys, `identity_artist_names` and `identity_recording_artists` keyed by them)."""
DEFERRED = (
    Query("tracks_by_key", "CREATE INDEX IF NOT EXISTS tracks_by_key ON tracks (track_key)"),
    Query("artists_by_key", "CREATE UNIQUE INDEX IF NOT EXISTS artists_by_key ON artists (key)"),
    Query("variants_by_key", "CREATE UNIQUE INDEX IF NOT EXISTS variants_by_key ON variants (variant_key)"),
    Query("variants_by_track", "CREATE INDEX IF NOT EXISTS variants_by_track ON variants (track_id)"),
    *(Query(f"variants_by_{c}", f"CREATE INDEX IF NOT EXISTS variants_by_{c} ON variants ({c}) WHERE {c} IS NOT NULL")
      for c in ID_COLUMNS))
"""Created after the rows on a bulk build (one sort each instead of millions of scattered inserts)."""
DEFERRED_INDEXES = "".join(f"{q.sql};" for q in DEFERRED)
DROP_DEFERRED = tuple(Query(f"drop {q.name}", f"DROP INDEX IF EXISTS {q.name}") for q in DEFERRED)
"""What a bulk build drops at its start (a killed one may have left them)."""

_ARTIST_SUMS = """
    artist_id INTEGER NOT NULL,
    chart_id INTEGER NOT NULL,
    track_id INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    first_date TEXT NOT NULL,
    last_date TEXT NOT NULL,
    best_rank INTEGER NOT NULL,
    PRIMARY KEY (artist_id, chart_id, track_id)
"""
"""The columns of `artist_tracks` and of the scratch table it is summed into (`ARTIST_SUMS_SCRIPT`)."""

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sources (
    source TEXT PRIMARY KEY,
    last_snapshot_id INTEGER NOT NULL,
    indexed_at TEXT NOT NULL,
    rows INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS charts (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    chart TEXT NOT NULL,
    market TEXT NOT NULL,
    UNIQUE (source, chart, market)
);
CREATE TABLE IF NOT EXISTS tracks (
    id INTEGER PRIMARY KEY,
    track_key TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS variants (
    id INTEGER PRIMARY KEY,
    variant_key TEXT NOT NULL,
    track_id INTEGER NOT NULL,
    title TEXT,
    artist TEXT NOT NULL,
    credits TEXT NOT NULL,
    {", ".join(f"{c} TEXT" for c in VARIANT_ID_COLUMNS)}
);
CREATE TABLE IF NOT EXISTS appearances (
    chart_id INTEGER NOT NULL,
    chart_date TEXT NOT NULL,
    track_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    hours INTEGER,
    hour_mask INTEGER,
    snapshot_id INTEGER NOT NULL,
    variant_id INTEGER NOT NULL,
    PRIMARY KEY (chart_id, chart_date, track_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS artists (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS appearance_artists (
    artist_id INTEGER NOT NULL,
    chart_date TEXT NOT NULL,
    row_id INTEGER NOT NULL,
    chart_id INTEGER NOT NULL,
    track_id INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    PRIMARY KEY (artist_id, chart_date, row_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS artist_tracks ({_ARTIST_SUMS}) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS artist_links (
    a TEXT NOT NULL,
    b TEXT NOT NULL,
    PRIMARY KEY (a, b)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS id_keys (
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (kind, value, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS id_keys_by_key ON id_keys (key);
CREATE TABLE IF NOT EXISTS lyrics_lookups (
    track_key TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    artist_key TEXT NOT NULL,
    song_id TEXT,
    artist_id TEXT,
    asked_at TEXT NOT NULL
) WITHOUT ROWID;
"""
# `tracks`: recording identity's recordings (`id` = `identity_links.recording`, the number of the recording a variant
# is linked to as it is written), each with the track key (`chartgw.index.credits.track_key`) of the row form that
# made it, what the Genius lookups are keyed by; `variants.track_id` is the variant's recording.
# `artists`: the artist keys (`appearance_artists` holds their ids). `artist_tracks`: `appearance_artists` summed
# by artist, chart and track (what a coverage without dates reads).
# `fetch_log` (migrated in beside these) has the snapshot store's layout: one row per group an index run read
# something from (or failed on), so the status page and the platform's fetch-log readers show indexing runs like crawls.
# `lyrics_lookups`: what `chartgw enrich artist-history-api lyrics` asked Genius, by track (a miss has no ids),
# kept across rebuilds; a resolved track's variants carry its ids unless their entries gave their own.

CREATE = SCHEMA + DEFERRED_INDEXES + identity.SCHEMA
"""The whole layout of an index file (a bulk build drops the deferred indexes again at its start)."""

# --- the file's layout version and its start ------------------------------------------------------

USER_VERSION = Query("index layout version", "PRAGMA user_version")
SET_USER_VERSION = Query("set index layout version", f"PRAGMA user_version = {SCHEMA_VERSION}")
META_DEFAULTS = Query("index meta defaults", "INSERT OR IGNORE INTO meta VALUES ('cursor_secret', ?1), ('next_row_id', '1'),"
                                             " ('artist_tracks', 'ok')")
KEPT_TABLES = ("lyrics_lookups", "sqlite_sequence")
"""What an index file of an earlier layout keeps: the Genius lookups."""

# --- a run: its start and end ---------------------------------------------------------------------

CHARTS = Query("index charts", "SELECT id, source, chart, market FROM charts")
NEXT_VARIANT = Query("index next variant id", "SELECT coalesce(max(id), 0) + 1 FROM variants")
NEXT_ARTIST = Query("index next artist id", "SELECT coalesce(max(id), 0) + 1 FROM artists")
SOURCES_COUNT = Query("index sources", "SELECT count(*) FROM sources")
ANY_APPEARANCE = Query("index has rows", "SELECT count(*) FROM (SELECT 1 FROM appearances LIMIT 1)")
ARTIST_TRACKS_STATE = Query("index artist sums state", "SELECT value FROM meta WHERE name = 'artist_tracks'")
ARTIST_TRACKS_STALE = Query("index artist sums stale", "UPDATE meta SET value = 'stale' WHERE name = 'artist_tracks'")
ARTIST_TRACKS_OK = Query("index artist sums ok", "UPDATE meta SET value = 'ok' WHERE name = 'artist_tracks'")
RESOLVED_LYRICS = Query("index resolved lyrics", "SELECT track_key, song_id, artist_id FROM lyrics_lookups"
                                                 " WHERE song_id IS NOT NULL")
BULK_CACHE = Query("index bulk cache", f"PRAGMA cache_size=-{BULK_CACHE_KIB}")
TEMP_CACHE = Query("index run temp cache", f"PRAGMA temp.cache_size=-{CACHE_KIB}")
"""The temporary tables' page cache (2 MB by default): `VARIANT_ARTISTS` is read for every new row (10M rows' key rows
made from 230k variants: 4.3 CPU s a 2M-row sample against 5.1 with the default)."""
RUN_CACHE = Query("index run cache", f"PRAGMA cache_size=-{CACHE_KIB}")
UNSYNCED = Query("index bulk unsynced", "PRAGMA synchronous=OFF")
"""Process-kill safe in WAL mode; after a power cut, rebuild."""
SYNCED = Query("index synced", "PRAGMA synchronous=FULL")
BULK_AUTOCHECKPOINT = Query("index bulk autocheckpoint", f"PRAGMA wal_autocheckpoint={BULK_CHECKPOINT_PAGES}")
AUTOCHECKPOINT = Query("index autocheckpoint", "PRAGMA wal_autocheckpoint=1000")
PASSIVE_CHECKPOINT = Query("index passive checkpoint", "PRAGMA wal_checkpoint(PASSIVE)")
_SUMMED = ("SELECT artist_id, chart_id, track_id, count(*), min(chart_date), max(chart_date), min(rank)"
           " FROM appearance_artists")
"""`artist_tracks`' columns summed from an artist's rows (its WHERE and GROUP BY are the statement's)."""
ARTIST_IDS = Query("index artist ids", "SELECT id FROM artists")
CLEAR_ARTIST_TRACKS = Query("index clear artist sums", "DELETE FROM artist_tracks")
ARTIST_SUMS_SCRIPT = ("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
                      f" CREATE TABLE IF NOT EXISTS artist_sums ({_ARTIST_SUMS}) WITHOUT ROWID;")
"""The scratch file `artist_tracks` is summed into (`chartgw.index.sums`): a name of its own, so that a statement on
a connection with both files finds each table by its name alone."""
ATTACH_ASIDE = Query("index attach the other file", "ATTACH DATABASE ? AS aside")
"""The sums' connection attaches the index, the index's writer the sums: each then names the other's tables alone."""
DETACH_ASIDE = Query("index detach the other file", "DETACH DATABASE aside")
SUM_ARTIST_ASIDE = Query("index sum one artist", f"INSERT INTO artist_sums {_SUMMED} WHERE artist_id = ?1"
                         " AND chart_id >= ?2 AND chart_id < ?3 GROUP BY chart_id, track_id")
"""One artist's sums on the charts numbered from ?2 up to ?3 (`chartgw.index.sums` sums a bulk build in parts)."""
NEXT_CHART_ID = Query("index next chart id", "SELECT coalesce(max(id), 0) + 1 FROM charts")
COPY_ARTIST_SUMS = Query("index copy artist sums", "INSERT INTO artist_tracks SELECT * FROM artist_sums")

# --- a group's batches ----------------------------------------------------------------------------

SOURCE_MARK = Query("index source mark", "SELECT last_snapshot_id FROM sources WHERE source = ?")
SET_SOURCE_MARK = Query("index set source mark", "INSERT INTO sources (source, last_snapshot_id, indexed_at, rows)"
                        " VALUES (?, ?, ?, ?) ON CONFLICT (source) DO UPDATE SET last_snapshot_id = excluded.last_snapshot_id,"
                        " indexed_at = excluded.indexed_at, rows = rows + excluded.rows")
INDEX_ROWS = Query("index rows", "SELECT coalesce(sum(rows), 0) FROM sources")
"""The index's rows (its `sources` table counts them per group: `chartgw storage`)."""
SAVEPOINT = Query("index batch savepoint", "SAVEPOINT batch")
ROLLBACK_SAVEPOINT = Query("index batch rollback", "ROLLBACK TO batch")
RELEASE_SAVEPOINT = Query("index batch release", "RELEASE batch")

# --- writing a batch ------------------------------------------------------------------------------

VARIANT_BY_KEY = Query("index variant by key", "SELECT id, track_id FROM variants WHERE variant_key = ?")
ARTIST_BY_KEY = Query("index artist by key", "SELECT id FROM artists WHERE key = ?")
VARIANT_TEXT = Query("index variant text", "SELECT variant_key, credits FROM variants WHERE id = ?")
NEXT_ROW_ID = Query("index next row id", "SELECT value FROM meta WHERE name = 'next_row_id'")
SET_NEXT_ROW_ID = Query("index set next row id", "UPDATE meta SET value = ? WHERE name = 'next_row_id'")
SELECT_DAY = Query("index chart day", "SELECT track_id, id, rank, hours, hour_mask, snapshot_id, variant_id FROM appearances"
                                      " WHERE chart_id = ? AND chart_date = ?")
_INSERT = ("INSERT INTO appearances (chart_id, chart_date, track_id, id, rank, hours, hour_mask, snapshot_id, variant_id)"
           " VALUES ")
_ROW = "(?, ?, ?, ?, ?, NULLIF(?, 0), NULLIF(?, 0), ?, ?)"
"""Python binds 0 far faster than None: no hours is written as 0 and stored NULL."""
INSERT = Query("index insert rows", _INSERT + _ROW)
ROWS_A_STATEMENT = 100
"""Rows in one `INSERT_ROWS`: Python's `executemany` spends about 0.6 us a statement of its own, more than SQLite
takes to insert a row (1M rows: 1.37 CPU s one a statement, 0.75 a hundred)."""
INSERT_ROWS = Query("index insert rows a hundred at a time", _INSERT + ", ".join([_ROW] * ROWS_A_STATEMENT))
UPDATE = Query("index update rows", "UPDATE appearances SET rank = ?, hours = NULLIF(?, 0), hour_mask = NULLIF(?, 0),"
               " snapshot_id = ?, variant_id = ? WHERE chart_id = ? AND chart_date = ? AND track_id = ?")
_NULLIF = "NULLIF(?, '')"
INSERT_VARIANT = Query("index insert variants",
                       "INSERT INTO variants (id, variant_key, track_id, title, artist, credits,"
                       f" {', '.join(VARIANT_ID_COLUMNS)})"
                       f" VALUES (?, ?, ?, {_NULLIF}, ?, ?, {', '.join([_NULLIF] * len(VARIANT_ID_COLUMNS))})")
INSERT_ARTISTS = Query("index insert artists", "INSERT INTO artists (id, key) VALUES (?, ?)")
INSERT_TRACKS = Query("index insert tracks", "INSERT INTO tracks (id, track_key) VALUES (?, ?)")
VARIANT_ARTISTS = Query("index run variant artists", "CREATE TEMP TABLE IF NOT EXISTS variant_artists ("
                        "variant_id INTEGER NOT NULL, artist_id INTEGER NOT NULL, PRIMARY KEY (variant_id, artist_id))"
                        " WITHOUT ROWID")
"""The artist keys of each variant a run has met (on the writer's connection alone): what a batch's new rows'
`appearance_artists` rows are made from in SQL (`KEYS_OF_NEW_ROWS`). Python's `sqlite3` binding each of 11.8M key
rows of the 10M-row build (6 parameters) cost 1.4 us a row more than SQLite making them."""
FORGET_VARIANT_ARTISTS = Query("index run forget variant artists", "DELETE FROM temp.variant_artists")
VARIANT_ARTIST = Query("index run variant artist", "INSERT OR IGNORE INTO temp.variant_artists VALUES (?, ?)")
KEYS_OF_NEW_ROWS = Query("index artist keys of new rows",
                         "INSERT OR REPLACE INTO appearance_artists SELECT k.artist_id, a.chart_date, a.id, a.chart_id,"
                         " a.track_id, a.rank FROM json_each(?1) d CROSS JOIN appearances a ON a.chart_id = d.value ->> 0"
                         " AND a.chart_date = d.value ->> 1 JOIN temp.variant_artists k ON k.variant_id = a.variant_id"
                         " WHERE a.id >= ?2 ORDER BY 1, 2, 3")
"""The key rows of a batch's new rows (their ids from ?2 up, on the batch's chart days ?1, a JSON list of [chart id,
date]), in key order: each insert lands near the last in `appearance_artists` (keyed by artist first)."""
KEYS_IN = Query("index artist keys in", "INSERT OR REPLACE INTO appearance_artists VALUES (?, ?, ?, ?, ?, ?)")
KEYS_SET = Query("index artist keys rank", "UPDATE appearance_artists SET rank = ? WHERE artist_id = ? AND chart_date = ?"
                                           " AND row_id = ?")
KEYS_OUT = Query("index artist keys out", "DELETE FROM appearance_artists WHERE artist_id = ? AND chart_date = ? AND row_id = ?")
ADD_ARTIST_TRACKS = Query("index add artist sums", "INSERT INTO artist_tracks VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE"
                          " SET rows = rows + excluded.rows, first_date = min(first_date, excluded.first_date),"
                          " last_date = max(last_date, excluded.last_date), best_rank = min(best_rank, excluded.best_rank)")
RECOUNT_CLEAR = Query("index recount clear", "DELETE FROM artist_tracks WHERE artist_id = ? AND chart_id = ? AND track_id = ?")
RECOUNT = Query("index recount", f"INSERT INTO artist_tracks {_SUMMED} WHERE artist_id = ? AND chart_id = ?"
                " AND track_id = ? GROUP BY artist_id, chart_id, track_id")
ADD_LINKS = Query("index artist links", "INSERT OR IGNORE INTO artist_links VALUES (?, ?)")
ADD_ID_KEYS = Query("index id keys", "INSERT OR IGNORE INTO id_keys VALUES (?, ?, ?)")
CHART_ID = Query("index chart id", "INSERT INTO charts (source, chart, market) VALUES (?, ?, ?) ON CONFLICT DO UPDATE"
                                   " SET source = excluded.source RETURNING id")

# --- Genius lookups -------------------------------------------------------------------------------

LOOKUPS = Query("lyrics_lookups", "SELECT * FROM lyrics_lookups")
"""Every Genius lookup (what a rebuild keeps)."""
KEEP_LOOKUP = Query("index keep lookup", "INSERT INTO lyrics_lookups VALUES (?, ?, ?, ?, ?, ?)")
SAVE_LOOKUP = Query("index save lookup", "INSERT OR REPLACE INTO lyrics_lookups VALUES (?, ?, ?, ?, ?, ?)")
LOOKUP_KEYS = Query("index lookup keys", "SELECT track_key, title, artist_key FROM lyrics_lookups")
REKEY_LOOKUP = Query("index rekey lookup", "UPDATE OR IGNORE lyrics_lookups SET track_key = ? WHERE track_key = ?")
_LYRICS_ARTISTS = ("INSERT OR IGNORE INTO id_keys SELECT 'lyrics_artist_id', l.artist_id, l.artist_key"
                   " FROM lyrics_lookups l WHERE l.artist_id IS NOT NULL")
LYRICS_ARTISTS = Query("index lyrics artists", _LYRICS_ARTISTS)
"""A Genius artist id is the asked primary artist's id (as a single-artist entry's ids are its artist's)."""
LYRICS_ARTISTS_OF_TRACK = Query("index lyrics artists of a track", _LYRICS_ARTISTS + " AND l.track_key = ?")
LYRICS_CANDIDATES = Query("index lyrics candidates",
    "SELECT t.track_key, v.title, v.credits, n.rows FROM (SELECT track_id, count(*) AS rows FROM appearances"
    " GROUP BY track_id) n JOIN tracks t ON t.id = n.track_id"
    " JOIN variants v ON v.id = (SELECT min(id) FROM variants WHERE track_id = t.id AND title IS NOT NULL)"
    " WHERE NOT EXISTS (SELECT 1 FROM variants w WHERE w.track_id = t.id AND w.lyrics_song_id IS NOT NULL)"
    " AND NOT EXISTS (SELECT 1 FROM lyrics_lookups l WHERE l.track_key = t.track_key"
    " AND (l.song_id IS NOT NULL OR l.asked_at >= ?))"
    " ORDER BY n.rows DESC, t.track_key LIMIT ?")
LYRICS_TO_VARIANTS = Query("index lyrics to variants",
                           "UPDATE variants SET lyrics_song_id = ?, lyrics_artist_id = ? WHERE lyrics_song_id IS NULL"
                           " AND track_id IN (SELECT id FROM tracks WHERE track_key = ?)")

# --- reading ----------------------------------------------------------------------------------------

ROW_SELECT = ("SELECT a.id, c.source, c.chart, c.market, a.chart_date, a.rank, v.title, v.artist, v.credits, a.hours, "
              + ", ".join(f"v.{c}" for c in ID_COLUMNS)
              + " FROM json_each(?) p CROSS JOIN appearances a ON a.chart_id = p.value ->> 0 AND a.chart_date = p.value ->> 1"
              " AND a.track_id = p.value ->> 2 JOIN charts c ON c.id = a.chart_id JOIN variants v ON v.id = a.variant_id")
"""What a reader selects for history rows, given a JSON list of their [chart id, chart date, track id]."""

QUERIES = (*DEFERRED, *DROP_DEFERRED,
           *(value for value in list(globals().values()) if isinstance(value, Query) and value not in DEFERRED + DROP_DEFERRED),
           Query("row select", ROW_SELECT), *identity.IDENTITY_INDEX_QUERIES)
"""Every statement the index runs on its file (compiled against `CREATE` in tests/test_store_schema.py)."""
