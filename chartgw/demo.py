"""Demo data: the real crawlers run over bundled sample payloads replayed on 127.0.0.1 (no network).

Each group has a seeder (`SEEDERS`): an async function that starts replay servers with its
upstreams' sample payloads and runs the group's real crawl against them. FLO's rising charts need
observations an hour apart, so the Korean seeder crawls FLO at a few earlier moments (the crawl
clock set back) before crawling everything now.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta

from chartgw import config
from chartgw.access import KeyStore
from chartgw.crawl import KST, Outcome, run_targets
from chartgw.groups.korea_chart import GROUP, SITES, targets
from chartgw.replay import ReplayServer
from chartgw.samples.korea import all_replies, site_replies
from chartgw.store import group_db_path, utc_now

DEMO_KEY_FILE = "demo-api-key.txt"
Seeder = Callable[[datetime], Awaitable[list[Outcome]]]
SEEDERS: dict[str, str] = {
    "korea-chart": "chartgw.demo:seed_korea_chart",
    "streaming": "chartgw.samples.streaming:seed",
    "video": "chartgw.samples.video:seed",
    "digital-sales": "chartgw.samples.digital_sales:seed",
    "recognition": "chartgw.samples.recognition:seed",
}
"""Group name -> "module:function" of its seeder, imported when used."""


def seeder(group: str) -> Seeder:
    module, _, function = SEEDERS[group].partition(":")
    return getattr(importlib.import_module(module), function)  # type: ignore[no-any-return]


@contextmanager
def environment(values: dict[str, str | None]) -> Iterator[None]:
    """Set (or, for None, unset) environment variables for the duration, then restore them."""
    saved = {name: os.environ.get(name) for name in values}

    def apply(settings: dict[str, str | None]) -> None:
        for name, value in settings.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    apply(values)
    try:
        yield
    finally:
        apply(saved)


@contextmanager
def replay_upstreams(replies: dict[str, dict]) -> Iterator[dict[str, ReplayServer]]:
    """One replay server per upstream, with `CHARTGW_UPSTREAM_<NAME>` pointing at it meanwhile.

    The servers are local, so the crawl delay (politeness towards real upstreams) is 0 meanwhile too.
    """
    with ExitStack() as stack:
        servers = {}
        for name, table in replies.items():
            server = ReplayServer(table).start()
            stack.callback(server.stop)
            servers[name] = server
        settings: dict[str, str | None] = {f"CHARTGW_UPSTREAM_{n}": s.origin for n, s in servers.items()}
        stack.enter_context(environment({**settings, "CHARTGW_CRAWL_DELAY_SECONDS": "0"}))
        yield servers


def flo_observation_times(now: datetime) -> list[datetime]:
    """Past moments that give `rising` an observation an hour back and `rising_hourly` a full previous hour."""
    hour = now.astimezone(KST).replace(minute=0, second=0, microsecond=0)
    return sorted({hour - timedelta(hours=1) + timedelta(seconds=30), hour - timedelta(minutes=4),
                   now - timedelta(minutes=60)})


async def seed_korea_chart(now: datetime | None = None) -> list[Outcome]:
    now = now or utc_now()
    outcomes: list[Outcome] = []
    flo = targets({"site": "portal-d", "chart_type": "all_age"})
    with replay_upstreams(all_replies(now)) as servers:
        flo_server = servers[SITES["portal-d"].upstream.UPSTREAM]
        for variant, moment in enumerate(flo_observation_times(now)):
            flo_server.replies.update(site_replies("portal-d", "all_age", moment, variant))
            outcomes += await run_targets(GROUP.name, flo, retention=GROUP.retention_days, now=lambda m=moment: m)
        flo_server.replies.update(site_replies("portal-d", "all_age", now, 3))
        everything = [t for t in targets({}) if t.key != "portal-d/all_age"]
        outcomes += await run_targets(GROUP.name, everything, retention=GROUP.retention_days, now=lambda: now)
    return outcomes


def groups_without_data() -> list[str]:
    return [name for name in SEEDERS if not group_db_path(name).exists()]


def demo_key() -> str:
    """The local demo key, created once and kept in the data folder so `scripts/serve` can show it again."""
    path = config.data_dir() / DEMO_KEY_FILE
    if path.exists():
        return path.read_text().strip()
    _, key = KeyStore().create("demo")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(key + "\n")
    path.chmod(0o600)
    return key


async def seed_groups(names: list[str], now: datetime | None = None) -> list[Outcome]:
    now = now or utc_now()
    outcomes: list[Outcome] = []
    for name in names:
        outcomes += await seeder(name)(now)
    return outcomes


def seed(names: list[str] | None = None) -> list[Outcome]:
    return asyncio.run(seed_groups(list(SEEDERS) if names is None else names))
