"""/digital-sales: iTunes Store download charts, one snapshot per combo and country.

A combo is one feed of the legacy iTunes RSS generator (top songs, top albums, top music videos),
pulled every 3 hours for every configured country (`CHARTGW_DIGITAL_SALES_COUNTRIES`). Each
snapshot keeps the feed body exactly as received, so /pull.json can hand the raw feeds to clients
written against them. Entries carry Apple's numeric store ids (item, artist, album), the keys the
artist-history service joins on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TypedDict

import msgspec

from chartgw.api.catalog import CADENCES, Chart, cadence_of, cadences
from chartgw.api.endpoints import Call, Route, not_found
from chartgw.api.group import EntryMapping, Group, Schedule
from chartgw.api.params import InvalidParams, Param, literal_error
from chartgw.api.responses import (
    PULL_JSON_ROUTE,
    SnapshotMeta,
    health_route,
    latest_or_404,
    latest_pull_route,
    records_array,
    snapshot_meta,
    snapshots_route,
)
from chartgw.core import config
from chartgw.core.countries import COUNTRIES, country_name, country_param
from chartgw.core.settings import Settings
from chartgw.crawl.runner import CrawlContext, CrawlTarget, Fetched
from chartgw.store import NewSnapshot, StoredEntry
from chartgw.store.records import stored_entry
from chartgw.store.targets import TargetKey
from chartgw.upstreams import itunes
from chartgw.upstreams.itunes import DigitalSalesEntry

NAME = "digital-sales"
CADENCE_SECONDS = CADENCES["3-hourly"]
COUNTRIES_SETTING = config.Setting("DIGITAL_SALES_COUNTRIES", "us,gb,jp,kr,de,fr,ca,au",
                                   "storefronts /digital-sales crawls and serves (ISO alpha-2; no `global`)",
                                   config.storefronts)
FEED_LIMIT_SETTING = config.Setting("DIGITAL_SALES_FEED_LIMIT", "100", "rows asked of every iTunes feed, 1-200",
                                    config.bounded_int(1, itunes.MAX_LIMIT))


@dataclass(frozen=True)
class Combo:
    """One chart the group serves per country: a feed of the iTunes RSS generator."""

    slug: str
    feed: str
    """The generator's feed name in `/{cc}/rss/{feed}/limit={N}/json`."""
    media: str
    description: str


# The legacy generator's music feeds were topsongs, topalbums, topimixes and topmusicvideos.
# topimixes (user playlists, retired with iMix in 2013) is left out: no payload of it is known.
COMBOS: tuple[Combo, ...] = (
    Combo("top-songs", "topsongs", "songs",
          "Best-selling song downloads; entries name the album (collection) and link a 30 s audio preview"),
    Combo("top-albums", "topalbums", "albums", "Best-selling album downloads; no preview, no collection"),
    Combo("top-music-videos", "topmusicvideos", "music videos",
          "Best-selling music video downloads; entries link a video preview"),
)
COMBO_SLUGS = tuple(c.slug for c in COMBOS)
COMBOS_BY_SLUG = {c.slug: c for c in COMBOS}


MIN_FEED_ROWS = 25
"""The fewest rows a feed must give (or all asked, below that) to be committed."""


TARGET = TargetKey(("combo", "country"))
CHARTS = tuple(Chart(combo.slug, TARGET, "3-hourly", {"combo": combo.slug}, market="country",
                     latest="/digital-sales/{combo}/{country}/latest", history="/digital-sales/snapshots")
               for combo in COMBOS)


def chart_cadence(target: str) -> int:
    return cadence_of(CHARTS, target)


def configured_targets(settings: Settings) -> list[tuple[Combo, str]]:
    """Every combo x configured country, combos in table order."""
    return [(combo, country) for combo in COMBOS for country in settings.get(COUNTRIES_SETTING)]


# --- crawl --------------------------------------------------------------------------------------

def stored(entry: DigitalSalesEntry) -> StoredEntry:
    return stored_entry(entry, rank=entry.rank, title=entry.title, artists=entry.artists, item_id=entry.store_id)


def _build(combo: Combo, country: str, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    """One snapshot dated by the feed's own `updated`, with the body kept as received."""
    body = fetched[0].body
    parsed = itunes.parse(combo.feed, body)
    return [NewSnapshot(target=TARGET.make(combo.slug, country), chart_date=parsed.chart_date, chart_hour=None,
                        fetched_at=ctx.now, source=fetched[0].url, entries=[stored(e) for e in parsed.entries],
                        raw=body, raw_type="application/json")]


def _target(combo: Combo, country: str, limit: int) -> CrawlTarget:
    # A feed may hold fewer rows than asked (small storefronts), so no exact row count; but a feed cut to a
    # handful of rows is a feed gone wrong, never a chart.
    return CrawlTarget(TARGET.make(combo.slug, country), tuple(itunes.requests_for(country, combo.feed, limit)),
                       partial(_build, combo, country), None, min_rows=min(limit, MIN_FEED_ROWS))


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    combo, country = selection.get("combo"), selection.get("country")
    configured = settings.get(COUNTRIES_SETTING)
    if country is not None and country not in configured:
        raise InvalidParams([literal_error(["query", "country"], country, configured)])
    limit = settings.get(FEED_LIMIT_SETTING)
    return [_target(c, cc, limit) for c in COMBOS if combo in (None, c.slug)
            for cc in configured if country in (None, cc)]


# --- responses ----------------------------------------------------------------------------------

class ComboCountry(msgspec.Struct):
    country: str
    country_name: str
    chart_date: str | None
    """Chart date of the latest snapshot; null before the first."""
    fetched_at: str | None


class ComboInfo(msgspec.Struct):
    combo: str
    feed: str
    """The iTunes RSS feed kind (`/{cc}/rss/{feed}/limit={N}/json`)."""
    media: str
    description: str
    countries: list[ComboCountry]


class CombosResponse(msgspec.Struct):
    cadence_seconds: int
    feed_limit: int
    combos: list[ComboInfo]


class ComboChartResponse(msgspec.Struct):
    combo: str
    country: str
    snapshot: SnapshotMeta
    count: int
    entries: list[DigitalSalesEntry]


# --- handlers -----------------------------------------------------------------------------------

async def combos(call: Call) -> CombosResponse:
    newest = {row.target: row for row in await call.data.reader.latest_per_target()}
    configured = call.settings.get(COUNTRIES_SETTING)
    infos = []
    for combo in COMBOS:
        rows = [(cc, newest.get(TARGET.make(combo.slug, cc))) for cc in configured]
        infos.append(ComboInfo(combo.slug, combo.feed, combo.media, combo.description, [
            ComboCountry(cc, country_name(cc), row.chart_date if row else None, row.fetched_at if row else None)
            for cc, row in rows]))
    return CombosResponse(CADENCE_SECONDS, call.settings.get(FEED_LIMIT_SETTING), infos)


class ComboLatestParams(TypedDict):
    combo: str
    country: str
    limit: int


async def combo_latest(call: Call[ComboLatestParams]) -> ComboChartResponse:
    combo, country = call.params["combo"], call.params["country"]
    configured = call.settings.get(COUNTRIES_SETTING)
    if country not in configured:
        raise not_found(f"Country {country!r} is not crawled; configured countries: {', '.join(configured)}")
    row = await latest_or_404(call.data.reader, TARGET.make(combo, country), f"{combo} in {country}")
    records = await call.data.reader.records(row.id, call.params["limit"])
    return ComboChartResponse(combo, country, snapshot_meta(row, CADENCE_SECONDS, call.now), len(records),
                              records_array(records))


# --- the route table ----------------------------------------------------------------------------

ROUTES: tuple[Route, ...] = (
    health_route(NAME, lambda settings: cadences(CHARTS, [TARGET.make(c.slug, cc) for c, cc in configured_targets(settings)]),
                 "Every configured combo x country's latest snapshot, with age and a stale flag"),
    snapshots_route(chart_cadence, "Stored snapshots of every combo and country, newest first"),
    latest_pull_route(lambda settings: [TARGET.make(c.slug, cc) for c, cc in configured_targets(settings)], chart_cadence,
                      "The latest pull: run outcome and every configured combo x country's latest chart (100 rows each)"),
    PULL_JSON_ROUTE,
    Route("/combos", combos, errors=(), rows="combos", response=CombosResponse,
          summary="The combos (feed kind and media) and, per configured country, the latest chart date"),
    Route("/{combo}/{country}/latest", combo_latest, (
        Param("combo", "path", kind="choice", choices=COMBO_SLUGS, description="Combo (see /digital-sales/combos)"),
        Param("country", "path", check=country_param,
              description="ISO 3166-1 alpha-2 storefront; must be one of the configured countries"),
        Param("limit", kind="int", default=100, ge=1, le=200, description="Rows to return, from rank 1"),
    ), rows="entries", response=ComboChartResponse, summary="Latest chart of one combo in one country"),
)


GROUP = Group(
    name=NAME,
    title="Digital sales (iTunes Store charts)",
    description="Download-store charts of the iTunes Store: top songs, top albums and top music videos per "
                "country, from the legacy iTunes RSS JSON feeds, pulled every 3 hours and served from snapshots. "
                "Entries carry Apple's numeric store ids; /pull.json gives the feeds exactly as received.",
    routes=ROUTES,
    charts=CHARTS,
    upstreams=(itunes.UPSTREAM,),
    targets=targets,
    crawl_options=(("combo", COMBO_SLUGS), ("country", tuple(COUNTRIES))),
    schedules=(Schedule("25 */3 * * *", (), "UTC", "iTunes Store charts: every combo x configured country, 3-hourly"),),
    settings=(COUNTRIES_SETTING, FEED_LIMIT_SETTING),
    # The store id is a track's on the songs chart only (an album's or a video's elsewhere).
    entries=EntryMapping(market="target:1", ids={"download_store_track_id": "store_id"}, ids_targets=("top-songs/*",)),
)


def _check_combos() -> None:
    assert {c.feed for c in COMBOS} == set(itunes.FEEDS)
    assert len(COMBO_SLUGS) == len(set(COMBO_SLUGS))


_check_combos()
