"""X (Twitter) trending topics by location: the X API (v1.1 and v2) and the trends24.in pages (NOTES section 6).

* v1.1 `GET /1.1/trends/place.json?id=<WOEID>` [real captures: New York 2016-01-16, Worldwide 2016-04-12]: a
  one-element list `[{trends: [{name, url, promoted_content, query, tweet_volume}], as_of, created_at,
  locations: [{name, woeid}]}]`. `query` is URL-encoded; `tweet_volume` an int or null; names are Unicode
  (Arabic, Portuguese in the Worldwide capture). The New York capture was stored escaped twice (its decoded
  strings still hold `\\/` and `\\u00ED`), so leftover JSON escapes in strings are decoded once more.
* v2 `GET /2/trends/by/woeid/{woeid}` [doc example only]: `{"data": [{"trend_name", "tweet_count"}]}`, with
  `tweet_count` absent when X has none. It states no time and no location.
* Errors [doc/code, no capture]: v1.1 `{"errors": [{"code": 88, "message": "Rate limit exceeded"}]}` (32/89/99/215
  are authentication failures, 34 an unknown WOEID); v2 problem objects `{"title", "detail", "status", "type"}`.
* trends24.in [public scraper code only, no capture]: one `div.list-container` per hourly snapshot, the first
  the latest, each an `h3.title[data-timestamp=<unix secs>]` and an `ol.trend-card__list` of `li` with
  `a.trend-link` (name, href to the X search) and `span.tweet-count` (`data-count`, text like "12K", or empty).

Rank is the position once promoted trends (non-null `promoted_content`) are left out.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Literal, NamedTuple
from urllib.parse import parse_qsl, urlsplit

import msgspec
from selectolax.lexbor import LexborHTMLParser, LexborNode

from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, declare_upstream
from chartgw.upstreams.fields import clean, decode, node_text, snippet
from chartgw.upstreams.json_api import BROWSER_UA, load_json, obj, opt_text

X_API = declare_upstream("X_API", "https://api.twitter.com")
TRENDS24 = declare_upstream("TRENDS24", "https://trends24.in")

Source = Literal["x-api-v1.1", "x-api-v2", "trends24"]
LocationKind = Literal["worldwide", "country", "city"]
ErrorKind = Literal["rate_limit", "unauthorized", "not_found", "other"]

_LEFTOVER_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|/)")
_COUNT = re.compile(r"(\d+(?:\.\d+)?)\s*([KkMm]?)")
_ROBOT_MARKERS = ("just a moment", "attention required", "cf-chl", "captcha", "are you a robot")

# v1.1 error codes by what they mean for the crawler.
RATE_LIMIT_CODES = frozenset({88})
AUTH_CODES = frozenset({32, 89, 99, 215, 135, 453})
NOT_FOUND_CODES = frozenset({34})
_STATUS_KINDS: dict[int, ErrorKind] = {401: "unauthorized", 403: "unauthorized", 404: "not_found", 429: "rate_limit"}


# --- locations --------------------------------------------------------------------------------------------


class Location(NamedTuple):
    slug: str
    """Our slug: "worldwide", an ISO country code ("us"), or a city name ("new-york")."""
    name: str
    woeid: int
    """Yahoo's Where On Earth id, as X still uses it (1 = Worldwide)."""
    kind: LocationKind
    country: str | None
    """ISO 3166-1 alpha-2 (upper case) of the country or the city's country; None for worldwide."""
    trends24_path: str
    """The trends24.in page: "/", "/united-states/", "/united-states/new-york/"."""


def _country(code: str, name: str, woeid: int, page: str) -> Location:
    return Location(code.lower(), name, woeid, "country", code.upper(), f"/{page}/")


def _city(slug: str, name: str, woeid: int, code: str, page: str) -> Location:
    return Location(slug, name, woeid, "city", code.upper(), f"/{page}/{slug}/")


LOCATIONS: tuple[Location, ...] = (
    Location("worldwide", "Worldwide", 1, "worldwide", None, "/"),
    _country("us", "United States", 23424977, "united-states"),
    _country("gb", "United Kingdom", 23424975, "united-kingdom"),
    _country("jp", "Japan", 23424856, "japan"),
    _country("in", "India", 23424848, "india"),
    _country("br", "Brazil", 23424768, "brazil"),
    _country("kr", "Korea", 23424868, "korea"),
    _country("de", "Germany", 23424829, "germany"),
    _country("fr", "France", 23424819, "france"),
    _country("ca", "Canada", 23424775, "canada"),
    _country("mx", "Mexico", 23424900, "mexico"),
    _country("es", "Spain", 23424950, "spain"),
    _country("it", "Italy", 23424853, "italy"),
    _country("au", "Australia", 23424748, "australia"),
    _country("id", "Indonesia", 23424846, "indonesia"),
    _country("tr", "Turkey", 23424969, "turkey"),
    _country("ar", "Argentina", 23424747, "argentina"),
    _country("ph", "Philippines", 23424934, "philippines"),
    _country("sa", "Saudi Arabia", 23424938, "saudi-arabia"),
    _country("nl", "Netherlands", 23424909, "netherlands"),
    _country("ng", "Nigeria", 23424908, "nigeria"),
    _country("za", "South Africa", 23424942, "south-africa"),
    _city("new-york", "New York", 2459115, "us", "united-states"),
    _city("los-angeles", "Los Angeles", 2442047, "us", "united-states"),
    _city("chicago", "Chicago", 2379574, "us", "united-states"),
    _city("london", "London", 44418, "gb", "united-kingdom"),
    _city("manchester", "Manchester", 28218, "gb", "united-kingdom"),
    _city("tokyo", "Tokyo", 1118370, "jp", "japan"),
    _city("osaka", "Osaka", 15015370, "jp", "japan"),
    _city("mumbai", "Mumbai", 2295411, "in", "india"),
    _city("sao-paulo", "São Paulo", 455827, "br", "brazil"),
    _city("paris", "Paris", 615702, "fr", "france"),
    _city("berlin", "Berlin", 638242, "de", "germany"),
    _city("madrid", "Madrid", 766273, "es", "spain"),
    _city("toronto", "Toronto", 4118, "ca", "canada"),
    _city("mexico-city", "Mexico City", 116545, "mx", "mexico"),
    _city("sydney", "Sydney", 1105779, "au", "australia"),
    _city("istanbul", "Istanbul", 2344116, "tr", "turkey"),
)
LOCATIONS_BY_SLUG: dict[str, Location] = {loc.slug: loc for loc in LOCATIONS}
LOCATIONS_BY_WOEID: dict[int, Location] = {loc.woeid: loc for loc in LOCATIONS}


def location(slug: str) -> Location:
    """The configured location of `slug`; KeyError naming the slug when there is none."""
    try:
        return LOCATIONS_BY_SLUG[slug]
    except KeyError:
        raise KeyError(f"unknown trends location slug {slug!r}") from None


def location_by_woeid(woeid: int) -> Location:
    try:
        return LOCATIONS_BY_WOEID[woeid]
    except KeyError:
        raise KeyError(f"unknown trends location WOEID {woeid}") from None


# --- records ----------------------------------------------------------------------------------------------


class TrendEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One trending topic of a location."""

    rank: int
    """Position in the list from 1, counted after promoted trends are left out."""
    name: str
    """As X spells it, Unicode kept ("#NãoDêUnfTagueirosSdv", "#تعليق_الدراسه")."""
    url: str | None
    """The X search link of the trend (v1.1 `url`, trends24 link); null in v2, which gives none."""
    query: str | None
    """The URL-encoded search query ("%22Matt+Barnes%22"); null in v2."""
    tweet_volume: int | None
    """Posts about the trend (v1.1 `tweet_volume`, v2 `tweet_count`, trends24 `data-count` or its rounded
    "12K" text); null when the source has no count."""


class ParsedTrends(msgspec.Struct, kw_only=True, omit_defaults=False):
    """What one trends body says."""

    source: Source
    as_of: str | None
    """When the list was taken, ISO 8601 UTC ("2016-01-16T20:28:23Z"): v1.1 `as_of`, the trends24 snapshot's
    timestamp; null in v2, which states no time."""
    created_at: str | None
    """v1.1 `created_at` (when X computed the trends); null elsewhere."""
    location_name: str | None
    """v1.1 `locations[0].name`; null where the body names no location (v2, trends24)."""
    woeid: int | None
    """v1.1 `locations[0].woeid`; null where the body gives none."""
    entries: list[TrendEntry]


class XApiError(UpstreamFormatError):
    """The X API answered with an error instead of trends; `kind` says what the crawler should make of it."""

    def __init__(self, message: str, kind: ErrorKind, code: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.code = code


# --- requests ---------------------------------------------------------------------------------------------


def _api_headers(token: str) -> tuple[tuple[str, str], ...]:
    if not token:
        raise ValueError("x api: a bearer token is required")
    return (("Authorization", f"Bearer {token}"), ("Accept", "application/json"))


def v1_request(woeid: int, token: str) -> UpstreamRequest:
    """v1.1 trends of one WOEID with an app-only bearer token."""
    return UpstreamRequest(X_API, "/1.1/trends/place.json", params=(("id", str(woeid)),), headers=_api_headers(token))


def v2_request(woeid: int, token: str, max_trends: int | None = None) -> UpstreamRequest:
    """v2 trends of one WOEID. `max_trends` (documented as 1-50, default 20; not checked live) is sent only
    when given."""
    params = (("max_trends", str(max_trends)),) if max_trends is not None else ()
    return UpstreamRequest(X_API, f"/2/trends/by/woeid/{woeid}", params=params, headers=_api_headers(token))


def trends24_request(where: Location) -> UpstreamRequest:
    """The trends24.in page of a location (the site serves its pages to browsers; a bare client gets friction)."""
    headers = (("User-Agent", BROWSER_UA), ("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"),
               ("Accept-Language", "en-US,en;q=0.9"))
    return UpstreamRequest(TRENDS24, where.trends24_path, headers=headers)


# --- shared -----------------------------------------------------------------------------------------------


def unescape_leftovers(text: str) -> str:
    """Decode JSON escapes that survived one decoding (`\\/`, `\\u00ED`): a body stored escaped twice."""
    if "\\" not in text:
        return text
    return _LEFTOVER_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1) else "/", text)


def _text(value: object) -> str | None:
    raw = opt_text(value)
    return unescape_leftovers(raw) if raw is not None else None


def _volume(value: object, where: str) -> int | None:
    """An int or null; digit strings are accepted, anything else is a changed format."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise UpstreamFormatError(f"{where}: expected a count or null, got {value!r}")


def _iso(value: object, where: str) -> str | None:
    """An ISO 8601 UTC timestamp as "YYYY-MM-DDTHH:MM:SSZ"; None when absent."""
    raw = opt_text(value)
    if raw is None:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise UpstreamFormatError(f"{where}: not an ISO timestamp: {raw!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _raise_api_error(doc: object, who: str) -> None:
    """An XApiError for an error payload of either API version; nothing for a trends payload."""
    if not isinstance(doc, dict):
        return
    errors = doc.get("errors")
    if isinstance(errors, list) and errors and "data" not in doc and "trends" not in doc:
        first = errors[0] if isinstance(errors[0], dict) else {}
        code = first.get("code") if isinstance(first.get("code"), int) else None
        message = clean(first.get("message") or first.get("detail") or first.get("title")) or "error"
        kind: ErrorKind = "other"
        if code in RATE_LIMIT_CODES:
            kind = "rate_limit"
        elif code in AUTH_CODES:
            kind = "unauthorized"
        elif code in NOT_FOUND_CODES:
            kind = "not_found"
        raise XApiError(f"{who}: X API error {code if code is not None else ''} {message}".replace("  ", " "),
                        kind, code)
    status = doc.get("status")
    if isinstance(status, int) and status >= 400 and "data" not in doc:
        detail = clean(doc.get("detail") or doc.get("title")) or f"HTTP {status}"
        raise XApiError(f"{who}: X API problem {status}: {detail}", _STATUS_KINDS.get(status, "other"), status)


# --- v1.1 -------------------------------------------------------------------------------------------------


def parse_v1(body: bytes) -> ParsedTrends:
    """A v1.1 `trends/place.json` body. Refuses an error payload (XApiError), HTML, an empty list and a
    list without trends."""
    doc = load_json(body, "x api v1.1")
    _raise_api_error(doc, "x api v1.1")
    if not isinstance(doc, list):
        raise UpstreamFormatError(f"x api v1.1: expected a one-element list, got {type(doc).__name__}")
    if not doc:
        raise UpstreamFormatError("x api v1.1: empty list (no trends for this location)")
    root = obj(doc[0], "x api v1.1 [0]")
    trends = root.get("trends")
    if not isinstance(trends, list) or not trends:
        raise UpstreamFormatError("x api v1.1: no trends in the payload")
    places = root.get("locations") if isinstance(root.get("locations"), list) else []
    place = places[0] if places and isinstance(places[0], dict) else {}
    entries: list[TrendEntry] = []
    for i, item in enumerate(trends):
        where = f"x api v1.1 trends[{i}]"
        item = obj(item, where)
        if item.get("promoted_content") not in (None, False):
            continue
        name = _text(item.get("name"))
        if not name:
            raise UpstreamFormatError(f"{where}: no name")
        entries.append(TrendEntry(rank=len(entries) + 1, name=name, url=_text(item.get("url")),
                                  query=_text(item.get("query")),
                                  tweet_volume=_volume(item.get("tweet_volume"), f"{where}.tweet_volume")))
    if not entries:
        raise UpstreamFormatError("x api v1.1: only promoted trends in the payload")
    woeid = place.get("woeid")
    return ParsedTrends(source="x-api-v1.1", as_of=_iso(root.get("as_of"), "x api v1.1 as_of"),
                        created_at=_iso(root.get("created_at"), "x api v1.1 created_at"),
                        location_name=_text(place.get("name")),
                        woeid=woeid if isinstance(woeid, int) and not isinstance(woeid, bool) else None,
                        entries=entries)


# --- v2 ---------------------------------------------------------------------------------------------------


def parse_v2(body: bytes) -> ParsedTrends:
    """A v2 `trends/by/woeid` body. Refuses a problem or `errors` payload (XApiError), HTML and an empty or
    missing `data`."""
    doc = load_json(body, "x api v2")
    _raise_api_error(doc, "x api v2")
    root = obj(doc, "x api v2")
    data = root.get("data")
    if not isinstance(data, list) or not data:
        raise UpstreamFormatError(f"x api v2: no `data` trends (keys {sorted(root)[:8]})")
    entries: list[TrendEntry] = []
    for i, item in enumerate(data):
        where = f"x api v2 data[{i}]"
        item = obj(item, where)
        name = _text(item.get("trend_name"))
        if not name:
            raise UpstreamFormatError(f"{where}: no trend_name")
        entries.append(TrendEntry(rank=len(entries) + 1, name=name, url=None, query=None,
                                  tweet_volume=_volume(item.get("tweet_count"), f"{where}.tweet_count")))
    return ParsedTrends(source="x-api-v2", as_of=None, created_at=None, location_name=None, woeid=None,
                        entries=entries)


# --- trends24 ---------------------------------------------------------------------------------------------


def count_text(text: str) -> int | None:
    """trends24's shown count: "12K" -> 12000, "1.2M" -> 1200000, "12,345" -> 12345, "" -> None. A rounded
    figure: the page's `data-count`, when there, is preferred."""
    match = _COUNT.search(text.replace(",", ""))
    if match is None:
        return None
    return round(float(match.group(1)) * {"": 1, "k": 1_000, "m": 1_000_000}[match.group(2).lower()])


def _trends24_volume(item: LexborNode) -> int | None:
    span = item.css_first("span.tweet-count")
    if span is None:
        return None
    raw = (span.attributes.get("data-count") or "").strip()
    if raw.isdigit():
        return int(raw)
    return count_text(node_text(span))


def _query_of(href: str | None) -> str | None:
    """The still URL-encoded `q` of an X search link, as v1.1 gives `query`."""
    if not href:
        return None
    for part in urlsplit(href).query.split("&"):
        key, _, value = part.partition("=")
        if key == "q" and value:
            return value
    return None


def _snapshot_time(container: LexborNode | None, tree: LexborHTMLParser) -> str | None:
    heading = container.css_first("h3.title[data-timestamp]") if container is not None else None
    heading = heading or tree.css_first("h3.title[data-timestamp]")
    raw = (heading.attributes.get("data-timestamp") or "").strip() if heading is not None else ""
    try:
        seconds = float(raw)
    except ValueError:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_page(tree: LexborHTMLParser, text: str, expected_path: str | None) -> None:
    title = node_text(tree.css_first("title"))
    lowered = (title + " " + text[:2000]).lower()
    if any(marker in lowered for marker in _ROBOT_MARKERS):
        raise UpstreamFormatError(f"trends24: robot check instead of the trends page (title {title!r})")
    canonical = tree.css_first('link[rel="canonical"]')
    href = canonical.attributes.get("href") if canonical is not None else None
    if expected_path and href:
        path = urlsplit(href).path or "/"
        if path.rstrip("/") != expected_path.rstrip("/"):
            raise UpstreamFormatError(f"trends24: asked for {expected_path}, the page is {path}")


def parse_trends24(body: bytes, expected_path: str | None = None) -> ParsedTrends:
    """The latest snapshot (first `div.list-container`) of a trends24.in page. With `expected_path`, a page
    whose canonical link names another location (the site's redirect for unknown places) is refused, as are
    an empty body, a robot check and a page without trend rows."""
    text = decode(body)
    if not text.strip():
        raise UpstreamFormatError("trends24: empty body")
    tree = LexborHTMLParser(text)
    _check_page(tree, text, expected_path)
    container = tree.css_first("div.list-container")
    scope: LexborNode | None = container if container is not None else tree.body
    listing = scope.css_first("ol.trend-card__list") if scope is not None else None
    if listing is None:
        raise UpstreamFormatError(f"trends24: no ol.trend-card__list (layout changed?): {snippet(text)!r}")
    entries: list[TrendEntry] = []
    for item in listing.css("li"):
        link = item.css_first("a.trend-link") or item.css_first("a")
        name = node_text(link) or clean(item.attributes.get("title"))
        if not name:
            continue
        href = link.attributes.get("href") if link is not None else None
        url = f"https://twitter.com{href}" if href and href.startswith("/") else (href or None)
        entries.append(TrendEntry(rank=len(entries) + 1, name=name, url=url, query=_query_of(url),
                                  tweet_volume=_trends24_volume(item)))
    if not entries:
        raise UpstreamFormatError("trends24: the latest snapshot has no trends")
    return ParsedTrends(source="trends24", as_of=_snapshot_time(container, tree), created_at=None,
                        location_name=None, woeid=None, entries=entries)


def parse(source: Source, body: bytes, expected_path: str | None = None) -> ParsedTrends:
    """Dispatch on the configured source's format."""
    if source == "x-api-v1.1":
        return parse_v1(body)
    if source == "x-api-v2":
        return parse_v2(body)
    return parse_trends24(body, expected_path)


def decoded_query(entry: TrendEntry) -> str | None:
    """The entry's query as text ("%22Matt+Barnes%22" -> '"Matt Barnes"'), for checks and display."""
    if entry.query is None:
        return None
    pairs = parse_qsl(f"q={entry.query}", keep_blank_values=True)
    return pairs[0][1] if pairs else None
