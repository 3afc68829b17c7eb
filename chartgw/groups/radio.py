"""/radio: a station directory (radio-browser) and what the stations play, observed by our own monitor.

The directory: `chartgw crawl radio` asks radio-browser for its server list (the discovery target
`servers`), then, per configured country (`CHARTGW_RADIO_COUNTRIES`) and tag (`CHARTGW_RADIO_TAGS`),
the most clicked working stations, from the first server of the list that answers (failover on a
transport error, a non-2xx answer or a body the parser refuses). Each list is a snapshot
(`directory/{cc}`, `directory-tag/{tag}`); the merged `stations` table keeps every station ever
listed: one no configured list names any more is marked inactive (never deleted; its plays stay).

The plays: `chartgw monitor radio` (`chartgw.groups.radio_monitor`) watches the most clicked stations
and records a play per change of the announced title. Every completed hour the monitor also commits
the hour's tracks per country as a snapshot `plays/{cc}` (one entry per track, ranked by plays), the
form in which the artist-history index takes plays in as a source of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import urlencode

import httpx
import msgspec

from chartgw import config
from chartgw.clock import Clock, fixed, utc_now
from chartgw.context import Context
from chartgw.crawl import CrawlContext, CrawlTarget, Fetched, Outcome
from chartgw.endpoints import Call, Route, not_found
from chartgw.group import CommandArg, EntryMapping, Group, GroupCommand, Schedule, crawl_group, retention
from chartgw.groups import radio_monitor as mon
from chartgw.groups.radio_monitor import (
    COUNTRIES_SETTING,
    DIRECTORY_LIMIT_SETTING,
    SILENCE_SETTING,
    TAGS_SETTING,
    Monitor,
    country_target,
    create_schema,
    tag_target,
)
from chartgw.params import Param, search_param
from chartgw.replay import Reply, replay_upstreams, request_key
from chartgw.responses import HealthHead, TargetStatus, health_status, target_statuses
from chartgw.samples import radio as samples
from chartgw.store import NewSnapshot, StoredEntry, group_db_path, iso
from chartgw.text import compact, split_artists, title_key
from chartgw.upstreams import UpstreamRequest
from chartgw.upstreams import radio_browser as rb
from chartgw.upstreams.radio_browser import Server, Station

NAME = "radio"
DIRECTORY_CADENCE = 86_400
SERVERS_TARGET = "servers"
_encode = msgspec.json.Encoder().encode


# --- the directory crawl -------------------------------------------------------------------------------


def countries() -> tuple[str, ...]:
    return config.get(COUNTRIES_SETTING)


def tags() -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.strip().lower() for t in config.get(TAGS_SETTING) if t.strip()))


def directory_targets() -> list[str]:
    """Every configured directory list's snapshot target, countries first."""
    return [country_target(cc) for cc in countries()] + [tag_target(t) for t in tags()]


def _build_servers(fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    servers = rb.parse_servers(fetched[0].body)
    entries = [StoredEntry(i, compact(s.name) or "server", "server", s.ip, _encode(s), compact(s.name))
               for i, s in enumerate(servers, start=1)]
    return [NewSnapshot(SERVERS_TARGET, ctx.now.date().isoformat(), None, ctx.now, fetched[0].url, entries,
                        fetched[0].body, "application/json")]


def stored_servers(ctx: CrawlContext) -> list[Server]:
    """The server list of the last good discovery ([] before the first: the list's own origin is used)."""
    return [msgspec.json.decode(r, type=Server) for r in ctx.store.latest_records(SERVERS_TARGET)]


def directory_origins(ctx: CrawlContext) -> list[str]:
    """The origins to try, in order: the stored server list shuffled by the day (the API asks clients to
    spread their load), the list's own origin last; `CHARTGW_UPSTREAM_RADIO_BROWSER` replaces them all."""
    return rb.configured_origins(stored_servers(ctx), seed=ctx.now.date().isoformat())


def _url(origin: str, request: UpstreamRequest) -> str:
    return origin + request.path + (f"?{urlencode(request.params)}" if request.params else "")


def station_entry(station: Station, rank: int) -> StoredEntry:
    return StoredEntry(rank, title_key(station.name) or station.station_id, compact(station.countrycode or "") or "xx",
                       station.station_id, _encode(station), compact(station.name))


def _build_directory(target: str, request: UpstreamRequest, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    """Fetch one directory list with failover (the build runs the fetch: the platform's fetcher knows one
    origin per upstream), merge it into `stations`, and keep it as a snapshot."""
    with httpx.Client(timeout=httpx.Timeout(30.0, connect=5.0), follow_redirects=True) as client:
        origin, stations = rb.fetch_with_failover(client, directory_origins(ctx), request, rb.parse_stations)
    merge_stations(ctx, target, stations)
    return [NewSnapshot(target, ctx.now.date().isoformat(), None, ctx.now, _url(origin, request),
                        [station_entry(s, i) for i, s in enumerate(stations, start=1)])]


def merge_stations(ctx: CrawlContext, target: str, stations: Sequence[Station]) -> None:
    """Upsert the listed stations, make `target`'s membership exactly these, and mark a station active
    when some configured list names it, inactive (with since when) when none does any more."""
    db = ctx.store.db
    create_schema(db)
    now = iso(ctx.now)
    db.execute("BEGIN IMMEDIATE")
    try:
        for s in stations:
            db.execute(
                "INSERT INTO stations (station_id, name, countrycode, clickcount, hls, stream_url, name_key, tags_key,"
                " city_key, record, active, first_seen_at, last_seen_at, inactive_since)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, NULL) ON CONFLICT (station_id) DO UPDATE SET"
                " name = excluded.name, countrycode = excluded.countrycode, clickcount = excluded.clickcount,"
                " hls = excluded.hls, stream_url = excluded.stream_url, name_key = excluded.name_key,"
                " tags_key = excluded.tags_key, city_key = excluded.city_key, record = excluded.record,"
                " last_seen_at = max(stations.last_seen_at, excluded.last_seen_at)",
                (s.station_id, s.name, s.countrycode, s.clickcount, int(s.hls), s.url_resolved or s.url,
                 compact(s.name), "|" + "|".join(compact(t) for t in s.tags) + "|", compact(s.state or ""),
                 _encode(s), now, now))
        db.execute("DELETE FROM station_sources WHERE target = ?", (target,))
        db.executemany("INSERT OR IGNORE INTO station_sources (target, station_id, position) VALUES (?, ?, ?)",
                       [(target, s.station_id, i) for i, s in enumerate(stations, start=1)])
        listed = "SELECT 1 FROM station_sources ss WHERE ss.station_id = stations.station_id" \
                 " AND ss.target IN (SELECT value FROM json_each(?))"
        configured = _encode(directory_targets()).decode()
        db.execute(f"UPDATE stations SET active = 0, inactive_since = ? WHERE active = 1 AND NOT EXISTS ({listed})",
                   (now, configured))
        db.execute(f"UPDATE stations SET active = 1, inactive_since = NULL WHERE active = 0 AND EXISTS ({listed})",
                   (configured,))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def discovery() -> list[CrawlTarget]:
    return [CrawlTarget(SERVERS_TARGET, (rb.servers_request(),), _build_servers, None)]


def targets(selection: dict[str, str | None], now: datetime) -> list[CrawlTarget]:
    limit = config.get(DIRECTORY_LIMIT_SETTING)
    chosen = [(country_target(cc), rb.stations_by_country_request(cc, limit)) for cc in countries()]
    chosen += [(tag_target(t), rb.stations_by_tag_request(t, limit)) for t in tags()]
    return [CrawlTarget(target, (), partial(_build_directory, target, request), None) for target, request in chosen]


# --- responses -----------------------------------------------------------------------------------------


class DirectoryStation(Station, kw_only=True):
    """A station of the directory as listed, with when we saw it listed and whether we watch it."""

    active: bool
    """False once no configured directory list names the station any more (kept, with its plays)."""
    first_seen_at: str
    last_seen_at: str
    inactive_since: str | None
    monitored: bool


class Monitoring(msgspec.Struct, kw_only=True):
    """How the monitor reads the station and how that went last."""

    monitored: bool
    """The monitor's watch list has the station (the most clicked per country, CHARTGW_RADIO_MONITOR_LIMIT)."""
    status: str | None
    """starting, ok, backoff (failing, retried at next_attempt_at), unwatched; null = never watched."""
    method: str | None
    """How now-playing is read: icecast (status-json.xsl), shoutcast1 (7.html), shoutcast2 (stats/currentsong),
    icy (in-stream metadata); null until found."""
    last_title: str | None
    last_title_at: str | None
    last_heard_at: str | None
    """The last successful reading."""
    last_error: str | None
    error_reason: str | None
    """unreachable, http-status, stalled, closed, closed-mid-block, no-metadata, no-source, no-title, bad-status ..."""
    error_at: str | None
    failures: int
    """Consecutive failed readings (0 once a reading succeeds)."""
    next_attempt_at: str | None


class Play(msgspec.Struct, kw_only=True):
    """One play: a span during which the station announced the same text."""

    id: int
    station_id: str
    station_name: str | None
    countrycode: str | None
    started_at: str
    ended_at: str | None
    """When the next play began (or the station was last heard before a gap); null while it plays on."""
    stream_title: str
    """The announced text as sent (whitespace runs collapsed)."""
    kind: str
    """track ("Artist - Title" split); raw (no separator); ident (the station naming itself); ad; empty."""
    artist: str | None
    title: str | None
    method: str


class CurrentPlay(Play, kw_only=True):
    last_heard_at: str | None


class StationsResponse(msgspec.Struct):
    total: int
    count: int
    stations: list[DirectoryStation]


class StationResponse(msgspec.Struct):
    station: DirectoryStation
    monitoring: Monitoring
    current: Play | None
    """The play in progress when the station was heard within the silence timeout."""
    plays: int


class CurrentResponse(msgspec.Struct):
    silence_seconds: int
    """A play whose station has not been heard for longer is not current."""
    total: int
    count: int
    plays: list[CurrentPlay]


class StationCurrentResponse(msgspec.Struct):
    station_id: str
    station_name: str
    monitored: bool
    current: CurrentPlay | None
    """Null when the station is not monitored, has no play yet, or has been silent past the timeout."""
    silent_since: str | None
    """The last reading, when the station is silent past the timeout."""
    monitoring: Monitoring


class HistoryResponse(msgspec.Struct):
    total: int
    count: int
    plays: list[Play]


class Track(msgspec.Struct):
    artist: str
    title: str
    plays: int
    stations: int
    first_played_at: str
    last_played_at: str


class TracksResponse(msgspec.Struct):
    total: int
    count: int
    tracks: list[Track]


class TopArtist(msgspec.Struct):
    artist: str
    plays: int
    stations: int


class SummaryWindow(msgspec.Struct):
    window: str
    since: str
    plays: int
    """Every play, raw text included."""
    track_plays: int
    distinct_tracks: int
    top_tracks: list[Track]
    top_artists: list[TopArtist]
    """Each credited artist of a play counts ("A, B - T" counts for A and for B)."""


class SummaryResponse(msgspec.Struct):
    stations_in_directory: int
    stations_active: int
    stations_monitored: int
    windows: list[SummaryWindow]


class MonitorHealth(msgspec.Struct):
    running: bool
    """A monitor process has sent a heartbeat recently and not stopped."""
    started_at: str | None
    heartbeat_at: str | None
    stopped_at: str | None
    stations_watched: int
    stations_ok: int
    stations_failing: int
    last_play_at: str | None


class RadioHealth(HealthHead):
    monitor: MonitorHealth
    targets: list[TargetStatus]


# --- queries -------------------------------------------------------------------------------------------

STATION_COLUMNS = "s.record, s.active, s.first_seen_at, s.last_seen_at, s.inactive_since, coalesce(st.monitored, 0)"
STATE_COLUMNS = ("st.monitored, st.status, st.method, st.last_title, st.last_title_at, st.last_heard_at, st.last_error,"
                 " st.error_reason, st.error_at, st.failures, st.next_attempt_at")
PLAY_COLUMNS = ("p.id, p.station_id, s.name, s.countrycode, p.started_at, p.ended_at, p.stream_title, p.kind, p.artist,"
                " p.title, p.method")
PLAY_FROM = "plays p LEFT JOIN stations s ON s.station_id = p.station_id"


def _directory_station(row: Sequence[Any]) -> DirectoryStation:
    station = msgspec.json.decode(row[0], type=Station)
    return DirectoryStation(**msgspec.structs.asdict(station), active=bool(row[1]), first_seen_at=row[2],
                            last_seen_at=row[3], inactive_since=row[4], monitored=bool(row[5]))


def _monitoring(row: Sequence[Any] | None) -> Monitoring:
    if row is None or row[1] is None:
        return Monitoring(monitored=False, status=None, method=None, last_title=None, last_title_at=None,
                          last_heard_at=None, last_error=None, error_reason=None, error_at=None, failures=0,
                          next_attempt_at=None)
    return Monitoring(monitored=bool(row[0]), status=row[1], method=row[2], last_title=row[3], last_title_at=row[4],
                      last_heard_at=row[5], last_error=row[6], error_reason=row[7], error_at=row[8],
                      failures=int(row[9] or 0), next_attempt_at=row[10])


def _play(row: Sequence[Any]) -> Play:
    return Play(id=row[0], station_id=row[1], station_name=row[2], countrycode=row[3], started_at=row[4],
                ended_at=row[5], stream_title=row[6], kind=row[7], artist=row[8], title=row[9], method=row[10])


def _current(row: Sequence[Any]) -> CurrentPlay:
    return CurrentPlay(**msgspec.structs.asdict(_play(row)), last_heard_at=row[11])


def _like(value: str) -> str:
    return f"%{compact(value)}%"


def _silence() -> int:
    return int(config.get(SILENCE_SETTING))


def _heard_since(call: Call) -> str:
    return iso(call.now - timedelta(seconds=_silence()))


async def _station_or_404(call: Call, station_id: str) -> Sequence[Any]:
    rows = await call.data.reader.fetchall(
        f"SELECT {STATION_COLUMNS}, s.name FROM stations s LEFT JOIN station_state st ON st.station_id = s.station_id"
        " WHERE s.station_id = ?", (station_id,))
    if not rows:
        raise not_found(f"Station {station_id!r} is not in the directory; list stations at /radio/stations")
    return rows[0]


async def _state(call: Call, station_id: str) -> Sequence[Any] | None:
    rows = await call.data.reader.fetchall(f"SELECT {STATE_COLUMNS} FROM station_state st WHERE st.station_id = ?",
                                           (station_id,))
    return rows[0] if rows else None


async def _open_play(call: Call, station_id: str) -> CurrentPlay | None:
    rows = await call.data.reader.fetchall(
        f"SELECT {PLAY_COLUMNS}, st.last_heard_at FROM {PLAY_FROM} JOIN station_state st ON st.station_id = p.station_id"
        " WHERE p.station_id = ? AND p.ended_at IS NULL ORDER BY p.id DESC LIMIT 1", (station_id,))
    return _current(rows[0]) if rows else None


def _is_current(play: CurrentPlay | None, monitoring: Monitoring, call: Call) -> bool:
    return (play is not None and monitoring.monitored and play.last_heard_at is not None
            and play.last_heard_at >= _heard_since(call) and play.started_at <= iso(call.now))


# --- handlers ------------------------------------------------------------------------------------------


def _matching(call: Call, columns: tuple[tuple[str, str], ...], where: list[str], params: list[Any]) -> str:
    """The WHERE clause of `where` plus a folded-key match per search parameter given (`column`, `name`)."""
    for column, name in columns:
        if call.params[name] is not None:
            where.append(f"{column} LIKE ?")
            params.append(_like(call.params[name]))
    return " AND ".join(where)


async def stations_list(call: Call) -> StationsResponse:
    where, params = ["1 = 1"], list[Any]()
    clause = _matching(call, (("s.name_key", "q"), ("s.tags_key", "genre"), ("s.city_key", "city")), where, params)
    reader = call.data.reader
    total = await reader.fetchall(f"SELECT count(*) FROM stations s WHERE {clause}", params)
    rows = await reader.fetchall(
        f"SELECT {STATION_COLUMNS} FROM stations s LEFT JOIN station_state st ON st.station_id = s.station_id"
        f" WHERE {clause} ORDER BY s.active DESC, s.clickcount DESC, s.station_id LIMIT ? OFFSET ?",
        [*params, call.params["limit"], call.params["offset"]])
    stations = [_directory_station(r) for r in rows]
    return StationsResponse(int(total[0][0]) if total else 0, len(stations), stations)


async def station_detail(call: Call) -> StationResponse:
    station_id = call.params["station_id"]
    row = await _station_or_404(call, station_id)
    monitoring = _monitoring(await _state(call, station_id))
    play = await _open_play(call, station_id)
    count = await call.data.reader.fetchall("SELECT count(*) FROM plays WHERE station_id = ?", (station_id,))
    current = Play(**{k: v for k, v in msgspec.structs.asdict(play).items() if k != "last_heard_at"}) \
        if play is not None and _is_current(play, monitoring, call) else None
    return StationResponse(_directory_station(row), monitoring, current, int(count[0][0]))


async def current_list(call: Call) -> CurrentResponse:
    where = ["p.ended_at IS NULL", "st.monitored = 1", "st.last_heard_at >= ?", "p.started_at <= ?"]
    params: list[Any] = [_heard_since(call), iso(call.now)]
    clause = _matching(call, (("p.artist_key", "artist"), ("p.title_key", "title")), where, params)
    source = f"{PLAY_FROM} JOIN station_state st ON st.station_id = p.station_id"
    reader = call.data.reader
    total = await reader.fetchall(f"SELECT count(*) FROM {source} WHERE {clause}", params)
    rows = await reader.fetchall(
        f"SELECT {PLAY_COLUMNS}, st.last_heard_at FROM {source} WHERE {clause}"
        " ORDER BY p.started_at DESC, p.id DESC LIMIT ? OFFSET ?", [*params, call.params["limit"], call.params["offset"]])
    plays = [_current(r) for r in rows]
    return CurrentResponse(_silence(), int(total[0][0]) if total else 0, len(plays), plays)


async def current_station(call: Call) -> StationCurrentResponse:
    station_id = call.params["station_id"]
    row = await _station_or_404(call, station_id)
    monitoring = _monitoring(await _state(call, station_id))
    play = await _open_play(call, station_id)
    current = play if _is_current(play, monitoring, call) else None
    silent = monitoring.last_heard_at if monitoring.monitored and current is None else None
    return StationCurrentResponse(station_id, row[6], monitoring.monitored, current, silent, monitoring)


async def history(call: Call) -> HistoryResponse:
    where, params = ["p.started_at <= ?"], list[Any]([iso(call.now)])
    if call.params["station_id"] is not None:
        await _station_or_404(call, call.params["station_id"])
        where.append("p.station_id = ?")
        params.append(call.params["station_id"])
    for column, name in (("p.artist_key", "artist"), ("p.title_key", "title")):
        if call.params[name] is not None:
            where.append(f"{column} LIKE ?")
            params.append(_like(call.params[name]))
    clause = " AND ".join(where)
    reader = call.data.reader
    total = await reader.fetchall(f"SELECT count(*) FROM plays p WHERE {clause}", params)
    rows = await reader.fetchall(f"SELECT {PLAY_COLUMNS} FROM {PLAY_FROM} WHERE {clause}"
                                 " ORDER BY p.started_at DESC, p.id DESC LIMIT ? OFFSET ?",
                                 [*params, call.params["limit"], call.params["offset"]])
    plays = [_play(r) for r in rows]
    return HistoryResponse(int(total[0][0]) if total else 0, len(plays), plays)


TRACK_COLUMNS = ("max(artist), max(title), count(*), count(DISTINCT station_id), min(started_at), max(started_at)")


def _track(row: Sequence[Any]) -> Track:
    return Track(row[0], row[1], int(row[2]), int(row[3]), row[4], row[5])


async def tracks(call: Call) -> TracksResponse:
    where, params = ["kind = 'track'", "started_at <= ?"], list[Any]([iso(call.now)])
    if call.params["q"] is not None:
        where.append("((artist_key || title_key) LIKE ? OR (title_key || artist_key) LIKE ?)")
        params += [_like(call.params["q"])] * 2
    clause = " AND ".join(where)
    reader = call.data.reader
    total = await reader.fetchall(f"SELECT count(*) FROM (SELECT 1 FROM plays WHERE {clause}"
                                  " GROUP BY title_key, artist_key)", params)
    rows = await reader.fetchall(f"SELECT {TRACK_COLUMNS} FROM plays WHERE {clause} GROUP BY title_key, artist_key"
                                 " ORDER BY count(*) DESC, max(started_at) DESC, title_key LIMIT ? OFFSET ?",
                                 [*params, call.params["limit"], call.params["offset"]])
    found = [_track(r) for r in rows]
    return TracksResponse(int(total[0][0]) if total else 0, len(found), found)


TOP = 10


async def _window(call: Call, label: str, span: timedelta) -> SummaryWindow:
    reader = call.data.reader
    since, until = iso(call.now - span), iso(call.now)
    counts = await reader.fetchall(
        "SELECT count(*), coalesce(sum(kind = 'track'), 0), count(DISTINCT CASE WHEN kind = 'track' THEN"
        " title_key || '|' || artist_key END) FROM plays WHERE started_at >= ? AND started_at <= ?", (since, until))
    top = await reader.fetchall(
        f"SELECT {TRACK_COLUMNS} FROM plays WHERE kind = 'track' AND started_at >= ? AND started_at <= ?"
        f" GROUP BY title_key, artist_key ORDER BY count(*) DESC, max(started_at) DESC, title_key LIMIT {TOP}",
        (since, until))
    credits = await reader.fetchall(
        "SELECT max(artist), station_id, count(*) FROM plays WHERE kind = 'track' AND started_at >= ? AND started_at <= ?"
        " GROUP BY artist_key, station_id", (since, until))
    artists: dict[str, tuple[str, int, set[str]]] = {}
    for credit, station_id, plays in credits:
        for name in split_artists(credit or "") or [credit or ""]:
            key = compact(name)
            if not key:
                continue
            shown, total, stations = artists.get(key, (name, 0, set()))
            stations.add(station_id)
            artists[key] = (shown, total + int(plays), stations)
    ranked = sorted(artists.items(), key=lambda kv: (-kv[1][1], -len(kv[1][2]), kv[0]))[:TOP]
    plays, track_plays, distinct = counts[0] if counts else (0, 0, 0)
    return SummaryWindow(label, since, int(plays), int(track_plays), int(distinct), [_track(r) for r in top],
                         [TopArtist(shown, total, len(stations)) for _, (shown, total, stations) in ranked])


async def summary(call: Call) -> SummaryResponse:
    reader = call.data.reader
    rows = await reader.fetchall("SELECT count(*), coalesce(sum(active), 0) FROM stations")
    monitored = await reader.fetchall("SELECT count(*) FROM station_state WHERE monitored = 1")
    total, active = rows[0] if rows else (0, 0)
    windows = [await _window(call, "24h", timedelta(hours=24)), await _window(call, "7d", timedelta(days=7))]
    return SummaryResponse(int(total), int(active), int(monitored[0][0]) if monitored else 0, windows)


HEARTBEAT_GRACE = timedelta(seconds=120)


async def describe_health(call: Call, status: str, statuses: list[TargetStatus]) -> RadioHealth:
    reader = call.data.reader
    runs = await reader.fetchall("SELECT started_at, heartbeat_at, stopped_at FROM monitor_runs ORDER BY id DESC LIMIT 1")
    states = await reader.fetchall("SELECT count(*), coalesce(sum(status = 'ok'), 0), coalesce(sum(status = 'backoff'), 0)"
                                   " FROM station_state WHERE monitored = 1")
    last = await reader.fetchall("SELECT max(started_at) FROM plays WHERE started_at <= ?", (iso(call.now),))
    started, heartbeat, stopped = runs[0] if runs else (None, None, None)
    running = bool(heartbeat) and stopped is None and heartbeat >= iso(call.now - HEARTBEAT_GRACE)
    watched, ok, failing = states[0] if states else (0, 0, 0)
    monitor = MonitorHealth(running, started, heartbeat, stopped, int(watched), int(ok), int(failing),
                            last[0][0] if last else None)
    return RadioHealth("ok" if status == "ok" and running else "degraded", NAME, monitor, statuses)


async def health(call: Call) -> RadioHealth:
    statuses = await target_statuses(call.data.reader, {t: DIRECTORY_CADENCE for t in directory_targets()}, call.now)
    return await describe_health(call, health_status(statuses), statuses)


# --- the route table -----------------------------------------------------------------------------------


def _text(name: str, description: str) -> Param:
    return search_param(name, required=False, description=description + " (contains)")


LIMIT = Param("limit", kind="int", default=50, ge=1, le=500, description="Rows to return")
OFFSET = Param("offset", kind="int", default=0, ge=0, le=1_000_000, description="Rows to skip")
STATION_ID = Param("station_id", "path", required=True, description="The directory's station uuid (see /radio/stations)")

ROUTES: tuple[Route, ...] = (
    Route("/health", health, public=True, cache_ttl=5, errors=(), response=RadioHealth,
          summary="Directory lists' freshness and the monitor's heartbeat and station states"),
    Route("/stations", stations_list, (LIMIT, OFFSET, _text("q", "Station name contains"),
                                       _text("genre", "A tag of the station contains"),
                                       _text("city", "The station's state/city/region contains")),
          errors=(), response=StationsResponse,
          summary="The station directory: active stations first, most clicked first; inactive ones kept"),
    Route("/stations/{station_id}", station_detail, (STATION_ID,), response=StationResponse,
          summary="One station with its monitoring state (monitored, method, last title, last error) and current play"),
    Route("/current", current_list, (LIMIT, OFFSET, _text("artist", "Artist contains"), _text("title", "Title contains")),
          errors=(), response=CurrentResponse, cache_ttl=2,
          summary="What every monitored station plays now (stations silent past the timeout left out), newest first"),
    Route("/current/{station_id}", current_station, (STATION_ID,), response=StationCurrentResponse, cache_ttl=2,
          summary="What one station plays now"),
    Route("/history", history, (Param("station_id", description="Only this station's plays (404 when unknown)"),
                                _text("artist", "Artist contains"), _text("title", "Title contains"), LIMIT, OFFSET),
          response=HistoryResponse, summary="Plays, newest first"),
    Route("/tracks", tracks, (_text("q", "Artist or title contains"), LIMIT, OFFSET), errors=(), response=TracksResponse,
          summary="Distinct tracks heard, most played first: plays, stations, first and last played"),
    Route("/summary", summary, errors=(), response=SummaryResponse,
          summary="Stations in the directory and monitored; plays, top tracks and top artists of the last 24 h and 7 days"),
)


# --- the monitor command -------------------------------------------------------------------------------


def monitor_command(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    """`chartgw monitor radio`: runs until SIGINT/SIGTERM (or `--run-for` seconds), outside the group's
    crawl lock (`GroupCommand.lock=False`): a monitor that runs for months must not hold the lock the daily
    directory crawl takes. `--mode demo` watches local sample streams instead (what scripts/serve starts)."""
    if values.get("mode") == "demo":
        report = asyncio.run(run_live_demo(values.get("run_for")))
        return [Outcome("monitor", "ok", report.plays, None, None, 0,
                        None if not report.errors else f"station errors: {report.errors}")]
    return asyncio.run(run_monitor(values.get("run_for"), clock=ctx.clock))


async def run_monitor(run_for: float | None = None, *, clock: Clock = utc_now) -> list[Outcome]:
    """The monitor in this process (tests, embedding): until SIGINT/SIGTERM or `run_for` seconds."""
    report = await mon.run_until_signalled(Monitor(clock=clock, retention=retention(GROUP)), run_for)
    return [Outcome("monitor", "ok", report.plays, None, None, 0,
                    None if not report.errors else f"station errors: {report.errors}")]


# --- demo ----------------------------------------------------------------------------------------------

SEED_STEP = timedelta(seconds=60)
"""The seeder's clock moves in steps of a minute, each step once every station has been read at it."""
SESSION = timedelta(minutes=20)
SONG_SECONDS = 120.0


class SteppedClock:
    """Time the seeder moves: the sample servers' schedules and the monitor's dates both read it, so the
    demo's plays are the same on a fast or a loaded machine."""

    def __init__(self, start: datetime) -> None:
        self.at = start

    def __call__(self) -> datetime:
        return self.at

    def seconds(self) -> float:
        return self.at.timestamp()


def sample_pool() -> list[samples.SampleStation]:
    return samples.station_pool([cc.upper() for cc in countries()], per_country=5, song_seconds=SONG_SECONDS)


def demo_replies(pool: Sequence[samples.SampleStation], urls: dict[str, str], variant: int) -> dict[Any, Reply]:
    """The directory's answers for the pool, plus a list for every configured tag the pool lacks."""
    limit = config.get(DIRECTORY_LIMIT_SETTING)
    replies = samples.directory_replies(pool, urls, limit=limit, variant=variant)
    listed = samples.listed(pool, variant)
    for tag in tags():
        key = request_key(rb.stations_by_tag_request(tag, limit))
        if key not in replies:
            top = sorted(listed, key=lambda s: -s.clickcount)[:min(limit, 8)]
            replies[key] = Reply(samples.render_stations(top, urls, variant), content_type=samples.JSON_TYPE)
    return replies


def unreachable(pool: Sequence[samples.SampleStation]) -> samples.SampleStation:
    """The demo's broken station (its stream URL points where nothing listens): the last of the pool."""
    return pool[-1]


def seed_times(now: datetime, pool: Sequence[samples.SampleStation]) -> tuple[datetime, datetime]:
    """When the seeder's two monitor sessions begin. The first (with the first directory crawl) about 3 days
    back, where the sample schedules start; the second `SESSION` before `now`, placed 200 s into the
    schedules, so that both hold tracks, the station ident (at 480 s) and the ad break (at 1080 s)."""
    period = timedelta(seconds=pool[0].schedule.period or 1.0)
    second = now - SESSION
    return second - timedelta(seconds=200) - period * ((timedelta(days=3) - timedelta(seconds=200)) // period), second


async def seed(now: datetime) -> list[Outcome]:
    """The directory crawled twice (about 3 days ago, an hour ago: the second lacks one station, now
    inactive) from local sample stream servers, and two 20-minute monitor sessions (then, and up to `now`)
    recording real plays from those servers, read a minute apart on a stepped clock. One station's
    stream is unreachable: it backs off."""
    played, live = _recorded(now)
    if live:
        return []  # the live demo (`chartgw monitor radio --mode demo`) keeps the file current itself
    pool = sample_pool()
    origin, second = seed_times(now, pool)
    clock = SteppedClock(origin)
    outcomes: list[Outcome] = []
    with samples.serving_radio(pool, clock=clock.seconds, bytes_per_second=0) as radio:
        urls = radio.stream_urls()
        broken = unreachable(pool)
        urls[broken.station_id] = f"http://127.0.0.1:{samples.free_port()}{broken.mount}"
        if played:  # seeded before (`chartgw demo --keep-fresh`): the directory again, no second set of plays
            with replay_upstreams({rb.UPSTREAM: demo_replies(pool, urls, 1)}):
                return await crawl_group(GROUP, {}, now=fixed(now))
        with replay_upstreams({rb.UPSTREAM: demo_replies(pool, urls, 0)}) as servers:
            outcomes += await crawl_group(GROUP, {}, now=fixed(origin))
            await _session(clock, origin, origin + SESSION)
            servers[rb.UPSTREAM].replies.update(demo_replies(pool, urls, 1))
            outcomes += await crawl_group(GROUP, {}, now=fixed(now - timedelta(hours=1)))
            await _session(clock, second, now)
    mon.rollup(now, retention=retention(GROUP))
    return outcomes


def _recorded(now: datetime) -> tuple[bool, bool]:
    """Whether the group file holds plays already, and whether a monitor is running on it (a heartbeat
    within HEARTBEAT_GRACE of `now`, not stopped)."""
    path = group_db_path(NAME)
    if not path.exists():
        return False, False
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        try:
            played = db.execute("SELECT count(*) FROM plays").fetchone()[0] > 0
            run = db.execute("SELECT heartbeat_at, stopped_at FROM monitor_runs ORDER BY id DESC LIMIT 1").fetchone()
        except sqlite3.OperationalError:  # no monitor tables yet
            return False, False
    return played, bool(run and run[1] is None and run[0] >= iso(now - HEARTBEAT_GRACE))


async def _session(clock: SteppedClock, start: datetime, end: datetime) -> None:
    """The monitor from `start` to `end`, the clock moved a step once every reachable station was read."""
    monitor = Monitor(clock=clock, poll_seconds=30.0, read_timeout=5.0, backoff_base=0.05, backoff_max=0.2,
                      icy_mode="poll", flush_seconds=0.05, heartbeat_seconds=0.2)
    stop = asyncio.Event()
    clock.at = start
    task = asyncio.create_task(monitor.run(stop))
    while not monitor.runs:
        await asyncio.sleep(0.005)
    while clock.at <= end:
        # A reading begun at this time for every station that answers (one begun before the step may
        # have read the title of the step before).
        monitor.wake()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(run.heard_from != clock.at and (run.failures == 0 or run.ok)
                                                  for run in monitor.runs.values()):
            await asyncio.sleep(0.005)
        clock.at = min(clock.at + SEED_STEP, end) if clock.at < end else end + SEED_STEP
    clock.at = end
    stop.set()
    await task


async def run_live_demo(run_for: float | None = None) -> mon.MonitorReport:
    """What `scripts/serve` runs beside the server: the sample stream servers on the wall clock (titles
    change every 30 s), the directory crawled from them now, and the monitor on them until SIGTERM."""
    pool = samples.station_pool([cc.upper() for cc in countries()], per_country=5, song_seconds=30.0)
    with samples.serving_radio(pool) as radio:
        urls = radio.stream_urls()
        with replay_upstreams({rb.UPSTREAM: demo_replies(pool, urls, 0)}):
            await crawl_group(GROUP, {})
        monitor = Monitor(poll_seconds=5.0, backoff_base=5.0, backoff_max=60.0, heartbeat_seconds=10.0,
                          retention=retention(GROUP))
        return await mon.run_until_signalled(monitor, run_for)


def _market(target: str, record: dict[str, Any]) -> str:
    return target.partition("@")[0].split("/")[1] if target.startswith("plays/") else ""


GROUP = Group(
    name=NAME,
    title="Radio (station directory and observed plays)",
    description="A station directory from radio-browser (stations by country and tag, inactive ones kept) and what "
                "the monitored stations play, observed by our own monitor from each station's own announcements "
                "(Icecast and SHOUTcast status pages, ICY in-stream metadata): now playing, play history, tracks heard "
                "and a summary.",
    routes=ROUTES,
    upstreams=(rb.UPSTREAM,),
    targets=targets,
    discovery=discovery,
    # The directory changes slowly and asks for politeness: one crawl a day, at a quiet hour.
    schedules=(Schedule("40 4 * * *", (), "UTC", "radio-browser directory: stations by configured country and tag, daily"),),
    retention_days={"directory": 30, "servers": 30, **mon.PLAYS_RETENTION},
    per_upstream=1,
    commands=(GroupCommand("monitor", "watch the most clicked stations' now-playing until SIGINT/SIGTERM", (
        CommandArg("run_for", "stop after this many seconds (default: run until stopped)", type=float),
        CommandArg("mode", "live: the directory's stations; demo: local sample streams (what scripts/serve starts)",
                   choices=("live", "demo"), default="live"),
    ), monitor_command, lock=False, at_boot=True),),
    settings=mon.SETTINGS,
    seeder=seed,
    entries=EntryMapping(market=_market, artist=("artist",), artists="artists", title=("title",),
                         skip_targets=("servers", "directory/*", "directory-tag/*"), sub_daily_targets=("plays/*",)),
)
