"""/retail-physical: Amazon CDs & Vinyl best sellers and their categories, per marketplace, keyed by ASIN.

A category key names the marketplace and the category ("us-cds-vinyl", "de-vinyl", "us-rock"). Each
configured category x marketplace that has a known list path is crawled once a day (pages 1 and 2 of its
grid: 100 ranks) and kept as one snapshot per day, with no retention limit, so a product's history
(`/products/{asin}/history`) covers every day it was listed.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TypedDict

import msgspec

from chartgw.api.catalog import Chart, cadences
from chartgw.api.endpoints import Call, Route, not_found
from chartgw.api.group import EntryMapping, Group, Schedule
from chartgw.api.params import Param
from chartgw.api.responses import health_route, snapshots_route
from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.crawl.runner import CrawlTarget
from chartgw.groups import retail
from chartgw.store import Query, Storage, glob_escape
from chartgw.upstreams import amazon

NAME = "retail-physical"
GROUP_KIND: amazon.Group = "retail-physical"
CATEGORY_SLUGS = tuple(c.slug for c in amazon.categories(GROUP_KIND))
DEFAULT_CATEGORY = "cds-vinyl"
WHERE = "/retail-physical/categories"


CATEGORIES_SETTING = config.Setting(
    "RETAIL_PHYSICAL_CATEGORIES", ",".join(CATEGORY_SLUGS),
    "CDs & Vinyl categories /retail-physical crawls (each in the marketplaces that have a known path for it)",
    config.subset(CATEGORY_SLUGS, "category", lower=True))


def configured(settings: Settings) -> list[tuple[str, str]]:
    """(market, category) of every configured category in every configured marketplace that has its path."""
    chosen = settings.get(CATEGORIES_SETTING)
    return [(market, slug) for market in settings.get(retail.MARKETS_SETTING) for slug in chosen
            if market in amazon.category(GROUP_KIND, slug).paths]


CHARTS = (Chart("{chart}", retail.TARGET, "daily", market="market",
                latest="/retail-physical/best-sellers/latest?category={market}-{chart}",
                history="/retail-physical/best-sellers/snapshots?category={market}-{chart}"),)
"""CDs & Vinyl and every configured category of every marketplace."""


def configured_targets(settings: Settings) -> list[str]:
    return [retail.target_of(market, slug) for market, slug in configured(settings)]


# --- crawl --------------------------------------------------------------------------------------------------

def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    market, slug = selection.get("market"), selection.get("category")
    retail.check_market(market, settings)
    chosen = [(m, s) for m, s in configured(settings) if market in (None, m) and slug in (None, s)]
    if slug is not None and not chosen:
        # A category left out of the setting may still be crawled by name where its path is known.
        chosen = [(m, slug) for m in settings.get(retail.MARKETS_SETTING) if market in (None, m)
                  and m in amazon.category(GROUP_KIND, slug).paths]
        if not chosen:
            markets = market or ", ".join(settings.get(retail.MARKETS_SETTING))
            raise ValueError(f"no known path for category {slug!r} in {markets}")
    gate = retail.open_gate(NAME, now, settings)
    return [retail.grid_target(GROUP_KIND, m, s, gate) for m, s in chosen]


# --- responses ----------------------------------------------------------------------------------------------

class CategoryInfo(msgspec.Struct):
    key: str
    """Marketplace and category: the `category` parameter of the other endpoints ("us-rock")."""
    market: str
    category: str
    name: str
    url: str
    """The list on Amazon (page 1)."""
    path_guessed: bool
    """The list path is a guess by analogy (no page or public code was seen with it)."""
    configured: bool
    """Crawled daily under the current settings."""
    snapshots: int
    first_chart_date: str | None
    last_chart_date: str | None
    last_fetched_at: str | None


class CategoriesResponse(msgspec.Struct):
    default: str
    """The category key the best-seller endpoints use when none is given."""
    cadence_seconds: int
    count: int
    categories: list[CategoryInfo]


class Appearance(msgspec.Struct):
    """The product in one snapshot: where it ranked and what it cost and scored that day."""

    category: str
    """Category key ("us-rock")."""
    chart_date: str
    fetched_at: str
    snapshot_id: int
    rank: int
    price: float | None
    price_text: str | None
    currency: str | None
    rating: float | None
    review_count: int | None


class ProductHistory(msgspec.Struct):
    asin: str
    title: str | None
    """The latest title a card printed (null when it was only ever listed without a card)."""
    artist: str | None
    category: str | None
    """The category filter asked for; null = every category."""
    first_seen: str
    """The first chart date the product was listed."""
    last_seen: str
    best_rank: int
    best_rank_date: str
    """The first chart date it held its best rank."""
    snapshots: int
    """Snapshots it appeared in (all of them, whatever `limit`)."""
    count: int
    appearances: list[Appearance]
    """Newest first, at most `limit`."""


class _Seen(msgspec.Struct):
    title: str | None = None
    artist: str | None = None
    price: float | None = None
    price_text: str | None = None
    currency: str | None = None
    rating: float | None = None
    review_count: int | None = None


_seen = msgspec.json.Decoder(_Seen)


# --- handlers -----------------------------------------------------------------------------------------------

def default_key(settings: Settings) -> str:
    chosen = configured(settings)
    preferred = [(m, s) for m, s in chosen if s == DEFAULT_CATEGORY] or chosen
    market, slug = preferred[0] if preferred else (settings.get(retail.MARKETS_SETTING)[0], DEFAULT_CATEGORY)
    return retail.key_of(retail.target_of(market, slug))


async def resolve(call: Call, key: str | None) -> str:
    """The target of a `category` value: a category key ("us-rock"), a bare category ("rock": the first
    configured marketplace that has it), or the default; 404 naming /categories for anything else."""
    if key is None:
        key = default_key(call.settings)
    parts = retail.split_key(key)
    if parts is None and key in CATEGORY_SLUGS:
        market = next((m for m, s in configured(call.settings) if s == key), None)
        if market is not None:
            parts = (market, key)
    if parts is not None and parts[1] in CATEGORY_SLUGS:
        target = retail.target_of(*parts)
        if target in configured_targets(call.settings) or await call.data.reader.latest(target) is not None:
            return target
    raise retail.unknown("category", key, WHERE)


async def categories(call: Call) -> CategoriesResponse:
    reader = call.data.reader
    coverage = await reader.coverage()
    wanted = configured_targets(call.settings)
    infos = []
    for target in [*wanted, *sorted(t for t in coverage if t not in wanted)]:
        market, slug = retail.split_target(target)
        if slug not in CATEGORY_SLUGS or market not in amazon.MARKETPLACES:
            continue
        found = amazon.category(GROUP_KIND, slug)
        path = found.paths.get(market)
        count, first, last, fetched = retail.held_span(coverage.get(target))
        infos.append(CategoryInfo(retail.key_of(target), market, slug, found.name,
                                  f"https://{amazon.MARKETPLACES[market].host}{amazon.grid_path(path)}" if path else "",
                                  market in found.guessed, target in wanted, count, first, last, fetched))
    return CategoriesResponse(default_key(call.settings), retail.CADENCE_SECONDS, len(infos), infos)


class LatestParams(TypedDict):
    category: str | None
    limit: int
    include_raw: bool


async def latest(call: Call[LatestParams]) -> retail.ChartResponse:
    target = await resolve(call, call.params["category"])
    return await retail.chart_response(call, target, WHERE, call.params["limit"], call.params["include_raw"])


class RankParams(TypedDict):
    rank: int
    category: str | None
    include_raw: bool


async def rank(call: Call[RankParams]) -> retail.RankResponse:
    target = await resolve(call, call.params["category"])
    return await retail.rank_response(call, target, WHERE, call.params["rank"], call.params["include_raw"])


class CategoryParams(TypedDict):
    category: str | None


async def listed(call: Call[CategoryParams]) -> str | None:
    """The targets `/best-sellers/snapshots` lists: one category's, or every category's."""
    key = call.params["category"]
    return glob_escape(await resolve(call, key)) if key is not None else None


APPEARANCES = Query("appearances", "SELECT s.id, s.target, s.chart_date, s.fetched_at, e.position FROM entries e"
                                   " JOIN snapshots s ON s.id = e.snapshot_id WHERE e.item_id = ?1"
                                   " AND (?2 IS NULL OR s.target = ?2) ORDER BY s.chart_date DESC, s.id DESC")
"""Every listing of an item (in one list when given), newest chart first: from the item index alone."""
RECORDS_AT = Query("records_at", "SELECT k.value ->> 0, k.value ->> 1, e.record FROM json_each(?) k"
                                 " JOIN entries e ON e.snapshot_id = k.value ->> 0 AND e.position = k.value ->> 1")
"""The records at a JSON list of [snapshot id, position]."""


class HistoryParams(TypedDict):
    asin: str
    category: str | None
    limit: int


async def history(call: Call[HistoryParams]) -> ProductHistory:
    """Every listing of an ASIN. The run is read from the item index alone (a covering index: the entry's
    position is its rank, since a committed snapshot's ranks run 1..n in order); only the `limit` newest
    appearances read their records (price, rating), a page each."""
    asin, key, limit = call.params["asin"], call.params["category"], call.params["limit"]
    reader = call.data.reader
    target = await resolve(call, key) if key is not None else None
    rows = await reader.fetchall(APPEARANCES, (asin, target))
    if not rows:
        scope = f" in {retail.key_of(target)}" if target else ""
        raise not_found(f"ASIN {asin} was never seen{scope}; it has appeared in no stored best-seller list")
    best = min(rows, key=lambda r: (r[4], r[2]))
    shown = rows[:limit]
    found = await reader.fetchall(RECORDS_AT, (json.dumps([(row[0], row[4]) for row in shown]),))
    records: dict[tuple[int, int], bytes] = {(sid, pos): record for sid, pos, record in found}
    appearances = []
    title = artist = None
    for snapshot_id, seen_target, chart_date, fetched_at, position in shown:
        seen = _seen.decode(records[(snapshot_id, position)])
        title, artist = title or seen.title, artist or seen.artist
        appearances.append(Appearance(retail.key_of(seen_target), chart_date, fetched_at, snapshot_id, position,
                                      seen.price, seen.price_text, seen.currency, seen.rating, seen.review_count))
    return ProductHistory(asin, title, artist, retail.key_of(target) if target else None, rows[-1][2], rows[0][2],
                          best[4], best[2], len(rows), len(appearances), appearances)


# --- the route table ----------------------------------------------------------------------------------------

CATEGORY = Param("category", description="Category key from /retail-physical/categories (\"us-rock\"), or a bare "
                                         "category (\"rock\": the first configured marketplace with it); default: "
                                         "CDs & Vinyl of the first configured marketplace")

ROUTES: tuple[Route, ...] = (
    health_route(NAME, lambda settings: cadences(CHARTS, configured_targets(settings)),
                 "Every configured category's latest snapshot, and each marketplace's crawl state (refusals, backoff)",
                 describe=retail.describe_health(NAME), response=retail.RetailHealth),
    Route("/categories", categories, errors=(), rows="categories", response=CategoriesResponse,
          summary="Category keys (marketplace x category) with their Amazon list and snapshot coverage"),
    Route("/best-sellers/latest", latest, (
        CATEGORY,
        Param("limit", kind="int", default=100, ge=1, le=100, description="Rows to return, from rank 1"),
        retail.INCLUDE_RAW,
    ), rows="entries", response=retail.ChartResponse, summary="The latest best-seller list of a category"),
    Route("/best-sellers/rank/{rank}", rank, (retail.RANK_PARAM, CATEGORY, retail.INCLUDE_RAW),
          response=retail.RankResponse, summary="One rank of a category's latest list"),
    snapshots_route(lambda _: retail.CADENCE_SECONDS, "Stored snapshots of one category or all, newest first",
                    path="/best-sellers/snapshots", select=listed, errors=(404,), params=(
        Param("category", description="Category key (\"us-rock\") or bare category; every category when absent"),
        Param("limit", kind="int", default=50, ge=1, le=1000, description="Snapshots to return, newest first"),
    )),
    Route("/products/{asin}/history", history, (
        retail.ASIN_PARAM,
        Param("category", description="Only this category key (\"us-rock\") or bare category; every category when "
                                      "absent"),
        Param("limit", kind="int", default=100, ge=1, le=10000,
              description="Appearances to return, newest first (the run summary covers all of them)"),
    ), rows="appearances", response=ProductHistory,
        summary="Every snapshot a product appeared in, with rank, price and rating then; first/last seen, best rank"),
)


def _crawl_options() -> tuple[tuple[str, tuple[str, ...]], ...]:
    return (("market", retail.MARKET_CODES), ("category", CATEGORY_SLUGS))


GROUP = Group(
    name=NAME,
    title="Retail physical (Amazon CDs & Vinyl best sellers)",
    description="Amazon's CDs & Vinyl best sellers and their categories (vinyl, genres) per marketplace, 100 ranks "
                "each, crawled daily from the best-seller pages and kept as daily snapshots: latest lists, rank "
                "lookup, snapshots and each product's history by ASIN (rank, price and rating on every day listed).",
    routes=ROUTES,
    charts=CHARTS,
    upstreams=retail.UPSTREAMS,
    targets=targets,
    crawl_options=_crawl_options(),
    # Amazon updates best sellers hourly and states no chart date; one crawl a day (04:10 UTC, night in the US
    # and Europe, midday in Japan) keeps the request count low. The other two retail groups run 30 and 60 min later.
    schedules=(Schedule("10 4 * * *", (), "UTC", "Amazon CDs & Vinyl best sellers: every configured category x "
                                                 "marketplace, daily"),),
    per_upstream=1,
    delay_seconds=retail.delay_seconds,
    settings=(*retail.SETTINGS, CATEGORIES_SETTING),
    entries=EntryMapping(market="target:0", artists=None, ids={"asin": "asin"}),
    storage=Storage(queries=(APPEARANCES, RECORDS_AT)),
)

