"""/radio's storage: the tables it keeps in its file beside the platform's snapshots, every query over them,
the monitor's writes (batches), and which stations to watch.

`stations` is the merged directory (every station ever listed; `station_sources` says which configured list
names it now); `plays`, `station_state` and `monitor_runs` are the monitor's. The directory crawl
(`directory`), the monitor (`monitor`) and the roll-up (`rollup`) write them, the routes read them; all of it
through the statements declared here (`STORAGE`, on the group).

Optional filters are `(?N IS NULL OR ...)`; a LIKE filter takes `chartgw.store.like_pattern` of a folded key.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from chartgw.core.text import compact
from chartgw.store import Index, Query, Storage, Table, connect, iso, migrate, transaction

STATIONS = Table("stations", (
    "station_id TEXT PRIMARY KEY",
    "name TEXT NOT NULL",
    "countrycode TEXT",
    "clickcount INTEGER NOT NULL",
    "hls INTEGER NOT NULL",
    "stream_url TEXT NOT NULL",
    "name_key TEXT NOT NULL",
    "tags_key TEXT NOT NULL",
    "city_key TEXT NOT NULL",
    "record BLOB NOT NULL",
    "active INTEGER NOT NULL",
    "first_seen_at TEXT NOT NULL",
    "last_seen_at TEXT NOT NULL",
    "inactive_since TEXT",
))
STATION_SOURCES = Table("station_sources", (
    "target TEXT NOT NULL",
    "station_id TEXT NOT NULL",
    "position INTEGER NOT NULL",
), ("PRIMARY KEY (target, station_id)",), (Index("station_sources_by_station", "station_id"),), without_rowid=True)
PLAYS = Table("plays", (
    "id INTEGER PRIMARY KEY",
    "station_id TEXT NOT NULL",
    "started_at TEXT NOT NULL",
    "ended_at TEXT",
    "stream_title TEXT NOT NULL",
    "kind TEXT NOT NULL",
    "artist TEXT",
    "title TEXT",
    "artist_key TEXT NOT NULL",
    "title_key TEXT NOT NULL",
    "method TEXT NOT NULL",
), indexes=(
    Index("plays_by_station", "station_id, id"),
    Index("plays_by_start", "started_at, id"),
    Index("plays_open", "station_id", where="ended_at IS NULL"),
    Index("plays_by_track", "title_key, artist_key", where="kind = 'track'"),
))
STATION_STATE = Table("station_state", (
    "station_id TEXT PRIMARY KEY",
    "monitored INTEGER NOT NULL",
    "method TEXT",
    "status TEXT NOT NULL",
    "last_title TEXT",
    "last_title_at TEXT",
    "last_heard_at TEXT",
    "last_error TEXT",
    "error_reason TEXT",
    "error_at TEXT",
    "failures INTEGER NOT NULL",
    "next_attempt_at TEXT",
    "updated_at TEXT NOT NULL",
))
MONITOR_RUNS = Table("monitor_runs", (
    "id INTEGER PRIMARY KEY",
    "pid INTEGER NOT NULL",
    "started_at TEXT NOT NULL",
    "heartbeat_at TEXT NOT NULL",
    "stopped_at TEXT",
    "stations INTEGER NOT NULL",
    "plays INTEGER NOT NULL",
))
TABLES = (STATIONS, STATION_SOURCES, PLAYS, STATION_STATE, MONITOR_RUNS)

# --- the directory crawl --------------------------------------------------------------------------------------

UPSERT_STATION = Query("upsert_station", (
    "INSERT INTO stations (station_id, name, countrycode, clickcount, hls, stream_url, name_key, tags_key, city_key,"
    " record, active, first_seen_at, last_seen_at, inactive_since) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, NULL)"
    " ON CONFLICT (station_id) DO UPDATE SET name = excluded.name, countrycode = excluded.countrycode,"
    " clickcount = excluded.clickcount, hls = excluded.hls, stream_url = excluded.stream_url,"
    " name_key = excluded.name_key, tags_key = excluded.tags_key, city_key = excluded.city_key,"
    " record = excluded.record, last_seen_at = max(stations.last_seen_at, excluded.last_seen_at)"))
CLEAR_SOURCES = Query("clear_sources", "DELETE FROM station_sources WHERE target = ?")
ADD_SOURCE = Query("add_source", "INSERT OR IGNORE INTO station_sources (target, station_id, position) VALUES (?, ?, ?)")
_LISTED = ("SELECT 1 FROM station_sources ss WHERE ss.station_id = stations.station_id"
           " AND ss.target IN (SELECT value FROM json_each(?{n}))")
DEACTIVATE = Query("deactivate", "UPDATE stations SET active = 0, inactive_since = ?1 WHERE active = 1"
                                 f" AND NOT EXISTS ({_LISTED.format(n=2)})")
"""Stations no list of a JSON array of targets names any more: inactive since a time."""
REACTIVATE = Query("reactivate", f"UPDATE stations SET active = 1, inactive_since = NULL WHERE active = 0"
                                 f" AND EXISTS ({_LISTED.format(n=1)})")

# --- the monitor ----------------------------------------------------------------------------------------------

WATCHABLE = Query("watchable", "SELECT station_id, name, stream_url, countrycode FROM stations WHERE active = 1"
                               " AND hls = 0 AND (?1 IS NULL OR countrycode = ?1)"
                               " ORDER BY clickcount DESC, station_id LIMIT ?2")
"""Active non-HLS stations (of one country when given), most clicked first."""
WATCHABLE_LISTED = Query("watchable_listed", "SELECT s.station_id, s.name, s.stream_url, s.countrycode FROM stations s"
                                             " JOIN station_sources ss ON ss.station_id = s.station_id AND ss.target = ?"
                                             " WHERE s.active = 1 AND s.hls = 0"
                                             " ORDER BY s.clickcount DESC, s.station_id LIMIT ?")
"""`WATCHABLE` of the stations one directory list names."""
END_PLAY = Query("end_play", "UPDATE plays SET ended_at = ? WHERE station_id = ? AND ended_at IS NULL")
INSERT_PLAY = Query("insert_play", "INSERT INTO plays (station_id, started_at, ended_at, stream_title, kind, artist,"
                                   " title, artist_key, title_key, method) VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)")
STATE_COLUMNS = ("monitored", "method", "status", "last_title", "last_title_at", "last_heard_at", "last_error",
                 "error_reason", "error_at", "failures", "next_attempt_at", "updated_at")
_STATE_DEFAULTS = {"monitored": "1", "status": "'starting'", "failures": "0", "updated_at": "''"}
UPSERT_STATE = Query("upsert_state", (
    f"INSERT INTO station_state (station_id, {', '.join(STATE_COLUMNS)}) SELECT ?1, "
    + ", ".join(f"coalesce(?2 ->> '{c}', {_STATE_DEFAULTS[c]})" if c in _STATE_DEFAULTS else f"?2 ->> '{c}'"
                for c in STATE_COLUMNS)
    + " WHERE true ON CONFLICT (station_id) DO UPDATE SET "
    + ", ".join(f"{c} = iif(json_type(?2, '$.{c}') IS NULL, {c}, excluded.{c})" for c in STATE_COLUMNS)))
"""A station's state: the columns a JSON object names are set (to null too), the others keep their value (or, on
insert, their default)."""
UNWATCH = Query("unwatch", "UPDATE station_state SET monitored = 0, status = 'unwatched', updated_at = ?"
                           " WHERE monitored = 1 AND station_id NOT IN (SELECT value FROM json_each(?))")
"""Every watched station but those of a JSON list: not watched any more."""
SAVED_STATE = Query("saved_state", "SELECT method, failures, next_attempt_at, last_heard_at FROM station_state"
                                   " WHERE station_id = ?")
OPEN_TITLE = Query("open_title", "SELECT stream_title FROM plays WHERE station_id = ? AND ended_at IS NULL"
                                 " ORDER BY id DESC LIMIT 1")
START_RUN = Query("start_run", "INSERT INTO monitor_runs (pid, started_at, heartbeat_at, stations, plays)"
                               " VALUES (?, ?, ?, 0, 0)")
HEARTBEAT = Query("heartbeat", "UPDATE monitor_runs SET heartbeat_at = ?, stations = ?, plays = ? WHERE id = ?")
STOP_RUN = Query("stop_run", "UPDATE monitor_runs SET stopped_at = ?, heartbeat_at = ?, plays = ? WHERE id = ?")

# --- the hourly roll-up ---------------------------------------------------------------------------------------

LAST_ROLLED_HOUR = Query("last_rolled_hour", "SELECT max(chart_date || 'T' || printf('%02d', chart_hour)) FROM snapshots"
                                             " WHERE target GLOB 'plays/*'")
FIRST_PLAY = Query("first_play", "SELECT min(started_at) FROM plays")
HOUR_TRACKS = Query("hour_tracks", (
    "SELECT lower(s.countrycode), max(p.artist), max(p.title), count(*), count(DISTINCT p.station_id),"
    " min(p.started_at), max(p.started_at) FROM plays p JOIN stations s ON s.station_id = p.station_id"
    " WHERE p.kind = 'track' AND p.started_at >= ? AND p.started_at < ? AND s.countrycode IS NOT NULL"
    " GROUP BY lower(s.countrycode), p.title_key, p.artist_key"
    " ORDER BY 1, count(*) DESC, max(p.started_at) DESC, p.title_key"))
"""An hour's tracks per country, most played first."""

# --- the routes -----------------------------------------------------------------------------------------------

_STATION = "s.record, s.active, s.first_seen_at, s.last_seen_at, s.inactive_since, coalesce(st.monitored, 0)"
_STATION_FROM = "stations s LEFT JOIN station_state st ON st.station_id = s.station_id"
_PLAY = ("p.id, p.station_id, s.name, s.countrycode, p.started_at, p.ended_at, p.stream_title, p.kind, p.artist,"
         " p.title, p.method")
_PLAY_FROM = "plays p LEFT JOIN stations s ON s.station_id = p.station_id"
_CURRENT_FROM = f"{_PLAY_FROM} JOIN station_state st ON st.station_id = p.station_id"
_TRACK = "max(artist), max(title), count(*), count(DISTINCT station_id), min(started_at), max(started_at)"
_TRACK_ORDER = "count(*) DESC, max(started_at) DESC, title_key"
TOP = 10


def _like(column: str, n: int) -> str:
    return f"(?{n} IS NULL OR {column} LIKE ?{n} ESCAPE '\\')"


STATION = Query("station", f"SELECT {_STATION}, s.name FROM {_STATION_FROM} WHERE s.station_id = ?")
STATE = Query("state", "SELECT st.monitored, st.status, st.method, st.last_title, st.last_title_at, st.last_heard_at,"
                       " st.last_error, st.error_reason, st.error_at, st.failures, st.next_attempt_at"
                       " FROM station_state st WHERE st.station_id = ?")
OPEN_PLAY = Query("open_play", f"SELECT {_PLAY}, st.last_heard_at FROM {_CURRENT_FROM}"
                               " WHERE p.station_id = ? AND p.ended_at IS NULL ORDER BY p.id DESC LIMIT 1")
_STATIONS_WHERE = f"{_like('s.name_key', 1)} AND {_like('s.tags_key', 2)} AND {_like('s.city_key', 3)}"
STATIONS_COUNT = Query("stations_count", f"SELECT count(*) FROM stations s WHERE {_STATIONS_WHERE}")
STATIONS_PAGE = Query("stations_page", f"SELECT {_STATION} FROM {_STATION_FROM} WHERE {_STATIONS_WHERE}"
                                       " ORDER BY s.active DESC, s.clickcount DESC, s.station_id LIMIT ?4 OFFSET ?5")
"""The directory (name, tag and place filters), active stations first, most clicked first."""
PLAY_COUNT = Query("play_count", "SELECT count(*) FROM plays WHERE station_id = ?")
_CURRENT_WHERE = ("p.ended_at IS NULL AND st.monitored = 1 AND st.last_heard_at >= ?1 AND p.started_at <= ?2"
                  f" AND {_like('p.artist_key', 3)} AND {_like('p.title_key', 4)}")
CURRENT_COUNT = Query("current_count", f"SELECT count(*) FROM {_CURRENT_FROM} WHERE {_CURRENT_WHERE}")
CURRENT_PAGE = Query("current_page", f"SELECT {_PLAY}, st.last_heard_at FROM {_CURRENT_FROM} WHERE {_CURRENT_WHERE}"
                                     " ORDER BY p.started_at DESC, p.id DESC LIMIT ?5 OFFSET ?6")
"""The open plays of watched stations heard since a time (artist and title filters), newest first."""
_HISTORY_WHERE = f"p.started_at <= ?1 AND {_like('p.artist_key', 2)} AND {_like('p.title_key', 3)}"
HISTORY_COUNT = Query("history_count", f"SELECT count(*) FROM plays p WHERE {_HISTORY_WHERE}")
HISTORY_PAGE = Query("history_page", f"SELECT {_PLAY} FROM {_PLAY_FROM} WHERE {_HISTORY_WHERE}"
                                     " ORDER BY p.started_at DESC, p.id DESC LIMIT ?4 OFFSET ?5")
"""Plays up to a time (artist and title filters), newest first."""
# One station's history reads its own index range (`plays_by_station`), not every play.
STATION_HISTORY_COUNT = Query("station_history_count", f"SELECT count(*) FROM plays p WHERE {_HISTORY_WHERE}"
                                                       " AND p.station_id = ?4")
STATION_HISTORY_PAGE = Query("station_history_page", f"SELECT {_PLAY} FROM {_PLAY_FROM} WHERE {_HISTORY_WHERE}"
                                                     " AND p.station_id = ?4 ORDER BY p.started_at DESC, p.id DESC"
                                                     " LIMIT ?5 OFFSET ?6")
_TRACKS_WHERE = ("kind = 'track' AND started_at <= ?1 AND (?2 IS NULL OR (artist_key || title_key) LIKE ?2 ESCAPE '\\'"
                 " OR (title_key || artist_key) LIKE ?2 ESCAPE '\\')")
TRACKS_COUNT = Query("tracks_count", f"SELECT count(*) FROM (SELECT 1 FROM plays WHERE {_TRACKS_WHERE}"
                                     " GROUP BY title_key, artist_key)")
TRACKS_PAGE = Query("tracks_page", f"SELECT {_TRACK} FROM plays WHERE {_TRACKS_WHERE} GROUP BY title_key, artist_key"
                                   f" ORDER BY {_TRACK_ORDER} LIMIT ?3 OFFSET ?4")
"""Distinct tracks heard up to a time (artist or title filter), most played first."""
WINDOW_COUNTS = Query("window_counts", "SELECT count(*), coalesce(sum(kind = 'track'), 0), count(DISTINCT CASE WHEN"
                                       " kind = 'track' THEN title_key || '|' || artist_key END) FROM plays"
                                       " WHERE started_at >= ? AND started_at <= ?")
WINDOW_TOP = Query("window_top", f"SELECT {_TRACK} FROM plays WHERE kind = 'track' AND started_at >= ? AND started_at <= ?"
                                 f" GROUP BY title_key, artist_key ORDER BY {_TRACK_ORDER} LIMIT {TOP}")
WINDOW_CREDITS = Query("window_credits", "SELECT max(artist), station_id, count(*) FROM plays WHERE kind = 'track'"
                                         " AND started_at >= ? AND started_at <= ? GROUP BY artist_key, station_id")
DIRECTORY_COUNTS = Query("directory_counts", "SELECT count(*), coalesce(sum(active), 0) FROM stations")
MONITORED_COUNT = Query("monitored_count", "SELECT count(*) FROM station_state WHERE monitored = 1")
LAST_RUN = Query("last_run", "SELECT started_at, heartbeat_at, stopped_at FROM monitor_runs ORDER BY id DESC LIMIT 1")
MONITOR_STATES = Query("monitor_states", "SELECT count(*), coalesce(sum(status = 'ok'), 0),"
                                         " coalesce(sum(status = 'backoff'), 0) FROM station_state WHERE monitored = 1")
LAST_PLAY = Query("last_play", "SELECT max(started_at) FROM plays WHERE started_at <= ?")
ANY_PLAY = Query("any_play", "SELECT EXISTS (SELECT 1 FROM plays)")
MONITORED_BY_STATE = Query("monitored stations by state",
                           "SELECT status, count(*) FROM station_state WHERE monitored = 1 GROUP BY status")
"""The monitor's stations by state (`/metrics`, chartgw.http.metrics)."""
RUNNING_MONITOR = Query("running monitor", "SELECT heartbeat_at FROM monitor_runs WHERE stopped_at IS NULL"
                        " ORDER BY id DESC LIMIT 1")

STORAGE = Storage(TABLES, tuple(value for value in list(globals().values()) if isinstance(value, Query)))

# --- the monitor's writes -----------------------------------------------------------------------------------

Write = tuple[Query, tuple[Any, ...]]
"""One statement of a batch (a declared query and its arguments)."""
BATCH_STATEMENTS = 200
"""At most this many statements per transaction: small batches, short write locks."""


def open_db(path: Path, busy_timeout_ms: int = 30_000) -> sqlite3.Connection:
    """The group file with the monitor's tables, opened by the store as a writer (usable from the writer thread)."""
    db = connect(path, timeout=busy_timeout_ms / 1000, check_same_thread=False)
    migrate(db, TABLES)
    return db


def commit_batch(db: sqlite3.Connection, writes: Sequence[Write]) -> None:
    """`writes` in transactions of at most BATCH_STATEMENTS statements each: all of one or none."""
    for start in range(0, len(writes), BATCH_STATEMENTS):
        with transaction(db):
            for query, params in writes[start:start + BATCH_STATEMENTS]:
                db.execute(query.sql, params)


def play_writes(station_id: str, at: datetime, ended_at: datetime, stream_title: str, kind: str,
                artist: str | None, title: str | None, method: str) -> list[Write]:
    """A play begins: the station's open play ends at `ended_at`, the new one is inserted."""
    return [
        (END_PLAY, (iso(ended_at), station_id)),
        (INSERT_PLAY, (station_id, iso(at), stream_title, kind, artist, title, compact(artist or ""),
                       compact(title or ""), method)),
    ]


def state_write(station_id: str, **values: Any) -> Write:
    """Upsert of the named state columns of one station (others keep their value, or their default on insert)."""
    unknown = set(values) - set(STATE_COLUMNS)
    assert not unknown, unknown
    return (UPSERT_STATE, (station_id, json.dumps(values)))


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
        buckets.append([Watched(*row) for row in db.execute(WATCHABLE.sql, (cc.upper(), limit))])
    for tag in tags:
        buckets.append([Watched(*row) for row in db.execute(WATCHABLE_LISTED.sql, (tag_target(tag), limit))])
    if not buckets:
        buckets.append([Watched(*row) for row in db.execute(WATCHABLE.sql, (None, limit))])
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
