"""/radio's directory crawl: radio-browser's server list (with failover), then stations by configured
country and tag, merged into the stations table (inactive ones kept).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from urllib.parse import urlencode

import httpx
import msgspec

from chartgw import config
from chartgw.crawl import CrawlContext, CrawlTarget, Fetched
from chartgw.groups.radio.settings import COUNTRIES_SETTING, DIRECTORY_LIMIT_SETTING, TAGS_SETTING
from chartgw.groups.radio.storage import country_target, create_schema, tag_target
from chartgw.store import NewSnapshot, StoredEntry, iso
from chartgw.text import compact, title_key
from chartgw.upstreams import UpstreamRequest
from chartgw.upstreams import radio_browser as rb
from chartgw.upstreams.radio_browser import Server, Station

# ==== RADIO ====

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
