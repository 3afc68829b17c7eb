"""/streaming demo data: a legacy CSV import, then token crawls of 3 countries from sample Spotify Charts answers."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path
from tempfile import TemporaryDirectory

from chartgw.api.group import crawl_group
from chartgw.core.clock import fixed
from chartgw.core.countries import GLOBAL
from chartgw.core.settings import Settings
from chartgw.crawl.context import Context
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import replay_upstreams
from chartgw.demo.samples import global_rows
from chartgw.demo.samples import streaming as samples
from chartgw.groups.streaming import COUNTRIES_SETTING, GROUP, TOKEN_SETTING, import_csv
from chartgw.upstreams import spotify

SETTINGS = {TOKEN_SETTING.variable: samples.DEMO_TOKEN, COUNTRIES_SETTING.variable: samples.DEMO_COUNTRIES}
"""What the demo crawls with and the server must be given to serve it whole (`chartgw.demo.demo_settings`): the
sample token, and the 3 countries crawled (the default list names countries the demo has no chart of)."""


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """Demo data: a legacy-layout CSV import of an older daily chart, then token crawls of every chart type of
    3 countries at two earlier days (the crawl clock set back, earlier chart dates; weekly charts a week
    apart each) and now."""
    countries = tuple(samples.DEMO_COUNTRIES.split(","))
    outcomes: list[Outcome] = []
    with replay_upstreams({spotify.UPSTREAM: {}}) as servers, TemporaryDirectory() as tmp:
        served = servers.over(settings.with_values(SETTINGS))
        two_days_ago = (now - timedelta(days=2)).date()
        older = date.fromisoformat(samples.chart_date("regional-daily", two_days_ago)) - timedelta(days=7)
        rows = global_rows("spotify/legacy/regional-daily/global", 0, 200)
        path = Path(tmp) / f"regional-global-daily-{older.isoformat()}.csv"
        path.write_bytes(samples.render_legacy_csv("regional-daily", GLOBAL, rows))
        outcomes += import_csv(Context(served, clock=fixed(now - timedelta(days=3))), {"file": str(path)})
        server = servers[spotify.UPSTREAM]
        newest_week = date.fromisoformat(samples.chart_date("regional-weekly", now.date()))
        for variant, days_back in enumerate((2, 1, 0)):
            moment = now - timedelta(days=days_back)
            weekly = (newest_week - timedelta(weeks=days_back)).isoformat()
            server.replies.clear()
            daily = samples.chart_date("regional-daily", moment.date())
            server.replies.update(samples.chart_replies(daily, weekly, variant, countries, samples.DEMO_TOKEN))
            outcomes += await crawl_group(GROUP, {}, settings=served, now=fixed(moment))
    return outcomes
