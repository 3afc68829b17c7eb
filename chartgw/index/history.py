"""The artist-history index: every chart appearance of every group, one row each, in a SQLite file of its own.

The index (`<data>/artist-history-api.sqlite`, named after the group that serves it so the platform's reader
opens it) is built from the groups' snapshot files through the `EntryMapping` each group declares; a group
without one is not indexed. A row is one appearance: its chart (`charts`: source group, chart = the snapshot
target without its `@date` suffix, market), chart date, track, rank, and its variant (`variants`: the title,
the artist as shown, the credited artists and the ids the entry carries, in columns named as the spec's
parameters; a track on a chart shows the same variant day after day, so a row holds integers). Charts
published several times a day (`EntryMapping.sub_daily_targets`) are folded to one row per track, chart and
day: the best rank of the day and the hours on chart.

Every credited artist (split on `,`, `&`, ` x `, `feat.`, `ft.`, `featuring`, `with`, and featured credits in
the title) has one key per row in `appearance_artists`, which also carries the row's chart, track and rank,
so a history page and a coverage are read from that table's key range alone. A credit printed in two scripts
("아이유(IU)") links its keys in `artist_links`; two single-artist entries that share an id (`id_keys`) are
taken to be one artist. Both are followed when a name is asked for.

Incremental and resumable: `sources` holds each group's last indexed snapshot id; `index_all()` indexes the
snapshots after it, one group's batch per `BEGIN IMMEDIATE ... COMMIT` (WAL), so a killed indexer leaves the
index as it was before that batch. Rows are keyed on (chart, chart date, track) and updated in place, so a
row keeps its id when a later snapshot of the same chart day is indexed (what keeps a paging cursor stable).
Snapshots are applied in id order, so a rebuild from scratch gives the same rows (as long as the groups have
not pruned snapshots meanwhile). A run over an empty index is a bulk build: the variant index is created at
its end and commits are not synced to disk (a killed bulk build still leaves whole batches; after a power
cut, rebuild).
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from chartgw.api.group import AFTER_CRAWL, EntryMapping
from chartgw.core import config
from chartgw.core import progress as steps
from chartgw.core.clock import Clock, utc_now
from chartgw.core.text import artist_aliases, artist_key, compact, split_artists, title_key
from chartgw.index.identity import links as identity
from chartgw.store import FETCH_LOG, Query, checkpoint, connect, group_db_path, iso, migrate, read_once
from chartgw.store import tables as store_tables

if TYPE_CHECKING:
    from chartgw.api.group import Group

__all__ = [
    "ID_COLUMNS",
    "INDEX_NAME",
    "ROW_SELECT",
    "SCHEMA_VERSION",
    "IndexResult",
    "LyricsTrack",
    "credit_keys",
    "credited_names",
    "index_all",
    "index_path",
    "index_source",
    "lyrics_candidates",
    "rebuild",
    "record_lyrics",
    "register_groups",
    "registered_groups",
    "source_groups",
]

INDEX_NAME = "artist-history-api"
ID_COLUMNS: tuple[str, ...] = EntryMapping.ID_KINDS
"""Id columns of a variant, named as the spec's parameters (plus `asin`, which the retail groups carry)."""
LYRICS_SONG = ID_COLUMNS.index("lyrics_song_id")
LYRICS_ARTIST = ID_COLUMNS.index("lyrics_artist_id")

BATCH_SNAPSHOTS = 500
"""Snapshots of one group indexed per transaction (a catch-up over a large file commits as it goes)."""
BULK_BATCH_SNAPSHOTS = 2000
"""The same in a bulk build (fewer, larger transactions; a track's days on a chart summed at once)."""
BULK_CACHE_KIB = 512 * 1024
"""SQLite page cache of a bulk build (the default is 2 MB): the key and chart indexes stay in memory."""
BULK_CHECKPOINT_PAGES = 100_000
"""WAL pages between checkpoints in a bulk build (the default is 1000): the key index's pages, written by
every batch, are copied into the file a few times instead of after every commit."""
CACHE_KIB = 64 * 1024
"""SQLite page cache of an incremental run."""

SCHEMA_VERSION = 5
"""`PRAGMA user_version` of the layout below; a file of an earlier one is dropped and built again (5: track keys
fold version marks, `chartgw.core.text.title_key`)."""
DEFERRED_INDEXES = ("CREATE UNIQUE INDEX IF NOT EXISTS tracks_by_key ON tracks (track_key);"
                    "CREATE UNIQUE INDEX IF NOT EXISTS artists_by_key ON artists (key);"
                    "CREATE UNIQUE INDEX IF NOT EXISTS variants_by_key ON variants (variant_key);"
                    "CREATE INDEX IF NOT EXISTS variants_by_track ON variants (track_id);"
                    + "".join(f"CREATE INDEX IF NOT EXISTS variants_by_{c} ON variants ({c}) WHERE {c} IS NOT NULL;"
                              for c in ID_COLUMNS))
"""Created after the rows on a bulk build (one sort each instead of millions of scattered inserts)."""
_DEFERRED_NAMES = re.findall(r"INDEX IF NOT EXISTS (\w+)", DEFERRED_INDEXES)

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
    {", ".join(f"{c} TEXT" for c in ID_COLUMNS)}
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
CREATE TABLE IF NOT EXISTS artist_tracks (
    artist_id INTEGER NOT NULL,
    chart_id INTEGER NOT NULL,
    track_id INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    first_date TEXT NOT NULL,
    last_date TEXT NOT NULL,
    best_rank INTEGER NOT NULL,
    PRIMARY KEY (artist_id, chart_id, track_id)
) WITHOUT ROWID;
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
# `artists`: the artist keys (`appearance_artists` holds their ids). `artist_tracks`: `appearance_artists` summed
# by artist, chart and track (what a coverage without dates reads).
# `fetch_log` (migrated in beside these) has the snapshot store's layout: one row per group an index run read
# something from (or failed on), so the status page and the platform's fetch-log readers show indexing runs like crawls.
# `lyrics_lookups`: what `chartgw enrich artist-history-api lyrics` asked Genius, by track (a miss has no ids),
# kept across rebuilds; a resolved track's variants carry its ids unless their entries gave their own.

_LOOKUPS = Query("lyrics_lookups", "SELECT * FROM lyrics_lookups")
"""Every Genius lookup (what a rebuild keeps)."""

ROW_SELECT = ("SELECT a.id, c.source, c.chart, c.market, a.chart_date, a.rank, v.title, v.artist, v.credits, a.hours, "
              + ", ".join(f"v.{c}" for c in ID_COLUMNS)
              + " FROM json_each(?) p CROSS JOIN appearances a ON a.chart_id = p.value ->> 0 AND a.chart_date = p.value ->> 1"
              " AND a.track_id = p.value ->> 2 JOIN charts c ON c.id = a.chart_id JOIN variants v ON v.id = a.variant_id")
"""What a reader selects for history rows, given a JSON list of their [chart id, chart date, track id]."""

_INSERT = ("INSERT INTO appearances (chart_id, chart_date, track_id, id, rank, hours, hour_mask, snapshot_id, variant_id)"
           " VALUES (?, ?, ?, ?, ?, NULLIF(?, 0), NULLIF(?, 0), ?, ?)")
# Python binds 0 far faster than None: no hours is written as 0 and stored NULL.
_UPDATE = ("UPDATE appearances SET rank = ?, hours = NULLIF(?, 0), hour_mask = NULLIF(?, 0), snapshot_id = ?,"
           " variant_id = ? WHERE chart_id = ? AND chart_date = ? AND track_id = ?")
_SELECT_DAY = ("SELECT track_id, id, rank, hours, hour_mask, snapshot_id, variant_id FROM appearances"
               " WHERE chart_id = ? AND chart_date = ?")
_NULLIF = "NULLIF(?, '')"
_INSERT_VARIANT = (f"INSERT INTO variants (id, variant_key, track_id, title, artist, credits, {', '.join(ID_COLUMNS)})"
                   f" VALUES (?, ?, ?, {_NULLIF}, ?, ?, {', '.join([_NULLIF] * len(ID_COLUMNS))})")

# --- credits --------------------------------------------------------------------------------------

_FEATURED = re.compile(r"[\(\[]\s*(?:feat\.?|ft\.?|featuring|with)\s+([^\)\]]*)[\)\]]", re.IGNORECASE)
_JOINERS = re.compile(r"\s+(?:feat\.?|ft\.?|featuring|with|x|vs\.?)\s+|\s*/\s*", re.IGNORECASE)
_OF_GROUP = re.compile(r"\s+of\s+.+$", re.IGNORECASE)


def _split_credit(text: str) -> list[str]:
    featured = [f for inner in _FEATURED.findall(text) for f in _split_credit(_OF_GROUP.sub("", inner))]
    rest = _FEATURED.sub(" ", text)
    names = [name for part in _JOINERS.split(rest) for name in split_artists(part)]
    return names + featured


def credited_names(artist: str, artists: Sequence[str], title: str | None = None) -> list[str]:
    """Every artist one entry credits, once each: the credited list split on `,`, `&`, ` x `, `feat.`,
    `ft.`, `featuring`, `with` and `/`, plus artists featured in the title ("Song (feat. B)")."""
    names: list[str] = []
    for credit in list(artists) or [artist]:
        names += _split_credit(credit)
    if title:
        names += [f for inner in _FEATURED.findall(title) for f in _split_credit(_OF_GROUP.sub("", inner))]
    seen: dict[str, str] = {}
    for name in names:
        key = compact(name)
        if key and key not in seen:
            seen[key] = name.strip()
    return list(seen.values())


def name_keys(name: str) -> set[str]:
    """The keys a name given by a client (or printed by a chart) is known by: each credited artist's
    name outside brackets and each name inside them."""
    return {key for part in credited_names(name, [name]) for key in artist_aliases(part)}


class _Credit(NamedTuple):
    names_json: str
    keys: tuple[str, ...]
    """One key per credited artist (its name outside brackets): what `appearance_artists` holds."""
    links: tuple[tuple[str, str], ...]
    """Alias pairs of one artist printed in two scripts ("아이유(IU)"): how a name in either script reaches the key."""
    single: str | None
    """The artist key when the entry credits one artist only."""


@lru_cache(maxsize=200_000)
def _credit(artist: str, artists: tuple[str, ...], title: str | None) -> _Credit:
    """An entry's credit as indexed (cached: the same credits recur in every snapshot)."""
    return _credit_of(credited_names(artist, artists, title))


def _credit_of(names: list[str]) -> _Credit:
    keys: dict[str, None] = {}
    links: list[tuple[str, str]] = []
    for name in names:
        keys[artist_key(name)] = None
        aliases = sorted(artist_aliases(name))
        links += [(a, b) for a in aliases for b in aliases if a != b]
    return _Credit(json.dumps(names, ensure_ascii=False), tuple(keys), tuple(links),
                   artist_key(names[0]) if len(names) == 1 else None)


@lru_cache(maxsize=50_000)
def credit_keys(names_json: str) -> tuple[str, ...]:
    """The artist keys rows of a variant with these stored credits are indexed under (the first is the
    first credited artist's)."""
    return _credit_of(json.loads(names_json)).keys


@lru_cache(maxsize=200_000)
def _track_key(title: str | None, artist: str) -> str:
    return f"{title_key(title) if title else ''}|{artist_key(artist)}"


# --- indexing -------------------------------------------------------------------------------------

def index_path() -> Path:
    return group_db_path(INDEX_NAME)


_REGISTRY: list[Iterable[Group]] = [()]
_LOOKUP: list[Callable[[str], Group] | None] = [None]


def register_groups(groups: Iterable[Group], named: Callable[[str], Group] | None = None) -> None:
    """Tell the index which groups exist, and index each one after its crawls commit. The registry
    (`chartgw.groups`) calls this once with GROUPS, which loads its groups when iterated, and its `named`, which
    loads one (a crawl's hook then loads only the group crawled): the index may not import the registry (it is
    below it in the import layers)."""
    _REGISTRY[0] = groups
    _LOOKUP[0] = named
    if index_source not in AFTER_CRAWL:
        AFTER_CRAWL.append(index_source)


def registered_groups() -> tuple[Group, ...]:
    """Every registered group but the index's own (those without an entry mapping included)."""
    return tuple(g for g in _REGISTRY[0] if g.name != INDEX_NAME)


def _source_group(name: str) -> Group | None:
    """The registered group `name` if the index reads it (by the registry's lookup when it gave one)."""
    lookup = _LOOKUP[0]
    if lookup is None:
        return next((g for g in source_groups() if g.name == name), None)
    try:
        group = lookup(name)
    except KeyError:
        return None
    return group if group.entries is not None and group.name != INDEX_NAME else None


def source_groups(groups: Iterable[Group] | None = None) -> list[Group]:
    """The groups the index reads: every registered group (or every one of `groups`) with an entry mapping."""
    return [g for g in (registered_groups() if groups is None else groups) if g.entries is not None and g.name != INDEX_NAME]


@dataclass(frozen=True)
class IndexResult:
    source: str
    snapshots: int
    """Snapshots indexed by this run."""
    rows: int
    """Rows written (added or updated; the snapshots of one day of a sub-daily chart in one batch count once)."""
    last_snapshot_id: int
    error: str | None = None
    duration_ms: int = 0
    """The time this source took, measured (not the run's clock, which may be a fixed one)."""


def open_index(path: Path | None = None) -> sqlite3.Connection:
    """The writer's connection, schema in place, WAL and synchronous=FULL as the snapshot store."""
    path = path or index_path()
    db = connect(path)
    migrated = db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION
    if migrated:
        # An earlier layout: start over (the marks go with it); only the Genius lookups and MusicBrainz enrichment
        # are kept.
        kept = ("lyrics_lookups", "sqlite_sequence", *identity.ENRICHMENT_TABLES)
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                   f" AND name NOT IN ({', '.join('?' * len(kept))})", kept).fetchall():
            db.execute(f'DROP TABLE IF EXISTS "{table}"')
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    db.executescript(SCHEMA + DEFERRED_INDEXES + identity.SCHEMA)
    migrate(db, (FETCH_LOG,))
    if migrated:
        rekey_lookups(db)
        db.execute(_LYRICS_ARTISTS)
    db.execute("INSERT OR IGNORE INTO meta VALUES ('cursor_secret', ?)", (os.urandom(16).hex(),))
    db.execute("INSERT OR IGNORE INTO meta VALUES ('next_row_id', '1')")
    db.execute("INSERT OR IGNORE INTO meta VALUES ('artist_tracks', 'ok')")
    return db


VariantKey = tuple[str, str | None, tuple[str, ...], tuple[str, ...]]
"""(artist as shown, title, credited list, ids: one per ID_COLUMNS, "" for none): what a variant is."""


@dataclass
class _Run:
    """What one indexing run keeps across its groups and batches (ids of the rows of `charts`, `tracks` and
    `variants` met so far)."""

    bulk: bool
    """The index was empty when the run began: the deferred indexes and the artist sums are built at its
    end, and a chart day this run has not written is not looked up (it cannot exist; see `index_group` for
    another indexer meanwhile)."""
    fresh: bool
    summing: bool = True
    """`artist_tracks` is kept as rows are written (False: it is summed again at the end of the run)."""
    charts: dict[tuple[str, str, str], int] = field(default_factory=dict)
    tracks: dict[str, int] = field(default_factory=dict)
    variants: dict[VariantKey, tuple[int, int]] = field(default_factory=dict)
    """Variant key -> (variant id, track id)."""
    variant_keys: dict[int, tuple[VariantKey, tuple[str, ...]]] = field(default_factory=dict)
    """Variant id -> (its key, the keys its credits are indexed under)."""
    written: set[tuple[int, str]] = field(default_factory=set)
    """(chart id, chart date) written by this run."""
    lyrics: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    """Track key -> (Genius song id, artist id) resolved by `chartgw enrich`, given to new variants."""
    token: object = field(default_factory=object)
    """Marks the variant slots (`_VARIANTS`) whose ids belong to this run."""
    readers: dict[str, _Prefetch] = field(default_factory=dict)
    """Reader processes started ahead of their group's turn."""
    artists: dict[str, int] = field(default_factory=dict)
    next_track: int = 1
    next_variant: int = 1
    next_artist: int = 1
    new_tracks: list[tuple[int, str]] = field(default_factory=list)
    new_artists: list[tuple[int, str]] = field(default_factory=list)
    new_variants: list[tuple[Any, ...]] = field(default_factory=list)
    """Tracks and variants met in the batch being written, written before its rows."""

    def forget(self, db: sqlite3.Connection) -> None:
        """Drop what a rolled-back batch may have added, and look everything up from now on (with the indexes
        a bulk build defers)."""
        if self.bulk and self.fresh:
            _create_deferred(db)
        self.fresh = False
        self.token = object()
        self.charts = {(s, c, m): i for i, s, c, m in db.execute("SELECT id, source, chart, market FROM charts")}
        self.tracks.clear()
        self.variants.clear()
        self.variant_keys.clear()
        self.next_track = db.execute("SELECT coalesce(max(id), 0) + 1 FROM tracks").fetchone()[0]
        self.next_variant = db.execute("SELECT coalesce(max(id), 0) + 1 FROM variants").fetchone()[0]
        self.next_artist = db.execute("SELECT coalesce(max(id), 0) + 1 FROM artists").fetchone()[0]
        self.artists.clear()
        self.new_artists.clear()
        self.new_tracks.clear()
        self.new_variants.clear()


def _begin_run(db: sqlite3.Connection) -> _Run:
    bulk = db.execute("SELECT count(*) FROM sources").fetchone()[0] == 0 and \
        db.execute("SELECT count(*) FROM (SELECT 1 FROM appearances LIMIT 1)").fetchone()[0] == 0
    run = _Run(False, False)
    run.forget(db)
    run.bulk = run.fresh = bulk
    run.summing = not bulk and db.execute("SELECT value FROM meta WHERE name = 'artist_tracks'").fetchone()[0] == "ok"
    if not run.summing:  # a killed bulk build left it behind: said so until summed again
        db.execute("UPDATE meta SET value = 'stale' WHERE name = 'artist_tracks'")
    run.lyrics = {k: (s, a) for k, s, a in db.execute(
        "SELECT track_key, song_id, artist_id FROM lyrics_lookups WHERE song_id IS NOT NULL")}
    db.execute(f"PRAGMA cache_size=-{BULK_CACHE_KIB if bulk else CACHE_KIB}")
    if bulk:
        for name in _DEFERRED_NAMES:
            db.execute(f"DROP INDEX IF EXISTS {name}")
        db.execute("PRAGMA synchronous=OFF")  # process-kill safe in WAL mode; after a power cut, rebuild
        db.execute(f"PRAGMA wal_autocheckpoint={BULK_CHECKPOINT_PAGES}")
    return run


def _end_run(db: sqlite3.Connection, run: _Run) -> None:
    identity.link_new(db)  # the recordings of the variants this run wrote (docs/identity.md)
    if not run.summing:
        _sum_artist_tracks(db)
    if run.bulk:
        _create_deferred(db)
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA wal_autocheckpoint=1000")
        checkpoint(db)
    else:
        db.execute("PRAGMA wal_checkpoint(PASSIVE)")


def _sum_artist_tracks(db: sqlite3.Connection) -> None:
    """`artist_tracks` summed again from `appearance_artists`, one artist at a time (a bulk build sums at its
    end rather than as it goes: one sort per artist's rows instead of an upsert per artist, chart, track and
    batch). Until then `meta.artist_tracks` is 'stale' and coverage counts the rows themselves."""
    artists = [k for (k,) in db.execute("SELECT id FROM artists")]
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("DELETE FROM artist_tracks")
        for artist_id in artists:
            db.execute("INSERT INTO artist_tracks SELECT artist_id, chart_id, track_id, count(*), min(chart_date),"
                       " max(chart_date), min(rank) FROM appearance_artists WHERE artist_id = ?"
                       " GROUP BY chart_id, track_id", (artist_id,))
        db.execute("UPDATE meta SET value = 'ok' WHERE name = 'artist_tracks'")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _start_reader(db: sqlite3.Connection, run: _Run, group: Group, batch: int) -> None:
    """Start `group`'s reader process (when it has enough to read) before its turn."""
    path = group_db_path(group.name)
    if group.entries is None or not path.exists():
        return
    row = db.execute("SELECT last_snapshot_id FROM sources WHERE source = ?", (group.name,)).fetchone()
    src = connect(path, readonly=True)
    try:
        reader = _Prefetch.start(src, path, group.entries, int(row[0]) if row else 0,
                                 BULK_BATCH_SNAPSHOTS if run.bulk and batch == BATCH_SNAPSHOTS else batch)
    finally:
        src.close()
    if reader is not None:
        run.readers[group.name] = reader


def _create_deferred(db: sqlite3.Connection) -> None:
    """The indexes a bulk build defers, one statement each (in the transaction in progress, if any)."""
    for statement in DEFERRED_INDEXES.split(";"):
        if statement.strip():
            db.execute(statement)


@contextmanager
def _without_gc() -> Iterator[None]:
    """The cyclic garbage collector paused: an indexing run allocates millions of short-lived tuples and
    no cycles, and the collector's passes over a batch held in memory cost a third of the run."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def index_all(groups: Iterable[Group] | None = None, *, now: Clock = utc_now, path: Path | None = None,
              batch: int = BATCH_SNAPSHOTS) -> list[IndexResult]:
    """Catch every source group up from its last indexed snapshot. Idempotent: a second run indexes nothing."""
    db = open_index(path)
    try:
        run = _begin_run(db)
        try:
            with _without_gc():
                sources = source_groups(groups)
                steps.expect(sum(_pending_count(db, group) for group in sources), "snapshots")
                results = []
                for n, group in enumerate(sources):
                    if n + 1 < len(sources):  # the next group's reader starts now, so its first batch is ready
                        _start_reader(db, run, sources[n + 1], batch)
                    results.append(_logged(db, group, now, batch, run))
        finally:
            for reader in run.readers.values():
                reader.stop()
        _end_run(db, run)  # not after an interruption: the next run finishes what this one left
        return results
    finally:
        db.close()


def _pending_count(db: sqlite3.Connection, group: Group) -> int:
    """Snapshots of `group` not indexed yet (what a progress bar counts down); 0 for a missing or broken file."""
    path = group_db_path(group.name)
    if not path.exists():
        return 0
    row = db.execute("SELECT last_snapshot_id FROM sources WHERE source = ?", (group.name,)).fetchone()
    try:
        src = connect(path, readonly=True, timeout=30.0)
        try:
            return int(src.execute("SELECT count(*) FROM snapshots WHERE id > ?", (row[0] if row else 0,)).fetchone()[0])
        finally:
            src.close()
    except sqlite3.Error:
        return 0


def _logged(db: sqlite3.Connection, group: Group, now: Clock, batch: int, run: _Run) -> IndexResult:
    """`index_group`, with a fetch-log row when it indexed something or failed; a failing source (a broken
    file) does not stop the others."""
    started, clock = now(), time.monotonic()
    try:
        result = index_group(db, group, now=now, batch=batch, run=run)
    except (sqlite3.Error, ValueError, OSError) as exc:
        row = db.execute("SELECT last_snapshot_id FROM sources WHERE source = ?", (group.name,)).fetchone()
        result = IndexResult(group.name, 0, 0, int(row[0]) if row else 0, f"{type(exc).__name__}: {exc}")
    result = replace(result, duration_ms=int((time.monotonic() - clock) * 1000))
    if result.snapshots or result.error:
        db.execute("INSERT INTO fetch_log (target, started_at, duration_ms, status, rows, url, error)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (group.name, iso(started), result.duration_ms, "failed" if result.error else "ok",
                    result.rows, f"{group.name}.sqlite", result.error))
    return result


def index_source(name: str, *, now: Clock = utc_now) -> IndexResult | None:
    """Index one group's snapshots committed since the last run: the crawl runner's hook after a commit.
    None for a group the index does not read (no entry mapping)."""
    group = _source_group(name)
    if group is None:
        return None
    db = open_index()
    try:
        run = _begin_run(db)
        with _without_gc():
            result = _logged(db, group, now, BATCH_SNAPSHOTS, run)
        _end_run(db, run)
        return result
    finally:
        db.close()


def rebuild(groups: Iterable[Group] | None = None, *, now: Clock = utc_now, path: Path | None = None) -> list[IndexResult]:
    """Drop the index and build it again from the groups' files; the Genius lookups and the MusicBrainz enrichment
    are kept (they came from an upstream, not from the groups' files; the enrichment goes back onto its recordings
    as the build links them)."""
    path = path or index_path()
    lookups = read_once(path, _LOOKUPS) or []
    enriched = {table: read_once(path, Query(f"kept_{table}", f'SELECT * FROM "{table}"')) or []
                for table in identity.ENRICHMENT_TABLES}
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    if lookups or any(enriched.values()):
        db = open_index(path)
        try:
            db.executemany("INSERT INTO lyrics_lookups VALUES (?, ?, ?, ?, ?, ?)", lookups)
            rekey_lookups(db)
            db.execute(_LYRICS_ARTISTS)
            for table, rows in enriched.items():
                if rows:
                    db.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(rows[0]))})', rows)
        finally:
            db.close()
    return index_all(groups, now=now, path=path)


FIRST_BATCH_SNAPSHOTS = 100
"""The reader's first batch (then full ones)."""
PREFETCH_BATCHES = 4
"""A run with at least this many batches of one group pending reads them in a second process while it writes
(the reading, mostly JSON decoding and name normalisation, is half the work of a bulk build)."""


def index_group(db: sqlite3.Connection, group: Group, *, now: Clock = utc_now, batch: int = BATCH_SNAPSHOTS,
                run: _Run | None = None) -> IndexResult:
    """Index `group`'s snapshots after its last indexed one, `batch` snapshots per transaction."""
    assert group.entries is not None
    run = run or _begin_run(db)
    if run.bulk and batch == BATCH_SNAPSHOTS:
        batch = BULK_BATCH_SNAPSHOTS
    row = db.execute("SELECT last_snapshot_id FROM sources WHERE source = ?", (group.name,)).fetchone()
    last = int(row[0]) if row else 0
    source_path = group_db_path(group.name)
    if not source_path.exists():
        return IndexResult(group.name, 0, 0, last)
    src = connect(source_path, readonly=True)
    snapshots = rows = 0
    reader = run.readers.pop(group.name, None) or _Prefetch.start(src, source_path, group.entries, last, batch)
    try:
        while True:
            try:
                pending, folded, slots = (reader.next() if reader is not None
                                          else _read_next(src, group.entries, last, batch))
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    break
                raise
            if not pending:
                break
            db.execute("BEGIN IMMEDIATE")
            try:
                # Another indexer (cron beside a crawl's hook) may have committed meanwhile: never apply a
                # snapshot twice, nor move the mark back.
                row = db.execute("SELECT last_snapshot_id FROM sources WHERE source = ?", (group.name,)).fetchone()
                done = int(row[0]) if row else 0
                todo = [s for s in pending if s[0] > done]
                new = 0
                if todo:
                    if len(todo) < len(pending):
                        folded, slots = _unfolded(_read_batch(src, group.entries, todo)), None
                    db.execute("SAVEPOINT batch")
                    try:
                        new = _write_batch(db, run, group.name, folded, slots)
                    except sqlite3.IntegrityError:
                        # Another indexer wrote a day of this chart while this run took the index to be
                        # empty: write the batch again, looking every day up.
                        db.execute("ROLLBACK TO batch")
                        run.forget(db)
                        new = _write_batch(db, run, group.name, folded, slots)
                    db.execute("RELEASE batch")
                    rows += len(folded)
                    snapshots += len(todo)
                if done > pending[-1][0] and reader is not None:  # the mark moved past what is prefetched
                    reader.stop()
                    reader = None
                last = max(int(pending[-1][0]), done)
                db.execute("INSERT INTO sources (source, last_snapshot_id, indexed_at, rows) VALUES (?, ?, ?, ?)"
                           " ON CONFLICT (source) DO UPDATE SET last_snapshot_id = excluded.last_snapshot_id,"
                           " indexed_at = excluded.indexed_at, rows = rows + excluded.rows",
                           (group.name, last, iso(now()), new))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                run.forget(db)  # what the batch created is gone with it
                raise
            steps.advance(len(pending))
    finally:
        if reader is not None:
            reader.stop()
        src.close()
    return IndexResult(group.name, snapshots, rows, last)


def _pending(src: sqlite3.Connection, after: int, batch: int) -> list[tuple[Any, ...]]:
    return src.execute(store_tables.SNAPSHOTS_AFTER.sql, (after, batch)).fetchall()


def _read_next(src: sqlite3.Connection, mapping: EntryMapping, after: int,
               batch: int) -> tuple[list[tuple[Any, ...]], list[Any], list[list[Any]] | None]:
    """The next batch of snapshots after `after`, and their rows (`_write_batch`'s arguments)."""
    pending = _pending(src, after, batch)
    return pending, _unfolded(_read_batch(src, mapping, pending)) if pending else [], None


Pending = list[tuple[int, str, str, int | None, str]]
"""Snapshots of a batch: id, target, chart date, chart hour, fetched at."""
NewVariant = tuple[int, VariantKey, str, str, list[str], list[tuple[str, str]], str | None]
"""A variant the reader met first in a batch: its number, key, track key and credit (names, keys, links, single)."""
Packed = tuple[Pending, list[NewVariant], list[tuple[str, str, str, int, int, int, int, int]], str | None]
"""A prefetched batch: its snapshots, the variants met first in it, its rows (the variant as its number), and an
error (the reader's message; the batch is empty)."""
_encode_packed = msgspec.msgpack.Encoder().encode
_decode_packed = msgspec.msgpack.Decoder(Packed).decode


class _Prefetch:
    """Reads a group's batches in a second Python process, ahead of the writer (the pipe's buffer holds it back):
    each batch's rows are sent as (chart, market, chart date, rank, hours, hour mask, snapshot id, variant number)
    with the batch's variant keys (MessagePack frames), and get their variant slots back on this side."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.slots: list[list[Any]] = []
        """Variant slots by the reader's numbers."""

    @classmethod
    def start(cls, src: sqlite3.Connection, path: Path, mapping: EntryMapping, after: int, batch: int) -> _Prefetch | None:
        """A reader process for a run with PREFETCH_BATCHES batches or more pending (None: read in this one)."""
        try:
            pending = src.execute(store_tables.PENDING_AFTER.sql, (after,)).fetchone()[1]
            job = pickle.dumps((str(path), mapping, after, batch))
        except (sqlite3.OperationalError, pickle.PicklingError, AttributeError, TypeError):
            return None  # no snapshots table yet, or a mapping that cannot cross to another process
        if pending < PREFETCH_BATCHES * batch:
            return None
        process = subprocess.Popen([sys.executable, "-c", "from chartgw.index.history import prefetch_main;"
                                    " prefetch_main()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert process.stdin is not None
        process.stdin.write(job)
        process.stdin.close()
        return cls(process)

    def next(self) -> tuple[list[tuple[Any, ...]], list[Any], list[list[Any]] | None]:
        assert self.process.stdout is not None
        head = self.process.stdout.read(4)
        body = self.process.stdout.read(int.from_bytes(head, "big")) if len(head) == 4 else b""
        if not body:
            raise OSError(f"the index's reader process ended (exit status {self.process.wait()})")
        pending, variants, packed, error = _decode_packed(body)
        if error is not None:
            raise sqlite3.OperationalError(error)
        for number, key, track_key, names, keys, links, single in variants:
            slot = _VARIANTS.get(key)
            if slot is None:  # the reader normalised its names: take its credit
                if len(_VARIANTS) >= _VARIANTS_MAX:
                    _VARIANTS.clear()
                credit = _Credit(names, tuple(keys), tuple((a, b) for a, b in links), single)
                slot = _VARIANTS[key] = [key, track_key, credit, None, 0, 0, None, ()]
            if number == len(self.slots):
                self.slots.append(slot)
            else:
                self.slots[number] = slot
        return list(pending), packed, self.slots

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def prefetch_main() -> None:
    """The reader process (`_Prefetch`): its job pickled on stdin, every batch after the job's mark on stdout
    as a length-prefixed MessagePack frame, then an empty batch."""
    gc.disable()
    path, mapping, after, full = pickle.load(sys.stdin.buffer)
    batch = min(full, FIRST_BATCH_SNAPSHOTS)  # a small first batch, so the writer starts soon
    out = sys.stdout.buffer

    def send(message: Packed) -> None:
        body = _encode_packed(message)
        out.write(len(body).to_bytes(4, "big") + body)
        out.flush()

    src = connect(Path(path), readonly=True)
    sent, numbers = object(), 0
    try:
        while True:
            pending = _pending(src, after, batch)
            if not pending:
                send(([], [], [], None))
                return
            variants: list[NewVariant] = []
            packed: list[tuple[Any, ...]] = []
            add = packed.append
            for (chart, market, chart_date, _), (rank, hours, mask, snapshot_id, slot) in _read_batch(
                    src, mapping, pending).items():
                if slot[_OWNER] is not sent:  # numbered and sent once (again if the slot cache was cleared)
                    slot[_OWNER], slot[_VARIANT_ID] = sent, numbers
                    credit = slot[_CREDIT]
                    variants.append((numbers, slot[_KEY], slot[_TRACK_KEY], credit.names_json, list(credit.keys),
                                     list(credit.links), credit.single))
                    numbers += 1
                add((chart, market, chart_date, rank, hours, mask, snapshot_id, slot[_VARIANT_ID]))
            send((pending, variants, packed, None))
            after, batch = pending[-1][0], full
    except BrokenPipeError:
        pass  # the writer stopped reading
    except (sqlite3.Error, ValueError, OSError) as exc:
        send(([], [], [], f"{type(exc).__name__}: {exc}"))
    finally:
        src.close()


_decode = msgspec.json.Decoder().decode
_NO_IDS = ("",) * len(ID_COLUMNS)
_VARIANTS: dict[VariantKey, list[Any]] = {}
"""Variant key -> its slot: the same variants recur in every snapshot (any index file). A slot is a list:
[key, track key, credit, the run its ids below belong to, variant id, track id, links and id keys taken, the
ids of its credit's artist keys]."""
_VARIANTS_MAX = 500_000
_KEY, _TRACK_KEY, _CREDIT, _OWNER, _VARIANT_ID, _TRACK_ID, _NOTED, _ARTISTS = range(8)

Folded = dict[tuple[str, str, str, str], list[Any]]
"""A batch's entries folded into rows: (chart, market, chart date, track key) -> [rank, hours (0 for none),
hour mask (0 unless sub-daily), newest snapshot id, variant slot], in the order the rows were first met."""
_R, _H, _M, _S, _V = range(5)

Row = tuple[str, str, str, int, int, int, int, list[Any]]
"""A folded row as written: chart, market, chart date, rank, hours, hour mask, newest snapshot id, variant slot."""


def _unfolded(rows: Folded) -> list[Row]:
    return [(chart, market, chart_date, *values) for (chart, market, chart_date, _), values in rows.items()]


def _ids_maker(mapping: EntryMapping) -> Any:
    """A function of an entry's ids (kind -> value) to one value per ID_COLUMNS ("" for none); fast for the
    usual one kind per group."""
    if len(mapping.ids) == 1:
        (kind,) = mapping.ids
        at = ID_COLUMNS.index(kind)
        before, after = _NO_IDS[:at], _NO_IDS[at + 1:]
        return lambda found: (*before, found[kind], *after) if len(found) == 1 else \
            tuple(found.get(k, "") for k in ID_COLUMNS)
    return lambda found: tuple(found.get(k, "") for k in ID_COLUMNS)


def _slot(key: VariantKey) -> list[Any]:
    slot = _VARIANTS.get(key)
    if slot is None:
        if len(_VARIANTS) >= _VARIANTS_MAX:
            _VARIANTS.clear()
        artist, title, artists, _ = key
        slot = _VARIANTS[key] = [key, _track_key(title, artist), _credit(artist, artists, title), None, 0, 0, None, ()]
    return slot


def _read_batch(src: sqlite3.Connection, mapping: EntryMapping, snapshots: list[tuple[Any, ...]]) -> Folded:
    """The entries of `snapshots` (consecutive ids of one group) folded into rows, by the rules of `_fold`."""
    plan: dict[int, tuple[Any, ...]] = {}
    for snapshot_id, target, chart_date, chart_hour, fetched_at in snapshots:
        hour_mask = 0
        if mapping.is_sub_daily(target):
            hour = chart_hour if chart_hour is not None else int(str(fetched_at)[11:13])
            hour_mask = 1 << int(hour)
        plan[snapshot_id] = (str(target).partition("@")[0], hour_mask, mapping.reader(target), chart_date)
    decode, ids_of, known, no_ids = _decode, _ids_maker(mapping), _VARIANTS, _NO_IDS
    rows: Folded = {}
    current, step = None, None
    for snapshot_id, rank, record in src.execute(store_tables.ENTRIES_BETWEEN.sql, (snapshots[0][0], snapshots[-1][0])):
        if snapshot_id != current:
            current, step = snapshot_id, plan.get(snapshot_id)
        if step is None:
            continue
        try:
            data = decode(record)
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue
        entry = step[2](data) if isinstance(data, dict) else None
        if entry is None:
            continue
        key = (entry.artist, entry.title, tuple(entry.artists), ids_of(entry.ids) if entry.ids else no_ids)
        slot = known.get(key) or _slot(key)
        at = (step[0], entry.market or "global", step[3], slot[_TRACK_KEY])
        row = rows.get(at)
        mask = step[1]
        if row is None:
            rows[at] = [rank, 1 if mask else 0, mask, snapshot_id, slot]
        elif row[_S] != snapshot_id or rank < row[_R]:  # a chart listing a track twice counts its best rank
            _fold(row, rank, mask, snapshot_id, slot)
    return rows


def _fold(row: list[Any], rank: int, mask: int, snapshot_id: int, slot: list[Any]) -> None:
    """Fold what later snapshots say of a row (rank, hours, hour mask, newest snapshot, variant) into `row`:
    a sub-daily chart keeps the day's best rank and counts each hour once; any other chart takes the rank of
    its newest snapshot of that day (a re-crawl replaces the earlier one); the title, artist and credits are
    the newest; an id is the newest given, else the one held."""
    if mask:
        held = row[_M]
        row[_R] = min(row[_R], rank)
        row[_H] += (mask & ~held).bit_count()
        row[_M] = held | mask
    else:
        row[_R], row[_H], row[_M] = rank, 0, 0
    row[_S] = snapshot_id
    old = row[_V]
    if old is not slot:
        ids, held_ids = slot[_KEY][3], old[_KEY][3]
        merged = tuple(new if new != "" else was for new, was in zip(ids, held_ids, strict=True))
        row[_V] = slot if merged == ids else _slot((*slot[_KEY][:3], merged))


def _track_id(db: sqlite3.Connection, run: _Run, track_key: str) -> int:
    found = None if run.fresh else db.execute("SELECT id FROM tracks WHERE track_key = ?", (track_key,)).fetchone()
    if found is None:
        found = (run.next_track,)
        run.next_track += 1
        run.new_tracks.append((found[0], track_key))
    track_id = run.tracks[track_key] = int(found[0])
    return track_id


def _variant(db: sqlite3.Connection, run: _Run, slot: list[Any]) -> None:
    """Give `slot` its variant and track ids in this run's index, a new variant (with the track's Genius ids
    when the entry has none) being written with the batch."""
    key, track_key, credit = slot[_KEY], slot[_TRACK_KEY], slot[_CREDIT]
    found = run.variants.get(key)
    if found is None:
        text = json.dumps(key, ensure_ascii=False, separators=(",", ":"))
        row = None if run.fresh else db.execute("SELECT id, track_id FROM variants WHERE variant_key = ?",
                                                 (text,)).fetchone()
        if row is None:
            track_id = run.tracks.get(track_key) or _track_id(db, run, track_key)
            ids = list(key[3])
            lyrics = run.lyrics.get(track_key)
            if lyrics is not None and not ids[LYRICS_SONG]:
                ids[LYRICS_SONG], ids[LYRICS_ARTIST] = lyrics[0] or "", lyrics[1] or ""
            row = (run.next_variant, track_id)
            run.next_variant += 1
            run.new_variants.append((row[0], text, track_id, key[1] or "", key[0], credit.names_json, *ids))
        found = run.variants[key] = (int(row[0]), int(row[1]))
        run.tracks[track_key] = found[1]
        run.variant_keys[found[0]] = (key, credit.keys)
    slot[_OWNER], slot[_VARIANT_ID], slot[_TRACK_ID] = run.token, found[0], found[1]
    slot[_ARTISTS] = _artist_ids(db, run, credit.keys)


def _artist_ids(db: sqlite3.Connection, run: _Run, keys: Sequence[str]) -> tuple[int, ...]:
    """The ids of artist keys in this run's index, new ones written with the batch."""
    ids = []
    for key in keys:
        artist_id = run.artists.get(key)
        if artist_id is None:
            found = None if run.fresh else db.execute("SELECT id FROM artists WHERE key = ?", (key,)).fetchone()
            if found is None:
                found = (run.next_artist,)
                run.next_artist += 1
                run.new_artists.append((found[0], key))
            artist_id = run.artists[key] = int(found[0])
        ids.append(artist_id)
    return tuple(ids)


def _stored_variant(db: sqlite3.Connection, run: _Run, variant_id: int) -> tuple[VariantKey, tuple[str, ...]]:
    """(key, credit keys) of a variant written before this run."""
    known = run.variant_keys.get(variant_id)
    if known is None:
        text, credits = db.execute("SELECT variant_key, credits FROM variants WHERE id = ?", (variant_id,)).fetchone()
        artist, title, artists, ids = json.loads(text)
        known = run.variant_keys[variant_id] = ((artist, title, tuple(artists), tuple(ids)), credit_keys(credits))
    return known


def _write_batch(db: sqlite3.Connection, run: _Run, source: str, batch: list[Any],
                 slots: list[list[Any]] | None = None) -> int:
    """Write a batch's rows (`Row`s; or, with `slots`, rows whose last field is a number in `slots`), each folded
    into the row already stored for its chart, day and track (`_fold`); returns the rows added."""
    loaded: set[tuple[int, str]] = set()
    stored: dict[tuple[int, str, int], tuple[Any, ...]] = {}
    links: set[tuple[str, str]] = set()
    id_keys: set[tuple[str, str, str]] = set()
    inserts: list[tuple[Any, ...]] = []
    updates: list[tuple[Any, ...]] = []
    keys_in: list[tuple[Any, ...]] = []
    keys_set: list[tuple[Any, ...]] = []
    keys_out: list[tuple[Any, ...]] = []
    tally: dict[tuple[int, int, int], list[Any]] = {}
    recount: set[tuple[int, int, int]] = set()
    add_row, add_key = inserts.append, keys_in.append
    charts, fresh, written, token, summing = run.charts, run.fresh, run.written, run.token, run.summing
    next_id = int(db.execute("SELECT value FROM meta WHERE name = 'next_row_id'").fetchone()[0])
    last_chart = last_market = None
    chart_id, day = 0, (0, "")
    for chart, market, chart_date, rank, hours, mask, snapshot_id, slot in batch:
        if slots is not None:
            slot = slots[slot]
        if chart is not last_chart or market != last_market:
            last_chart, last_market = chart, market
            chart_id = charts.get((source, chart, market)) or _chart_id(db, run, source, chart, market)
        if slot[_OWNER] is not token:
            _variant(db, run, slot)
        if slot[_NOTED] is not token:  # what a variant teaches is taken once a run
            slot[_NOTED] = token
            credit = slot[_CREDIT]
            links.update(credit.links)
            if credit.single is not None:  # a single-artist entry: its ids are that artist's
                id_keys.update((kind, value, credit.single) for kind, value in zip(ID_COLUMNS, slot[_KEY][3], strict=True)
                               if value)
        track_id = slot[_TRACK_ID]
        if day[0] != chart_id or day[1] is not chart_date:
            day = (chart_id, chart_date)
            if day not in loaded:
                loaded.add(day)
                if not fresh or day in written:
                    for track, *values in db.execute(_SELECT_DAY, day):
                        stored[(chart_id, chart_date, track)] = tuple(values)
                written.add(day)
        held = stored.get((chart_id, chart_date, track_id)) if stored else None
        if held is None:
            add_row((chart_id, chart_date, track_id, next_id, rank, hours, mask, snapshot_id, slot[_VARIANT_ID]))
            for key in slot[_ARTISTS]:
                add_key((key, chart_date, next_id, chart_id, track_id, rank))
                if not summing:
                    continue
                sums = tally.get((key, chart_id, track_id))
                if sums is None:
                    tally[(key, chart_id, track_id)] = [1, chart_date, chart_date, rank]
                else:  # rows come in date order: only the last date can move
                    sums[0] += 1
                    if chart_date > sums[2]:
                        sums[2] = chart_date
                    elif chart_date < sums[1]:
                        sums[1] = chart_date
                    if rank < sums[3]:
                        sums[3] = rank
            next_id += 1
            continue
        row_id, was, was_hours, was_mask, _, variant_id = held
        before = _stored_variant(db, run, variant_id)
        merged = [was, was_hours or 0, was_mask or 0, 0, _slot(before[0])]
        _fold(merged, rank, mask, snapshot_id, slot)
        rank, hours, mask, snapshot_id, slot = merged
        if slot[_OWNER] is not token:
            _variant(db, run, slot)
        updates.append((rank, hours, mask, snapshot_id, slot[_VARIANT_ID], chart_id, chart_date, track_id))
        keys, old_keys = slot[_ARTISTS], _artist_ids(db, run, before[1])
        keys_set += [(rank, k, chart_date, row_id) for k in keys if k in old_keys]
        keys_in += [(k, chart_date, row_id, chart_id, track_id, rank) for k in keys if k not in old_keys]
        keys_out += [(k, chart_date, row_id) for k in old_keys if k not in keys]
        # A better rank or a new key adds to the sums; a worse rank or a key gone recounts them.
        for key in keys if summing else ():
            if key not in old_keys:
                _count(tally, (key, chart_id, track_id), 1, chart_date, rank)
            elif rank <= was:
                _count(tally, (key, chart_id, track_id), 0, chart_date, rank)
            else:
                recount.add((key, chart_id, track_id))
        if summing:
            recount.update((key, chart_id, track_id) for key in old_keys if key not in keys)
    db.executemany("INSERT INTO artists (id, key) VALUES (?, ?)", run.new_artists)
    run.new_artists.clear()
    db.executemany("INSERT INTO tracks (id, track_key) VALUES (?, ?)", run.new_tracks)
    db.executemany(_INSERT_VARIANT, run.new_variants)
    run.new_tracks.clear()
    run.new_variants.clear()
    db.executemany(_INSERT, inserts)
    db.execute("UPDATE meta SET value = ? WHERE name = 'next_row_id'", (str(next_id),))
    db.executemany(_UPDATE, updates)

    db.executemany("INSERT OR REPLACE INTO appearance_artists VALUES (?, ?, ?, ?, ?, ?)", keys_in)
    db.executemany("UPDATE appearance_artists SET rank = ? WHERE artist_id = ? AND chart_date = ? AND row_id = ?",
                   keys_set)
    db.executemany("DELETE FROM appearance_artists WHERE artist_id = ? AND chart_date = ? AND row_id = ?", keys_out)
    db.executemany("INSERT INTO artist_tracks VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET"
                   " rows = rows + excluded.rows, first_date = min(first_date, excluded.first_date),"
                   " last_date = max(last_date, excluded.last_date), best_rank = min(best_rank, excluded.best_rank)",
                   [(*k, *v) for k, v in tally.items()])
    for where in sorted(recount):
        db.execute("DELETE FROM artist_tracks WHERE artist_id = ? AND chart_id = ? AND track_id = ?", where)
        db.execute("INSERT INTO artist_tracks SELECT artist_id, chart_id, track_id, count(*), min(chart_date),"
                   " max(chart_date), min(rank) FROM appearance_artists WHERE artist_id = ? AND chart_id = ?"
                   " AND track_id = ? GROUP BY artist_id, chart_id, track_id", where)
    db.executemany("INSERT OR IGNORE INTO artist_links VALUES (?, ?)", sorted(links))
    db.executemany("INSERT OR IGNORE INTO id_keys VALUES (?, ?, ?)", sorted(id_keys))
    return len(inserts)


def _count(tally: dict[tuple[int, int, int], list[Any]], where: tuple[int, int, int], rows: int, chart_date: str,
           rank: int) -> None:
    """Add `rows` appearances on `chart_date` at `rank` to a batch's sums of one key, chart and track."""
    held = tally.get(where)
    if held is None:
        tally[where] = [rows, chart_date, chart_date, rank]
        return
    held[0] += rows
    if chart_date < held[1]:
        held[1] = chart_date
    elif chart_date > held[2]:
        held[2] = chart_date
    if rank < held[3]:
        held[3] = rank


def _chart_id(db: sqlite3.Connection, run: _Run, source: str, chart: str, market: str) -> int:
    found = db.execute("INSERT INTO charts (source, chart, market) VALUES (?, ?, ?) ON CONFLICT DO UPDATE"
                       " SET source = excluded.source RETURNING id", (source, chart, market)).fetchone()
    chart_id = run.charts[(source, chart, market)] = int(found[0])
    return chart_id


_LYRICS_ARTISTS = ("INSERT OR IGNORE INTO id_keys SELECT 'lyrics_artist_id', l.artist_id, l.artist_key"
                   " FROM lyrics_lookups l WHERE l.artist_id IS NOT NULL")
"""A Genius artist id is the asked primary artist's id (as a single-artist entry's ids are its artist's)."""


class LyricsTrack(NamedTuple):
    """An indexed track without Genius ids: what `chartgw enrich` asks for."""

    track_key: str
    title: str
    artist: str
    """The primary (first credited) artist as shown."""
    rows: int


def rekey_lookups(db: sqlite3.Connection) -> None:
    """Genius lookups kept from an index of an earlier layout, keyed by the track keys of now (a lookup whose new
    key one already holds stays under its old one, unused), so a rebuild asks Genius nothing it asked before."""
    for key, title, artist in db.execute("SELECT track_key, title, artist_key FROM lyrics_lookups").fetchall():
        new = f"{title_key(title)}|{artist}"
        if new != key:
            db.execute("UPDATE OR IGNORE lyrics_lookups SET track_key = ? WHERE track_key = ?", (new, key))


def lyrics_candidates(db: sqlite3.Connection, asked_before: str, limit: int) -> list[LyricsTrack]:
    """Up to `limit` tracks with a title, none of whose variants has a Genius song id, not resolved yet and
    not missed since `asked_before` (ISO time): the most charted first."""
    found = db.execute(
        "SELECT t.track_key, v.title, v.credits, n.rows FROM (SELECT track_id, count(*) AS rows FROM appearances"
        " GROUP BY track_id) n JOIN tracks t ON t.id = n.track_id"
        " JOIN variants v ON v.id = (SELECT min(id) FROM variants WHERE track_id = t.id AND title IS NOT NULL)"
        " WHERE NOT EXISTS (SELECT 1 FROM variants w WHERE w.track_id = t.id AND w.lyrics_song_id IS NOT NULL)"
        " AND NOT EXISTS (SELECT 1 FROM lyrics_lookups l WHERE l.track_key = t.track_key"
        " AND (l.song_id IS NOT NULL OR l.asked_at >= ?))"
        " ORDER BY n.rows DESC, t.track_key LIMIT ?", (asked_before, limit)).fetchall()
    return [LyricsTrack(key, title, json.loads(credits)[0], rows) for key, title, credits, rows in found]


def record_lyrics(db: sqlite3.Connection, track: LyricsTrack, song_id: str | None, artist_id: str | None,
                  asked_at: str) -> int:
    """Keep what Genius answered for `track` (a miss has no ids) and give its variants without Genius ids of
    their own the ids found, in one transaction (a killed run loses at most the track being asked); returns
    the variants changed."""
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("INSERT OR REPLACE INTO lyrics_lookups VALUES (?, ?, ?, ?, ?, ?)",
                   (track.track_key, track.title, artist_key(track.artist), song_id, artist_id, asked_at))
        changed = db.execute(
            "UPDATE variants SET lyrics_song_id = ?, lyrics_artist_id = ? WHERE lyrics_song_id IS NULL"
            " AND track_id = (SELECT id FROM tracks WHERE track_key = ?)",
            (song_id, artist_id, track.track_key)).rowcount if song_id is not None else 0
        db.execute(_LYRICS_ARTISTS + " AND l.track_key = ?", (track.track_key,))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return changed


# --- aliases --------------------------------------------------------------------------------------

SHIPPED_ALIASES: tuple[tuple[str, ...], ...] = (
    ("아이유", "IU"),
    ("방탄소년단", "BTS"),
    ("블랙핑크", "BLACKPINK"),
    ("르세라핌", "LE SSERAFIM"),
    ("뉴진스", "NewJeans"),
    ("에스파", "aespa"),
    ("세븐틴", "SEVENTEEN"),
    ("트와이스", "TWICE"),
    ("아이브", "IVE"),
    ("로제", "ROSÉ"),
    ("제니", "JENNIE"),
    ("지민", "Jimin"),
    ("정국", "Jung Kook"),
    ("스트레이 키즈", "Stray Kids"),
    ("임영웅", "Lim Young Woong"),
    ("데이식스", "DAY6"),
    ("(여자)아이들", "(G)I-DLE", "i-dle"),
    ("키스오브라이프", "KISS OF LIFE"),
    ("보이넥스트도어", "BOYNEXTDOOR"),
    ("투모로우바이투게더", "TOMORROW X TOGETHER", "TXT"),
)
"""Names of one artist in several scripts that no chart prints together (extend with a file:
`CHARTGW_ARTIST_HISTORY_ALIASES_FILE`, one artist per line, names separated by `|`)."""


def _alias_file(value: str) -> Path | None:
    return Path(value) if value else None


ALIASES_FILE_SETTING = config.Setting(
    "ARTIST_HISTORY_ALIASES_FILE", "",
    "a UTF-8 file of extra artist aliases for /artist-history-api: one artist per line, names separated by '|'",
    _alias_file)


def alias_groups() -> list[set[str]]:
    """The shipped alias table plus the configured file's lines, each a set of keys."""
    groups = [{compact(n) for n in names} - {""} for names in SHIPPED_ALIASES]
    path = config.get(ALIASES_FILE_SETTING)
    if path is not None:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise config.SettingError(f"{ALIASES_FILE_SETTING.variable}: cannot read {path}: {exc.strerror}") from None
        groups += [{compact(n) for n in line.split("|")} - {""} for line in lines if line.strip()
                   and not line.lstrip().startswith("#")]
    return [g for g in groups if len(g) > 1]
