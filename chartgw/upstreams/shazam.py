"""Shazam charts: the chart catalogue (`/services/charts/locations`) and the chart CSVs.

The catalogue comes in two known forms (NOTES section 5): the 2021 legacy one (saved capture:
countries with `listid`s, no `urlName`, genres with `urlPath`, no viral or world charts) and the
current one (ShazamIO's recorded cassette: `urlName` slugs on countries, cities and genres, a
`viral` object per country, a top-level `global` with `top`, `viral` and `genres`). Both are read
into chart paths as the CSV URLs want them (`top-50/brazil/bras%C3%ADlia`), then normalised into
crawl targets with plain ASCII slugs (`top-50/brazil/brasilia`); paths that normalise alike (a city
listed twice, two cities of one name, `global` beside `world`) are merged into one target.

A chart CSV is: UTF-8 BOM, an empty line, a quoted date line ("Sunday, 26 July 2026 [performance
over the past 7 days]"), the header `Rank,Artist,Title`, then the rows. It carries no track ids,
links or artwork; the legacy v3 tracks JSON does, so `parse_tracks_json` reads that format too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal, NamedTuple
from urllib.parse import quote, unquote

import msgspec

from chartgw.text import fold, split_artists
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, declare_upstream
from chartgw.upstreams.fields import decode, snippet
from chartgw.upstreams.json_api import load_json, obj, opt_obj, opt_text, text

UPSTREAM = declare_upstream("SHAZAM", "https://www.shazam.com")
LOCATIONS_PATH = "/services/charts/locations"
CSV_PREFIX = "/services/charts/csv/"
WORLD = "world"
MARKET_ALIASES = {"global": WORLD}
"""Market slugs that name the same chart set as another (the catalogue's `global` is the URLs' `world`)."""

ChartKind = Literal["top-200", "genre", "viral", "top-50"]
CHART_KINDS: tuple[ChartKind, ...] = ("top-200", "genre", "viral", "top-50")
CSV_HEADER = ["Rank", "Artist", "Title"]

_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
# rank, then each field quoted (as Shazam sends them, inner quotes unescaped) or bare without quotes/commas.
_CSV_ROW = re.compile(r'(\d+),(?:"(.*?)"|([^",]*)),(?:"(.*)"|([^",]*))$')
_DATE_LINE = re.compile(r"(\d{1,2}) ([A-Za-z]+) (\d{4})")
# Letters NFKD does not split into a base letter and a mark.
_TRANSLIT = str.maketrans({"ł": "l", "ø": "o", "đ": "d", "ı": "i", "æ": "ae", "œ": "oe", "þ": "th", "ð": "d",
                           "ß": "ss", "&": " and "})


# --- records ----------------------------------------------------------------------------------------------


class RecognitionEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One row of a Shazam chart.

    rank, artist, title and chart_date are always there. `url`, `artwork_url`, `store_url` and
    `shazam_track_id` are best-effort enrichment: the chart CSV has none of them, so they are null
    unless the upstream gives them (the v3 tracks JSON read by `parse_tracks_json` carries all four).
    """

    rank: int
    artist: str
    """The credit as printed ("Eden Hason, Ofek Adanek & Agam Buhbut")."""
    artists: list[str]
    """The credit split on "," and "&" outside brackets; a name containing either is split too."""
    title: str
    chart_date: str
    """YYYY-MM-DD, the date the upstream prints on the chart."""
    url: str | None = None
    """The track's shazam.com page; null when the upstream did not give it."""
    artwork_url: str | None = None
    """Cover art; null when the upstream did not give it."""
    store_url: str | None = None
    """The download-store (Apple Music / iTunes) link; null when the upstream did not give it."""
    shazam_track_id: str | None = None
    """Shazam's track key (the recognition track id); null when the upstream did not give it."""


class CatalogueEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One discovered chart, normalised into a crawl target."""

    kind: ChartKind
    market: str
    """Country slug, or "world"."""
    genre: str | None = None
    city: str | None = None
    path: str
    """The normalised chart path, also the snapshot target: "top-50/brazil/brasilia"."""
    upstream_paths: list[str]
    """Every catalogue listing merged into this one (a chart listed twice appears twice), as the CSV URLs
    want them; the first is fetched."""
    name: str
    """A human name: "Top 50 Brasília, Brazil"."""


class ChartCsv(NamedTuple):
    chart_date: str
    entries: list[RecognitionEntry]


class DiscoveredPath(NamedTuple):
    """One chart the catalogue lists, before normalisation."""

    kind: ChartKind
    upstream_path: str
    name: str


# --- requests ---------------------------------------------------------------------------------------------


def locations_request() -> UpstreamRequest:
    return UpstreamRequest(UPSTREAM, LOCATIONS_PATH, headers=(("Accept", "application/json"),))


def csv_request(upstream_path: str) -> UpstreamRequest:
    """The chart CSV; the trailing slash is required, and the CDN sends an HTML page to requests that
    do not accept gzip (reported since 2026-09), so the header is explicit."""
    return UpstreamRequest(UPSTREAM, f"{CSV_PREFIX}{upstream_path}/",
                           headers=(("Accept", "text/csv,*/*"), ("Accept-Encoding", "gzip")))


# --- slugs ------------------------------------------------------------------------------------------------


def url_name(name: str) -> str:
    """Shazam's `urlName` for a display name, as the current catalogue spells them: lowercase, "," dropped,
    "&" as "and", "/" and spaces as "-", the rest percent-encoded as JavaScript's encodeURIComponent does
    ("bras%C3%ADlia", "St. Louis" -> "st.-louis"). Used for legacy entries, which have no `urlName`."""
    lowered = name.strip().lower().replace(",", "").replace("&", "and").replace("/", "-")
    return quote("-".join(lowered.split()), safe="-_.!~*'()")


def slug(upstream_slug: str) -> str:
    """The plain ASCII slug of an upstream slug: percent-decoded, accents dropped, every run of other
    characters one "-" ("i%CC%87zmir" -> "izmir", "washington-d.c." -> "washington-d-c")."""
    plain = fold(unquote(upstream_slug)).translate(_TRANSLIT)
    return _NOT_SLUG.sub("-", plain).strip("-")


def is_slug(value: str) -> bool:
    return _SLUG.fullmatch(value) is not None


def market_slug(upstream_slug: str) -> str:
    plain = slug(upstream_slug)
    return MARKET_ALIASES.get(plain, plain)


# --- the catalogue ----------------------------------------------------------------------------------------


def _entries(value: Any, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UpstreamFormatError(f"{where}: expected a list, got {type(value).__name__}")
    return [obj(item, f"{where}[{i}]") for i, item in enumerate(value)]


def _own_slug(item: dict[str, Any], where: str) -> str:
    """An entry's slug: `urlName` (current), `urlPath` (legacy genres) or derived from its `name` (legacy)."""
    given = opt_text(item.get("urlName")) or opt_text(item.get("urlPath"))
    return given or url_name(text(item.get("name"), f"{where}.name"))


def parse_locations(body: bytes) -> list[DiscoveredPath]:
    """Every chart the catalogue lists, in its order: per country its Top 200, genres, viral chart and
    city Top 50s, then the world charts. Refuses an HTML page, broken JSON and a catalogue with no
    countries."""
    root = obj(load_json(body, "shazam locations"), "shazam locations")
    countries = _entries(root.get("countries"), "countries")
    if not countries:
        raise UpstreamFormatError("shazam locations: no countries listed")
    paths: list[DiscoveredPath] = []
    for i, country in enumerate(countries):
        where = f"countries[{i}]"
        name = text(country.get("name"), f"{where}.name")
        market = _own_slug(country, where)
        paths.append(DiscoveredPath("top-200", f"top-200/{market}", f"Top 200 {name}"))
        for j, genre in enumerate(_entries(country.get("genres"), f"{where}.genres")):
            genre_name = text(genre.get("name"), f"{where}.genres[{j}].name")
            paths.append(DiscoveredPath("genre", f"genre/{market}/{_own_slug(genre, f'{where}.genres[{j}]')}",
                                        f"{genre_name} {name}"))
        if isinstance(country.get("viral"), dict):
            paths.append(DiscoveredPath("viral", f"viral/{market}", f"Viral {name}"))
        for j, city in enumerate(_entries(country.get("cities"), f"{where}.cities")):
            city_name = text(city.get("name"), f"{where}.cities[{j}].name")
            paths.append(DiscoveredPath("top-50", f"top-50/{market}/{_own_slug(city, f'{where}.cities[{j}]')}",
                                        f"Top 50 {city_name}, {name}"))
    world = root.get("global")
    if world is not None:
        world = obj(world, "global")
        if isinstance(world.get("top"), dict):
            paths.append(DiscoveredPath("top-200", f"top-200/{WORLD}", "Top 200 World"))
        for j, genre in enumerate(_entries(world.get("genres"), "global.genres")):
            genre_name = text(genre.get("name"), f"global.genres[{j}].name")
            paths.append(DiscoveredPath("genre", f"genre/{WORLD}/{_own_slug(genre, f'global.genres[{j}]')}",
                                        f"{genre_name} World"))
        if isinstance(world.get("viral"), dict):
            paths.append(DiscoveredPath("viral", f"viral/{WORLD}", "Viral World"))
    return paths


def normalise(paths: Iterable[DiscoveredPath]) -> list[CatalogueEntry]:
    """One catalogue entry per normalised path, first occurrence first; each duplicate adds its upstream
    path (even when identical: a chart listed twice) to the entry it merges into."""
    merged: dict[str, CatalogueEntry] = {}
    for found in paths:
        parts = found.upstream_path.split("/")
        market = market_slug(parts[1])
        rest = [slug(p) for p in parts[2:]]
        if not market or not all(rest):
            raise UpstreamFormatError(f"shazam locations: {found.upstream_path!r} has no usable slug")
        path = "/".join([found.kind, market, *rest])
        entry = merged.get(path)
        if entry is None:
            merged[path] = CatalogueEntry(
                kind=found.kind, market=market, genre=rest[0] if found.kind == "genre" else None,
                city=rest[0] if found.kind == "top-50" else None, path=path, upstream_paths=[found.upstream_path],
                name=found.name)
        else:
            entry.upstream_paths.append(found.upstream_path)
    return list(merged.values())


def discover(body: bytes) -> list[CatalogueEntry]:
    return normalise(parse_locations(body))


# --- chart CSV --------------------------------------------------------------------------------------------


def chart_date(line: str) -> str:
    """"Sunday, 26 July 2026 [performance over the past 7 days]" -> "2026-07-26"."""
    match = _DATE_LINE.search(line)
    if match is None:
        raise UpstreamFormatError(f"shazam csv: no date in the date line {line!r}")
    day, month, year = match.groups()
    try:
        return datetime.strptime(f"{day} {month} {year}", "%d %B %Y").date().isoformat()
    except ValueError:
        raise UpstreamFormatError(f"shazam csv: unreadable date {match.group()!r}") from None


def _field(quoted: str | None, bare: str | None) -> str:
    return (quoted if quoted is not None else bare or "").strip()


def parse_csv(body: bytes) -> ChartCsv:
    """The rows of a chart CSV. Read line by line rather than with a CSV reader: Shazam does not escape
    quotes inside fields (the capture has `96,"Taylor Swift","I Knew It, I Knew You (From "Toy Story
    5")"`), so a row is rank, then the text up to the first `","` as artist, the rest as title.
    An HTML page (what the CDN sends instead of CSV), a missing date line or header, a cut or unnumbered
    row and a chart without rows are UpstreamFormatErrors."""
    content = decode(body)
    if content.lstrip().startswith("<"):
        raise UpstreamFormatError(f"shazam csv: got an HTML page instead of CSV: {snippet(content)!r}")
    lines = [line for line in content.splitlines() if line.strip()]
    if len(lines) < 2 or _CSV_ROW.match(lines[0]) or lines[0].strip() == ",".join(CSV_HEADER):
        raise UpstreamFormatError(f"shazam csv: no date line before the header: {snippet(content)!r}")
    date = chart_date(lines[0])
    if [cell.strip() for cell in lines[1].split(",")] != CSV_HEADER:
        raise UpstreamFormatError(f"shazam csv: expected header Rank,Artist,Title, got {lines[1]!r}")
    entries = []
    for number, line in enumerate(lines[2:], start=1):
        match = _CSV_ROW.match(line.strip())
        if match is None:
            raise UpstreamFormatError(f"shazam csv: row {number} is not Rank,\"Artist\",\"Title\": {line!r}")
        rank, artist_quoted, artist_bare, title_quoted, title_bare = match.groups()
        artist, title = _field(artist_quoted, artist_bare), _field(title_quoted, title_bare)
        if not artist or not title:
            raise UpstreamFormatError(f"shazam csv: row {number} has no artist or title")
        entries.append(RecognitionEntry(rank=int(rank), artist=artist, artists=split_artists(artist) or [artist],
                                        title=title, chart_date=date))
    if not entries:
        raise UpstreamFormatError("shazam csv: the chart has no rows")
    return ChartCsv(date, entries)


# --- legacy v3 tracks JSON (enrichment) -------------------------------------------------------------------


def _store_url(hub: dict[str, Any]) -> str | None:
    """The Apple Music deeplink of the hub's "open" option (the download-store page of the track)."""
    for option in hub.get("options") or []:
        for action in (option.get("actions") or []) if isinstance(option, dict) else []:
            if isinstance(action, dict) and action.get("type") == "applemusicopen" and opt_text(action.get("uri")):
                return opt_text(action.get("uri"))
    return None


def parse_tracks_json(body: bytes, date: str) -> list[RecognitionEntry]:
    """A legacy v3 chart tracks body (`{"tracks": [...]}`); it has no rank, so rank is the position.
    `date` is the chart date the caller knows (the body states none)."""
    root = obj(load_json(body, "shazam tracks"), "shazam tracks")
    tracks = _entries(root.get("tracks"), "tracks")
    if not tracks:
        raise UpstreamFormatError("shazam tracks: no tracks")
    entries = []
    for rank, track in enumerate(tracks, start=1):
        where = f"tracks[{rank - 1}]"
        artist = text(track.get("subtitle"), f"{where}.subtitle")
        images, share, hub = opt_obj(track.get("images")), opt_obj(track.get("share")), opt_obj(track.get("hub"))
        entries.append(RecognitionEntry(
            rank=rank, artist=artist, artists=split_artists(artist) or [artist],
            title=text(track.get("title"), f"{where}.title"), chart_date=date,
            url=opt_text(track.get("url")) or opt_text(share.get("href")),
            artwork_url=opt_text(images.get("coverarthq")) or opt_text(images.get("coverart"))
            or opt_text(share.get("image")),
            store_url=_store_url(hub),
            shazam_track_id=opt_text(track.get("key")),
        ))
    return entries
