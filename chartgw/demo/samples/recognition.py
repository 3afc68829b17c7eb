"""Shazam sample payloads: the chart catalogue in its current form and a CSV for every chart it lists.

The catalogue follows the current `/services/charts/locations` body recorded in ShazamIO's test
cassette (countries with `urlName`, `cities`, `genres`, `viral`; a top-level `global`), with the
cassette's 70 countries, their viral flags, its world genres and its cities (the US trimmed to three
of its 54). It is sized so discovery over it gives the spec's
figures: 71 Top 200 markets (70 countries and the world), 37 genre charts (18 world genres, four
US and three each for five more countries), 43 viral charts (42 countries and the world) and 124
city Top 50s, with Istanbul listed twice as the 2021 capture lists Afyonkarahisar twice: 276
paths, 275 targets. The CSVs copy the real byte layout (BOM, empty line, quoted date line, header,
quoted rows, no final newline) with rows from the shared global song pool. Every chart with a legacy
list id (Top 200s, country genres, cities; not viral charts or world genres) also has its v3 tracks
JSON, in the shape of the real capture (Moodify's embedded chart body), with the same rows.
"""

from __future__ import annotations

import functools
import json
import re
from datetime import date
from urllib.parse import quote

from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples import GlobalSong, global_rows
from chartgw.demo.samples.bodies import json_body, stable_hex, stable_number
from chartgw.upstreams import shazam

# (ISO code, name, has a viral chart, cities "|"-separated): the cassette's 70 countries.
COUNTRIES: tuple[tuple[str, str, bool, str], ...] = (
    ("AE", "United Arab Emirates", False, "Dubai"),
    ("AR", "Argentina", True, "Buenos Aires"),
    ("AT", "Austria", True, ""),
    ("AU", "Australia", True, "Adelaide|Brisbane|Melbourne|Perth|Sydney"),
    ("AZ", "Azerbaijan", False, ""),
    ("BE", "Belgium", True, ""),
    ("BG", "Bulgaria", False, ""),
    ("BR", "Brazil", True, "Brasília|Rio de Janeiro|São Paulo"),
    ("BY", "Belarus", False, ""),
    ("CA", "Canada", True, "Calgary|Edmonton|London|Montréal|Ottawa|Québec|Toronto|Vancouver"),
    ("CH", "Switzerland", True, ""),
    ("CI", "Ivory Coast", False, ""),
    ("CL", "Chile", True, "Santiago"),
    ("CM", "Cameroon", False, ""),
    ("CN", "China", False, "Beijing|Shanghai"),
    ("CO", "Colombia", True, "Bogotá|Medellín"),
    ("CR", "Costa Rica", False, ""),
    ("CZ", "Czechia", True, ""),
    ("DE", "Germany", True, "Berlin|Düsseldorf|Essen|Frankfurt am Main|Hamburg|Hannover|Köln|Mannheim|Munich|"
                            "Stuttgart"),
    ("DK", "Denmark", False, "Copenhagen"),
    ("DZ", "Algeria", False, ""),
    ("EG", "Egypt", False, ""),
    ("ES", "Spain", True, "Barcelona|Madrid|Sevilla|Valencia"),
    ("FI", "Finland", False, "Helsinki"),
    ("FR", "France", True, "Bordeaux|Le Havre|Lyon|Marseille|Montpellier|Nantes|Nice|Paris|Strasbourg|Toulouse"),
    ("GB", "United Kingdom", True, "Belfast|Birmingham|Brighton|Bristol|Cardiff|Edinburgh|Glasgow|Leeds|Liverpool|"
                                   "London|Manchester|Newcastle upon Tyne|Nottingham|Portsmouth|Sheffield"),
    ("GH", "Ghana", True, ""),
    ("GR", "Greece", True, "Athens"),
    ("HR", "Croatia", False, ""),
    ("HU", "Hungary", True, ""),
    ("ID", "Indonesia", True, ""),
    ("IE", "Ireland", False, "Dublin"),
    ("IL", "Israel", True, "Tel Aviv"),
    ("IN", "India", True, "Bengaluru|Delhi|Mumbai"),
    ("IT", "Italy", True, "Florence|Milan|Naples|Palermo|Rome|Turin|Venice"),
    ("JP", "Japan", True, "Osaka|Tokyo"),
    ("KE", "Kenya", True, ""),
    ("KR", "South Korea", True, "Seoul"),
    ("KZ", "Kazakhstan", True, ""),
    ("MA", "Morocco", False, ""),
    ("MX", "Mexico", True, "Guadalajara|Mexico City|Monterrey|Puebla|Tijuana|Toluca"),
    ("MY", "Malaysia", True, ""),
    ("MZ", "Mozambique", False, ""),
    ("NG", "Nigeria", True, "Benin City|Kaduna|Kano|Lagos|Port Harcourt"),
    ("NL", "Netherlands", True, "Amsterdam|Maastricht|Rotterdam|The Hague|Utrecht"),
    ("NO", "Norway", False, "Oslo"),
    ("NZ", "New Zealand", False, ""),
    ("PE", "Peru", True, "Lima"),
    ("PH", "Philippines", False, ""),
    ("PL", "Poland", True, "Kraków|Warsaw"),
    ("PT", "Portugal", True, "Lisbon|Porto"),
    ("RO", "Romania", True, "Bucharest"),
    ("RU", "Russia", True, "Moscow|Saint Petersburg"),
    ("SA", "Saudi Arabia", True, ""),
    ("SE", "Sweden", True, "Göteborg|Malmö|Stockholm"),
    ("SG", "Singapore", False, "Singapore"),
    ("SN", "Senegal", False, ""),
    ("TH", "Thailand", False, "Bangkok"),
    ("TN", "Tunisia", False, ""),
    ("TR", "Türkiye", True, "Adana|Ankara|Antalya|Bursa|Istanbul|İzmir|Istanbul"),
    ("TZ", "Tanzania", True, ""),
    ("UA", "Ukraine", True, "Kyiv"),
    ("UG", "Uganda", False, ""),
    ("US", "United States", True, "Chicago|St. Louis|Washington, D.C."),
    ("UY", "Uruguay", False, ""),
    ("UZ", "Uzbekistan", True, "Tashkent"),
    ("VE", "Venezuela", False, ""),
    ("VN", "Vietnam", False, ""),
    ("ZA", "South Africa", True, "Cape Town|Durban|Johannesburg"),
    ("ZM", "Zambia", False, ""),
)
COUNTRY_GENRES = ("Pop", "Hip-Hop/Rap", "Dance")
GENRE_COUNTRIES = {"US": (*COUNTRY_GENRES, "Country"), "AU": COUNTRY_GENRES, "DE": COUNTRY_GENRES,
                   "FR": COUNTRY_GENRES, "GB": COUNTRY_GENRES, "MX": COUNTRY_GENRES}
GENRE_IDS = {"Pop": 1, "Hip-Hop/Rap": 2, "Dance": 3, "Country": 10}
# The cassette's world genres: (name, rows).
WORLD_GENRES = (
    ("Pop", 200), ("Hip-Hop/Rap", 200), ("Dance", 200), ("Electronic", 100), ("R&B/Soul", 100),
    ("Alternative", 100), ("Rock", 100), ("Latin", 100), ("Film, TV & Stage", 100), ("Country", 100),
    ("Afrobeats", 50), ("Worldwide", 50), ("Reggae/Dancehall", 50), ("House", 50), ("K-Pop", 50),
    ("French Pop", 50), ("Singer/Songwriter", 50), ("Música Mexicana", 50),
)
VIRAL_ROWS = 50
CITY_ROWS = 50
TOP_ROWS = 200
COUNTRY_GENRE_ROWS = 100
_BEYOND_LATIN1 = re.compile(r"[^\x00-\xff]")
_NOT_WORD = re.compile(r"[^\w\s-]")
_GAPS = re.compile(r"[\s_-]+")
_ART = "https://is1-ssl.mzstatic.com/image/thumb/Music{}/v4/{}/{}/{}/{}/cover.jpg/{}cc.jpg"
_AFFILIATE = ("mttnagencyid=s2n&mttnsiteid=125115&mttn3pid=Apple-Shazam&mttnsub1=Shazam_web"
              "&mttnsub2=5348615A-616D-3235-3830-44754D6D5973&itscg=30201&app=music&itsct=Shazam_web")


def _listid(*parts: str) -> str:
    """An Apple Music playlist id in the current catalogue's form ("pl." and 32 hex digits), stable per chart."""
    return "pl." + "".join(stable_hex(*parts, str(i)) for i in range(4))


def _genre(country: str | None, name: str, count: int) -> dict[str, object]:
    genre_id = f"{country}-{GENRE_IDS[name]}" if country else f"global-{[g for g, _ in WORLD_GENRES].index(name) + 1}"
    item: dict[str, object] = {"id": genre_id}
    if country:
        item["countryid"] = country
    item.update(name=name, listid=_listid("genre", genre_id), urlName=shazam.url_name(name), count=count)
    return item


def _country(code: str, name: str, viral: bool, cities: str) -> dict[str, object]:
    item: dict[str, object] = {"id": code, "name": name, "listid": _listid("top", code)}
    if viral:
        item["momentum_listid"] = _listid("momentum", code)
    item["cities"] = [{"id": str(2_000_000 + int(stable_hex(code, city, digits=5), 16)), "countryid": code,
                       "name": city, "listid": _listid("city", code, city), "urlName": shazam.url_name(city)}
                      for city in cities.split("|") if city]
    item["genres"] = [_genre(code, genre, COUNTRY_GENRE_ROWS) for genre in GENRE_COUNTRIES.get(code, ())]
    if viral:
        item["viral"] = {"id": str(3_000_000 + int(stable_hex(code, "viral", digits=5), 16)), "countryid": code,
                         "listid": _listid("viral", code)}
    item["urlName"] = shazam.url_name(name)
    return item


def locations() -> dict[str, object]:
    return {
        "countries": [_country(*row) for row in COUNTRIES],
        "global": {"genres": [_genre(None, name, count) for name, count in WORLD_GENRES],
                   "top": {"listid": _listid("top", "global")}, "viral": {"listid": _listid("viral", "global")}},
        "radioSpins": {"global": {"genres": [], "top": {"listid": _listid("radio", "global")}}},
    }


def render_locations() -> bytes:
    """Compact JSON as the catalogue is sent: UTF-8, with characters beyond Latin-1 as \\u escapes
    (the cassette has "Bras\\xedlia" raw but "\\u0130zmir" escaped)."""
    text = json.dumps(locations(), ensure_ascii=False, separators=(",", ":"))
    return _BEYOND_LATIN1.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def credit(artists: tuple[str, ...]) -> str:
    """Artists as the CSV prints them: "A, B & C"."""
    return artists[0] if len(artists) == 1 else ", ".join(artists[:-1]) + " & " + artists[-1]


def _quoted(value: str) -> str:
    """A field as Shazam quotes it: in double quotes, inner quotes left as they are (not doubled)."""
    return f'"{value}"'


def render_csv(chart_path: str, day: date, variant: int, size: int) -> bytes:
    """A chart CSV in the real byte layout, rows from `global_rows(chart_path, variant, size)`."""
    lines = [_quoted(f"{day:%A}, {day.day} {day:%B %Y} [performance over the past 7 days]"), "Rank,Artist,Title"]
    lines += [f"{row.rank},{_quoted(credit(row.song.artists))},{_quoted(row.song.title)}"
              for row in global_rows(chart_path, variant, size)]
    return ("\ufeff\n" + "\n".join(lines)).encode("utf-8")


def url_slug(text: str) -> str:
    """The slug Shazam and Apple put in track and album URLs: lowercase, punctuation dropped, gaps as "-",
    the rest percent-encoded ("Angel Numbers / Ten Toes" -> "angel-numbers-ten-toes", "Пыяла" -> "%D0%BF...")."""
    return quote(_GAPS.sub("-", _NOT_WORD.sub("", text.lower())).strip("-"), safe="-")


def track_key(song: GlobalSong) -> str:
    """The song's made-up but stable Shazam track key (8 or 9 digits, as the capture's are)."""
    return str(10_000_000 + stable_number("shazam", song.title, *song.artists) % 690_000_000)


def _track(song: GlobalSong, storefront: str) -> dict[str, object]:
    """One track as the v3 tracks JSON has it: the capture's fields, the parts the parser does not read trimmed."""
    key, title, artist = track_key(song), song.title, credit(song.artists)
    album_id = 1_000_000_000 + stable_number("album", song.title) % 700_000_000
    song_id = album_id + 1 + stable_number("track", song.title) % 400
    parts = [stable_hex(title, str(i), digits=2) for i in range(3)]
    art = _ART.format(100 + stable_number(title) % 30, *parts, f"{parts[0]}{stable_hex(title, 'art')}", "{}x{}")
    cover = art.format(400, 400)
    store = f"https://music.apple.com/{storefront.lower()}/album/{url_slug(title)}/{album_id}?i={song_id}&{_AFFILIATE}"
    url = f"https://www.shazam.com/track/{key}/{url_slug(title)}"
    return {
        "layout": "5", "type": "MUSIC", "key": key, "title": title, "subtitle": artist,
        "share": {"subject": f"{title} - {artist}", "text": f"{title} by {artist}", "href": url, "image": cover},
        "images": {"background": art.format(800, 800), "coverart": cover, "coverarthq": cover},
        "hub": {"type": "APPLEMUSIC", "image": "https://images.shazam.com/static/icons/hub/web/v5/applemusic.png",
                "actions": [{"name": "apple", "type": "applemusicplay", "id": str(song_id)}],
                "options": [{"caption": "OPEN", "actions": [{"name": "hub:applemusic:deeplink",
                                                             "type": "applemusicopen", "uri": store}],
                             "type": "open", "listcaption": "Open in Apple Music", "providername": "applemusic"}],
                "explicit": False, "displayname": "APPLE MUSIC"},
        "artists": [{"alias": url_slug(name), "id": "42", "adamid": str(200_000_000 + stable_number(name) % 900_000_000)}
                    for name in song.artists],
        "url": url, "properties": {},
    }


@functools.cache
def _track_json(song: GlobalSong, storefront: str) -> bytes:
    """`_track` encoded, once per song and storefront (a demo renders about 45,000 tracks of a few thousand)."""
    return json_body(_track(song, storefront))


def render_tracks_json(chart_path: str, storefront: str, variant: int, size: int) -> bytes:
    """A chart's v3 tracks JSON (`{"properties": {}, "tracks": [...]}`, compact UTF-8, no rank field), rows
    from `global_rows(chart_path, variant, size)` as the CSV has them: the bytes `json_body` gives the whole."""
    rows = global_rows(chart_path, variant, size)
    return b'{"properties":{},"tracks":[' + b",".join(_track_json(row.song, storefront) for row in rows) + b"]}"


def _rows_for(entry: shazam.CatalogueEntry) -> int:
    if entry.kind == "top-200":
        return TOP_ROWS
    if entry.kind == "top-50":
        return CITY_ROWS
    if entry.kind == "viral":
        return VIRAL_ROWS
    world = dict((shazam.slug(shazam.url_name(name)), rows) for name, rows in WORLD_GENRES)
    return world[entry.genre or ""] if entry.market == shazam.WORLD else COUNTRY_GENRE_ROWS


def replies(day: date, variant: int) -> dict[ReplayKey, Reply]:
    """The catalogue, every chart's CSV for chart date `day` and every track JSON discovery locates."""
    body = render_locations()
    table = {request_key(shazam.locations_request()): Reply(body, 200, "application/json;charset=utf-8")}
    paths = shazam.parse_locations(body)
    catalogue = shazam.normalise(paths)
    for entry in catalogue:
        csv_body = render_csv(entry.path, day, variant, _rows_for(entry))
        for upstream_path in set(entry.upstream_paths):
            table[request_key(shazam.csv_request(upstream_path))] = Reply(csv_body, 200, "text/csv; charset=utf-8")
    sizes = {entry.path: _rows_for(entry) for entry in catalogue}
    for tracks in shazam.track_lists(paths):
        table[request_key(shazam.tracks_request(tracks))] = Reply(
            render_tracks_json(tracks.path, tracks.storefront, variant, sizes[tracks.path]), 200,
            "application/json;charset=utf-8")
    return table
