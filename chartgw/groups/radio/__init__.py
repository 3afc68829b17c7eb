"""/radio: a station directory (radio-browser) and what the stations play, observed by our own monitor.

The directory: `chartgw crawl radio` asks radio-browser for its server list (the discovery target
`servers`), then, per configured country (`CHARTGW_RADIO_COUNTRIES`) and tag (`CHARTGW_RADIO_TAGS`),
the most clicked working stations, from the first server of the list that answers (the crawl runner's
`Fetcher.fetch_any`: each server with the runner's retries, body cap and politeness; the next one on a
failure or a body the parser refuses). Each list is a snapshot
(`directory/{cc}`, `directory-tag/{tag}`); the merged `stations` table keeps every station ever
listed: one no configured list names any more is marked inactive (never deleted; its plays stay).

The plays: `chartgw monitor radio` (`monitor`) watches the most clicked stations
and records a play per change of the announced title. Every completed hour the monitor also commits
the hour's tracks per country as a snapshot `plays/{cc}` (one entry per track, ranked by plays), the
form in which the artist-history index takes plays in as a source of their own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from chartgw.api.catalog import Chart
from chartgw.api.group import CommandArg, EntryMapping, Group, GroupCommand, Schedule, retention
from chartgw.core.clock import Clock, utc_now
from chartgw.core.settings import Settings
from chartgw.crawl.context import Context
from chartgw.crawl.runner import Outcome
from chartgw.groups.radio import storage
from chartgw.groups.radio.directory import discovery, targets
from chartgw.groups.radio.monitor import Monitor, run_until_signalled
from chartgw.groups.radio.rollup import PLAYS_RETENTION
from chartgw.groups.radio.routes import ROUTES
from chartgw.groups.radio.settings import NAME, SETTINGS
from chartgw.store.targets import TargetKey
from chartgw.upstreams import radio_browser as rb

# --- the monitor command -------------------------------------------------------------------------------


def monitor_command(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    """`chartgw monitor radio`: runs until SIGINT/SIGTERM (or `--run-for` seconds), outside the group's
    crawl lock (`GroupCommand.lock=False`): a monitor that runs for months must not hold the lock the daily
    directory crawl takes. (`chartgw demo --radio-monitor` watches local sample streams instead.)"""
    return asyncio.run(run_monitor(values.get("run_for"), settings=ctx.settings, clock=ctx.clock))


async def run_monitor(run_for: float | None = None, *, settings: Settings, clock: Clock = utc_now) -> list[Outcome]:
    """The monitor in this process (tests, embedding) under `settings`: until SIGINT/SIGTERM or `run_for` seconds."""
    report = await run_until_signalled(Monitor(settings=settings, clock=clock, retention=retention(GROUP, settings)),
                                       run_for)
    return [Outcome("monitor", "ok", report.plays, None, None, 0,
                    None if not report.errors else f"station errors: {report.errors}")]


def _market(target: str) -> str:
    return target.partition("@")[0].split("/")[1] if target.startswith("plays/") else ""


GROUP = Group(
    name=NAME,
    title="Radio (station directory and observed plays)",
    description="A station directory from radio-browser (stations by country and tag, inactive ones kept) and what "
                "the monitored stations play, observed by our own monitor from each station's own announcements "
                "(Icecast and SHOUTcast status pages, ICY in-stream metadata): now playing, play history, tracks heard "
                "and a summary.",
    routes=ROUTES,
    # The monitor's hourly tally of each country's plays; /radio/tracks ranks what was heard (every country).
    charts=(Chart("plays", TargetKey(("country",), "plays"), "hourly", market="country", latest="/radio/tracks",
                  history="/radio/history"),),
    upstreams=(rb.UPSTREAM,),
    targets=targets,
    discovery=discovery,
    # The directory changes slowly and asks for politeness: one crawl a day, at a quiet hour.
    schedules=(Schedule("40 4 * * *", (), "UTC", "radio-browser directory: stations by configured country and tag, daily"),),
    retention_days={"directory": 30, "servers": 30, **PLAYS_RETENTION},
    per_upstream=1,
    commands=(GroupCommand("monitor", "watch the most clicked stations' now-playing until SIGINT/SIGTERM", (
        CommandArg("run_for", "stop after this many seconds (default: run until stopped)", type=float),
    ), monitor_command, lock=False, at_boot=True),),
    settings=SETTINGS,
    entries=EntryMapping(market=_market, artist=("artist",), artists="artists", title=("title",),
                         skip_targets=("servers", "directory/*", "directory-tag/*"), sub_daily_targets=("plays/*",)),
    storage=storage.STORAGE,
)
