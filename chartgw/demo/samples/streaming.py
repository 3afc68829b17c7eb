"""Sample Spotify Charts bodies in the real formats, and the /streaming demo seeder.

- auth/v0 chart JSON: `displayChart` + `entries[]` with `chartEntryData` (rankingMetric.value a
  string) and `trackMetadata`, as the ArnavSaraogi README entry shows; the `displayChart` block
  follows the public/v0 capture, since no whole auth/v0 body was ever captured.
- public/v0 overview JSON: three global weekly charts (tracks, albums, artists) of 50 entries, no
  rankingMetric, zeroed peak/appearances/entry fields, empty labels and release dates, as captured.
- CSV downloads: the charts.spotify.com layout (BOM, CRLF, quoted strings and streams) and the
  legacy spotifycharts.com layouts (regional with an optional preface line; viral re-saved with CRLF).

Songs come from `global_rows`. Streams follow the real chart's weekly stream curve by rank (daily
charts a seventh of it, other countries a stable fraction), so they always fall with rank. The 20
Korean extras have no real track id; they get a made-up but stable 22-character one.
"""

from __future__ import annotations

import csv
import hashlib
import io
from datetime import date, timedelta
from functools import cache

from chartgw.core.countries import GLOBAL, country_name
from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples import GlobalSong, SampleRow, global_rows, global_songs
from chartgw.demo.samples.bodies import json_body, stable_hex, stable_number
from chartgw.upstreams import spotify
from chartgw.upstreams.spotify import CHART_TYPES

JSON_TYPE = "application/json"
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
LEGACY_PREFACE = (',,,"Note that these figures are generated using a formula that protects against any artificial '
                  'inflation of chart positions.",')
DEMO_TOKEN = "demo-token"
DEMO_COUNTRIES = "global,us,kr"


# --- sample values --------------------------------------------------------------------------------------------

def chart_size(chart_type: str) -> int:
    return 50 if chart_type.startswith("viral") else 200


def chart_rows(chart_type: str, country: str, variant: int = 0, size: int | None = None) -> list[SampleRow[GlobalSong]]:
    """Rows of a sample chart; `variant` n+1 is the chart after n."""
    return global_rows(f"spotify/{chart_type}/{country}", variant, size or chart_size(chart_type))


def track_id(song: GlobalSong) -> str:
    """The song's real Spotify id, or a stable made-up one of the same 22-character base62 form."""
    if song.spotify_id:
        return song.spotify_id
    number = int.from_bytes(hashlib.sha256(f"{song.title}|{'|'.join(song.artists)}".encode()).digest(), "big")
    return "".join(BASE62[(number >> (6 * i)) % 62] for i in range(22))


def image_url(song: GlobalSong) -> str:
    """An i.scdn.co 300px cover URL of the real form (`ab67616d00001e02` + 24 hex), stable per song."""
    key = track_id(song)
    return "https://i.scdn.co/image/ab67616d00001e02" + "".join(stable_hex(key, str(n)) for n in range(3))


@cache
def _weekly_curve() -> tuple[int, ...]:
    """The captured global weekly chart's streams, highest first: one value per rank."""
    return tuple(sorted((s.streams for s in global_songs() if s.streams), reverse=True))


def streams_by_rank(chart_type: str, country: str, variant: int) -> list[int]:
    """Streams for ranks 1..n of a sample regional chart, falling with rank."""
    curve = _weekly_curve()
    scale = 1.0 if country == GLOBAL else 0.03 + stable_number(country) % 25 / 100
    scale *= 1 + (stable_number(chart_type, country, str(variant)) % 11 - 5) / 100
    per_period = 1 if chart_type.endswith("weekly") else 7
    return [max(1, int(value * scale / per_period)) for value in curve]


def chart_date(chart_type: str, crawl_day: date) -> str:
    """The date of the newest chart a crawl on `crawl_day` sees: yesterday for daily charts, the last
    Thursday before today for weekly ones (charts.spotify.com dates a week by its closing Thursday)."""
    day = crawl_day - timedelta(days=1)
    if chart_type.endswith("weekly"):
        day -= timedelta(days=(day.weekday() - 3) % 7)
    return day.isoformat()


def _status(row: SampleRow[GlobalSong]) -> str:
    if row.previous_rank is None:
        return "NEW_ENTRY"
    return "MOVED_UP" if row.previous_rank > row.rank else "MOVED_DOWN" if row.previous_rank < row.rank else "NO_CHANGE"


def _history(row: SampleRow[GlobalSong], key: str, variant: int) -> tuple[int, int]:
    """(peak rank, periods on chart) of a sample row, consistent with its rank and previous rank."""
    if row.previous_rank is None:
        return row.rank, 1
    stable = stable_number(row.song.title, key)
    return min(row.rank, row.previous_rank, 1 + stable % row.rank), 2 + stable % 60 + variant


# --- JSON API bodies ------------------------------------------------------------------------------------------

def _artist(name: str) -> dict[str, str]:
    return {"name": name, "spotifyUri": f"spotify:artist:{track_id(GlobalSong(name, (name,), None, None, None))}",
            "externalUrl": ""}


def _display_chart(alias: str, entity: str, chart_type: str, country: str, day: str) -> dict[str, object]:
    kind, _, recurrence = chart_type.partition("-")
    label = {"regional": "Top", "viral": "Viral"}[kind] + {"TRACK": " Songs", "ALBUM": " Albums",
                                                          "ARTIST": " Artists"}[entity]
    return {
        "date": day,
        "description": f"Your {recurrence} update of the most played {entity.lower()}s right now.",
        "chartMetadata": {
            "uri": f"spotify:chart:{track_id(GlobalSong(alias, (alias,), None, None, None))}",
            "alias": alias.upper().replace("-", "_"),
            "entityType": entity,
            "readableTitle": f"{recurrence.capitalize()} {label}: {country_name(country)}",
            "backgroundColor": "#773795",
            "textColor": "#FFFFFF",
            "dimensions": {
                "latestDate": day, "earliestDate": "2016-12-29", "country": country.upper(),
                "chartType": f"{'VIRAL' if kind == 'viral' else 'TOP'}_{entity}", "recurrence": recurrence.upper(),
                "genre": "", "city": "",
            },
        },
    }


def _entry_data(row: SampleRow[GlobalSong], day: str, key: str, variant: int,
                streams: int | None, full: bool) -> dict[str, object]:
    """chartEntryData: full on auth/v0; on the public overview peak, appearances and entry fields are zero/empty."""
    peak, periods = _history(row, key, variant)
    data: dict[str, object] = {
        "currentRank": row.rank,
        "previousRank": -1 if row.previous_rank is None else row.previous_rank,
        "peakRank": peak if full else 0,
        "peakDate": day if full else "",
        "appearancesOnChart": periods if full else 0,
        "consecutiveAppearancesOnChart": periods if full else 0,
    }
    if streams is not None:
        data["rankingMetric"] = {"value": str(streams), "type": "STREAMS"}
    data.update({"entryStatus": _status(row), "entryRank": row.rank if full else 0, "entryDate": day if full else ""})
    return data


def _track_entry(row: SampleRow[GlobalSong], day: str, key: str, variant: int, streams: int | None,
                 full: bool) -> dict[str, object]:
    song = row.song
    return {
        "chartEntryData": _entry_data(row, day, key, variant, streams, full),
        "missingRequiredFields": False,
        "trackMetadata": {
            "trackName": song.title,
            "trackUri": f"spotify:track:{track_id(song)}",
            "displayImageUri": image_url(song),
            "artists": [_artist(a) for a in song.artists],
            "producers": [],
            "labels": [{"name": song.label, "spotifyUri": "", "externalUrl": ""}] if full and song.label else [],
            "songWriters": [],
            "releaseDate": "",
        },
    }


def render_chart(chart_type: str, country: str, rows: list[SampleRow[GlobalSong]], day: str,
                 variant: int = 0) -> bytes:
    """An auth/v0 chart body for `alias(chart_type, country)`; viral charts carry no rankingMetric."""
    alias = spotify.alias(chart_type, country)
    streams = streams_by_rank(chart_type, country, variant) if chart_type.startswith("regional") else None
    entries = [_track_entry(row, day, alias, variant, streams[row.rank - 1] if streams else None, True) for row in rows]
    return json_body({"displayChart": _display_chart(alias, "TRACK", chart_type, country, day), "entries": entries,
                      "highlights": [], "countryFilters": [], "chartNavigationFilters": []})


def render_overview(rows: list[SampleRow[GlobalSong]], day: str) -> bytes:
    """The public/v0 overview: global weekly tracks (from `rows`), albums and artists, 50 entries each."""
    top = rows[:50]
    tracks = [_track_entry(row, day, "overview", 0, None, False) for row in top]
    albums = [{"chartEntryData": _entry_data(row, day, "overview", 0, None, False), "missingRequiredFields": False,
               "albumMetadata": {"albumName": row.song.title, "albumUri": f"spotify:album:{track_id(row.song)[::-1]}",
                                 "displayImageUri": image_url(row.song),
                                 "artists": [_artist(a) for a in row.song.artists],
                                 "labels": [], "releaseDate": ""}} for row in top]
    by_artist = {row.song.artists[0]: row for row in reversed(rows)}  # each artist's best-ranked row
    leaders = sorted(by_artist.items(), key=lambda item: item[1].rank)[:50]
    artists = [{"chartEntryData": _entry_data(SampleRow(n, n, row.song), day, "overview", 0, None, False),
                "missingRequiredFields": False,
                "artistMetadata": {"artistName": name, "artistUri": _artist(name)["spotifyUri"],
                                   "displayImageUri": image_url(row.song), "socialMedia": []}}
               for n, (name, row) in enumerate(leaders, start=1)]
    charts = (("regional-global-weekly", "TRACK", tracks), ("album-global-weekly", "ALBUM", albums),
              ("artist-global-weekly", "ARTIST", artists))
    views = [{"countryFilters": [], "displayChart": _display_chart(alias, entity, "regional-weekly", GLOBAL, day),
              "entries": entries, "highlights": [], "chartNavigationFilters": []} for alias, entity, entries in charts]
    return json_body({"chartEntryViewResponses": views})


# --- CSV downloads --------------------------------------------------------------------------------------------

def render_download_csv(chart_type: str, country: str, rows: list[SampleRow[GlobalSong]], variant: int = 0) -> bytes:
    """A charts.spotify.com download of a regional chart: BOM, CRLF, strings and streams quoted, numbers bare."""
    if not chart_type.startswith("regional"):
        raise ValueError("only regional charts have a known charts.spotify.com CSV layout")
    periods = "weeks_on_chart" if chart_type.endswith("weekly") else "days_on_chart"
    streams = streams_by_rank(chart_type, country, variant)
    lines = [f"rank,uri,artist_names,track_name,source,peak_rank,previous_rank,{periods},streams"]
    for row in rows:
        peak, count = _history(row, spotify.alias(chart_type, country), variant)
        song = row.song
        quoted = [_quote(v) for v in (f"spotify:track:{track_id(song)}", ", ".join(song.artists), song.title,
                                      song.label or "")]
        previous = -1 if row.previous_rank is None else row.previous_rank
        lines.append(f"{row.rank},{','.join(quoted)},{peak},{previous},{count},{_quote(str(streams[row.rank - 1]))}")
    return ("\ufeff" + "\r\n".join(lines) + "\r\n").encode("utf-8")


def render_legacy_csv(chart_type: str, country: str, rows: list[SampleRow[GlobalSong]], variant: int = 0,
                      preface: bool = True) -> bytes:
    """A spotifycharts.com download: regional `Position,"Track Name",Artist,Streams,URL` (LF, fields with
    spaces quoted, the 2020 preface line when `preface`), or viral `Position,Track Name,Artist,URL` as the
    saved file has it (CRLF, minimal quoting, no final newline). Legacy files credit the main artist only."""
    if chart_type.startswith("viral"):
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(["Position", "Track Name", "Artist", "URL"])
        for row in rows:
            writer.writerow([row.rank, row.song.title, row.song.artists[0],
                             f"https://open.spotify.com/track/{track_id(row.song)}"])
        return out.getvalue().removesuffix("\r\n").encode("utf-8")
    streams = streams_by_rank(chart_type, country, variant)
    lines = [LEGACY_PREFACE] if preface else []
    lines.append('Position,"Track Name",Artist,Streams,URL')
    for row in rows:
        lines.append(f"{row.rank},{_legacy_quote(row.song.title)},{_legacy_quote(row.song.artists[0])},"
                     f"{streams[row.rank - 1]},https://open.spotify.com/track/{track_id(row.song)}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def _quote(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def _legacy_quote(value: str) -> str:
    """Quoted when it holds a space, comma or quote, as the legacy files do ("Ed Sheeran" but Kygo)."""
    return _quote(value) if any(ch in value for ch in ' ,"') else value


# --- replies and the seeder -----------------------------------------------------------------------------------

def chart_replies(daily_date: str, weekly_date: str, variant: int, countries: tuple[str, ...],
                  token: str) -> dict[ReplayKey, Reply]:
    """auth/v0 replies for every chart type x country: sample chart `variant`, dated `daily_date` or
    `weekly_date` by the chart's recurrence."""
    replies = {}
    for chart_type in CHART_TYPES:
        day = weekly_date if chart_type.endswith("weekly") else daily_date
        for country in countries:
            body = render_chart(chart_type, country, chart_rows(chart_type, country, variant), day, variant)
            replies[request_key(spotify.chart_request(chart_type, country, token))] = Reply(body, 200, JSON_TYPE)
    return replies


def overview_replies(crawl_day: date, variant: int = 0) -> dict[ReplayKey, Reply]:
    rows = chart_rows(*spotify.OVERVIEW_CHART, variant)
    body = render_overview(rows, chart_date("regional-weekly", crawl_day))
    return {request_key(spotify.overview_request()): Reply(body, 200, JSON_TYPE)}
