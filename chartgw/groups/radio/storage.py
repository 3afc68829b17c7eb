"""/radio's monitor tables (stations' states, plays, runs) in the group's SQLite file: the schema, the
writer's batches, and which stations to watch.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from chartgw.groups.radio.settings import NAME
from chartgw.store import group_db_path, iso
from chartgw.text import compact

# --- the store -----------------------------------------------------------------------------------------

SCHEMA = """
CREATE TABLE IF NOT EXISTS stations (
    station_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    countrycode TEXT,
    clickcount INTEGER NOT NULL,
    hls INTEGER NOT NULL,
    stream_url TEXT NOT NULL,
    name_key TEXT NOT NULL,
    tags_key TEXT NOT NULL,
    city_key TEXT NOT NULL,
    record BLOB NOT NULL,
    active INTEGER NOT NULL,
    first_seen_at TEXT NOT NULL,
    last_seen_at TEXT NOT NULL,
    inactive_since TEXT
);
CREATE TABLE IF NOT EXISTS station_sources (
    target TEXT NOT NULL,
    station_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (target, station_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS station_sources_by_station ON station_sources (station_id);
CREATE TABLE IF NOT EXISTS plays (
    id INTEGER PRIMARY KEY,
    station_id TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    stream_title TEXT NOT NULL,
    kind TEXT NOT NULL,
    artist TEXT,
    title TEXT,
    artist_key TEXT NOT NULL,
    title_key TEXT NOT NULL,
    method TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS plays_by_station ON plays (station_id, id);
CREATE INDEX IF NOT EXISTS plays_by_start ON plays (started_at, id);
CREATE INDEX IF NOT EXISTS plays_open ON plays (station_id) WHERE ended_at IS NULL;
CREATE INDEX IF NOT EXISTS plays_by_track ON plays (title_key, artist_key) WHERE kind = 'track';
CREATE TABLE IF NOT EXISTS station_state (
    station_id TEXT PRIMARY KEY,
    monitored INTEGER NOT NULL,
    method TEXT,
    status TEXT NOT NULL,
    last_title TEXT,
    last_title_at TEXT,
    last_heard_at TEXT,
    last_error TEXT,
    error_reason TEXT,
    error_at TEXT,
    failures INTEGER NOT NULL,
    next_attempt_at TEXT,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS monitor_runs (
    id INTEGER PRIMARY KEY,
    pid INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    stopped_at TEXT,
    stations INTEGER NOT NULL,
    plays INTEGER NOT NULL
);
"""

Write = tuple[str, tuple[Any, ...]]
"""One statement of a batch."""
BATCH_STATEMENTS = 200
"""At most this many statements per transaction: small batches, short write locks."""


def open_db(path: Path | None = None, busy_timeout_ms: int = 30_000) -> sqlite3.Connection:
    """The group file with the monitor's tables, opened the way `chartgw.store` opens a writer."""
    path = path or group_db_path(NAME)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    create_schema(db)
    return db


def create_schema(db: sqlite3.Connection) -> None:
    db.executescript(SCHEMA)


def commit_batch(db: sqlite3.Connection, writes: Sequence[Write]) -> None:
    """`writes` in transactions of at most BATCH_STATEMENTS statements each: all of one or none."""
    for start in range(0, len(writes), BATCH_STATEMENTS):
        db.execute("BEGIN IMMEDIATE")
        try:
            for sql, params in writes[start:start + BATCH_STATEMENTS]:
                db.execute(sql, params)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


def play_writes(station_id: str, at: datetime, ended_at: datetime, stream_title: str, kind: str,
                artist: str | None, title: str | None, method: str) -> list[Write]:
    """A play begins: the station's open play ends at `ended_at`, the new one is inserted."""
    return [
        ("UPDATE plays SET ended_at = ? WHERE station_id = ? AND ended_at IS NULL", (iso(ended_at), station_id)),
        ("INSERT INTO plays (station_id, started_at, ended_at, stream_title, kind, artist, title, artist_key, title_key,"
         " method) VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)",
         (station_id, iso(at), stream_title, kind, artist, title, compact(artist or ""), compact(title or ""), method)),
    ]


STATE_COLUMNS = ("monitored", "method", "status", "last_title", "last_title_at", "last_heard_at", "last_error",
                 "error_reason", "error_at", "failures", "next_attempt_at", "updated_at")


def state_write(station_id: str, **values: Any) -> Write:
    """Upsert of the named state columns of one station (others keep their value, or their default on insert)."""
    unknown = set(values) - set(STATE_COLUMNS)
    assert not unknown, unknown
    defaults: dict[str, Any] = {"monitored": 1, "status": "starting", "failures": 0, "updated_at": values.get(
        "updated_at", "")}
    row = {**defaults, **values}
    names = list(row)
    placeholders = ", ".join("?" for _ in names)
    updates = ", ".join(f"{n} = excluded.{n}" for n in values)
    return (f"INSERT INTO station_state (station_id, {', '.join(names)}) VALUES (?, {placeholders})"
            f" ON CONFLICT (station_id) DO UPDATE SET {updates}", (station_id, *row.values()))


# --- what to watch -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Watched:
    station_id: str
    name: str
    stream_url: str
    countrycode: str | None = None


def select_stations(db: sqlite3.Connection, limit: int, countries: tuple[str, ...] = (),
                    tags: tuple[str, ...] = ()) -> list[Watched]:
    """Active, non-HLS stations, the most clicked of each country in turn (then of each tag list),
    until `limit`: every configured country gets its top stations watched, not just the biggest one."""
    buckets: list[list[Watched]] = []
    for cc in countries:
        rows = db.execute("SELECT station_id, name, stream_url, countrycode FROM stations WHERE active = 1 AND hls = 0"
                          " AND countrycode = ? ORDER BY clickcount DESC, station_id LIMIT ?", (cc.upper(), limit))
        buckets.append([Watched(*row) for row in rows])
    for tag in tags:
        rows = db.execute("SELECT s.station_id, s.name, s.stream_url, s.countrycode FROM stations s JOIN station_sources"
                          " ss ON ss.station_id = s.station_id AND ss.target = ? WHERE s.active = 1 AND s.hls = 0"
                          " ORDER BY s.clickcount DESC, s.station_id LIMIT ?", (tag_target(tag), limit))
        buckets.append([Watched(*row) for row in rows])
    if not buckets:
        rows = db.execute("SELECT station_id, name, stream_url, countrycode FROM stations WHERE active = 1 AND hls = 0"
                          " ORDER BY clickcount DESC, station_id LIMIT ?", (limit,))
        buckets.append([Watched(*row) for row in rows])
    chosen: dict[str, Watched] = {}
    depth = 0
    while len(chosen) < limit and any(depth < len(b) for b in buckets):
        for bucket in buckets:
            if depth < len(bucket) and len(chosen) < limit:
                chosen.setdefault(bucket[depth].station_id, bucket[depth])
        depth += 1
    return list(chosen.values())


def tag_target(tag: str) -> str:
    """The snapshot target of a tag list: "directory-tag/top 40" ("/" and "@" in a tag become "-")."""
    return "directory-tag/" + tag.strip().lower().replace("/", "-").replace("@", "-")


def country_target(cc: str) -> str:
    return f"directory/{cc.lower()}"
