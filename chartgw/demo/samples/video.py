"""YouTube charts `browse` payloads, written in the shape public client code reads (NOTES section 2).

No raw youtubei capture exists anywhere, so this renderer is the only source of our payloads: the
paths are the documented ones (`contents.sectionListRenderer.contents[0].musicAnalyticsSectionRenderer
.content` with `trackTypes[0].trackViews[]`, `videos[0].videoViews[]`, `artists[0].artistViews[]`,
`chartEntryMetadata`, `perspectiveMetadata.availableChartsInfo[]`), view counts are digit strings and
`previousPosition` of a new entry is left out or 0 (both occur). Songs come from the shared global
pool; video ids, KG mids, channel ids and thumbnails are made up but stable and in the real formats.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from chartgw.core.countries import GLOBAL
from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples import GlobalSong, SampleRow, global_rows
from chartgw.demo.samples.bodies import json_body, stable_number
from chartgw.upstreams import youtube
from chartgw.upstreams.youtube import latest_week_end, past_week_ends

JSON_TYPE = "application/json; charset=UTF-8"
SIZES = {"top-songs": 100, "top-videos": 100, "top-artists": 100, "trending": 30, "shorts": 50}
"""Rows our sample charts have (the top charts' 100 is the real size; trending and shorts are ours)."""
BACKFILL_WEEKS = 4


def video_id(*parts: str) -> str:
    """An 11-character YouTube-style video id, stable per `parts`."""
    digest = hashlib.sha256("|".join(parts).encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()[:11]


def kg_mid(name: str) -> str:
    return f"/m/0{video_id('mid', name)[:6].lower().replace('-', 'x').replace('_', 'z')}"


def channel_id(name: str) -> str:
    return "UC" + (video_id("channel", name) + video_id("channel2", name))[:22]


def chart_end_date(period: str, today: date) -> str:
    """The end date of the newest chart of `period` on `today`: yesterday (daily) or last Thursday (weekly)."""
    return (today - timedelta(days=1) if period == "daily" else latest_week_end(today)).isoformat()


def _thumbnails(vid: str) -> dict[str, Any]:
    return {"thumbnails": [{"url": f"https://i.ytimg.com/vi/{vid}/default.jpg", "width": 120, "height": 90},
                           {"url": f"https://i.ytimg.com/vi/{vid}/mqdefault.jpg", "width": 320, "height": 180}]}


def _entry_metadata(row: SampleRow[GlobalSong], key: str) -> dict[str, Any]:
    """`chartEntryMetadata`; a new entry has no previousPosition (odd ranks) or 0 (even ranks)."""
    meta: dict[str, Any] = {"currentPosition": row.rank}
    if row.previous_rank is None:
        if row.rank % 2 == 0:
            meta["previousPosition"] = 0
        meta["periodsOnChart"] = 1
    else:
        meta["previousPosition"] = row.previous_rank
        meta["periodsOnChart"] = 2 + stable_number(key, row.song.title) % 40
        meta["percentViewsChange"] = round((stable_number("change", key, row.song.title) % 2001 - 1000) / 10, 1)
    return meta


def _views(row: SampleRow[GlobalSong], key: str) -> str:
    base = row.song.streams or 2_000_000 + stable_number(key, row.song.title) % 1_000_000
    return str(base // 3 + (101 - row.rank) * 1000)


def _track_view(row: SampleRow[GlobalSong], key: str) -> dict[str, Any]:
    song = row.song
    vid = video_id("video", song.title, *song.artists)
    view: dict[str, Any] = {
        "name": song.title,
        "artists": [{"name": a, "kgMid": kg_mid(a)} for a in song.artists],
        "encryptedVideoId": vid,
        "viewCount": _views(row, key),
        "thumbnail": {"thumbnails": [{"url": f"https://lh3.googleusercontent.com/{video_id('art', vid)}=w60-h60-l90-rj",
                                      "width": 60, "height": 60},
                                     {"url": f"https://lh3.googleusercontent.com/{video_id('art', vid)}=w226-h226-l90-rj",
                                      "width": 226, "height": 226}]},
        "sublabel": song.label or "",
        "chartEntryMetadata": _entry_metadata(row, key),
    }
    if song.spotify_id:  # the Korean extras have no art track in our pool
        view["atvExternalVideoId"] = video_id("atv", vid)
    number = stable_number("release", song.title)
    view["releaseDate"] = {"year": 2015 + number % 10, "month": 1 + number % 12, "day": 1 + number % 28}
    return view


def _video_view(row: SampleRow[GlobalSong], key: str, trending: bool) -> dict[str, Any]:
    song = row.song
    vid = video_id("trending" if trending else "video", song.title, *song.artists)
    suffix = " (Official Lyric Video)" if trending else " (Official Music Video)"
    return {
        "id": vid,
        "title": f"{song.artists[0]} - {song.title}{suffix}",
        "channelName": song.artists[0],
        "externalChannelId": channel_id(song.artists[0]),
        "videoDuration": 120 + stable_number("duration", song.title) % 180,
        "viewCount": _views(row, key),
        "artists": [{"name": a, "kgMid": kg_mid(a)} for a in song.artists],
        "thumbnail": _thumbnails(vid),
        "chartEntryMetadata": _entry_metadata(row, key),
    }


def _artist_views(key: str, variant: int, size: int) -> list[dict[str, Any]]:
    """Artists in the order their songs chart, each once, previous ranks from the chart before."""
    def order(v: int) -> list[str]:
        names = [a for row in global_rows(key, v, 217) for a in row.song.artists]
        return list(dict.fromkeys(names))[:size]

    previous = {name: rank for rank, name in enumerate(order(variant - 1) if variant else [], start=1)}
    views = []
    for rank, name in enumerate(order(variant), start=1):
        meta: dict[str, Any] = {"currentPosition": rank, "periodsOnChart": 1 + stable_number("weeks", name) % 60}
        if name in previous:
            meta["previousPosition"] = previous[name]
            meta["percentViewsChange"] = round((stable_number("change", key, name) % 801 - 400) / 10, 1)
        views.append({
            "name": name,
            "id": kg_mid(name),
            "externalChannelId": channel_id(name),
            "viewCount": str(40_000_000 - rank * 250_000 + stable_number(key, name) % 100_000),
            "thumbnail": {"thumbnails": [{"url": f"https://yt3.ggpht.com/{channel_id(name)}=s88-c-k-c0x00ffffff-no-rj",
                                          "width": 88, "height": 88}]},
            "chartEntryMetadata": meta,
        })
    return views


class Chart(Protocol):
    """What the renderer needs of a /video chart."""

    @property
    def chart_type(self) -> str: ...

    @property
    def period(self) -> str: ...

    @property
    def country(self) -> str: ...

    @property
    def target(self) -> str: ...


@dataclass(frozen=True)
class SampleChart:
    chart_type: str
    period: str
    country: str

    @property
    def target(self) -> str:
        return f"{self.chart_type}/{self.period}/{self.country}"


def render(chart: Chart, end_date: str, variant: int = 0, size: int | None = None) -> bytes:
    """The browse payload of `chart` ending `end_date`; `variant` n+1 is the chart after n."""
    kind = youtube.CHART_KINDS[chart.chart_type]
    size = size or SIZES[chart.chart_type]
    key = chart.target
    period_type = f"CHART_PERIOD_TYPE_{chart.period.upper()}"
    content: dict[str, Any] = {}
    if kind.kind == "tracks":
        list_type = "TOP_SHORTS_BY_USAGE" if chart.chart_type == "shorts" else "TOP_VIEWS_CHART"
        content["trackTypes"] = [{"listType": list_type, "chartPeriodType": period_type, "endDate": end_date,
                                  "trackViews": [_track_view(r, key) for r in global_rows(key, variant, size)]}]
    elif kind.kind == "videos":
        # No endDate on the list: the chart date comes from perspectiveMetadata (the parser's fallback).
        trending = chart.chart_type == "trending"
        content["videos"] = [{"listType": "TRENDING_CHART" if trending else "TOP_VIEWS_CHART",
                              "chartPeriodType": period_type,
                              "videoViews": [_video_view(r, key, trending) for r in global_rows(key, variant, size)]}]
    else:
        content["artists"] = [{"listType": "TOP_VIEWS_CHART", "chartPeriodType": period_type,
                               "artistViews": _artist_views(key, variant, size)}]
    earliest = "2019-05-09" if chart.period == "weekly" else "2019-05-10"
    content["perspectiveMetadata"] = {
        "availableChartsInfo": [{"chartType": f"CHART_TYPE_{kind.upstream_type}", "chartPeriodType": period_type,
                                 "earliestEndDate": earliest, "latestEndDate": end_date}],
        "requestParams": {"chartParams": {"countryCode": chart.country, "chartType": kind.upstream_type,
                                          "periodType": chart.period.upper()}},
    }
    payload = {
        "responseContext": {"serviceTrackingParams": [{"service": "CSI", "params": [
            {"key": "c", "value": "WEB_MUSIC_ANALYTICS"}, {"key": "cver", "value": youtube.CLIENT_VERSION}]}]},
        "contents": {"sectionListRenderer": {"contents": [{"musicAnalyticsSectionRenderer": {"content": content}}]}},
    }
    return json_body(payload)


def replies(catalogue: Iterable[Chart], now: datetime, variant: int = BACKFILL_WEEKS) -> dict[ReplayKey, Reply]:
    """Answers for every catalogue chart's latest request and for `BACKFILL_WEEKS` past shorts weeks
    (the newest backfilled week is the same chart as the latest pull's)."""
    today = now.date()
    table = {}
    for chart in catalogue:
        request = youtube.browse_request(chart.chart_type, chart.period, chart.country)
        table[request_key(request)] = Reply(render(chart, chart_end_date(chart.period, today), variant), 200, JSON_TYPE)
    table.update(backfill_replies(today, BACKFILL_WEEKS))
    return table


def backfill_replies(today: date, weeks: int) -> dict[ReplayKey, Reply]:
    """The global weekly shorts chart of each past week, older weeks as earlier variants (the newest is
    variant `weeks`, as the latest pull's)."""
    shorts = SampleChart("shorts", "weekly", GLOBAL)
    table = {}
    for back, end in enumerate(past_week_ends(today, weeks)):
        request = youtube.browse_request("shorts", "weekly", GLOBAL, end)
        table[request_key(request)] = Reply(render(shorts, end, weeks - back), 200, JSON_TYPE)
    return table
