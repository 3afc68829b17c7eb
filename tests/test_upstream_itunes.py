"""iTunes RSS (legacy JSON feeds): request shape, the real topalbums capture (one entry as a bare
object), entries in the shapes public topsongs/topmusicvideos fixtures show, rendered samples, and
refusal of other Apple formats and broken bodies."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chartgw.demo.samples import digital_sales as samples
from chartgw.groups.digital_sales import COMBOS
from chartgw.upstreams import UpstreamFormatError, itunes

CAPTURE = "apple/itunes-rss-us-topalbums-limit1-json-2017-05-23.json"
OTHER_APPLE_FORMATS = {
    "apple/apple-music-api-v1-catalog-us-charts-most-played-songs-2017-11-04.json": "Apple Music API",
    "apple/marketingtools-most-played-20-songs-us-2022-05-11.json": "RSS v1/v2",
    "apple/rss-itunes-v1-apple-music-top-songs-us-200-2017-11-04.json": "RSS v1/v2",
}
WHEN = datetime(2026, 11, 20, 5, 30, tzinfo=UTC)


def _song_entry() -> dict[str, Any]:
    """A topsongs entry as a public 2021 fixture of the feed has it (mixplore/react-music-app
    topSongsMock.js, first entry): music.apple.com URLs, artist href without the "id" prefix."""
    return {
        "im:name": {"label": "Love Story (Taylor’s Version)"},
        "im:image": [
            {"label": "https://is2-ssl.mzstatic.com/image/thumb/Music124/v4/5a/e7/f7/5ae7f721/x.jpg/55x55bb.png",
             "attributes": {"height": "55"}},
            {"label": "https://is5-ssl.mzstatic.com/image/thumb/Music124/v4/5a/e7/f7/5ae7f721/x.jpg/170x170bb.png",
             "attributes": {"height": "170"}},
            {"label": "https://is4-ssl.mzstatic.com/image/thumb/Music124/v4/5a/e7/f7/5ae7f721/x.jpg/60x60bb.png",
             "attributes": {"height": "60"}},
        ],
        "im:collection": {
            "im:name": {"label": "Fearless (Taylor's Version)"},
            "link": {"attributes": {"rel": "alternate", "type": "text/html",
                                    "href": "https://music.apple.com/us/album/fearless-taylors-version/1552791073?uo=2"}},
        },
        "im:price": {"label": "$1.29", "attributes": {"amount": "1.29000", "currency": "USD"}},
        "rights": {"label": "℗ 2021 Taylor Swift"},
        "title": {"label": "Love Story (Taylor’s Version) - Taylor Swift"},
        "link": [
            {"attributes": {"rel": "alternate", "type": "text/html",
                            "href": "https://music.apple.com/us/album/love-story-taylors-version/1552791073?i=1552791427&uo=2"}},
            {"im:duration": {"label": "30000"},
             "attributes": {"title": "Preview", "rel": "enclosure", "type": "audio/x-m4a",
                            "href": "https://audio-ssl.itunes.apple.com/itunes-assets/AudioPreview114/v4/x.p.m4a",
                            "im:assetType": "preview"}},
        ],
        "id": {"label": "https://music.apple.com/us/album/love-story-taylors-version/1552791073?i=1552791427&uo=2",
               "attributes": {"im:id": "1552791427"}},
        "im:artist": {"label": "Taylor Swift",
                      "attributes": {"href": "https://music.apple.com/us/artist/taylor-swift/159260351?uo=2"}},
        "category": {"attributes": {"im:id": "6", "term": "Country", "label": "Country",
                                    "scheme": "https://music.apple.com/us/genre/music-country/id6?uo=2"}},
        "im:releaseDate": {"label": "2021-02-11T00:00:00-07:00", "attributes": {"label": "February 11, 2021"}},
    }


def _feed(entries: Any, feed: str = "topsongs", updated: str | None = "2021-02-14T10:00:00-07:00") -> bytes:
    root: dict[str, Any] = {"id": {"label": f"https://itunes.apple.com/us/rss/{feed}/limit=100/json"}}
    if entries is not None:
        root["entry"] = entries
    if updated is not None:
        root["updated"] = {"label": updated}
    return json.dumps({"feed": root}, ensure_ascii=False).encode()


def test_request_is_the_generator_path() -> None:
    (request,) = itunes.requests_for("gb", "topmusicvideos", 100)
    assert (request.upstream, request.method, request.params) == ("ITUNES", "GET", ())
    assert request.path == "/gb/rss/topmusicvideos/limit=100/json"
    with pytest.raises(ValueError):
        itunes.requests_for("us", "topimixes", 10)
    for limit in (0, 201):
        with pytest.raises(ValueError):
            itunes.requests_for("us", "topsongs", limit)


def test_real_capture_single_entry_is_a_bare_object(shared_upstream: Path) -> None:
    body = (shared_upstream / CAPTURE).read_bytes()
    assert isinstance(json.loads(body)["feed"]["entry"], dict)
    parsed = itunes.parse("topalbums", body)
    assert (parsed.updated, parsed.chart_date, parsed.title) == (
        "2017-05-23T18:10:34-07:00", "2017-05-24", "iTunes Store: Top Albums")  # 18:10 PDT is the 24th in UTC
    (entry,) = parsed.entries
    assert (entry.rank, entry.title, entry.artist, entry.artists) == (1, "Harry Styles", "Harry Styles", ["Harry Styles"])
    assert entry.store_id == "1226034336"
    assert entry.store_url == "https://itunes.apple.com/us/album/harry-styles/id1226034336?uo=2"
    assert (entry.artist_id, entry.artist_url) == (
        "471260289", "https://itunes.apple.com/us/artist/harry-styles/id471260289?uo=2")
    assert (entry.price, entry.currency, entry.release_date) == (9.99, "USD", "2017-05-12")
    assert (entry.genre, entry.genre_id) == ("Pop", "14")
    assert entry.image_url and entry.image_url.endswith("/170x170bb-85.jpg")
    assert (entry.collection, entry.collection_id, entry.preview_url, entry.duration_ms) == (None, None, None, None)
    assert entry.rights and entry.rights.startswith("℗ 2017 Erskine Records")


def test_real_capture_entry_reads_the_same_inside_a_list(shared_upstream: Path) -> None:
    doc = json.loads((shared_upstream / CAPTURE).read_bytes())
    single = itunes.parse("topalbums", json.dumps(doc).encode()).entries
    doc["feed"]["entry"] = [doc["feed"]["entry"], copy.deepcopy(doc["feed"]["entry"])]
    both = itunes.parse("topalbums", json.dumps(doc).encode()).entries
    assert [e.rank for e in both] == [1, 2]
    assert both[0] == single[0]


@pytest.mark.parametrize("name,kind", OTHER_APPLE_FORMATS.items(), ids=["apple-music-api", "rss-v2", "rss-v1"])
def test_other_apple_captures_are_refused_by_name(shared_upstream: Path, name: str, kind: str) -> None:
    with pytest.raises(UpstreamFormatError, match=kind):
        itunes.parse("topsongs", (shared_upstream / name).read_bytes())


def test_a_feed_of_another_kind_is_refused(shared_upstream: Path) -> None:
    with pytest.raises(UpstreamFormatError, match="asked for topsongs"):
        itunes.parse("topsongs", (shared_upstream / CAPTURE).read_bytes())


def test_song_entry_of_the_public_fixture_shape() -> None:
    (entry,) = itunes.parse("topsongs", _feed(_song_entry())).entries
    assert (entry.title, entry.artist, entry.store_id) == ("Love Story (Taylor’s Version)", "Taylor Swift", "1552791427")
    assert entry.artist_id == "159260351"  # no "id" prefix in this era's URLs
    assert (entry.collection, entry.collection_id) == ("Fearless (Taylor's Version)", "1552791073")
    assert entry.preview_url == "https://audio-ssl.itunes.apple.com/itunes-assets/AudioPreview114/v4/x.p.m4a"
    assert entry.duration_ms == 30000
    assert entry.image_url and entry.image_url.endswith("170x170bb.png")  # the tallest, wherever it is listed
    assert (entry.price, entry.genre, entry.genre_id, entry.release_date) == (1.29, "Country", "6", "2021-02-11")


def test_optional_parts_missing_give_nulls() -> None:
    item = _song_entry()
    for key in ("im:collection", "im:price", "category", "im:releaseDate", "rights", "im:image"):
        del item[key]
    del item["im:artist"]["attributes"]
    item["link"] = item["link"][0]  # one alternate link, as albums have it: no preview
    (entry,) = itunes.parse("topsongs", _feed([item])).entries
    assert (entry.artist_id, entry.artist_url, entry.collection, entry.collection_id) == (None, None, None, None)
    assert (entry.price, entry.currency, entry.genre, entry.release_date, entry.rights) == (None,) * 5
    assert (entry.image_url, entry.preview_url, entry.duration_ms) == (None, None, None)


def test_video_preview_duration_with_a_fraction() -> None:
    item = _song_entry()
    item["link"][1]["im:duration"] = {"label": "30045.0"}
    (entry,) = itunes.parse("topsongs", _feed([item])).entries
    assert entry.duration_ms == 30045


@pytest.mark.parametrize("updated,day", [
    ("2021-02-14T10:00:00-07:00", "2021-02-14"), ("2021-02-14T18:00:00-07:00", "2021-02-15"),
    ("2021-02-14T01:00:00+09:00", "2021-02-13"), ("2021-02-14T00:00:00Z", "2021-02-14"),
])
def test_chart_date_is_the_utc_date_of_updated(updated: str, day: str) -> None:
    assert itunes.parse("topsongs", _feed([_song_entry()], updated=updated)).chart_date == day


def _broken(path: str, value: Any) -> bytes:
    item = _song_entry()
    node = item
    *parents, last = path.split("/")
    for key in parents:
        node = node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return _feed([item])


@pytest.mark.parametrize("body", [
    b"<!DOCTYPE html><html><head><title>Apple</title></head><body>Service Unavailable</body></html>",
    b"",
    b"{}",
    b'{"feed": {"entry": [',
    b"[]",
    _feed(None),
    _feed([]),
    _feed([_song_entry()], updated=None),
    _feed([_song_entry()], updated="last Tuesday"),
    _feed([_song_entry()], updated="2021-02-14T10:00:00"),
    _feed(["not an entry"]),
    _broken("im:name", None),
    _broken("im:name", {"label": "  "}),
    _broken("im:artist", None),
    _broken("id/attributes", None),
    _broken("id/label", None),
    _broken("im:price/attributes/amount", "free"),
    _broken("link", [{"attributes": {"rel": "enclosure", "href": "x"}, "im:duration": {"label": "half a minute"}}]),
], ids=["html", "empty", "no-feed", "truncated", "array", "no-entry", "no-rows", "no-updated", "bad-updated",
        "naive-updated", "entry-not-object", "no-title", "blank-title", "no-artist", "no-store-id", "no-store-url",
        "bad-price", "bad-duration"])
def test_not_a_feed_raises(body: bytes) -> None:
    with pytest.raises(UpstreamFormatError):
        itunes.parse("topsongs", body)


@pytest.mark.parametrize("combo", COMBOS, ids=[c.slug for c in COMBOS])
def test_rendered_feed_round_trips(combo: Any) -> None:
    rows = samples.sample_rows(combo, "us", 1, 100)
    body = samples.render(combo.feed, "us", rows, WHEN, 100)
    parsed = itunes.parse(combo.feed, body)
    assert parsed.chart_date == "2026-11-20" and parsed.updated == "2026-11-19T22:30:00-07:00"
    assert len(parsed.entries) == len(rows) == 100
    for row, entry in zip(rows, parsed.entries, strict=True):
        assert (entry.rank, entry.title) == (row.rank, row.song.title)
        assert entry.artist == samples.artist_credit(row.song.artists) and entry.artists == [entry.artist]
        assert entry.store_id.isdigit() and entry.store_id in entry.store_url
        assert entry.artist_id and entry.artist_url and entry.artist_id in entry.artist_url
        assert entry.price and entry.currency == "USD" and entry.genre and entry.image_url and entry.release_date
    assert len({e.store_id for e in parsed.entries}) == 100
    assert any(" & " in e.artist for e in parsed.entries)
    songs = combo.feed == "topsongs"
    assert all((e.collection is not None and e.collection_id is not None) == songs for e in parsed.entries)
    assert all((e.preview_url is not None) == (combo.feed != "topalbums") for e in parsed.entries)
    if combo.feed == "topmusicvideos":
        assert all(e.duration_ms and 30000 <= e.duration_ms < 30050 for e in parsed.entries)
        assert all(e.image_url and e.image_url.endswith("/100x100bb.png") for e in parsed.entries)


@pytest.mark.parametrize("combo", COMBOS, ids=[c.slug for c in COMBOS])
def test_rendered_single_row_feed_is_a_bare_object(combo: Any) -> None:
    rows = samples.sample_rows(combo, "jp", 0, 1)
    body = samples.render(combo.feed, "jp", rows, WHEN, 1)
    assert isinstance(json.loads(body)["feed"]["entry"], dict)
    (entry,) = itunes.parse(combo.feed, body).entries
    assert (entry.rank, entry.title, entry.currency) == (1, rows[0].song.title, "JPY")


def test_rendered_album_matches_the_capture_layout(shared_upstream: Path) -> None:
    """The sample writer's topalbums entry has exactly the keys of the real one, in the same order."""
    real = json.loads((shared_upstream / CAPTURE).read_bytes())["feed"]
    rows = samples.sample_rows(COMBOS[1], "us", 0, 1)
    rendered = json.loads(samples.render("topalbums", "us", rows, WHEN, 1))["feed"]
    assert list(rendered["entry"]) == list(real["entry"])
    assert sorted(rendered) == sorted(real)
    assert rendered["id"] == real["id"] == {"label": "https://itunes.apple.com/us/rss/topalbums/limit=1/json"}
