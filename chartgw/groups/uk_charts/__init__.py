"""/uk-charts: the Official Charts Company's weekly UK charts (officialcharts.com), every week kept forever.

One snapshot target per chart key (`singles`, `albums`, `dance-singles`, ...; `CHARTGW_UK_CHARTS`), one snapshot per
chart week, dated by the week's first day as the page prints it (a UK chart week runs Friday to Thursday). A page
is always stored under the week it says it is, never the week that was asked for: the site answers a week it does
not have with another one. A crawl that finds a week already held with the same rows stores nothing new; a
corrected week is stored again and the newest copy serves.

`chartgw crawl uk-charts [--chart KEY]` fetches the latest week of every configured chart (or one); a current page
shorter than the chart's size fails and the last good snapshot keeps serving. `chartgw backfill uk-charts --chart
singles --since 1952-11-14` walks back week by week from the latest published week, skipping weeks already held, one
request at a time with a pause (`CHARTGW_UK_CHARTS_BACKFILL_DELAY_SECONDS`, default 3 s), and stops at the first
week of the site's archive, on a refusal or after three failures in a row. Run it again to resume: every fetched
week is committed on its own. Each backfill is recorded as a run of kind "backfill".

Entries keep the rank as printed (the 1952 chart has tied ranks); the store's rank column is the row's position.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import date, timedelta
from typing import Any

import httpx

from chartgw.api.group import CommandArg, EntryMapping, Group, GroupCommand, Schedule, retention
from chartgw.core import config
from chartgw.core import progress as steps
from chartgw.core.clock import Clock, utc_now
from chartgw.core.settings import Settings
from chartgw.crawl.context import Context
from chartgw.crawl.runner import (
    Fetcher,
    Outcome,
    RetryPolicy,
    record_run,
    tls,
)
from chartgw.groups.uk_charts.charts import (
    BACKFILL_DELAY_SETTING,
    CATALOG,
    CHARTS_SETTING,
    MAX_FAILURES_IN_A_ROW,
    NAME,
    ONE_WEEK,
    latest_published_week,
)
from chartgw.groups.uk_charts.crawl import Progress, fetch_week, held_days, targets
from chartgw.groups.uk_charts.routes import ROUTES
from chartgw.groups.uk_charts.storage import STORAGE
from chartgw.store import SnapshotWriter, group_db_path
from chartgw.store.records import PRINTED_FACTS
from chartgw.upstreams import officialcharts
from chartgw.upstreams.officialcharts import (
    DEFAULT_KEYS,
    FIRST_CHART_WEEK,
    UkChartWeek,
    week_start_for,
)


async def backfill(chart: str, since: date = FIRST_CHART_WEEK, until: date | None = None, *, settings: Settings,
                   now: Clock = utc_now,
                   transport: httpx.AsyncBaseTransport | None = None, progress: Progress | None = None) -> list[Outcome]:
    """Walk chart `chart` back from the week of `until` (at most and by default the latest published week) to the week of
    `since`, fetching every week not held, one page at a time with the backfill delay, as one recorded run.

    Stops early at the first week of the site's archive (the page has no "previous" week), when the site answers
    a later week than asked (nothing older exists), on a refusal, or after three failures in a row. An
    interrupted backfill keeps every week it committed and still records its run; run it again to resume.
    """
    officialcharts.check_key(chart)
    since = max(since, FIRST_CHART_WEEK)
    published = latest_published_week(now())
    newest = min(week_start_for(until), published) if until else published  # no future weeks
    oldest = week_start_for(since)
    if oldest > newest:
        raise ValueError(f"--since {since.isoformat()} is after the newest week to fill ({newest.isoformat()})")
    delay = settings.get(BACKFILL_DELAY_SETTING) if settings.get(config.CRAWL_DELAY_SECONDS) else 0.0
    policy = RetryPolicy.of(settings, per_upstream=1, delay_seconds=delay, jitter=0.2)
    outcomes: list[Outcome] = []
    options: dict[str, Any] = {"chart": chart, "since": oldest.isoformat(), "until": newest.isoformat(),
                               "delay_seconds": delay}
    started = now()
    skipped = 0
    steps.expect((newest - oldest).days // 7 + 1, "weeks")
    # Redirects are the Fetcher's to follow (same origin only), as in every crawl.
    async with httpx.AsyncClient(timeout=httpx.Timeout(20.0, connect=5.0), transport=transport,
                                 follow_redirects=False, verify=tls()) as client:
        fetcher = Fetcher(client, policy, settings)
        with SnapshotWriter(group_db_path(NAME, settings), retention=retention(GROUP, settings), now=now) as store:
            held = held_days(store, chart)
            stopped: str | None = None
            try:
                week, failures = newest, 0
                while week >= oldest:
                    if week in held:
                        skipped += 1
                        steps.advance()
                        if progress is not None:
                            progress(week, None, len(outcomes), skipped)
                        week -= ONE_WEEK
                        continue
                    seen: list[UkChartWeek] = []
                    outcome = await fetch_week(fetcher, store, chart, week, now(), seen)
                    outcomes.append(outcome)
                    steps.advance(failed=outcome.status != "ok")
                    if progress is not None:
                        progress(week, outcome, len(outcomes), skipped)
                    stopped, failures = _stop_reason(week, outcome, seen, failures)
                    if stopped:
                        break
                    if seen:
                        page = seen[0]
                        start, end = date.fromisoformat(page.week_start), date.fromisoformat(page.week_end)
                        held.update(start + timedelta(days=n) for n in range((end - start).days + 1))
                    week -= ONE_WEEK
            finally:
                options.update(fetched=len(outcomes), skipped_held=skipped, stopped=stopped)
                record_run(store, "backfill", started, now(), outcomes, options)
    return outcomes


def _stop_reason(week: date, outcome: Outcome, seen: list[UkChartWeek], failures: int) -> tuple[str | None, int]:
    """(why the walk stops here or None, failures in a row so far)."""
    if outcome.status != "ok":
        failures += 1
        if "not retried" in (outcome.error or ""):
            return f"refused at the week of {week.isoformat()}", failures
        if failures >= MAX_FAILURES_IN_A_ROW:
            return f"{failures} failures in a row (last at the week of {week.isoformat()})", failures
        return None, failures
    if seen:
        page = seen[0]
        if page.week_start > week.isoformat():
            return (f"asked for the week of {week.isoformat()}, the site answered the later week of {page.week_start}: "
                    "the archive has nothing older"), 0
        if page.previous_week_start is None:
            return f"the week of {page.week_start} is the first of the site's archive", 0
    return None, 0


def _date_arg(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {value!r} (use YYYY-MM-DD)") from None


def _backfill_command(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    """`chartgw backfill uk-charts --chart KEY [--since D] [--until D]` (the CLI shows its progress)."""
    return asyncio.run(backfill(values["chart"], values["since"] or FIRST_CHART_WEEK, values.get("until"),
                                settings=ctx.settings, now=ctx.clock, transport=ctx.transport))


GROUP = Group(
    name=NAME,
    title="Official Charts Company (UK charts)",
    description="The UK's official weekly charts from officialcharts.com: singles, albums and the genre and format "
                "charts (dance, independent, hip hop and R&B, rock and metal, compilations, vinyl, downloads, sales, "
                "streaming, physical, Scottish, soundtracks, record store), every chart week kept, found by any day "
                "of the week (Friday to Thursday). " + " ".join(__doc__.split("\n\n")[1:3]).replace("\n", " "),
    routes=ROUTES,
    charts=CATALOG,
    upstreams=(officialcharts.UPSTREAM,),
    targets=targets,
    crawl_options=(("chart", DEFAULT_KEYS),),
    schedules=(
        # The Official Chart is announced on Fridays at 17:45 UK time and the site shows the new week soon after;
        # the genre and format charts follow the same evening. Crawled in London time, so BST/GMT need no care.
        Schedule("45 19 * * 5", (), "Europe/London",
                 "UK charts: every configured chart's new week, Fridays 19:45 UK time (announced at 17:45)"),
        # A later retry for charts the site published late; a week already held with the same rows stores nothing.
        Schedule("30 9 * * 6", (), "Europe/London", "UK charts: retry Saturdays 09:30 UK time for late charts"),
    ),
    per_upstream=2,
    commands=(GroupCommand("backfill", "walk one chart back week by week, filling the weeks not held", (
        CommandArg("chart", "chart key", choices=DEFAULT_KEYS, default="singles"),
        CommandArg("since", "oldest week to fill, YYYY-MM-DD, any day of it (default 1952-11-14, the first chart)",
                   type=_date_arg, default=FIRST_CHART_WEEK),
        CommandArg("until", "newest week to fill, YYYY-MM-DD (default: the latest published week)", type=_date_arg),
    ), _backfill_command),),
    settings=(CHARTS_SETTING, BACKFILL_DELAY_SETTING),
    entries=EntryMapping(market="=gb", artist=("artist",), artists=None, title=("title",), facts=PRINTED_FACTS),
    storage=STORAGE,
)
