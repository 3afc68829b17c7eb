"""/video demo data: a backfill of past shorts weeks and a pull of every catalogue chart from sample answers."""

from __future__ import annotations

from datetime import datetime

from chartgw.api.group import crawl_group
from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import replay_upstreams
from chartgw.demo.samples import video as samples
from chartgw.groups.video import GROUP, backfill, catalogue
from chartgw.upstreams import youtube


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """A backfill of the past 4 weeks of shorts, then a pull of every catalogue chart, both at `now`."""
    with replay_upstreams({youtube.UPSTREAM: samples.replies(catalogue(settings), now)}) as servers:
        served = servers.over(settings)
        outcomes = await backfill(samples.BACKFILL_WEEKS, settings=served, now=fixed(now))
        outcomes += await crawl_group(GROUP, {}, settings=served, now=fixed(now))
    return outcomes
