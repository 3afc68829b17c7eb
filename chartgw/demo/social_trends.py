"""/social-trends demo data: three crawls of every location through the X API v1.1 from sample answers."""

from __future__ import annotations

from datetime import datetime, timedelta

from chartgw.api.group import crawl_group
from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import replay_upstreams
from chartgw.demo.samples import social_trends as samples
from chartgw.groups.social_trends import API_VERSION_SETTING, GROUP, LOCATIONS_SETTING, SOURCE_SETTING, TOKEN_SETTING


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """Three crawls of every location through the X API v1.1 (a sample token), an hour apart."""
    values: dict[str, str | None] = {TOKEN_SETTING.variable: samples.SAMPLE_TOKEN, SOURCE_SETTING.variable: "x-api",
                                     API_VERSION_SETTING.variable: "1.1",
                                     LOCATIONS_SETTING.variable: LOCATIONS_SETTING.default}
    outcomes: list[Outcome] = []
    moments = [now - timedelta(hours=2), now - timedelta(hours=1), now]
    with replay_upstreams(samples.all_replies(moments[0], 0)) as servers:
        served = servers.over(settings.with_values(values))
        for variant, moment in enumerate(moments):
            for upstream, table in samples.all_replies(moment, variant).items():
                servers[upstream].replies.update(table)
            outcomes += await crawl_group(GROUP, {}, settings=served, now=fixed(moment))
    return outcomes
