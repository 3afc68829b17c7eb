"""/radio's directory crawl: radio-browser's server list, then stations by configured country and tag (from the
first server that answers, through the crawl runner's Fetcher), merged into the stations table (inactive ones
kept).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial

import msgspec

from chartgw.core.settings import Settings
from chartgw.core.text import compact, title_key
from chartgw.crawl.runner import CrawlContext, CrawlTarget, Fetched, Fetcher
from chartgw.groups.radio import storage
from chartgw.groups.radio.settings import COUNTRIES_SETTING, DIRECTORY_LIMIT_SETTING, TAGS_SETTING
from chartgw.groups.radio.storage import country_target, tag_target
from chartgw.store import NewSnapshot, StoredEntry, iso
from chartgw.upstreams import UpstreamRequest
from chartgw.upstreams import radio_browser as rb
from chartgw.upstreams.radio_browser import Server, Station

# ==== RADIO ====

DIRECTORY_CADENCE = 86_400
SERVERS_TARGET = "servers"
_encode = msgspec.json.Encoder().encode


# --- the directory crawl -------------------------------------------------------------------------------


def tags(settings: Settings) -> tuple[str, ...]:
    """The configured tags (`CHARTGW_RADIO_TAGS`), lowercased, each once."""
    return tuple(dict.fromkeys(t.strip().lower() for t in settings.get(TAGS_SETTING) if t.strip()))


def directory_targets(settings: Settings) -> list[str]:
    """Every configured directory list's snapshot target, countries first."""
    return [country_target(cc) for cc in settings.get(COUNTRIES_SETTING)] + [tag_target(t) for t in tags(settings)]


def _build_servers(fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    servers = rb.parse_servers(fetched[0].body)
    entries = [StoredEntry(i, compact(s.name) or "server", "server", s.ip, _encode(s), compact(s.name))
               for i, s in enumerate(servers, start=1)]
    return [NewSnapshot(SERVERS_TARGET, ctx.now.date().isoformat(), None, ctx.now, fetched[0].url, entries,
                        fetched[0].body, "application/json")]


def stored_servers(ctx: CrawlContext) -> list[Server]:
    """The server list of the last good discovery ([] before the first: the list's own origin is used)."""
    return [msgspec.json.decode(r, type=Server) for r in ctx.store.latest_records(SERVERS_TARGET)]


def directory_origins(ctx: CrawlContext, settings: Settings) -> list[str]:
    """The origins to try, in order: the stored server list shuffled by the day (the API asks clients to
    spread their load), the list's own origin last; `CHARTGW_UPSTREAM_RADIO_BROWSER` replaces them all."""
    return rb.configured_origins(stored_servers(ctx), settings, seed=ctx.now.date().isoformat())


def station_entry(station: Station, rank: int) -> StoredEntry:
    return StoredEntry(rank, title_key(station.name) or station.station_id, compact(station.countrycode or "") or "xx",
                       station.station_id, _encode(station), compact(station.name))


async def _fetch_directory(request: UpstreamRequest, fetcher: Fetcher, ctx: CrawlContext) -> list[Fetched]:
    """One directory list from the first server that answers it well (`directory_origins`, in turn)."""
    _, fetched, _ = await fetcher.fetch_any(request, directory_origins(ctx, fetcher.settings), rb.parse_stations)
    return [fetched]


def _build_directory(target: str, configured: list[str], fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    """Merge the list into `stations` and keep it as a snapshot (its source: the server that answered);
    `configured` are the crawl's directory targets."""
    stations = rb.parse_stations(fetched[0].body)
    merge_stations(ctx, target, stations, configured)
    return [NewSnapshot(target, ctx.now.date().isoformat(), None, ctx.now, fetched[0].url,
                        [station_entry(s, i) for i, s in enumerate(stations, start=1)])]


def merge_stations(ctx: CrawlContext, target: str, stations: Sequence[Station], targets: list[str]) -> None:
    """Upsert the listed stations, make `target`'s membership exactly these, and mark a station active
    when some configured list (of `targets`) names it, inactive (with since when) when none does any more."""
    store = ctx.store
    now = iso(ctx.now)
    with store.transaction():
        store.executemany(storage.UPSERT_STATION, [
            (s.station_id, s.name, s.countrycode, s.clickcount, int(s.hls), s.url_resolved or s.url, compact(s.name),
             "|" + "|".join(compact(t) for t in s.tags) + "|", compact(s.state or ""), _encode(s), now, now)
            for s in stations])
        store.execute(storage.CLEAR_SOURCES, (target,))
        store.executemany(storage.ADD_SOURCE, [(target, s.station_id, i) for i, s in enumerate(stations, start=1)])
        configured = _encode(targets).decode()
        store.execute(storage.DEACTIVATE, (now, configured))
        store.execute(storage.REACTIVATE, (configured,))


def discovery(settings: Settings) -> list[CrawlTarget]:
    return [CrawlTarget(SERVERS_TARGET, (rb.servers_request(),), _build_servers, None)]


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    limit = settings.get(DIRECTORY_LIMIT_SETTING)
    chosen = [(country_target(cc), rb.stations_by_country_request(cc, limit)) for cc in settings.get(COUNTRIES_SETTING)]
    chosen += [(tag_target(t), rb.stations_by_tag_request(t, limit)) for t in tags(settings)]
    configured = directory_targets(settings)
    return [CrawlTarget(target, (), partial(_build_directory, target, configured), None, fetch=partial(_fetch_directory, request))
            for target, request in chosen]
