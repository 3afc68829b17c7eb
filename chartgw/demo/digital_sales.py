"""/digital-sales demo data: two pulls of every combo x configured country from sample iTunes RSS feeds."""

from __future__ import annotations

from datetime import datetime, timedelta

from chartgw.api.group import crawl_group
from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import replay_upstreams
from chartgw.demo.samples import digital_sales as samples
from chartgw.groups.digital_sales import COMBOS, COUNTRIES_SETTING, FEED_LIMIT_SETTING, GROUP
from chartgw.upstreams import itunes


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """Two pulls of every combo x configured country: one a cadence ago (history for /snapshots), one now."""
    earlier = now - timedelta(hours=3)
    limit, configured = settings.get(FEED_LIMIT_SETTING), settings.get(COUNTRIES_SETTING)
    with replay_upstreams({itunes.UPSTREAM: samples.all_replies(COMBOS, configured, limit, earlier, 0)}) as servers:
        served = servers.over(settings)
        outcomes = await crawl_group(GROUP, {}, settings=served, now=fixed(earlier))
        servers[itunes.UPSTREAM].replies.update(samples.all_replies(COMBOS, configured, limit, now, 1))
        outcomes += await crawl_group(GROUP, {}, settings=served, now=fixed(now))
    return outcomes
