"""The per-group SQLite snapshot store: the only place that opens SQLite (`chartgw.store.connect`).

One file per group (`<data dir>/<group>.sqlite`) in WAL mode, holding the platform's tables
(`chartgw.store.tables`) and the group's own (`Group.storage`), migrated on every writer's open
(`chartgw.store.schema`). Crawlers write a whole snapshot (metadata, entries, raw payload, fetch-log
row) in one `BEGIN IMMEDIATE ... COMMIT` with `synchronous=FULL`, so a reader sees the old snapshot or
the new one and a killed crawler leaves nothing half-written. The server reads through one long-lived
read-only aiosqlite connection per file, off the event loop; every statement is a declared `Query`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

import aiosqlite
import msgspec

from chartgw.core import config
from chartgw.core.clock import Clock, utc_now
from chartgw.core.settings import Settings
from chartgw.store import diff as changes
from chartgw.store import tables as t
from chartgw.store.connect import checkpoint, connect, connect_async, transaction
from chartgw.store.schema import Index, Query, Storage, Table, drop_tables, migrate
from chartgw.store.tables import FETCH_LOG, NEWEST, S_ROW

__all__ = [
    "FETCH_LOG",
    "NEWEST",
    "S_ROW",
    "ChangeRow",
    "Coverage",
    "FetchLogRow",
    "Index",
    "NewSnapshot",
    "Query",
    "RunRow",
    "SnapshotReader",
    "SnapshotRow",
    "SnapshotWriter",
    "Storage",
    "StoredEntry",
    "Table",
    "checkpoint",
    "connect",
    "drop_tables",
    "glob_escape",
    "group_db_path",
    "iso",
    "like_pattern",
    "migrate",
    "parse_iso",
    "read_latest_records",
    "read_once",
    "transaction",
]


def group_db_path(group: str, settings: Settings) -> Path:
    """Where group `group`'s file lives under `settings` (CHARTGW_DATA_DIR)."""
    return settings.get(config.DATA_DIR) / f"{group}.sqlite"


def read_once(path: Path, query: Query, params: Sequence[Any] = (), timeout: float = 30.0) -> list[tuple[Any, ...]] | None:
    """`query` over the file at `path` through a read-only connection opened for it alone (a command, a crawl
    planning its work, a document built in a worker thread); None when there is no file or no such table yet.
    Synchronous: never call it on the server's event loop."""
    if not path.exists():
        return None
    try:
        with contextlib.closing(connect(path, readonly=True, timeout=timeout)) as db:
            return db.execute(query.sql, tuple(params)).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc) or "unable to open" in str(exc):
            return None
        raise


def read_latest_records(path: Path, target: str) -> list[bytes] | None:
    """The entries of `target`'s newest fetch in the group file at `path`, read-only and at once (for what a
    document built now declares, e.g. a discovered catalogue); None when there is no file or snapshot."""
    try:
        rows = read_once(path, t.LATEST_RECORDS, (target,), timeout=1)
    except sqlite3.Error:
        return None
    return [r[0] for r in rows] or None if rows else None


def parse_iso(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def iso(ts: datetime) -> str:
    """UTC timestamps as ISO 8601 with a Z, to the second: sortable as text."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class StoredEntry:
    """One entry row: the queryable columns beside the encoded public record."""

    rank: int
    title_key: str
    artist_key: str
    item_id: str | None
    record: bytes
    search_key: str = ""
    """Folded title and artists separated by "|" for substring search; "" = title_key|artist_key."""


@dataclass(frozen=True)
class ChangeRow:
    """One change record: a committed snapshot and its summary against the previous one of its target."""

    id: int
    snapshot_id: int
    previous_snapshot_id: int | None
    target: str
    chart_date: str
    chart_hour: int | None
    committed_at: str
    summary: bytes
    """The encoded `chartgw.store.diff.ChangeSummary`, served as stored."""


@dataclass
class NewSnapshot:
    """A snapshot a crawl wants committed; nothing is written until it passes the sanity checks."""

    target: str
    chart_date: str
    chart_hour: int | None
    fetched_at: datetime
    source: str
    entries: list[StoredEntry]
    raw: bytes | None = None
    raw_type: str = "application/octet-stream"
    meta: bytes | None = None


@dataclass(frozen=True)
class FetchLogRow:
    target: str
    started_at: datetime
    duration_ms: int
    status: str
    http_status: int | None = None
    rows: int | None = None
    url: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class SnapshotRow:
    """A committed snapshot's metadata, as read back."""

    id: int
    target: str
    chart_date: str
    chart_hour: int | None
    fetched_at: str
    source: str
    row_count: int
    meta: bytes | None = field(default=None, compare=False, repr=False)
    """The group's own metadata of the snapshot (a chart's title, a week's end), as it stored it."""


@dataclass(frozen=True)
class RunRow:
    """One recorded crawl run (a whole pull, a backfill, an import) of a group."""

    id: int
    kind: str
    started_at: str
    finished_at: str
    targets: int
    ok: int
    detail: bytes
    """The run's outcomes and options as JSON, served as stored."""


def glob_escape(text: str) -> str:
    """`text` matched literally inside a GLOB pattern."""
    return "".join(f"[{ch}]" if ch in "*?[]" else ch for ch in text)


def like_pattern(needle: str) -> str:
    """A LIKE pattern (with `ESCAPE '\\'`) matching any text that contains `needle` literally."""
    return "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"




class Coverage(NamedTuple):
    """What a target holds: its first and last chart date, distinct chart dates, snapshots, last fetch."""

    first: str
    last: str
    dates: int
    snapshots: int
    last_fetched_at: str


def _coverage(rows: Iterable[Sequence[Any]]) -> dict[str, Coverage]:
    return {row[0]: Coverage(*row[1:]) for row in rows}


def _snapshot_row(row: Sequence[Any]) -> SnapshotRow:
    return SnapshotRow(*row[:8])


def _matches(rows: Iterable[Sequence[Any]]) -> list[tuple[SnapshotRow, int, bytes]]:
    return [(SnapshotRow(*row[:8]), row[8], row[9]) for row in rows]


ALL = -1
"""A LIMIT of no limit."""


@dataclass
class SnapshotWriter:
    """The crawler's side: synchronous sqlite3, one transaction per crawl result.

    `retention` maps a target prefix to days; older snapshots of matching targets are pruned
    after each commit. Raw payloads older than `raw_retention_days` are pruned for every target.
    Ages are measured on `now`, the crawl's clock, so a crawl at an injected time prunes at that time.
    `tables` are the group's own (`Group.storage`), migrated with the platform's when the file is opened.
    """

    path: Path
    busy_timeout_ms: int = 30_000
    retention: dict[str, float] = field(default_factory=dict)
    raw_retention_days: float = 7.0
    now: Clock = utc_now
    tables: tuple[Table, ...] = ()
    _db: sqlite3.Connection | None = None

    def __enter__(self) -> SnapshotWriter:
        db = connect(self.path, timeout=self.busy_timeout_ms / 1000, foreign_keys=True)
        migrate(db, (*t.TABLES, *self.tables))
        self._db = db
        return self

    def __exit__(self, *exc: object) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("SnapshotWriter used outside its `with` block")
        return self._db

    # A group's own statements (its tables, its reads), each a declared query.
    def rows(self, query: Query, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.db.execute(query.sql, tuple(params)).fetchall()

    def execute(self, query: Query, params: Sequence[Any] = ()) -> int:
        """Run a write; returns the new row's id (an INSERT's)."""
        return int(self.db.execute(query.sql, tuple(params)).lastrowid or 0)

    def executemany(self, query: Query, params: Iterable[Sequence[Any]]) -> None:
        self.db.executemany(query.sql, params)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[SnapshotWriter]:
        """The block's statements in one `BEGIN IMMEDIATE ... COMMIT`."""
        with transaction(self.db):
            yield self

    def commit(self, snapshots: Sequence[NewSnapshot], log: FetchLogRow) -> list[int]:
        """Write the snapshots and their fetch-log row atomically; return the new snapshot ids."""
        ids: list[int] = []
        with self.transaction():
            for snap in snapshots:
                snapshot_id = self.execute(t.INSERT_SNAPSHOT, (
                    snap.target, snap.chart_date, snap.chart_hour, iso(snap.fetched_at), snap.source, len(snap.entries),
                    snap.meta))
                ids.append(snapshot_id)
                self.executemany(t.INSERT_ENTRY, [
                    (snapshot_id, pos, e.rank, e.title_key, e.artist_key, e.item_id, e.record,
                     e.search_key or f"{e.title_key}|{e.artist_key}") for pos, e in enumerate(snap.entries, start=1)])
                if snap.raw is not None:
                    self.execute(t.INSERT_RAW, (snapshot_id, snap.raw_type, snap.raw))
                self._record_change(snapshot_id, snap)
            self._insert_log(log)
        self._prune()
        checkpoint(self.db)  # never waits for readers (connect.checkpoint says why)
        return ids

    def _record_change(self, snapshot_id: int, snap: NewSnapshot) -> None:
        """The change record of a snapshot just inserted, in its transaction: its diff against the previous
        snapshot of its target (by chart time), summarised."""
        hour = -1 if snap.chart_hour is None else snap.chart_hour
        found = self.rows(t.PREVIOUS, (snap.target, snap.chart_date, hour, snapshot_id))
        previous = int(found[0][0]) if found else None
        before = list(map(changes.Row._make, self.rows(t.ENTRY_KEYS, (previous,)))) if previous else []
        lines = changes.diff(before, snap.entries)
        back = self._seen_before(snap.target, previous, changes.entered(lines)) if previous else set()
        summary = msgspec.json.encode(changes.summarize(lines, previous is None, back))
        self.execute(t.INSERT_CHANGE, (snapshot_id, previous, snap.target, snap.chart_date, snap.chart_hour,
                                       iso(self.now()), summary))

    def _seen_before(self, target: str, previous: int, who: list[changes.Identity]) -> set[changes.Identity]:
        """Those of `who` that are in a snapshot of `target` before `previous` (by chart time): re-entries."""
        ((date, hour),) = self.rows(t.CHART_TIME, (previous,))
        seen = set()
        for one in who:
            query, keys = (t.EARLIER_ITEM, (one.item_id,)) if one.item_id else (t.EARLIER_NAMES,
                                                                               (one.title_key, one.artist_key))
            if self.rows(query, (*keys, target, date, hour, previous)):
                seen.add(one)
        return seen

    def log_failure(self, log: FetchLogRow) -> None:
        """Record a failed attempt; the current snapshot stays as it was."""
        with self.transaction():
            self._insert_log(log)

    def record_run(self, kind: str, started: datetime, finished: datetime, targets: int, ok: int,
                   detail: bytes) -> int:
        """Keep a crawl run's summary (what the pull and backfill endpoints list)."""
        return self.execute(t.INSERT_RUN, (kind, iso(started), iso(finished), targets, ok, detail))

    def _insert_log(self, log: FetchLogRow) -> None:
        self.execute(t.INSERT_LOG, (log.target, iso(log.started_at), log.duration_ms, log.status, log.http_status,
                                    log.rows, log.url, log.error))

    def _prune(self) -> None:
        """Drop snapshots past their target's retention, but never a target's newest one."""
        now = self.now()
        with self.transaction():
            for prefix, days in self.retention.items():
                self.execute(t.PRUNE_SNAPSHOTS, (prefix, iso(now - timedelta(days=days))))
            self.execute(t.PRUNE_RAW, (iso(now - timedelta(days=self.raw_retention_days)),))

    # Reads a crawl needs (earlier observations, the week held, a catalogue) go through the same connection.
    def snapshots_between(self, target: str, start: datetime, end: datetime) -> list[SnapshotRow]:
        return [_snapshot_row(r) for r in self.rows(t.SNAPSHOTS_BETWEEN, (target, iso(start), iso(end)))]

    def records(self, snapshot_id: int) -> list[bytes]:
        return [r[0] for r in self.rows(t.RECORDS, (snapshot_id, ALL, 0))]

    def latest_records(self, target: str) -> list[bytes]:
        """The entries of `target`'s newest fetch (e.g. a discovered catalogue), [] when there is none."""
        return [r[0] for r in self.rows(t.LATEST_RECORDS, (target,))]

    def held(self, target: str, chart_date: str) -> SnapshotRow | None:
        """The snapshot held for `target`'s chart date `chart_date` (its newest fetch), if any."""
        rows = self.rows(t.HELD, (target, chart_date))
        return _snapshot_row(rows[0]) if rows else None

    def dates(self, target: str) -> list[str]:
        """The chart dates `target` has snapshots for, newest first."""
        return [r[0] for r in self.rows(t.DATES, (target, ALL))]

    def runs(self, kind: str, limit: int) -> list[RunRow]:
        return [RunRow(*r) for r in self.rows(t.RUNS, (kind, limit))]


T = TypeVar("T")
"""What a `SnapshotReader.read` returns."""


class SnapshotReader:
    """The server's side: one long-lived read-only connection per group file, opened when the file exists.

    Every statement runs on the connection's own thread (aiosqlite), never on the event loop. Each read is
    one declared statement, or (`read`) a page's declared statements in one run on that thread.
    """

    mmap_bytes = 0
    """Read pages through a memory map this large (0: SQLite's page cache)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: aiosqlite.Connection | None = None
        self._opening: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def connection(self) -> aiosqlite.Connection | None:
        """The one connection, opened by the first read: under a lock, so that the reads arriving while it opens
        (200 at once on a cold server) wait for it instead of each opening one (a thread and a descriptor each,
        never closed)."""
        db = self._db
        if db is not None:
            return db
        loop = asyncio.get_running_loop()
        if self._opening is None or self._loop is not loop:  # a lock belongs to its loop (an app served again)
            self._opening, self._loop = asyncio.Lock(), loop
        async with self._opening:
            if self._db is None and self.path.exists():
                self._db = await self._open()
            return self._db

    async def _open(self) -> aiosqlite.Connection:
        return await connect_async(self.path, mmap_bytes=self.mmap_bytes)

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    async def fetchall(self, query: Query, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        db = await self.connection()
        if db is None:
            return []
        try:
            async with db.execute(query.sql, tuple(params)) as cursor:
                return cast(list[tuple[Any, ...]], list(await cursor.fetchall()))  # rows are plain tuples
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []  # a file whose first crawl has not committed its schema yet
            raise

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T | None:
        """`work` run with the connection on the connection's own thread, in one hop off the event loop: a page of
        several statements costs one hop, where each `fetchall` costs three (execute, fetch, close; 0.3-1 ms each on
        a loaded box). None while there is no file. `work` runs only declared statements (`Query.sql`) and handles
        its own missing tables. Through aiosqlite's own queue (`_execute`, 0.22 in requirements.lock), the one way
        to run a function beside its statements, in their order."""
        db = await self.connection()
        if db is None:
            return None
        connection = db._conn  # the sqlite3 connection aiosqlite's thread owns
        return cast(T, await db._execute(work, connection))  # type: ignore[no-untyped-call]  # aiosqlite's own

    async def data_version(self) -> int | None:
        """Changes whenever another connection (a crawler) commits; None while there is no file."""
        rows = await self.fetchall(t.DATA_VERSION)
        return int(rows[0][0]) if rows else None

    async def latest(self, target: str) -> SnapshotRow | None:
        """The snapshot of `target` with the newest chart time (then the newest fetch): a backfill or
        import of an older chart committed later never replaces the current one."""
        rows = await self.fetchall(t.LATEST, (target, 1))
        return _snapshot_row(rows[0]) if rows else None

    async def newest(self, target: str, limit: int) -> list[SnapshotRow]:
        """`target`'s snapshots, latest first (as `latest` orders them)."""
        return [_snapshot_row(r) for r in await self.fetchall(t.LATEST, (target, limit))]

    async def latest_per_target(self, pattern: str | None = None) -> list[SnapshotRow]:
        """The latest snapshot of every target (matching GLOB `pattern` when given), by target."""
        return [_snapshot_row(r) for r in await self.fetchall(t.LATEST_PER_TARGET, (pattern,))]

    async def snapshots(self, pattern: str | None, limit: int) -> list[SnapshotRow]:
        """Snapshots of targets matching GLOB `pattern` (all when None), newest fetch first."""
        return [_snapshot_row(r) for r in await self.fetchall(t.SNAPSHOTS_BY_FETCH, (pattern, limit))]

    async def snapshots_with_ids(self, ids: Iterable[int]) -> list[SnapshotRow]:
        wanted = sorted(set(ids))
        if not wanted:
            return []
        return [_snapshot_row(r) for r in await self.fetchall(t.SNAPSHOTS_WITH_IDS, (json.dumps(wanted),))]

    async def snapshot_on(self, target: str, chart_date: str) -> SnapshotRow | None:
        """The snapshot held for `target`'s chart date `chart_date` (its newest fetch)."""
        rows = await self.fetchall(t.HELD, (target, chart_date))
        return _snapshot_row(rows[0]) if rows else None

    async def on_or_before(self, target: str, day: str) -> SnapshotRow | None:
        """The latest snapshot of `target` dated `day` or earlier."""
        rows = await self.fetchall(t.ON_OR_BEFORE, (target, day))
        return _snapshot_row(rows[0]) if rows else None

    async def dates(self, target: str, limit: int = ALL) -> list[str]:
        """The chart dates `target` has snapshots for, newest first."""
        return [row[0] for row in await self.fetchall(t.DATES, (target, limit))]

    async def neighbours(self, target: str, chart_date: str) -> tuple[str | None, str | None]:
        """The chart dates of `target` held just before and just after `chart_date`."""
        rows = await self.fetchall(t.NEIGHBOURS, (target, chart_date))
        return (rows[0][0], rows[0][1]) if rows else (None, None)

    async def spans(self) -> dict[str, tuple[str, str, int, int]]:
        """Each target's first and last chart date, distinct chart dates and snapshots (`tables.SPANS`)."""
        return {row[0]: (row[1], row[2], row[3], row[4]) for row in await self.fetchall(t.SPANS)}

    async def coverage(self, target: str | None = None) -> dict[str, Coverage]:
        """What each target holds (only `target` when given)."""
        if target is None:
            return _coverage(await self.fetchall(t.COVERAGE))
        return _coverage(await self.fetchall(t.COVERAGE_OF, (target,)))

    async def after(self, snapshot_id: int) -> tuple[int | None, int, str | None]:
        """(the newest snapshot id, how many snapshots were committed after `snapshot_id`, the oldest fetch
        among those): how far a reader of every snapshot lags, or (with 0) what the file holds."""
        rows = await self.fetchall(t.PENDING_AFTER, (snapshot_id,))
        return (rows[0][0], int(rows[0][1]), rows[0][2]) if rows else (None, 0, None)

    async def raw(self, snapshot_id: int) -> tuple[str, bytes] | None:
        """The upstream payload a snapshot was parsed from, when it was kept: (content type, body)."""
        rows = await self.fetchall(t.RAW, (snapshot_id,))
        return (rows[0][0], rows[0][1]) if rows else None

    async def search(self, needle: str, patterns: str | Sequence[str] | None, limit: int, *,
                     latest_only: bool = False) -> list[tuple[SnapshotRow, int, bytes]]:
        """Entries whose search key contains `needle` (already folded) in snapshots of targets matching
        any GLOB of `patterns` (all targets when None): (snapshot, rank, record).

        Over every stored snapshot, newest first then by rank; or, with `latest_only`, over each
        target's latest snapshot only, best rank first.
        """
        globs = [patterns] if isinstance(patterns, str) else list(patterns or [])
        scope = json.dumps(globs) if globs else None
        query = t.SEARCH_LATEST if latest_only else t.SEARCH
        return _matches(await self.fetchall(query, (scope, like_pattern(needle), limit)))

    async def history(self, title_glob: str, artist_needle: str, pattern: str | None,
                      ) -> list[tuple[SnapshotRow, int, bytes]]:
        """Every appearance of a title (its title_key matching GLOB `title_glob`: a key, or a key's prefix) credited
        to an artist whose key contains `artist_needle`, in snapshots of targets matching `pattern`: oldest chart
        date first."""
        return _matches(await self.fetchall(t.HISTORY, (title_glob, artist_needle, pattern)))

    async def runs(self, kind: str, limit: int) -> list[RunRow]:
        """Recorded runs of `kind`, newest first."""
        return [RunRow(*row) for row in await self.fetchall(t.RUNS, (kind, limit))]

    async def records(self, snapshot_id: int, limit: int, offset: int = 0) -> list[bytes]:
        return [row[0] for row in await self.fetchall(t.RECORDS, (snapshot_id, limit, offset))]

    async def record_at_rank(self, snapshot_id: int, rank: int) -> bytes | None:
        rows = await self.fetchall(t.RECORD_AT_RANK, (snapshot_id, rank))
        return rows[0][0] if rows else None

    async def latest_failures(self) -> dict[str, tuple[str, str]]:
        """Per target, its newest failed attempt: (started_at, error)."""
        return {str(r[0]): (str(r[1]), str(r[2])) for r in await self.fetchall(t.LATEST_FAILURES)}

    async def outcomes_by_day(self, since: str) -> list[tuple[str, int, int]]:
        """(day, attempts ok, attempts failed) per UTC day from `since` (YYYY-MM-DD), oldest first."""
        return [(str(r[0]), int(r[1]), int(r[2])) for r in await self.fetchall(t.OUTCOMES_BY_DAY, (since,))]

    async def fetch_log(self, status: str | None, limit: int) -> list[tuple[Any, ...]]:
        return await self.fetchall(t.FETCH_LOG_PAGE, (status, limit))

    # --- the change feed (chartgw.store.diff, chartgw.push.changes) ---

    async def changes_after(self, after: int, targets: Sequence[str], limit: int) -> tuple[list[ChangeRow], int]:
        """Change records with ids above `after` (of `targets` only, when any), oldest first, at most `limit`;
        and the file's newest change id in the same read (0 without any), so a reader knows what it has seen."""
        rows = await self.fetchall(t.CHANGES_AFTER, (after, json.dumps(list(targets)) if targets else None, limit))
        newest = int(rows[0][0]) if rows else 0
        return [ChangeRow(*row[1:]) for row in rows if row[1] is not None], newest

    async def change_heads(self, after: int, targets: Sequence[str], limit: int) -> tuple[list[tuple[int, str]], int]:
        """(id, committed_at) of what `changes_after` would read, and the file's newest change id: a few bytes a
        change where the change itself (its summary) is kilobytes."""
        rows = await self.fetchall(t.CHANGE_HEADS, (after, json.dumps(list(targets)) if targets else None, limit))
        newest = int(rows[0][0]) if rows else 0
        return [(int(row[1]), str(row[2])) for row in rows if row[1] is not None], newest

    async def latest_change(self) -> ChangeRow | None:
        rows = await self.fetchall(t.LATEST_CHANGE)
        return ChangeRow(*rows[0]) if rows else None

    async def previous_snapshot(self, row: SnapshotRow) -> SnapshotRow | None:
        """The snapshot of `row`'s target before it by chart time: what its change record compares it with."""
        found = await self.fetchall(t.PREVIOUS, (row.target, row.chart_date,
                                                 -1 if row.chart_hour is None else row.chart_hour, row.id))
        return next(iter(await self.snapshots_with_ids([found[0][0]])), None) if found else None

    async def entry_rows(self, snapshot_id: int) -> list[changes.Row]:
        """A snapshot's entries with their identity columns, in chart order."""
        return [changes.Row._make(row) for row in await self.fetchall(t.ENTRY_KEYS, (snapshot_id,))]
