"""The fast lane's answers are observed as the app's are: each carries its request id (and the CORS headers,
when on), is counted under the same labels with `answered_by="lane"`, and is a line of the JSON access log.

The gateway as `chartgw serve` runs it (`chartgw.http.rsgi.Gateway` on granian, its embedded server)
runs in a thread on 127.0.0.1 over /korea-chart's demo data, with the access log and CORS on."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from chartgw.api.access import KeyChecker, RateLimiter, env_key_id
from chartgw.groups import korea_chart
from chartgw.http.app import build_app
from tests.fixtures import FIXED_NOW, KEY_HEADERS, TEST_KEY, data_dir, environment, serving_rsgi
from tests.fixtures import settings as run_settings

PATH = "/korea-chart/portal-a/charts/realtime"
ROUTE = "/korea-chart/{site}/charts/{chart_type}"
PAGE = "http://127.0.0.1:9001"


class Served:
    def __init__(self, app: Any, port: int, written: list[bytes]) -> None:
        self.app = app
        self.port = port
        self.written = written

    def get(self, conn: http.client.HTTPConnection, path: str = PATH, **headers: str) -> tuple[int, dict[str, list[str]], bytes]:
        conn.request("GET", path, headers={**KEY_HEADERS, **headers})
        response = conn.getresponse()
        found: dict[str, list[str]] = {}
        for name, value in response.getheaders():
            found.setdefault(name.lower(), []).append(value)
        return response.status, found, response.read()

    def samples(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        return {(s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(text)
                for s in f.samples}

    def lines(self) -> list[dict[str, Any]]:
        self.app.state.observability.log.flush()
        return [json.loads(line) for line in b"".join(self.written).splitlines()]


@pytest.fixture
def served(korea_data: Path) -> Iterator[Served]:
    with environment({"CHARTGW_ACCESS_LOG": "on", "CHARTGW_CORS_ORIGINS": PAGE}), data_dir(korea_data):
        app = build_app([korea_chart.GROUP], checker=KeyChecker(korea_data / "keys.sqlite", plain_keys=[TEST_KEY]),
                        clock=lambda: FIXED_NOW, limiter=RateLimiter(5), settings=run_settings())
    written: list[bytes] = []
    app.state.observability.log.write = written.append
    with serving_rsgi(app) as base:
        yield Served(app, int(base.rpartition(":")[2]), written)


def counted(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], status: int, answered_by: str,
            cache: str) -> float:
    labels = {"group": "korea-chart", "route": ROUTE, "status": str(status), "answered_by": answered_by, "cache": cache}
    return samples.get(("chartgw_requests_total", frozenset(labels.items())), 0.0)


def test_lane_answers_carry_ids_and_cors_and_are_counted_and_logged(served: Served) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    first = served.get(conn)  # the app builds and caches it
    repeats = [served.get(conn) for _ in range(2)]  # the lane answers
    traced = served.get(conn, **{"X-Request-Id": "partner-7"})
    allowed = served.get(conn, Origin=PAGE)
    other = served.get(conn, Origin="http://127.0.0.1:9002")  # the sixth of five a minute: the lane's 429
    assert [a[0] for a in (first, *repeats, traced, allowed, other)] == [200, 200, 200, 200, 200, 429]
    ids = [a[1]["x-request-id"] for a in (first, *repeats, traced, allowed, other)]
    assert all(len(i) == 1 for i in ids) and len({i[0] for i in ids}) == 6 and traced[1]["x-request-id"] == ["partner-7"]
    assert allowed[1]["access-control-allow-origin"] == [PAGE] and "Origin" in allowed[1]["vary"]
    assert "X-RateLimit-Remaining" in allowed[1]["access-control-expose-headers"][0]
    assert "access-control-allow-origin" not in other[1] and "Origin" in other[1]["vary"]
    assert all(a[2] == first[2] for a in (*repeats, traced, allowed))

    samples = served.samples()
    assert counted(samples, 200, "app", "miss") == 1
    assert counted(samples, 200, "lane", "hit") == 4
    assert counted(samples, 429, "lane", "none") == 1
    lane = {"group": "korea-chart", "route": ROUTE, "answered_by": "lane"}
    assert samples[("chartgw_request_duration_seconds_count", frozenset(lane.items()))] == 5

    lines = [line for line in served.lines() if line["route"] == ROUTE]
    assert [(line["answered_by"], line["status"]) for line in lines] == [
        ("app", 200), ("lane", 200), ("lane", 200), ("lane", 200), ("lane", 200), ("lane", 429)]
    assert [line["request_id"] for line in lines] == [i[0] for i in ids]
    assert all(line["key_id"] == env_key_id(TEST_KEY) and line["group"] == "korea-chart" and line["method"] == "GET" for line in lines)
    assert [line["bytes"] for line in lines] == [len(first[2])] * 5 + [len(other[2])]
    assert all(0 < line["duration_ms"] < 60_000 for line in lines)  # a time in ms (a ceiling a loaded box keeps)


def test_the_servers_own_refusals_carry_an_id_and_are_counted(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(b"GET /" + b"x" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 414") and b"\r\nx-request-id: " in head
    refused = {"group": "gateway", "route": "(refused)", "status": "414", "answered_by": "server", "cache": "none"}
    assert served.samples()[("chartgw_requests_total", frozenset(refused.items()))] == 1
    line = next(line for line in served.lines() if line["route"] != "/metrics")
    assert (line["route"], line["status"], line["answered_by"], line["bytes"]) == ("(refused)", 414, "server", len(body))


def test_a_root_routes_lane_answers_carry_the_apps_labels(served: Served) -> None:
    """/charts (and /identity/..., /changes) are served at the root: the lane labels its repeats as the app labels
    the first answer, never under the group whose data they read."""
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    answers = [served.get(conn, "/charts") for _ in range(3)]
    assert [a[0] for a in answers] == [200, 200, 200] and answers[1][2] == answers[0][2]
    samples = served.samples()
    labels = {"group": "gateway", "route": "/charts", "status": "200"}
    assert samples.get(("chartgw_requests_total", frozenset({**labels, "answered_by": "app", "cache": "miss"}.items()))) == 1
    assert samples.get(("chartgw_requests_total", frozenset({**labels, "answered_by": "lane", "cache": "hit"}.items()))) == 2
    assert [(line["group"], line["route"], line["answered_by"]) for line in served.lines() if "charts" in line["route"]] == [
        ("gateway", "/charts", "app"), ("gateway", "/charts", "lane"), ("gateway", "/charts", "lane")]
