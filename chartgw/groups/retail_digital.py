"""/retail-digital: Amazon Digital Music best sellers (the `dmusic` lists) per marketplace, keyed by ASIN.

Two kinds of source per configured marketplace (`CHARTGW_RETAIL_DIGITAL_SOURCES`):
- the Digital Music lists (`/gp/bestsellers/dmusic/...`: the store, albums, songs; 100 ranks each), one chart
  key each: "us-digital-albums";
- the marketplace's best-sellers landing page (`/gp/bestsellers/`, the real capture's format): each of its
  category carousels (20 ranks) becomes a chart key "us-landing-<category>" ("us-landing-digital-songs").
Everything is crawled once a day and kept as daily snapshots.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

import msgspec

from chartgw.api.catalog import Chart, cadences
from chartgw.api.endpoints import Call, Route, not_found
from chartgw.api.group import EntryMapping, Group, Schedule
from chartgw.api.params import Param
from chartgw.api.responses import (
    BUNDLE_LIMIT,
    RunInfo,
    SnapshotMeta,
    health_route,
    records_array,
    run_info,
    snapshot_meta,
    snapshots_route,
)
from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.crawl.runner import CrawlTarget
from chartgw.groups import retail
from chartgw.store import SnapshotRow
from chartgw.upstreams import amazon
from chartgw.upstreams.amazon import RetailEntry

NAME = "retail-digital"
GROUP_KIND: amazon.Group = "retail-digital"
CATEGORY_SLUGS = tuple(c.slug for c in amazon.categories(GROUP_KIND))
SOURCES = (retail.LANDING, *CATEGORY_SLUGS)
DEFAULT_SOURCES = (retail.LANDING, "digital-music", "digital-albums", "digital-songs")
"""digital-hard-rock-metal is left out by default: its node is from older public code and may be retired."""
WHERE = "/retail-digital/charts"


SOURCES_SETTING = config.Setting(
    "RETAIL_DIGITAL_SOURCES", ",".join(DEFAULT_SOURCES),
    f"what /retail-digital crawls per marketplace: `landing` (the best-sellers landing page's carousels) and Digital "
    f"Music lists ({', '.join(CATEGORY_SLUGS)})", config.subset(SOURCES, "source", lower=True))


def configured(settings: Settings) -> list[tuple[str, str]]:
    """(market, source) of every configured source in every configured marketplace that has it."""
    chosen = settings.get(SOURCES_SETTING)
    return [(market, source) for market in settings.get(retail.MARKETS_SETTING) for source in chosen
            if source == retail.LANDING or market in amazon.category(GROUP_KIND, source).paths]


def configured_lists(settings: Settings) -> list[str]:
    """The grid charts' targets (a landing page's charts are known only once crawled)."""
    return [retail.target_of(m, s) for m, s in configured(settings) if s != retail.LANDING]


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    market, source = selection.get("market"), selection.get("source")
    retail.check_market(market, settings)
    gate = retail.open_gate(NAME, now, settings)
    chosen = [(m, s) for m, s in configured(settings) if market in (None, m) and source in (None, s)]
    return [retail.landing_target(m, gate) if s == retail.LANDING else retail.grid_target(GROUP_KIND, m, s, gate)
            for m, s in chosen]


CHARTS = (Chart("{chart}", retail.TARGET, "daily", market="market",
                latest="/retail-digital/charts/{market}-{chart}/latest", history="/retail-digital/snapshots"),)
"""Every list of every marketplace: the Digital Music lists and the landing page's carousels."""


def expected_cadences(settings: Settings) -> dict[str, int]:
    return cadences(CHARTS, configured_lists(settings))


# --- responses ----------------------------------------------------------------------------------------------

class ChartInfo(msgspec.Struct):
    key: str
    """The chart key: marketplace and category ("us-digital-albums", "us-landing-digital-songs")."""
    market: str
    category: str
    source: str
    """"list" (a Digital Music grid, 100 ranks) or "landing" (a landing-page carousel, 20 ranks)."""
    name: str | None
    url: str | None
    configured: bool
    """Crawled daily under the current settings."""
    snapshots: int
    first_chart_date: str | None
    last_chart_date: str | None
    last_fetched_at: str | None
    row_count: int | None
    """Rows of the latest snapshot."""


class ChartsResponse(msgspec.Struct):
    cadence_seconds: int
    count: int
    charts: list[ChartInfo]


class ChartSummary(msgspec.Struct):
    key: str
    market: str
    category: str
    name: str | None
    snapshot: SnapshotMeta


class LatestResponse(msgspec.Struct):
    run: RunInfo | None
    """The latest recorded crawl run, with every target's outcome."""
    count: int
    charts: list[ChartSummary]
    """Every chart's latest snapshot (its metadata; entries are at /charts/{chart_key}/latest)."""


class FeedChart(msgspec.Struct):
    key: str
    market: str
    category: str
    name: str | None
    snapshot: SnapshotMeta
    count: int
    entries: list[RetailEntry]
    """As received: every field the page gave, with `raw` (badge, link, rating and review texts, list item)."""


class FeedResponse(msgspec.Struct):
    count: int
    charts: list[FeedChart]


# --- handlers -----------------------------------------------------------------------------------------------

def _order(rows: list[SnapshotRow], settings: Settings) -> list[SnapshotRow]:
    """Configured lists first in configuration order, then the rest (landing carousels) by target."""
    wanted = {t: i for i, t in enumerate(configured_lists(settings))}
    return sorted(rows, key=lambda r: (wanted.get(r.target, len(wanted)), r.target))


async def _latest_rows(call: Call) -> list[SnapshotRow]:
    rows = _order(await call.data.reader.latest_per_target(retail.market_pattern()), call.settings)
    if not rows:
        raise not_found("No chart has been stored yet")
    return rows


async def latest(call: Call) -> LatestResponse:
    reader = call.data.reader
    rows = await _latest_rows(call)
    runs = await reader.runs("crawl", 1)
    charts = []
    for row in rows:
        market, chart = retail.split_target(row.target)
        charts.append(ChartSummary(retail.key_of(row.target), market, chart, retail.snapshot_name(row),
                                   snapshot_meta(row, retail.CADENCE_SECONDS, call.now)))
    return LatestResponse(run_info(runs[0]) if runs else None, len(charts), charts)


class FeedParams(TypedDict):
    limit: int


async def feed(call: Call[FeedParams]) -> FeedResponse:
    reader = call.data.reader
    charts = []
    for row in await _latest_rows(call):
        market, chart = retail.split_target(row.target)
        records = await reader.records(row.id, call.params["limit"])
        charts.append(FeedChart(retail.key_of(row.target), market, chart, retail.snapshot_name(row),
                                snapshot_meta(row, retail.CADENCE_SECONDS, call.now), len(records),
                                records_array(records)))
    return FeedResponse(len(charts), charts)


def _url(market: str, chart: str) -> str | None:
    host = amazon.MARKETPLACES[market].host
    if chart.startswith(retail.LANDING):
        return f"https://{host}/gp/bestsellers/"
    found = amazon.CATEGORY_BY_KEY.get((GROUP_KIND, chart))
    path = found.paths.get(market) if found is not None else None
    return f"https://{host}{amazon.grid_path(path)}" if path else None


async def charts(call: Call) -> ChartsResponse:
    reader = call.data.reader
    covered = await reader.coverage()
    newest = {row.target: row for row in await reader.latest_per_target(retail.market_pattern())}
    wanted = configured_lists(call.settings)
    landing_markets = {m for m, s in configured(call.settings) if s == retail.LANDING}
    infos = []
    for target in [*wanted, *sorted(t for t in covered if t not in wanted)]:
        market, chart = retail.split_target(target)
        if market not in amazon.MARKETPLACES:
            continue
        row = newest.get(target)
        count, first, last, fetched = retail.held_span(covered.get(target))
        landing = chart.startswith(retail.LANDING + "-")
        infos.append(ChartInfo(retail.key_of(target), market, chart, "landing" if landing else "list",
                               retail.snapshot_name(row) if row else None, _url(market, chart),
                               target in wanted or (landing and market in landing_markets), count, first, last, fetched,
                               row.row_count if row else None))
    return ChartsResponse(retail.CADENCE_SECONDS, len(infos), infos)


class ChartLatestParams(TypedDict):
    chart_key: str
    limit: int


async def chart_latest(call: Call[ChartLatestParams]) -> retail.ChartResponse:
    key = call.params["chart_key"]
    parts = retail.split_key(key)
    target = retail.target_of(*parts) if parts else None
    if target is None or (target not in configured_lists(call.settings) and await call.data.reader.latest(target) is None):
        raise retail.unknown("chart key", key, WHERE)
    return await retail.chart_response(call, target, WHERE, call.params["limit"], False)


ROUTES: tuple[Route, ...] = (
    health_route(NAME, expected_cadences,
                 "Every configured Digital Music list's latest snapshot, and each marketplace's crawl state",
                 describe=retail.describe_health(NAME), response=retail.RetailHealth),
    snapshots_route(retail.chart_cadence(CHARTS), "Stored snapshots of every chart, newest first"),
    Route("/latest", latest, rows="charts", response=LatestResponse,
          summary="The latest crawl run and every chart's latest snapshot summary"),
    Route("/charts.json", feed, (BUNDLE_LIMIT,), rows="charts", response=FeedResponse,
          summary="The raw feed: every chart's latest rows as received (with the verbatim texts), 100 rows each "
                  "unless limit says fewer"),
    Route("/charts", charts, errors=(), rows="charts", response=ChartsResponse,
          summary="Chart keys with marketplace, category, source and snapshot coverage"),
    Route("/charts/{chart_key}/latest", chart_latest, (
        Param("chart_key", "path", description="A chart key from /retail-digital/charts (\"us-digital-albums\")"),
        Param("limit", kind="int", default=100, ge=1, le=100, description="Rows to return, from rank 1"),
    ), rows="entries", response=retail.ChartResponse, summary="The latest snapshot of one chart"),
)


GROUP = Group(
    name=NAME,
    title="Retail digital (Amazon Digital Music best sellers)",
    description="Amazon's Digital Music best sellers per marketplace: the store, albums and songs lists (100 ranks) "
                "and the best-sellers landing page's category carousels (20 ranks), crawled daily. Chart keys name "
                "marketplace and category; /charts.json gives every chart's latest rows as received.",
    routes=ROUTES,
    charts=CHARTS,
    upstreams=retail.UPSTREAMS,
    targets=targets,
    crawl_options=(("market", retail.MARKET_CODES), ("source", SOURCES)),
    # Daily at 04:40 UTC, 30 min after /retail-physical and before /retail-music, so the three groups do not
    # ask one marketplace at once.
    schedules=(Schedule("40 4 * * *", (), "UTC", "Amazon Digital Music best sellers and landing carousels: every "
                                                 "configured source x marketplace, daily"),),
    per_upstream=1,
    delay_seconds=retail.delay_seconds,
    settings=(*retail.SETTINGS, SOURCES_SETTING),
    # Landing carousels repeat the top 20 of lists crawled whole, and may be any department (books, toys):
    # the artist-history index reads the Digital Music lists only.
    entries=EntryMapping(market="target:0", artists=None, ids={"asin": "asin"}, skip_targets=("*/landing-*",)),
)
