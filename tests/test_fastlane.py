"""The fast lane: a repeated GET of a cached body is answered by the server from the request head, in the
bytes the app would send, through the same key check and rate limit; anything else goes to the app.

A real uvicorn server with `chartgw serve`'s protocol runs in a thread on 127.0.0.1, over /korea-chart's
demo data; each answer of the lane is compared with the app's answer to the same request (the lane
switched off for it)."""

from __future__ import annotations

import gzip
import http.client
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from chartgw.access import KeyChecker, RateLimiter
from chartgw.app import build_app
from chartgw.fastlane import FastLane, Reply
from chartgw.groups import korea_chart
from chartgw.server import LimitedHttpToolsProtocol
from tests.fixtures import FIXED_NOW, KEY_HEADERS, TEST_KEY, data_dir, serving

PATH = "/korea-chart/portal-a/charts/realtime"
VOLATILE = {b"date", b"x-ratelimit-remaining", b"x-ratelimit-reset", b"x-request-id"}
KEEP_ALIVE = 2


class CountingLane:
    """Wraps a lane's `reply`: counts what it answered and what it passed on, and can be switched off."""

    def __init__(self, lane: FastLane) -> None:
        self.reply_of = lane.reply
        self.answered = self.passed = 0
        self.enabled = True
        lane.reply = self.reply  # type: ignore[method-assign]  # the instance's attribute shadows the method

    def reply(self, path: str, query: bytes, headers: list[tuple[bytes, bytes]]) -> Reply | None:
        answer = self.reply_of(path, query, headers) if self.enabled else None
        if answer is None:
            self.passed += 1
        else:
            self.answered += 1
        return answer


@pytest.fixture(scope="module")
def served(korea_data: Path) -> Iterator[tuple[int, CountingLane]]:
    with data_dir(korea_data):
        app = build_app([korea_chart.GROUP], checker=KeyChecker(korea_data / "keys.sqlite", plain_keys=[TEST_KEY]),
                        clock=lambda: FIXED_NOW, limiter=RateLimiter(100_000))
        lane = CountingLane(app.state.fast_lane)
        with serving(app, http=LimitedHttpToolsProtocol, access_log=False, lifespan="off",
                     timeout_keep_alive=KEEP_ALIVE) as base:
            yield int(base.rpartition(":")[2]), lane


class Answer:
    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.headers = [(k.lower().encode(), v.encode()) for k, v in response.getheaders()]
        self.body = response.read()

    def stable(self) -> list[tuple[bytes, bytes]]:
        return [(k, v) for k, v in self.headers if k not in VOLATILE]

    def header(self, name: bytes) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)


def _get(conn: http.client.HTTPConnection, path: str, method: str = "GET", **headers: str) -> Answer:
    conn.request(method, path, headers={**KEY_HEADERS, **headers})
    return Answer(conn.getresponse())


def _lane_and_app(port: int, lane: CountingLane, path: str, method: str = "GET", **headers: str) -> tuple[Answer, Answer]:
    """The same request answered with the lane on (after a first request made its body cached), and off."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    _get(conn, path, method, **headers)
    answered = lane.answered
    lane.enabled = True
    fast = _get(conn, path, method, **headers)
    assert lane.answered == answered + 1, f"the repeat was not answered by the lane (passed {lane.passed})"
    lane.enabled = False
    try:
        slow = _get(conn, path, method, **headers)
    finally:
        lane.enabled = True
    return fast, slow


def test_a_repeat_is_answered_by_the_lane_in_the_apps_bytes(served: tuple[int, CountingLane]) -> None:
    port, lane = served
    fast, slow = _lane_and_app(port, lane, PATH)
    assert fast.status == slow.status == 200
    assert fast.stable() == slow.stable() and fast.body == slow.body
    assert [k for k, _ in fast.headers] == [k for k, _ in slow.headers]  # the same headers in the same order
    assert int(fast.header(b"x-ratelimit-limit") or 0) == 100_000


def test_a_conditional_repeat_is_the_apps_304(served: tuple[int, CountingLane]) -> None:
    port, lane = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    etag = _get(conn, PATH).header(b"etag")
    assert etag
    fast, slow = _lane_and_app(port, lane, PATH, **{"If-None-Match": etag.decode()})
    assert fast.status == slow.status == 304 and fast.body == slow.body == b""
    assert fast.stable() == slow.stable()


def test_gzip_query_variants_and_legacy_prefixes_go_the_same_way(served: tuple[int, CountingLane]) -> None:
    port, lane = served
    zipped, app_zipped = _lane_and_app(port, lane, PATH, **{"Accept-Encoding": "gzip"})
    assert zipped.header(b"content-encoding") == b"gzip" and zipped.stable() == app_zipped.stable()
    plain = _lane_and_app(port, lane, PATH)[0]
    assert gzip.decompress(zipped.body) == plain.body
    for path in (PATH + "?limit=3", "/korea-chart-api/portal-a/charts/realtime?limit=3"):
        fast, slow = _lane_and_app(port, lane, path)
        assert fast.status == 200 and fast.stable() == slow.stable() and fast.body == slow.body
        assert len(fast.body) < len(plain.body)


def test_first_requests_other_methods_and_closing_connections_go_to_the_app(served: tuple[int, CountingLane]) -> None:
    port, lane = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    before = lane.answered
    first = _get(conn, PATH + "?limit=7")  # never asked before: a miss, built by the app
    head = _get(conn, PATH + "?limit=7", "HEAD")
    post = _get(conn, "/korea-chart/refresh?site=portal-e&chart_type=nope", "POST")
    assert (first.status, head.status, post.status) == (200, 200, 422)
    assert head.body == b"" and head.header(b"content-length") == first.header(b"content-length")
    closing = _get(conn, PATH + "?limit=7", Connection="close")
    assert closing.status == 200 and closing.body == first.body and closing.header(b"connection") == b"close"
    assert lane.answered == before


def test_an_unknown_key_gets_the_apps_401_even_for_a_cached_url(served: tuple[int, CountingLane]) -> None:
    port, lane = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    assert _get(conn, PATH).status == 200
    before = lane.answered
    refused = _get(conn, PATH, **{"X-API-Key": "not-a-key"})
    conn.request("GET", PATH)
    missing = Answer(conn.getresponse())
    assert (refused.status, missing.status) == (401, 401) and lane.answered == before
    assert refused.body == b'{"detail":"Invalid, revoked or expired API key"}'


def test_pipelined_requests_are_answered_in_order(served: tuple[int, CountingLane]) -> None:
    """A cached repeat queued behind a request the app is still answering waits its turn."""
    port, _ = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    cached = _get(conn, PATH).body
    miss = f"GET {PATH}?limit=2&n=1 HTTP/1.1\r\nHost: x\r\nX-API-Key: {TEST_KEY}\r\n\r\n".encode()
    repeat = f"GET {PATH} HTTP/1.1\r\nHost: x\r\nX-API-Key: {TEST_KEY}\r\nConnection: close\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(miss + repeat)
        received = b""
        while chunk := s.recv(65536):
            received += chunk
    first, second = received.split(b"HTTP/1.1 200 OK\r\n")[1:]
    assert b'"rank":3' not in first and second.endswith(cached)


def test_a_connection_idle_after_a_lane_answer_closes_after_the_keep_alive_timeout(
        served: tuple[int, CountingLane]) -> None:
    port, lane = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    _get(conn, PATH)
    answered = lane.answered
    _get(conn, PATH)
    assert lane.answered == answered + 1
    assert conn.sock is not None
    started = time.monotonic()
    conn.sock.settimeout(KEEP_ALIVE + 5)
    assert conn.sock.recv(1) == b""  # closed by the server, not by the read timeout
    assert KEEP_ALIVE - 0.5 <= time.monotonic() - started <= KEEP_ALIVE + 2


def _app_and_lane(korea_data: Path, limiter: RateLimiter) -> tuple[TestClient, FastLane]:
    with data_dir(korea_data):
        app = build_app([korea_chart.GROUP], checker=KeyChecker(korea_data / "keys.sqlite", plain_keys=[TEST_KEY]),
                        clock=lambda: FIXED_NOW, limiter=limiter)
    return TestClient(app), app.state.fast_lane


def _headers(**extra: str) -> list[tuple[bytes, bytes]]:
    return [(b"x-api-key", TEST_KEY.encode()), *((k.lower().encode(), v.encode()) for k, v in extra.items())]


def test_the_lane_counts_against_the_keys_rate_and_answers_its_429(korea_data: Path) -> None:
    minute: list[float] = [60_000.0]
    api, lane = _app_and_lane(korea_data, RateLimiter(3, clock=lambda: minute[0]))
    with data_dir(korea_data), api:
        assert api.get(PATH, headers=KEY_HEADERS).status_code == 200  # 1 of 3, by the app
        answers: list[Any] = [lane.reply(PATH, b"", _headers()) for _ in range(2)]  # 2 and 3 of 3, by the lane
        assert [a[0] for a in answers] == [200, 200]
        assert dict(answers[1][1])[b"x-ratelimit-remaining"] == b"0"
        refused = lane.reply(PATH, b"", _headers())
        by_app = api.get(PATH, headers=KEY_HEADERS)
    assert refused is not None and refused[0] == by_app.status_code == 429
    assert refused[2] == by_app.content
    same = [(k.decode(), "" if k == b"x-request-id" else v.decode()) for k, v in refused[1]]
    assert same == [(k, "" if k == "x-request-id" else v) for k, v in by_app.headers.items()]  # ids are each request's


def test_the_lane_passes_when_the_data_version_is_due_for_a_check(korea_data: Path) -> None:
    api, lane = _app_and_lane(korea_data, RateLimiter(0))
    with data_dir(korea_data), api:
        assert api.get(PATH, headers=KEY_HEADERS).status_code == 200
        assert lane.reply(PATH, b"", _headers()) is not None
        known = lane.cache.canonical((PATH, b""))
        assert known is not None
        known.owner.data.expire()  # as after FRESHNESS_SECONDS, or a crawl this process ran
        assert lane.reply(PATH, b"", _headers()) is None  # the app re-reads the version and answers
        assert api.get(PATH, headers=KEY_HEADERS).status_code == 200
        assert lane.reply(PATH, b"", _headers()) is not None
        assert lane.reply("/korea-chart/health", b"", []) is None  # not asked yet: the app's
