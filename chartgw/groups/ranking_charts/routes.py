"""/ranking-charts responses, handlers and route table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date
from typing import Any, TypedDict, cast

import msgspec

from chartgw.api.catalog import cadences
from chartgw.api.catalog import dated as with_neighbours
from chartgw.api.endpoints import ApiError, Call, Route, not_found
from chartgw.api.params import Param, accepts, search_term
from chartgw.api.responses import SnapshotMeta, health_route, snapshot_meta
from chartgw.core.settings import Settings
from chartgw.core.text import compact
from chartgw.groups.ranking_charts.charts import (
    CHARTS,
    CHARTS_SETTING,
    DEFAULT_PRESET,
    NAME,
    PRESETS,
    SLUG_PATTERN,
    WEEK_SECONDS,
    weeks_back,
    weeks_between,
    year_before,
)
from chartgw.groups.ranking_charts.storage import SEARCH
from chartgw.store import SnapshotReader, SnapshotRow, glob_escape, like_pattern
from chartgw.upstreams import billboard
from chartgw.upstreams.billboard import (
    RankingEntry,
    RankingEntryWithRaw,
    chart_date_for,
)

# --- responses ------------------------------------------------------------------------------------------------


class ChartInfo(msgspec.Struct):
    slug: str
    kind: str
    """songs, albums or artists."""
    title: str
    size: int | None
    """Rows of a current week."""
    configured: bool
    """True when CHARTGW_RANKING_CHARTS crawls it; false for a chart held from before."""
    first_week: str | None
    """The oldest chart date held; null when no week is held yet."""
    last_week: str | None
    weeks_held: int


class ChartsResponse(msgspec.Struct):
    count: int
    charts: list[ChartInfo]


class ChartHead(msgspec.Struct, kw_only=True):
    """What every chart response says before its entries."""

    chart_slug: str
    kind: str
    title: str
    chart_date: str
    """The chart date of the week served (the Saturday ending the chart week; a Monday before 1962)."""
    previous_chart_date: str | None
    """The held week before this one; null at the oldest week held."""
    next_chart_date: str | None
    """The held week after this one; null at the latest."""
    weeks_ago: int
    """Chart weeks between this week and the latest held (0 = the latest)."""
    requested_date: str | None
    """The day asked for by `/charts/{chart_slug}/{chart_date}` (any day of the week); null elsewhere."""
    preset: str | None
    """The preset view of `/preset`; null elsewhere."""
    snapshot: SnapshotMeta
    count: int


class ChartResponse(ChartHead, kw_only=True):
    entries: list[RankingEntry]


class ChartResponseWithRaw(ChartHead, kw_only=True):
    """With `include_raw=true`: each entry adds `raw`, what the page said before normalisation."""

    entries: list[RankingEntryWithRaw]


class SnapshotsResponse(msgspec.Struct):
    chart_slug: str
    count: int
    snapshots: list[SnapshotMeta]
    """Newest chart date first."""


class DatesResponse(msgspec.Struct):
    chart_slug: str
    weeks_held: int
    first_week: str
    last_week: str
    count: int
    dates: list[str]
    """Chart dates held, newest first (up to `limit`)."""


class SearchHit(msgspec.Struct):
    chart_slug: str
    chart_title: str
    chart_date: str
    rank: int
    entry: RankingEntry


class SearchResponse(msgspec.Struct):
    q: str
    chart_slug: str | None
    count: int
    hits: list[SearchHit]
    """Newest week first, then by rank."""


_decode_entries = msgspec.json.Decoder(list[RankingEntry]).decode
_decode_with_raw = msgspec.json.Decoder(list[RankingEntryWithRaw]).decode
_decode_entry = msgspec.json.Decoder(RankingEntry).decode
_encode = msgspec.json.Encoder().encode


# --- handlers -------------------------------------------------------------------------------------------------


def _title(slug: str) -> str:
    info = billboard.chart_info(slug)
    return info.title if info else slug


def _kind(slug: str) -> str:
    info = billboard.chart_info(slug)
    return info.kind if info else "songs"


async def _coverage(reader: SnapshotReader, slug: str | None = None) -> dict[str, tuple[str, str, int]]:
    """Target -> (first chart date, last chart date, weeks held)."""
    return {target: (held.first, held.last, held.dates) for target, held in (await reader.coverage(slug)).items()}


async def charts(call: Call) -> ChartsResponse:
    wanted = call.settings.get(CHARTS_SETTING)
    held = await _coverage(call.data.reader)
    listed = []
    for slug in [*wanted, *sorted(s for s in held if s not in wanted)]:
        first, last, weeks = held.get(slug, (None, None, 0))
        listed.append(ChartInfo(slug, _kind(slug), _title(slug), billboard.expected_size(slug), slug in wanted, first,
                                last, weeks))
    return ChartsResponse(len(listed), listed)


class SlugParams(TypedDict):
    chart_slug: str


async def _chart_or_404(call: Call[SlugParams]) -> tuple[str, tuple[str, str, int]]:
    """The chart of the path and its coverage; a 404 naming the charts when it is neither configured nor held."""
    slug = call.params["chart_slug"]
    coverage = (await _coverage(call.data.reader, slug)).get(slug)
    if coverage is None:
        if slug in call.settings.get(CHARTS_SETTING):
            raise not_found(f"No week of {slug} is held yet (its first crawl has not run)")
        raise not_found(f"No chart '{slug}'; the charts are listed at /{NAME}/charts (configured: "
                        f"{', '.join(call.settings.get(CHARTS_SETTING))})")
    return slug, coverage


def _not_held(slug: str, coverage: tuple[str, str, int], why: str) -> ApiError:
    first, last, weeks = coverage
    return not_found(f"{why}; {slug} holds {weeks} week{'s' * (weeks != 1)} from {first} to {last} "
                     f"(see /{NAME}/charts/{slug}/dates)")


def _plain(records: Sequence[bytes]) -> bytes:
    """Stored records (entries with their raw values) as a JSON array of plain entries."""
    return _encode(_decode_entries(b"[" + b",".join(records) + b"]"))


class RawParams(TypedDict):
    limit: int
    include_raw: bool


async def _chart_response(call: Call[RawParams], slug: str, coverage: tuple[str, str, int], row: SnapshotRow, *,
                          requested: str | None = None, preset: str | None = None,
                          pick: Callable[[list[RankingEntryWithRaw]], list[int]] | None = None,
                          ) -> ChartResponse | ChartResponseWithRaw:
    reader = call.data.reader
    limit, include_raw = call.params["limit"], call.params["include_raw"]
    if pick is None:
        records = await reader.records(row.id, limit)
    else:
        every = await reader.records(row.id, 1_000_000)
        records = [every[i] for i in pick(_decode_with_raw(b"[" + b",".join(every) + b"]"))][:limit]
    previous, following = await reader.neighbours(slug, row.chart_date)
    entries: Any = msgspec.Raw(b"[" + b",".join(records) + b"]" if include_raw else _plain(records))
    kind = ChartResponseWithRaw if include_raw else ChartResponse
    return kind(chart_slug=slug, kind=_kind(slug), title=_title(slug), chart_date=row.chart_date,
                previous_chart_date=previous, next_chart_date=following,
                weeks_ago=weeks_between(date.fromisoformat(row.chart_date), date.fromisoformat(coverage[1])),
                requested_date=requested, preset=preset, snapshot=snapshot_meta(row, WEEK_SECONDS, call.now),
                count=len(records), entries=entries)


async def _week(call: Call, slug: str, coverage: tuple[str, str, int], week: date, why: str) -> SnapshotRow:
    row = await call.data.reader.snapshot_on(slug, week.isoformat())
    if row is None:
        raise _not_held(slug, coverage, why)
    return row


class LatestParams(TypedDict):
    chart_slug: str
    limit: int
    include_raw: bool


async def latest(call: Call[LatestParams]) -> ChartResponse | ChartResponseWithRaw:
    slug, coverage = await _chart_or_404(call)
    row = await call.data.reader.latest(slug)
    assert row is not None  # the chart has coverage, so a snapshot
    return await _chart_response(call, slug, coverage, row)


class DatedParams(TypedDict):
    chart_slug: str
    chart_date: str
    limit: int
    include_raw: bool


async def dated(call: Call[DatedParams]) -> ChartResponse | ChartResponseWithRaw:
    slug, coverage = await _chart_or_404(call)
    asked = date.fromisoformat(call.params["chart_date"])
    week = chart_date_for(asked)
    row = await _week(call, slug, coverage, week, f"The week of {asked} (chart date {week}) is not held")
    return await _chart_response(call, slug, coverage, row, requested=asked.isoformat())


class WeeksAgoParams(TypedDict):
    chart_slug: str
    weeks_ago: int
    limit: int
    include_raw: bool


async def weeks_ago(call: Call[WeeksAgoParams]) -> ChartResponse | ChartResponseWithRaw:
    slug, coverage = await _chart_or_404(call)
    first, last = date.fromisoformat(coverage[0]), date.fromisoformat(coverage[1])
    n = call.params["weeks_ago"]
    if n > weeks_between(first, last):
        raise _not_held(slug, coverage, f"{n} weeks ago is before the history held "
                                            f"(weeks-ago goes from 0 to {weeks_between(first, last)})")
    week = weeks_back(last, n)
    row = await _week(call, slug, coverage, week, f"{n} weeks ago (chart date {week}) is not held")
    return await _chart_response(call, slug, coverage, row)


def _top(n: int) -> Callable[[list[RankingEntryWithRaw]], list[int]]:
    return lambda entries: [i for i, e in enumerate(entries) if e.rank <= n]


def _gainers(entries: list[RankingEntryWithRaw]) -> list[int]:
    climbed = [(e.last_week - e.rank, i) for i, e in enumerate(entries) if e.last_week is not None and e.last_week > e.rank]
    return [i for _, i in sorted(climbed, key=lambda gain: (-gain[0], gain[1]))]


PICKS: dict[str, Callable[[list[RankingEntryWithRaw]], list[int]]] = {
    "top-10": _top(10),
    "top-40": _top(40),
    "debuts": lambda entries: [i for i, e in enumerate(entries) if e.is_new],
    "re-entries": lambda entries: [i for i, e in enumerate(entries) if e.is_reentry],
    "gainers": _gainers,
}


class PresetParams(TypedDict):
    chart_slug: str
    preset: str
    limit: int
    include_raw: bool


async def preset(call: Call[PresetParams]) -> ChartResponse | ChartResponseWithRaw:
    slug, coverage = await _chart_or_404(call)
    name = call.params["preset"]
    reader = call.data.reader
    if name == "year-ago":
        week = year_before(date.fromisoformat(coverage[1]))
        row = await _week(call, slug, coverage, week, f"The week one year before the latest ({week}) is not held")
        return await _chart_response(call, slug, coverage, row, preset=name)
    latest_row = await reader.latest(slug)
    assert latest_row is not None
    return await _chart_response(call, slug, coverage, latest_row, preset=name, pick=PICKS[name])


class SnapshotsParams(TypedDict):
    chart_slug: str
    limit: int


async def snapshots(call: Call[SnapshotsParams]) -> SnapshotsResponse:
    slug, _ = await _chart_or_404(call)
    rows = await call.data.reader.newest(slug, call.params["limit"])
    metas = [snapshot_meta(row, WEEK_SECONDS, call.now) for row in rows]
    return SnapshotsResponse(slug, len(metas), metas)


class DatesParams(TypedDict):
    chart_slug: str
    limit: int


async def dates(call: Call[DatesParams]) -> DatesResponse:
    slug, (first, last, weeks) = await _chart_or_404(call)
    found = await call.data.reader.dates(slug, call.params["limit"])
    return DatesResponse(slug, weeks, first, last, len(found), found)


class SearchParams(TypedDict):
    q: str
    chart_slug: str | None
    limit: int


async def search(call: Call[SearchParams]) -> SearchResponse:
    q, slug, limit = call.params["q"], call.params["chart_slug"], call.params["limit"]
    reader = call.data.reader
    if slug is not None:
        await _chart_or_404(cast(Call[SlugParams], call))  # its chart_slug is given: a str
    scope = glob_escape(slug) if slug else "*"
    rows = await reader.fetchall(SEARCH, (scope, like_pattern(compact(q)), limit))
    hits = [SearchHit(target, _title(target), chart_date, rank, _decode_entry(record))
            for target, chart_date, rank, record in rows]
    return SearchResponse(q, slug, len(hits), hits)


# --- the route table ------------------------------------------------------------------------------------------


@accepts(pattern=f"^{SLUG_PATTERN.pattern}$")
def chart_slug(value: str) -> str:
    if not SLUG_PATTERN.fullmatch(value):
        raise ValueError("must be a chart slug of lowercase letters a-z, digits 0-9 and '-' (see /ranking-charts/charts)")
    return value


CHART = Param("chart_slug", "path", check=chart_slug, description="Billboard chart slug as in /ranking-charts/charts "
                                                                 "(\"hot-100\", \"billboard-200\", \"artist-100\")")
LIMIT = Param("limit", kind="int", default=200, ge=1, le=200, description="Entries to return, from the first")
INCLUDE_RAW = Param("include_raw", kind="bool", default=False,
                    description="Add to each entry `raw`: what the page said, verbatim, before normalisation")
CHART_RESPONSES = (ChartResponse, ChartResponseWithRaw)


def _cadences(settings: Settings) -> dict[str, int]:
    return cadences(CHARTS, settings.get(CHARTS_SETTING))


ROUTES: tuple[Route, ...] = (
    health_route(NAME, _cadences, "The latest week of every configured chart, with its age and a stale flag "
                                  "(stale after two weeks)"),
    Route("/charts", charts, errors=(), rows="charts", response=ChartsResponse,
          summary="The configured charts (and any held from before): kind, title, first and last week held, weeks held"),
    Route("/charts/{chart_slug}/snapshots", snapshots, (
        CHART, Param("limit", kind="int", default=52, ge=1, le=5000, description="Snapshots to return"),
    ), rows="snapshots", response=SnapshotsResponse, summary="Stored snapshots of one chart, newest chart date first"),
    Route("/charts/{chart_slug}/dates", dates, (
        CHART, Param("limit", kind="int", default=5000, ge=1, le=5000, description="Dates to return"),
    ), rows="dates", response=DatesResponse, summary="The chart dates held of one chart, newest first"),
    Route("/charts/{chart_slug}/latest", latest, (CHART, LIMIT, INCLUDE_RAW), rows="entries", response=CHART_RESPONSES,
          summary="The latest week of one chart"),
    Route("/charts/{chart_slug}/preset", preset, (
        CHART, Param("preset", kind="choice", choices=PRESETS, default=DEFAULT_PRESET,
                     description=f"top-10, top-40, debuts (new this week), re-entries, gainers (biggest climbers "
                                 f"by last week's position, most places first) or year-ago (the same week one year "
                                 f"before the latest); {DEFAULT_PRESET} when absent"),
        LIMIT, INCLUDE_RAW,
    ), rows="entries", response=CHART_RESPONSES, summary="A named view of the latest week (or the week one year earlier)"),
    Route("/charts/{chart_slug}/weeks-ago/{weeks_ago}", weeks_ago, (
        CHART, Param("weeks_ago", "path", kind="int", ge=0, description="Chart weeks back from the latest (0 = latest)"),
        LIMIT, INCLUDE_RAW,
    ), rows="entries", response=CHART_RESPONSES, summary="The chart N weeks before the latest"),
    with_neighbours(NAME, Route("/charts/{chart_slug}/{chart_date}", dated, (
        CHART, Param("chart_date", "path", kind="date",
                     description="Any day (YYYY-MM-DD): the week containing it is served, named by its chart date"),
        LIMIT, INCLUDE_RAW,
    ), rows="entries", response=CHART_RESPONSES, summary="The chart of the week containing a day"), "chart_date"),
    Route("/search", search, (
        Param("q", required=True, min_length=1, check=search_term,
              description="Text in a title or artist; case, accents and punctuation are ignored"),
        Param("chart_slug", check=chart_slug, description="Only this chart; every chart when absent"),
        Param("limit", kind="int", default=50, ge=1, le=500, description="Rows to return"),
    ), rows="hits", response=SearchResponse,
       summary="Entries whose title or artist contains q in every week held, newest week first"),
)
