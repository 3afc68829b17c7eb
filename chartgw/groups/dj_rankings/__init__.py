"""/dj-rankings: DJ Mag's yearly Top 100 DJs, each DJ's profile from DJ Mag and discography from MusicBrainz.

What is stored, one snapshot each (the endpoints read an index of them, built once per commit):
- `list/{year}`: a poll year's Top 100 from the list page (JSON-LD item list, else the older markup),
  changes against the year before as the page states them or derived from the year before held;
- `dj/{slug}`: the DJ's own poll page (the newest year the DJ is on): country, genre, image, bio;
- `musicbrainz/{slug}`: the MusicBrainz artist search for the DJ's real name and its verdict;
- `discography/{slug}`: the matched artist's release groups, every browse page of 100;
- `plan`: what a crawl found due (the crawl's discovery pass, read by its targets).

A name rebuilt from a slug ("Dimitri Vegas Mike") never replaces a real one ("Dimitri Vegas & Like
Mike"): the real name from another year's list or the DJ's page is kept. `chartgw crawl dj-rankings
--part list` fetches the latest poll; `chartgw backfill dj-rankings --since YEAR` fills past polls.
`--part details` fetches only what is due: a DJ's page and releases at most once a week, one search
per name, at most one request per second to each upstream (MusicBrainz's terms), and no more requests
per crawl than `CHARTGW_DJ_RANKINGS_REQUESTS_PER_CRAWL` (the rest the next day).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import httpx

from chartgw.api.catalog import Chart
from chartgw.api.group import CommandArg, EntryMapping, Group, GroupCommand, Schedule, group_policy, retention
from chartgw.core.clock import Clock, utc_now
from chartgw.core.settings import Settings
from chartgw.crawl.context import Context
from chartgw.crawl.runner import Outcome, run_targets
from chartgw.groups.dj_rankings.crawl import discovery, list_target, targets
from chartgw.groups.dj_rankings.records import (
    BUDGET_SETTING,
    LIST,
    MAX_BACKFILL_YEARS,
    NAME,
    PARTS,
    PLAN,
    REFRESH_SETTING,
    TITLE,
    YEARS_SETTING,
)
from chartgw.groups.dj_rankings.routes import ROUTES
from chartgw.groups.dj_rankings.storage import STORAGE
from chartgw.upstreams import djmag, musicbrainz
from chartgw.upstreams.musicbrainz import CONTACT_SETTING


def _backfill_years(since: int, until: int | None, now: datetime) -> list[int]:
    last = until if until is not None else now.year - 1
    if last < since:
        raise ValueError(f"--until {last} is before --since {since}")
    if since < djmag.FIRST_YEAR:
        raise ValueError(f"--since must be {djmag.FIRST_YEAR} (the first poll) or later, got {since}")
    if last > now.year:
        raise ValueError(f"--until {last} is after this year")
    if last - since + 1 > MAX_BACKFILL_YEARS:
        raise ValueError(f"at most {MAX_BACKFILL_YEARS} years at once, asked {last - since + 1}")
    return list(range(since, last + 1))


async def backfill(since: int, until: int | None = None, *, settings: Settings, now: Clock = utc_now,
                   transport: httpx.AsyncBaseTransport | None = None) -> list[Outcome]:
    """Past polls' lists (`/top100djs/{year}`, 100 DJs each), one target per year, recorded as a run of
    kind "backfill"; their DJs' details follow in the next `--part details` crawls."""
    years = _backfill_years(since, until, now())
    chosen = [list_target(year) for year in years]
    return await run_targets(NAME, chosen, retention=retention(GROUP, settings), now=now, transport=transport,
                             policy=group_policy(GROUP, settings), run_kind="backfill", run_options={"years": years},
                             settings=settings)


def _backfill_command(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    return asyncio.run(backfill(values["since"], values["until"], settings=ctx.settings, now=ctx.clock,
                                transport=ctx.transport))


RETENTION_DAYS = {PLAN: 14.0, "dj/": 90.0, "discography/": 90.0, "musicbrainz/": 400.0, "list/": 400.0}
"""Older snapshots pruned (never a target's newest): a year's list keeps a year of re-crawls."""


def _market(target: str, record: dict[str, Any]) -> str:
    return "global"


GROUP = Group(
    name=NAME,
    title=TITLE,
    description="DJ Mag's yearly Top 100 DJs poll: each year's list (rank, name, country, genre, image, change "
                "against the year before), each DJ's profile from DJ Mag and discography from MusicBrainz. "
                + " ".join(__doc__.split("\n\n")[2:]).replace("\n", " "),
    routes=ROUTES,
    charts=(Chart("top-100-djs", LIST, "yearly", latest="/dj-rankings/{year}", history="/dj-rankings/years"),),
    upstreams=(djmag.UPSTREAM, musicbrainz.UPSTREAM),
    targets=targets,
    crawl_options=(("part", PARTS),),
    schedules=(
        Schedule("20 4 * 10-12 1", ("--part", "list"), "UTC",
                 "DJ Mag Top 100: weekly (Mondays) in October-December, when the yearly poll is published"),
        Schedule("20 4 1 1-9 *", ("--part", "list"), "UTC",
                 "DJ Mag Top 100: monthly otherwise (a published poll does not change)"),
        Schedule("50 4 * * *", ("--part", "details"), "UTC",
                 "DJ pages and MusicBrainz discographies: only what is due (each DJ weekly), one request a second"),
    ),
    retention_days=RETENTION_DAYS,
    discovery=discovery,
    per_upstream=1,
    delay_seconds=lambda settings: musicbrainz.MIN_INTERVAL_SECONDS,
    commands=(GroupCommand("backfill", "fill past DJ Mag Top 100 polls (one list page per year)", (
        CommandArg("since", f"first poll year, from {djmag.FIRST_YEAR}", type=int, required=True),
        CommandArg("until", "last poll year (default: last year)", type=int),
    ), _backfill_command),),
    settings=(CONTACT_SETTING, YEARS_SETTING, REFRESH_SETTING, BUDGET_SETTING),
    # A DJ ranking is an artist chart: the DJ is the artist, there is no title. Only the lists are chart entries.
    entries=EntryMapping(market="=global", artist=("name",), artists=None, title=(),
                         skip_targets=(PLAN, "dj/*", "musicbrainz/*", "discography/*")),
    storage=STORAGE,
)
