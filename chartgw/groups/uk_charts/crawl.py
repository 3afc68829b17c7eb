"""/uk-charts crawls: one target per chart (its latest published week), the weeks held, and fetching one
week (what the backfill repeats).
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable
from datetime import date, datetime, timedelta
from functools import partial
from typing import Any

import msgspec

from chartgw.core.settings import Settings
from chartgw.core.text import compact
from chartgw.crawl.runner import (
    CrawlContext,
    CrawlError,
    CrawlTarget,
    Fetched,
    Fetcher,
    Outcome,
    commit_built,
    public_url,
    request_url,
)
from chartgw.groups.uk_charts.charts import CHARTS_SETTING, TARGET, credited_artists
from chartgw.groups.uk_charts.storage import WEEKS
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry
from chartgw.store.records import stored_entry
from chartgw.upstreams import UpstreamFormatError, officialcharts
from chartgw.upstreams.officialcharts import (
    UkChartEntry,
    UkChartWeek,
)

# --- stored weeks ---------------------------------------------------------------------------------

class WeekMeta(msgspec.Struct, kw_only=True):
    """What a snapshot keeps about its page beside the rows (the snapshot's `meta`)."""

    week_start: str
    week_end: str
    title: str | None
    layout: str
    site_previous_week_start: str | None
    """The week the page's own "previous" arrow points at (null at the first week of the site's archive)."""
    site_next_week_start: str | None
    requested_week: str | None
    """The Friday asked for (backfills); null for the latest-week page."""


_encode_meta = msgspec.json.Encoder().encode
_decode_meta = msgspec.json.Decoder(WeekMeta).decode


def week_end_of(chart_date: str, meta: bytes | None) -> str:
    """The last day of a stored week: as its page printed it, else the start plus six days."""
    if meta:
        try:
            return _decode_meta(meta).week_end
        except msgspec.DecodeError:
            pass
    return (date.fromisoformat(chart_date) + timedelta(days=6)).isoformat()


def keyable(name: str) -> str:
    """`name` as its keys are made: itself, or for a name of symbols only (Ed Sheeran's album "=", the band "!!!")
    the symbols' Unicode names ("EQUALS SIGN"), so the row has title and artist keys and stays searchable."""
    if compact(name):
        return name
    return " ".join(unicodedata.name(ch, "") for ch in name if not ch.isspace()).strip() or name


def stored(entry: UkChartEntry, position: int) -> StoredEntry:
    """The store row: its rank column is the row's position (printed ranks tie on old charts: 7, 7, 8); the record
    keeps the printed rank."""
    return stored_entry(entry, rank=position, title=keyable(entry.title),
                        artists=[keyable(name) for name in credited_artists(entry.artist)], item_id=None)


def _build(key: str, requested: date | None, seen: list[UkChartWeek] | None, fetched: list[Fetched],
           ctx: CrawlContext) -> list[NewSnapshot]:
    """The page as one snapshot of `key` dated by the week the page prints; nothing when that week is held with the
    same rows. The latest-week page must have the chart's full size; `seen` gets the parsed page (backfills)."""
    answer = fetched[0]
    chart = officialcharts.parse(key, answer.body)
    if seen is not None:
        seen.append(chart)
    if requested is None:
        officialcharts.require_size(chart, key)
    entries = [stored(entry, position) for position, entry in enumerate(chart.entries, start=1)]
    held = ctx.store.held(key, chart.week_start)
    if held is not None and ctx.store.records(held.id) == [e.record for e in entries]:
        return []
    source = answer.url
    if requested is not None and requested.isoformat() != chart.week_start:
        source += f" (asked for the week of {requested.isoformat()}; the page is the week of {chart.week_start})"
    meta = WeekMeta(week_start=chart.week_start, week_end=chart.week_end, title=chart.title, layout=chart.layout,
                    site_previous_week_start=chart.previous_week_start, site_next_week_start=chart.next_week_start,
                    requested_week=requested.isoformat() if requested else None)
    return [NewSnapshot(target=TARGET.make(key), chart_date=chart.week_start, chart_hour=None, fetched_at=ctx.now,
                        source=source, entries=entries, raw=answer.body if requested is None else None,
                        raw_type="text/html", meta=_encode_meta(meta))]


def _target(key: str) -> CrawlTarget:
    return CrawlTarget(TARGET.make(key), tuple(officialcharts.requests_for(key)), partial(_build, key, None, None),
                       refusal=officialcharts.refusal)


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    """The latest week of every configured chart (`CHARTGW_UK_CHARTS`, in the order given; a bad key raises
    SettingError: a crawl exit 1), or of the one chart asked for (`--chart`, any known key)."""
    chart = selection.get("chart")
    return [_target(key) for key in ((chart,) if chart else settings.get(CHARTS_SETTING))]


# --- backfill -------------------------------------------------------------------------------------

def held_days(store: SnapshotWriter, key: str) -> set[date]:
    """Every day covered by a held week of `key`."""
    days: set[date] = set()
    for chart_date, meta in store.rows(WEEKS, (key,)):
        start, end = date.fromisoformat(chart_date), date.fromisoformat(week_end_of(chart_date, meta))
        days.update(start + timedelta(days=n) for n in range((end - start).days + 1))
    return days


async def fetch_week(fetcher: Fetcher, store: SnapshotWriter, key: str, week: date, started: datetime,
                      seen: list[UkChartWeek]) -> Outcome:
    """One backfilled week: fetched, parsed, checked and committed as a crawl commits it (crawl key `key@week`)."""
    (request,) = officialcharts.requests_for(key, week)
    crawl_key, clock = f"{TARGET.make(key)}@{week.isoformat()}", time.monotonic()
    url = public_url(request_url(request, fetcher.settings), request.upstream)
    http_status: int | None = None
    try:
        answer = await fetcher.fetch(request, officialcharts.refusal)
        http_status = answer.status
        return commit_built(store, crawl_key, lambda ctx: _build(key, week, seen, [answer], ctx), started, clock, None,
                            url, http_status)
    except (CrawlError, UpstreamFormatError, TimeoutError) as exc:
        if isinstance(exc, CrawlError) and exc.http_status is not None:
            http_status = exc.http_status
        message = str(exc) or f"no answer within {fetcher.policy.target_deadline_seconds:.0f}s"
        duration = int((time.monotonic() - clock) * 1000)
        store.log_failure(FetchLogRow(crawl_key, started, duration, "failed", http_status, None, url, message))
        return Outcome(crawl_key, "failed", None, None, http_status, duration, message)


Progress = Callable[[date, Outcome | None, int, int], Any]
"""Called after each week: (week, its outcome or None when held, weeks fetched so far, weeks skipped so far)."""
