"""Chartmetric: the token exchange and TikTok tracks pages. No real response exists, so the fixtures are
written from the documented fields (token doc example; the Go client's TikTok row struct; the `obj`-as-list
envelope other clients read), then the rendered samples round trip, a local replay server is paged until the
chart's length, and the refusals (401, error objects, HTML, empty pages, mixed dates) are checked."""

from __future__ import annotations

import json
import urllib.request
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlencode

import pytest

from chartgw.demo.replay import BODY, ReplayServer, replaying, request_key
from chartgw.demo.samples import short_video as samples
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, chartmetric
from chartgw.upstreams.chartmetric import ChartmetricError, ShortVideoEntry

RECEIVED = datetime(2026, 11, 20, 5, 0, tzinfo=UTC)


def _row(**changes: Any) -> dict[str, Any]:
    """A TikTok tracks row with every field the Go client's struct names, values in their documented types."""
    row: dict[str, Any] = {
        "tiktok_track_id": "7316189468553252865",
        "name": "Lovin On Me",
        "isrc": "usat22311371",
        "image_url": "https://p16-sg.tiktokcdn.com/aweme/720x720/cover.jpeg",
        "cm_track": 98765432,
        "tiktok_artist_names": ["Jack Harlow"],
        "tiktok_track_ids": ["7316189468553252865", "7318000000000000001"],
        "album_ids": [45678901],
        "album_names": ["Lovin On Me"],
        "album_upc": ["075679673218"],
        "album_label": ["Generation Now/Atlantic"],
        "release_dates": ["2023-11-10T00:00:00.000Z"],
        "rank": 1,
        "posts": 1523000,
        "added_at": "2026-11-19T00:00:00.000Z",
        "pre_rank": 3,
        "peak_rank": 1,
        "peak_date": "2026-11-12T00:00:00.000Z",
        "time_on_chart": 14,
        "rankStats": [{"rank": 1, "posts": 1523000, "timestp": "2026-11-19T00:00:00.000Z"}],
        "views": 254000000,
        "views_prev": 231000000,
    }
    row.update(changes)
    return row


def _page(rows: list[dict[str, Any]], length: int | None = 2) -> bytes:
    return json.dumps({"obj": {"length": length, "data": rows}}).encode()


# --- requests ---------------------------------------------------------------------------------------------


def test_token_request_posts_the_refresh_token() -> None:
    request = chartmetric.token_request("my-key")
    assert (request.upstream, request.method, request.path) == ("CHARTMETRIC", "POST", "/api/token")
    assert request.body == b'{"refreshtoken":"my-key"}'
    assert ("Content-Type", "application/json") in request.headers
    assert request_key(request) == ("POST", "/api/token", ((BODY, '{"refreshtoken":"my-key"}'),))
    with pytest.raises(ValueError):
        chartmetric.token_request("")


def test_tracks_request_of_a_country_and_of_the_world() -> None:
    request = chartmetric.tracks_request("tok", "2026-11-19", "weekly", "us", limit=50, offset=100)
    assert (request.method, request.path) == ("GET", "/api/charts/tiktok/tracks")
    assert request.params == (("date", "2026-11-19"), ("interval", "weekly"), ("country_chart", "true"),
                              ("code2", "US"), ("limit", "50"), ("offset", "100"))
    assert ("Authorization", "Bearer tok") in request.headers
    world = chartmetric.tracks_request("tok", "2026-11-19", "daily", None)
    assert world.params == (("date", "2026-11-19"), ("interval", "daily"), ("limit", "100"), ("offset", "0"))


@pytest.mark.parametrize("args", [("tok", "2026-11-19", "monthly", "US"), ("tok", "19.11.2026", "daily", "US"),
                                  ("tok", "2026-11-19", "daily", "USA"), ("", "2026-11-19", "daily", "US")])
def test_tracks_request_refuses_bad_arguments(args: tuple[str, str, str, str]) -> None:
    with pytest.raises(ValueError):
        chartmetric.tracks_request(*args)


def test_page_offsets() -> None:
    assert chartmetric.page_offsets(200, 100) == [0, 100]
    assert chartmetric.page_offsets(201, 100) == [0, 100, 200]
    assert chartmetric.page_offsets(50, 100) == [0]
    assert chartmetric.page_offsets(0, 100) == [0]


# --- token ------------------------------------------------------------------------------------------------


def test_token_in_the_documented_shape() -> None:
    body = json.dumps({"token": "eyJhbGciOi.x.y", "expires_in": 3600, "refresh_token": "my-key",
                       "scope": "api"}).encode()
    token = chartmetric.parse_token(body, RECEIVED)
    assert token == chartmetric.AccessToken(token="eyJhbGciOi.x.y", expires_in=3600, expires_at="2026-11-20T06:00:00Z",
                                            refresh_token="my-key", scope="api")
    other_zone = RECEIVED.astimezone(timezone(timedelta(hours=9)))
    assert chartmetric.parse_token(body, other_zone).expires_at == "2026-11-20T06:00:00Z"


def test_token_without_expiry() -> None:
    token = chartmetric.parse_token(b'{"token": "abc"}', RECEIVED)
    assert (token.token, token.expires_in, token.expires_at, token.refresh_token) == ("abc", None, None, None)


@pytest.mark.parametrize("body,status,reason", [
    (b'{"error": "invalid refresh token"}', 200, "invalid refresh token"),
    (b'{"message": "Unauthorized"}', 401, "unauthorized"),
    (b'{"expires_in": 3600}', 200, "token.token"),
    (b"<html>502 Bad Gateway</html>", 200, "markup"),
])
def test_token_refusals(body: bytes, status: int, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        chartmetric.parse_token(body, RECEIVED, status)


def test_token_needs_an_aware_time() -> None:
    with pytest.raises(ValueError, match="timezone"):
        chartmetric.parse_token(samples.token_body(), datetime(2026, 11, 20, 5, 0))


# --- tracks pages -----------------------------------------------------------------------------------------


def test_documented_row_reads_field_by_field() -> None:
    page = chartmetric.parse_tracks(_page([_row(), _row(rank=2, pre_rank=None, name="Beautiful Things",
                                                         tiktok_artist_names=["Benson Boone"], isrc=None,
                                                         tiktok_track_id="7320000000000000002", tiktok_track_ids=[],
                                                         album_names=[], album_label=[], release_dates=[],
                                                         peak_rank=2, peak_date="2026-11-19T00:00:00.000Z",
                                                         time_on_chart=1, views=1.5e6, posts=None)]))
    assert (page.length, page.chart_date) == (2, "2026-11-19")
    assert page.entries[0] == ShortVideoEntry(
        rank=1, previous_rank=3, peak_rank=1, peak_date="2026-11-12", time_on_chart=14, name="Lovin On Me",
        artist="Jack Harlow", artists=["Jack Harlow"], isrc="USAT22311371", track_id="98765432",
        sound_id="7316189468553252865", sound_ids=["7316189468553252865", "7318000000000000001"],
        album="Lovin On Me", label="Generation Now/Atlantic", release_date="2023-11-10",
        image_url="https://p16-sg.tiktokcdn.com/aweme/720x720/cover.jpeg", posts=1523000, views=254000000)
    assert page.entries[1] == ShortVideoEntry(
        rank=2, previous_rank=None, peak_rank=2, peak_date="2026-11-19", time_on_chart=1, name="Beautiful Things",
        artist="Benson Boone", artists=["Benson Boone"], isrc=None, track_id="98765432",
        sound_id="7320000000000000002", sound_ids=["7320000000000000002"], album=None, label=None,
        release_date=None, image_url="https://p16-sg.tiktokcdn.com/aweme/720x720/cover.jpeg", posts=None,
        views=1500000)


def test_row_with_only_the_required_fields() -> None:
    (entry,) = chartmetric.parse_tracks(json.dumps({"obj": {"data": [{"rank": 7, "name": "Espresso",
                                                                       "pre_rank": 0}]}}).encode()).entries
    assert entry == ShortVideoEntry(rank=7, previous_rank=None, peak_rank=None, peak_date=None, time_on_chart=None,
                                    name="Espresso", artist="", artists=[], isrc=None, track_id=None, sound_id=None,
                                    sound_ids=[], album=None, label=None, release_date=None, image_url=None,
                                    posts=None, views=None)


def test_sound_id_only_in_the_list_and_several_artists() -> None:
    (entry,) = chartmetric.parse_tracks(_page([_row(tiktok_track_id=None, tiktok_artist_names=["A", "B & C"])])).entries
    assert (entry.sound_id, entry.artist, entry.artists) == ("7316189468553252865", "A, B & C", ["A", "B & C"])


def test_obj_as_the_row_list() -> None:
    body = json.dumps({"obj": [_row(), _row(rank=2)]}).encode()
    page = chartmetric.parse_tracks(body)
    assert (page.length, page.chart_date, [e.rank for e in page.entries]) == (None, "2026-11-19", [1, 2])


@pytest.mark.parametrize("body,status,unauthorized", [
    (b'{"error": "Unauthorized"}', 401, True),
    (b"", 401, True),
    (b'{"error": "jwt expired"}', 200, True),
    (b'{"message": "Internal Server Error"}', 500, False),
    (b'{"error": "Too many requests"}', 200, False),
])
def test_error_answers(body: bytes, status: int, unauthorized: bool) -> None:
    with pytest.raises(ChartmetricError) as raised:
        chartmetric.parse_tracks(body or b"{}", status)
    assert raised.value.unauthorized is unauthorized


@pytest.mark.parametrize("body,reason", [
    (_page([]), "no rows"),
    (json.dumps({"obj": {"length": 0}}).encode(), "no rows"),
    (b"{}", "no `obj`"),
    (b"<!DOCTYPE html><html><title>Chartmetric</title></html>", "markup"),
    (b"", "not JSON"),
    (_page([_row(), _row(rank=2, added_at="2026-11-18T00:00:00.000Z")]), "several chart dates"),
    (_page([_row(rank=None)]), "no rank"),
    (_page([_row(name="")]), "name"),
    (_page([_row(tiktok_artist_names={"a": 1})]), "tiktok_artist_names"),
    (_page([_row(posts="many")]), "posts"),
])
def test_page_refusals(body: bytes, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        chartmetric.parse_tracks(body)


# --- rendered samples -------------------------------------------------------------------------------------


def _pages(replies: dict[Any, Any], code2: str | None, interval: str, day: date, page_size: int) -> list[ShortVideoEntry]:
    entries: list[ShortVideoEntry] = []
    offset = 0
    while True:
        request = chartmetric.tracks_request(samples.SAMPLE_ACCESS_TOKEN, day.isoformat(), interval, code2, page_size,
                                             offset)
        page = chartmetric.parse_tracks(replies[request_key(request)].body)
        assert page.chart_date == day.isoformat()
        entries += page.entries
        offset += page_size
        assert page.length is not None
        if offset >= page.length:
            return entries


@pytest.mark.parametrize("code2,interval", [("US", "daily"), ("KR", "weekly"), (None, "daily")])
def test_samples_round_trip_page_by_page(code2: str | None, interval: str) -> None:
    day = date(2026, 11, 19)
    replies = samples.chart_replies(code2, interval, day, variant=2, size=100, page_size=40)
    assert len(replies) == 3
    entries = _pages(replies, code2, interval, day, 40)
    rows = samples.chart_rows(code2, interval, 2, 100)
    assert [(e.rank, e.name, e.artists, e.previous_rank) for e in entries] == [
        (r.rank, r.song.title, list(r.song.artists), r.previous_rank) for r in rows]
    for entry, row in zip(entries, rows, strict=True):
        assert entry.sound_id == samples.sound_id(row.song) and entry.sound_ids[0] == entry.sound_id
        assert entry.track_id == str(samples.cm_track(row.song))
        expected_isrc = samples.isrc(row.song)
        assert entry.isrc == (expected_isrc.upper() if expected_isrc else None)
        assert entry.label == row.song.label
        assert entry.peak_rank is not None and entry.peak_rank <= entry.rank
        assert entry.posts and entry.views and entry.views > entry.posts
        assert (entry.time_on_chart == 1) is (row.previous_rank is None)
    assert any(e.previous_rank is None for e in entries)
    assert any(len(e.sound_ids) > 1 for e in entries)
    isrcs = [samples.isrc(row.song) for row in rows]
    assert None in isrcs and any(i and i != i.upper() for i in isrcs)  # nulls and lower-case ISRCs are exercised


def test_samples_are_deterministic_and_move() -> None:
    day = date(2026, 11, 19)
    first = samples.chart_replies("US", "daily", day, variant=1)
    assert first == samples.chart_replies("US", "daily", day, variant=1)
    assert first != samples.chart_replies("US", "daily", day, variant=2)
    assert samples.chart_rows("US", "daily", 1) != samples.chart_rows("GB", "daily", 1)


def test_all_replies_cover_token_dates_countries_and_intervals() -> None:
    charts = [(date(2026, 11, 17), 0), (date(2026, 11, 18), 1), (date(2026, 11, 19), 2)]
    replies = samples.all_replies(charts, ["US", "KR"], page_size=50)
    assert len(replies) == 1 + 3 * 2 * 2 * 2
    token = chartmetric.parse_token(replies[request_key(chartmetric.token_request(samples.SAMPLE_REFRESH_TOKEN))].body,
                                    RECEIVED)
    assert (token.token, token.expires_at) == (samples.SAMPLE_ACCESS_TOKEN, "2026-11-20T06:00:00Z")
    days = {chartmetric.parse_tracks(reply.body).chart_date for key, reply in replies.items() if key[0] == "GET"}
    assert days == {"2026-11-17", "2026-11-18", "2026-11-19"}


def test_unauthorized_sample_body_asks_for_a_new_token() -> None:
    with pytest.raises(ChartmetricError) as raised:
        chartmetric.parse_tracks(samples.unauthorized_body(), 401)
    assert raised.value.unauthorized


def _fetch(server: ReplayServer, request: UpstreamRequest) -> bytes:
    url = server.origin + request.path + ("?" + urlencode(request.params) if request.params else "")
    http = urllib.request.Request(url, data=request.body, method=request.method, headers=dict(request.headers))
    with urllib.request.urlopen(http, timeout=5) as answer:  # only ever the 127.0.0.1 replay server
        body: bytes = answer.read()
        return body


def test_token_then_paging_over_a_local_replay_server() -> None:
    day = date(2026, 11, 19)
    replies = samples.token_replies() | samples.chart_replies("BR", "weekly", day, variant=0, size=100, page_size=30)
    with replaying(replies) as server:
        token = chartmetric.parse_token(_fetch(server, chartmetric.token_request(samples.SAMPLE_REFRESH_TOKEN)),
                                        RECEIVED)
        entries: list[ShortVideoEntry] = []
        offset, length = 0, None
        while length is None or offset < length:
            request = chartmetric.tracks_request(token.token, day.isoformat(), "weekly", "BR", 30, offset)
            page = chartmetric.parse_tracks(_fetch(server, request))
            entries += page.entries
            length, offset = page.length, offset + 30
        seen = [dict(key[2]).get("offset") for key, _ in server.seen if key[0] == "GET"]
        auth = [headers.get("authorization") for key, headers in server.seen if key[0] == "GET"]
    assert [e.rank for e in entries] == list(range(1, 101))
    assert seen == ["0", "30", "60", "90"]
    assert set(auth) == {f"Bearer {samples.SAMPLE_ACCESS_TOKEN}"}
