"""The fast lane: a repeated GET of a cached body is answered by the server from the request head, in the
bytes the app would send, through the same key check and rate limit; anything else goes to the app.

The gateway as `chartgw serve` runs it (`chartgw.http.rsgi.Gateway` on granian, its embedded server)
runs in a thread on 127.0.0.1, over /korea-chart's demo data; each answer of the lane is compared with the app's
answer to the same request (the lane switched off for it)."""

from __future__ import annotations

import gzip
import http.client
import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from chartgw.api.access import KeyChecker, RateLimiter
from chartgw.groups import korea_chart
from chartgw.http.app import build_app
from chartgw.http.fastlane import FastLane, Reply
from tests.fixtures import FIXED_NOW, KEY_HEADERS, TEST_KEY, data_dir, environment, held_in_app, serving_rsgi
from tests.fixtures import settings as run_settings

pytestmark = pytest.mark.waits

PATH = "/korea-chart/portal-a/charts/realtime"
VOLATILE = {b"date", b"x-ratelimit-remaining", b"x-ratelimit-reset", b"x-request-id"}
HEAD_TIMEOUT = 2
"""granian's one timer: a whole head within this of the previous answer (or of the connection)."""


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


def korea_app(korea_data: Path, limiter: RateLimiter) -> Any:
    """The gateway over /korea-chart's demo data, accepting TEST_KEY, at FIXED_NOW."""
    with data_dir(korea_data):
        return build_app([korea_chart.GROUP], checker=KeyChecker(korea_data / "keys.sqlite", plain_keys=[TEST_KEY]),
                         clock=lambda: FIXED_NOW, limiter=limiter, settings=run_settings())


@pytest.fixture(scope="module")
def served(korea_data: Path) -> Iterator[tuple[int, CountingLane]]:
    with data_dir(korea_data):
        app = korea_app(korea_data, RateLimiter(100_000))
        lane = CountingLane(app.state.fast_lane)
        with serving_rsgi(app, head_timeout=HEAD_TIMEOUT) as base:
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


def test_csv_and_ndjson_repeats_are_the_apps_answers_per_representation(served: tuple[int, CountingLane]) -> None:
    """A repeat asking for CSV or NDJSON (by `format` or by Accept) gets from the lane the app's bytes of that
    representation, with its own ETag; the JSON poll of the same URL stays JSON."""
    port, lane = served
    url = PATH + "?limit=5"
    json_answer = _lane_and_app(port, lane, url)[0]
    seen = {json_answer.header(b"etag")}
    for path, headers, media in ((url + "&format=csv", {}, b"text/csv; charset=utf-8"),
                                 (url, {"Accept": "text/csv"}, b"text/csv; charset=utf-8"),
                                 (url + "&format=ndjson", {}, b"application/x-ndjson"),
                                 (url, {"Accept": "application/x-ndjson, application/json;q=0.5"}, b"application/x-ndjson")):
        fast, slow = _lane_and_app(port, lane, path, **headers)
        assert fast.status == slow.status == 200 and fast.header(b"content-type") == media, (path, headers)
        assert fast.stable() == slow.stable() and fast.body == slow.body
        assert fast.header(b"vary") == (b"accept-encoding, accept" if headers else b"accept-encoding")
        seen.add(fast.header(b"etag"))
        again, app_again = _lane_and_app(port, lane, path, **headers, **{"If-None-Match": (fast.header(b"etag") or b"").decode()})
        assert again.status == app_again.status == 304 and again.stable() == app_again.stable()
    assert len(seen) == 3  # JSON, CSV and NDJSON: one ETag each (CSV by format or by Accept is one body)
    plain = _lane_and_app(port, lane, url)[0]
    assert plain.body == json_answer.body and plain.header(b"content-type") == b"application/json"


def test_a_representation_the_endpoint_lacks_is_the_apps_406(served: tuple[int, CountingLane]) -> None:
    """/health is no chart or list: the lane answers its JSON repeat, leaves an Accept of CSV only to the app
    (a 406) and answers `*/*` as JSON."""
    port, lane = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    _lane_and_app(port, lane, "/korea-chart/health")
    answered = lane.answered
    refused = _get(conn, "/korea-chart/health", Accept="text/csv")
    assert refused.status == 406 and refused.body.startswith(b'{"detail":') and lane.answered == answered
    fast, slow = _lane_and_app(port, lane, "/korea-chart/health", Accept="text/csv, */*;q=0.1")
    assert fast.status == slow.status == 200 and fast.header(b"content-type") == b"application/json"
    assert _get(conn, "/korea-chart/health?format=ndjson").status == 406


def test_first_requests_and_other_methods_go_to_the_app_and_a_closing_repeat_is_the_apps_answer(
        served: tuple[int, CountingLane]) -> None:
    """A miss, a HEAD and a POST are the app's. A repeat on a connection that asks `Connection: close` is the lane's
    under granian, which closes the connection after whichever answer (the uvicorn protocol's lane left closing
    connections to the app): the lane's answer is the app's, `Connection: close` included."""
    port, lane = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    before = lane.answered
    first = _get(conn, PATH + "?limit=7")  # never asked before: a miss, built by the app
    head = _get(conn, PATH + "?limit=7", "HEAD")
    post = _get(conn, "/korea-chart/refresh?site=portal-e&chart_type=nope", "POST")
    assert (first.status, head.status, post.status) == (200, 200, 422)
    assert head.body == b"" and head.header(b"content-length") == first.header(b"content-length")
    assert lane.answered == before
    closing, app_closing = _lane_and_app(port, lane, PATH + "?limit=7", Connection="close")
    assert closing.status == app_closing.status == 200 and closing.body == app_closing.body == first.body
    assert closing.stable() == app_closing.stable() and closing.header(b"connection") == b"close"


def test_an_unknown_key_gets_the_apps_401_from_the_lane_too(served: tuple[int, CountingLane]) -> None:
    """The lane asks the key middleware's gate: a refusal is the app's 401, byte for byte."""
    port, lane = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    assert _get(conn, PATH).status == 200
    fast, slow = _lane_and_app(port, lane, PATH, **{"X-API-Key": "not-a-key"})
    assert fast.status == slow.status == 401 and fast.body == slow.body == b'{"detail":"Invalid, revoked or expired API key"}'
    assert fast.stable() == slow.stable()
    conn.request("GET", PATH)
    missing = Answer(conn.getresponse())
    assert missing.status == 401 and missing.body.startswith(b'{"detail":"Missing API key')


def test_a_key_with_surrounding_whitespace_is_the_key(served: tuple[int, CountingLane]) -> None:
    """Optional whitespace around a field value is not part of it (RFC 9110): the lane and the app alike."""
    port, lane = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for padded in (TEST_KEY + " ", TEST_KEY + "\t", " \t" + TEST_KEY + " \t "):
        lane.enabled = False
        by_app = _get(conn, PATH, **{"X-API-Key": padded})
        lane.enabled = True
        answered = lane.answered
        by_lane = _get(conn, PATH, **{"X-API-Key": padded})
        assert by_app.status == by_lane.status == 200 and lane.answered == answered + 1, repr(padded)


def test_pipelined_requests_are_answered_in_order(served: tuple[int, CountingLane]) -> None:
    """A cached repeat queued behind a request the app is still answering waits its turn. (Its `Connection: close`
    sent it to the app under the uvicorn protocol; under granian the lane answers it.)"""
    port, lane = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    cached = _get(conn, PATH).body
    answered = lane.answered
    miss = f"GET {PATH}?limit=2&n=1 HTTP/1.1\r\nHost: x\r\nX-API-Key: {TEST_KEY}\r\n\r\n".encode()
    repeat = f"GET {PATH} HTTP/1.1\r\nHost: x\r\nX-API-Key: {TEST_KEY}\r\nConnection: close\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(miss + repeat)
        received = b""
        while chunk := s.recv(65536):
            received += chunk
    first, second = received.split(b"HTTP/1.1 200 OK\r\n")[1:]
    assert b'"rank":3' not in first and second.endswith(cached)
    assert lane.answered == answered + 1


def test_a_connection_idle_after_a_lane_answer_closes_after_the_head_timeout(served: tuple[int, CountingLane]) -> None:
    """granian's head timer (`header_read_timeout`, what `chartgw serve` sets from the head and idle timeouts) runs
    from the previous answer, the lane's too, as uvicorn's keep-alive timer did: an idle connection is closed."""
    port, lane = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    _get(conn, PATH)
    answered = lane.answered
    _get(conn, PATH)
    assert lane.answered == answered + 1
    assert conn.sock is not None
    started = time.monotonic()
    conn.sock.settimeout(HEAD_TIMEOUT + 30)
    assert conn.sock.recv(1) == b""  # closed by the server, not by the read timeout
    assert HEAD_TIMEOUT - 0.5 <= time.monotonic() - started <= HEAD_TIMEOUT + 20  # a ceiling a loaded machine keeps


def _app_and_lane(korea_data: Path, limiter: RateLimiter) -> tuple[TestClient, FastLane]:
    app = korea_app(korea_data, limiter)
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


def _answers(port: int, raw: bytes, wait: float = 1.5) -> bytes:
    """What the server sends back to `raw` within `wait` seconds (or until it closes), less the VOLATILE lines."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        s.sendall(raw)
        deadline = time.monotonic() + wait
        try:
            while time.monotonic() < deadline and (chunk := s.recv(65536)):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return b"\r\n".join(line for line in received.split(b"\r\n") if line.split(b":")[0] not in VOLATILE)


FRAMINGS = {
    "chunk line zz": b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
    "negative chunk size": b"Transfer-Encoding: chunked\r\n\r\n-1\r\n",
    "hex prefix in chunk size": b"Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
    "chunk size overflow": b"Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\n",
    "xchunked": b"Transfer-Encoding: xchunked\r\n\r\n",
    "chunked, then identity": b"Transfer-Encoding: chunked, identity\r\n\r\n",
    "chunked and a length": b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
    "short Content-Length": b"Content-Length: 10\r\n\r\nabc",
    "Content-Length 1x": b"Content-Length: 1x\r\n\r\n1",
    "two Content-Lengths": b"Content-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    "negative Content-Length": b"Content-Length: -1\r\n\r\n",
    "chunk data overrun": b"Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
}
"""Request framings a server's parser refuses or must wait on (issue 19 found ten the lane answered anyway)."""
REFUSED_BY_GRANIAN = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
"""granian's own refusal of a request its parser rejects (less its Date): no body, the connection closed."""


@pytest.mark.parametrize("case", FRAMINGS)
def test_the_lane_never_answers_a_request_with_a_body_or_odd_framing(served: tuple[int, CountingLane], case: str) -> None:
    """A hot URL asked with a body's framing: the lane leaves it to the app (and granian's parser's verdict), so the
    answer is byte for byte the one the app gives with the lane switched off. granian refuses the framings its
    parser rejects itself, with an empty 400 (the uvicorn protocol's was the JSON `Invalid HTTP request received.`);
    the rest reach the app, whose GET answers without reading the body."""
    port, lane = served
    raw = f"GET {PATH} HTTP/1.1\r\nHost: x\r\nX-API-Key: {TEST_KEY}\r\n".encode() + FRAMINGS[case]
    _lane_and_app(port, lane, PATH)  # hot: a plain repeat is the lane's
    answered = lane.answered
    with_lane = _answers(port, raw)
    lane.enabled = False
    try:
        without = _answers(port, raw)
    finally:
        lane.enabled = True
    assert lane.answered == answered
    # granian ends a connection whose body it had not read whole when the app answered, saying so in a Connection
    # header: a race between its read and the app, whoever answers.
    assert with_lane.replace(b"\r\nconnection: close", b"") == without.replace(b"\r\nconnection: close", b"")
    if b"HTTP/1.1 400" in with_lane:
        assert with_lane == REFUSED_BY_GRANIAN


def test_past_the_concurrency_limit_the_lane_answers_the_apps_503(korea_data: Path) -> None:
    """--limit-concurrency counts requests in progress: three idle connections do not make a 503 (issue 18
    saw the app path give one), two requests held in the app do, for the lane's repeat and the app alike."""
    with data_dir(korea_data), environment({"CHARTGW_REQUEST_BODY_TIMEOUT_SECONDS": "2", "CHARTGW_LIMIT_CONCURRENCY": "2"}):
        app = korea_app(korea_data, RateLimiter(0))
        lane = CountingLane(app.state.fast_lane)
        with serving_rsgi(app) as base:
            port = int(base.rpartition(":")[2])
            idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
            assert _lane_and_app(port, lane, PATH)[1].status == 200  # with the lane off: the app's own 200
            held = held_in_app(port)  # the app waits on their bodies
            time.sleep(0.3)
            by_lane = _get(http.client.HTTPConnection("127.0.0.1", port, timeout=10), PATH)
            lane.enabled = False
            try:
                by_app = _get(http.client.HTTPConnection("127.0.0.1", port, timeout=10), PATH)
            finally:
                lane.enabled = True
            assert by_lane.status == by_app.status == 503 and by_lane.body == by_app.body
            assert by_lane.header(b"content-type") == b"application/json" and by_lane.body.startswith(b'{"detail":')
            for s in held:  # cut off at the body timeout, without acting on half a body
                assert s.recv(65536).startswith(b"HTTP/1.1 408")
                s.close()
            assert _get(http.client.HTTPConnection("127.0.0.1", port, timeout=10), PATH).status == 200
            for s in idle:
                s.close()


def test_long_polls_and_change_streams_are_left_out_of_the_concurrency_limit(korea_data: Path) -> None:
    """Each kind has its own cap (CHANGES_MAX_WAITERS, CHANGES_MAX_STREAMS): three streams and two long polls open
    under --limit-concurrency 2 leave a keyed GET answered by the lane and the app alike; two requests held in the
    app still make it a 503."""
    with data_dir(korea_data), environment({"CHARTGW_LIMIT_CONCURRENCY": "2"}):
        app = korea_app(korea_data, RateLimiter(0))
        lane = CountingLane(app.state.fast_lane)
        with serving_rsgi(app) as base:
            port = int(base.rpartition(":")[2])
            parked = []
            for path in ["/changes/stream?since=now"] * 3 + ["/changes?since=now&wait=5"] * 2:
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nX-API-Key: {TEST_KEY}\r\n\r\n".encode())
                parked.append(s)
                deadline = time.monotonic() + 4  # one at a time: until it is parked, it is a request in progress
                while app.state.change_hub.parked < len(parked):
                    assert time.monotonic() < deadline, f"{app.state.change_hub.parked} of {len(parked)} parked"
                    time.sleep(0.01)
            fast, slow = _lane_and_app(port, lane, PATH)
            assert fast.status == slow.status == 200 and fast.body == slow.body
            assert all(s.recv(65536).startswith(b"HTTP/1.1 200") for s in parked[:3])  # the streams are open
            held = held_in_app(port)  # requests in progress, counted
            time.sleep(0.3)
            assert _get(http.client.HTTPConnection("127.0.0.1", port, timeout=10), PATH).status == 503
            for s in parked + held:
                s.close()


def test_with_the_access_log_on_the_lane_answers_and_is_logged_as_the_app(korea_data: Path) -> None:
    """The access log no longer switches the lane off: the gateway's JSON log (CHARTGW_ACCESS_LOG) has the lane's
    answers as lines like the app's, and granian's own text log, which `chartgw serve` leaves off (`log_access`), has
    nothing."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    with environment({"CHARTGW_ACCESS_LOG": "on"}):
        app = korea_app(korea_data, RateLimiter(0))
    written: list[bytes] = []
    app.state.observability.log.write = written.append
    with data_dir(korea_data):
        lane = CountingLane(app.state.fast_lane)
        with serving_rsgi(app) as base:
            logging.getLogger("granian.access").addHandler(keep := Keep())
            try:
                fast, slow = _lane_and_app(int(base.rpartition(":")[2]), lane, PATH + "?limit=4")
            finally:
                logging.getLogger("granian.access").removeHandler(keep)
    assert fast.status == slow.status == 200 and lane.answered == 1
    assert records == []
    app.state.observability.log.flush()
    lines = [json.loads(line) for line in b"".join(written).splitlines()]
    assert [(line["answered_by"], line["route"], line["status"], line["bytes"]) for line in lines] == [
        (by, "/korea-chart/{site}/charts/{chart_type}", 200, len(fast.body)) for by in ("app", "lane", "app")]
