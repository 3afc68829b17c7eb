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
import sys
from datetime import date
from typing import Any

import httpx

from chartgw.api.group import CommandArg, EntryMapping, Group, GroupCommand, Schedule, retention
from chartgw.core import config
from chartgw.core.clock import Clock, utc_now
from chartgw.core.settings import Settings
from chartgw.crawl.context import Context
from chartgw.crawl.runner import Outcome, RetryPolicy, run_targets
from chartgw.groups.ranking_charts.charts import BACKFILL_DELAY_SETTING, CHARTS, CHARTS_SETTING, NAME, newest_published
from chartgw.groups.ranking_charts.crawl import backfill_weeks, held_dates, import_dump, targets, week_target
from chartgw.groups.ranking_charts.routes import ROUTES
from chartgw.groups.ranking_charts.storage import STORAGE
from chartgw.store.records import PRINTED_FACTS
from chartgw.upstreams import billboard
from chartgw.upstreams.billboard import (
    CHARTS_BY_SLUG,
    DEFAULT_SLUGS,
    chart_date_for,
)


async def backfill(slug: str, since: date, until: date | None = None, *, settings: Settings, now: Clock = utc_now,
                   transport: httpx.AsyncBaseTransport | None = None) -> list[Outcome]:
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
    held = held_dates(slug, settings)
    weeks = backfill_weeks(slug, since, last, held)
    if not weeks:
        return []
    delay = settings.get(BACKFILL_DELAY_SETTING) if settings.get(config.CRAWL_DELAY_SECONDS) else 0.0
    policy = RetryPolicy.of(settings, per_upstream=1, delay_seconds=delay, jitter=0.5)
    options = {"chart": slug, "since": chart_date_for(since).isoformat(), "until": last.isoformat(),
               "weeks": len(weeks), "held_skipped": len(backfill_weeks(slug, since, last, set())) - len(weeks)}
    return await run_targets(NAME, [week_target(slug, week) for week in weeks], retention=retention(GROUP, settings),
                             now=now, transport=transport, policy=policy, run_kind="backfill", run_options=options,
                             settings=settings)


def iso_date(text: str) -> date:
    """A YYYY-MM-DD command-line date."""
    return date.fromisoformat(text)


def _backfill_command(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    """`chartgw backfill ranking-charts --chart SLUG --since DATE [--until DATE]` (the CLI shows its progress)."""
    try:
        outcomes = asyncio.run(backfill(values["chart"], values["since"], values.get("until"),
                                        settings=ctx.settings, now=ctx.clock, transport=ctx.transport))
        if not outcomes and ctx.interactive:
            print(f"chartgw backfill: every week of {values['chart']} in that range is held already", file=sys.stderr)
        return outcomes
    except KeyboardInterrupt:
        print("\nchartgw backfill: interrupted; the weeks fetched are stored, run it again to resume", file=sys.stderr)
        raise SystemExit(130) from None


def market_of(target: str) -> str:
    """The Billboard Global 200 and Global Excl. US are global charts; every other chart is the US's."""
    return "global" if target.startswith("billboard-global") else "us"


GROUP = Group(
    name=NAME,
    title="Billboard weekly charts",
    description="Billboard's weekly charts (Hot 100, Billboard 200, Artist 100, Global 200, genre charts) by chart "
                "slug, every week kept: latest, any week by date, weeks ago, previous and next weeks, presets and "
                "search. " + " ".join(__doc__.split("\n\n")[1:]).replace("\n", " "),
    routes=ROUTES,
    charts=CHARTS,
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
    entries=EntryMapping(market=market_of, artist=("artist",), artists=None, title=("title",), facts=PRINTED_FACTS),
    storage=STORAGE,
)
