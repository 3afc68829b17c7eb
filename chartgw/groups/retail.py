"""What /retail-digital, /retail-music and /retail-physical share: Amazon best-seller lists per
marketplace, keyed by ASIN.

- Settings: the marketplaces (`CHARTGW_RETAIL_MARKETS`), the pause between requests
  (`CHARTGW_RETAIL_DELAY_SECONDS`, jittered by the platform), the browser headers sent
  (`CHARTGW_RETAIL_HEADERS`) and the backoff after failed crawls.
- Targets: `{market}/{chart}` in the store ("us/rock", "us/landing-digital-albums"); the public chart
  key or category key is `{market}-{chart}` ("us-rock"), one path segment.
- When Amazon says no: a robot check, a sign-in wall or the "sorry" 503 is a failed fetch with its own
  reason (never retried, never an empty chart), and the rest of that marketplace's targets in the crawl
  are skipped with a logged reason (`MarketGate`). A marketplace whose crawls keep failing backs off
  exponentially, capped (`Streak`, computed from the recorded crawl runs in the group's own file), and
  /health says why and since when.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

import msgspec

from chartgw.api.catalog import CADENCES, Chart, cadence_of
from chartgw.api.endpoints import ApiError, Call, not_found
from chartgw.api.params import InvalidParams, Param, accepts, literal_error
from chartgw.api.responses import Describe, HealthHead, SnapshotMeta, TargetStatus, records_array, snapshot_meta
from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.core.text import artist_key, search_key, split_artists, title_key
from chartgw.crawl.runner import CrawlContext, CrawlError, CrawlTarget, Fetched
from chartgw.store import (
    Coverage,
    NewSnapshot,
    RunRow,
    SnapshotReader,
    SnapshotRow,
    StoredEntry,
    glob_escape,
    group_db_path,
    iso,
    parse_iso,
    read_once,
    tables,
)
from chartgw.store.targets import TargetKey
from chartgw.upstreams import amazon
from chartgw.upstreams.amazon import AmazonPageError, RetailEntry, RetailItem, RetailRaw

CADENCE_SECONDS = CADENCES["daily"]
"""Every list is crawled once a day (the groups' Schedules say when)."""
GRID_ROWS = 2 * amazon.PAGE_SIZE
"""Pages 1 and 2 of a category grid: a whole list has 100 ranks, a shorter crawl fails."""
CAROUSEL_ROWS = 20
"""A landing carousel's ranked list (the real capture has 20 in each)."""
SKIPPED = "skipped"
"""How a skipped target's fetch-log error starts; skipped rows are not attempts (the backoff ignores them)."""
RUNS_READ = 200
"""Recorded crawl runs read to find each marketplace's failure streak."""

# --- settings -----------------------------------------------------------------------------------------------


BUILTIN_HEADERS = "chrome"


def parse_headers(value: str) -> tuple[tuple[str, str], ...]:
    """`chrome` (a current desktop Chrome's navigation headers), or `Name: value` pairs separated by `|`."""
    if value.strip().lower() == BUILTIN_HEADERS:
        return amazon.DEFAULT_HEADERS
    pairs = []
    for part in value.split("|"):
        name, colon, text = part.partition(":")
        if not colon or not name.strip() or not text.strip() or any(c.isspace() for c in name.strip()):
            raise ValueError(f"headers are 'Name: value' pairs separated by '|' (or 'chrome'), got {part.strip()!r}")
        pairs.append((name.strip(), text.strip()))
    if not any(name.lower() == "user-agent" for name, _ in pairs):
        raise ValueError("the headers must include a User-Agent")
    return tuple(pairs)


MARKETS_SETTING = config.Setting(
    "RETAIL_MARKETS", ",".join(amazon.DEFAULT_MARKETS),
    f"Amazon marketplaces the /retail-* groups crawl and serve ({', '.join(amazon.MARKETPLACES)})",
    config.subset(amazon.MARKETPLACES, "marketplace", lower=True))
DELAY_SETTING = config.Setting(
    "RETAIL_DELAY_SECONDS", "5", "pause after each Amazon request, plus up to 50% jitter (one request in flight "
    "per marketplace)", config.seconds)
HEADERS_SETTING = config.Setting(
    "RETAIL_HEADERS", BUILTIN_HEADERS, "request headers sent to Amazon: `chrome` (a desktop Chrome's) or "
    "`Name: value|Name: value` (Accept-Language is always the marketplace's own)", parse_headers)
BACKOFF_SETTING = config.Setting(
    "RETAIL_BACKOFF_HOURS", "20", "after N failed crawls of a marketplace in a row, skip it for this many hours "
    "times 2^(N-1)", config.bounded_int(1, 720))
BACKOFF_MAX_SETTING = config.Setting(
    "RETAIL_BACKOFF_MAX_HOURS", "160", "the longest a failing marketplace is skipped (under a week, so a daily "
    "crawl tries weekly)", config.bounded_int(1, 2160))
SETTINGS: tuple[config.Setting[Any], ...] = (MARKETS_SETTING, DELAY_SETTING, HEADERS_SETTING, BACKOFF_SETTING,
                                            BACKOFF_MAX_SETTING)
UPSTREAMS: tuple[str, ...] = tuple(m.upstream for m in amazon.MARKETPLACES.values())
MARKET_CODES: tuple[str, ...] = tuple(amazon.MARKETPLACES)


def delay_seconds(settings: Settings) -> float:
    """The retail groups' pause after each request (`Group.delay_seconds`)."""
    return settings.get(DELAY_SETTING)


def check_market(market: str | None, settings: Settings) -> None:
    """A crawl selection naming a marketplace that is not configured is an error, as a 422 item (a bad
    CHARTGW_RETAIL_MARKETS is a SettingError: a 503 or a crawl exit 1)."""
    configured = settings.get(MARKETS_SETTING)
    if market is not None and market not in configured:
        raise InvalidParams([literal_error(["query", "market"], market, configured)])


# --- targets and keys ---------------------------------------------------------------------------------------


TARGET = TargetKey(("market", "chart"))
"""A list's snapshot target: its marketplace, then its list ("us/rock", "us/landing-digital-albums")."""


def target_of(market: str, chart: str) -> str:
    """The snapshot target of a chart: "us/rock", "us/landing-digital-albums"."""
    return f"{market}/{chart}"


def key_of(target: str) -> str:
    """The public key of a target: "us/rock" -> "us-rock"."""
    return target.replace("/", "-", 1)


def split_key(key: str) -> tuple[str, str] | None:
    """(market, chart) of a public key "us-rock"; None when it does not start with a known marketplace."""
    market, dash, chart = key.partition("-")
    if not dash or not chart or market not in amazon.MARKETPLACES:
        return None
    return market, chart


def split_target(target: str) -> tuple[str, str]:
    market, _, chart = target.partition("@")[0].partition("/")
    return market, chart


def market_pattern(market: str | None = None) -> str:
    return f"{glob_escape(market)}/*" if market else "*/*"


# --- records ------------------------------------------------------------------------------------------------

_encode = msgspec.json.Encoder().encode


def stored(entry: RetailEntry) -> StoredEntry:
    """One entry as the store keeps it: the ASIN as item id, title and artist keys for search and the
    artist-history index. A rank the page lists without a card has neither (empty keys match nothing); the
    ASIN is searchable too."""
    artists = split_artists(entry.artist) if entry.artist else []
    search = search_key(entry.title or "", artists)
    return StoredEntry(entry.rank, title_key(entry.title) if entry.title else "",
                       artist_key(artists[0]) if artists else "", entry.asin, _encode(entry),
                       f"{search}|{entry.asin.lower()}")


NAMES: tuple[str, ...] = ()
"""What the platform's snapshot check requires of every entry: nothing, since ranks the page lists without a
card have no title or artist, and landing cards no artist. `check_cards` requires a title of every card."""


def check_cards(entries: list[RetailEntry], market: str, where: str) -> None:
    """Every rendered card has a title (the card's product link or image text); one without means the card
    markup moved."""
    for entry in entries:
        if entry.has_card and not entry.title:
            raise AmazonPageError("layout_gone", market, f"{where}: card #{entry.rank} ({entry.asin}) has no title")


class RetailListing(RetailItem, kw_only=True, omit_defaults=True):
    """An entry as served: `raw` (the verbatim texts it was read from) only where asked for."""

    raw: RetailRaw | None = None


_items = msgspec.json.Decoder(list[RetailItem])
_item = msgspec.json.Decoder(RetailItem)


def without_raw(records: list[bytes]) -> list[Any]:
    """Stored records re-encoded without their `raw` part, spliced into a response's entries."""
    if not records:
        return []
    return cast(list[Any], msgspec.Raw(_encode(_items.decode(b"[" + b",".join(records) + b"]"))))


def one_record(record: bytes, include_raw: bool) -> Any:
    return msgspec.Raw(record if include_raw else _encode(_item.decode(record)))


def listing(records: list[bytes], include_raw: bool) -> list[Any]:
    if include_raw:
        return records_array(records)
    return without_raw(records)


# --- the crawl gate: stop a marketplace after its first refusal ------------------------------------------------


@dataclass
class MarketGate:
    """One crawl's view of each marketplace: once one says no (or is backing off), the crawl asks it nothing more.

    The check runs where a request is about to go out, after the marketplace's one request slot is taken
    (`GatedHeaders`), so a target queued behind the refused one is skipped, not sent.
    """

    blocked: dict[str, str] = field(default_factory=dict)
    headers: tuple[tuple[str, str], ...] = ()
    """The crawl's base request headers (CHARTGW_RETAIL_HEADERS), under the browser's."""

    def block(self, market: str, why: str) -> None:
        self.blocked.setdefault(market, why)

    def check(self, market: str) -> None:
        why = self.blocked.get(market)
        if why is not None:
            raise CrawlError(f"{SKIPPED}: {why}")

    def refusal(self, market: str, key: str) -> Callable[[int, bytes], str | None]:
        """`CrawlTarget.refusal`: a non-200 answer that is a refusal page is its reason (never retried); a
        blocking one (robot check, sign-in wall, sorry 503) also closes the marketplace for this crawl."""

        def read(status: int, body: bytes) -> str | None:
            found = amazon.refusal_reason(body, status)
            if found is None:
                return None
            reason, detail = found
            if reason in amazon.BLOCKING_REASONS:
                self.block(market, f"amazon {market} answered {reason} to {key} earlier in this crawl")
            return f"{reason}: {detail}"

        return read

    def saw(self, market: str, key: str, exc: AmazonPageError) -> None:
        """A refusal page that came as a 200 (a sign-in wall, some robot checks), found by the parser."""
        if exc.reason in amazon.BLOCKING_REASONS:
            self.block(market, f"amazon {market} answered {exc.reason} to {key} earlier in this crawl")


class GatedHeaders(tuple[tuple[str, str], ...]):
    """A request's headers that consult the crawl's gate whenever they are read. The fetcher reads them right
    before sending, holding the marketplace's request slot: a closed marketplace fails the request there
    with the gate's "skipped: ..." reason and nothing is sent."""

    gate: MarketGate
    market: str

    def __new__(cls, items: Iterable[tuple[str, str]], gate: MarketGate, market: str) -> GatedHeaders:
        made = super().__new__(cls, items)
        made.gate = gate
        made.market = market
        return made

    def __iter__(self) -> Iterator[tuple[str, str]]:
        self.gate.check(self.market)
        return super().__iter__()


def request_headers(market: str, gate: MarketGate) -> GatedHeaders:
    return GatedHeaders(amazon.browser_headers(market, gate.headers), gate, market)


def _snapshot(key: str, entries: list[RetailEntry], fetched: list[Fetched], ctx: CrawlContext,
              meta: dict[str, Any]) -> NewSnapshot:
    return NewSnapshot(target=key, chart_date=ctx.now.date().isoformat(), chart_hour=None, fetched_at=ctx.now,
                       source=fetched[0].url, entries=[stored(e) for e in entries], meta=_encode(meta))


def grid_target(group: amazon.Group, market: str, slug: str, gate: MarketGate, chart: str | None = None) -> CrawlTarget:
    """Pages 1 and 2 of a category list: one snapshot of exactly 100 ranks."""
    key = target_of(market, chart or slug)
    path = amazon.category_path(market, group, slug)
    requests = amazon.grid_requests(market, group, slug, headers=request_headers(market, gate))

    def build(fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
        try:
            parsed = amazon.parse_grid(market, [f.body for f in fetched], expected_path=path)
        except AmazonPageError as exc:
            gate.saw(market, key, exc)
            raise
        check_cards(parsed.entries, market, key)
        meta = {"category": slug, "path": path, "heading": parsed.category_name,
                "name": amazon.category(group, slug).name}
        return [_snapshot(key, parsed.entries, fetched, ctx, meta)]

    return CrawlTarget(key, tuple(requests), build, GRID_ROWS, gate.refusal(market, key), names=NAMES)


LANDING = "landing"


def carousel_chart(market: str, path: str) -> str:
    """The chart of a landing carousel: "landing-" and the table's category slug for its list, else its path."""
    found = amazon.category_for_path(market, path)
    slug = found.slug if found is not None else "-".join(p for p in path.replace("_", "-").split("/") if p)
    return f"{LANDING}-{slug}"


def landing_target(market: str, gate: MarketGate) -> CrawlTarget:
    """The marketplace's best-sellers landing page: one snapshot per category carousel (20 ranks each)."""
    key = target_of(market, LANDING)
    request = amazon.landing_request(market, headers=request_headers(market, gate))

    def build(fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
        try:
            page = amazon.parse_landing(fetched[0].body, market)
        except AmazonPageError as exc:
            gate.saw(market, key, exc)
            raise
        snapshots: list[NewSnapshot] = []
        for carousel in page.carousels:
            if len(carousel.entries) != CAROUSEL_ROWS:
                raise AmazonPageError("truncated", market, f"carousel {carousel.heading!r} lists "
                                                           f"{len(carousel.entries)} ranks, not {CAROUSEL_ROWS}")
            check_cards(carousel.entries, market, f"{key} {carousel.heading!r}")
            chart = carousel_chart(market, carousel.category_path)
            if any(s.target == target_of(market, chart) for s in snapshots):  # two carousels of one list
                chart = f"{chart}-{len(snapshots) + 1}"
            meta = {"category": chart, "path": carousel.category_path, "heading": carousel.heading,
                    "name": carousel.name}
            snapshots.append(_snapshot(target_of(market, chart), carousel.entries, fetched, ctx, meta))
        return snapshots

    return CrawlTarget(key, (request,), build, None, gate.refusal(market, key), names=NAMES)


# --- failure streaks and backoff ------------------------------------------------------------------------------


class _Outcome(msgspec.Struct):
    target: str
    status: str
    error: str | None = None


class _Detail(msgspec.Struct):
    outcomes: list[_Outcome]


_detail = msgspec.json.Decoder(_Detail)


def reason_of(error: str | None) -> str:
    """The reason code in a failed fetch-log message: one of amazon.REASONS, else "http_error" or "other"."""
    text = error or ""
    for reason in amazon.REASONS:
        if f"{reason}:" in text:
            return reason
    if "answered HTTP" in text or "Error:" in text:
        return "http_error"
    if "expected " in text and " rows" in text:
        return "truncated"
    return "other"


@dataclass(frozen=True)
class Streak:
    """A marketplace's run of failed crawls, newest first: none of its targets committed in each."""

    market: str
    failures: int
    reason: str | None
    """The latest failure's reason code (robot_check, sign_in, sorry_503, layout_gone, http_error, ...)."""
    error: str | None
    since: str | None
    """When the first failed crawl of the run started."""
    last_failure: str | None
    last_ok: str | None

    def retry_after(self, base_hours: int, max_hours: int) -> datetime | None:
        """Until when the marketplace is skipped: base x 2^(failures-1) hours after the last failure, capped."""
        if not self.failures or self.last_failure is None:
            return None
        hours = min(base_hours * 2 ** min(self.failures - 1, 20), max_hours)
        return parse_iso(self.last_failure) + timedelta(hours=hours)


def streaks(runs: Iterable[tuple[str, bytes]], wanted: Sequence[str]) -> dict[str, Streak]:
    """Each marketplace's failure streak from recorded crawl runs (started_at, detail JSON), newest first.
    A run counts for a marketplace when it attempted one of its targets (skipped ones are not attempts)."""
    state: dict[str, dict[str, Any]] = {m: {"failures": 0, "done": False} for m in wanted}
    for started, detail in runs:
        try:
            outcomes = _detail.decode(detail).outcomes
        except msgspec.DecodeError:
            continue
        for market, seen in state.items():
            if seen["done"]:
                continue
            tried = [o for o in outcomes if split_target(o.target)[0] == market
                     and not (o.status == "failed" and (o.error or "").startswith(SKIPPED))]
            if not tried:
                continue
            if any(o.status == "ok" for o in tried):
                seen["done"], seen["last_ok"] = True, started
                continue
            if not seen["failures"]:
                refused = next((o for o in tried if reason_of(o.error) in amazon.BLOCKING_REASONS), tried[0])
                seen["error"], seen["last_failure"] = refused.error, started
            seen["failures"] += 1
            seen["since"] = started
        if all(s["done"] for s in state.values()):
            break
    return {m: Streak(m, s["failures"], reason_of(s.get("error")) if s["failures"] else None, s.get("error"),
                      s.get("since"), s.get("last_failure"), s.get("last_ok")) for m, s in state.items()}


def stored_streaks(group: str, wanted: Sequence[str], settings: Settings) -> dict[str, Streak]:
    """The streaks recorded in the group's file, read at crawl time (no file yet: no failures)."""
    runs = [RunRow(*row) for row in read_once(group_db_path(group, settings), tables.RUNS, ("crawl", RUNS_READ)) or []]
    return streaks(((r.started_at, r.detail) for r in runs), wanted)


def open_gate(group: str, now: datetime, settings: Settings) -> MarketGate:
    """A new crawl's gate over the configured marketplaces: those still inside their backoff window are closed
    from the start."""
    gate = MarketGate(headers=settings.get(HEADERS_SETTING))
    base, cap = settings.get(BACKOFF_SETTING), settings.get(BACKOFF_MAX_SETTING)
    for market, streak in stored_streaks(group, settings.get(MARKETS_SETTING), settings).items():
        until = streak.retry_after(base, cap)
        if until is not None and now < until:
            gate.block(market, f"amazon {market} is backing off after {streak.failures} failed crawl(s) in a row "
                               f"since {streak.since} (last: {streak.reason}); next attempt after {iso(until)}")
    return gate


# --- responses ----------------------------------------------------------------------------------------------


class MarketHealth(msgspec.Struct):
    """How one configured marketplace's crawls are going."""

    market: str
    host: str
    state: str
    """"ok"; "failing" (its last crawl failed; it is tried again at the next crawl); "backing_off" (skipped
    until retry_after)."""
    consecutive_failures: int
    reason: str | None
    """Why the latest crawl failed: robot_check, sign_in, sorry_503, layout_gone, truncated, wrong_page, empty,
    http_error, other."""
    error: str | None
    since: str | None
    """When the first of the failed crawls in a row started."""
    last_failure: str | None
    last_ok: str | None
    retry_after: str | None


class RetailHealth(HealthHead):
    markets: list[MarketHealth]
    targets: list[TargetStatus]


async def market_health(reader: SnapshotReader, now: datetime, settings: Settings) -> list[MarketHealth]:
    runs = await reader.runs("crawl", RUNS_READ)
    base, cap = settings.get(BACKOFF_SETTING), settings.get(BACKOFF_MAX_SETTING)
    found = streaks(((r.started_at, r.detail) for r in runs), settings.get(MARKETS_SETTING))
    answer = []
    for market, streak in found.items():
        until = streak.retry_after(base, cap)
        state = "ok" if not streak.failures else "backing_off" if until is not None and now < until else "failing"
        answer.append(MarketHealth(market, amazon.MARKETPLACES[market].host, state, streak.failures, streak.reason,
                                   streak.error, streak.since, streak.last_failure, streak.last_ok,
                                   iso(until) if until is not None and state == "backing_off" else None))
    return answer


def describe_health(service: str) -> Describe:
    async def describe(call: Call, status: str, statuses: list[TargetStatus]) -> HealthHead:
        health = await market_health(call.data.reader, call.now, call.settings)
        if any(m.state != "ok" for m in health):
            status = "degraded"
        return RetailHealth(status, service, health, statuses)

    return describe


class ChartResponse(msgspec.Struct):
    """One list's latest snapshot."""

    key: str
    """The chart or category key: marketplace and category ("us-rock")."""
    market: str
    category: str
    name: str | None
    """The category's name as the page heads it."""
    snapshot: SnapshotMeta
    count: int
    entries: list[RetailListing]


class RankResponse(msgspec.Struct):
    key: str
    market: str
    category: str
    snapshot: SnapshotMeta
    entry: RetailListing


class _Meta(msgspec.Struct):
    heading: str | None = None
    name: str | None = None


_meta = msgspec.json.Decoder(_Meta)


def held_span(held: Coverage | None) -> tuple[int, str | None, str | None, str | None]:
    """(snapshots, first and last chart date, last fetch) of a target's coverage; nothing held: (0, None, ...)."""
    return (held.snapshots, held.first, held.last, held.last_fetched_at) if held else (0, None, None, None)


def snapshot_name(row: SnapshotRow) -> str | None:
    """The list's name as the page printed it (kept in the snapshot's meta)."""
    if row.meta is None:
        return None
    meta = _meta.decode(row.meta)
    return meta.name or meta.heading


async def latest_row(reader: SnapshotReader, target: str, key: str, where: str) -> SnapshotRow:
    row = await reader.latest(target)
    if row is None:
        raise not_found(f"No snapshot of {key} yet; see {where} for what there is")
    return row


async def chart_response(call: Call, target: str, where: str, limit: int, include_raw: bool) -> ChartResponse:
    reader = call.data.reader
    key = key_of(target)
    row = await latest_row(reader, target, key, where)
    records = await reader.records(row.id, limit)
    market, chart = split_target(target)
    return ChartResponse(key, market, chart, snapshot_name(row),
                         snapshot_meta(row, CADENCE_SECONDS, call.now), len(records), listing(records, include_raw))


async def rank_response(call: Call, target: str, where: str, rank: int, include_raw: bool) -> RankResponse:
    reader = call.data.reader
    key = key_of(target)
    row = await latest_row(reader, target, key, where)
    found = await reader.record_at_rank(row.id, rank)
    if found is None:
        raise not_found(f"Rank {rank} is past the {row.row_count} rows of {key}'s latest snapshot")
    market, chart = split_target(target)
    return RankResponse(key, market, chart, snapshot_meta(row, CADENCE_SECONDS, call.now),
                        one_record(found, include_raw))


def chart_cadence(charts: tuple[Chart, ...]) -> Callable[[str], int]:
    """The cadence of a target of one of these charts (`chartgw.api.catalog.cadence_of`)."""
    return lambda target: cadence_of(charts, target)


@accepts(pattern=f"^{amazon.ASIN.pattern}$")
def valid_asin(value: str) -> str:
    if not amazon.is_asin(value):
        raise ValueError("an ASIN is 10 characters of A-Z and 0-9, such as B0CHX1W1XY")
    return value


ASIN_PARAM = Param("asin", "path", check=valid_asin, description="Amazon product id: 10 characters of A-Z and 0-9")
RANK_PARAM = Param("rank", "path", kind="int", ge=1, le=GRID_ROWS, description="Rank, 1-100")
INCLUDE_RAW = Param("include_raw", kind="bool", default=False,
                    description="Add each entry's `raw`: the badge, link, rating and review texts as printed and "
                                "its item in the page's ranked JSON list")


def unknown(what: str, value: str, where: str) -> ApiError:
    return not_found(f"Unknown {what} {value!r}; {where} lists them")


