"""/ranking-charts crawls: one target per chart and week, what is held already, the backfill's weeks and
progress bar, and the billboard.py dump import.
"""

from __future__ import annotations

from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import Any

from chartgw.core.settings import Settings
from chartgw.core.text import split_artists
from chartgw.crawl.context import Context
from chartgw.crawl.runner import CrawlContext, CrawlTarget, Fetched, Outcome, import_builds
from chartgw.groups.ranking_charts.charts import CHARTS_SETTING, FEATURING, NAME, required_size
from chartgw.store import NewSnapshot, SnapshotWriter, StoredEntry, group_db_path
from chartgw.store.records import stored_entry
from chartgw.upstreams import billboard
from chartgw.upstreams.billboard import (
    CHARTS_BY_SLUG,
    DEFAULT_SLUGS,
    RankingEntryWithRaw,
    chart_date_for,
    previous_chart_date,
)

# --- crawl ----------------------------------------------------------------------------------------------------


def credited_artists(artist: str) -> list[str]:
    """Every artist of a Billboard credit: "A Featuring B & C" is A, B and C."""
    return [name for part in FEATURING.split(artist) for name in split_artists(part)] or [artist]


def stored(entry: RankingEntryWithRaw) -> StoredEntry:
    """The entry with its raw page values; artist charts have no title, so the artist names the title key."""
    return stored_entry(entry, rank=entry.rank, title=entry.title or entry.artist, artists=credited_artists(entry.artist),
                        item_id=None)


def _held_records(store: SnapshotWriter, slug: str, chart_date: str) -> list[bytes]:
    held = store.held(slug, chart_date)
    return store.records(held.id) if held is not None else []


def held_dates(slug: str, settings: Settings) -> set[str]:
    """The chart dates of `slug` already stored (what a backfill skips)."""
    with SnapshotWriter(group_db_path(NAME, settings)) as store:
        return set(store.dates(slug))


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


def week_target(slug: str, week: date | None = None) -> CrawlTarget:
    key = slug if week is None else f"{slug}@{week.isoformat()}"
    return CrawlTarget(key, tuple(billboard.requests_for(slug, week)), partial(_build, slug, week), None,
                       billboard.refusal)


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    """The latest week of the selected chart, or of every configured chart."""
    chart = selection.get("chart")
    return [week_target(slug) for slug in ([chart] if chart else settings.get(CHARTS_SETTING))]


def backfill_weeks(slug: str, since: date, until: date, held: set[str]) -> list[date]:
    """The chart dates from the week of `until` back to the week of `since`, newest first, without those held."""
    weeks = []
    day, first = chart_date_for(until), chart_date_for(since)
    while day >= first:
        if day.isoformat() not in held:
            weeks.append(day)
        day = previous_chart_date(day)
    return weeks


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
    return import_builds(NAME, [(f"{slug}@{week.chart_date}", build)], source, now=ctx.clock, options=options,
                         settings=ctx.settings)
