"""iTunes RSS sample feeds, written as the legacy generator writes them, and the /digital-sales seeder.

The shape follows the real topalbums capture (NOTES 3c): Atom as JSON, every value a `label`
and/or `attributes` object, the feed's `updated` in Pacific time, and `entry` a bare object when
the feed holds one row. Songs and music videos follow public fixtures of those feeds: songs carry
`im:collection` and a `link` list ending in an audio-preview enclosure (`im:duration` "30000"),
videos 53/60/100 px stills and a video enclosure (`im:duration` like "30045.0"). Songs come from
the shared global pool; ids, prices, genres and URLs are made up but stable per song and storefront.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, datetime, timedelta, timezone
from typing import Protocol

from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples import GlobalSong, SampleRow, global_rows
from chartgw.demo.samples.bodies import json_body, stable_hex, stable_number
from chartgw.upstreams.itunes import feed_path, requests_for

CONTENT_TYPE = "application/json; charset=utf-8"
PACIFIC = timezone(timedelta(hours=-7))
"""The offset the captured feeds state their times in."""

FEED_TITLES = {"topsongs": "Top Songs", "topalbums": "Top Albums", "topmusicvideos": "Top Music Videos"}
# Storefront -> (currency, label format); prices per media below, in that currency.
CURRENCIES: dict[str, tuple[str, str]] = {
    "us": ("USD", "${}"), "ca": ("CAD", "${}"), "au": ("AUD", "${}"), "gb": ("GBP", "£{}"),
    "de": ("EUR", "{} €"), "fr": ("EUR", "{} €"), "jp": ("JPY", "¥{}"), "kr": ("KRW", "₩{}"),
}
PRICES: dict[str, dict[str, str]] = {
    "USD": {"topsongs": "1.29", "topalbums": "9.99", "topmusicvideos": "1.99"},
    "GBP": {"topsongs": "0.99", "topalbums": "7.99", "topmusicvideos": "1.79"},
    "EUR": {"topsongs": "1.29", "topalbums": "9.99", "topmusicvideos": "1.99"},
    "JPY": {"topsongs": "250", "topalbums": "2000", "topmusicvideos": "400"},
    "KRW": {"topsongs": "1500", "topalbums": "11000", "topmusicvideos": "2500"},
    "CAD": {"topsongs": "1.29", "topalbums": "10.99", "topmusicvideos": "1.99"},
    "AUD": {"topsongs": "2.19", "topalbums": "16.99", "topmusicvideos": "2.99"},
}
MUSIC_GENRES = (("14", "Pop"), ("18", "Hip-Hop/Rap"), ("15", "R&B/Soul"), ("17", "Dance"), ("6", "Country"),
                ("51", "K-Pop"))
VIDEO_GENRES = (("1614", "Pop"), ("1615", "R&B/Soul"), ("1763", "Classical Crossover"))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "item"


def _store_id(*parts: str) -> str:
    """A 10-digit store id like Apple's (1226034336), stable per parts."""
    return str(1_000_000_000 + stable_number(*parts) % 700_000_000)


def artist_credit(artists: tuple[str, ...]) -> str:
    """One credit as the store prints it: "A", "A & B", "A, B & C"."""
    if len(artists) == 1:
        return artists[0]
    return ", ".join(artists[:-1]) + " & " + artists[-1]


def _price(feed: str, country: str) -> dict[str, object]:
    currency, fmt = CURRENCIES.get(country, ("USD", "${}"))
    amount = PRICES[currency][feed]
    shown = amount.replace(".", ",") if currency == "EUR" else amount
    return {"label": fmt.format(shown), "attributes": {"amount": f"{float(amount):.5f}", "currency": currency}}


def _images(song: GlobalSong, video: bool) -> list[dict[str, object]]:
    token = stable_hex(song.title, "art", digits=8)
    folder = f"https://is{1 + stable_number(song.title) % 5}-ssl.mzstatic.com/image/thumb/"
    base = f"{folder}{'Video' if video else 'Music'}124/v4/{token[:2]}/{token[2:4]}/{token[4:6]}/{token}/art.jpg"
    sizes = ((53, "71x53"), (60, "80x60"), (100, "100x100")) if video else ((55, "55x55"), (60, "60x60"),
                                                                            (170, "170x170"))
    return [{"label": f"{base}/{box}bb.png", "attributes": {"height": str(height)}} for height, box in sizes]


def _release(song: GlobalSong) -> dict[str, object]:
    day = date(2024, 1, 5) + timedelta(days=stable_number(song.title, "release") % 700)
    return {"label": f"{day.isoformat()}T00:00:00-07:00",
            "attributes": {"label": f"{day:%B} {day.day}, {day.year}"}}


def _category(country: str, genres: tuple[tuple[str, str], ...], song: GlobalSong, kind: str) -> dict[str, object]:
    genre_id, name = genres[stable_number(song.title, "genre") % len(genres)]
    scheme = f"https://itunes.apple.com/{country}/genre/{kind}-{_slug(name)}/id{genre_id}?uo=2"
    return {"attributes": {"im:id": genre_id, "term": name, "scheme": scheme, "label": name}}


def _content_type(media: str, inner: str | None) -> dict[str, object]:
    node: dict[str, object] = {"attributes": {"term": media, "label": media}}
    if inner:
        node = {"im:contentType": {"attributes": {"term": inner, "label": inner}}, **node}
    return node


def _link(href: str) -> dict[str, object]:
    return {"attributes": {"rel": "alternate", "type": "text/html", "href": href}}


def _enclosure(href: str, kind: str, duration: str) -> dict[str, object]:
    return {"im:duration": {"label": duration},
            "attributes": {"title": "Preview", "rel": "enclosure", "type": kind, "href": href,
                           "im:assetType": "preview"}}


def render_entry(feed: str, country: str, song: GlobalSong) -> dict[str, object]:
    """One `feed.entry` item of `feed` in storefront `country`, keys in the order the feed writes them."""
    credit = artist_credit(song.artists)
    artist = {"label": credit, "attributes": {
        "href": f"https://itunes.apple.com/{country}/artist/{_slug(song.artists[0])}/"
                f"id{_store_id('artist', song.artists[0])}?uo=2"}}
    rights = {"label": f"℗ 2025 {song.label or credit}"}
    album_name = f"{song.title} - Single"
    album_id = _store_id("album", song.title, credit)
    album_url = f"https://itunes.apple.com/{country}/album/{_slug(album_name)}/id{album_id}?uo=2"
    if feed == "topalbums":
        return {
            "im:name": {"label": song.title}, "im:image": _images(song, False),
            "im:itemCount": {"label": str(1 + stable_number(song.title, "tracks") % 14)},
            "im:price": _price(feed, country), "im:contentType": _content_type("Music", "Album"), "rights": rights,
            "title": {"label": f"{song.title} - {credit}"}, "link": _link(album_url),
            "id": {"label": album_url, "attributes": {"im:id": album_id}}, "im:artist": artist,
            "category": _category(country, MUSIC_GENRES, song, "music"), "im:releaseDate": _release(song),
        }
    if feed == "topsongs":
        song_id = _store_id("song", song.title, credit)
        song_url = f"https://itunes.apple.com/{country}/album/{_slug(song.title)}/id{album_id}?i={song_id}&uo=2"
        token = stable_hex(song.title, "preview", digits=8)
        preview = (f"https://audio-ssl.itunes.apple.com/itunes-assets/AudioPreview114/v4/{token[:2]}/{token[2:4]}/"
                   f"{token[4:6]}/{token}/mzaf_{stable_number(song.title, 'mzaf')}.plus.aac.p.m4a")
        return {
            "im:name": {"label": song.title}, "im:image": _images(song, False),
            "im:collection": {"im:name": {"label": album_name}, "link": _link(album_url),
                              "im:contentType": _content_type("Music", "Album")},
            "im:price": _price(feed, country), "im:contentType": _content_type("Music", "Track"), "rights": rights,
            "title": {"label": f"{song.title} - {credit}"},
            "link": [_link(song_url), _enclosure(preview, "audio/x-m4a", "30000")],
            "id": {"label": song_url, "attributes": {"im:id": song_id}}, "im:artist": artist,
            "category": _category(country, MUSIC_GENRES, song, "music"), "im:releaseDate": _release(song),
        }
    video_id = _store_id("video", song.title, credit)
    video_url = f"https://itunes.apple.com/{country}/music-video/{_slug(song.title)}/id{video_id}?uo=2"
    token = stable_hex(song.title, "video", digits=8)
    preview = (f"http://video.itunes.apple.com/apple-assets-us-std-000001/Video128/v4/{token[:2]}/{token[2:4]}/"
               f"{token[4:6]}/{token}/mzvf_{stable_number(song.title, 'mzvf')}.640x362.h264lc.U.p.m4v")
    return {
        "im:name": {"label": song.title}, "rights": rights, "im:price": _price(feed, country),
        "im:image": _images(song, True), "im:artist": artist, "title": {"label": f"{song.title} - {credit}"},
        "link": [_link(video_url), _enclosure(preview, "video/x-m4v", f"{30000 + stable_number(song.title) % 50}.0")],
        "id": {"label": video_url, "attributes": {"im:id": video_id}},
        "im:contentType": _content_type("Music Video", None),
        "category": _category(country, VIDEO_GENRES, song, "music-videos"), "im:releaseDate": _release(song),
    }


def render(feed: str, country: str, rows: list[SampleRow[GlobalSong]], when: datetime, limit: int) -> bytes:
    """The body of `/{country}/rss/{feed}/limit={limit}/json` at `when`: one entry per row, and that
    entry as a bare object when there is exactly one (the generator's quirk)."""
    entries: list[dict[str, object]] = [render_entry(feed, country, row.song) for row in rows]
    self_url = f"https://itunes.apple.com{feed_path(country, feed, limit)}"
    links: list[dict[str, object]] = [{"attributes": {"rel": "self", "href": self_url}}]
    if feed == "topalbums":  # the capture's alternate link; the other feeds' popId is not known
        links.insert(0, _link(f"https://itunes.apple.com/WebObjects/MZStore.woa/wa/viewTop?cc={country}&id=1&popId=11"))
    payload = {"feed": {
        "author": {"name": {"label": "iTunes Store"}, "uri": {"label": "http://www.apple.com/itunes/"}},
        "entry": entries[0] if len(entries) == 1 else entries,
        "updated": {"label": when.astimezone(PACIFIC).isoformat(timespec="seconds")},
        "rights": {"label": "Copyright 2008 Apple Inc."},
        "title": {"label": f"iTunes Store: {FEED_TITLES[feed]}"},
        "icon": {"label": "http://itunes.apple.com/favicon.ico"},
        "link": links,
        "id": {"label": self_url},
    }}
    return json_body(payload)


class Combo(Protocol):
    """What the renderers need of a /digital-sales combo: its slug (which sample rows) and its feed."""

    @property
    def slug(self) -> str: ...

    @property
    def feed(self) -> str: ...


def sample_rows(combo: Combo, country: str, variant: int, size: int) -> list[SampleRow[GlobalSong]]:
    return global_rows(f"itunes/{combo.slug}/{country}", variant, size)


def combo_replies(combo: Combo, country: str, when: datetime, variant: int = 0,
                  limit: int = 100, size: int | None = None) -> dict[ReplayKey, Reply]:
    """The reply to one feed request: `size` rows (default `limit`) of sample chart `variant`."""
    rows = sample_rows(combo, country, variant, size if size is not None else limit)
    (request,) = requests_for(country, combo.feed, limit)
    return {request_key(request): Reply(render(combo.feed, country, rows, when, limit), 200, CONTENT_TYPE)}


def all_replies(combos: Iterable[Combo], countries: Iterable[str], limit: int, when: datetime,
                variant: int = 0) -> dict[ReplayKey, Reply]:
    """Replies for every combo x country at feed limit `limit`."""
    replies: dict[ReplayKey, Reply] = {}
    for combo in combos:
        for country in countries:
            replies.update(combo_replies(combo, country, when, variant, limit))
    return replies
