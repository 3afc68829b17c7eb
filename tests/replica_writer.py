"""The writer's crawler in tests/test_replica.py, run as `python -m tests.replica_writer PAUSE`: the cron code path
(`run_targets`, the crawl runner) crawling one /korea-chart chart from the bundled samples, replayed on 127.0.0.1,
again and again with PAUSE seconds between, until it is killed (the test kills it with -9 mid-crawl). It prints
`crawling` once, when its imports are done and its first crawl starts."""

from __future__ import annotations

import asyncio
import sys
import time

from chartgw.api.group import retention
from chartgw.core.clock import utc_now
from chartgw.core.settings import Settings
from chartgw.crawl.runner import run_targets
from chartgw.demo.replay import replay_upstreams
from chartgw.demo.samples import korea as samples
from chartgw.groups import korea_chart


def main(pause: float) -> None:
    settings = Settings.from_environment()  # this process's start-up, as the CLI's
    with replay_upstreams(samples.all_replies(utc_now())) as servers:
        served = servers.over(settings)
        chart = korea_chart.targets({"site": "portal-a", "chart_type": "realtime"}, utc_now(), served)
        print("crawling", flush=True)
        while True:
            asyncio.run(run_targets(korea_chart.NAME, chart, retention=retention(korea_chart.GROUP, served), now=utc_now,
                                    settings=served))
            time.sleep(pause)


if __name__ == "__main__":
    main(float(sys.argv[1]))
