"""/retail-physical demo data: five daily crawls of every configured category from sample Amazon pages."""

from __future__ import annotations

from datetime import datetime

from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import ReplayKey, Reply
from chartgw.demo.retail import seed_days
from chartgw.demo.samples import amazon as samples
from chartgw.groups.retail_physical import GROUP, GROUP_KIND, configured
from chartgw.upstreams import amazon


def replies(variant: int, settings: Settings) -> dict[str, dict[ReplayKey, Reply]]:
    tables: dict[str, dict[ReplayKey, Reply]] = {}
    for market, slug in configured(settings):
        table = tables.setdefault(amazon.MARKETPLACES[market].upstream, {})
        table.update(samples.grid_replies(market, GROUP_KIND, slug, variant))
    return tables


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """Five daily crawls of every configured category, the last at `now`."""
    return await seed_days(GROUP, replies, now, settings)
