"""Sample Chartmetric answers for /short-video: the token exchange and TikTok tracks chart pages, built from
the fields documentation and public client code name (no real response is captured; see
`chartgw.upstreams.chartmetric`).

A chart page is `{"obj": {"length": <chart length>, "data": [<rows offset..offset+limit>]}}`; rows carry
`rank, pre_rank (null for a new entry), peak_rank, peak_date, time_on_chart, name, tiktok_artist_names,
isrc (some lower-case, some null), cm_track, tiktok_track_id, tiktok_track_ids, album_*, release_dates,
image_url, posts, views, views_prev, added_at, rankStats`. Songs come from the shared global pool; ids,
counts and artwork are made up but stable per song, so one song keeps its sound id across countries and dates.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, timedelta
from typing import Any

from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples import GlobalSong, SampleRow, global_rows
from chartgw.demo.samples.bodies import json_body, stable_hex, stable_number
from chartgw.upstreams.chartmetric import PAGE_SIZE, page_offsets, token_request, tracks_request

JSON_TYPE = "application/json; charset=utf-8"
SAMPLE_REFRESH_TOKEN = "sample-refresh-token"
SAMPLE_ACCESS_TOKEN = "sample-access-token"
TOKEN_LIFETIME = 3600
CHART_SIZE = 100
"""Rows of a sample chart (two pages at a page size of 50)."""


# --- token ------------------------------------------------------------------------------------------------


def token_body(token: str = SAMPLE_ACCESS_TOKEN, expires_in: int = TOKEN_LIFETIME,
               refresh_token: str = SAMPLE_REFRESH_TOKEN) -> bytes:
    """The token exchange's answer in the documented shape."""
    return json_body({"token": token, "expires_in": expires_in, "refresh_token": refresh_token, "scope": ""})


def unauthorized_body() -> bytes:
    """What we answer for an expired or wrong token (shape guessed: Chartmetric's is not documented)."""
    return json_body({"error": "Unauthorized: token expired or invalid"})


def token_replies(refresh_token: str = SAMPLE_REFRESH_TOKEN, token: str = SAMPLE_ACCESS_TOKEN,
                  expires_in: int = TOKEN_LIFETIME) -> dict[ReplayKey, Reply]:
    """The reply to the token exchange of `refresh_token` (a wrong refresh token gets the replay 404)."""
    return {request_key(token_request(refresh_token)): Reply(token_body(token, expires_in, refresh_token), 200,
                                                             JSON_TYPE)}


# --- chart rows -------------------------------------------------------------------------------------------


def chart_rows(code2: str | None, interval: str, variant: int = 0,
               size: int = CHART_SIZE) -> list[SampleRow[GlobalSong]]:
    """The rows of one country's (None: global) chart of `interval` at `variant`."""
    return global_rows(f"tiktok/{(code2 or 'global').lower()}/{interval}", variant, size)


def sound_id(song: GlobalSong, which: str = "") -> str:
    """A 19-digit TikTok sound id, stable per song."""
    return f"7{stable_number(song.title, 'sound', which) % 10**9:09d}{stable_number(*song.artists, which) % 10**9:09d}"


def cm_track(song: GlobalSong) -> int:
    return 10_000_000 + stable_number(song.title, *song.artists, "cm") % 90_000_000


def isrc(song: GlobalSong) -> str | None:
    """An ISRC in the real layout (CC-XXX-YY-NNNNN): Korean extras KR, others US/GB; one song in 15 has none,
    one in 5 is sent in lower case (both occur in public fixtures)."""
    number = stable_number(song.title, *song.artists, "isrc")
    if number % 15 == 0:
        return None
    country = "KR" if song.spotify_id is None else ("US", "GB", "QZ")[number % 3]
    code = f"{country}{stable_hex(song.title, 'registrant', digits=3).upper()}{20 + number % 5}{number % 100_000:05d}"
    return code.lower() if number % 5 == 0 else code


def _period(interval: str) -> timedelta:
    return timedelta(days=7 if interval == "weekly" else 1)


def render_item(row: SampleRow[GlobalSong], chart_date: date, interval: str, variant: int) -> dict[str, Any]:
    """One `obj.data` row, keys in the order the Go client's struct lists them."""
    song = row.song
    number = stable_number(song.title, "tiktok")
    posts = (2_000_000 // row.rank + number % 10_000) * (7 if interval == "weekly" else 1)
    views = posts * (150 + number % 300)
    sounds = [sound_id(song)] + ([sound_id(song, "sped-up")] if number % 4 == 0 else [])
    new = row.previous_rank is None
    peak_rank = row.rank if new else min(row.rank, row.previous_rank or row.rank, 1 + number % row.rank)
    peak_date = chart_date if peak_rank == row.rank else chart_date - _period(interval) * (1 + number % 3)
    added_at = f"{chart_date.isoformat()}T00:00:00.000Z"
    release = date(2023, 1, 6) + timedelta(days=number % 600)
    stats = [{"rank": row.rank, "posts": posts, "timestp": added_at}]
    if row.previous_rank is not None:
        before = chart_date - _period(interval)
        stats.append({"rank": row.previous_rank, "posts": posts - number % 5_000,
                      "timestp": f"{before.isoformat()}T00:00:00.000Z"})
    token = stable_hex(song.title, "cover", digits=8)
    return {
        "tiktok_track_id": sounds[0],
        "name": song.title,
        "isrc": isrc(song),
        "image_url": f"https://p16-sg.tiktokcdn.com/aweme/720x720/tos-alisg-v-2774/{token}.jpeg",
        "cm_track": cm_track(song),
        "tiktok_artist_names": list(song.artists),
        "tiktok_track_ids": sounds,
        "album_ids": [20_000_000 + stable_number(song.title, "album") % 9_000_000],
        "album_names": [song.title] if number % 7 else [],
        "album_upc": [f"{stable_number(song.title, 'upc') % 10**12:012d}"],
        "album_label": [song.label] if song.label else [],
        "release_dates": [f"{release.isoformat()}T00:00:00.000Z"],
        "rank": row.rank,
        "posts": posts,
        "added_at": added_at,
        "pre_rank": row.previous_rank,
        "peak_rank": peak_rank,
        "peak_date": f"{peak_date.isoformat()}T00:00:00.000Z",
        "time_on_chart": 1 if new else 2 + number % 30 + variant,
        "rankStats": stats,
        "views": views,
        "views_prev": views - number % 100_000,
    }


def render_page(rows: list[SampleRow[GlobalSong]], chart_date: date, interval: str, variant: int, offset: int,
                limit: int) -> bytes:
    """The page `offset..offset+limit` of a chart of `rows`, with the whole chart's length."""
    data = [render_item(row, chart_date, interval, variant) for row in rows[offset:offset + limit]]
    return json_body({"obj": {"length": len(rows), "data": data}})


def chart_replies(code2: str | None, interval: str, chart_date: date, variant: int = 0, size: int = CHART_SIZE,
                  page_size: int = PAGE_SIZE, token: str = SAMPLE_ACCESS_TOKEN) -> dict[ReplayKey, Reply]:
    """Replies to every page request of one chart (offsets 0, page_size, ... below `size`)."""
    rows = chart_rows(code2, interval, variant, size)
    replies: dict[ReplayKey, Reply] = {}
    for offset in page_offsets(len(rows), page_size):
        request = tracks_request(token, chart_date.isoformat(), interval, code2, page_size, offset)
        body = render_page(rows, chart_date, interval, variant, offset, page_size)
        replies[request_key(request)] = Reply(body, 200, JSON_TYPE)
    return replies


def all_replies(charts: Iterable[tuple[date, int]], countries: Iterable[str | None],
                intervals: Iterable[str] = ("daily", "weekly"), size: int = CHART_SIZE,
                page_size: int = PAGE_SIZE) -> dict[ReplayKey, Reply]:
    """The token exchange plus every page of every (date, variant) x country x interval chart."""
    replies = token_replies()
    country_list, interval_list = list(countries), list(intervals)
    for chart_date, variant in charts:
        for code2 in country_list:
            for interval in interval_list:
                replies.update(chart_replies(code2, interval, chart_date, variant, size, page_size))
    return replies
