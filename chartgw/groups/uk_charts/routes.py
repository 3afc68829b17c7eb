"""/uk-charts responses, handlers and route table."""

from __future__ import annotations

from datetime import date
from typing import TypedDict

import msgspec

from chartgw.api.catalog import cadences, dated
from chartgw.api.endpoints import Call, Route, not_found
from chartgw.api.params import Limited, Param, search_term
from chartgw.api.responses import (
    HealthHead,
    SnapshotMeta,
    TargetStatus,
    health_route,
    records_array,
    snapshot_meta,
    snapshots_route,
    stored_record,
)
from chartgw.core.settings import Settings
from chartgw.core.text import compact
from chartgw.groups.uk_charts.charts import CATALOG, CHARTS_SETTING, NAME, TARGET, WEEK_SECONDS
from chartgw.groups.uk_charts.crawl import week_end_of
from chartgw.groups.uk_charts.storage import SEARCH, checked_chart_key, latest_rows
from chartgw.store import SnapshotRow, like_pattern
from chartgw.upstreams import officialcharts
from chartgw.upstreams.officialcharts import (
    CHARTS,
    CHARTS_BY_KEY,
    UkChartEntry,
)

# --- responses ------------------------------------------------------------------------------------

class ChartCoverage(msgspec.Struct):
    chart_key: str
    title: str
    kind: str
    """"singles" (songs) or "albums"."""
    size: int
    """Rows of a complete current page (a latest-week page with fewer fails the crawl)."""
    configured: bool
    """True when the chart is in CHARTGW_UK_CHARTS (crawled every week)."""
    url: str
    """The chart's page on officialcharts.com."""
    first_week_start: str | None
    last_week_start: str | None
    last_week_end: str | None
    weeks_held: int


class ChartsResponse(msgspec.Struct):
    count: int
    charts: list[ChartCoverage]
    """Every chart the gateway knows: the configured ones first, in CHARTGW_UK_CHARTS order."""


class WeekSnapshot(SnapshotMeta, kw_only=True):
    """A stored week: the snapshot metadata (chart_date = week start) with its chart key and week."""

    chart_key: str
    week_start: str
    week_end: str


class SnapshotsResponse(msgspec.Struct):
    chart_key: str | None
    count: int
    snapshots: list[WeekSnapshot]
    """Newest fetch first."""


class WeekChartResponse(msgspec.Struct):
    chart_key: str
    title: str
    kind: str
    week_start: str
    """The Friday that starts the chart week, as the page printed it."""
    week_end: str
    """The Thursday that ends it."""
    requested_date: str | None
    """The day asked for (any day of the week finds it); null for /latest."""
    previous_week_start: str | None
    """The nearest older week held (null at the oldest held week)."""
    next_week_start: str | None
    """The nearest newer week held (null at the newest)."""
    snapshot: SnapshotMeta
    count: int
    entries: list[UkChartEntry]


class SearchHit(msgspec.Struct):
    chart_key: str
    chart_date: str
    """The chart week's start (the same as week_start)."""
    week_start: str
    week_end: str
    rank: int
    """The position printed that week (ties repeat)."""
    entry: UkChartEntry


class SearchResponse(msgspec.Struct):
    q: str
    chart_key: str | None
    count: int
    hits: list[SearchHit]
    """Newest chart week first, then by chart key and rank; each week of a chart once."""


class ChartHealth(msgspec.Struct):
    chart_key: str
    latest_week_start: str | None
    latest_week_end: str | None


class HealthResponse(HealthHead):
    chart_count: int
    """How many charts CHARTGW_UK_CHARTS configures."""
    charts: list[ChartHealth]
    targets: list[TargetStatus]
    """Stale when the latest week was fetched more than two weeks ago."""


class _Rank(msgspec.Struct):
    rank: int


_decode_rank = msgspec.json.Decoder(_Rank).decode


# --- handlers -------------------------------------------------------------------------------------

def _cadences(settings: Settings) -> dict[str, int]:
    return cadences(CATALOG, [TARGET.make(key) for key in settings.get(CHARTS_SETTING)])


async def describe_health(call: Call, status: str, statuses: list[TargetStatus]) -> HealthResponse:
    latest = await latest_rows(call.data.reader)
    charts = []
    for key in call.settings.get(CHARTS_SETTING):
        found = latest.get(TARGET.make(key))
        charts.append(ChartHealth(key, found.chart_date if found else None,
                                  week_end_of(found.chart_date, found.meta) if found else None))
    return HealthResponse(status, NAME, len(charts), charts, statuses)


async def charts(call: Call) -> ChartsResponse:
    configured = call.settings.get(CHARTS_SETTING)
    coverage = await call.data.reader.coverage()
    latest = await latest_rows(call.data.reader)
    order = [*configured, *(chart.key for chart in CHARTS if chart.key not in configured)]
    listed = []
    for key in order:
        info = CHARTS_BY_KEY[key]
        held = coverage.get(TARGET.make(key))
        newest = latest.get(TARGET.make(key))
        listed.append(ChartCoverage(key, info.title, info.kind, info.size, key in configured,
                                    officialcharts.SITE + officialcharts.chart_path(key), held.first if held else None,
                                    held.last if held else None,
                                    week_end_of(newest.chart_date, newest.meta) if newest else None,
                                    held.dates if held else 0))
    return ChartsResponse(len(listed), listed)


class ChartKeyParams(TypedDict):
    chart_key: str | None


async def weeks_of(call: Call[ChartKeyParams]) -> str:
    """The targets `/snapshots` lists: one chart's weeks (a 404 for a chart neither configured nor held), or all."""
    return TARGET.pattern(chart_key=await checked_chart_key(call, call.params["chart_key"]))


def weeks(call: Call[ChartKeyParams], rows: list[SnapshotRow]) -> SnapshotsResponse:
    listed = []
    for row in rows:
        head = msgspec.structs.asdict(snapshot_meta(row, WEEK_SECONDS, call.now))
        listed.append(WeekSnapshot(**head, chart_key=row.target, week_start=row.chart_date,
                                   week_end=week_end_of(row.chart_date, row.meta)))
    return SnapshotsResponse(call.params["chart_key"], len(listed), listed)


async def _chart_response(call: Call[Limited], key: str, row: SnapshotRow, requested: str | None) -> WeekChartResponse:
    reader = call.data.reader
    records = await reader.records(row.id, call.params["limit"])
    previous, following = await reader.neighbours(row.target, row.chart_date)
    info = CHARTS_BY_KEY[key]
    return WeekChartResponse(key, info.title, info.kind, row.chart_date, week_end_of(row.chart_date, row.meta), requested,
                             previous, following, snapshot_meta(row, WEEK_SECONDS, call.now), len(records),
                             records_array(records))


class ChartLatestParams(TypedDict):
    chart_key: str
    limit: int


async def chart_latest(call: Call[ChartLatestParams]) -> WeekChartResponse:
    key = await checked_chart_key(call, call.params["chart_key"])
    assert key is not None
    row = await call.data.reader.latest(TARGET.make(key))
    if row is None:
        raise not_found(f"No week of {key} is held yet; see /uk-charts/charts")
    return await _chart_response(call, key, row, None)


class ChartWeekParams(TypedDict):
    chart_key: str
    week_start: str
    limit: int


async def chart_week(call: Call[ChartWeekParams]) -> WeekChartResponse:
    key = await checked_chart_key(call, call.params["chart_key"])
    assert key is not None
    day: str = call.params["week_start"]
    target = TARGET.make(key)
    reader = call.data.reader
    row = await reader.on_or_before(target, day)
    if row is not None and day <= week_end_of(row.chart_date, row.meta):
        return await _chart_response(call, key, row, day)
    try:
        start, end = officialcharts.chart_week(date.fromisoformat(day))
        week = f"the week {start.isoformat()} to {end.isoformat()}"
    except OverflowError:  # the week of 0001-01-01 or 9999-12-31 runs past the calendar
        week = f"the week of {day}"
    held = (await reader.coverage(target)).get(target)
    if held is None:
        raise not_found(f"No week of {key} is held yet; see /uk-charts/charts")
    first, last, weeks = held.first, held.last, held.dates
    before, after = await reader.neighbours(target, day)
    raise not_found(f"No {key} chart is held for {week}; the weeks held "
                    f"run from {first} to {last} ({weeks} weeks; nearest: {before or 'none'} before, "
                    f"{after or 'none'} after); see /uk-charts/charts")


class SearchParams(TypedDict):
    q: str
    chart_key: str | None
    limit: int


async def search(call: Call[SearchParams]) -> SearchResponse:
    q, limit = call.params["q"], call.params["limit"]
    key = await checked_chart_key(call, call.params["chart_key"])
    rows = await call.data.reader.fetchall(SEARCH, (TARGET.pattern(chart_key=key), like_pattern(compact(q)), limit))
    hits = []
    for values in rows:
        row, record = SnapshotRow(*values[:8]), values[8]
        hits.append(SearchHit(row.target, row.chart_date, row.chart_date, week_end_of(row.chart_date, row.meta),
                              _decode_rank(record).rank, stored_record(record)))
    return SearchResponse(q, key, len(hits), hits)


# --- the route table ------------------------------------------------------------------------------

CHART_KEY_HELP = "A chart key (singles, albums, dance-singles, ...; listed at /uk-charts/charts)"
CHART_KEY = Param("chart_key", "path", description=CHART_KEY_HELP)
ANY_CHART = Param("chart_key", description=CHART_KEY_HELP + "; every chart when absent")
ROWS = Param("limit", kind="int", default=200, ge=1, le=200, description="Rows to return, from the top (default: all)")

ROUTES: tuple[Route, ...] = (
    health_route(NAME, _cadences, "Configured chart count, the latest week held per chart, and each chart's freshness",
                 describe=describe_health, response=HealthResponse, pattern=TARGET.pattern()),
    Route("/charts", charts, errors=(), rows="charts", response=ChartsResponse,
          summary="Every chart key with its title, kind, size, whether it is configured, and the weeks held"),
    snapshots_route(lambda _: WEEK_SECONDS, "Stored chart weeks, newest fetch first, optionally of one chart",
                    select=weeks_of, listing=weeks, response=SnapshotsResponse, errors=(404,), params=(
        ANY_CHART,
        Param("limit", kind="int", default=50, ge=1, le=500, description="Snapshots to return, newest fetch first"),
    )),
    Route("/search", search, (
        Param("q", required=True, min_length=1, check=search_term,
              description="Words of a title or artist; case, accents and punctuation are ignored"),
        ANY_CHART,
        Param("limit", kind="int", default=50, ge=1, le=500, description="Hits to return"),
    ), rows="hits", response=SearchResponse,
          summary="Entries whose title or artist contains q in every stored week, newest week first, with rank"),
    Route("/{chart_key}/latest", chart_latest, (CHART_KEY, ROWS), rows="entries", response=WeekChartResponse,
          summary="The newest week held of one chart, with its week and the previous week held"),
    dated(NAME, Route("/{chart_key}/{week_start}", chart_week, (
        CHART_KEY,
        Param("week_start", "path", kind="date",
              description="YYYY-MM-DD: any day of the chart week (weeks run Friday to Thursday)"),
        ROWS,
    ), rows="entries", response=WeekChartResponse,
       summary="The chart of the week containing a day, with the previous and next weeks held"), "week_start"),
)
