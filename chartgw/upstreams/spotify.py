"""Spotify Charts (NOTES-global section 1): the charts JSON API and the sites' CSV downloads.

Three sources give the same entry record, `StreamingEntry`:

- auth/v0 (`/auth/v0/charts/{alias}/latest` with a web-player bearer token): every country and
  chart, with streams in `chartEntryData.rankingMetric.value` (a string). Known from a README
  example of one entry and from client code; no whole response was ever captured.
- public/v0 (`/public/v0/charts`, no auth): an overview of three global weekly charts, 50 entries
  each, without streams; peak, appearances and entry fields are zeroed. Captured whole.
- CSV downloads, for backfills: the legacy spotifycharts.com layouts (regional with Streams,
  viral without; 2020-era files start with a preface line) and the charts.spotify.com layout
  (BOM, CRLF, quoted strings and numbers). All three captured.

Track ids always come from the track URI (`spotify:track:<id>`) or the legacy open.spotify.com URL.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Literal

import msgspec

from chartgw.core.countries import GLOBAL, country_code
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, check_chart_type, declare_upstream
from chartgw.upstreams.fields import decode, snippet
from chartgw.upstreams.json_api import dig, load_json, obj, opt_text, text

UPSTREAM = declare_upstream("SPOTIFY", "https://charts-spotify-com-service.spotify.com")
CHART_TYPES: tuple[str, ...] = ("regional-daily", "regional-weekly", "viral-daily")
OVERVIEW_CHART = ("regional-weekly", GLOBAL)
"""The only track chart of our kinds that the public overview holds."""

AUTH_PATH = "/auth/v0/charts/{alias}/{date}"
OVERVIEW_PATH = "/public/v0/charts"
_HEADERS: tuple[tuple[str, str], ...] = (
    ("Accept", "application/json"),
    ("Origin", "https://charts.spotify.com"),
    ("Referer", "https://charts.spotify.com/"),
)

_TRACK_URI = re.compile(r"spotify:track:([0-9A-Za-z]{22})")
_TRACK_URL = re.compile(r"https?://open\.spotify\.com/track/([0-9A-Za-z]{22})(?:[/?#].*)?")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)")
_ALIAS = re.compile(r"(regional|viral)-([a-z]{2}|global)-(daily|weekly)")
_NAME_DATES = re.compile(r"-(\d{4}-\d{2}-\d{2})(?:--(\d{4}-\d{2}-\d{2}))?(?![\d-])")


class StreamingEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One track of a Spotify chart, the same shape from the JSON API and from CSV imports."""

    rank: int
    title: str
    artist: str
    """All credited artists joined with ", " (legacy CSV files credit the main artist only)."""
    artists: list[str]
    track_id: str
    """The 22-character Spotify id from the track URI."""
    track_uri: str
    """`spotify:track:<track_id>`."""
    streams: int | None = None
    """Streams in the chart period; null on viral charts and on the public overview, which has none."""
    previous_rank: int | None = None
    """Rank on the previous chart; null when the track was not on it (the upstream's -1: a new or returning
    entry) and also when the source does not say (legacy CSV files)."""
    peak_rank: int | None = None
    """Best rank ever; null when the source does not give it (the public overview sends 0, legacy CSV nothing)."""
    periods_on_chart: int | None = None
    """Days on the chart for daily charts, weeks for weekly ones; null when not given."""
    entry_status: str | None = None
    """The API's word (NEW_ENTRY, MOVED_UP, MOVED_DOWN, NO_CHANGE, ...); null for CSV imports."""
    label: str | None = None
    """The first label (the CSV's `source` column); null when not given."""
    image_url: str | None = None
    """Cover image (i.scdn.co); null for CSV imports."""


@dataclass(frozen=True)
class SpotifyChart:
    """A parsed chart: the date the upstream states and its entries in rank order."""

    chart_date: str
    entries: list[StreamingEntry]


Layout = Literal["legacy-regional", "legacy-viral", "charts-download"]


@dataclass(frozen=True)
class CsvChart:
    """A parsed CSV download: which layout it was and what it says about the chart's kind."""

    layout: Layout
    kind: Literal["regional", "viral"]
    """regional when the file has a streams column, else viral."""
    recurrence: Literal["daily", "weekly"] | None
    """From `days_on_chart` / `weeks_on_chart` in the charts.spotify.com layout; None for legacy files."""
    entries: list[StreamingEntry]


@dataclass(frozen=True)
class CsvName:
    """What a downloaded file's name says about its chart; None where it says nothing."""

    chart_type: str | None
    country: str | None
    chart_date: str | None


# --- requests -------------------------------------------------------------------------------------------------


def alias(chart_type: str, country: str) -> str:
    """The upstream chart alias: `{regional|viral}-{country}-{daily|weekly}`."""
    check_chart_type("spotify", chart_type, CHART_TYPES)
    kind, _, recurrence = chart_type.partition("-")
    return f"{kind}-{country}-{recurrence}"


def parse_alias(value: str) -> tuple[str, str] | None:
    """(chart_type, country) of an alias we serve ("regional-us-daily"), None for any other text."""
    match = _ALIAS.fullmatch(value.lower().replace("_", "-"))
    if match is None:
        return None
    kind, country, recurrence = match.groups()
    chart_type = f"{kind}-{recurrence}"
    if chart_type not in CHART_TYPES:
        return None
    try:
        return chart_type, country_code(country)
    except ValueError:
        return None


def chart_request(chart_type: str, country: str, token: str, chart_date: str = "latest") -> UpstreamRequest:
    """GET auth/v0 for one chart, as the charts.spotify.com web app calls it."""
    path = AUTH_PATH.format(alias=alias(chart_type, country), date=chart_date)
    return UpstreamRequest(UPSTREAM, path, headers=(("Authorization", f"Bearer {token}"), *_HEADERS))


def overview_request() -> UpstreamRequest:
    """GET public/v0: the no-auth overview (global weekly tracks, albums and artists, 50 each)."""
    return UpstreamRequest(UPSTREAM, OVERVIEW_PATH, headers=_HEADERS)


# --- JSON API -------------------------------------------------------------------------------------------------


def parse_chart(body: bytes, who: str = "spotify auth/v0") -> SpotifyChart:
    """An auth/v0 chart body: `displayChart.date` and `entries[]` of a track chart."""
    doc = obj(load_json(body, who), who)
    return _track_chart(doc, who)


def parse_overview(body: bytes, chart_type: str = OVERVIEW_CHART[0], country: str = OVERVIEW_CHART[1],
                   who: str = "spotify public/v0") -> SpotifyChart:
    """The chart `alias(chart_type, country)` out of the public overview's `chartEntryViewResponses`."""
    wanted = alias(chart_type, country)
    doc = obj(load_json(body, who), who)
    views = dig(doc, "chartEntryViewResponses", who)
    if not isinstance(views, list) or not views:
        raise UpstreamFormatError(f"{who}: chartEntryViewResponses is empty or not a list")
    seen = []
    for n, view in enumerate(views):
        where = f"{who}.chartEntryViewResponses[{n}]"
        name = text(dig(view, "displayChart.chartMetadata.alias", where), f"{where} alias")
        seen.append(name)
        if name.lower().replace("_", "-") == wanted:
            return _track_chart(obj(view, where), where)
    raise UpstreamFormatError(f"{who}: no {wanted} chart in the overview (it has {', '.join(seen)})")


def _track_chart(doc: dict[str, Any], who: str) -> SpotifyChart:
    chart_date = text(dig(doc, "displayChart.date", who), f"{who}.displayChart.date")
    if not _ISO_DATE.fullmatch(chart_date):
        raise UpstreamFormatError(f"{who}.displayChart.date: expected YYYY-MM-DD, got {chart_date!r}")
    meta = obj(doc["displayChart"], f"{who}.displayChart").get("chartMetadata")
    entity = opt_text(meta.get("entityType")) if isinstance(meta, dict) else None
    if entity not in (None, "TRACK"):
        raise UpstreamFormatError(f"{who}: a {entity} chart, not a track chart")
    items = doc.get("entries")
    if not isinstance(items, list) or not items:
        raise UpstreamFormatError(f"{who}.entries is missing, empty or not a list")
    return SpotifyChart(chart_date, [_api_entry(item, f"{who}.entries[{n}]") for n, item in enumerate(items)])


def _api_entry(item: object, where: str) -> StreamingEntry:
    item = obj(item, where)
    data = obj(dig(item, "chartEntryData", where), f"{where}.chartEntryData")
    track = obj(dig(item, "trackMetadata", where), f"{where}.trackMetadata")
    artists = [text(a.get("name"), f"{where}.trackMetadata.artists[].name")
               for a in track.get("artists") or [] if isinstance(a, dict)]
    if not artists:
        raise UpstreamFormatError(f"{where}.trackMetadata.artists is missing or empty")
    uri = text(track.get("trackUri"), f"{where}.trackMetadata.trackUri")
    labels = [opt_text(label.get("name")) for label in track.get("labels") or [] if isinstance(label, dict)]
    return StreamingEntry(
        rank=_positive(data.get("currentRank"), f"{where}.chartEntryData.currentRank"),
        title=text(track.get("trackName"), f"{where}.trackMetadata.trackName"),
        artist=", ".join(artists),
        artists=artists,
        track_id=_track_id(uri, _TRACK_URI, where),
        track_uri=uri,
        streams=_streams(data.get("rankingMetric"), where),
        previous_rank=_rank_or_none(data.get("previousRank"), f"{where}.chartEntryData.previousRank"),
        peak_rank=_rank_or_none(data.get("peakRank"), f"{where}.chartEntryData.peakRank"),
        periods_on_chart=_rank_or_none(data.get("appearancesOnChart"), f"{where}.chartEntryData.appearancesOnChart"),
        entry_status=opt_text(data.get("entryStatus")),
        label=next((label for label in labels if label), None),
        image_url=opt_text(track.get("displayImageUri")),
    )


def _streams(metric: object, where: str) -> int | None:
    """`rankingMetric.value` of type STREAMS as an int; None when there is no metric or it is another kind."""
    if metric is None:
        return None
    metric = obj(metric, f"{where}.chartEntryData.rankingMetric")
    if opt_text(metric.get("type")) not in (None, "STREAMS"):
        return None
    return _number(metric.get("value"), f"{where}.chartEntryData.rankingMetric.value")


def _number(value: object, where: str) -> int:
    """An integer given as a JSON number or a digit string ("1371493", "1,371,493")."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        return int(value.strip().replace(",", ""))
    raise UpstreamFormatError(f"{where}: expected an integer, got {value!r}")


def _positive(value: object, where: str) -> int:
    number = _number(value, where)
    if number < 1:
        raise UpstreamFormatError(f"{where}: expected a rank of at least 1, got {number}")
    return number


def _rank_or_none(value: object, where: str) -> int | None:
    """A count or rank where the upstream's -1 (new) and 0 (not given, public overview) mean null."""
    if value is None or value == "":
        return None
    number = _number(value, where)
    return number if number > 0 else None


def _track_id(value: str, pattern: re.Pattern[str], where: str) -> str:
    match = pattern.fullmatch(value.strip())
    if match is None:
        raise UpstreamFormatError(f"{where}: not a Spotify track URI or URL: {value!r}")
    return match.group(1)


# --- CSV downloads --------------------------------------------------------------------------------------------

LEGACY_COLUMNS = ("position", "track name", "artist", "url")
DOWNLOAD_COLUMNS = ("rank", "uri", "artist_names", "track_name", "source", "peak_rank", "previous_rank")


def parse_csv(body: bytes, who: str = "spotify csv") -> CsvChart:
    """A CSV download in any of the three layouts. Lines before the header (the 2020 preface) are skipped;
    BOM, CRLF and quoted numbers are handled by decoding and the csv reader."""
    content = decode(body)
    if not content.strip():
        raise UpstreamFormatError(f"{who}: empty file")
    if content.lstrip().startswith(("<", "{", "[")):
        raise UpstreamFormatError(f"{who}: not a CSV file: {snippet(content)!r}")
    try:
        rows = list(csv.reader(io.StringIO(content, newline="")))
    except csv.Error as exc:
        raise UpstreamFormatError(f"{who}: unreadable CSV ({exc})") from None
    heads = ([cell.strip().lower() for cell in row] for row in rows)
    line, head = next(((n, h) for n, h in enumerate(heads) if h[:1] in (["position"], ["rank"])), (-1, []))
    if line < 0:
        raise UpstreamFormatError(f"{who}: no header row `Position,...` or `rank,uri,...`: {snippet(content)!r}")
    data = [(n, row) for n, row in enumerate(rows[line + 1:], start=line + 2) if any(cell.strip() for cell in row)]
    if not data:
        raise UpstreamFormatError(f"{who}: a header but no rows")
    columns = {name: i for i, name in enumerate(head)}
    if head[0] == "position":
        return _legacy(columns, data, who)
    return _download(columns, data, who)


def _missing(columns: dict[str, int], needed: tuple[str, ...], who: str) -> None:
    lacking = [c for c in needed if c not in columns]
    if lacking:
        raise UpstreamFormatError(f"{who}: header lacks {', '.join(lacking)} (has {', '.join(columns)})")


def _cells(row: list[str], columns: dict[str, int], line: int, who: str) -> dict[str, str]:
    if len(row) < len(columns):
        raise UpstreamFormatError(f"{who} line {line}: {len(row)} cells for {len(columns)} columns")
    return {name: row[i].strip() for name, i in columns.items()}


def _legacy(columns: dict[str, int], data: list[tuple[int, list[str]]], who: str) -> CsvChart:
    """spotifycharts.com: `Position,"Track Name",Artist,Streams,URL` (regional) or without Streams (viral)."""
    _missing(columns, LEGACY_COLUMNS, who)
    has_streams = "streams" in columns
    entries = []
    for line, row in data:
        cells, where = _cells(row, columns, line, who), f"{who} line {line}"
        track_id = _track_id(cells["url"], _TRACK_URL, where)
        artist = _required(cells["artist"], "Artist", where)
        entries.append(StreamingEntry(
            rank=_positive(cells["position"], f"{where} Position"),
            title=_required(cells["track name"], "Track Name", where),
            artist=artist, artists=[artist], track_id=track_id, track_uri=f"spotify:track:{track_id}",
            streams=_number(cells["streams"], f"{where} Streams") if has_streams else None,
        ))
    return CsvChart("legacy-regional" if has_streams else "legacy-viral", "regional" if has_streams else "viral",
                    None, entries)


def _download(columns: dict[str, int], data: list[tuple[int, list[str]]], who: str) -> CsvChart:
    """charts.spotify.com: rank,uri,artist_names,track_name,source,peak_rank,previous_rank,
    weeks_on_chart (days_on_chart on daily charts),streams."""
    _missing(columns, DOWNLOAD_COLUMNS, who)
    periods = next((c for c in ("weeks_on_chart", "days_on_chart") if c in columns), None)
    if periods is None:
        raise UpstreamFormatError(f"{who}: header has neither weeks_on_chart nor days_on_chart")
    has_streams = "streams" in columns
    entries = []
    for line, row in data:
        cells, where = _cells(row, columns, line, who), f"{who} line {line}"
        artists = [a.strip() for a in _required(cells["artist_names"], "artist_names", where).split(", ") if a.strip()]
        entries.append(StreamingEntry(
            rank=_positive(cells["rank"], f"{where} rank"),
            title=_required(cells["track_name"], "track_name", where),
            artist=", ".join(artists), artists=artists,
            track_id=_track_id(cells["uri"], _TRACK_URI, where), track_uri=cells["uri"],
            streams=_number(cells["streams"], f"{where} streams") if has_streams else None,
            previous_rank=_rank_or_none(cells["previous_rank"], f"{where} previous_rank"),
            peak_rank=_rank_or_none(cells["peak_rank"], f"{where} peak_rank"),
            periods_on_chart=_rank_or_none(cells[periods], f"{where} {periods}"),
            label=cells["source"] or None,
        ))
    return CsvChart("charts-download", "regional" if has_streams else "viral",
                    "weekly" if periods == "weeks_on_chart" else "daily", entries)


def _required(value: str, what: str, where: str) -> str:
    if not value:
        raise UpstreamFormatError(f"{where}: empty {what}")
    return value


def csv_name_info(name: str) -> CsvName:
    """What a download's file name says: `regional-global-weekly-2023-11-16.csv` (charts.spotify.com) or the
    legacy URL forms `regional-us-daily-2020-09-05.csv`, `viral-global-daily-latest.csv` and
    `regional-global-weekly-2018-01-05--2018-01-12.csv` (a legacy week runs Friday to Friday; its chart
    date is the Thursday before the second date, as charts.spotify.com dates that week). The chart type
    may be one we do not serve (viral-weekly): the caller says so."""
    lowered = name.lower()
    match = _ALIAS.search(lowered)
    if match is None:
        return CsvName(None, None, None)
    kind, code, recurrence = match.groups()
    try:
        country: str | None = country_code(code)
    except ValueError:
        country = None
    dates = _NAME_DATES.match(lowered, match.end())
    chart_date = None
    if dates is not None:
        first, second = dates.groups()
        try:
            chart_date = (date.fromisoformat(second) - timedelta(days=1)).isoformat() if second \
                else date.fromisoformat(first).isoformat()
        except ValueError:
            chart_date = None
    return CsvName(f"{kind}-{recurrence}", country, chart_date)
