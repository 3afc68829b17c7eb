"""/artist-history-api: one artist's chart history across every group, from the artist-history index.

The group crawls nothing: its data is the index `chartgw.index.history` builds from the other groups'
snapshot files (`<data>/artist-history-api.sqlite`, read through the platform's reader of this group's
file, so a committed index batch moves the response cache's version). `chartgw index artist-history-api`
catches the index up and `chartgw enrich artist-history-api lyrics` adds Genius ids (`artist_lyrics`); the
demo (`chartgw.demo.artist_history`) runs both over the other groups' demo data (Genius answered by samples).

An artist is identified by `name`, `name_local` and any ids (a union). Names are matched on normalised keys,
widened by the alias links the charts print ("아이유(IU)"), the shipped alias table and names learned from
ids two single-artist entries share. Each key and each id parameter is a *stream*: its rows read newest
first from one key's range of the index, so a page merges the streams' heads and a coverage sums each
stream (from the sums the index keeps, where the dates allow). The spec's array parameters take their values
repeated (`?isrc=A&isrc=B`, what generated clients send) or comma-separated (`?isrc=A,B`) alike. `name` and
`artist` (the usage example's alias) may both be given when they normalise alike. `/artist-history/plot` draws
a history page as SVG.
"""

from __future__ import annotations

from typing import Any

from chartgw.api.group import CommandArg, Group, GroupCommand, Schedule
from chartgw.crawl.context import Context
from chartgw.crawl.runner import Outcome
from chartgw.index import history as index
from chartgw.index import lyrics
from chartgw.index.artist_history.query import NAME
from chartgw.index.artist_history.routes import ROUTES
from chartgw.upstreams import genius

register_sources = index.register_groups
"""The registry calls `register_sources(GROUPS)` once: the index reads every registered group with an entry mapping
(and, as `GROUP.after_commit`, indexes each one after its commits)."""


# --- CLI ------------------------------------------------------------------------------------------

def index_outcomes(results: list[index.IndexResult]) -> list[Outcome]:
    return [Outcome(r.source, "ok" if r.error is None else "failed", r.rows, r.last_snapshot_id,
                    duration_ms=r.duration_ms, error=r.error) for r in results]


def run_index(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    """`chartgw index artist-history-api [--rebuild yes]`."""
    results = (index.rebuild(settings=ctx.settings, now=ctx.clock) if values.get("rebuild") == "yes"
               else index.index_all(settings=ctx.settings, now=ctx.clock))
    return index_outcomes(results)


CATCH_UP = Schedule("*/15 * * * *", (), "UTC", "/artist-history-api: the index catches up with every group's snapshots "
                    "(each crawl, import and backfill indexes its own; this takes in what one missed and the radio "
                    "monitor's plays)")
"""`chartgw cron`'s line for the index (`chartgw crawl artist-history-api` does the same)."""


GROUP = Group(
    name=NAME,
    title="Artist history (every chart, every source)",
    description="One artist's chart history across every group, joined by names in every script and by ids: "
                "one row per appearance (source, chart, market, date, rank, title, credited artists, ids), sub-daily "
                "charts folded to a day, paged by a stable cursor; /artist-history/coverage says what each source had.",
    routes=ROUTES,
    upstreams=(genius.UPSTREAM,),
    commands=(
        GroupCommand("index", "catch the artist-history index up with every group's snapshots", args=(
            CommandArg("rebuild", "'yes' drops the index and builds it again from the groups' files",
                       choices=("yes", "no"), default="no"),
        ), run=run_index, cron=CATCH_UP),
        GroupCommand("enrich", "resolve Genius song and artist ids for indexed tracks without them", args=(
            CommandArg("what", "what to resolve: lyrics (Genius song and artist ids)", positional=True,
                       type=lyrics.lyrics_only),
            CommandArg("limit", f"tracks to ask for, the most charted first (default {lyrics.DEFAULT_LIMIT})", type=int,
                       default=lyrics.DEFAULT_LIMIT),
        ), run=lyrics.run_enrich, lock=False),
    ),
    settings=(index.ALIASES_FILE_SETTING, *lyrics.SETTINGS),
    entries=None,
    after_commit=index.index_source,  # every group's committed crawl, import or backfill is indexed at once
)
