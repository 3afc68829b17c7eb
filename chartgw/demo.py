"""Demo data: each group's seeder runs its real crawl over bundled sample payloads replayed on
127.0.0.1 (no network); `scripts/serve` runs this when the data folder is empty and shows a key."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from chartgw import config
from chartgw.access import KeyStore
from chartgw.clock import utc_now
from chartgw.crawl import Outcome
from chartgw.group import Group, Seeder
from chartgw.groups import GROUPS
from chartgw.store import group_db_path

DEMO_KEY_FILE = "demo-api-key.txt"


def seeded_groups() -> list[Group]:
    return [group for group in GROUPS if group.seeder is not None]


def seeder(name: str) -> Seeder:
    """The demo seeder of group `name` (KeyError for a group without one)."""
    for group in seeded_groups():
        if group.name == name and group.seeder is not None:
            return group.seeder
    raise KeyError(name)


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
