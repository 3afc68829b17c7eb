"""Demo data: each group's seeder runs its real crawl over bundled sample payloads replayed on
127.0.0.1 (no network); `scripts/serve` runs this when the data folder is empty and shows a key.

The demo sits above the groups: a group declares no demo data; its seeder is `seed` in this package's module named
after it (`demo_module`), found by that name, so serving the app never imports a sample or a replay server and a
new group's demo is its own file.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from chartgw.api.access import KeyStore, keys_db_path
from chartgw.api.group import Group
from chartgw.core import config
from chartgw.core.clock import utc_now
from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.groups import GROUPS, group_names, named
from chartgw.store import group_db_path

Seeder = Callable[[datetime, Settings], Coroutine[Any, Any, list[Outcome]]]
"""Fills a group's file with demo data: its real crawl over bundled samples on replay servers, at a time, under
the command's settings (its data folder)."""

DEMO_KEY_FILE = "demo-api-key.txt"
DEMO_SETTINGS_FILE = "demo-settings.env"
"""Written into the data folder by `chartgw demo`: the settings the demo data is served with (`demo_settings`);
`scripts/serve` names it in CHARTGW_SETTINGS_FILE, so every group's health is ok from the start."""


def demo_module(group: Group) -> str:
    """The module of `group`'s demo data: its name with `_` for `-` and without an `-api` suffix
    (`chartgw.demo.korea_chart`, `chartgw.demo.artist_history` for /artist-history-api)."""
    return f"{__package__}.{group.name.removesuffix('-api').replace('-', '_')}"


def seeded_groups() -> list[Group]:
    """The groups that have a demo module, in `GROUPS` order (artist-history, last, indexes the others)."""
    return [group for group in GROUPS if importlib.util.find_spec(demo_module(group)) is not None]


def seeder(name: str) -> Seeder:
    """The demo seeder of group `name`: `seed` of its demo module (KeyError for a group without one)."""
    group = named(GROUPS, name) if name in group_names(GROUPS) else None  # only this group is imported
    if group is None or importlib.util.find_spec(demo_module(group)) is None:
        raise KeyError(name)
    seed: Seeder = importlib.import_module(demo_module(group)).seed
    return seed


def demo_settings() -> dict[str, str]:
    """The settings the demo data needs to be served whole: each demo module's `SETTINGS` (the sample tokens and
    the countries it crawls), merged in `GROUPS` order."""
    merged: dict[str, str] = {}
    for group in seeded_groups():
        merged.update(getattr(importlib.import_module(demo_module(group)), "SETTINGS", {}))
    return merged


def write_demo_settings(settings: Settings) -> Path:
    """`demo_settings()` as a settings file in the data folder (NAME=value lines), for `scripts/serve`."""
    path = settings.get(config.DATA_DIR) / DEMO_SETTINGS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Written by `chartgw demo`: the settings its sample data is served with (scripts/serve reads this file)."]
    path.write_text("\n".join([*lines, *(f"{name}={value}" for name, value in demo_settings().items())]) + "\n")
    path.chmod(0o600)  # sample tokens, but tokens
    return path


def groups_without_data(settings: Settings) -> list[str]:
    return [group.name for group in seeded_groups() if not group_db_path(group.name, settings).exists()]


def demo_key(settings: Settings) -> str:
    """The local demo key, created once and kept in the data folder so `scripts/serve` can show it again."""
    path = settings.get(config.DATA_DIR) / DEMO_KEY_FILE
    if path.exists():
        return path.read_text().strip()
    _, key = KeyStore(keys_db_path(settings)).create("demo")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(key + "\n")
    path.chmod(0o600)
    return key


async def seed_groups(names: Sequence[str], now: datetime, settings: Settings) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for name in names:
        outcomes += await seeder(name)(now, settings)
    return outcomes


def seed(settings: Settings, names: Sequence[str] | None = None, now: datetime | None = None) -> list[Outcome]:
    chosen = [g.name for g in seeded_groups()] if names is None else names
    return asyncio.run(seed_groups(chosen, now or utc_now(), settings))


def keep_fresh(every_seconds: float, settings: Settings) -> int:
    """Seed every group again every `every_seconds` at the time of day, until SIGTERM or SIGINT: the demo's
    snapshots stay within their cadence while `scripts/serve` runs. One line per round on stderr, and one when it
    stops, with 0. A stop between rounds ends the wait; one within a round cancels the round at its next await
    (what the round committed stays, the crawl in progress rolls back) and lets every task of it finish, so that
    nothing is left to report "Task exception was never retrieved"."""
    import signal
    import sys

    def say(line: str) -> None:
        print(f"demo: {line}", file=sys.stderr, flush=True)

    async def rounds() -> str:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(number, stop.set)
        say(f"crawling the samples again every {every_seconds:g} s until stopped (SIGINT or SIGTERM)")
        while True:
            try:
                await asyncio.wait_for(stop.wait(), every_seconds)
                return "stopped between rounds"
            except TimeoutError:
                pass
            names = [g.name for g in seeded_groups()]
            crawl = asyncio.ensure_future(seed_groups(names, utc_now(), settings))
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({crawl, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not crawl.done():
                crawl.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await crawl
                return "stopped within a round (what it committed stays)"
            outcomes = crawl.result()
            failed = sum(o.status != "ok" for o in outcomes)
            say(f"crawled the samples again, {len(outcomes) - failed} of {len(outcomes)} committed")

    previous = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        say(asyncio.run(rounds()))
    except KeyboardInterrupt:  # a signal before the loop took them over, or after (chartgw.cli raises Stopped)
        say("stopped")
    finally:
        for number, handler in previous.items():  # the loop leaves SIG_DFL behind when it closes
            if handler is not None:
                signal.signal(number, handler)
    return 0


def radio_monitor(settings: Settings) -> int:
    """`chartgw demo --radio-monitor`: the radio monitor on local sample streams until SIGINT/SIGTERM."""
    import sys

    from chartgw.demo import radio

    report = asyncio.run(radio.run_live_demo(settings))
    print(f"demo radio monitor stopped: {report.plays} plays, {report.readings} readings, {report.failures} failures "
          f"{report.errors or ''}", file=sys.stderr)
    return 0
