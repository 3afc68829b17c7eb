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
links or artwork; the legacy v3 tracks JSON of the same chart does (`tracks_request`,
`parse_tracks_json`), so `enrich` copies them onto the CSV rows, which stay the source of ranks and
names. That endpoint takes the legacy list ids ("ip-country-chart-DE"); the current catalogue lists
Apple Music playlist ids ("pl.…") instead, so each chart's legacy id is the catalogue's own when it
is one, else built from the chart's ids as the 2021 catalogue builds them (`legacy_list_id`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal, NamedTuple
from urllib.parse import quote, unquote

import msgspec

from chartgw.core.text import artist_key, fold, split_artists, title_key
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, declare_upstream
from chartgw.upstreams.fields import decode, snippet
from chartgw.upstreams.json_api import load_json, obj, opt_obj, opt_text, text

UPSTREAM = declare_upstream("SHAZAM", "https://www.shazam.com")
LOCATIONS_PATH = "/services/charts/locations"
CSV_PREFIX = "/services/charts/csv/"
TRACKS_PREFIX = "/shazam/v3/"
TRACKS_LANG = "en-US"
TRACKS_PAGE = 200
"""One page of the track JSON holds a whole chart (none is longer than 200 rows)."""
WORLD_STOREFRONT = "US"
"""The storefront world charts' track JSON is asked under (it sets the Apple Music links' country)."""
PLAYLIST_PREFIX = "pl."
"""The current catalogue's list ids (Apple Music playlists), which the v3 tracks endpoint is not known to take."""
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

    rank, artist, title and chart_date are always there (from the chart CSV). `url`, `artwork_url`,
    `store_url` and `shazam_track_id` are best-effort enrichment from the chart's track JSON: null when
    the chart has none (viral charts, world genres), it could not be read, or it does not list the row's
    track.
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
    storefront: str | None = None
    """The country code the chart's track JSON is asked under ("DE"; WORLD_STOREFRONT for world charts)."""
    list_id: str | None = None
    """The chart's legacy v3 list id ("ip-country-chart-DE"); None when there is none to give or build (viral)."""


class TrackList(msgspec.Struct, kw_only=True):
    """Where a chart target's legacy v3 track JSON is."""

    path: str
    """The normalised chart path (the snapshot target)."""
    storefront: str
    list_id: str


# --- requests ---------------------------------------------------------------------------------------------


def locations_request() -> UpstreamRequest:
    return UpstreamRequest(UPSTREAM, LOCATIONS_PATH, headers=(("Accept", "application/json"),))


def tracks_request(track_list: TrackList) -> UpstreamRequest:
    """The chart's legacy v3 tracks JSON (`{"tracks": [...]}`, no rank field), the whole chart in one page."""
    path = f"{TRACKS_PREFIX}{TRACKS_LANG}/{track_list.storefront}/web/-/tracks/{quote(track_list.list_id, safe='')}"
    return UpstreamRequest(UPSTREAM, path, params=(("pageSize", str(TRACKS_PAGE)), ("startFrom", "0")),
                           headers=(("Accept", "application/json"),))


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


LEGACY_LIST_IDS = {"country": "ip-country-chart-{}", "city": "ip-city-chart-{}", "genre": "genre-country-chart-{}",
                   "world": "ip-global-chart"}
"""How the 2021 catalogue's list ids are built from the ids beside them ("DE", GeoNames id "2950159",
genre id "DE-1"); the world Top 200's is ShazamIO's `ip-global-chart`."""


def legacy_list_id(item: dict[str, Any], scheme: str | None) -> str | None:
    """A chart's legacy v3 list id: its `listid` when it is one (the 2021 form), else built by `scheme`
    (from the item's `id` when the scheme has a "{}"); None when neither gives one."""
    given = opt_text(item.get("listid"))
    if given and not given.startswith(PLAYLIST_PREFIX):
        return given
    if scheme is None or "{}" not in scheme:
        return scheme
    own = opt_text(item.get("id"))
    return scheme.format(own) if own else None


def _storefront(country: dict[str, Any]) -> str | None:
    code = opt_text(country.get("id"))
    return code.upper() if code and len(code) == 2 and code.isalpha() else None


def parse_locations(body: bytes) -> list[DiscoveredPath]:
    """Every chart the catalogue lists, in its order: per country its Top 200, genres, viral chart and
    city Top 50s, then the world charts. Refuses an HTML page, broken JSON and a catalogue with no
    countries. World genres and viral charts get a legacy list id only when the catalogue gives one."""
    root = obj(load_json(body, "shazam locations"), "shazam locations")
    countries = _entries(root.get("countries"), "countries")
    if not countries:
        raise UpstreamFormatError("shazam locations: no countries listed")
    paths: list[DiscoveredPath] = []
    for i, country in enumerate(countries):
        where = f"countries[{i}]"
        name = text(country.get("name"), f"{where}.name")
        market = _own_slug(country, where)
        store = _storefront(country)
        paths.append(DiscoveredPath("top-200", f"top-200/{market}", f"Top 200 {name}", store,
                                    legacy_list_id(country, LEGACY_LIST_IDS["country"])))
        for j, genre in enumerate(_entries(country.get("genres"), f"{where}.genres")):
            genre_name = text(genre.get("name"), f"{where}.genres[{j}].name")
            paths.append(DiscoveredPath("genre", f"genre/{market}/{_own_slug(genre, f'{where}.genres[{j}]')}",
                                        f"{genre_name} {name}", store, legacy_list_id(genre, LEGACY_LIST_IDS["genre"])))
        viral = country.get("viral")
        if isinstance(viral, dict):
            paths.append(DiscoveredPath("viral", f"viral/{market}", f"Viral {name}", store, legacy_list_id(viral, None)))
        for j, city in enumerate(_entries(country.get("cities"), f"{where}.cities")):
            city_name = text(city.get("name"), f"{where}.cities[{j}].name")
            paths.append(DiscoveredPath("top-50", f"top-50/{market}/{_own_slug(city, f'{where}.cities[{j}]')}",
                                        f"Top 50 {city_name}, {name}", store,
                                        legacy_list_id(city, LEGACY_LIST_IDS["city"])))
    world = root.get("global")
    if world is not None:
        world = obj(world, "global")
        top, viral = world.get("top"), world.get("viral")
        if isinstance(top, dict):
            paths.append(DiscoveredPath("top-200", f"top-200/{WORLD}", "Top 200 World", WORLD_STOREFRONT,
                                        legacy_list_id(top, LEGACY_LIST_IDS["world"])))
        for j, genre in enumerate(_entries(world.get("genres"), "global.genres")):
            genre_name = text(genre.get("name"), f"global.genres[{j}].name")
            paths.append(DiscoveredPath("genre", f"genre/{WORLD}/{_own_slug(genre, f'global.genres[{j}]')}",
                                        f"{genre_name} World", WORLD_STOREFRONT, legacy_list_id(genre, None)))
        if isinstance(viral, dict):
            paths.append(DiscoveredPath("viral", f"viral/{WORLD}", "Viral World", WORLD_STOREFRONT,
                                        legacy_list_id(viral, None)))
    return paths


def _target_path(found: DiscoveredPath) -> tuple[str, str, list[str]]:
    """(normalised path, market, the slugs after it) of a listed chart."""
    parts = found.upstream_path.split("/")
    market = market_slug(parts[1])
    rest = [slug(p) for p in parts[2:]]
    if not market or not all(rest):
        raise UpstreamFormatError(f"shazam locations: {found.upstream_path!r} has no usable slug")
    return "/".join([found.kind, market, *rest]), market, rest


def normalise(paths: Iterable[DiscoveredPath]) -> list[CatalogueEntry]:
    """One catalogue entry per normalised path, first occurrence first; each duplicate adds its upstream
    path (even when identical: a chart listed twice) to the entry it merges into."""
    merged: dict[str, CatalogueEntry] = {}
    for found in paths:
        path, market, rest = _target_path(found)
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


def track_lists(paths: Iterable[DiscoveredPath]) -> list[TrackList]:
    """Each chart target's track JSON, from its first listing (the one whose CSV is fetched); targets whose
    first listing has no storefront or legacy list id have none."""
    found: dict[str, TrackList | None] = {}
    for listed in paths:
        path = _target_path(listed)[0]
        if path not in found:
            found[path] = (TrackList(path=path, storefront=listed.storefront, list_id=listed.list_id)
                           if listed.storefront and listed.list_id else None)
    return [t for t in found.values() if t is not None]


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


def _identity(entry: RecognitionEntry) -> tuple[str, str]:
    """The track a row names: its title without featuring credits and its first artist, as the store keys them."""
    return title_key(entry.title), artist_key(entry.artist)


def enrich(entries: list[RecognitionEntry], tracks: list[RecognitionEntry]) -> int:
    """Copy `url`, `artwork_url`, `store_url` and `shazam_track_id` from the track JSON's rows (`tracks`,
    rank = position) onto the CSV rows (`entries`, which keep their rank, artist and title); returns how
    many rows got them.

    A row takes the track of the same identity (title without featuring credits, first artist), the one
    nearest its rank when the JSON lists it twice. A row left without one takes the track at its own
    position when no row took it and it shares the title or the first artist (a retitled remix, a
    re-spelled credit). Any other row keeps nulls: the two lists may differ, and a wrong id is worse
    than none."""
    positions: dict[tuple[str, str], list[int]] = {}
    for i, track in enumerate(tracks):
        positions.setdefault(_identity(track), []).append(i)
    taken: dict[int, int] = {}  # row index -> track index
    used: set[int] = set()
    for n, entry in enumerate(entries):
        free = [i for i in positions.get(_identity(entry), ()) if i not in used]
        if free:
            taken[n] = min(free, key=lambda i: (abs(i + 1 - entry.rank), i))
            used.add(taken[n])
    for n, entry in enumerate(entries):
        i = entry.rank - 1
        if n in taken or i in used or not 0 <= i < len(tracks):
            continue
        (row_title, row_artist), (title, artist) = _identity(entry), _identity(tracks[i])
        if row_title == title or row_artist == artist:
            taken[n] = i
            used.add(i)
    for n, i in taken.items():
        entry, track = entries[n], tracks[i]
        entry.url, entry.artwork_url = track.url, track.artwork_url
        entry.store_url, entry.shazam_track_id = track.store_url, track.shazam_track_id
    return len(taken)
