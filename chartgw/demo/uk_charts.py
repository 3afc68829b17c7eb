"""/uk-charts demo data: six consecutive weeks of every configured chart from rendered sample pages."""

from __future__ import annotations

from datetime import datetime

from chartgw.api.group import crawl_group
from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import replay_upstreams
from chartgw.demo.samples import officialcharts as samples
from chartgw.groups.uk_charts import GROUP, backfill
from chartgw.groups.uk_charts.charts import CHARTS_SETTING, ONE_WEEK, latest_published_week
from chartgw.upstreams import officialcharts

DEMO_WEEKS = 6


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """Six consecutive weeks of every configured chart: a crawl of the latest published week at `now`, then a
    backfill of each chart's five weeks before it, all from rendered pages on a replay server."""
    keys = settings.get(CHARTS_SETTING)
    latest = latest_published_week(now)
    since = latest - ONE_WEEK * (DEMO_WEEKS - 1)
    outcomes: list[Outcome] = []
    with replay_upstreams({officialcharts.UPSTREAM: samples.all_replies(latest, DEMO_WEEKS, keys)}) as servers:
        served = servers.over(settings)
        outcomes += await crawl_group(GROUP, {}, settings=served, now=fixed(now))
        for key in keys:
            outcomes += await backfill(key, since, latest, settings=served, now=fixed(now))
    return outcomes
