"""/retail-music demo data: five daily crawls of every configured marketplace's top songs from sample pages."""

from __future__ import annotations

from datetime import datetime

from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import ReplayKey, Reply
from chartgw.demo.retail import seed_days
from chartgw.demo.samples import amazon as samples
from chartgw.groups.retail_music import CHART, GROUP, GROUP_KIND, configured
from chartgw.upstreams import amazon


def replies(variant: int, settings: Settings) -> dict[str, dict[ReplayKey, Reply]]:
    return {amazon.MARKETPLACES[m].upstream: samples.grid_replies(m, GROUP_KIND, CHART, variant) for m in configured(settings)}


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """Five daily crawls of every configured marketplace's top songs, the last at `now`."""
    return await seed_days(GROUP, replies, now, settings)
