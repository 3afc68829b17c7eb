"""/dj-rankings demo data: five poll years and their details passes from sample DJ Mag and MusicBrainz answers."""

from __future__ import annotations

from datetime import datetime, timedelta

from chartgw.api.group import crawl_group
from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import replay_upstreams
from chartgw.demo.samples import dj_rankings as samples
from chartgw.groups.dj_rankings import GROUP, backfill


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """Five poll years through the real crawler on replay servers: past polls backfilled and the latest
    crawled two days ago, then the details passes (pages and searches, then first release pages), then a
    whole crawl now that completes the discographies longer than one page."""
    years = samples.sample_years()
    start = now - timedelta(days=2)
    with replay_upstreams(samples.all_replies(now)) as servers:
        served = servers.over(settings)
        outcomes = await backfill(years[0], years[-2], settings=served, now=fixed(start))
        outcomes += await crawl_group(GROUP, {"part": "list"}, settings=served, now=fixed(start))
        outcomes += await crawl_group(GROUP, {"part": "details"}, settings=served, now=fixed(start + timedelta(hours=1)))
        outcomes += await crawl_group(GROUP, {"part": "details"}, settings=served, now=fixed(now - timedelta(days=1)))
        outcomes += await crawl_group(GROUP, {}, settings=served, now=fixed(now))
    return outcomes
