"""/recognition demo data: yesterday's Top 200s and today's full crawl from sample Shazam answers."""

from __future__ import annotations

from datetime import datetime, timedelta

from chartgw.api.group import crawl_group
from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.crawl.runner import KST, Outcome
from chartgw.demo.replay import replay_upstreams
from chartgw.demo.samples import recognition as samples
from chartgw.groups.recognition import GROUP
from chartgw.upstreams import shazam


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """Yesterday's Top 200s, then today's full crawl (discovery and all 275 charts)."""
    today = now.astimezone(KST).date()
    yesterday = now - timedelta(days=1)
    with replay_upstreams({shazam.UPSTREAM: samples.replies(today - timedelta(days=1), 0)}) as servers:
        served = servers.over(settings)
        outcomes = await crawl_group(GROUP, {"chart_kind": "top-200"}, settings=served, now=fixed(yesterday))
        servers[shazam.UPSTREAM].replies.update(samples.replies(today, 1))
        outcomes += await crawl_group(GROUP, {}, settings=served, now=fixed(now))
    return outcomes
