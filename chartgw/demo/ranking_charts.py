"""/ranking-charts demo data: consecutive weeks of every configured Billboard chart from rendered sample pages."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

from chartgw.api.group import crawl_group
from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import Reply, replay_upstreams, request_key
from chartgw.demo.samples import billboard as samples
from chartgw.groups.ranking_charts import GROUP, backfill
from chartgw.groups.ranking_charts.charts import CHARTS_SETTING, newest_published, weeks_back, year_before
from chartgw.upstreams import billboard

DEMO_WEEKS = 8
"""Consecutive weeks of every configured chart in the demo data (plus the week one year before the latest)."""


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


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """Every configured chart: a backfill of the week one year before the latest, a backfill of the last
    `DEMO_WEEKS` weeks, then the latest crawl (which finds the latest week already held and stores nothing new)."""
    latest_week = newest_published(now.date())
    first = weeks_back(latest_week, DEMO_WEEKS - 1)
    year_ago = year_before(latest_week)
    outcomes: list[Outcome] = []
    slugs = settings.get(CHARTS_SETTING)
    with replay_upstreams({billboard.UPSTREAM: demo_replies(slugs, latest_week, DEMO_WEEKS)}) as servers:
        served = servers.over(settings)
        for slug in slugs:
            outcomes += await backfill(slug, year_ago, year_ago, settings=served, now=fixed(now - timedelta(hours=2)))
            outcomes += await backfill(slug, first, latest_week, settings=served, now=fixed(now - timedelta(hours=1)))
        outcomes += await crawl_group(GROUP, {}, settings=served, now=fixed(now))
    return outcomes
