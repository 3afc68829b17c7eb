"""The Amazon retail groups' demo days: daily crawls of a group on replay servers, each day's lists moved on."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from chartgw.api.group import Group, crawl_group
from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import ReplayKey, Reply, replay_upstreams

DEMO_DAYS = 5
"""Daily crawls the demo seeds, ending at the seeding time: product history has a run of five."""


async def seed_days(group: Group, replies: Callable[[int, Settings], dict[str, dict[ReplayKey, Reply]]], now: datetime,
                    settings: Settings, days: int = DEMO_DAYS) -> list[Outcome]:
    """`days` daily crawls of `group` through its real crawler, on replay servers answering with `replies(variant)`
    (one table per upstream), the last at `now`; each day's lists move on from the day before."""
    outcomes: list[Outcome] = []
    with replay_upstreams(replies(0, settings)) as servers:
        served = servers.over(settings)
        for day in range(days):
            moment = now - timedelta(days=days - 1 - day)
            for name, table in replies(day, settings).items():
                servers[name].replies.clear()
                servers[name].replies.update(table)
            outcomes += await crawl_group(group, {}, settings=served, now=fixed(moment))
    return outcomes
