"""/korea-chart demo data: FLO observed at a few earlier moments, then every chart of every site now."""

from __future__ import annotations

from datetime import datetime, timedelta

from chartgw.api.group import retention
from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.crawl.runner import KST, Outcome, run_targets
from chartgw.demo.replay import replay_upstreams
from chartgw.demo.samples import korea as samples
from chartgw.groups.korea_chart import FLO_CHART, GROUP, NAME, targets
from chartgw.upstreams import flo


def flo_observation_times(now: datetime) -> list[datetime]:
    """Past moments that give `rising` an observation an hour back and `rising_hourly` a full previous hour."""
    hour = now.astimezone(KST).replace(minute=0, second=0, microsecond=0)
    return sorted({hour - timedelta(hours=1) + timedelta(seconds=30), hour - timedelta(minutes=4),
                   now - timedelta(minutes=60)})


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """FLO observed at a few earlier moments (the crawl clock set back: rising needs an observation an
    hour earlier), then every chart of every site now."""
    outcomes: list[Outcome] = []
    with replay_upstreams(samples.all_replies(now)) as servers:
        served = servers.over(settings)
        flo_targets = targets({"site": "portal-d", "chart_type": "all_age"}, now, served)
        flo_server = servers[flo.UPSTREAM]
        for variant, moment in enumerate(flo_observation_times(now)):
            flo_server.replies.update(samples.site_replies("portal-d", "all_age", moment, variant))
            outcomes += await run_targets(NAME, flo_targets, retention=retention(GROUP, served), now=fixed(moment),
                                          settings=served)
        flo_server.replies.update(samples.site_replies("portal-d", "all_age", now, 3))
        everything = [t for t in targets({}, now, served) if t.key != FLO_CHART]
        outcomes += await run_targets(NAME, everything, retention=retention(GROUP, served), now=fixed(now), settings=served)
    return outcomes
