"""The per-group SQLite snapshot store.

One file per group (`<data dir>/<group>.sqlite`) in WAL mode. Crawlers write a whole snapshot
(metadata, entries, raw payload, fetch-log row) in one `BEGIN IMMEDIATE ... COMMIT` with
`synchronous=FULL`, so a reader sees the old snapshot or the new one and a killed crawler leaves
nothing half-written. The server reads through one long-lived connection per file.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiosqlite
import msgspec

from chartgw import changes, config
from chartgw.clock import Clock, utc_now

__all__ = [
    "FETCH_LOG_SCHEMA",
    "ChangeRow",
    "FetchLogRow",
    "NewSnapshot",
    "RunRow",
    "SnapshotReader",
    "SnapshotRow",
    "SnapshotWriter",
    "StoredEntry",
    "glob_escape",
    "group_db_path",
    "iso",
    "parse_iso",
    "read_latest_records",
]

FETCH_LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS fetch_log (
    id INTEGER PRIMARY KEY,
    target TEXT NOT NULL,
    started_at TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    http_status INTEGER,
    rows INTEGER,
    url TEXT,
    error TEXT
);
"""
"""Every attempt to refresh a target; also the layout of any other file the /fetch-logs route reads."""

SCHEMA = FETCH_LOG_SCHEMA + """
CREATE TABLE IF NOT EXISTS snapshots (
    id INTEGER PRIMARY KEY,
    target TEXT NOT NULL,
    chart_date TEXT NOT NULL,
    chart_hour INTEGER,
    fetched_at TEXT NOT NULL,
    source TEXT NOT NULL,
    row_count INTEGER NOT NULL,
    meta BLOB
);
CREATE INDEX IF NOT EXISTS snapshots_by_target ON snapshots (target, id);
CREATE INDEX IF NOT EXISTS snapshots_by_chart_time ON snapshots (target, chart_date, chart_hour, id);
CREATE TABLE IF NOT EXISTS entries (
    snapshot_id INTEGER NOT NULL REFERENCES snapshots (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    title_key TEXT NOT NULL,
    artist_key TEXT NOT NULL,
    item_id TEXT,
    record BLOB NOT NULL,
    search_key TEXT,
    PRIMARY KEY (snapshot_id, position)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entries_by_title ON entries (title_key);
CREATE INDEX IF NOT EXISTS entries_by_item ON entries (item_id);
CREATE TABLE IF NOT EXISTS raw_payloads (
    snapshot_id INTEGER PRIMARY KEY REFERENCES snapshots (id) ON DELETE CASCADE,
    content_type TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS fetch_log_by_target ON fetch_log (target, id);
CREATE TABLE IF NOT EXISTS crawl_runs (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    targets INTEGER NOT NULL,
    ok INTEGER NOT NULL,
    detail BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS crawl_runs_by_kind ON crawl_runs (kind, id);
CREATE TABLE IF NOT EXISTS changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    snapshot_id INTEGER NOT NULL,
    previous_snapshot_id INTEGER,
    target TEXT NOT NULL,
    chart_date TEXT NOT NULL,
    chart_hour INTEGER,
    committed_at TEXT NOT NULL,
    summary BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS changes_by_snapshot ON changes (snapshot_id);
"""
# `changes` is the feed (chartgw.changes): one row per committed snapshot, written in its transaction. Its ids
# never repeat (AUTOINCREMENT), and pruning snapshots keeps it: each summary stands alone.
# Columns added after a file may already exist: (table, column, declaration).
MIGRATIONS = (("entries", "search_key", "TEXT"),)

# "Latest" means the newest chart time, then the newest fetch (see SnapshotReader.latest).
NEWEST = "chart_date DESC, chart_hour DESC, id DESC"

RUN_COLUMNS = "id, kind, started_at, finished_at, targets, ok, detail"

PREVIOUS = ("SELECT id FROM snapshots WHERE target = ?1 AND (chart_date, coalesce(chart_hour, -1), id) < (?2, ?3, ?4)"
            " ORDER BY chart_date DESC, coalesce(chart_hour, -1) DESC, id DESC LIMIT 1")
"""The snapshot before (target, chart date, hour or -1, id) in the order of NEWEST: what a change compares with."""
ENTRY_KEYS = "SELECT rank, title_key, artist_key, item_id, record FROM entries WHERE snapshot_id = ? ORDER BY position"


def group_db_path(group: str) -> Path:
    return config.data_dir() / f"{group}.sqlite"


def read_latest_records(group: str, target: str) -> list[bytes] | None:
    """The entries of `target`'s newest snapshot in `group`'s file, read-only and at once (for what a
    document built now declares, e.g. a discovered catalogue); None when there is no file or snapshot."""
    path = group_db_path(group)
    if not path.exists():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)) as db:
            return _latest_records(db, target) or None
    except sqlite3.Error:
        return None


def _records(db: sqlite3.Connection, snapshot_id: int) -> list[bytes]:
    return [r[0] for r in db.execute("SELECT record FROM entries WHERE snapshot_id = ? ORDER BY position", (snapshot_id,))]


def _latest_records(db: sqlite3.Connection, target: str) -> list[bytes]:
    row = db.execute("SELECT max(id) FROM snapshots WHERE target = ?", (target,)).fetchone()
    return _records(db, row[0]) if row and row[0] is not None else []


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
    """The encoded `chartgw.changes.ChangeSummary`, served as stored."""

    COLUMNS = "id, snapshot_id, previous_snapshot_id, target, chart_date, chart_hour, committed_at, summary"


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

    COLUMNS = "id, target, chart_date, chart_hour, fetched_at, source, row_count"


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


@dataclass
class SnapshotWriter:
    """The crawler's side: synchronous sqlite3, one transaction per crawl result.

    `retention` maps a target prefix to days; older snapshots of matching targets are pruned
    after each commit. Raw payloads older than `raw_retention_days` are pruned for every target.
    Ages are measured on `now`, the crawl's clock, so a crawl at an injected time prunes at that time.
    """

    path: Path
    busy_timeout_ms: int = 30_000
    retention: dict[str, float] = field(default_factory=dict)
    raw_retention_days: float = 7.0
    now: Clock = utc_now
    _db: sqlite3.Connection | None = None

    def __enter__(self) -> SnapshotWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_timeout_ms / 1000)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA foreign_keys=ON")
        db.executescript(SCHEMA)
        for table, column, declaration in MIGRATIONS:
            if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
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

    def commit(self, snapshots: Sequence[NewSnapshot], log: FetchLogRow) -> list[int]:
        """Write the snapshots and their fetch-log row atomically; return the new snapshot ids."""
        db = self.db
        ids: list[int] = []
        db.execute("BEGIN IMMEDIATE")
        try:
            for snap in snapshots:
                cur = db.execute(
                    "INSERT INTO snapshots (target, chart_date, chart_hour, fetched_at, source, row_count, meta)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (snap.target, snap.chart_date, snap.chart_hour, iso(snap.fetched_at), snap.source,
                     len(snap.entries), snap.meta),
                )
                snapshot_id = int(cur.lastrowid or 0)
                ids.append(snapshot_id)
                db.executemany(
                    "INSERT INTO entries (snapshot_id, position, rank, title_key, artist_key, item_id, record,"
                    " search_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(snapshot_id, pos, e.rank, e.title_key, e.artist_key, e.item_id, e.record,
                      e.search_key or f"{e.title_key}|{e.artist_key}")
                     for pos, e in enumerate(snap.entries, start=1)],
                )
                if snap.raw is not None:
                    db.execute("INSERT INTO raw_payloads VALUES (?, ?, ?)", (snapshot_id, snap.raw_type, snap.raw))
                self._record_change(snapshot_id, snap)
            self._insert_log(log)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._prune()
        self._checkpoint()
        return ids

    def _record_change(self, snapshot_id: int, snap: NewSnapshot) -> None:
        """The change record of a snapshot just inserted, in its transaction: its diff against the previous
        snapshot of its target (by chart time), summarised."""
        db = self.db
        hour = -1 if snap.chart_hour is None else snap.chart_hour
        found = db.execute(PREVIOUS, (snap.target, snap.chart_date, hour, snapshot_id)).fetchone()
        previous = int(found[0]) if found else None
        before = list(map(changes.Row._make, db.execute(ENTRY_KEYS, (previous,)))) if previous else []
        lines = changes.diff(before, snap.entries)
        back = self._seen_before(snap.target, previous, changes.entered(lines)) if previous else set()
        summary = msgspec.json.encode(changes.summarize(lines, previous is None, back))
        db.execute("INSERT INTO changes (snapshot_id, previous_snapshot_id, target, chart_date, chart_hour, committed_at,"
                   " summary) VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (snapshot_id, previous, snap.target, snap.chart_date, snap.chart_hour, iso(self.now()), summary))

    def _seen_before(self, target: str, previous: int, who: list[changes.Identity]) -> set[changes.Identity]:
        """Those of `who` that are in a snapshot of `target` before `previous` (by chart time): re-entries."""
        date, hour = self.db.execute("SELECT chart_date, coalesce(chart_hour, -1) FROM snapshots WHERE id = ?",
                                     (previous,)).fetchone()
        # Entries first (CROSS JOIN keeps that order): an entry new to a chart has few earlier rows in the file,
        # while a chart may have thousands of earlier snapshots.
        earlier = ("SELECT 1 FROM entries e CROSS JOIN snapshots s ON s.id = e.snapshot_id WHERE {match} AND s.target = ?"
                   " AND (s.chart_date, coalesce(s.chart_hour, -1), s.id) < (?, ?, ?) LIMIT 1")
        by_item = earlier.format(match="e.item_id = ?")
        by_names = earlier.format(match="e.title_key = ? AND e.artist_key = ? AND coalesce(e.item_id, '') = ''")
        seen = set()
        for one in who:
            sql, keys = (by_item, (one.item_id,)) if one.item_id else (by_names, (one.title_key, one.artist_key))
            if self.db.execute(sql, (*keys, target, date, hour, previous)).fetchone():
                seen.add(one)
        return seen

    def _checkpoint(self, wait_ms: int = 200) -> None:
        """Fold the WAL back and truncate it, waiting only briefly for readers.

        Server reads are single short statements, so a brief wait nearly always suffices; when it
        does not, the data is committed anyway and the next crawl's checkpoint catches up.
        """
        self.db.execute(f"PRAGMA busy_timeout={wait_ms}")
        try:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self.db.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")

    def log_failure(self, log: FetchLogRow) -> None:
        """Record a failed attempt; the current snapshot stays as it was."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self._insert_log(log)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def record_run(self, kind: str, started: datetime, finished: datetime, targets: int, ok: int,
                   detail: bytes) -> int:
        """Keep a crawl run's summary (what the pull and backfill endpoints list)."""
        cur = self.db.execute(
            "INSERT INTO crawl_runs (kind, started_at, finished_at, targets, ok, detail) VALUES (?, ?, ?, ?, ?, ?)",
            (kind, iso(started), iso(finished), targets, ok, detail))
        return int(cur.lastrowid or 0)

    def latest_records(self, target: str) -> list[bytes]:
        """The entries of `target`'s newest snapshot (e.g. a discovered catalogue), [] when there is none."""
        return _latest_records(self.db, target)

    def _insert_log(self, log: FetchLogRow) -> None:
        self.db.execute(
            "INSERT INTO fetch_log (target, started_at, duration_ms, status, http_status, rows, url, error)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (log.target, iso(log.started_at), log.duration_ms, log.status, log.http_status, log.rows, log.url,
             log.error),
        )

    def _prune(self) -> None:
        """Drop snapshots past their target's retention, but never a target's newest one."""
        now = self.now()
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            for prefix, days in self.retention.items():
                db.execute(
                    "DELETE FROM snapshots WHERE substr(target, 1, length(?1)) = ?1 AND fetched_at < ?2"
                    " AND id NOT IN (SELECT max(id) FROM snapshots GROUP BY target)",
                    (prefix, iso(now - timedelta(days=days))),
                )
            db.execute(
                "DELETE FROM raw_payloads WHERE snapshot_id IN (SELECT id FROM snapshots WHERE fetched_at < ?)"
                " AND snapshot_id NOT IN (SELECT max(id) FROM snapshots GROUP BY target)",
                (iso(now - timedelta(days=self.raw_retention_days)),),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # Reads a crawl needs (earlier observations, previous snapshot) go through the same connection.
    def snapshots_between(self, target: str, start: datetime, end: datetime) -> list[SnapshotRow]:
        rows = self.db.execute(
            f"SELECT {SnapshotRow.COLUMNS} FROM snapshots WHERE target = ? AND fetched_at >= ? AND fetched_at <= ?"
            " ORDER BY fetched_at, id",
            (target, iso(start), iso(end)),
        ).fetchall()
        return [SnapshotRow(*row) for row in rows]

    def records(self, snapshot_id: int) -> list[bytes]:
        return _records(self.db, snapshot_id)


class SnapshotReader:
    """The server's side: one long-lived connection per group file, opened when the file exists.

    `query_only` rather than a read-only open, so a WAL file the crawler has not created yet
    is never a reason to fail. Each read is one statement.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: aiosqlite.Connection | None = None

    async def connection(self) -> aiosqlite.Connection | None:
        if self._db is None:
            if not self.path.exists():
                return None
            db = await aiosqlite.connect(self.path, timeout=5.0)
            await db.execute("PRAGMA query_only=1")
            self._db = db
        return self._db

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def data_version(self) -> int | None:
        """Changes whenever another connection (a crawler) commits; None while there is no file."""
        rows = await self.fetchall("PRAGMA data_version")
        return int(rows[0][0]) if rows else None

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row | tuple[Any, ...]]:
        db = await self.connection()
        if db is None:
            return []
        try:
            async with db.execute(sql, tuple(params)) as cursor:
                return list(await cursor.fetchall())
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []  # a file whose first crawl has not committed its schema yet
            raise

    async def latest(self, target: str) -> SnapshotRow | None:
        """The snapshot of `target` with the newest chart time (then the newest fetch): a backfill or
        import of an older chart committed later never replaces the current one."""
        rows = await self.fetchall(
            f"SELECT {SnapshotRow.COLUMNS} FROM snapshots WHERE target = ? ORDER BY {NEWEST} LIMIT 1", (target,))
        return SnapshotRow(*rows[0]) if rows else None

    async def latest_per_target(self, pattern: str | None = None) -> list[SnapshotRow]:
        """The newest snapshot of every target (matching GLOB `pattern` when given), by target."""
        where, params = (" WHERE target GLOB ?", [pattern]) if pattern else ("", [])
        rows = await self.fetchall(
            f"SELECT {SnapshotRow.COLUMNS} FROM (SELECT *, row_number() OVER (PARTITION BY target ORDER BY {NEWEST})"
            f" AS newest FROM snapshots{where}) WHERE newest = 1 ORDER BY target", params)
        return [SnapshotRow(*row) for row in rows]

    async def snapshots(self, pattern: str | None, limit: int) -> list[SnapshotRow]:
        """Snapshots of targets matching GLOB `pattern` (all when None), newest first."""
        where, params = ("WHERE target GLOB ?", [pattern]) if pattern else ("", [])
        rows = await self.fetchall(
            f"SELECT {SnapshotRow.COLUMNS} FROM snapshots {where} ORDER BY id DESC LIMIT ?", [*params, limit])
        return [SnapshotRow(*row) for row in rows]

    async def snapshots_with_ids(self, ids: Iterable[int]) -> list[SnapshotRow]:
        wanted = sorted(set(ids))
        if not wanted:
            return []
        rows = await self.fetchall(
            f"SELECT {SnapshotRow.COLUMNS} FROM snapshots WHERE id IN ({','.join('?' * len(wanted))}) ORDER BY id",
            wanted)
        return [SnapshotRow(*row) for row in rows]

    async def snapshot_on(self, target: str, chart_date: str) -> SnapshotRow | None:
        """The newest snapshot of `target` for chart date `chart_date`."""
        rows = await self.fetchall(
            f"SELECT {SnapshotRow.COLUMNS} FROM snapshots WHERE target = ? AND chart_date = ? ORDER BY id DESC"
            " LIMIT 1", (target, chart_date))
        return SnapshotRow(*rows[0]) if rows else None

    async def dates(self, target: str) -> list[str]:
        """The chart dates `target` has snapshots for, newest first."""
        rows = await self.fetchall(
            "SELECT DISTINCT chart_date FROM snapshots WHERE target = ? ORDER BY chart_date DESC", (target,))
        return [row[0] for row in rows]

    async def raw(self, snapshot_id: int) -> tuple[str, bytes] | None:
        """The upstream payload a snapshot was parsed from, when it was kept: (content type, body)."""
        rows = await self.fetchall("SELECT content_type, body FROM raw_payloads WHERE snapshot_id = ?", (snapshot_id,))
        return (rows[0][0], rows[0][1]) if rows else None

    async def search(self, needle: str, patterns: str | Sequence[str] | None, limit: int, *,
                     latest_only: bool = False) -> list[tuple[SnapshotRow, int, bytes]]:
        """Entries whose search key contains `needle` (already folded) in snapshots of targets matching
        any GLOB of `patterns` (all targets when None): (snapshot, rank, record).

        Over every stored snapshot, newest first then by rank; or, with `latest_only`, over each
        target's latest snapshot only, best rank first.
        """
        globs = [patterns] if isinstance(patterns, str) else list(patterns or [])
        scope = " OR ".join("target GLOB ?" for _ in globs) or "1"
        like = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        columns = ", ".join(f"s.{c.strip()}" for c in SnapshotRow.COLUMNS.split(","))
        if latest_only:
            snapshots = (f"s.id IN (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY target ORDER BY {NEWEST})"
                         f" AS newest FROM snapshots WHERE {scope}) WHERE newest = 1)")
            order = "e.rank, s.target"
        else:
            snapshots, order = f"s.id IN (SELECT id FROM snapshots WHERE {scope})", "s.id DESC, e.position"
        rows = await self.fetchall(
            f"SELECT {columns}, e.rank, e.record FROM entries e JOIN snapshots s ON s.id = e.snapshot_id"
            f" WHERE {snapshots} AND e.search_key LIKE ? ESCAPE '\\' ORDER BY {order} LIMIT ?",
            [*globs, like, limit])
        return [(SnapshotRow(*row[:7]), row[7], row[8]) for row in rows]

    async def history(self, title_glob: str, artist_needle: str, pattern: str | None,
                      ) -> list[tuple[SnapshotRow, int, bytes]]:
        """Every appearance of a title (its title_key matching GLOB `title_glob`: a key, or a key's prefix) credited
        to an artist whose key contains `artist_needle`, in snapshots of targets matching `pattern`: oldest chart
        date first."""
        where, params = (" AND s.target GLOB ?", [pattern]) if pattern else ("", [])
        columns = ", ".join(f"s.{c.strip()}" for c in SnapshotRow.COLUMNS.split(","))
        rows = await self.fetchall(
            f"SELECT {columns}, e.rank, e.record FROM entries e JOIN snapshots s ON s.id = e.snapshot_id"
            f" WHERE e.title_key GLOB ? AND instr(substr(e.search_key, instr(e.search_key, '|')), ?) > 0{where}"
            " ORDER BY s.chart_date, s.target, s.id", [title_glob, artist_needle, *params])
        return [(SnapshotRow(*row[:7]), row[7], row[8]) for row in rows]

    async def runs(self, kind: str, limit: int) -> list[RunRow]:
        """Recorded runs of `kind`, newest first."""
        rows = await self.fetchall(
            f"SELECT {RUN_COLUMNS} FROM crawl_runs WHERE kind = ? ORDER BY id DESC LIMIT ?", (kind, limit))
        return [RunRow(*row) for row in rows]

    async def records(self, snapshot_id: int, limit: int) -> list[bytes]:
        rows = await self.fetchall(
            "SELECT record FROM entries WHERE snapshot_id = ? ORDER BY position LIMIT ?", (snapshot_id, limit))
        return [row[0] for row in rows]

    async def latest_failures(self) -> dict[str, tuple[str, str]]:
        """Per target, its newest failed attempt: (started_at, error)."""
        rows = await self.fetchall(
            "SELECT target, started_at, coalesce(error, 'failed') FROM fetch_log WHERE id IN"
            " (SELECT max(id) FROM fetch_log WHERE status = 'failed' GROUP BY target)")
        return {str(r[0]): (str(r[1]), str(r[2])) for r in rows}

    async def outcomes_by_day(self, since: str) -> list[tuple[str, int, int]]:
        """(day, attempts ok, attempts failed) per UTC day from `since` (YYYY-MM-DD), oldest first."""
        return [(str(r[0]), int(r[1]), int(r[2])) for r in await self.fetchall(
            "SELECT substr(started_at, 1, 10) AS day, sum(status = 'ok'), sum(status = 'failed') FROM fetch_log"
            " WHERE started_at >= ? GROUP BY day ORDER BY day", [since])]

    async def fetch_log(self, status: str | None, limit: int) -> list[tuple[Any, ...]]:
        where, params = ("WHERE status = ?", [status]) if status else ("", [])
        return [tuple(r) for r in await self.fetchall(
            "SELECT id, target, started_at, duration_ms, status, http_status, rows, url, error FROM fetch_log"
            f" {where} ORDER BY id DESC LIMIT ?", [*params, limit])]

    # --- the change feed (chartgw.changes, chartgw.feed) ---

    async def changes_after(self, after: int, targets: Sequence[str], limit: int) -> tuple[list[ChangeRow], int]:
        """Change records with ids above `after` (of `targets` only, when any), oldest first, at most `limit`;
        and the file's newest change id in the same read (0 without any), so a reader knows what it has seen."""
        where = f" AND target IN ({','.join('?' * len(targets))})" if targets else ""
        rows = await self.fetchall(
            f"WITH top AS (SELECT coalesce(max(id), 0) AS newest FROM changes) SELECT top.newest, c.* FROM top LEFT JOIN"
            f" (SELECT {ChangeRow.COLUMNS} FROM changes WHERE id > ?{where} ORDER BY id LIMIT ?) c ON 1 ORDER BY c.id",
            [after, *targets, limit])
        newest = int(rows[0][0]) if rows else 0
        return [ChangeRow(*row[1:]) for row in rows if row[1] is not None], newest

    async def latest_change(self) -> ChangeRow | None:
        rows = await self.fetchall(f"SELECT {ChangeRow.COLUMNS} FROM changes ORDER BY id DESC LIMIT 1")
        return ChangeRow(*rows[0]) if rows else None

    async def previous_snapshot(self, row: SnapshotRow) -> SnapshotRow | None:
        """The snapshot of `row`'s target before it by chart time: what its change record compares it with."""
        found = await self.fetchall(PREVIOUS, (row.target, row.chart_date, -1 if row.chart_hour is None else row.chart_hour,
                                               row.id))
        return next(iter(await self.snapshots_with_ids([found[0][0]])), None) if found else None

    async def entry_rows(self, snapshot_id: int) -> list[changes.Row]:
        """A snapshot's entries with their identity columns, in chart order."""
        return [changes.Row._make(row) for row in await self.fetchall(ENTRY_KEYS, (snapshot_id,))]
