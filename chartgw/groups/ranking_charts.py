"""/ranking-charts: Billboard's weekly charts (billboard.com), every week kept, browsable through their history.

A chart is one Billboard chart page by its URL slug (`hot-100`, `billboard-200`, `artist-100`, ...); the configured
charts are `CHARTGW_RANKING_CHARTS`. The charts are published on Tuesdays and dated the Saturday that ends their
chart week (before 1962 the Hot 100 was dated Mondays); a week is stored under the date its page prints, never the
date asked (the site answers future or missing weeks with another week). Weekly snapshots are kept forever: the
history is what users ask for ("the chart of the week of my birthday", "one year ago", the previous and next week).

`chartgw crawl ranking-charts [--chart SLUG]` reads the latest week of every configured chart (or one);
`chartgw backfill ranking-charts --chart hot-100 --since 1958-08-04` walks back week by week, one request at a time
with a pause between them (`CHARTGW_RANKING_CHARTS_BACKFILL_DELAY_SECONDS`), fetching only the weeks not held, so
running it again after an interruption resumes where it stopped; `chartgw import ranking-charts FILE.json` loads a
week from a billboard.py dump. A page with no rows or fewer rows than the chart
has (from the week it reached today's size) is a failed fetch that keeps the last good snapshot.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import httpx
import msgspec

from chartgw import config
from chartgw.clock import Clock, fixed, utc_now
from chartgw.context import Context
from chartgw.crawl import CrawlContext, CrawlTarget, Fetched, Outcome, RetryPolicy, import_builds, run_targets
from chartgw.endpoints import ApiError, Call, Route, not_found
from chartgw.group import CommandArg, EntryMapping, Group, GroupCommand, Schedule, crawl_group, retention
from chartgw.params import Param, accepts, search_term
from chartgw.records import stored_entry
from chartgw.replay import Reply, replay_upstreams, request_key
from chartgw.responses import SnapshotMeta, health_route, snapshot_meta
from chartgw.samples import billboard as samples
from chartgw.store import NewSnapshot, SnapshotReader, SnapshotRow, SnapshotWriter, StoredEntry, glob_escape, group_db_path
from chartgw.text import compact, split_artists
from chartgw.upstreams import billboard
from chartgw.upstreams.billboard import (
    CHARTS_BY_SLUG,
    DEFAULT_SLUGS,
    RankingEntry,
    RankingEntryWithRaw,
    chart_date_for,
    previous_chart_date,
)

NAME = "ranking-charts"
WEEK_SECONDS = 7 * 86400
PRESETS = ("top-10", "top-40", "debuts", "re-entries", "gainers", "year-ago")
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_FEATURING = re.compile(r"\s+(?:featuring|feat\.|ft\.)\s+", re.IGNORECASE)
DEMO_WEEKS = 8
"""Consecutive weeks of every configured chart in the demo data (plus the week one year before the latest)."""


# --- settings -------------------------------------------------------------------------------------------------


CHARTS_SETTING = config.Setting("RANKING_CHARTS", ",".join(DEFAULT_SLUGS),
                                "Billboard charts /ranking-charts crawls and lists (slugs of billboard.com/charts/...)",
                                config.subset(DEFAULT_SLUGS, "chart slug"))
BACKFILL_DELAY_SETTING = config.Setting("RANKING_CHARTS_BACKFILL_DELAY_SECONDS", "3",
                                        "pause between two weeks fetched by `chartgw backfill ranking-charts` "
                                        "(politeness; up to 50% jitter added)", config.seconds)


def configured() -> tuple[str, ...]:
    return config.get(CHARTS_SETTING)


# --- chart weeks ----------------------------------------------------------------------------------------------

FULL_SIZE_SINCE: dict[str, date] = {
    "hot-100": date(1958, 8, 4),
    "billboard-200": date(1967, 5, 13),
    "artist-100": date(2014, 7, 19),
    "billboard-global-200": date(2020, 9, 19),
    "billboard-global-excl-us": date(2020, 9, 19),
    "hot-country-songs": date(2012, 10, 20),
    "hot-r-and-b-hip-hop-songs": date(2012, 10, 20),
    "hot-rock-alternative-songs": date(2020, 6, 20),
    "hot-latin-songs": date(2012, 10, 20),
    "dance-electronic-songs": date(2013, 1, 26),
    "hot-rap-songs": date(2012, 10, 20),
}
"""From which chart week (conservatively) each chart has had today's size; a page of that week or later with fewer
rows is a short page. Older weeks of several charts were legitimately shorter and are taken with any rows."""


def required_size(slug: str, chart_date: date) -> int:
    """Rows a page of `slug` dated `chart_date` must have at least (0 = any non-empty page)."""
    since = FULL_SIZE_SINCE.get(slug)
    size = billboard.expected_size(slug)
    return size if size is not None and since is not None and chart_date >= since else 0


def newest_published(today: date) -> date:
    """The chart date of the newest chart out on `today`: charts come out on Tuesdays, dated the Saturday after."""
    saturday = chart_date_for(today + timedelta(days=4))
    return saturday if saturday - timedelta(days=4) <= today else saturday - timedelta(days=7)


def year_before(chart_date: date) -> date:
    """The chart date of the same week one year earlier (the week containing the same day of the previous year)."""
    try:
        day = chart_date.replace(year=chart_date.year - 1)
    except ValueError:  # 29 February
        day = chart_date.replace(year=chart_date.year - 1, day=28)
    return chart_date_for(day)


def weeks_between(older: date, newer: date) -> int:
    """Chart weeks from the week of `older` to the week of `newer` (both chart dates)."""
    return (newer - older).days // 7


def weeks_back(latest: date, weeks: int) -> date:
    """The chart date `weeks` chart weeks before `latest` (exact across the 1961/1962 Monday-to-Saturday change)."""
    target = latest - timedelta(weeks=weeks)
    if target >= billboard.FIRST_SATURDAY_CHART:
        return target
    day = billboard.FIRST_SATURDAY_CHART
    for _ in range(weeks_between(billboard.FIRST_SATURDAY_CHART, latest), weeks):
        day = previous_chart_date(day)
    return day


# --- crawl ----------------------------------------------------------------------------------------------------


def credited_artists(artist: str) -> list[str]:
    """Every artist of a Billboard credit: "A Featuring B & C" is A, B and C."""
    return [name for part in _FEATURING.split(artist) for name in split_artists(part)] or [artist]


def stored(entry: RankingEntryWithRaw) -> StoredEntry:
    """The entry with its raw page values; artist charts have no title, so the artist names the title key."""
    return stored_entry(entry, rank=entry.rank, title=entry.title or entry.artist, artists=credited_artists(entry.artist),
                        item_id=None)


def _held_records(store: SnapshotWriter, slug: str, chart_date: str) -> list[bytes]:
    row = store.db.execute("SELECT max(id) FROM snapshots WHERE target = ? AND chart_date = ?",
                           (slug, chart_date)).fetchone()
    return store.records(row[0]) if row and row[0] is not None else []


def held_dates(slug: str) -> set[str]:
    """The chart dates of `slug` already stored (what a backfill skips)."""
    with SnapshotWriter(group_db_path(NAME)) as store:
        return {row[0] for row in store.db.execute("SELECT DISTINCT chart_date FROM snapshots WHERE target = ?", (slug,))}


def _build(slug: str, requested: date | None, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    """The page's week, stored under the page's own date; nothing new when that week is held with the same rows."""
    answer = fetched[0]
    week = billboard.parse(slug, answer.body)
    billboard.require_size(week, slug, required_size(slug, date.fromisoformat(week.chart_date)))
    entries = [stored(entry) for entry in billboard.with_raw(week)]
    if _held_records(ctx.store, slug, week.chart_date) == [entry.record for entry in entries]:
        return []
    source = f"GET {answer.url} ({week.layout} layout)"
    if requested is not None and requested.isoformat() != week.chart_date:
        source += f"; asked for the week of {requested.isoformat()}, the page is the week of {week.chart_date}"
    return [NewSnapshot(target=slug, chart_date=week.chart_date, chart_hour=None, fetched_at=ctx.now, source=source,
                        entries=entries)]


def _target(slug: str, week: date | None = None) -> CrawlTarget:
    key = slug if week is None else f"{slug}@{week.isoformat()}"
    return CrawlTarget(key, tuple(billboard.requests_for(slug, week)), partial(_build, slug, week), None,
                       billboard.refusal)


def targets(selection: dict[str, str | None], now: datetime) -> list[CrawlTarget]:
    """The latest week of the selected chart, or of every configured chart."""
    chart = selection.get("chart")
    return [_target(slug) for slug in ([chart] if chart else configured())]


class ProgressBar:
    """One line redrawn on a terminal: weeks done of the total, failures, the week just fetched."""

    def __init__(self, slug: str, total: int, stream: TextIO, width: int = 30) -> None:
        self.slug, self.total, self.stream, self.width = slug, total, stream, width
        self.done = self.failed = 0

    def __call__(self, outcome: Outcome) -> None:
        self.done += 1
        self.failed += outcome.status != "ok"
        filled = self.width * self.done // max(self.total, 1)
        week = outcome.target.partition("@")[2]
        self.stream.write(f"\r{self.slug} [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} weeks"
                          f", {self.failed} failed, {week}")
        if self.done == self.total:
            self.stream.write("\n")
        self.stream.flush()


def backfill_weeks(slug: str, since: date, until: date, held: set[str]) -> list[date]:
    """The chart dates from the week of `until` back to the week of `since`, newest first, without those held."""
    weeks = []
    day, first = chart_date_for(until), chart_date_for(since)
    while day >= first:
        if day.isoformat() not in held:
            weeks.append(day)
        day = previous_chart_date(day)
    return weeks


async def backfill(slug: str, since: date, until: date | None = None, *, now: Clock = utc_now,
                   transport: httpx.AsyncBaseTransport | None = None, progress_to: TextIO | None = None,
                   ) -> list[Outcome]:
    """Fetch every week of `slug` from the week of `until` (default: the newest published) back to the week of
    `since` that is not held yet, one request at a time with the backfill delay, as one recorded "backfill" run.
    Each week commits on its own, so an interrupted backfill keeps what it fetched and the next one resumes."""
    if slug not in CHARTS_BY_SLUG:
        raise ValueError(f"unknown chart {slug!r}; known: {', '.join(DEFAULT_SLUGS)}")
    newest = newest_published(now().date())
    last = chart_date_for(until) if until is not None else newest
    if last > newest:
        raise ValueError(f"the week of {last} is not published yet (the newest chart is dated {newest})")
    if chart_date_for(since) > last:
        raise ValueError(f"--since {since} is after the week of {last}")
    held = held_dates(slug)
    weeks = backfill_weeks(slug, since, last, held)
    if not weeks:
        return []
    delay = config.get(BACKFILL_DELAY_SETTING) if config.get(config.CRAWL_DELAY_SECONDS) else 0.0
    policy = RetryPolicy(per_upstream=1, delay_seconds=delay, jitter=0.5)
    options = {"chart": slug, "since": chart_date_for(since).isoformat(), "until": last.isoformat(),
               "weeks": len(weeks), "held_skipped": len(backfill_weeks(slug, since, last, set())) - len(weeks)}
    progress = ProgressBar(slug, len(weeks), progress_to) if progress_to is not None else None
    return await run_targets(NAME, [_target(slug, week) for week in weeks], retention=retention(GROUP), now=now,
                             transport=transport, policy=policy, progress=progress, run_kind="backfill",
                             run_options=options)


def iso_date(text: str) -> date:
    """A YYYY-MM-DD command-line date."""
    return date.fromisoformat(text)


def _backfill_command(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    """`chartgw backfill ranking-charts --chart SLUG --since DATE [--until DATE]`: a progress bar on a terminal only."""
    stream = sys.stderr if ctx.interactive else None
    try:
        outcomes = asyncio.run(backfill(values["chart"], values["since"], values.get("until"), now=ctx.clock,
                                        transport=ctx.transport, progress_to=stream))
        if not outcomes and stream is not None:
            print(f"chartgw backfill: every week of {values['chart']} in that range is held already", file=stream)
        return outcomes
    except KeyboardInterrupt:
        print("\nchartgw backfill: interrupted; the weeks fetched are stored, run it again to resume", file=sys.stderr)
        raise SystemExit(130) from None


def import_dump(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    """`chartgw import ranking-charts FILE.json [--chart SLUG]`: one week from a billboard.py `ChartData.json()` dump,
    committed as a crawl commits (checks, fetch log, a recorded "import" run), under the dump's own date.

    The file is parsed and checked before anything is written, so a file that is not a dump of a known chart, or
    is short for its week, changes nothing (ValueError: CLI exit 2).
    """
    path = Path(values["file"])
    given = values.get("chart")
    week = billboard.parse_billboard_py_json(path.read_bytes(), given)
    slug = given or week.slug
    if not slug:
        raise ValueError(f"{path.name} does not name its chart; pass --chart")
    if slug not in CHARTS_BY_SLUG:
        raise ValueError(f"{path.name} is the {slug!r} chart, which is not served here (charts: {', '.join(DEFAULT_SLUGS)})")
    billboard.require_size(week, slug, required_size(slug, date.fromisoformat(week.chart_date)))
    entries = [stored(entry) for entry in billboard.with_raw(week)]
    source = f"billboard.py dump {path.name} ({week.layout} schema)"

    def build(ctx: CrawlContext) -> list[NewSnapshot]:
        if _held_records(ctx.store, slug, week.chart_date) == [entry.record for entry in entries]:
            return []
        return [NewSnapshot(target=slug, chart_date=week.chart_date, chart_hour=None, fetched_at=ctx.now, source=source,
                            entries=entries)]

    options = {"file": path.name, "chart": slug, "chart_date": week.chart_date, "layout": week.layout}
    return import_builds(NAME, [(f"{slug}@{week.chart_date}", build)], source, now=ctx.clock, options=options)


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
    where, params = (" WHERE target = ?", [slug]) if slug else ("", [])
    rows = await reader.fetchall("SELECT target, min(chart_date), max(chart_date), count(DISTINCT chart_date)"
                                 f" FROM snapshots{where} GROUP BY target", params)
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


async def charts(call: Call) -> ChartsResponse:
    wanted = configured()
    held = await _coverage(call.data.reader)
    listed = []
    for slug in [*wanted, *sorted(s for s in held if s not in wanted)]:
        first, last, weeks = held.get(slug, (None, None, 0))
        listed.append(ChartInfo(slug, _kind(slug), _title(slug), billboard.expected_size(slug), slug in wanted, first,
                                last, weeks))
    return ChartsResponse(len(listed), listed)


async def _chart_or_404(call: Call) -> tuple[str, tuple[str, str, int]]:
    """The chart of the path and its coverage; a 404 naming the charts when it is neither configured nor held."""
    slug = call.params["chart_slug"]
    coverage = (await _coverage(call.data.reader, slug)).get(slug)
    if coverage is None:
        if slug in configured():
            raise not_found(f"No week of {slug} is held yet (its first crawl has not run)")
        raise not_found(f"No chart '{slug}'; the charts are listed at /{NAME}/charts (configured: "
                        f"{', '.join(configured())})")
    return slug, coverage


def _not_held(slug: str, coverage: tuple[str, str, int], why: str) -> ApiError:
    first, last, weeks = coverage
    return not_found(f"{why}; {slug} holds {weeks} week{'s' * (weeks != 1)} from {first} to {last} "
                     f"(see /{NAME}/charts/{slug}/dates)")


async def _neighbours(reader: SnapshotReader, slug: str, chart_date: str) -> tuple[str | None, str | None]:
    rows = await reader.fetchall(
        "SELECT (SELECT max(chart_date) FROM snapshots WHERE target = ?1 AND chart_date < ?2),"
        " (SELECT min(chart_date) FROM snapshots WHERE target = ?1 AND chart_date > ?2)", (slug, chart_date))
    return (rows[0][0], rows[0][1]) if rows else (None, None)


def _plain(records: Sequence[bytes]) -> bytes:
    """Stored records (entries with their raw values) as a JSON array of plain entries."""
    return _encode(_decode_entries(b"[" + b",".join(records) + b"]"))


async def _chart_response(call: Call, slug: str, coverage: tuple[str, str, int], row: SnapshotRow, *,
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
    previous, following = await _neighbours(reader, slug, row.chart_date)
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


async def latest(call: Call) -> ChartResponse | ChartResponseWithRaw:
    slug, coverage = await _chart_or_404(call)
    row = await call.data.reader.latest(slug)
    assert row is not None  # the chart has coverage, so a snapshot
    return await _chart_response(call, slug, coverage, row)


async def dated(call: Call) -> ChartResponse | ChartResponseWithRaw:
    slug, coverage = await _chart_or_404(call)
    asked = date.fromisoformat(call.params["chart_date"])
    week = chart_date_for(asked)
    row = await _week(call, slug, coverage, week, f"The week of {asked} (chart date {week}) is not held")
    return await _chart_response(call, slug, coverage, row, requested=asked.isoformat())


async def weeks_ago(call: Call) -> ChartResponse | ChartResponseWithRaw:
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


async def preset(call: Call) -> ChartResponse | ChartResponseWithRaw:
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


async def snapshots(call: Call) -> SnapshotsResponse:
    slug, _ = await _chart_or_404(call)
    rows = await call.data.reader.fetchall(
        f"SELECT {SnapshotRow.COLUMNS} FROM snapshots WHERE target = ? ORDER BY chart_date DESC, id DESC LIMIT ?",
        (slug, call.params["limit"]))
    metas = [snapshot_meta(SnapshotRow(*row), WEEK_SECONDS, call.now) for row in rows]
    return SnapshotsResponse(slug, len(metas), metas)


async def dates(call: Call) -> DatesResponse:
    slug, (first, last, weeks) = await _chart_or_404(call)
    rows = await call.data.reader.fetchall(
        "SELECT DISTINCT chart_date FROM snapshots WHERE target = ? ORDER BY chart_date DESC LIMIT ?",
        (slug, call.params["limit"]))
    found = [row[0] for row in rows]
    return DatesResponse(slug, weeks, first, last, len(found), found)


async def search(call: Call) -> SearchResponse:
    q, slug, limit = call.params["q"], call.params["chart_slug"], call.params["limit"]
    reader = call.data.reader
    if slug is not None:
        await _chart_or_404(call)
    like = "%" + compact(q).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    scope = glob_escape(slug) if slug else "*"
    rows = await reader.fetchall(
        "SELECT s.target, s.chart_date, e.rank, e.record FROM entries e JOIN snapshots s ON s.id = e.snapshot_id"
        " WHERE s.id IN (SELECT max(id) FROM snapshots WHERE target GLOB ? GROUP BY target, chart_date)"
        " AND e.search_key LIKE ? ESCAPE '\\' ORDER BY s.chart_date DESC, e.rank, s.target LIMIT ?",
        (scope, like, limit))
    hits = [SearchHit(target, _title(target), chart_date, rank, _decode_entry(record))
            for target, chart_date, rank, record in rows]
    return SearchResponse(q, slug, len(hits), hits)


# --- the route table ------------------------------------------------------------------------------------------


@accepts(pattern=f"^{_SLUG.pattern}$")
def chart_slug(value: str) -> str:
    if not _SLUG.fullmatch(value):
        raise ValueError("must be a chart slug of lowercase letters a-z, digits 0-9 and '-' (see /ranking-charts/charts)")
    return value


CHART = Param("chart_slug", "path", check=chart_slug, description="Billboard chart slug as in /ranking-charts/charts "
                                                                 "(\"hot-100\", \"billboard-200\", \"artist-100\")")
LIMIT = Param("limit", kind="int", default=200, ge=1, le=200, description="Entries to return, from the first")
INCLUDE_RAW = Param("include_raw", kind="bool", default=False,
                    description="Add to each entry `raw`: what the page said, verbatim, before normalisation")
CHART_RESPONSES = (ChartResponse, ChartResponseWithRaw)


def _cadences() -> dict[str, int]:
    return {slug: WEEK_SECONDS for slug in configured()}


ROUTES: tuple[Route, ...] = (
    health_route(NAME, _cadences, "The latest week of every configured chart, with its age and a stale flag "
                                  "(stale after two weeks)"),
    Route("/charts", charts, errors=(), response=ChartsResponse,
          summary="The configured charts (and any held from before): kind, title, first and last week held, weeks held"),
    Route("/charts/{chart_slug}/snapshots", snapshots, (
        CHART, Param("limit", kind="int", default=52, ge=1, le=5000, description="Snapshots to return"),
    ), response=SnapshotsResponse, summary="Stored snapshots of one chart, newest chart date first"),
    Route("/charts/{chart_slug}/dates", dates, (
        CHART, Param("limit", kind="int", default=5000, ge=1, le=5000, description="Dates to return"),
    ), response=DatesResponse, summary="The chart dates held of one chart, newest first"),
    Route("/charts/{chart_slug}/latest", latest, (CHART, LIMIT, INCLUDE_RAW), response=CHART_RESPONSES,
          summary="The latest week of one chart"),
    Route("/charts/{chart_slug}/preset", preset, (
        CHART, Param("preset", kind="choice", choices=PRESETS, required=True,
                     description="top-10, top-40, debuts (new this week), re-entries, gainers (biggest climbers "
                                 "by last week's position, most places first) or year-ago (the same week one year "
                                 "before the latest)"),
        LIMIT, INCLUDE_RAW,
    ), response=CHART_RESPONSES, summary="A named view of the latest week (or the week one year earlier)"),
    Route("/charts/{chart_slug}/weeks-ago/{weeks_ago}", weeks_ago, (
        CHART, Param("weeks_ago", "path", kind="int", ge=0, description="Chart weeks back from the latest (0 = latest)"),
        LIMIT, INCLUDE_RAW,
    ), response=CHART_RESPONSES, summary="The chart N weeks before the latest"),
    Route("/charts/{chart_slug}/{chart_date}", dated, (
        CHART, Param("chart_date", "path", kind="date",
                     description="Any day (YYYY-MM-DD): the week containing it is served, named by its chart date"),
        LIMIT, INCLUDE_RAW,
    ), response=CHART_RESPONSES, summary="The chart of the week containing a day"),
    Route("/search", search, (
        Param("q", required=True, min_length=1, check=search_term,
              description="Text in a title or artist; case, accents and punctuation are ignored"),
        Param("chart_slug", check=chart_slug, description="Only this chart; every chart when absent"),
        Param("limit", kind="int", default=50, ge=1, le=500, description="Rows to return"),
    ), response=SearchResponse, summary="Entries whose title or artist contains q in every week held, newest week first"),
)


def market_of(target: str, record: dict[str, Any]) -> str:
    """The Billboard Global 200 and Global Excl. US are global charts; every other chart is the US's."""
    return "global" if target.startswith("billboard-global") else "us"


# --- demo -----------------------------------------------------------------------------------------------------


def demo_replies(slugs: Sequence[str], latest_week: date, weeks: int) -> dict[Any, Reply]:
    """`weeks` consecutive weeks up to `latest_week` of every chart in the current layout (the latest also on the
    chart's undated URL), and the week one year before the latest in the 2021-2024 layout."""
    first = weeks_back(latest_week, weeks - 1)
    year_ago = year_before(latest_week)
    replies: dict[Any, Reply] = {}
    for slug in slugs:
        replies.update(samples.week_replies(slug, first, weeks, layout="post-2024"))
        (request,) = billboard.requests_for(slug, year_ago)
        replies[request_key(request)] = Reply(samples.render_page(slug, year_ago, weeks + 1), 200, samples.CONTENT_TYPE)
    return replies


async def seed(now: datetime) -> list[Outcome]:
    """Every configured chart: a backfill of the week one year before the latest, a backfill of the last
    `DEMO_WEEKS` weeks, then the latest crawl (which finds the latest week already held and stores nothing new)."""
    latest_week = newest_published(now.date())
    first = weeks_back(latest_week, DEMO_WEEKS - 1)
    year_ago = year_before(latest_week)
    outcomes: list[Outcome] = []
    with replay_upstreams({billboard.UPSTREAM: demo_replies(configured(), latest_week, DEMO_WEEKS)}):
        for slug in configured():
            outcomes += await backfill(slug, year_ago, year_ago, now=fixed(now - timedelta(hours=2)))
            outcomes += await backfill(slug, first, latest_week, now=fixed(now - timedelta(hours=1)))
        outcomes += await crawl_group(GROUP, {}, now=fixed(now))
    return outcomes


GROUP = Group(
    name=NAME,
    title="Billboard weekly charts",
    description="Billboard's weekly charts (Hot 100, Billboard 200, Artist 100, Global 200, genre charts) by chart "
                "slug, every week kept: latest, any week by date, weeks ago, previous and next weeks, presets and "
                "search. " + " ".join(__doc__.split("\n\n")[1:]).replace("\n", " "),
    routes=ROUTES,
    upstreams=(billboard.UPSTREAM,),
    targets=targets,
    crawl_options=(("chart", DEFAULT_SLUGS),),
    schedules=(
        Schedule("0 14 * * 2", (), "America/New_York",
                 "Billboard charts are published on Tuesdays (dated the Saturday after): every configured chart"),
        Schedule("0 14 * * 4", (), "America/New_York",
                 "retry on Thursdays for holiday weeks published late (an unchanged week stores nothing)"),
    ),
    per_upstream=1,
    commands=(GroupCommand("backfill", "fetch the past weeks of one Billboard chart not held yet (resumable)", (
        CommandArg("chart", "chart slug", choices=DEFAULT_SLUGS, required=True),
        CommandArg("since", "the oldest day to reach, YYYY-MM-DD (its week is fetched)", type=iso_date, required=True),
        CommandArg("until", "the newest day to start from, YYYY-MM-DD; default: the newest published week",
                   type=iso_date),
    ), _backfill_command), GroupCommand("import", "load one week from a billboard.py ChartData.json() dump", (
        CommandArg("file", "the JSON dump (billboard.py v7 or 2016 schema)", positional=True),
        CommandArg("chart", "chart slug; default: the dump's `name`", choices=DEFAULT_SLUGS),
    ), import_dump)),
    settings=(CHARTS_SETTING, BACKFILL_DELAY_SETTING),
    seeder=seed,
    entries=EntryMapping(market=market_of, artist=("artist",), artists=None, title=("title",)),
)
