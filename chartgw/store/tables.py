"""The platform's tables in every group's file, and the queries over them that the store runs for everyone.

A group's own queries over these tables (a search in its own order, a history by item) are the group's to
declare (`Group.storage`); a query more than one group needs lives here once, behind a `SnapshotReader` or
`SnapshotWriter` method.
"""

from __future__ import annotations

from chartgw.store.schema import Index, Query, Table

FETCH_LOG = Table("fetch_log", (
    "id INTEGER PRIMARY KEY",
    "target TEXT NOT NULL",
    "started_at TEXT NOT NULL",
    "duration_ms INTEGER NOT NULL",
    "status TEXT NOT NULL CHECK (status IN ('ok', 'failed'))",
    "http_status INTEGER",
    "rows INTEGER",
    "url TEXT",
    "error TEXT",
), indexes=(Index("fetch_log_by_target", "target, id"),))
"""Every attempt to refresh a target; also the layout of any other file the /fetch-logs route reads."""

SNAPSHOTS = Table("snapshots", (
    "id INTEGER PRIMARY KEY",
    "target TEXT NOT NULL",
    "chart_date TEXT NOT NULL",
    "chart_hour INTEGER",
    "fetched_at TEXT NOT NULL",
    "source TEXT NOT NULL",
    "row_count INTEGER NOT NULL",
    "meta BLOB",
), indexes=(Index("snapshots_by_target", "target, id"),
            Index("snapshots_by_chart_time", "target, chart_date, chart_hour, id")))

ENTRIES = Table("entries", (
    "snapshot_id INTEGER NOT NULL REFERENCES snapshots (id) ON DELETE CASCADE",
    "position INTEGER NOT NULL",
    "rank INTEGER NOT NULL",
    "title_key TEXT NOT NULL",
    "artist_key TEXT NOT NULL",
    "item_id TEXT",
    "record BLOB NOT NULL",
    "search_key TEXT",  # added after files existed: migrated in by `migrate`
), constraints=("PRIMARY KEY (snapshot_id, position)",), without_rowid=True,
    indexes=(Index("entries_by_title", "title_key"), Index("entries_by_item", "item_id")))

RAW_PAYLOADS = Table("raw_payloads", (
    "snapshot_id INTEGER PRIMARY KEY REFERENCES snapshots (id) ON DELETE CASCADE",
    "content_type TEXT NOT NULL",
    "body BLOB NOT NULL",
))

CRAWL_RUNS = Table("crawl_runs", (
    "id INTEGER PRIMARY KEY",
    "kind TEXT NOT NULL",
    "started_at TEXT NOT NULL",
    "finished_at TEXT NOT NULL",
    "targets INTEGER NOT NULL",
    "ok INTEGER NOT NULL",
    "detail BLOB NOT NULL",
), indexes=(Index("crawl_runs_by_kind", "kind, id"),))

CHANGES = Table("changes", (
    "id INTEGER PRIMARY KEY AUTOINCREMENT",
    "snapshot_id INTEGER NOT NULL",
    "previous_snapshot_id INTEGER",
    "target TEXT NOT NULL",
    "chart_date TEXT NOT NULL",
    "chart_hour INTEGER",
    "committed_at TEXT NOT NULL",
    "summary BLOB NOT NULL",
), indexes=(Index("changes_by_snapshot", "snapshot_id"),))
"""The feed (chartgw.store.diff): one row per committed snapshot, written in its transaction. Its ids never repeat
(AUTOINCREMENT), and pruning snapshots keeps it: each summary stands alone."""

TABLES = (FETCH_LOG, SNAPSHOTS, ENTRIES, RAW_PAYLOADS, CRAWL_RUNS, CHANGES)
"""What every group's file holds."""

NEWEST = "chart_date DESC, chart_hour DESC, id DESC"
""""Latest" means the newest chart time, then the newest fetch: a backfill or import of an older chart committed
later never replaces the current one. Every query that picks a latest snapshot orders by this."""

ROW = "id, target, chart_date, chart_hour, fetched_at, source, row_count, meta"
"""The columns a `SnapshotRow` is read from."""
S_ROW = ", ".join(f"s.{column}" for column in ROW.split(", "))
"""`ROW` of the snapshots table joined as `s`."""
RUN = "id, kind, started_at, finished_at, targets, ok, detail"
CHANGE = "id, snapshot_id, previous_snapshot_id, target, chart_date, chart_hour, committed_at, summary"
"""The columns a `ChangeRow` is read from."""


def newest_per_target(where: str) -> str:
    """The ids of each target's latest snapshot among those `where` selects (SQL, over `snapshots`)."""
    return (f"SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY target ORDER BY {NEWEST}) AS newest"
            f" FROM snapshots WHERE {where}) WHERE newest = 1")


# --- writes ---------------------------------------------------------------------------------------------------

INSERT_SNAPSHOT = Query("insert_snapshot", "INSERT INTO snapshots (target, chart_date, chart_hour, fetched_at, source,"
                                           " row_count, meta) VALUES (?, ?, ?, ?, ?, ?, ?)")
INSERT_ENTRY = Query("insert_entry", "INSERT INTO entries (snapshot_id, position, rank, title_key, artist_key, item_id,"
                                     " record, search_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
INSERT_RAW = Query("insert_raw", "INSERT INTO raw_payloads (snapshot_id, content_type, body) VALUES (?, ?, ?)")
INSERT_LOG = Query("insert_log", "INSERT INTO fetch_log (target, started_at, duration_ms, status, http_status, rows,"
                                 " url, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
INSERT_RUN = Query("insert_run", "INSERT INTO crawl_runs (kind, started_at, finished_at, targets, ok, detail)"
                                 " VALUES (?, ?, ?, ?, ?, ?)")
PRUNE_SNAPSHOTS = Query("prune_snapshots",
                        "DELETE FROM snapshots WHERE substr(target, 1, length(?1)) = ?1 AND fetched_at < ?2"
                        " AND id NOT IN (SELECT max(id) FROM snapshots GROUP BY target)")
PRUNE_RAW = Query("prune_raw", "DELETE FROM raw_payloads WHERE snapshot_id IN (SELECT id FROM snapshots WHERE"
                               " fetched_at < ?) AND snapshot_id NOT IN (SELECT max(id) FROM snapshots GROUP BY target)")

INSERT_CHANGE = Query("insert_change", "INSERT INTO changes (snapshot_id, previous_snapshot_id, target, chart_date,"
                                       " chart_hour, committed_at, summary) VALUES (?, ?, ?, ?, ?, ?, ?)")

# --- reads ----------------------------------------------------------------------------------------------------

DATA_VERSION = Query("data_version", "PRAGMA data_version")
LATEST = Query("latest", f"SELECT {ROW} FROM snapshots WHERE target = ? ORDER BY {NEWEST} LIMIT ?")
"""A target's snapshots, latest first (`LIMIT 1`: the latest)."""
LATEST_PER_TARGET = Query("latest_per_target", f"SELECT {ROW} FROM snapshots WHERE id IN"
                                               f" ({newest_per_target('?1 IS NULL OR target GLOB ?1')}) ORDER BY target")
SNAPSHOTS_BY_FETCH = Query("snapshots_by_fetch", f"SELECT {ROW} FROM snapshots WHERE ?1 IS NULL OR target GLOB ?1"
                                                 " ORDER BY id DESC LIMIT ?2")
SNAPSHOTS_WITH_IDS = Query("snapshots_with_ids", f"SELECT {ROW} FROM snapshots WHERE id IN"
                                                 " (SELECT value FROM json_each(?)) ORDER BY id")
SNAPSHOTS_BETWEEN = Query("snapshots_between", f"SELECT {ROW} FROM snapshots WHERE target = ? AND fetched_at >= ?"
                                               " AND fetched_at <= ? ORDER BY fetched_at, id")
HELD = Query("held", f"SELECT {ROW} FROM snapshots WHERE target = ? AND chart_date = ? ORDER BY id DESC LIMIT 1")
"""The snapshot held for a target's chart date: the newest fetch of it."""
ON_OR_BEFORE = Query("on_or_before", f"SELECT {ROW} FROM snapshots WHERE target = ? AND chart_date <= ?"
                                     f" ORDER BY {NEWEST} LIMIT 1")
"""The latest snapshot of a target dated no later than a day (the week that day may fall in)."""
DATES = Query("dates", "SELECT DISTINCT chart_date FROM snapshots WHERE target = ? ORDER BY chart_date DESC LIMIT ?")
NEIGHBOURS = Query("neighbours", "SELECT (SELECT max(chart_date) FROM snapshots WHERE target = ?1 AND chart_date < ?2),"
                                 " (SELECT min(chart_date) FROM snapshots WHERE target = ?1 AND chart_date > ?2)")
"""The chart dates held just before and just after a date."""
_COVERAGE = "SELECT target, min(chart_date), max(chart_date), count(DISTINCT chart_date), count(*), max(fetched_at)"
COVERAGE = Query("coverage", f"{_COVERAGE} FROM snapshots GROUP BY target")
SPANS = Query("spans", "SELECT target, min(chart_date), max(chart_date), count(DISTINCT chart_date), count(*)"
                       " FROM snapshots GROUP BY target")
"""`COVERAGE` without the last fetch: read from the chart-time index alone, never the table's rows (`GET /charts`)."""
COVERAGE_OF = Query("coverage_of", f"{_COVERAGE} FROM snapshots WHERE target = ? GROUP BY target")
SPAN = Query("span", "SELECT count(*), min(fetched_at), max(fetched_at) FROM snapshots")
TABLE_NAMES = Query("table names", "SELECT name FROM sqlite_master WHERE type = 'table'")
NEWEST_FETCH_PER_TARGET = Query("newest fetch per target", "SELECT target, fetched_at FROM snapshots WHERE id IN"
                                " (SELECT max(id) FROM snapshots GROUP BY target)")
LAST_FETCH_LOG_ID = Query("last fetch-log id", "SELECT max(id) FROM fetch_log")
FETCH_LOG_SPAN = Query("fetch-log span", "SELECT min(started_at), max(started_at) FROM fetch_log")
FETCH_OUTCOMES_BETWEEN = Query("fetch outcomes between ids", "SELECT target, status, count(*) FROM fetch_log"
                               " WHERE id > ? AND id <= ? GROUP BY target, status")
TARGETS = Query("targets", "SELECT DISTINCT target FROM snapshots")
PENDING_AFTER = Query("pending_after", "SELECT (SELECT max(id) FROM snapshots), count(*), min(fetched_at)"
                                       " FROM snapshots WHERE id > ?")
"""(newest snapshot id, snapshots after an id, the oldest fetch of those): how far a reader of the file lags."""
SNAPSHOTS_AFTER = Query("snapshots_after", "SELECT id, target, chart_date, chart_hour, fetched_at FROM snapshots"
                                           " WHERE id > ? ORDER BY id LIMIT ?")
"""The next snapshots in commit order after an id (what a reader of every snapshot, the index, takes next)."""
ENTRIES_BETWEEN = Query("entries_between", "SELECT snapshot_id, rank, record FROM entries WHERE snapshot_id BETWEEN ? AND ?"
                                           " ORDER BY snapshot_id, position")
RECORDS = Query("records", "SELECT record FROM entries WHERE snapshot_id = ? ORDER BY position LIMIT ? OFFSET ?")
LATEST_RECORDS = Query("latest_records", "SELECT record FROM entries WHERE snapshot_id ="
                                         " (SELECT max(id) FROM snapshots WHERE target = ?) ORDER BY position")
"""The entries of a target's newest fetch (a discovered catalogue, a server list: what was read last)."""
RECORD_AT_RANK = Query("record_at_rank", "SELECT record FROM entries WHERE snapshot_id = ? AND rank = ? LIMIT 1")
RAW = Query("raw", "SELECT content_type, body FROM raw_payloads WHERE snapshot_id = ?")
RUNS = Query("runs", f"SELECT {RUN} FROM crawl_runs WHERE kind = ? ORDER BY id DESC LIMIT ?")
_MATCH = (f"SELECT {S_ROW}, e.rank, e.record FROM entries e JOIN snapshots s ON s.id = e.snapshot_id"
          " WHERE e.search_key LIKE ?2 ESCAPE '\\' AND s.id IN")
_SCOPE = "?1 IS NULL OR EXISTS (SELECT 1 FROM json_each(?1) WHERE target GLOB value)"
SEARCH = Query("search", f"{_MATCH} (SELECT id FROM snapshots WHERE {_SCOPE}) ORDER BY s.id DESC, e.position LIMIT ?3")
"""Entries whose search key contains a needle (`like_pattern`) in any snapshot of the targets matching any GLOB of
a JSON list (every target when NULL): newest snapshot first, then by position."""
SEARCH_LATEST = Query("search_latest", f"{_MATCH} ({newest_per_target(_SCOPE)}) ORDER BY e.rank, s.target LIMIT ?3")
"""`SEARCH` over each target's latest snapshot only: best rank first."""
HISTORY = Query("history", f"SELECT {S_ROW}, e.rank, e.record FROM entries e JOIN snapshots s ON s.id = e.snapshot_id"
                           " WHERE e.title_key GLOB ?1 AND instr(substr(e.search_key, instr(e.search_key, '|')), ?2) > 0"
                           " AND (?3 IS NULL OR s.target GLOB ?3) ORDER BY s.chart_date, s.target, s.id")
"""Every appearance of a title (its title key matching a GLOB: a key, or a key's prefix) credited to an artist whose
key contains a needle, oldest first."""
LATEST_FAILURES = Query("latest_failures", "SELECT target, started_at, coalesce(error, 'failed') FROM fetch_log WHERE id"
                                           " IN (SELECT max(id) FROM fetch_log WHERE status = 'failed' GROUP BY target)")
OUTCOMES_BY_DAY = Query("outcomes_by_day", "SELECT substr(started_at, 1, 10) AS day, sum(status = 'ok'),"
                                           " sum(status = 'failed') FROM fetch_log WHERE started_at >= ?"
                                           " GROUP BY day ORDER BY day")
FETCH_LOG_PAGE = Query("fetch_log_page", "SELECT id, target, started_at, duration_ms, status, http_status, rows, url,"
                                         " error FROM fetch_log WHERE ?1 IS NULL OR status = ?1 ORDER BY id DESC LIMIT ?2")

# --- the change feed (chartgw.store.diff, chartgw.push.changes) ---------------------------------------------------------

PREVIOUS = Query("previous", "SELECT id FROM snapshots WHERE target = ?1 AND (chart_date, coalesce(chart_hour, -1), id)"
                             " < (?2, ?3, ?4) ORDER BY chart_date DESC, coalesce(chart_hour, -1) DESC, id DESC LIMIT 1")
"""The snapshot before (target, chart date, hour or -1, id) in the order of NEWEST: what a change compares with."""
ENTRY_KEYS = Query("entry_keys", "SELECT rank, title_key, artist_key, item_id, record FROM entries WHERE snapshot_id = ?"
                                 " ORDER BY position")
CHART_TIME = Query("chart_time", "SELECT chart_date, coalesce(chart_hour, -1) FROM snapshots WHERE id = ?")
# Entries first (CROSS JOIN keeps that order): an entry new to a chart has few earlier rows in the file, while a
# chart may have thousands of earlier snapshots.
_EARLIER = ("SELECT 1 FROM entries e CROSS JOIN snapshots s ON s.id = e.snapshot_id WHERE {match} AND s.target = ?"
            " AND (s.chart_date, coalesce(s.chart_hour, -1), s.id) < (?, ?, ?) LIMIT 1")
EARLIER_ITEM = Query("earlier_item", _EARLIER.format(match="e.item_id = ?"))
"""Whether an item is in a snapshot of a target before a chart time (a re-entry)."""
EARLIER_NAMES = Query("earlier_names", _EARLIER.format(
    match="e.title_key = ? AND e.artist_key = ? AND coalesce(e.item_id, '') = ''"))
"""`EARLIER_ITEM` for an entry without an item id, by its title and artist keys."""
CHANGES_AFTER = Query("changes_after", f"WITH top AS (SELECT coalesce(max(id), 0) AS newest FROM changes)"
                                       f" SELECT top.newest, c.* FROM top LEFT JOIN (SELECT {CHANGE} FROM changes"
                                       " WHERE id > ?1 AND (?2 IS NULL OR target IN (SELECT value FROM json_each(?2)))"
                                       " ORDER BY id LIMIT ?3) c ON 1 ORDER BY c.id")
"""Change records after an id (of a JSON list of targets, when given), oldest first, with the file's newest id."""
CHANGE_HEADS = Query("change_heads", "WITH top AS (SELECT coalesce(max(id), 0) AS newest FROM changes)"
                                     " SELECT top.newest, c.* FROM top LEFT JOIN (SELECT id, committed_at FROM changes"
                                     " WHERE id > ?1 AND (?2 IS NULL OR target IN (SELECT value FROM json_each(?2)))"
                                     " ORDER BY id LIMIT ?3) c ON 1 ORDER BY c.id")
"""The ids and commit times only of CHANGES_AFTER's rows (what the feed merges groups by, before it reads any
summary), with the file's newest id."""
LATEST_CHANGE = Query("latest_change", f"SELECT {CHANGE} FROM changes ORDER BY id DESC LIMIT 1")

QUERIES = tuple(value for value in list(globals().values()) if isinstance(value, Query))
"""Every query of this module (what tests/test_store_schema.py compiles against `TABLES`)."""
