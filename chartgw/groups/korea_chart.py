"""/korea-chart: five Korean chart sites (portal-a to portal-e), their comparison and refresh.

portal-a Melon, portal-b Genie and portal-c Bugs are read from their web chart pages; portal-d FLO
and portal-e VIBE from their JSON chart APIs. FLO's chart is observed every 5 minutes and every
observation is kept as an `all_age` snapshot; the rising charts are computed from them here:

- `rising`, published at each observation: songs ordered by the places they gained since the
  observation about an hour earlier (the one nearest to 60 minutes before, 45 to 75 minutes back),
  gains above zero only. A song that was not on the earlier chart counts from just below its last
  rank.
- `rising_hourly`, the same computation for the previous full clock hour in KST: the first
  observation of that hour (up to 5 minutes before it) against the last one before the hour ends.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from types import ModuleType
from typing import Any, TypedDict

import msgspec

from chartgw.api.catalog import Chart, cadence_of, cadences
from chartgw.api.endpoints import ApiError, Call, Route, not_found
from chartgw.api.group import EntryMapping, Group, Schedule
from chartgw.api.params import InvalidParams, Limited, Param, literal_error, search_param
from chartgw.api.refresh import admit_refresh, crawl_in_subprocess
from chartgw.api.responses import HealthHead, SnapshotMeta, TargetStatus, health_route, records_array, snapshot_meta
from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.core.text import ArtistAliases, artist_key, title_key
from chartgw.crawl.runner import KST, CrawlContext, CrawlTarget, Fetched, PartialCrawl
from chartgw.store import NewSnapshot, SnapshotRow, StoredEntry, iso, parse_iso
from chartgw.store.records import KoreaEntry, ParsedChart, RankStatus, stored_entry
from chartgw.store.targets import TargetKey
from chartgw.upstreams import bugs, flo, genie, melon, vibe

NAME = "korea-chart"


@dataclass(frozen=True)
class Site:
    site: str
    source: str
    upstream: ModuleType
    chart_types: tuple[str, ...]
    hourly: tuple[str, ...] = ()
    """Chart types whose snapshots are per hour (the chart hour is part of their time)."""


SITES: dict[str, Site] = {s.site: s for s in (
    Site("portal-a", "Melon", melon, ("realtime", "hot100_d100", "hot100_d30", "daily", "weekly"), ("realtime",)),
    Site("portal-b", "Genie", genie, ("realtime", "daily", "weekly"), ("realtime",)),
    Site("portal-c", "Bugs", bugs, ("realtime", "daily", "weekly"), ("realtime",)),
    Site("portal-d", "FLO", flo, ("all_age", "rising", "rising_hourly"), ("all_age", "rising", "rising_hourly")),
    Site("portal-e", "VIBE", vibe, ("daily_top100", "domestic_rising", "oversea_rising")),
)}
SONG_ID_TYPES = {"portal-a": "melon_song", "portal-b": "genie_song", "portal-c": "bugs_song", "portal-d": "flo_song",
                 "portal-e": "vibe_song"}
"""Each site's `song_id` as recording identity's id type (its `platform_id` tier, `/identity/lookup?melon_song=`)."""
SITE_NAMES = tuple(SITES)
ALL_CHART_TYPES = tuple(dict.fromkeys(ct for s in SITES.values() for ct in s.chart_types))
TYPES_BY_SITE = ("site", {s.site: s.chart_types for s in SITES.values()})
"""What `chart_type` may be for each `site` (the document declares it; `selection_errors` enforces it)."""
COMPARE_SITES = ("portal-a", "portal-b", "portal-c")
COMPARE_TYPES = ("realtime", "daily", "weekly")
TARGET = TargetKey(("site", "chart_type"))
FLO_CHART = TARGET.make("portal-d", "all_age")
EXPECTED_ROWS = 100
RISING_WINDOW = (timedelta(minutes=45), timedelta(minutes=75))


CHARTS = tuple(Chart(f"{site.site}/{chart_type}", TARGET, "realtime" if (site.site, chart_type) == ("portal-d", "rising")
                     else "hourly", {"site": site.site, "chart_type": chart_type}, market="=kr",
                     latest="/korea-chart/{site}/charts/{chart_type}")
               for site in SITES.values() for chart_type in site.chart_types)
"""Every site's charts: each crawled hourly (FLO's rising chart every 5 minutes); only the latest is served."""


def cadence_seconds(site: str, chart_type: str) -> int:
    return cadence_of(CHARTS, TARGET.make(site, chart_type))


# --- records ------------------------------------------------------------------------------------

class RisingEntry(KoreaEntry, kw_only=True):
    """A row of FLO's rising charts: `rank` is the rising position, `gain` the places gained."""

    chart_rank: int
    """The song's rank on the FLO chart at the later observation."""
    previous_chart_rank: int | None
    """Its rank at the earlier observation; null when it was not on that chart."""
    gain: int


_decode_entry = msgspec.json.Decoder(KoreaEntry).decode


def stored(entry: KoreaEntry) -> StoredEntry:
    return stored_entry(entry, rank=entry.rank, title=entry.title, artists=entry.artists or [entry.artist],
                        item_id=entry.song_id)


def _snapshot(target: str, parsed: ParsedChart, hourly: bool, source: str, ctx: CrawlContext) -> NewSnapshot:
    local = ctx.now.astimezone(KST)
    hour = parsed.chart_hour if parsed.chart_hour is not None else (local.hour if hourly else None)
    return NewSnapshot(target=target, chart_date=parsed.chart_date or local.date().isoformat(),
                       chart_hour=hour, fetched_at=ctx.now, source=source,
                       entries=[stored(e) for e in parsed.entries])


# --- crawl targets ------------------------------------------------------------------------------

GENIE_FEED_SETTING = config.Setting("GENIE_FEED", "web", "`app` reads Genie's app JSON API instead of its web chart page",
                                    config.choice("web", "app"))


def _requests(site: Site, chart_type: str, app_feed: bool) -> list[Any]:
    """`app_feed`: Genie's app JSON API instead of its web page (`CHARTGW_GENIE_FEED=app`)."""
    if app_feed:
        return genie.requests_for_app(chart_type)
    requests: list[Any] = site.upstream.requests_for(chart_type)
    return requests


def _parse(site: Site, chart_type: str, bodies: list[bytes], app_feed: bool = False) -> ParsedChart:
    if app_feed:
        return genie.parse_app(chart_type, bodies)
    parsed: ParsedChart = site.upstream.parse(chart_type, bodies)
    return parsed


def _build_chart(site: Site, chart_type: str, fetched: list[Fetched], ctx: CrawlContext, app_feed: bool = False,
                 ) -> list[NewSnapshot]:
    parsed = _parse(site, chart_type, [f.body for f in fetched], app_feed)
    return [_snapshot(TARGET.make(site.site, chart_type), parsed, chart_type in site.hourly, fetched[0].url, ctx)]


def _identity(entry: KoreaEntry) -> str:
    return entry.song_id or f"{title_key(entry.title)}|{artist_key(entry.artist)}"


def rising_entries(earlier: list[KoreaEntry], later: list[KoreaEntry]) -> list[RisingEntry]:
    """Songs of `later` that gained places since `earlier`, most gained first."""
    before = {_identity(e): e.rank for e in earlier}
    floor = (max(before.values()) if before else 0) + 1
    gains = []
    for entry in later:
        previous = before.get(_identity(entry))
        gain = (previous if previous is not None else floor) - entry.rank
        if gain > 0:
            gains.append((gain, entry, previous))
    gains.sort(key=lambda g: (-g[0], g[1].rank))
    status: dict[bool, RankStatus] = {True: "new", False: "up"}
    kept = [f for f in KoreaEntry.__struct_fields__ if f not in ("rank", "rank_change", "rank_status")]
    return [
        RisingEntry(**{f: getattr(entry, f) for f in kept},
                    rank=position, rank_change=None if previous is None else gain, rank_status=status[previous is None],
                    chart_rank=entry.rank, previous_chart_rank=previous, gain=gain)
        for position, (gain, entry, previous) in enumerate(gains, start=1)
    ]


def _observation(ctx: CrawlContext, row: SnapshotRow) -> list[KoreaEntry]:
    return [_decode_entry(record) for record in ctx.store.records(row.id)]


def _rising_snapshot(target: str, earlier: tuple[str, list[KoreaEntry]], later: tuple[str, list[KoreaEntry]],
                     ctx: CrawlContext, hour: datetime) -> NewSnapshot:
    """A rising chart from two (fetched_at, entries) observations, dated by `hour`."""
    local = hour.astimezone(KST)
    return NewSnapshot(target=target, chart_date=local.date().isoformat(), chart_hour=local.hour, fetched_at=ctx.now,
                       source=f"derived from {FLO_CHART} observations at {earlier[0]} and {later[0]}",
                       entries=[stored(e) for e in rising_entries(earlier[1], later[1])])


def _build_rising(fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    """Store the new observation, and publish `rising` against the one about an hour before."""
    observation = _build_chart(SITES["portal-d"], "all_age", fetched, ctx)[0]
    target_time = ctx.now - timedelta(hours=1)
    candidates = ctx.store.snapshots_between(FLO_CHART, ctx.now - RISING_WINDOW[1], ctx.now - RISING_WINDOW[0])
    if not candidates:
        raise PartialCrawl([observation], "observation stored; rising not published: no FLO observation from "
                                          "45 to 75 minutes ago yet")
    earlier = min(candidates, key=lambda r: abs(parse_iso(r.fetched_at) - target_time))
    later = [_decode_entry(e.record) for e in observation.entries]
    rising = _rising_snapshot("portal-d/rising", (earlier.fetched_at, _observation(ctx, earlier)),
                              (iso(ctx.now), later), ctx, ctx.now)
    return [observation, rising]


def _build_rising_hourly(fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    end = ctx.now.astimezone(KST).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=1)
    window = ctx.store.snapshots_between(FLO_CHART, start - timedelta(minutes=5), end - timedelta(seconds=1))
    if len(window) < 2 or parse_iso(window[-1].fetched_at) - parse_iso(window[0].fetched_at) < timedelta(minutes=45):
        raise PartialCrawl([], f"rising_hourly not published: FLO observations of {start:%Y-%m-%d %H}:00 KST "
                               "do not span 45 minutes")
    first, last = window[0], window[-1]
    return [_rising_snapshot("portal-d/rising_hourly", (first.fetched_at, _observation(ctx, first)),
                             (last.fetched_at, _observation(ctx, last)), ctx, start)]


def _target(site: Site, chart_type: str, settings: Settings) -> CrawlTarget:
    key = TARGET.make(site.site, chart_type)
    if key == "portal-d/rising":
        return CrawlTarget(key, tuple(flo.requests_for("all_age")), _build_rising, None)
    if key == "portal-d/rising_hourly":
        return CrawlTarget(key, (), _build_rising_hourly, None)
    expected = None if site.site == "portal-e" and chart_type != "daily_top100" else EXPECTED_ROWS
    app_feed = site.upstream is genie and settings.get(GENIE_FEED_SETTING) == "app"
    return CrawlTarget(key, tuple(_requests(site, chart_type, app_feed)), partial(_build_chart, site, chart_type,
                                                                                  app_feed=app_feed), expected)


def selection_errors(site: str | None, chart_type: str | None, where: str = "query") -> list[dict[str, Any]]:
    """422 items for a site/chart_type pair the spec's table does not have."""
    if site is not None and chart_type is not None and chart_type not in SITES[site].chart_types:
        return [literal_error([where, "chart_type"], chart_type, SITES[site].chart_types)]
    return []


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    site, chart_type = selection.get("site"), selection.get("chart_type")
    errors = selection_errors(site, chart_type)
    if errors:
        raise InvalidParams(errors)
    return [_target(s, ct, settings) for s in SITES.values() if site in (None, s.site)
            for ct in s.chart_types if chart_type in (None, ct)]


# --- responses ----------------------------------------------------------------------------------

class SiteInfo(msgspec.Struct):
    site: str
    source: str
    chart_types: list[str]
    cadence_seconds: dict[str, int]


class SitesResponse(msgspec.Struct):
    sites: list[SiteInfo]


class SnapshotStatus(msgspec.Struct):
    site: str
    chart_type: str
    snapshot_id: int | None
    chart_date: str | None
    chart_hour: int | None
    fetched_at: str | None
    age_seconds: int | None
    stale: bool
    """True when there is no snapshot or it is older than twice its cadence."""


class HealthResponse(HealthHead):
    sites: list[SiteInfo]
    snapshots: list[SnapshotStatus]


class ChartResponse(msgspec.Struct):
    site: str
    source: str
    chart_type: str
    snapshot: SnapshotMeta
    count: int
    entries: list[KoreaEntry]


class RisingChartResponse(msgspec.Struct):
    site: str
    source: str
    chart_type: str
    snapshot: SnapshotMeta
    count: int
    entries: list[RisingEntry]


class ComparedSong(msgspec.Struct):
    combined_rank: int
    title: str
    artist: str
    score: float
    """Mean rank over the compared sites; a site that does not chart the song counts its chart length + 1."""
    sites_charting: int
    ranks: dict[str, int | None]


class CompareResponse(msgspec.Struct):
    chart_type: str
    keyword: str | None
    snapshots: dict[str, SnapshotMeta | None]
    count: int
    songs: list[ComparedSong]


class CrawlOutcome(msgspec.Struct):
    target: str
    status: str
    rows: int | None
    snapshot_id: int | None
    http_status: int | None
    duration_ms: int
    error: str | None


class RefreshResponse(msgspec.Struct):
    status: str
    """"ok" when every target committed, "partial" when some failed, "failed" when none did."""
    outcomes: list[CrawlOutcome]


# --- handlers -----------------------------------------------------------------------------------

def _site_infos() -> list[SiteInfo]:
    return [SiteInfo(s.site, s.source, list(s.chart_types), {ct: cadence_seconds(s.site, ct) for ct in s.chart_types})
            for s in SITES.values()]


def expected_cadences(settings: Settings) -> dict[str, int]:
    return cadences(CHARTS, [TARGET.make(site.site, chart_type) for site in SITES.values() for chart_type in site.chart_types])


async def describe_health(call: Call, status: str, statuses: list[TargetStatus]) -> HealthResponse:
    """The shared statuses named by site and chart type, as this group has always answered."""
    named = []
    for s in statuses:
        parts = TARGET.parse(s.target) or {}
        named.append(SnapshotStatus(parts["site"], parts["chart_type"], s.snapshot_id, s.chart_date, s.chart_hour,
                                    s.fetched_at, s.age_seconds, s.stale))
    return HealthResponse(status, NAME, _site_infos(), named)


async def sites(call: Call) -> SitesResponse:
    return SitesResponse(_site_infos())


async def _chart(call: Call[Limited], site: str, chart_type: str) -> ChartResponse | RisingChartResponse:
    row = await call.data.reader.latest(TARGET.make(site, chart_type))
    if row is None:
        raise not_found(f"No snapshot of {site} {chart_type} yet")
    records = await call.data.reader.records(row.id, call.params["limit"])
    kind = RisingChartResponse if chart_type.startswith("rising") and site == "portal-d" else ChartResponse
    return kind(site, SITES[site].source, chart_type, snapshot_meta(row, cadence_seconds(site, chart_type), call.now),
                len(records), records_array(records))


class ChartsParams(TypedDict):
    site: str
    chart_type: str | None
    limit: int


async def charts(call: Call[ChartsParams]) -> ChartResponse | RisingChartResponse:
    site = call.params["site"]
    chart_type = call.params["chart_type"] or SITES[site].chart_types[0]
    errors = selection_errors(site, chart_type)
    if errors:
        raise InvalidParams(errors)
    return await _chart(call, site, chart_type)


class SiteChartParams(TypedDict):
    site: str
    chart_type: str
    limit: int


async def site_chart(call: Call[SiteChartParams]) -> ChartResponse | RisingChartResponse:
    site, chart_type = call.params["site"], call.params["chart_type"]
    errors = selection_errors(site, chart_type, where="path")
    if errors:
        raise InvalidParams(errors)
    return await _chart(call, site, chart_type)


class CompareParams(TypedDict):
    keyword: str | None
    chart_type: str
    limit: int


async def compare(call: Call[CompareParams]) -> CompareResponse:
    chart_type, keyword, limit = call.params["chart_type"], call.params["keyword"], call.params["limit"]
    reader = call.data.reader
    metas: dict[str, SnapshotMeta | None] = {}
    charts_by_site: dict[str, list[KoreaEntry]] = {}
    for site in COMPARE_SITES:
        row = await reader.latest(TARGET.make(site, chart_type))
        metas[site] = snapshot_meta(row, cadence_seconds(site, chart_type), call.now) if row else None
        charts_by_site[site] = [_decode_entry(r) for r in await reader.records(row.id, 10_000)] if row else []
    if not any(charts_by_site.values()):
        raise not_found(f"No {chart_type} snapshot of portal-a, portal-b or portal-c yet")
    songs = compare_charts(charts_by_site)
    if keyword:
        needle = title_key(keyword)
        songs = [s for s in songs if needle in title_key(s.title) or needle in title_key(s.artist)]
    return CompareResponse(chart_type, keyword, metas, min(len(songs), limit), songs[:limit])


def compare_charts(charts_by_site: dict[str, list[KoreaEntry]]) -> list[ComparedSong]:
    """Merge the sites' charts by normalised title and shared artist identity, best combined rank first."""
    aliases = ArtistAliases(a for entries in charts_by_site.values() for e in entries for a in (e.artists or [e.artist]))
    songs: list[tuple[KoreaEntry, dict[str, int], frozenset[str]]] = []
    by_title: dict[str, list[int]] = {}
    for site, entries in charts_by_site.items():
        for entry in entries:
            identities = frozenset().union(*(aliases.identities(a) for a in (entry.artists or [entry.artist])))
            key = title_key(entry.title)
            match = next((i for i in by_title.get(key, []) if songs[i][2] & identities and site not in songs[i][1]), None)
            if match is None:
                by_title.setdefault(key, []).append(len(songs))
                songs.append((entry, {site: entry.rank}, identities))
            else:
                first, ranks, ids = songs[match]
                ranks[site] = entry.rank
                songs[match] = (first, ranks, ids | identities)
    lengths = {site: len(entries) for site, entries in charts_by_site.items()}
    scored = []
    for entry, ranks, _ in songs:
        score = sum(ranks.get(site, lengths[site] + 1) for site in charts_by_site) / len(charts_by_site)
        scored.append((round(score, 2), min(ranks.values()), entry, ranks))
    scored.sort(key=lambda s: (s[0], s[1]))
    return [ComparedSong(position, entry.title, entry.artist, score, len(ranks),
                         {site: ranks.get(site) for site in charts_by_site})
            for position, (score, _, entry, ranks) in enumerate(scored, start=1)]


_refresh_running = asyncio.Lock()


class RefreshParams(TypedDict):
    site: str | None
    chart_type: str | None


async def refresh(call: Call[RefreshParams]) -> RefreshResponse:
    site, chart_type = call.params["site"], call.params["chart_type"]
    errors = selection_errors(site, chart_type)
    if errors:
        raise InvalidParams(errors)
    if _refresh_running.locked():
        raise ApiError(409, "A refresh of korea-chart is already running")
    admit_refresh(call, (site, chart_type))
    async with _refresh_running:
        options = {"site": site, "chart_type": chart_type}
        outcomes = await crawl_in_subprocess(NAME, options, call.settings)
    call.data.expire()
    parsed = [msgspec.convert(o, CrawlOutcome) for o in outcomes]
    ok = sum(o.status == "ok" for o in parsed)
    if parsed and not ok:  # every target failed: the upstream's fault, each reason given; the snapshots stay
        raise ApiError(502, {"message": "Every target of the refresh failed; the last good snapshots still serve",
                             "outcomes": [msgspec.to_builtins(o) for o in parsed]})
    return RefreshResponse("ok" if ok == len(parsed) else "partial", parsed)


# --- the route table ----------------------------------------------------------------------------

LIMIT = Param("limit", kind="int", default=100, ge=1, le=200, description="Rows to return, from rank 1")
SITE = Param("site", kind="choice", choices=SITE_NAMES, description="Chart site")
CHART_TYPE = Param("chart_type", kind="choice", choices=ALL_CHART_TYPES, choices_by=TYPES_BY_SITE,
                   description="Chart type; must be one of the site's (see /korea-chart/sites)")

ROUTES: tuple[Route, ...] = (
    health_route(NAME, expected_cadences,
                 "Supported sites and the latest snapshot of every chart, with age and a stale flag",
                 describe=describe_health, response=HealthResponse),
    Route("/sites", sites, errors=(), rows="sites", response=SitesResponse, summary="Supported source sites and chart types"),
    Route("/charts", charts, (Param("site", kind="choice", choices=SITE_NAMES, required=True,
                                    description="Chart site"), CHART_TYPE, LIMIT),
          rows="entries", response=(ChartResponse, RisingChartResponse),
          summary="Latest chart of a site (chart_type defaults to the site's first) with rank_change and rank_status"),
    Route("/charts/compare", compare, (
        search_param("keyword", required=False, description="Keep songs whose title or artist contains this"),
        Param("chart_type", kind="choice", choices=COMPARE_TYPES, default="realtime", description="Common chart type"),
        Param("limit", kind="int", default=50, ge=1, le=300, description="Songs to return"),
    ), rows="songs", response=CompareResponse, summary="portal-a, -b and -c merged by normalised title and artist"),
    Route("/{site}/charts/{chart_type}", site_chart, (
        Param("site", "path", kind="choice", choices=SITE_NAMES, description="Chart site"),
        Param("chart_type", "path", choices_by=TYPES_BY_SITE, description="One of the site's chart types"),
        LIMIT,
    ), rows="entries", response=(ChartResponse, RisingChartResponse), summary="Latest chart of a site and chart type"),
    Route("/refresh", refresh, (
        Param("site", kind="choice", choices=SITE_NAMES, description="Only this site"),
        Param("chart_type", kind="choice", choices=ALL_CHART_TYPES, choices_by=TYPES_BY_SITE,
              description="Only this chart type"),
    ), method="POST", cache_ttl=0, errors=(409, 429, 502), response=RefreshResponse,
        summary="Run the same crawl as cron for all sites and chart types, or the selected ones"),
)


GROUP = Group(
    name=NAME,
    title="Korean chart sites",
    description="Charts of five Korean music sites (portal-a Melon, portal-b Genie, portal-c Bugs, portal-d FLO, "
                "portal-e VIBE), served from cached snapshots. " + " ".join(__doc__.split("\n\n")[1:]).replace("\n", " "),
    routes=ROUTES,
    charts=CHARTS,
    upstreams=(melon.UPSTREAM, genie.UPSTREAM, genie.UPSTREAM_APP, bugs.UPSTREAM, flo.UPSTREAM, vibe.UPSTREAM),
    targets=targets,
    crawl_options=(("site", SITE_NAMES), ("chart_type", ALL_CHART_TYPES)),
    schedules=(
        Schedule("*/5 * * * *", ("--site", "portal-d", "--chart-type", "rising"), "Asia/Seoul",
                 "FLO observation every 5 minutes: all_age snapshot + rising"),
        Schedule("1 * * * *", ("--site", "portal-d", "--chart-type", "rising_hourly"), "Asia/Seoul",
                 "FLO rising for the previous clock hour (KST)"),
        *(Schedule(f"{m} * * * *", ("--site", site), "Asia/Seoul", f"{SITES[site].source} hourly (daily charts update "
                   "about 11:00 KST, weekly Monday about 13:00 KST)" if site != "portal-e" else "VIBE hourly")
          for m, site in ((3, "portal-a"), (6, "portal-b"), (9, "portal-c"), (12, "portal-e"))),
    ),
    retention_days={FLO_CHART: 3.0, "portal-d/rising": 3.0},
    settings=(GENIE_FEED_SETTING,),
    entries=EntryMapping(market="=kr", sub_daily_targets=tuple(TARGET.make(s.site, ct) for s in SITES.values()
                                                              for ct in s.hourly),
                         platform_ids=tuple((f"{site}/*", kind, "song_id") for site, kind in SONG_ID_TYPES.items())),
)


def _check_sites() -> None:
    for site in SITES.values():
        if site.site != "portal-d":
            assert tuple(site.upstream.CHART_TYPES) == site.chart_types, site.site


_check_sites()
