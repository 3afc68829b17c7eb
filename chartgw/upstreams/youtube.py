"""YouTube Music charts (charts.youtube.com): the `browse` JSON the charts web app posts to youtubei.

One POST per chart: `/youtubei/v1/browse?alt=json` with a JSON body naming the WEB_MUSIC_ANALYTICS
client, browseId `FEmusic_analytics_charts_home` and a `query` string of chart parameters (NOTES
section 2, five and more independent repos). Songs and shorts come back as
`trackTypes[0].trackViews[]`, videos (top and trending) as `videos[0].videoViews[]`, artists as
`artists[0].artistViews[]`, all under
`contents.sectionListRenderer.contents[0].musicAnalyticsSectionRenderer.content`.

No raw youtubei capture exists: the paths are those public client code reads, and the parser
reads exactly those paths and refuses anything else. View counts arrive as digit strings;
`previousPosition` is absent or 0 for a new entry. A past week is asked for with
`chart_params_end_date=YYYYMMDD` (END_DATE_PARAM, seen in five independent repos).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Literal

import msgspec

from chartgw.core.countries import GLOBAL
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, check_chart_type, declare_upstream
from chartgw.upstreams.json_api import BROWSER_UA, dig, load_json, obj, opt_integer, opt_text, text

UPSTREAM = declare_upstream("YOUTUBE", "https://charts.youtube.com")
PATH = "/youtubei/v1/browse"
PARAMS: tuple[tuple[str, str], ...] = (("alt", "json"),)
BROWSE_ID = "FEmusic_analytics_charts_home"
CLIENT_NAME = "WEB_MUSIC_ANALYTICS"
CLIENT_VERSION = "2.0"
SHORTS_FLAGS = "flags=MusicCharts__enable_apac_and_shorts_charts_expansion&"
"""Prefix of the query that the web app sends for shorts (and APAC) charts."""
END_DATE_PARAM = "chart_params_end_date"
"""The query parameter naming a past chart's end date, as YYYYMMDD (public code, 5+ repos)."""
SECTION_PATH = "contents.sectionListRenderer.contents"

Period = Literal["weekly", "daily"]
PERIODS: tuple[str, ...] = ("weekly", "daily")
Kind = Literal["tracks", "videos", "artists"]


@dataclass(frozen=True)
class ChartKind:
    """How one normalised chart type is asked for and where its rows are in the payload."""

    chart_type: str
    """Our name (the path's chart_type)."""
    upstream_type: str
    """`chart_params_chart_type` of the query."""
    kind: Kind
    list_key: str
    """The list under the section content: trackTypes, videos or artists."""
    view_key: str
    """The row list inside its first element: trackViews, videoViews or artistViews."""


CHART_KINDS: dict[str, ChartKind] = {k.chart_type: k for k in (
    ChartKind("top-songs", "TRACKS", "tracks", "trackTypes", "trackViews"),
    ChartKind("top-videos", "VIDEOS", "videos", "videos", "videoViews"),
    ChartKind("top-artists", "ARTISTS", "artists", "artists", "artistViews"),
    ChartKind("trending", "TRENDING_VIDEOS", "videos", "videos", "videoViews"),
    ChartKind("shorts", "SHORTS_TRACKS_BY_USAGE", "tracks", "trackTypes", "trackViews"),
)}
CHART_TYPES: tuple[str, ...] = tuple(CHART_KINDS)


# --- records ------------------------------------------------------------------------------------

class VideoChartEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """A row of a songs chart (top-songs, shorts): one track, its video ids and its views."""

    rank: int
    title: str
    artist: str
    """All artists joined with ", " as the chart lists them."""
    artists: list[str]
    artist_ids: list[str]
    """Google Knowledge Graph mids (`kgMid`) of the artists that have one, in order."""
    video_id: str
    """`encryptedVideoId`: the track's YouTube video id."""
    art_track_id: str | None
    """`atvExternalVideoId`: the art-track (audio) video id; null when the chart gives none."""
    views: int | None
    """Views in the chart period; null when absent."""
    previous_rank: int | None
    """Rank on the previous chart; null for a new entry or a re-entry (upstream absent or 0)."""
    periods_on_chart: int | None
    percent_views_change: float | None
    """Change of views against the previous period in percent; null for new entries or when absent."""
    image_url: str | None
    """The largest thumbnail; null when none."""
    release_date: str | None
    """YYYY-MM-DD when the chart gives year, month and day; null otherwise."""


class VideoEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """A row of a videos chart (top-videos, trending)."""

    rank: int
    video_id: str
    title: str
    channel_name: str
    channel_id: str | None
    """`externalChannelId` (UC...); null when absent."""
    duration_seconds: int | None
    """`videoDuration` in seconds; null when absent."""
    artists: list[str]
    """Artists credited on the video, when the chart lists them (may be empty)."""
    artist_ids: list[str]
    views: int | None
    previous_rank: int | None
    """Null for a new entry (upstream absent or 0)."""
    periods_on_chart: int | None
    percent_views_change: float | None
    image_url: str | None


class ArtistEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """A row of the artists chart."""

    rank: int
    name: str
    artist_id: str | None
    """Knowledge Graph mid ("/m/..." or "/g/..."); null when absent."""
    channel_id: str | None
    views: int | None
    previous_rank: int | None
    """Null for a new entry (upstream absent or 0)."""
    periods_on_chart: int | None
    percent_views_change: float | None
    image_url: str | None


Entry = VideoChartEntry | VideoEntry | ArtistEntry


@dataclass(frozen=True)
class ParsedChart:
    """What one browse payload holds: its rows and the chart's end date, when the payload states it."""

    chart_type: str
    entries: list[Entry]
    end_date: str | None
    """YYYY-MM-DD from the row list's own `endDate` (e.g. `trackTypes[0].endDate`); None when absent."""
    latest_end_date: str | None
    """`latestEndDate` of `perspectiveMetadata.availableChartsInfo[]` for this chart type and period:
    the newest chart there is, which is this chart's date only when no past date was asked for."""

    def chart_date(self, requested: str | None) -> str | None:
        """The chart's end date: its own, else the asked-for one, else (a latest pull) the newest there is."""
        return self.end_date or requested or self.latest_end_date


# --- requests -----------------------------------------------------------------------------------

def browse_query(chart_type: str, period: str, country: str, end_date: str | None = None) -> str:
    """The `query` string of the browse body; `end_date` (YYYY-MM-DD) asks for a past chart."""
    kind = chart_kind(chart_type)
    parts = [
        "perspective=CHART_DETAILS",
        f"chart_params_country_code={country}",
        f"chart_params_chart_type={kind.upstream_type}",
        f"chart_params_period_type={_period_type(period)}",
    ]
    if end_date is not None:
        parts.append(f"{END_DATE_PARAM}={end_date.replace('-', '')}")
    query = "&".join(parts)
    return SHORTS_FLAGS + query if chart_type == "shorts" else query


def browse_body(chart_type: str, period: str, country: str, end_date: str | None = None) -> bytes:
    """The JSON body the charts web app posts; `gl` is the country (US for global)."""
    gl = "US" if country == GLOBAL else country.upper()
    body = {
        "context": {"client": {"clientName": CLIENT_NAME, "clientVersion": CLIENT_VERSION, "hl": "en", "gl": gl,
                               "theme": "MUSIC"}},
        "browseId": BROWSE_ID,
        "query": browse_query(chart_type, period, country, end_date),
    }
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def browse_request(chart_type: str, period: str, country: str, end_date: str | None = None) -> UpstreamRequest:
    headers = (
        ("Content-Type", "application/json"),
        ("User-Agent", BROWSER_UA),
        ("Origin", "https://charts.youtube.com"),
        ("Referer", "https://charts.youtube.com/"),
    )
    return UpstreamRequest(upstream=UPSTREAM, path=PATH, params=PARAMS, method="POST", headers=headers,
                           body=browse_body(chart_type, period, country, end_date))


def chart_kind(chart_type: str) -> ChartKind:
    return CHART_KINDS[check_chart_type("youtube", chart_type, CHART_TYPES)]


def _period_type(period: str) -> str:
    if period not in PERIODS:
        raise ValueError(f"youtube: unknown period {period!r}; known: {', '.join(PERIODS)}")
    return period.upper()


# --- parsing ------------------------------------------------------------------------------------

def parse(chart_type: str, period: str, body: bytes) -> ParsedChart:
    """The rows of one browse payload for `chart_type`, read strictly by the documented paths."""
    kind = chart_kind(chart_type)
    who = f"youtube {chart_type}"
    doc = obj(load_json(body, who), who)
    if "error" in doc:
        error = obj(doc["error"], f"{who}.error")
        raise UpstreamFormatError(f"{who}: API error {error.get('code')} {error.get('status') or ''}: "
                                  f"{opt_text(error.get('message')) or 'no message'}")
    content = section_content(doc, who)
    lists = dig(content, kind.list_key, who)
    if not isinstance(lists, list) or not lists:
        raise UpstreamFormatError(f"{who}: content.{kind.list_key} is empty or not a list")
    first = obj(lists[0], f"{who}.{kind.list_key}[0]")
    rows = first.get(kind.view_key)
    if not isinstance(rows, list) or not rows:
        raise UpstreamFormatError(f"{who}: {kind.list_key}[0].{kind.view_key} is missing or empty")
    readers: dict[str, Callable[[str, dict[str, Any]], Entry]] = {"tracks": _track, "videos": _video, "artists": _artist}
    read = readers[kind.kind]
    entries = [read(f"{who} {kind.view_key}[{i}]", obj(row, f"{who} {kind.view_key}[{i}]"))
               for i, row in enumerate(rows)]
    end_date = _date_value(first.get("endDate"), f"{who}.{kind.list_key}[0].endDate")
    return ParsedChart(chart_type, entries, end_date, _latest_end_date(content, kind, period, who))


def section_content(doc: dict[str, Any], who: str) -> dict[str, Any]:
    """`contents.sectionListRenderer.contents[0].musicAnalyticsSectionRenderer.content`."""
    sections = dig(doc, SECTION_PATH, who)
    if not isinstance(sections, list) or not sections:
        raise UpstreamFormatError(f"{who}.{SECTION_PATH} is empty or not a list")
    return obj(dig(sections[0], "musicAnalyticsSectionRenderer.content", f"{who}.{SECTION_PATH}[0]"),
               f"{who} section content")


def _latest_end_date(content: dict[str, Any], kind: ChartKind, period: str, who: str) -> str | None:
    """`latestEndDate` of the availableChartsInfo item for this chart type and period, if any."""
    meta = content.get("perspectiveMetadata")
    infos = meta.get("availableChartsInfo") if isinstance(meta, dict) else None
    if not isinstance(infos, list):
        return None
    for info in infos:
        if (isinstance(info, dict) and info.get("chartType") == f"CHART_TYPE_{kind.upstream_type}"
                and info.get("chartPeriodType") == f"CHART_PERIOD_TYPE_{_period_type(period)}"):
            return _date_value(info.get("latestEndDate"), f"{who} availableChartsInfo.latestEndDate")
    return None


_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_COMPACT_DATE = re.compile(r"(\d{4})(\d{2})(\d{2})")


def _date_value(value: object, where: str) -> str | None:
    """A chart end date as YYYY-MM-DD from "YYYY-MM-DD", "YYYYMMDD" or {year, month, day}; None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, dict):
        date = _ymd(value)
        if date is None:
            raise UpstreamFormatError(f"{where}: not a whole date: {value!r}")
        return date
    if isinstance(value, str):
        match = _ISO_DATE.fullmatch(value.strip()) or _COMPACT_DATE.fullmatch(value.strip())
        if match:
            return "-".join(match.groups())
    raise UpstreamFormatError(f"{where}: not a date: {value!r}")


def _ymd(value: dict[str, Any]) -> str | None:
    parts = [value.get(k) for k in ("year", "month", "day")]
    if not all(isinstance(p, int) and not isinstance(p, bool) for p in parts):
        return None
    year, month, day = parts
    return f"{year:04d}-{month:02d}-{day:02d}"


def _position(where: str, row: dict[str, Any]) -> tuple[int, int | None, int | None, float | None]:
    """(rank, previous_rank, periods_on_chart, percent_views_change) from `chartEntryMetadata`."""
    meta = obj(row.get("chartEntryMetadata"), f"{where}.chartEntryMetadata")
    rank = opt_integer(meta.get("currentPosition"), f"{where}.chartEntryMetadata.currentPosition")
    if rank is None:
        raise UpstreamFormatError(f"{where}.chartEntryMetadata.currentPosition is missing")
    previous = opt_integer(meta.get("previousPosition"), f"{where}.chartEntryMetadata.previousPosition")
    periods = opt_integer(meta.get("periodsOnChart"), f"{where}.chartEntryMetadata.periodsOnChart")
    change = _opt_float(meta.get("percentViewsChange"), f"{where}.chartEntryMetadata.percentViewsChange")
    return rank, previous or None, periods, change


def _opt_float(value: object, where: str) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise UpstreamFormatError(f"{where}: expected a number, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise UpstreamFormatError(f"{where}: expected a number, got {value!r}")


def _thumbnail(row: dict[str, Any]) -> str | None:
    """The widest of `thumbnail.thumbnails[]` (the last one when none states a width)."""
    thumb = row.get("thumbnail")
    images = thumb.get("thumbnails") if isinstance(thumb, dict) else None
    if not isinstance(images, list):
        return None
    usable = [(i.get("width") if isinstance(i.get("width"), int) else 0, n, opt_text(i.get("url")))
              for n, i in enumerate(images) if isinstance(i, dict) and opt_text(i.get("url"))]
    return max(usable)[2] if usable else None


def _artists(where: str, row: dict[str, Any], required: bool) -> tuple[list[str], list[str]]:
    """(names, kg mids) of `artists[]`; each artist needs a name."""
    people = row.get("artists")
    if people is None and not required:
        return [], []
    if not isinstance(people, list) or (required and not people):
        raise UpstreamFormatError(f"{where}.artists is missing or empty")
    names, ids = [], []
    for i, person in enumerate(people):
        person = obj(person, f"{where}.artists[{i}]")
        names.append(text(person.get("name"), f"{where}.artists[{i}].name"))
        mid = opt_text(person.get("kgMid"))
        if mid:
            ids.append(mid)
    return names, ids


def _track(where: str, row: dict[str, Any]) -> VideoChartEntry:
    rank, previous, periods, change = _position(where, row)
    names, mids = _artists(where, row, required=True)
    release = row.get("releaseDate")
    return VideoChartEntry(
        rank=rank,
        title=text(row.get("name"), f"{where}.name"),
        artist=", ".join(names),
        artists=names,
        artist_ids=mids,
        video_id=text(row.get("encryptedVideoId"), f"{where}.encryptedVideoId"),
        art_track_id=opt_text(row.get("atvExternalVideoId")),
        views=opt_integer(row.get("viewCount"), f"{where}.viewCount"),
        previous_rank=previous,
        periods_on_chart=periods,
        percent_views_change=change,
        image_url=_thumbnail(row),
        release_date=_ymd(release) if isinstance(release, dict) else None,
    )


def _video(where: str, row: dict[str, Any]) -> VideoEntry:
    rank, previous, periods, change = _position(where, row)
    names, mids = _artists(where, row, required=False)
    return VideoEntry(
        rank=rank,
        video_id=text(row.get("id"), f"{where}.id"),
        title=text(row.get("title"), f"{where}.title"),
        channel_name=text(row.get("channelName"), f"{where}.channelName"),
        channel_id=opt_text(row.get("externalChannelId")),
        duration_seconds=_duration(row.get("videoDuration"), f"{where}.videoDuration"),
        artists=names,
        artist_ids=mids,
        views=opt_integer(row.get("viewCount"), f"{where}.viewCount"),
        previous_rank=previous,
        periods_on_chart=periods,
        percent_views_change=change,
        image_url=_thumbnail(row),
    )


def _artist(where: str, row: dict[str, Any]) -> ArtistEntry:
    rank, previous, periods, change = _position(where, row)
    return ArtistEntry(
        rank=rank,
        name=text(row.get("name"), f"{where}.name"),
        artist_id=opt_text(row.get("id")),
        channel_id=opt_text(row.get("externalChannelId")),
        views=opt_integer(row.get("viewCount"), f"{where}.viewCount"),
        previous_rank=previous,
        periods_on_chart=periods,
        percent_views_change=change,
        image_url=_thumbnail(row),
    )


_CLOCK = re.compile(r"(?:(\d+):)?(\d{1,2}):(\d{2})")


def _duration(value: object, where: str) -> int | None:
    """Seconds from a number, a digit string or "[h:]mm:ss"; the public code does not show which is sent."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        match = _CLOCK.fullmatch(value.strip())
        if match:
            hours, minutes, seconds = (int(g or 0) for g in match.groups())
            return hours * 3600 + minutes * 60 + seconds
    return opt_integer(value, where)


def entry_names(entry: Entry) -> tuple[str, list[str], str | None]:
    """(title, artists, item id) of a row as the store indexes it: a video's channel is its artist,
    an artist row is its own title and artist."""
    if isinstance(entry, VideoChartEntry):
        return entry.title, entry.artists, entry.video_id
    if isinstance(entry, VideoEntry):
        return entry.title, [entry.channel_name], entry.video_id
    return entry.name, [entry.name], entry.artist_id


# --- the chart calendar -------------------------------------------------------------------------------

WEEK_END_WEEKDAY = 3
"""Weekly charts end on Thursday (the DERIVED CSV's week_close 2023-09-21 and the end dates public
clients send, e.g. 20240307, are Thursdays)."""


def latest_week_end(today: date) -> date:
    """The end of the newest complete chart week: the last Thursday before `today`."""
    back = (today.weekday() - WEEK_END_WEEKDAY - 1) % 7 + 1
    return today - timedelta(days=back)


def past_week_ends(today: date, weeks: int) -> list[str]:
    """The `weeks` newest complete week-end dates, newest first, as YYYY-MM-DD."""
    newest = latest_week_end(today)
    return [(newest - timedelta(weeks=n)).isoformat() for n in range(weeks)]
