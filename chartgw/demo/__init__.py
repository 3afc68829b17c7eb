"""Demo data: each group's seeder runs its real crawl over bundled sample payloads replayed on
127.0.0.1 (no network); `scripts/serve` runs this when the data folder is empty and shows a key.

The demo sits above the groups: a group declares no demo data, and `SEEDERS` (one module of this package
per group) names each group's seeder, so serving the app never imports a sample or a replay server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from chartgw import config
from chartgw.access import KeyStore
from chartgw.clock import utc_now
from chartgw.crawl import Outcome
from chartgw.demo import (
    artist_history,
    digital_sales,
    dj_rankings,
    korea_chart,
    radio,
    ranking_charts,
    recognition,
    retail_digital,
    retail_music,
    retail_physical,
    short_video,
    social_trends,
    streaming,
    uk_charts,
    video,
)
from chartgw.group import Group
from chartgw.groups import GROUPS
from chartgw.store import group_db_path

Seeder = Callable[[datetime], Awaitable[list[Outcome]]]
"""Fills a group's file with demo data: its real crawl over bundled samples on replay servers, at a time."""

SEEDERS: dict[str, Seeder] = {
    "streaming": streaming.seed,
    "video": video.seed,
    "digital-sales": digital_sales.seed,
    "korea-chart": korea_chart.seed,
    "recognition": recognition.seed,
    "ranking-charts": ranking_charts.seed,
    "uk-charts": uk_charts.seed,
    "social-trends": social_trends.seed,
    "short-video": short_video.seed,
    "dj-rankings": dj_rankings.seed,
    "retail-digital": retail_digital.seed,
    "retail-music": retail_music.seed,
    "retail-physical": retail_physical.seed,
    "radio": radio.seed,
    "artist-history-api": artist_history.seed,
}
"""Each group's seeder by group name. Seeded in `GROUPS` order, so artist-history (last) indexes the others."""

DEMO_KEY_FILE = "demo-api-key.txt"


def seeded_groups() -> list[Group]:
    return [group for group in GROUPS if group.name in SEEDERS]


def seeder(name: str) -> Seeder:
    """The demo seeder of group `name` (KeyError for a group without one)."""
    return SEEDERS[name]


def groups_without_data() -> list[str]:
    return [group.name for group in seeded_groups() if not group_db_path(group.name).exists()]


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


async def seed_groups(names: Sequence[str], now: datetime) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for name in names:
        outcomes += await seeder(name)(now)
    return outcomes


def seed(names: Sequence[str] | None = None, now: datetime | None = None) -> list[Outcome]:
    chosen = [g.name for g in seeded_groups()] if names is None else names
    return asyncio.run(seed_groups(chosen, now or utc_now()))


def keep_fresh(every_seconds: float) -> int:
    """Seed every group again every `every_seconds` at the time of day, until interrupted: the demo's
    snapshots stay within their cadence while `scripts/serve` runs. One line per round on stderr; SIGTERM (as
    `chartgw.cli` raises it) or Ctrl-C stops it between rounds or within one, with 0."""
    import sys
    import time

    try:  # (a stop right after the line below is inside the try too)
        print(f"demo: crawling the samples again every {every_seconds:g} s until stopped (SIGINT or SIGTERM)",
              file=sys.stderr, flush=True)
        while True:
            time.sleep(every_seconds)
            outcomes = seed()
            failed = sum(o.status != "ok" for o in outcomes)
            print(f"demo: crawled the samples again, {len(outcomes) - failed} of {len(outcomes)} committed",
                  file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        return 0


def radio_monitor() -> int:
    """`chartgw demo --radio-monitor`: the radio monitor on local sample streams until SIGINT/SIGTERM."""
    import sys

    report = asyncio.run(radio.run_live_demo())
    print(f"demo radio monitor stopped: {report.plays} plays, {report.readings} readings, {report.failures} failures "
          f"{report.errors or ''}", file=sys.stderr)
    return 0
