"""Sample trend lists for /social-trends, written in the three formats `chartgw.upstreams.x_trends` reads.

* v1.1 `trends/place.json`: as the real captures show it: a one-element list, compact JSON with Twitter's
  escaped slashes (`http:\\/\\/twitter.com\\/search?q=...`) and non-ASCII as `\\u00ED`-style escapes (upper-case
  hex, as in the New York capture), `promoted_content` null, `tweet_volume` an int or null, `as_of`,
  `created_at` and `locations`. One promoted trend (the only guess: `promoted_content` as an object) sits at
  position 3, for the parser to leave out.
* v2 `trends/by/woeid`: `{"data": [{"trend_name", "tweet_count"}]}`, `tweet_count` left out when null.
* trends24.in: one `div.list-container` per hourly snapshot, newest first (the public scrapers' structure).

Names come from a fixed pool (hashtags and topics in several scripts) plus artists and titles of the
shared global song pool; ranks move between variants, and about a third of the trends have no volume.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from html import escape
from urllib.parse import quote_plus

from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples import global_songs
from chartgw.demo.samples.bodies import json_body, stable_number
from chartgw.upstreams.x_trends import (
    LOCATIONS,
    TRENDS24,
    X_API,
    Location,
    trends24_request,
    v1_request,
    v2_request,
)

JSON_TYPE = "application/json; charset=utf-8"
HTML_TYPE = "text/html; charset=utf-8"
SAMPLE_TOKEN = "sample-bearer-token"
"""Any token works against the replay tables: their keys do not include headers."""
PROMOTED_NAME = "#ChartgwPromoted"
PROMOTED_POSITION = 3
SNAPSHOTS = 3
"""Hourly snapshots on a sample trends24 page."""

FIXED_POOL: tuple[str, ...] = (
    "#MúsicaNova", "#NãoDêUnfTagueirosSdv", "#月曜日の朝", "東京ドーム", "#紅白歌合戦", "#케이팝", "뮤직뱅크",
    "#تعليق_الدراسه", "#اقوي_عباره_رومانسيه", "#ПятничныйВечер", "Beyoncé", "Ñoño", "#LiberdadeLiberdade",
    "#PelículasQueHeVistoMilVeces", "#NewMusicFriday", "#Grammys", "Champions League", "#FelizLunes",
    "#OnThisDay", "Taylor's Version", "#BTS", "#SB19", "Eurovision", "#WorldCup", "#Ramadan",
    "#Diwali", "#AMAs", "#MTVEMA", "Coachella", "#Glastonbury", "#ChangeAConsonantSpoilAMovie",
    "Louis C.K.", "#TBT", "Lollapalooza", "#FridayFeeling", "#SuperBowl", "#MondayMotivation",
    "Año Nuevo", "Noël", "#Karneval", "İstanbul", "#ΚαλήΕβδομάδα", "#שבת_שלום", "ส่งท้ายปีเก่า",
)


@dataclass(frozen=True)
class SampleTrend:
    name: str
    tweet_volume: int | None
    promoted: bool = False

    @property
    def query(self) -> str:
        """The query as X encodes it: hashtags and single words bare, several words in quotes."""
        text = f'"{self.name}"' if " " in self.name else self.name
        return quote_plus(text, safe="")

    @property
    def url(self) -> str:
        return f"http://twitter.com/search?q={self.query}"


@cache
def song_trends() -> tuple[str, ...]:
    """Artists and hashtagged titles of the global songs, each once, none repeating the fixed pool."""
    names: dict[str, None] = {}
    for song in global_songs()[:80]:
        tag = "#" + re.sub(r"[^\w]+", "", song.title, flags=re.UNICODE)
        for name in (song.artists[0], tag):
            if name not in FIXED_POOL and len(name) > 2:
                names.setdefault(name, None)
    return tuple(names)


def _order(slug: str, variant: int, size: int) -> list[str]:
    """The names of `slug`'s list at `variant`: the fixed pool and the song names shuffled and interleaved (so
    every list has Unicode names), then per variant some moves and three names from outside the list."""
    rng = random.Random(f"trends/{slug}")
    fixed, songs = list(FIXED_POOL), list(song_trends())
    rng.shuffle(fixed)
    rng.shuffle(songs)
    pool = [name for pair in zip(fixed, songs, strict=False) for name in pair] + songs[len(fixed):]
    size = min(size, len(pool) - 3)
    for _ in range(max(variant, 0)):
        for _ in range(8):
            i = rng.randrange(size)
            pool.insert(max(0, min(size - 1, i + rng.randint(-5, 5))), pool.pop(i))
        for _ in range(3):
            pool.insert(rng.randrange(size), pool.pop(rng.randrange(size, len(pool))))
    return pool[:size]


def _volume(name: str, rank: int, size: int, variant: int) -> int | None:
    """About a third of the names have no volume; the others fall with rank and wobble per variant."""
    if stable_number(name, "volume") % 3 == 0:
        return None
    return 10_000 + (size - rank) * 6_000 + stable_number(name, str(variant)) % 5_000


def trend_rows(slug: str, variant: int = 0, size: int = 50) -> list[SampleTrend]:
    """The organic trends of a location's list, best first (no promoted trend)."""
    names = _order(slug, variant, size)
    return [SampleTrend(name, _volume(name, rank, len(names), variant)) for rank, name in enumerate(names, start=1)]


def with_promoted(rows: list[SampleTrend]) -> list[SampleTrend]:
    """The list as the v1.1 API would send it to us: one promoted trend at PROMOTED_POSITION."""
    result = list(rows)
    result.insert(min(PROMOTED_POSITION - 1, len(result)), SampleTrend(PROMOTED_NAME, None, promoted=True))
    return result


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _twitter_json(payload: object) -> bytes:
    """JSON as the v1.1 API writes it: compact, ASCII with upper-case `\\uXXXX`, slashes escaped."""
    text = json.dumps(payload, ensure_ascii=True, separators=(",", ":"))
    text = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), text)
    return text.replace("/", "\\/").encode("ascii")


def render_v1(where: Location, rows: list[SampleTrend], as_of: datetime, created_at: datetime | None = None) -> bytes:
    """A `trends/place.json` body for `where`: `rows` (promoted ones included as given) and the times."""
    trends = [{"name": row.name, "url": row.url,
               "promoted_content": {"sample": True} if row.promoted else None,
               "query": row.query, "tweet_volume": row.tweet_volume} for row in rows]
    created = created_at if created_at is not None else as_of - timedelta(minutes=7)
    return _twitter_json([{"trends": trends, "as_of": _stamp(as_of), "created_at": _stamp(created),
                           "locations": [{"name": where.name, "woeid": where.woeid}]}])


def render_v2(rows: list[SampleTrend]) -> bytes:
    """A v2 `trends/by/woeid` body: no promoted trends, no times; `tweet_count` only where there is one."""
    data: list[dict[str, object]] = []
    for row in rows:
        if row.promoted:
            continue
        item: dict[str, object] = {"trend_name": row.name}
        if row.tweet_volume is not None:
            item["tweet_count"] = row.tweet_volume
        data.append(item)
    return json_body({"data": data})


def shown_count(volume: int) -> str:
    """The count as trends24 prints it: "845", "12K", "1.2M"."""
    if volume >= 1_000_000:
        return f"{volume / 1_000_000:.1f}M".replace(".0M", "M")
    if volume >= 10_000:
        return f"{volume // 1_000}K"
    if volume >= 1_000:
        return f"{volume / 1_000:.1f}K".replace(".0K", "K")
    return str(volume)


def _trends24_item(row: SampleTrend) -> str:
    href = f"https://twitter.com/search?q={row.query}"
    count = ("<span class=tweet-count></span>" if row.tweet_volume is None else
             f'<span class=tweet-count data-count="{row.tweet_volume}">{shown_count(row.tweet_volume)}</span>')
    return (f'<li><span class=trend-name><a href="{escape(href)}" class=trend-link>{escape(row.name)}</a></span>'
            f"{count}</li>")


def render_trends24(where: Location, snapshots: list[tuple[datetime, list[SampleTrend]]]) -> bytes:
    """A trends24.in page: one list per (time, rows) snapshot in the order given (newest first, as the site)."""
    cards = []
    for moment, rows in snapshots:
        items = "".join(_trends24_item(row) for row in rows if not row.promoted)
        stamp = int(moment.timestamp())
        label = moment.astimezone(UTC).strftime("%H:%M")
        cards.append(f'<div class=list-container><h3 class=title data-timestamp="{stamp}">{label}</h3>'
                     f"<ol class=trend-card__list>{items}</ol></div>\n")
    title = escape(f"{where.name} X Trends | Trends24")
    page = (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
            f'<link rel="canonical" href="https://trends24.in{where.trends24_path}">\n</head>\n<body>\n'
            f'<main><section id=timeline-container><div id=timeline>\n{"".join(cards)}</div></section></main>\n'
            "</body>\n</html>\n")
    return page.encode("utf-8")


def trends24_snapshots(where: Location, when: datetime, variant: int, size: int) -> list[tuple[datetime, list[SampleTrend]]]:
    """SNAPSHOTS hourly lists ending at `when`'s hour, newest first (older ones are earlier variants)."""
    hour = when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return [(hour - timedelta(hours=i), trend_rows(where.slug, variant - i, size)) for i in range(SNAPSHOTS)]


def rate_limit_body() -> bytes:
    """The v1.1 error payload of an exhausted rate limit (code 88)."""
    return json_body({"errors": [{"code": 88, "message": "Rate limit exceeded"}]})


def unauthorized_body() -> bytes:
    """The v1.1 error payload of a bad bearer token (code 89)."""
    return json_body({"errors": [{"code": 89, "message": "Invalid or expired token."}]})


def v2_problem_body(status: int = 401) -> bytes:
    """A v2 problem object (401 Unauthorized, 429 Too Many Requests)."""
    title = {401: "Unauthorized", 429: "Too Many Requests"}.get(status, "Error")
    return json_body({"title": title, "detail": title, "type": "about:blank", "status": status})


def location_replies(where: Location, when: datetime, variant: int = 0, size: int = 50,
                     token: str = SAMPLE_TOKEN) -> dict[str, dict[ReplayKey, Reply]]:
    """Replies to all three requests of one location at `when`, by upstream (the shape `replay_upstreams` takes):
    X_API answers v1.1 (with the promoted trend) and v2, TRENDS24 its page."""
    rows = trend_rows(where.slug, variant, size)
    return {
        X_API: {
            request_key(v1_request(where.woeid, token)): Reply(render_v1(where, with_promoted(rows), when), 200,
                                                               JSON_TYPE),
            request_key(v2_request(where.woeid, token)): Reply(render_v2(rows), 200, JSON_TYPE),
        },
        TRENDS24: {
            request_key(trends24_request(where)): Reply(
                render_trends24(where, trends24_snapshots(where, when, variant, size)), 200, HTML_TYPE),
        },
    }


def all_replies(when: datetime, variant: int = 0, locations: tuple[Location, ...] = LOCATIONS,
                size: int = 50) -> dict[str, dict[ReplayKey, Reply]]:
    """Replies for every location of `locations` (default: the whole table), by upstream."""
    replies: dict[str, dict[ReplayKey, Reply]] = {X_API: {}, TRENDS24: {}}
    for where in locations:
        for upstream, table in location_replies(where, when, variant, size).items():
            replies[upstream].update(table)
    return replies
