"""/retail-digital demo data: five daily crawls of every configured source from sample Amazon pages."""

from __future__ import annotations

from datetime import datetime

from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import ReplayKey, Reply
from chartgw.demo.retail import seed_days
from chartgw.demo.samples import amazon as samples
from chartgw.groups import retail
from chartgw.groups.retail_digital import GROUP, GROUP_KIND, configured
from chartgw.upstreams import amazon


def replies(variant: int, settings: Settings) -> dict[str, dict[ReplayKey, Reply]]:
    tables: dict[str, dict[ReplayKey, Reply]] = {}
    for market, source in configured(settings):
        table = tables.setdefault(amazon.MARKETPLACES[market].upstream, {})
        if source == retail.LANDING:
            table.update(samples.landing_replies(market, variant))
        else:
            table.update(samples.grid_replies(market, GROUP_KIND, source, variant))
    return tables


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """Five daily crawls of every configured source, the last at `now`."""
    return await seed_days(GROUP, replies, now, settings)
