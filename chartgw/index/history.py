"""The artist-history index: every chart appearance of every group, one row each, in a SQLite file of its own.

The index (`<data>/artist-history-api.sqlite`, named after the group that serves it so the platform's reader
opens it) is built from the groups' snapshot files through the `EntryMapping` each group declares; a group
without one is not indexed. A row is one appearance: its chart (`charts`: source group, chart = the snapshot
target without its `@date` suffix, market), chart date, track (recording identity's recording: the variant is
linked to it as it is written, `chartgw.index.write`), rank, and its variant (`variants`: the title,
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

This module is the run: the file's opening, a run's start and end, a group's batches in transactions, the
registry of the groups read. The layout and statements are `chartgw.index.tables`'s, the credits
`chartgw.index.credits`', the reading of a group's file `chartgw.index.source`'s, the writing of a batch
`chartgw.index.write`'s and the Genius lookups `chartgw.index.lookups`'.
"""

from __future__ import annotations

import gc
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from chartgw.core import progress as steps
from chartgw.core.clock import Clock, utc_now
from chartgw.core.settings import Settings
from chartgw.index import tables as q
from chartgw.index.credits import (
    ALIASES_FILE_SETTING,
    alias_groups,
    credit_keys,
    credited_names,
    name_keys,
)
from chartgw.index.identity import links as identity
from chartgw.index.lookups import LyricsTrack, lyrics_candidates, record_lyrics, rekey_lookups
from chartgw.index.source import Prefetch, read_batch, read_next, unfolded
from chartgw.index.sums import SUMS_ASIDE_SNAPSHOTS, ArtistSums
from chartgw.index.tables import ID_COLUMNS, ROW_SELECT, SCHEMA_VERSION
from chartgw.index.write import Run, create_deferred, write_batch
from chartgw.store import FETCH_LOG, checkpoint, connect, drop_tables, group_db_path, iso, migrate, read_once, transaction
from chartgw.store import tables as store_tables
from chartgw.store.connect import Checkpointer

if TYPE_CHECKING:
    from chartgw.api.group import Group

__all__ = [
    "ALIASES_FILE_SETTING",
    "ID_COLUMNS",
    "INDEX_NAME",
    "ROW_SELECT",
    "SCHEMA_VERSION",
    "IndexResult",
    "LyricsTrack",
    "Prefetch",
    "alias_groups",
    "credit_keys",
    "credited_names",
    "index_all",
    "index_group",
    "index_path",
    "index_source",
    "lyrics_candidates",
    "name_keys",
    "open_index",
    "rebuild",
    "record_lyrics",
    "register_groups",
    "registered_groups",
    "source_groups",
    "write_batch",
]
"""The index's face: what the artist-history group, identity, the demo and the tests use (credits, lookups and
the reader are re-exported from their modules)."""

INDEX_NAME = "artist-history-api"

BATCH_SNAPSHOTS = 500
"""Snapshots of one group indexed per transaction (a catch-up over a large file commits as it goes)."""
BULK_BATCH_SNAPSHOTS = 2000
"""The same in a bulk build (fewer, larger transactions; a track's days on a chart summed at once)."""


# --- indexing -------------------------------------------------------------------------------------

def index_path(settings: Settings) -> Path:
    return group_db_path(INDEX_NAME, settings)


_REGISTRY: list[Iterable[Group]] = [()]
_LOOKUP: list[Callable[[str], Group] | None] = [None]


def register_groups(groups: Iterable[Group], named: Callable[[str], Group] | None = None) -> None:
    """Tell the index which groups exist. The registry (`chartgw.groups`) calls this once with GROUPS, which loads
    its groups when iterated, and its `named`, which loads one (indexing after a commit, the group's `after_commit`,
    then reads only the group crawled): the index may not import the registry (it is below it in the import
    layers)."""
    _REGISTRY[0] = groups
    _LOOKUP[0] = named


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


def open_index(path: Path) -> sqlite3.Connection:
    """The writer's connection, schema in place, WAL and synchronous=FULL as the snapshot store."""
    db = connect(path)
    migrated = db.execute(q.USER_VERSION.sql).fetchone()[0] != SCHEMA_VERSION
    if migrated:
        # An earlier layout: start over (the marks go with it); only the Genius lookups and MusicBrainz enrichment
        # are kept.
        drop_tables(db, keep=(*q.KEPT_TABLES, *identity.ENRICHMENT_TABLES))
        db.execute(q.SET_USER_VERSION.sql)
    db.executescript(q.CREATE)
    migrate(db, (FETCH_LOG,))
    if migrated:
        rekey_lookups(db)
        db.execute(q.LYRICS_ARTISTS.sql)
    db.execute(q.META_DEFAULTS.sql, (os.urandom(16).hex(),))
    return db


def _begin_run(db: sqlite3.Connection) -> Run:
    bulk = db.execute(q.SOURCES_COUNT.sql).fetchone()[0] == 0 and db.execute(q.ANY_APPEARANCE.sql).fetchone()[0] == 0
    run = Run(False, False)
    run.forget(db)
    run.bulk = run.fresh = bulk
    run.summing = not bulk and db.execute(q.ARTIST_TRACKS_STATE.sql).fetchone()[0] == "ok"
    if not run.summing:  # a killed bulk build left it behind: said so until summed again
        db.execute(q.ARTIST_TRACKS_STALE.sql)
    run.lyrics = {k: (s, a) for k, s, a in db.execute(q.RESOLVED_LYRICS.sql)}
    db.execute((q.BULK_CACHE if bulk else q.RUN_CACHE).sql)
    db.execute(q.TEMP_CACHE.sql)
    if bulk:
        for drop in q.DROP_DEFERRED:
            db.execute(drop.sql)
        db.execute(q.UNSYNCED.sql)  # process-kill safe in WAL mode; after a power cut, rebuild
        db.execute(q.BULK_AUTOCHECKPOINT.sql)
    return run


def _end_run(db: sqlite3.Connection, run: Run, path: Path, *, sums: ArtistSums | None = None) -> None:
    """Keep the links and sum `artist_tracks` again if the run did not keep it (with the caller's `sums`, made aside:
    what is left of them in another process, meanwhile; else here), make the deferred indexes and checkpoint."""
    own = ArtistSums(path, aside=False) if sums is None and not run.summing else None
    sums = sums or own
    try:
        if sums is not None:
            sums.finish()
        identity.link_new(db, run.linking)  # keeps the links of the variants this run wrote (docs/identity.md)
        if sums is not None:
            sums.write(db)
    finally:
        if own is not None:  # the caller's, the caller closes
            own.close()
        _stop_checkpoints(run)  # before the last checkpoint, which is the writer's
    if run.bulk:
        create_deferred(db)
        db.execute(q.SYNCED.sql)
        db.execute(q.AUTOCHECKPOINT.sql)
        checkpoint(db)
    else:
        db.execute(q.PASSIVE_CHECKPOINT.sql)


def _stop_checkpoints(run: Run) -> None:
    if run.checkpoints is not None:
        run.checkpoints.close()
        run.checkpoints = None


def _start_reader(db: sqlite3.Connection, run: Run, group: Group, batch: int, settings: Settings) -> None:
    """Start `group`'s reader processes (when it has enough to read) before its turn."""
    path = group_db_path(group.name, settings)
    if group.entries is None or not path.exists():
        return
    row = db.execute(q.SOURCE_MARK.sql, (group.name,)).fetchone()
    src = connect(path, readonly=True)
    try:
        reader = Prefetch.start(src, path, group.entries, int(row[0]) if row else 0,
                                 BULK_BATCH_SNAPSHOTS if run.bulk and batch == BATCH_SNAPSHOTS else batch, ahead=True)
    finally:
        src.close()
    if reader is not None:
        run.readers[group.name] = reader


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


def index_all(groups: Iterable[Group] | None = None, *, settings: Settings, now: Clock = utc_now,
              path: Path | None = None, batch: int = BATCH_SNAPSHOTS) -> list[IndexResult]:
    """Catch every source group up from its last indexed snapshot (the group files of `settings`' data folder).
    Idempotent: a second run indexes nothing."""
    path = path or index_path(settings)
    db = open_index(path)
    try:
        run = _begin_run(db)
        sums: ArtistSums | None = None
        if run.bulk:  # the WAL copied back by a thread of its own, not in the writer's commits
            run.checkpoints = Checkpointer(path)
        try:
            try:
                with _without_gc():
                    sources = source_groups(groups)
                    pending = sum(_pending_count(db, group, settings) for group in sources)
                    steps.expect(pending, "snapshots")
                    if not run.summing:
                        sums = ArtistSums(path, aside=pending >= SUMS_ASIDE_SNAPSHOTS)
                    # Every later group with enough to read has its readers started now: they read it in the CPU time
                    # the group being written leaves over, so its batches are ready when its turn comes.
                    for later in sources[1:]:
                        _start_reader(db, run, later, batch, settings)
                    results = []
                    for group in sources:
                        results.append(_logged(db, group, now, batch, run, settings))
                        if sums is not None and run.bulk:  # its charts are written whole: no later group adds to them
                            sums.begin(int(db.execute(q.NEXT_CHART_ID.sql).fetchone()[0]))
            finally:
                for reader in run.readers.values():
                    reader.stop()
            # Not after an interruption: the next run finishes what this one left.
            _end_run(db, run, path, sums=sums)
        finally:  # after an interruption too
            if sums is not None:
                sums.close()
            _stop_checkpoints(run)
        return results
    finally:
        db.close()


def _pending_count(db: sqlite3.Connection, group: Group, settings: Settings) -> int:
    """Snapshots of `group` not indexed yet (what a progress bar counts down); 0 for a missing or broken file."""
    path = group_db_path(group.name, settings)
    if not path.exists():
        return 0
    row = db.execute(q.SOURCE_MARK.sql, (group.name,)).fetchone()
    try:
        src = connect(path, readonly=True, timeout=30.0)
        try:
            return int(src.execute(store_tables.PENDING_AFTER.sql, (row[0] if row else 0,)).fetchone()[1])
        finally:
            src.close()
    except sqlite3.Error:
        return 0


def _logged(db: sqlite3.Connection, group: Group, now: Clock, batch: int, run: Run, settings: Settings) -> IndexResult:
    """`index_group`, with a fetch-log row when it indexed something or failed; a failing source (a broken
    file) does not stop the others."""
    started, clock = now(), time.monotonic()
    try:
        result = index_group(db, group, settings=settings, now=now, batch=batch, run=run)
    except (sqlite3.Error, ValueError, OSError) as exc:
        row = db.execute(q.SOURCE_MARK.sql, (group.name,)).fetchone()
        result = IndexResult(group.name, 0, 0, int(row[0]) if row else 0, f"{type(exc).__name__}: {exc}")
    result = replace(result, duration_ms=int((time.monotonic() - clock) * 1000))
    if result.snapshots or result.error:
        db.execute(store_tables.INSERT_LOG.sql, (group.name, iso(started), result.duration_ms,
                                                 "failed" if result.error else "ok", None, result.rows,
                                                 f"{group.name}.sqlite", result.error))
    return result


def index_source(name: str, settings: Settings, *, now: Clock = utc_now) -> IndexResult | None:
    """Index one group's snapshots committed since the last run: the crawl runner's hook after a commit.
    None for a group the index does not read (no entry mapping)."""
    group = _source_group(name)
    if group is None:
        return None
    path = index_path(settings)
    db = open_index(path)
    try:
        run = _begin_run(db)
        with _without_gc():
            result = _logged(db, group, now, BATCH_SNAPSHOTS, run, settings)
        _end_run(db, run, path)
        return result
    finally:
        db.close()


def rebuild(groups: Iterable[Group] | None = None, *, settings: Settings, now: Clock = utc_now,
            path: Path | None = None) -> list[IndexResult]:
    """Drop the index and build it again from the groups' files; the Genius lookups and the MusicBrainz enrichment
    are kept (they came from an upstream, not from the groups' files; the enrichment goes back onto its recordings
    as the build links them)."""
    path = path or index_path(settings)
    lookups = read_once(path, q.LOOKUPS) or []
    enriched = {keep: read_once(path, kept) or [] for kept, keep in identity.KEPT_ENRICHMENT.values()}
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    if lookups or any(enriched.values()):
        db = open_index(path)
        try:
            db.executemany(q.KEEP_LOOKUP.sql, lookups)
            rekey_lookups(db)
            db.execute(q.LYRICS_ARTISTS.sql)
            for keep, rows in enriched.items():
                db.executemany(keep.sql, rows)
        finally:
            db.close()
    return index_all(groups, settings=settings, now=now, path=path)


def index_group(db: sqlite3.Connection, group: Group, *, settings: Settings, now: Clock = utc_now,
                batch: int = BATCH_SNAPSHOTS,
                run: Run | None = None) -> IndexResult:
    """Index `group`'s snapshots after its last indexed one, `batch` snapshots per transaction."""
    assert group.entries is not None
    run = run or _begin_run(db)
    if run.bulk and batch == BATCH_SNAPSHOTS:
        batch = BULK_BATCH_SNAPSHOTS
    row = db.execute(q.SOURCE_MARK.sql, (group.name,)).fetchone()
    last = int(row[0]) if row else 0
    source_path = group_db_path(group.name, settings)
    if not source_path.exists():
        return IndexResult(group.name, 0, 0, last)
    src = connect(source_path, readonly=True)
    snapshots = rows = 0
    reader = run.readers.pop(group.name, None) or Prefetch.start(src, source_path, group.entries, last, batch)
    try:
        while True:
            try:
                pending, folded, slots = (reader.next() if reader is not None
                                          else read_next(src, group.entries, last, batch))
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    break
                raise
            if not pending:
                break
            try:
                with transaction(db):
                    # Another indexer (cron beside a crawl's hook) may have committed meanwhile: never apply a
                    # snapshot twice, nor move the mark back.
                    row = db.execute(q.SOURCE_MARK.sql, (group.name,)).fetchone()
                    done = int(row[0]) if row else 0
                    todo = [s for s in pending if s[0] > done]
                    new = 0
                    if todo:
                        if len(todo) < len(pending):
                            folded, slots = unfolded(read_batch(src, group.entries, todo)), None
                        db.execute(q.SAVEPOINT.sql)
                        try:
                            new = write_batch(db, run, group.name, folded, slots)
                        except sqlite3.IntegrityError:
                            # Another indexer wrote a day of this chart while this run took the index to be
                            # empty: write the batch again, looking every day up.
                            db.execute(q.ROLLBACK_SAVEPOINT.sql)
                            run.forget(db)
                            new = write_batch(db, run, group.name, folded, slots)
                        db.execute(q.RELEASE_SAVEPOINT.sql)
                        rows += len(folded)
                        snapshots += len(todo)
                    if done > pending[-1][0] and reader is not None:  # the mark moved past what is prefetched
                        reader.stop()
                        reader = None
                    last = max(int(pending[-1][0]), done)
                    db.execute(q.SET_SOURCE_MARK.sql, (group.name, last, iso(now()), new))
            except BaseException:
                run.forget(db)  # what the batch created is gone with it
                raise
            steps.advance(len(pending))
    finally:
        if reader is not None:
            reader.stop()
        src.close()
    return IndexResult(group.name, snapshots, rows, last)
