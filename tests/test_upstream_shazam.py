"""Shazam: the chart CSV and catalogue parsers against the real captures, our rendered samples, the
legacy v3 tracks JSON (where it is, and how its rows are matched to the CSV's), and refusal of what is
not a chart (HTML pages, broken or empty bodies)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import date
from pathlib import Path

import pytest

from chartgw.demo.samples import global_rows
from chartgw.demo.samples import recognition as samples
from chartgw.upstreams import UpstreamFormatError, shazam

FIRST_RAW = "shazam/shazam-services-charts-csv-top-200-israel-2026-07-26-first-raw.csv"
NORMALIZED = "shazam/shazam-services-charts-csv-top-200-israel-2026-08-22.csv"
LEGACY_LOCATIONS = "shazam/shazam-services-charts-locations-2021-legacy-listids.json"
TRACKS = "shazam/shazam-charts-track-response-embedded-Moodify.json"

# (display name, urlName) pairs as ShazamIO's recorded current catalogue has them
# (tests/cassettes/test_charts/test_a_city_chart_resolves_its_country_and_city_slugs.yaml).
CASSETTE_URL_NAMES = [
    ("Brasília", "bras%C3%ADlia"), ("São Paulo", "s%C3%A3o-paulo"), ("İzmir", "i%CC%87zmir"),
    ("Türkiye", "t%C3%BCrkiye"), ("St. Louis", "st.-louis"), ("Washington, D.C.", "washington-d.c."),
    ("Portland OR", "portland-or"), ("Film, TV & Stage", "film-tv-and-stage"), ("R&B/Soul", "randb-soul"),
    ("Hip-Hop/Rap", "hip-hop-rap"), ("Música Mexicana", "m%C3%BAsica-mexicana"), ("K-Pop", "k-pop"),
    ("United Arab Emirates", "united-arab-emirates"), ("Newcastle upon Tyne", "newcastle-upon-tyne"),
]


def test_requests_are_the_real_urls() -> None:
    assert shazam.locations_request().path == "/services/charts/locations"
    request = shazam.csv_request("top-50/brazil/bras%C3%ADlia")
    assert request.upstream == "SHAZAM"
    assert request.path == "/services/charts/csv/top-50/brazil/bras%C3%ADlia/"  # the trailing slash is required
    assert dict(request.headers)["Accept-Encoding"] == "gzip"
    tracks = shazam.tracks_request(shazam.TrackList(path="top-200/germany", storefront="DE",
                                                    list_id="ip-country-chart-DE"))
    # The legacy v3 URL as the notes and the scrapers give it, the whole chart in one page.
    assert tracks.path == "/shazam/v3/en-US/DE/web/-/tracks/ip-country-chart-DE"
    assert tracks.params == (("pageSize", "200"), ("startFrom", "0"))


# --- CSV ------------------------------------------------------------------------------------------------


def test_the_byte_exact_capture(shared_upstream: Path) -> None:
    body = (shared_upstream / FIRST_RAW).read_bytes()
    assert body.startswith(b"\xef\xbb\xbf\n\"Sunday, 26 July 2026") and not body.endswith(b"\n")
    chart = shazam.parse_csv(body)
    assert chart.chart_date == "2026-07-26"
    assert [e.rank for e in chart.entries] == list(range(1, 201))
    first = chart.entries[0]
    assert (first.artist, first.title) == ("Ankara Echoes",
                                           "Beni Al (Ta Ki Seni Görene Kadar) [Beni Al Afro House Remix]")
    fifth = chart.entries[4]
    assert fifth.artist == "Eden Hason, Ofek Adanek & Agam Buhbut"  # the credit as printed
    assert fifth.artists == ["Eden Hason", "Ofek Adanek", "Agam Buhbut"]
    assert chart.entries[3].title == "אבי הטחול"  # Hebrew kept as is
    assert chart.entries[-1].artist == "El Cherry Scom, DJ Chulo NYC & La Greña"
    # Inner quotes are not escaped by Shazam; the row still splits at the first '","'.
    assert (chart.entries[95].artist, chart.entries[95].title) == (
        "Taylor Swift", 'I Knew It, I Knew You (From "Toy Story 5")')
    assert all(e.chart_date == "2026-07-26" for e in chart.entries)
    assert all(e.url is None and e.artwork_url is None and e.store_url is None and e.shazam_track_id is None
               for e in chart.entries)  # the CSV carries none of them


def test_the_workflow_normalised_capture(shared_upstream: Path) -> None:
    chart = shazam.parse_csv((shared_upstream / NORMALIZED).read_bytes())
    assert chart.chart_date == "2026-08-22" and len(chart.entries) == 200
    assert chart.entries[0].title == "Beni Al (Ta Ki Seni Görene Kadar) [Afro House Remix]"


def test_rendered_samples_read_back_as_the_sample_rows() -> None:
    body = samples.render_csv("top-200/brazil", date(2026, 7, 26), 1, 200)
    assert body.startswith(b"\xef\xbb\xbf\n\"Sunday, 26 July 2026 [performance over the past 7 days]\"\nRank,Artist,Title\n1,\"")
    chart = shazam.parse_csv(body)
    rows = global_rows("top-200/brazil", 1, 200)
    assert chart.chart_date == "2026-07-26"
    assert [(e.rank, e.title, e.artist) for e in chart.entries] == [
        (r.rank, r.song.title, samples.credit(r.song.artists)) for r in rows]
    quoted = [e for e in chart.entries if '"' in e.title]
    assert quoted, "the pool has a title with quotes, written unescaped as Shazam does"


@pytest.mark.parametrize("body,message", [
    (b"<!DOCTYPE html><html><head><title>Shazam</title></head><body>Charts</body></html>", "HTML page"),
    (b"", "no date line"),
    (b"\xef\xbb\xbf\n", "no date line"),
    (b"\xef\xbb\xbf\n\"Sunday, 26 July 2026 [performance over the past 7 days]\"\nRank,Artist,Title", "no rows"),
    (b"\xef\xbb\xbf\nRank,Artist,Title\n1,\"A\",\"B\"", "no date"),
    (b"\xef\xbb\xbf\n\"Sunday, 26 July 2026\"\n1,\"A\",\"B\"", "header"),
    (b"\xef\xbb\xbf\n\"Sunday, 26 July 2026\"\nRank,Artist,Title\n1,\"A\",\"B\"\n2,\"C\",\"Tit", "row 2"),
    (b"\xef\xbb\xbf\n\"Sunday, 26 July 2026\"\nRank,Artist,Title\n1,\"A\",\"B\"\n2,\"C\"", "row 2"),
    (b"\xef\xbb\xbf\n\"Sunday, 26 July 2026\"\nRank,Artist,Title\nx,\"A\",\"B\"", "row 1"),
    (b"\xef\xbb\xbf\n\"Sunday, 26 July 2026\"\nRank,Artist,Title\n1,\"\",\"B\"", "no artist"),
    (b"\xef\xbb\xbf\n\"Someday [performance]\"\nRank,Artist,Title\n1,\"A\",\"B\"", "no date"),
])
def test_what_is_not_a_chart_csv_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(UpstreamFormatError, match=message):
        shazam.parse_csv(body)


# --- catalogue ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,url_name", CASSETTE_URL_NAMES)
def test_url_names_are_spelled_as_the_current_catalogue_spells_them(name: str, url_name: str) -> None:
    assert shazam.url_name(name) == url_name


@pytest.mark.parametrize("upstream,plain", [
    ("bras%C3%ADlia", "brasilia"), ("i%CC%87zmir", "izmir"), ("t%C3%BCrkiye", "turkiye"), ("st.-louis", "st-louis"),
    ("washington-d.c.", "washington-d-c"), ("halle-(saale)", "halle-saale"), ("%C5%81%C3%B3d%C5%BA", "lodz"),
])
def test_target_slugs_are_plain_ascii(upstream: str, plain: str) -> None:
    assert shazam.slug(upstream) == plain and shazam.is_slug(plain)


def test_the_real_2021_catalogue(shared_upstream: Path) -> None:
    """The legacy form: no urlName (slugs from names), genres with urlPath, no viral or world charts.
    Its own figures, not the spec's: 1514 paths, 1512 targets."""
    paths = shazam.parse_locations((shared_upstream / LEGACY_LOCATIONS).read_bytes())
    catalogue = shazam.normalise(paths)
    assert Counter(p.kind for p in paths) == {"top-200": 53, "genre": 37, "top-50": 1424}
    assert Counter(e.kind for e in catalogue) == {"top-200": 53, "genre": 37, "top-50": 1422}
    assert (len(paths), len(catalogue)) == (1514, 1512)
    merged = {e.path: e.upstream_paths for e in catalogue if len(e.upstream_paths) > 1}
    # Afyonkarahisar is listed twice under one GeoNames id; Mexico has two cities named Tuxtla.
    assert merged == {"top-50/turkey/afyonkarahisar": ["top-50/turkey/afyonkarahisar"] * 2,
                      "top-50/mexico/tuxtla": ["top-50/mexico/tuxtla"] * 2}
    by_path = {e.path: e for e in catalogue}
    assert by_path["top-50/germany/koln"].upstream_paths == ["top-50/germany/k%C3%B6ln"]
    assert by_path["genre/united-states/country"].name == "Country United States"
    assert "top-200/united-states" in by_path and "top-200/world" not in by_path
    assert all(shazam.is_slug(e.path.replace("/", "-")) for e in catalogue)


def test_the_sample_catalogue_gives_the_spec_figures() -> None:
    body = samples.render_locations()
    assert b"bras\xc3\xadlia" not in body and "Brasília".encode() in body and b"\\u0130zmir" in body
    paths = shazam.parse_locations(body)
    catalogue = shazam.normalise(paths)
    assert Counter(e.kind for e in catalogue) == {"top-200": 71, "genre": 37, "viral": 43, "top-50": 124}
    assert (len(paths), len(catalogue)) == (276, 275)
    assert [e.path for e in catalogue if len(e.upstream_paths) > 1] == ["top-50/turkiye/istanbul"]
    by_path = {e.path: e for e in catalogue}
    assert by_path["top-50/turkiye/izmir"].upstream_paths == ["top-50/t%C3%BCrkiye/i%CC%87zmir"]
    assert by_path["genre/world/randb-soul"].genre == "randb-soul"
    assert {"top-200/world", "viral/world", "genre/world/pop", "genre/united-states/country"} <= set(by_path)


def test_legacy_list_ids_are_built_as_the_2021_catalogue_builds_them(shared_upstream: Path) -> None:
    """The current catalogue lists Apple Music playlist ids, which the v3 tracks endpoint is not known to
    take; the legacy id is built from the chart's own id. The rule holds for 1513 of the capture's 1514
    list ids: Windsor (Canada) is listed with id 6182958 but list id ip-city-chart-6182962."""
    root = json.loads((shared_upstream / LEGACY_LOCATIONS).read_bytes())
    items = [(kind, item) for country in root["countries"]
             for kind, item in [("country", country), *[("genre", g) for g in country.get("genres") or []],
                                *[("city", c) for c in country.get("cities") or []]]]
    wrong = [item["name"] for kind, item in items
             if shazam.legacy_list_id({"id": item["id"], "listid": "pl.0"}, shazam.LEGACY_LIST_IDS[kind])
             != item["listid"]]
    assert (len(items), wrong) == (1514, ["Windsor"])
    # A legacy catalogue's own list ids are used as given, the first listing's for a merged target.
    paths = shazam.parse_locations((shared_upstream / LEGACY_LOCATIONS).read_bytes())
    assert all(p.list_id and p.storefront and len(p.storefront) == 2 for p in paths)
    lists = {t.path: t for t in shazam.track_lists(paths)}
    assert len(lists) == 1512
    assert lists["top-200/germany"] == shazam.TrackList(path="top-200/germany", storefront="DE",
                                                        list_id="ip-country-chart-DE")
    assert lists["genre/germany/pop"].list_id == "genre-country-chart-DE-1"
    assert lists["top-50/germany/berlin"].list_id == "ip-city-chart-2950159"


def test_the_sample_catalogue_locates_track_json_where_an_id_allows() -> None:
    lists = {t.path: t for t in shazam.track_lists(shazam.parse_locations(samples.render_locations()))}
    assert Counter(path.split("/")[0] for path in lists) == {"top-200": 71, "genre": 19, "top-50": 124}
    assert lists["top-200/world"] == shazam.TrackList(path="top-200/world", storefront="US",
                                                      list_id="ip-global-chart")
    assert lists["genre/united-states/country"].list_id == "genre-country-chart-US-10"
    city = next(c for c in samples.locations()["countries"][7]["cities"] if c["name"] == "Brasília")  # type: ignore[index]
    assert lists["top-50/brazil/brasilia"] == shazam.TrackList(path="top-50/brazil/brasilia", storefront="BR",
                                                               list_id=f"ip-city-chart-{city['id']}")
    # No legacy scheme is known for viral charts or for world genres (their ids are playlist ids only).
    assert not [p for p in lists if p.startswith(("viral/", "genre/world/"))]


def test_world_aliases_merge() -> None:
    body = json.dumps({"countries": [{"id": "WW", "name": "Global", "urlName": "global"},
                                     {"id": "FR", "name": "France"}],
                       "global": {"top": {"listid": "pl.x"}}}).encode()
    catalogue = shazam.discover(body)
    assert [(e.path, e.upstream_paths) for e in catalogue] == [
        ("top-200/world", ["top-200/global", "top-200/world"]), ("top-200/france", ["top-200/france"])]


@pytest.mark.parametrize("body,message", [
    (b"<html><body>Access denied</body></html>", "markup"),
    (b'{"countries": [{"id": "DE", "name": "Germ', "not JSON"),
    (b"", "not JSON"),
    (b'{"countries": []}', "no countries"),
    (b'{"countries": [{"id": "DE"}]}', "name"),
    (b'{"countries": {"DE": {}}}', "expected a list"),
])
def test_what_is_not_a_catalogue_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(UpstreamFormatError, match=message):
        shazam.discover(body)


# --- legacy v3 tracks JSON ------------------------------------------------------------------------------


def test_the_tracks_json_capture_fills_the_best_effort_fields(shared_upstream: Path) -> None:
    entries = shazam.parse_tracks_json((shared_upstream / TRACKS).read_bytes(), "2023-12-16")
    assert [e.rank for e in entries] == list(range(1, 21))
    first = entries[0]
    assert (first.title, first.artist, first.shazam_track_id) == (
        "Surround Sound (feat. 21 Savage & Baby Tate)", "JID", "599925144")
    assert first.url == "https://www.shazam.com/track/599925144/surround-sound-feat-21-savage-baby-tate"
    assert first.artwork_url and first.artwork_url.endswith("/400x400cc.jpg")
    assert first.store_url and first.store_url.startswith("https://music.apple.com/us/album/") and \
        "i=1637738698" in first.store_url
    assert all(e.shazam_track_id and e.url and e.chart_date == "2023-12-16" for e in entries)


def _row(rank: int, artist: str, title: str) -> shazam.RecognitionEntry:
    return shazam.RecognitionEntry(rank=rank, artist=artist, artists=[artist], title=title, chart_date="2023-12-16")


def test_enrichment_matches_rows_by_track_not_by_position(shared_upstream: Path) -> None:
    """The capture's 20 tracks against CSV rows that differ from them the ways two lists of one chart can."""
    tracks = shazam.parse_tracks_json((shared_upstream / TRACKS).read_bytes(), "2023-12-16")
    rows = [
        _row(1, "JID", "Surround Sound"),  # the featuring credit printed elsewhere: same track
        _row(2, "Tate McRae", "greedy"),  # 2 and 3 swapped in the JSON
        _row(3, "АИГЕЛ", "Пыяла"),
        _row(4, "Kenya Grace", "Strangers (Sped Up)"),  # retitled; same artist at the same place
        _row(5, "Someone Else", "Not In The JSON"),  # the JSON's 5th (Tyla, Water) is another track
        _row(6, "Doja Cat", "Agora Hills"),  # 10th in the JSON
        _row(7, "Doja Cat", "Paint The Town Red"),  # 9th
        _row(8, "Jungeli & Imen Es feat. Alonzo", "Petit génie (feat. Abou Debeing & Lossa)"),  # 19th, re-credited
        _row(9, "Doja Cat", "Another Doja Cat Song"),  # same artist at the 9th, but that track is taken
    ]
    assert shazam.enrich(rows, tracks) == 7
    assert [r.shazam_track_id for r in rows] == ["599925144", "675031499", "544842905", "675132421", None,
                                                 "676547729", "673557639", "673958043", None]
    first = rows[0]
    assert (first.title, first.artist, first.rank) == ("Surround Sound", "JID", 1)  # the CSV's names and rank
    assert first.url == "https://www.shazam.com/track/599925144/surround-sound-feat-21-savage-baby-tate"
    assert first.artwork_url and first.store_url and "i=1637738698" in first.store_url
    assert rows[4].url is rows[4].artwork_url is rows[4].store_url is None


def test_a_track_listed_twice_goes_to_the_row_nearest_its_rank() -> None:
    tracks = [_row(1, "A", "Song"), _row(2, "B", "Other"), _row(3, "A", "Song")]
    for i, track in enumerate(tracks, start=1):
        track.shazam_track_id = str(i)
    rows = [_row(1, "C", "Third"), _row(2, "D", "Fourth"), _row(3, "A", "Song")]
    assert shazam.enrich(rows, tracks) == 1 and [r.shazam_track_id for r in rows] == [None, None, "3"]


def test_rendered_track_json_is_read_back_onto_the_rendered_csv() -> None:
    body = samples.render_tracks_json("top-50/brazil/brasilia", "BR", 1, 50)
    assert body.startswith(b'{"properties":{},"tracks":[{"layout":"5","type":"MUSIC","key":"')
    tracks = shazam.parse_tracks_json(body, "2026-07-26")
    chart = shazam.parse_csv(samples.render_csv("top-50/brazil/brasilia", date(2026, 7, 26), 1, 50))
    assert shazam.enrich(chart.entries, tracks) == 50
    songs = [row.song for row in global_rows("top-50/brazil/brasilia", 1, 50)]
    assert [e.shazam_track_id for e in chart.entries] == [samples.track_key(song) for song in songs]
    assert all(e.store_url and e.store_url.startswith("https://music.apple.com/br/album/") for e in chart.entries)


def test_sample_track_urls_are_slugged_as_the_capture_slugs_them(shared_upstream: Path) -> None:
    tracks = json.loads((shared_upstream / TRACKS).read_bytes())["tracks"]
    assert [samples.url_slug(t["title"]) for t in tracks] == [t["url"].rsplit("/", 1)[1] for t in tracks]


@pytest.mark.parametrize("body", [b'{"properties": {}, "tracks": []}', b"<html></html>", b'{"tracks": [{"key": "1"}]}'])
def test_what_is_not_a_tracks_body_is_refused(body: bytes) -> None:
    with pytest.raises(UpstreamFormatError):
        shazam.parse_tracks_json(body, "2023-12-16")
