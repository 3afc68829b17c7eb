"""/radio responses, the reads of the stations, plays and monitor state, the handlers and the route table."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, TypedDict

import msgspec

from chartgw.api.endpoints import Call, Route, not_found
from chartgw.api.params import Param, search_param
from chartgw.api.responses import HealthHead, TargetStatus, health_route
from chartgw.core.settings import Settings
from chartgw.core.text import compact, split_artists
from chartgw.groups.radio import storage
from chartgw.groups.radio.directory import DIRECTORY_CADENCE, directory_targets
from chartgw.groups.radio.settings import NAME, SILENCE_SETTING
from chartgw.store import Query, iso, like_pattern
from chartgw.upstreams.radio_browser import Station

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


# --- rows (the queries are this group's storage module's) ----------------------------------------------


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


def _like(call: Call, name: str) -> str | None:
    """The LIKE pattern of search parameter `name` (its folded key), None when not given."""
    value = call.params[name]
    return like_pattern(compact(value)) if value is not None else None


def _silence(settings: Settings) -> int:
    return int(settings.get(SILENCE_SETTING))


def _heard_since(call: Call) -> str:
    return iso(call.now - timedelta(seconds=_silence(call.settings)))


async def _station_or_404(call: Call, station_id: str) -> Sequence[Any]:
    rows = await call.data.reader.fetchall(storage.STATION, (station_id,))
    if not rows:
        raise not_found(f"Station {station_id!r} is not in the directory; list stations at /radio/stations")
    return rows[0]


async def _state(call: Call, station_id: str) -> Sequence[Any] | None:
    rows = await call.data.reader.fetchall(storage.STATE, (station_id,))
    return rows[0] if rows else None


async def _open_play(call: Call, station_id: str) -> CurrentPlay | None:
    rows = await call.data.reader.fetchall(storage.OPEN_PLAY, (station_id,))
    return _current(rows[0]) if rows else None


def _is_current(play: CurrentPlay | None, monitoring: Monitoring, call: Call) -> bool:
    return (play is not None and monitoring.monitored and play.last_heard_at is not None
            and play.last_heard_at >= _heard_since(call) and play.started_at <= iso(call.now))


# --- handlers ------------------------------------------------------------------------------------------


class PageParams(TypedDict):
    limit: int
    offset: int


async def _page(call: Call[PageParams], count: Query, page: Query, params: list[Any]) -> tuple[int, list[tuple[Any, ...]]]:
    """The total of `count` and the page of `page` asked for (limit and offset after `params`)."""
    reader = call.data.reader
    total = await reader.fetchall(count, params)
    rows = await reader.fetchall(page, [*params, call.params["limit"], call.params["offset"]])
    return int(total[0][0]) if total else 0, rows


class StationsListParams(TypedDict):
    limit: int
    offset: int
    q: str | None
    genre: str | None
    city: str | None


async def stations_list(call: Call[StationsListParams]) -> StationsResponse:
    total, rows = await _page(call, storage.STATIONS_COUNT, storage.STATIONS_PAGE,
                              [_like(call, "q"), _like(call, "genre"), _like(call, "city")])
    stations = [_directory_station(r) for r in rows]
    return StationsResponse(total, len(stations), stations)


class StationDetailParams(TypedDict):
    station_id: str


async def station_detail(call: Call[StationDetailParams]) -> StationResponse:
    station_id = call.params["station_id"]
    row = await _station_or_404(call, station_id)
    monitoring = _monitoring(await _state(call, station_id))
    play = await _open_play(call, station_id)
    count = await call.data.reader.fetchall(storage.PLAY_COUNT, (station_id,))
    current = Play(**{k: v for k, v in msgspec.structs.asdict(play).items() if k != "last_heard_at"}) \
        if play is not None and _is_current(play, monitoring, call) else None
    return StationResponse(_directory_station(row), monitoring, current, int(count[0][0]))


class CurrentListParams(TypedDict):
    limit: int
    offset: int
    artist: str | None
    title: str | None


async def current_list(call: Call[CurrentListParams]) -> CurrentResponse:
    total, rows = await _page(call, storage.CURRENT_COUNT, storage.CURRENT_PAGE,
                              [_heard_since(call), iso(call.now), _like(call, "artist"), _like(call, "title")])
    plays = [_current(r) for r in rows]
    return CurrentResponse(_silence(call.settings), total, len(plays), plays)


class CurrentStationParams(TypedDict):
    station_id: str


async def current_station(call: Call[CurrentStationParams]) -> StationCurrentResponse:
    station_id = call.params["station_id"]
    row = await _station_or_404(call, station_id)
    monitoring = _monitoring(await _state(call, station_id))
    play = await _open_play(call, station_id)
    current = play if _is_current(play, monitoring, call) else None
    silent = monitoring.last_heard_at if monitoring.monitored and current is None else None
    return StationCurrentResponse(station_id, row[6], monitoring.monitored, current, silent, monitoring)


class HistoryParams(TypedDict):
    station_id: str | None
    artist: str | None
    title: str | None
    limit: int
    offset: int


async def history(call: Call[HistoryParams]) -> HistoryResponse:
    station_id = call.params["station_id"]
    params: list[Any] = [iso(call.now), _like(call, "artist"), _like(call, "title")]
    if station_id is None:
        total, rows = await _page(call, storage.HISTORY_COUNT, storage.HISTORY_PAGE, params)
    else:
        await _station_or_404(call, station_id)
        total, rows = await _page(call, storage.STATION_HISTORY_COUNT, storage.STATION_HISTORY_PAGE, [*params, station_id])
    plays = [_play(r) for r in rows]
    return HistoryResponse(total, len(plays), plays)


def _track(row: Sequence[Any]) -> Track:
    return Track(row[0], row[1], int(row[2]), int(row[3]), row[4], row[5])


class TracksParams(TypedDict):
    q: str | None
    limit: int
    offset: int


async def tracks(call: Call[TracksParams]) -> TracksResponse:
    total, rows = await _page(call, storage.TRACKS_COUNT, storage.TRACKS_PAGE, [iso(call.now), _like(call, "q")])
    found = [_track(r) for r in rows]
    return TracksResponse(total, len(found), found)


async def _window(call: Call, label: str, span: timedelta) -> SummaryWindow:
    reader = call.data.reader
    since, until = iso(call.now - span), iso(call.now)
    counts = await reader.fetchall(storage.WINDOW_COUNTS, (since, until))
    top = await reader.fetchall(storage.WINDOW_TOP, (since, until))
    credits = await reader.fetchall(storage.WINDOW_CREDITS, (since, until))
    artists: dict[str, tuple[str, int, set[str]]] = {}
    for credit, station_id, plays in credits:
        for name in split_artists(credit or "") or [credit or ""]:
            key = compact(name)
            if not key:
                continue
            shown, total, stations = artists.get(key, (name, 0, set()))
            stations.add(station_id)
            artists[key] = (shown, total + int(plays), stations)
    ranked = sorted(artists.items(), key=lambda kv: (-kv[1][1], -len(kv[1][2]), kv[0]))[:storage.TOP]
    plays, track_plays, distinct = counts[0] if counts else (0, 0, 0)
    return SummaryWindow(label, since, int(plays), int(track_plays), int(distinct), [_track(r) for r in top],
                         [TopArtist(shown, total, len(stations)) for _, (shown, total, stations) in ranked])


async def summary(call: Call) -> SummaryResponse:
    reader = call.data.reader
    rows = await reader.fetchall(storage.DIRECTORY_COUNTS)
    monitored = await reader.fetchall(storage.MONITORED_COUNT)
    total, active = rows[0] if rows else (0, 0)
    windows = [await _window(call, "24h", timedelta(hours=24)), await _window(call, "7d", timedelta(days=7))]
    return SummaryResponse(int(total), int(active), int(monitored[0][0]) if monitored else 0, windows)


HEARTBEAT_GRACE = timedelta(seconds=120)


async def describe_health(call: Call, status: str, statuses: list[TargetStatus]) -> RadioHealth:
    reader = call.data.reader
    runs = await reader.fetchall(storage.LAST_RUN)
    states = await reader.fetchall(storage.MONITOR_STATES)
    last = await reader.fetchall(storage.LAST_PLAY, (iso(call.now),))
    started, heartbeat, stopped = runs[0] if runs else (None, None, None)
    running = bool(heartbeat) and stopped is None and heartbeat >= iso(call.now - HEARTBEAT_GRACE)
    watched, ok, failing = states[0] if states else (0, 0, 0)
    monitor = MonitorHealth(running, started, heartbeat, stopped, int(watched), int(ok), int(failing),
                            last[0][0] if last else None)
    return RadioHealth("ok" if status == "ok" and running else "degraded", NAME, monitor, statuses)


# --- the route table -----------------------------------------------------------------------------------


def _text(name: str, description: str) -> Param:
    return search_param(name, required=False, description=description + " (contains)")


LIMIT = Param("limit", kind="int", default=50, ge=1, le=500, description="Rows to return")
OFFSET = Param("offset", kind="int", default=0, ge=0, le=1_000_000, description="Rows to skip")
STATION_ID = Param("station_id", "path", required=True, description="The directory's station uuid (see /radio/stations)")

ROUTES: tuple[Route, ...] = (
    health_route(NAME, lambda settings: {t: DIRECTORY_CADENCE for t in directory_targets(settings)},
                 "Directory lists' freshness and the monitor's heartbeat and station states",
                 describe=describe_health, response=RadioHealth),
    Route("/stations", stations_list, (LIMIT, OFFSET, _text("q", "Station name contains"),
                                       _text("genre", "A tag of the station contains"),
                                       _text("city", "The station's state/city/region contains")),
          errors=(), rows="stations", response=StationsResponse,
          summary="The station directory: active stations first, most clicked first; inactive ones kept"),
    Route("/stations/{station_id}", station_detail, (STATION_ID,), response=StationResponse,
          summary="One station with its monitoring state (monitored, method, last title, last error) and current play"),
    Route("/current", current_list, (LIMIT, OFFSET, _text("artist", "Artist contains"), _text("title", "Title contains")),
          errors=(), rows="plays", response=CurrentResponse, cache_ttl=2,
          summary="What every monitored station plays now (stations silent past the timeout left out), newest first"),
    Route("/current/{station_id}", current_station, (STATION_ID,), response=StationCurrentResponse, cache_ttl=2,
          summary="What one station plays now"),
    Route("/history", history, (Param("station_id", description="Only this station's plays (404 when unknown)"),
                                _text("artist", "Artist contains"), _text("title", "Title contains"), LIMIT, OFFSET),
          rows="plays", response=HistoryResponse, summary="Plays, newest first"),
    Route("/tracks", tracks, (_text("q", "Artist or title contains"), LIMIT, OFFSET), errors=(), rows="tracks",
          response=TracksResponse,
          summary="Distinct tracks heard, most played first: plays, stations, first and last played"),
    Route("/summary", summary, errors=(), rows="windows", response=SummaryResponse,
          summary="Stations in the directory and monitored; plays, top tracks and top artists of the last 24 h and 7 days"),
)
