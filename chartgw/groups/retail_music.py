"""/retail-music: retail streaming top songs, read from Amazon's best-selling digital songs list.

No public format of the streaming app's own top songs is known (NOTES-global 4: "no scrapable public format
was found"), so this group reads the Digital Music store's best-selling songs list
(`/gp/bestsellers/dmusic/digital-music-track/`, 100 ranks) of every configured marketplace, once a day.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from chartgw.api.catalog import Chart, cadences
from chartgw.api.endpoints import Call, Route, not_found
from chartgw.api.group import EntryMapping, Group, Schedule
from chartgw.api.params import Param
from chartgw.api.responses import health_route, snapshots_route
from chartgw.core.settings import Settings
from chartgw.crawl.runner import CrawlTarget
from chartgw.groups import retail
from chartgw.store import glob_escape
from chartgw.upstreams import amazon

NAME = "retail-music"
GROUP_KIND: amazon.Group = "retail-music"
CHART = "top-songs"


def configured(settings: Settings) -> list[str]:
    """The configured marketplaces that have a songs list."""
    return [m for m in settings.get(retail.MARKETS_SETTING) if m in amazon.category(GROUP_KIND, CHART).paths]


CHARTS = (Chart("top-songs", retail.TARGET, "daily", {"chart": "top-songs"}, market="market",
                latest="/retail-music/top-songs/latest?market={market}",
                history="/retail-music/top-songs/snapshots?market={market}"),)
"""The best-selling digital songs of every marketplace."""


def configured_targets(settings: Settings) -> list[str]:
    return [retail.target_of(market, CHART) for market in configured(settings)]


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    market = selection.get("market")
    retail.check_market(market, settings)
    gate = retail.open_gate(NAME, now, settings)
    return [retail.grid_target(GROUP_KIND, m, CHART, gate) for m in configured(settings) if market in (None, m)]


class MarketParams(TypedDict):
    market: str | None


def _target(call: Call[MarketParams]) -> str:
    market = call.params["market"]
    have = configured(call.settings)
    if market is None:
        if not have:
            raise not_found("No configured marketplace has a songs list; see /retail-music/health")
        market = have[0]
    if market not in have:
        raise not_found(f"Marketplace {market!r} is not crawled; configured: {', '.join(have)} "
                        "(/retail-music/health lists them)")
    return retail.target_of(market, CHART)


class LatestParams(TypedDict):
    limit: int
    market: str | None


async def latest(call: Call[LatestParams]) -> retail.ChartResponse:
    return await retail.chart_response(call, _target(call), "/retail-music/top-songs/snapshots", call.params["limit"],
                                       False)


class RankParams(TypedDict):
    rank: int
    market: str | None


async def rank(call: Call[RankParams]) -> retail.RankResponse:
    return await retail.rank_response(call, _target(call), "/retail-music/top-songs/snapshots", call.params["rank"],
                                      False)


async def listed(call: Call[MarketParams]) -> str:
    """The targets `/top-songs/snapshots` lists: one marketplace's, or every marketplace's."""
    return glob_escape(_target(call)) if call.params["market"] is not None else f"*/{CHART}"


MARKET = Param("market", kind="choice", choices=retail.MARKET_CODES,
               description="Amazon marketplace (one of CHARTGW_RETAIL_MARKETS); default: the first configured")

ROUTES: tuple[Route, ...] = (
    health_route(NAME, lambda settings: cadences(CHARTS, configured_targets(settings)),
                 "Every configured marketplace's latest top songs, and its crawl state (refusals, backoff)",
                 describe=retail.describe_health(NAME), response=retail.RetailHealth),
    Route("/top-songs/latest", latest, (
        Param("limit", kind="int", default=100, ge=1, le=100, description="Rows to return, from rank 1"), MARKET,
    ), rows="entries", response=retail.ChartResponse,
       summary="The latest top songs (best-selling digital songs) of a marketplace"),
    Route("/top-songs/rank/{rank}", rank, (retail.RANK_PARAM, MARKET), response=retail.RankResponse,
          summary="One rank of the latest top songs"),
    snapshots_route(lambda _: retail.CADENCE_SECONDS, "Stored top-songs snapshots, newest first",
                    path="/top-songs/snapshots", select=listed, errors=(404,), params=(
        Param("limit", kind="int", default=50, ge=1, le=1000, description="Snapshots to return, newest first"),
        Param("market", kind="choice", choices=retail.MARKET_CODES, description="Only this marketplace; all when absent"),
    )),
)


GROUP = Group(
    name=NAME,
    title="Retail music (top songs: Amazon best-selling digital songs)",
    description="Top songs per Amazon marketplace, read from the Digital Music store's best-selling songs list "
                "(no public format of the streaming app's own top songs is known), 100 ranks, crawled daily: latest "
                "list, rank lookup and snapshots. Entries carry the ASIN.",
    routes=ROUTES,
    charts=CHARTS,
    upstreams=retail.UPSTREAMS,
    targets=targets,
    crawl_options=(("market", retail.MARKET_CODES),),
    # Daily at 05:10 UTC: an hour after /retail-physical and 30 min after /retail-digital, which reads the same
    # songs page, so the three groups never ask one marketplace at once.
    schedules=(Schedule("10 5 * * *", (), "UTC", "Amazon best-selling digital songs: every configured marketplace, "
                                                 "daily"),),
    per_upstream=1,
    delay_seconds=retail.delay_seconds,
    settings=retail.SETTINGS,
    entries=EntryMapping(market="target:0", artists=None, ids={"asin": "asin"}),
)
