"""radio-browser.info: the open station directory (JSON API, no auth; NOTES-global section 8a).

It is a directory only: stations with their stream URLs, no now-playing and no plays (those are
ours to observe, see `chartgw.upstreams.nowplaying`).

Servers. `all.api.radio-browser.info` is a DNS round robin; `GET /json/servers` answers the list
of API servers as `[{"ip", "name"}]`, one row per address, so a host appears once per IPv4/IPv6
address (the real capture names nl1 and de1 twice, and one host outside *.api.radio-browser.info).
`server_origins` turns that list into the origins to try, in a seeded random order (the API asks
clients to spread their load over the servers), each distinct host once, with the list's own origin
last. How the group fails over: take the origins in that order, try the next one on a transport
error, a status other than 200 (4xx included: a server out of sync answers 404 for known paths) or a
body the parser refuses, and stop at the first good answer: the crawl runner's `Fetcher.fetch_any`,
each try with its retries, body cap and politeness. With `CHARTGW_UPSTREAM_RADIO_BROWSER` set, every
server the list names (and the list's origin itself) is replaced by that one origin, so a replay server
stands in for all of them.

Requests follow the API's documentation and public clients: `/json/stations/bycountrycodeexact/{CC}`
and `/json/stations/bytagexact/{tag}` with `order=clickcount&reverse=true&hidebroken=true&limit=N`,
and a User-Agent naming the application (the API asks for one).

Format confidence: every field read here is in the real captures (Nov 2022, transcribed from a
client's stub data): compact JSON, integer booleans `hls`/`lastcheckok`/`ssl_error` (0/1), `tags`
and `language` as comma strings, "" where a text field is unset, null geo coordinates.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import msgspec

from chartgw.core.settings import Settings
from chartgw.upstreams import ORIGINS, UpstreamFormatError, UpstreamRequest, declare_upstream, origin
from chartgw.upstreams.json_api import load_json, obj, opt_text, text

UPSTREAM = declare_upstream("RADIO_BROWSER", "https://all.api.radio-browser.info")
USER_AGENT = "chartgw/0.1 (music chart gateway; station directory refresh)"
"""The API asks every client to send a speaking User-Agent."""
MAX_LIMIT = 100_000
ORDER = (("order", "clickcount"), ("reverse", "true"), ("hidebroken", "true"))
"""Most clicked first, broken stations (failed the directory's last checks) left out."""

_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+")
_COUNTRY = re.compile(r"[A-Za-z]{2}")
_HEADERS = (("User-Agent", USER_AGENT), ("Accept", "application/json"))


class Server(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One row of `/json/servers`."""

    name: str
    """The server's host name ("de1.api.radio-browser.info"): the origin is https://{name}."""
    ip: str | None
    """One of its addresses (IPv4 or IPv6); the list has a row per address."""


class Station(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One station of the directory, as /radio/stations shows it. Text fields the directory leaves
    empty ("") are null; its 0/1 integers are booleans."""

    station_id: str
    """`stationuuid`: the directory's stable id of the station (kept across its edits)."""
    name: str
    url: str
    """The stream URL as registered (may be a playlist .pls/.m3u or redirect)."""
    url_resolved: str | None
    """The stream URL the directory's checker ended at (playlists and redirects followed)."""
    homepage: str | None
    favicon: str | None
    tags: list[str]
    """`tags` split at commas, blanks dropped, order kept ([] when none)."""
    country: str | None
    countrycode: str | None
    """ISO 3166-1 alpha-2, upper case, as the directory has it."""
    state: str | None
    """Free text: a state, region or city (the directory has no separate city field)."""
    language: str | None
    """The comma string as the directory has it ("español internacional,spanish")."""
    codec: str | None
    """"MP3", "AAC", "AAC+", "OGG" ...; null when unset."""
    bitrate: int | None
    """kbit/s; null where the directory says 0 (unknown)."""
    hls: bool
    """The stream is HLS (a playlist of segments, no ICY metadata)."""
    lastcheckok: bool
    """The directory's last check of the stream succeeded."""
    ssl_error: bool
    clickcount: int
    """Clicks in the directory over the last 24 hours (its popularity measure)."""
    clicktrend: int | None
    votes: int
    geo_lat: float | None
    geo_long: float | None
    lastchangetime: str | None
    """When the entry was last edited, ISO 8601 UTC (`lastchangetime_iso8601`)."""
    lastcheckoktime: str | None
    """When a check last succeeded, ISO 8601 UTC."""


class Stats(msgspec.Struct, kw_only=True, omit_defaults=False):
    """`/json/stats`: the server's own counts (a cheap health probe of a server)."""

    status: str
    software_version: str | None
    supported_version: int | None
    stations: int
    stations_broken: int
    tags: int | None
    clicks_last_hour: int | None
    clicks_last_day: int | None
    languages: int | None
    countries: int | None


class UrlClick(msgspec.Struct, kw_only=True, omit_defaults=False):
    """`/json/url/{stationuuid}`: the stream URL, and a click counted for the station."""

    station_id: str
    name: str
    url: str
    message: str | None


# --- requests -------------------------------------------------------------------------------------------


def servers_request() -> UpstreamRequest:
    """The server list; asked of the list's own origin (`all.api.radio-browser.info`)."""
    return UpstreamRequest(upstream=UPSTREAM, path="/json/servers", headers=_HEADERS)


def _listing(limit: int, offset: int) -> tuple[tuple[str, str], ...]:
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"radio-browser: limit must be 1..{MAX_LIMIT}, got {limit}")
    if offset < 0:
        raise ValueError(f"radio-browser: offset must be >= 0, got {offset}")
    return ORDER + (("limit", str(limit)),) + ((("offset", str(offset)),) if offset else ())


def stations_by_country_request(country: str, limit: int, offset: int = 0) -> UpstreamRequest:
    """The most clicked working stations of one country (ISO alpha-2, exact match)."""
    if not _COUNTRY.fullmatch(country):
        raise ValueError(f"radio-browser: a country is an ISO alpha-2 code, got {country!r}")
    return UpstreamRequest(upstream=UPSTREAM, path=f"/json/stations/bycountrycodeexact/{country.upper()}",
                           params=_listing(limit, offset), headers=_HEADERS)


def stations_by_tag_request(tag: str, limit: int, offset: int = 0) -> UpstreamRequest:
    """The most clicked working stations with exactly this tag (tags are lower case in the directory)."""
    tag = tag.strip().lower()
    if not tag:
        raise ValueError("radio-browser: empty tag")
    return UpstreamRequest(upstream=UPSTREAM, path=f"/json/stations/bytagexact/{quote(tag, safe='')}",
                           params=_listing(limit, offset), headers=_HEADERS)


def stats_request() -> UpstreamRequest:
    return UpstreamRequest(upstream=UPSTREAM, path="/json/stats", headers=_HEADERS)


def url_click_request(station_id: str) -> UpstreamRequest:
    """Counts a click for the station (the directory's popularity): for a listener starting a
    station, not for the monitor's reconnects."""
    return UpstreamRequest(upstream=UPSTREAM, path=f"/json/url/{quote(station_id, safe='')}", headers=_HEADERS)


# --- failover -------------------------------------------------------------------------------------------


def server_origins(servers: Sequence[Server], override: str | None = None, seed: int | str | None = 0) -> list[str]:
    """The origins to try in order: each distinct server host once as https://{name}, shuffled by
    `seed` (the same seed and list give the same order; None keeps the list's order), then the
    list's own origin as the last resort. With `override` (a replay server) every one of them is
    that origin, so the answer is just `[override]`."""
    if override:
        return [override.rstrip("/")]
    hosts: list[str] = []
    for server in servers:
        host = server.name.lower().rstrip(".")
        if host not in hosts:
            hosts.append(host)
    if seed is not None:
        random.Random(seed).shuffle(hosts)
    origins = [f"https://{host}" for host in hosts]
    fallback = ORIGINS[UPSTREAM]
    return origins + ([fallback] if fallback not in origins else [])


def configured_origins(servers: Sequence[Server], settings: Settings, seed: int | str | None = 0) -> list[str]:
    """`server_origins` with `CHARTGW_UPSTREAM_RADIO_BROWSER` of `settings` applied: when it names another
    origin than the real one, that origin replaces every server."""
    chosen = origin(UPSTREAM, settings)
    return server_origins(servers, override=chosen if chosen != ORIGINS[UPSTREAM] else None, seed=seed)


# --- parsers --------------------------------------------------------------------------------------------


def _rows(body: bytes, what: str) -> list[Any]:
    """The top-level JSON array of a list endpoint; an object with a message is the API refusing."""
    doc = load_json(body, f"radio-browser {what}")
    if isinstance(doc, dict):
        message = opt_text(doc.get("message")) or f"keys {sorted(doc)[:6]}"
        raise UpstreamFormatError(f"radio-browser {what}: expected a list, got an object ({message})")
    if not isinstance(doc, list):
        raise UpstreamFormatError(f"radio-browser {what}: expected a list, got {type(doc).__name__}")
    if not doc:
        raise UpstreamFormatError(f"radio-browser {what}: empty list")
    return doc


def parse_servers(body: bytes) -> list[Server]:
    """The server list, rows in the list's order; rows whose name is not a host name are refused."""
    servers = []
    for index, row in enumerate(_rows(body, "servers")):
        where = f"radio-browser servers[{index}]"
        row = obj(row, where)
        name = text(row.get("name"), f"{where}.name")
        if not _HOST.fullmatch(name):
            raise UpstreamFormatError(f"{where}.name is not a host name: {name!r}")
        servers.append(Server(name=name, ip=opt_text(row.get("ip"))))
    return servers


def parse_stations(body: bytes) -> list[Station]:
    """The stations of a station list endpoint (by country, by tag, search), in the API's order."""
    return [_station(index, row) for index, row in enumerate(_rows(body, "stations"))]


def _station(index: int, row: object) -> Station:
    where = f"radio-browser stations[{index}]"
    item = obj(row, where)
    if "stationuuid" not in item:
        raise UpstreamFormatError(f"{where}: no stationuuid (keys {sorted(item)[:6]})")
    bitrate = _count(item.get("bitrate"), f"{where}.bitrate")
    return Station(
        station_id=text(item.get("stationuuid"), f"{where}.stationuuid"),
        name=text(item.get("name"), f"{where}.name"),
        url=text(item.get("url"), f"{where}.url"),
        url_resolved=opt_text(item.get("url_resolved")),
        homepage=opt_text(item.get("homepage")),
        favicon=opt_text(item.get("favicon")),
        tags=split_tags(item.get("tags")),
        country=opt_text(item.get("country")),
        countrycode=(opt_text(item.get("countrycode")) or "").upper() or None,
        state=opt_text(item.get("state")),
        language=opt_text(item.get("language")),
        codec=opt_text(item.get("codec")),
        bitrate=bitrate or None,
        hls=int_flag(item.get("hls"), f"{where}.hls"),
        lastcheckok=int_flag(item.get("lastcheckok"), f"{where}.lastcheckok"),
        ssl_error=int_flag(item.get("ssl_error", 0), f"{where}.ssl_error"),
        clickcount=_count(item.get("clickcount"), f"{where}.clickcount") or 0,
        clicktrend=_opt_int(item.get("clicktrend"), f"{where}.clicktrend"),
        votes=_count(item.get("votes"), f"{where}.votes") or 0,
        geo_lat=_coordinate(item.get("geo_lat"), f"{where}.geo_lat"),
        geo_long=_coordinate(item.get("geo_long"), f"{where}.geo_long"),
        lastchangetime=_iso(item, "lastchangetime"),
        lastcheckoktime=_iso(item, "lastcheckoktime"),
    )


def parse_stats(body: bytes) -> Stats:
    doc = obj(load_json(body, "radio-browser stats"), "radio-browser stats")
    if "stations" not in doc:
        raise UpstreamFormatError(f"radio-browser stats: no station count (keys {sorted(doc)[:6]})")
    where = "radio-browser stats"
    return Stats(
        status=text(doc.get("status"), f"{where}.status"),
        software_version=opt_text(doc.get("software_version")),
        supported_version=_opt_int(doc.get("supported_version"), f"{where}.supported_version"),
        stations=_count(doc.get("stations"), f"{where}.stations") or 0,
        stations_broken=_count(doc.get("stations_broken"), f"{where}.stations_broken") or 0,
        tags=_opt_int(doc.get("tags"), f"{where}.tags"),
        clicks_last_hour=_opt_int(doc.get("clicks_last_hour"), f"{where}.clicks_last_hour"),
        clicks_last_day=_opt_int(doc.get("clicks_last_day"), f"{where}.clicks_last_day"),
        languages=_opt_int(doc.get("languages"), f"{where}.languages"),
        countries=_opt_int(doc.get("countries"), f"{where}.countries"),
    )


def parse_url_click(body: bytes) -> UrlClick:
    """The click answer; `ok: false` (unknown station) is refused with the API's message."""
    where = "radio-browser url"
    doc = obj(load_json(body, where), where)
    if doc.get("ok") is not True:
        raise UpstreamFormatError(f"{where}: not ok: {opt_text(doc.get('message')) or sorted(doc)[:6]}")
    return UrlClick(station_id=text(doc.get("stationuuid"), f"{where}.stationuuid"),
                    name=text(doc.get("name"), f"{where}.name"), url=text(doc.get("url"), f"{where}.url"),
                    message=opt_text(doc.get("message")))


# --- fields ---------------------------------------------------------------------------------------------


def split_tags(value: object) -> list[str]:
    """"pop,rock, Pop ,," -> ["pop", "rock", "Pop"]: split at commas, blanks dropped, exact repeats dropped."""
    tags: list[str] = []
    for part in (opt_text(value) or "").split(","):
        tag = part.strip()
        if tag and tag not in tags:
            tags.append(tag)
    return tags


def int_flag(value: object, where: str) -> bool:
    """The API's booleans: 0/1 integers (a JSON true/false is taken too); anything else is an error."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    raise UpstreamFormatError(f"{where}: expected 0 or 1, got {value!r}")


def _opt_int(value: object, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise UpstreamFormatError(f"{where}: expected an integer, got {value!r}")


def _count(value: object, where: str) -> int | None:
    number = _opt_int(value, where)
    if number is not None and number < 0:
        raise UpstreamFormatError(f"{where}: negative count {number}")
    return number


def _coordinate(value: object, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise UpstreamFormatError(f"{where}: expected a number or null, got {value!r}")


def _iso(item: dict[str, Any], field: str) -> str | None:
    """The `*_iso8601` twin of a timestamp, else the plain "YYYY-MM-DD HH:MM:SS" (UTC) made ISO."""
    twin = opt_text(item.get(f"{field}_iso8601"))
    if twin:
        return twin
    plain = opt_text(item.get(field))
    if plain and re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", plain):
        return plain.replace(" ", "T") + "Z"
    return None
