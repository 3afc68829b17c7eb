"""iTunes Store (itunes.apple.com): the legacy RSS feed generator's JSON charts (NOTES section 3c).

`GET /{cc}/rss/{feed}/limit={N}/json` answers Atom written as JSON: every value is an object with
a `label` and/or `attributes` (`{"im:name": {"label": "..."}}`). Read from the real capture
(topalbums, limit=1): `feed.updated.label` (ISO timestamp, the only chart time), `feed.entry`, and
per entry `im:name`, `im:artist` (+ `attributes.href`), `im:image[]` (`attributes.height`),
`id.label` (store URL) with `id.attributes["im:id"]` (the numeric store id), `im:price`,
`category.attributes`, `im:releaseDate`, `rights`, `link`. The quirk it shows: with a single result
`feed.entry` is a bare object, not a list (and an album's `link` is an object too).
Known from public code only (topsongs/topmusicvideos fixtures): `im:collection` (the album of a
song) and `link` as a list with an `enclosure` preview whose `im:duration` is the preview's length
in milliseconds. Ranks are positions in `feed.entry`; the feed carries no rank field and no ISRC.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import msgspec

from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, check_chart_type, declare_upstream
from chartgw.upstreams.json_api import load_json, obj, opt_obj, opt_text, text

UPSTREAM = declare_upstream("ITUNES", "https://itunes.apple.com")
FEEDS: tuple[str, ...] = ("topsongs", "topalbums", "topmusicvideos")
MAX_LIMIT = 200
"""The feed generator's largest `limit=`."""

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_STORE_ID = re.compile(r"(?:id)?(\d+)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


class DigitalSalesEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One row of an iTunes Store chart. Store ids are Apple's numeric ids as strings (the join key
    of other Apple sources); every field after `artist_url` is null when the feed leaves it out."""

    rank: int
    """Position in the feed, from 1."""
    title: str
    """`im:name`: the song, album or video name."""
    artist: str
    """`im:artist.label`, one credit as the store prints it ("P!nk & Willow Sage Hart")."""
    artists: list[str]
    """[artist]: the feed does not split credits."""
    store_id: str
    """`id.attributes["im:id"]`: the iTunes/Apple numeric id of the item."""
    store_url: str
    """`id.label`: the item's store page."""
    artist_id: str | None
    """The numeric id at the end of the artist's store URL; null when the artist has no store page."""
    artist_url: str | None
    collection: str | None
    """The album a song is on (`im:collection.im:name`); null for albums and videos."""
    collection_id: str | None
    """The album's numeric id, from `im:collection.link`; null when the feed gives no album link."""
    price: float | None
    """`im:price.attributes.amount` in `currency`."""
    currency: str | None
    release_date: str | None
    """YYYY-MM-DD as the feed dates the release (its own offset, not converted)."""
    genre: str | None
    genre_id: str | None
    image_url: str | None
    """The largest `im:image` (170 px for songs and albums, 100 px for videos)."""
    preview_url: str | None
    """The enclosure link: an audio preview of a song, a video preview; null for albums."""
    duration_ms: int | None
    """The enclosure's `im:duration`: the length of the preview clip (about 30000), not of the track."""
    rights: str | None


class ParsedFeed(msgspec.Struct, kw_only=True):
    """What one feed body says: its chart date (UTC date of `feed.updated`) and its rows."""

    updated: str
    """`feed.updated.label` as sent (ISO 8601 with offset)."""
    chart_date: str
    title: str | None
    entries: list[DigitalSalesEntry]


def feed_path(country: str, feed: str, limit: int) -> str:
    return f"/{country}/rss/{feed}/limit={limit}/json"


def requests_for(country: str, feed: str, limit: int) -> list[UpstreamRequest]:
    """One GET; the generator puts every option in the path, there is no query string."""
    check_chart_type("itunes", feed, FEEDS)
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"itunes: limit must be 1..{MAX_LIMIT}, got {limit}")
    return [UpstreamRequest(upstream=UPSTREAM, path=feed_path(country, feed, limit),
                            headers=(("Accept", "application/json"),))]


def as_list(value: object) -> list[Any]:
    """The feed's one-or-many values: a bare object is one item, a list is itself, absent is none."""
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def label(node: object) -> str | None:
    """`node.label` of an Atom-as-JSON value, or None."""
    return opt_text(node.get("label")) if isinstance(node, dict) else None


def attributes(node: object) -> dict[str, Any]:
    """`node.attributes`, or {} when the value has none."""
    if isinstance(node, dict) and isinstance(node.get("attributes"), dict):
        found: dict[str, Any] = node["attributes"]
        return found
    return {}


def numeric_id(url: str | None) -> str | None:
    """The store id at the end of a store URL's path: ".../harry-styles/id471260289?uo=2" (2017) and
    ".../taylor-swift/159260351?uo=2" (later) both carry it, with or without the "id" prefix."""
    if not url:
        return None
    last = urlsplit(url).path.rstrip("/").rpartition("/")[2]
    match = _STORE_ID.fullmatch(last)
    return match.group(1) if match else None


def parse(feed: str, body: bytes) -> ParsedFeed:
    """The rows of one feed body. Refuses another Apple format by name, an empty chart and a feed
    of a different kind than asked (its `feed.id` names the feed it is)."""
    check_chart_type("itunes", feed, FEEDS)
    doc = obj(load_json(body, "itunes"), "itunes")
    if "feed" not in doc:
        if isinstance(doc.get("results"), dict):
            raise UpstreamFormatError("itunes: this is an Apple Music API `results` payload, not an iTunes RSS feed")
        raise UpstreamFormatError(f"itunes: no `feed` in payload (keys {sorted(doc)[:8]})")
    root = obj(doc["feed"], "itunes.feed")
    if "results" in root and "entry" not in root:
        raise UpstreamFormatError("itunes: this is an rss.itunes.apple.com / marketing-tools `feed.results` payload "
                                  "(RSS v1/v2), not the legacy iTunes RSS `feed.entry` format")
    feed_id = label(root.get("id"))
    if feed_id and f"/rss/{feed}/" not in feed_id:
        raise UpstreamFormatError(f"itunes: asked for {feed}, the payload is feed {feed_id!r}")
    updated = text(label(root.get("updated")), "itunes feed.updated.label")
    entries = as_list(root.get("entry"))
    if not entries:
        raise UpstreamFormatError(f"itunes: feed {feed} has no entries")
    return ParsedFeed(updated=updated, chart_date=utc_date(updated), title=label(root.get("title")),
                      entries=[_entry(position, item) for position, item in enumerate(entries, start=1)])


def utc_date(timestamp: str) -> str:
    """The UTC calendar date of an ISO 8601 timestamp with an offset ("2017-05-23T18:10:34-07:00")."""
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        raise UpstreamFormatError(f"itunes: feed.updated is not an ISO timestamp: {timestamp!r}") from None
    if moment.tzinfo is None:
        raise UpstreamFormatError(f"itunes: feed.updated has no UTC offset: {timestamp!r}")
    return moment.astimezone(UTC).date().isoformat()


def _entry(position: int, item: object) -> DigitalSalesEntry:
    where = f"itunes feed.entry[{position - 1}]"
    item = obj(item, where)
    artist_node = item.get("im:artist")
    artist = text(label(artist_node), f"{where}.im:artist.label")
    artist_url = opt_text(attributes(artist_node).get("href"))
    ident = item.get("id")
    collection = opt_obj(item.get("im:collection"))
    collection_link = next((attributes(link).get("href") for link in as_list(collection.get("link"))), None)
    price = attributes(item.get("im:price"))
    category = attributes(item.get("category"))
    enclosure: Any = next((link for link in as_list(item.get("link")) if attributes(link).get("rel") == "enclosure"), {})
    return DigitalSalesEntry(
        rank=position,
        title=text(label(item.get("im:name")), f"{where}.im:name.label"),
        artist=artist,
        artists=[artist],
        store_id=text(attributes(ident).get("im:id"), f'{where}.id.attributes["im:id"]'),
        store_url=text(label(ident), f"{where}.id.label"),
        artist_id=numeric_id(artist_url),
        artist_url=artist_url,
        collection=label(collection.get("im:name")),
        collection_id=numeric_id(opt_text(collection_link)),
        price=_amount(price.get("amount"), f"{where}.im:price"),
        currency=opt_text(price.get("currency")),
        release_date=_date(label(item.get("im:releaseDate"))),
        genre=opt_text(category.get("label")) or opt_text(category.get("term")),
        genre_id=opt_text(category.get("im:id")),
        image_url=_largest_image(item.get("im:image")),
        preview_url=opt_text(attributes(enclosure).get("href")),
        duration_ms=_duration(label(enclosure.get("im:duration")) if enclosure else None, where),
        rights=label(item.get("rights")),
    )


def _amount(value: object, where: str) -> float | None:
    """"9.99000" -> 9.99; absent -> None; anything else is a changed format."""
    raw = opt_text(value)
    if raw is None:
        return None
    if not _NUMBER.fullmatch(raw):
        raise UpstreamFormatError(f"{where}: amount is not a number: {raw!r}")
    return float(raw)


def _duration(value: str | None, where: str) -> int | None:
    """`im:duration` is milliseconds, sometimes with a fraction ("30045.0")."""
    if value is None:
        return None
    if not _NUMBER.fullmatch(value):
        raise UpstreamFormatError(f"{where}: im:duration is not a number: {value!r}")
    return round(float(value))


def _date(value: str | None) -> str | None:
    """The YYYY-MM-DD that starts `im:releaseDate.label`, or None."""
    if value is None or not _ISO_DATE.match(value):
        return None
    return value[:10]


def _largest_image(images: object) -> str | None:
    """The URL of the tallest image; images without a height rank below any with one."""
    best: tuple[int, str] | None = None
    for image in as_list(images):
        url = label(image)
        if not url:
            continue
        height = opt_text(attributes(image).get("height")) or ""
        size = int(height) if height.isdigit() else -1
        if best is None or size > best[0]:
            best = (size, url)
    return best[1] if best else None
