"""/short-video demo data: daily and weekly charts of every configured country through the real token exchange
and paging, from sample Chartmetric answers."""

from __future__ import annotations

from datetime import datetime, timedelta

from chartgw.api.group import crawl_group
from chartgw.core.clock import fixed
from chartgw.core.countries import GLOBAL
from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import replay_upstreams
from chartgw.demo.samples import short_video as samples
from chartgw.groups.short_video import COUNTRIES_SETTING, GROUP, INTERVALS_SETTING, TOKEN_SETTING, chart_date_asked
from chartgw.upstreams import chartmetric

DEMO_SIZE = 150
"""Rows of a demo chart: two pages of 100 and 50."""


SETTINGS = {TOKEN_SETTING.variable: samples.SAMPLE_REFRESH_TOKEN}
"""What the demo crawls with and the server must be given (`chartgw.demo.demo_settings`): without a refresh token
/short-video/health says nothing is crawled."""


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """Three daily charts (a day apart) and three weekly charts (a week apart) of every configured country, through
    the real token exchange and paging against sample answers."""
    outcomes: list[Outcome] = []
    with replay_upstreams({chartmetric.UPSTREAM: samples.token_replies()}) as servers:
        served = servers.over(settings.with_values(SETTINGS))
        server = servers[chartmetric.UPSTREAM]
        codes = [None if c == GLOBAL else c for c in served.get(COUNTRIES_SETTING)]
        for interval in served.get(INTERVALS_SETTING):
            step = timedelta(days=7 if interval == "weekly" else 1)
            for variant, back in enumerate((2, 1, 0)):
                moment = now - step * back
                asked = datetime.fromisoformat(chart_date_asked(moment)).date()
                for code2 in codes:
                    server.replies.update(samples.chart_replies(code2, interval, asked, variant, DEMO_SIZE))
                outcomes += await crawl_group(GROUP, {"interval": interval}, settings=served, now=fixed(moment))
    return outcomes
