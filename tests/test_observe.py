"""Request ids, Prometheus metrics and the JSON access log, through the app (the fast lane's answers are
tests/test_observe_lane.py's): every answer has an id, is counted under bounded labels and, with the log on,
is one JSON line."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from chartgw.api.access import KeyChecker, RateLimiter, env_key_id
from chartgw.api.endpoints import Call, Route
from chartgw.api.group import Group
from chartgw.api.params import Param
from chartgw.core.clock import fixed
from chartgw.groups.radio import storage as radio_monitor
from chartgw.http.app import build_app
from chartgw.http.metrics import RequestMetrics, StoreCollector, WorkerRequestMetrics
from chartgw.http.observe import request_id
from chartgw.store import Query, iso
from tests.fixtures import FIXED_NOW, KEY_HEADERS, TEST_KEY, build_group_db, child_env, configure, data_dir
from tests.fixtures import settings as run_settings

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def _boom(call: Call) -> Any:
    raise RuntimeError("a bug")


async def _item(call: Call) -> dict[str, Any]:
    return {"item": call.params["item"]}


TINY = Group("tiny", "Tiny", "A test group", (
    Route("/boom", _boom, cache_ttl=0),
    Route("/items/{item}", _item, (Param("item", "path", required=True),)),
))


def tiny_app(path: Path, limit: int = 0) -> TestClient:
    with data_dir(path):
        app = build_app([TINY], checker=KeyChecker(path / "keys.sqlite", plain_keys=[TEST_KEY]),
                        clock=lambda: FIXED_NOW, limiter=RateLimiter(limit), settings=run_settings())
    return TestClient(app, raise_server_exceptions=False)


def scrape(api: TestClient) -> Samples:
    answer = api.get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain; version=")
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(answer.text) for sample in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def requests(group: str, route: str, status: int, cache: str = "none", answered_by: str = "app") -> dict[str, str]:
    return {"group": group, "route": route, "status": str(status), "answered_by": answered_by, "cache": cache}


# --- request ids ------------------------------------------------------------------------------------------


def test_a_sane_request_id_is_kept_and_any_other_replaced() -> None:
    assert request_id(b"abc-123_x.y:z/w+v=u@t~s") == b"abc-123_x.y:z/w+v=u@t~s"
    assert request_id(b"A" * 128) == b"A" * 128
    made = {request_id(bad) for bad in (None, b"", b"A" * 129, b'a"b', b"a b", b"caf\xc3\xa9", b"a\\n")}
    assert len(made) == 7  # each replaced by a new, distinct id
    for rid in made:
        prefix, _, count = rid.partition(b"-")
        assert len(prefix) == 12 and int(count, 16) > 0


def test_every_answer_carries_a_request_id(tmp_path: Path) -> None:
    configure("CORS_ORIGINS", "http://127.0.0.1:9001")
    with tiny_app(tmp_path, limit=3) as api:
        answers = [
            api.get("/tiny/items/a", headers=KEY_HEADERS),  # 200
            api.get("/tiny/items/a", headers={**KEY_HEADERS, "If-None-Match": api.get(
                "/tiny/items/a", headers=KEY_HEADERS).headers["etag"]}),  # 304
            api.get("/tiny/items/a", headers=KEY_HEADERS),  # 429: the fourth request of the minute
            api.get("/tiny/items/a"),  # 401
            api.get("/tiny/nothing", headers={"X-API-Key": "wrong"}),  # 401
            api.get("/tiny/boom", headers={"X-API-Key": "wrong"}),
            api.options("/tiny/items/a", headers={"Origin": "http://127.0.0.1:9001", "Access-Control-Request-Method": "GET"}),
            api.get("/tiny/", follow_redirects=False), api.get("/tiny", follow_redirects=False),
            api.get("/nowhere"), api.get("/"), api.get("/openapi.json"), api.get("/docs"), api.get("/metrics"),
        ]
        assert [a.status_code for a in answers] == [200, 304, 429, 401, 401, 401, 204, 200, 307, 401, 200, 200, 200, 200]
        ids = [a.headers["x-request-id"] for a in answers]
        assert len(set(ids)) == len(ids)
        kept = api.get("/tiny/", headers={"X-Request-Id": "partner-trace-42"})
        assert kept.headers.get_list("x-request-id") == ["partner-trace-42"]
        replaced = api.get("/tiny/", headers={"X-Request-Id": "has space"})
        assert replaced.headers["x-request-id"] != "has space"


def test_a_500_is_json_with_its_request_id_and_counted(tmp_path: Path) -> None:
    with tiny_app(tmp_path) as api:
        answer = api.get("/tiny/boom", headers={**KEY_HEADERS, "X-Request-Id": "trace-500"})
        assert answer.status_code == 500 and answer.json() == {"detail": "Internal server error"}
        assert answer.headers["x-request-id"] == "trace-500"
        assert value(scrape(api), "chartgw_requests_total", **requests("tiny", "/tiny/boom", 500)) == 1


# --- request metrics ----------------------------------------------------------------------------------------


def test_requests_are_counted_by_route_template_status_and_cache(tmp_path: Path) -> None:
    with tiny_app(tmp_path, limit=5) as api:
        first = api.get("/tiny/items/a", headers=KEY_HEADERS)
        api.get("/tiny/items/a", headers=KEY_HEADERS)
        api.get("/tiny/items/b", headers=KEY_HEADERS)
        api.get("/tiny/items/a", headers={**KEY_HEADERS, "If-None-Match": first.headers["etag"]})
        api.get("/tiny/items/a", headers=KEY_HEADERS)
        api.get("/tiny/items/a", headers=KEY_HEADERS)  # the sixth: 429
        api.get("/tiny/items/c")  # 401, before routing: still labelled with its route
        api.get("/tiny-api/items/a", headers={"X-API-Key": "nope"})  # a legacy prefix: the same route
        samples = scrape(api)
    route = "/tiny/items/{item}"
    assert value(samples, "chartgw_requests_total", **requests("tiny", route, 200, "miss")) == 2
    assert value(samples, "chartgw_requests_total", **requests("tiny", route, 200, "hit")) == 2
    assert value(samples, "chartgw_requests_total", **requests("tiny", route, 304, "hit")) == 1
    assert value(samples, "chartgw_requests_total", **requests("tiny", route, 429)) == 1
    assert value(samples, "chartgw_requests_total", **requests("tiny", route, 401)) == 2
    histogram = {"group": "tiny", "route": route, "answered_by": "app"}
    assert value(samples, "chartgw_request_duration_seconds_count", **histogram) == 8
    assert value(samples, "chartgw_request_duration_seconds_bucket", **histogram, le="+Inf") == 8
    assert 0 < value(samples, "chartgw_request_duration_seconds_sum", **histogram) < 80  # seconds, not ms
    assert not any(name.endswith("_created") for name, _ in samples)
    assert value(samples, "process_resident_memory_bytes") > 0


def test_labels_stay_bounded_whatever_paths_clients_send(tmp_path: Path) -> None:
    with tiny_app(tmp_path) as api:
        for n in range(30):
            api.get(f"/tiny/items/{n}/more", headers=KEY_HEADERS)
            api.get(f"/random-{n}?x={n}", headers=KEY_HEADERS)
            api.get(f"/tiny/items/{n}/", headers=KEY_HEADERS, follow_redirects=False)
        samples = scrape(api)
    series = {dict(labels)["route"] for name, labels in samples if name == "chartgw_requests_total"}
    assert series == {"(unmatched)", "(slash redirect)"}
    assert value(samples, "chartgw_requests_total", **requests("tiny", "(unmatched)", 404)) == 30
    assert value(samples, "chartgw_requests_total", **requests("gateway", "(unmatched)", 404)) == 30
    assert value(samples, "chartgw_requests_total", **requests("tiny", "(slash redirect)", 307)) == 30


def test_every_path_of_the_gateway_has_its_route_label(tmp_path: Path) -> None:
    """/replication was counted as (unmatched) (issue 28); the root's feed routes, the front door and the
    documents are each their own route."""
    with tiny_app(tmp_path) as api:
        for path in ("/replication", "/", "/openapi.json", "/changes?limit=1"):
            assert api.get(path, headers=KEY_HEADERS).status_code == 200, path
        samples = scrape(api)
    for route in ("/replication", "/", "/openapi.json", "/changes"):
        assert value(samples, "chartgw_requests_total", **requests("gateway", route, 200)) == 1, route
    assert not [labels for name, labels in samples if name == "chartgw_requests_total"
                and dict(labels)["route"] == "(unmatched)"]


def test_metrics_on_their_own_port_leave_the_api_port(tmp_path: Path) -> None:
    configure("METRICS", "127.0.0.1:0")
    with tiny_app(tmp_path) as api:
        api.get("/tiny/items/a", headers=KEY_HEADERS)
        assert api.get("/metrics").status_code == 401
        host, port = api.app.state.observability.endpoint.address  # type: ignore[attr-defined]
        text = httpx.get(f"http://{host}:{port}/metrics", trust_env=False).text
        assert 'chartgw_requests_total{answered_by="app",cache="miss",group="tiny",route="/tiny/items/{item}",status="200"} 1.0' in text
    with pytest.raises(httpx.TransportError):  # closed with the app
        httpx.get(f"http://{host}:{port}/metrics", trust_env=False, timeout=2)


def test_metrics_off(tmp_path: Path) -> None:
    configure("METRICS", "off")
    with tiny_app(tmp_path) as api:
        assert api.get("/tiny/").headers["x-request-id"]
        assert api.get("/metrics").status_code == 401
        assert api.app.state.observability.observer.metrics is None  # type: ignore[attr-defined]


def test_counted_in_memory_as_prometheus_client_would_count_them() -> None:
    """One worker counts in plain dicts (a metric object's locks cost a fifth of a fast-lane answer); a scrape
    renders exactly what prometheus-client's own Counter and Histogram render for the same answers."""
    seconds = [0.00002, 0.0001, 0.00011, 0.003, 0.7, 9.0, 11.0, 0.0001]
    pages = []
    for kind in (RequestMetrics, WorkerRequestMetrics):  # the second, outside multiprocess mode: plain prometheus
        registry = CollectorRegistry()
        metrics = kind(registry)
        for i, took in enumerate(seconds):
            metrics.observe("tiny", "/tiny/items/{item}", 200 if i % 3 else 304, "lane", "hit", took)
        metrics.observe("gateway", "(refused)", 408, "server", "none", 0.0)
        pages.append(generate_latest(registry).decode())
    assert pages[0] == pages[1]
    assert 'le="0.0001"' in pages[0] and "chartgw_requests_total{" in pages[0]


def test_several_workers_are_added_up(tmp_path: Path) -> None:
    """`chartgw serve --workers N`: each worker counts into the multiprocess files; any one's scrape sums them."""
    worker = textwrap.dedent("""
        import sys
        from prometheus_client import CollectorRegistry
        from chartgw.http.metrics import request_metrics
        metrics = request_metrics(CollectorRegistry())
        for _ in range(int(sys.argv[1])):
            metrics.observe("tiny", "/tiny/items/{item}", 200, "lane", "hit", 0.00002)
    """)
    scrape_one = textwrap.dedent("""
        from prometheus_client import CollectorRegistry, generate_latest
        from chartgw.core.settings import Settings
        from chartgw.http.metrics import RequestMetrics, StoreCollector, WorkerRequestMetrics, scrape_registry
        print(generate_latest(scrape_registry(CollectorRegistry(), StoreCollector([], Settings()), Settings())).decode())
    """)
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for count in ("3", "4"):
        subprocess.run([sys.executable, "-c", worker, count], env=env, check=True, timeout=60)
    text = subprocess.run([sys.executable, "-c", scrape_one], env=env, check=True, timeout=60, capture_output=True,
                          text=True).stdout
    samples = {(s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert value(samples, "chartgw_requests_total", **requests("tiny", "/tiny/items/{item}", 200, "hit", "lane")) == 7
    assert value(samples, "chartgw_request_duration_seconds_bucket", group="tiny", route="/tiny/items/{item}",
                 answered_by="lane", le="0.0001") == 7


# --- what the stores hold ----------------------------------------------------------------------------------


class CountingCollector(StoreCollector):
    reads = 0

    def _read(self) -> None:
        self.reads += 1
        super()._read()


def families(collector: StoreCollector) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value for f in collector.collect() for s in f.samples}


def test_crawl_attempts_and_snapshot_ages_are_read_from_the_stores(korea_data: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    build_group_db(data, "korea-chart", now=FIXED_NOW)
    with data_dir(data):
        collector = CountingCollector(["korea-chart", "radio"], clock=fixed(FIXED_NOW + timedelta(minutes=5)),
                                      store_seconds=3600, settings=run_settings())
    first = families(collector)
    target = {"group": "korea-chart", "target": "portal-a/realtime"}
    assert value(first, "chartgw_crawl_attempts_total", **target, outcome="ok") == 1
    assert value(first, "chartgw_snapshot_age_seconds", **target) == 300
    # A scrape storm reads the stores once per interval; ages still move with the clock.
    collector.clock = fixed(FIXED_NOW + timedelta(minutes=6))
    build_group_db(data, "korea-chart", now=FIXED_NOW + timedelta(minutes=1))  # another crawl of every target
    for _ in range(50):
        again = families(collector)
    assert collector.reads == 1
    assert value(again, "chartgw_crawl_attempts_total", **target, outcome="ok") == 1
    assert value(again, "chartgw_snapshot_age_seconds", **target) == 360
    collector.store_seconds = 0
    later = families(collector)
    assert collector.reads == 2
    assert value(later, "chartgw_crawl_attempts_total", **target, outcome="ok") == 2  # counted on from the last id
    assert value(later, "chartgw_snapshot_age_seconds", **target) == 300


def test_radio_monitor_states_are_read_from_its_file(tmp_path: Path) -> None:
    with data_dir(tmp_path):
        db = radio_monitor.open_db(tmp_path / "radio.sqlite")
        radio_monitor.commit_batch(db, [
            radio_monitor.state_write("s1", status="ok"), radio_monitor.state_write("s2", status="ok"),
            radio_monitor.state_write("s3", status="backoff"), radio_monitor.state_write("s4", status="starting"),
            radio_monitor.state_write("s5", status="unwatched", monitored=0),
            (Query("a running monitor", "INSERT INTO monitor_runs (pid, started_at, heartbeat_at, stations, plays)"
                   " VALUES (1, ?, ?, 4, 0)"), (iso(FIXED_NOW), iso(FIXED_NOW))),
        ])
        db.close()
        collector = StoreCollector(["radio"], clock=fixed(FIXED_NOW + timedelta(seconds=40)), settings=run_settings())
    samples = families(collector)
    assert {dict(labels)["state"]: v for (name, labels), v in samples.items()
            if name == "chartgw_radio_monitor_stations"} == {"ok": 2, "backoff": 1, "starting": 1}
    assert value(samples, "chartgw_radio_monitor_heartbeat_age_seconds") == 40


# --- the access log ----------------------------------------------------------------------------------------


def logged_app(path: Path) -> tuple[TestClient, list[bytes]]:
    configure("ACCESS_LOG", "on")
    api = tiny_app(path)
    written: list[bytes] = []
    api.app.state.observability.log.write = written.append  # type: ignore[attr-defined]
    return api, written


def test_the_access_log_has_one_json_line_per_answer(tmp_path: Path) -> None:
    api, written = logged_app(tmp_path)
    with api:
        api.get("/tiny/items/a", headers={**KEY_HEADERS, "X-Request-Id": "trace-1"})
        api.get("/tiny/items/zz?secret=1", headers={"X-API-Key": "not-a-key"})
        api.get("/tiny/boom", headers=KEY_HEADERS)
        api.app.state.observability.log.flush()  # type: ignore[attr-defined]
    text = b"".join(written).decode()
    lines = [json.loads(line) for line in text.splitlines()]
    assert [list(line) for line in lines] == [["time", "request_id", "key_id", "method", "group", "route", "status",
                                               "bytes", "duration_ms", "answered_by"]] * 3
    first, refused, failed = lines
    assert first["request_id"] == "trace-1" and first["key_id"] == env_key_id(TEST_KEY) and first["method"] == "GET"
    assert (first["group"], first["route"], first["status"], first["answered_by"]) == ("tiny", "/tiny/items/{item}", 200, "app")
    assert first["bytes"] == len(b'{"item":"a"}') and 0 < first["duration_ms"] < 60_000
    assert len(first["time"]) == 24 and first["time"].endswith("Z")
    assert refused["status"] == 401 and refused["key_id"] is None and refused["route"] == "/tiny/items/{item}"
    assert failed["status"] == 500 and failed["route"] == "/tiny/boom"
    assert TEST_KEY not in text and "not-a-key" not in text and "secret" not in text and "/zz" not in text


def test_the_access_log_writes_whole_lines_in_batches(tmp_path: Path) -> None:
    from chartgw.http.accesslog import AccessLog

    writes: list[bytes] = []
    log = AccessLog(write=writes.append, clock=lambda: FIXED_NOW.timestamp() + 0.25, flush_bytes=600, batch_lines=4)
    for n in range(10):
        log.record(b"id-%d" % n, n, "GET", "tiny", "/tiny/items/{item}", 200, 12, 0.0000412, "lane")
    assert len(writes) == 4  # two batches of four lines, each written as two writes of two (under 600 bytes)
    log.flush()
    assert all(len(w) <= 600 and w.endswith(b"\n") for w in writes)
    lines = b"".join(writes).splitlines()
    assert [json.loads(line)["request_id"] for line in lines] == [f"id-{n}" for n in range(10)]
    assert json.loads(lines[0])["time"] == "2026-11-20T05:30:00.250Z" and json.loads(lines[0])["duration_ms"] == 0.041


def test_the_access_log_lines_are_the_records_json_for_every_kind_of_answer() -> None:
    """Lines are joined from parts made once (per label set, per key id, status and size, per millisecond, per
    microsecond of duration): each line is still the JSON of its own answer, in the fields' order."""
    from chartgw.http.accesslog import AccessLog, AccessRecord

    writes: list[bytes] = []
    times = iter([FIXED_NOW.timestamp() + n * 0.0004 for n in range(10)] + [FIXED_NOW.timestamp() + 61.9999])
    log = AccessLog(write=writes.append, clock=lambda: next(times), flush_bytes=4096, batch_lines=64)
    answers = [(None, "GET", "/tiny/items/{item}", 401, 48, 0.0000412, "lane"),
               (3, "GET", "/tiny/items/{item}", 200, 12, 0.0009996, "lane"),
               (3, "GET", "/tiny/items/{item}", 200, 12, 0.0000412, "lane"),
               (0, "HEAD", '/tiny/"quoted"/%d', 304, 0, 1.5, "app"),
               (123456, "OTHER", "/tiny/", 503, 70, 12.3456789, "server")] * 2
    answers.append((7, "GET", "/tiny/items/{item}", 200, 12, 0.25, "lane"))
    for n, (key_id, method, route, status, size, seconds, by) in enumerate(answers):
        log.record(b"id-%d" % n, key_id, method, "tiny", route, status, size, seconds, by)
    log.flush()
    lines = b"".join(writes).splitlines()
    assert len(lines) == len(answers)
    for n, (line, (key_id, method, route, status, size, seconds, by)) in enumerate(zip(lines, answers, strict=True)):
        at = FIXED_NOW + timedelta(seconds=61.9999 if n == 10 else n * 0.0004)
        expected = AccessRecord(at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z", f"id-{n}", key_id,
                                method, "tiny", route, status, size, round(seconds * 1000, 3), by)
        assert json.loads(line) == json.loads(msgspec.json.encode(expected)), line
        assert list(json.loads(line)) == list(AccessRecord.__struct_fields__)


@pytest.mark.parametrize("to_file", [True, False])
def test_the_access_log_writes_up_to_64_kb_to_a_file_and_4_kb_to_a_pipe(tmp_path: Path, to_file: bool) -> None:
    code = "import sys; from chartgw.http.accesslog import stdout_write_bytes; print(stdout_write_bytes(), file=sys.stderr)"
    with (tmp_path / "out").open("wb") as out:
        done = subprocess.run([sys.executable, "-c", code], stdout=out if to_file else subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, check=True)
    assert int(done.stderr) == (64 * 1024 if to_file else 4096)


def test_the_access_log_flushes_a_quiet_batch_within_a_second(tmp_path: Path) -> None:
    import asyncio

    from chartgw.http.accesslog import AccessLog

    writes: list[bytes] = []

    async def quiet() -> None:
        log = AccessLog(write=writes.append, flush_seconds=0.05)
        log.record(b"id", None, "GET", "tiny", "/tiny/", 200, 1, 0.001, "app")
        assert writes == []
        await asyncio.sleep(0.2)

    asyncio.run(quiet())
    assert len(writes) == 1 and json.loads(writes[0])["route"] == "/tiny/"


@pytest.fixture
def served(korea_data: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`chartgw serve --access-log` over /korea-chart's data, in its own process on a free port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**child_env(DATA_DIR=str(korea_data), API_KEYS=TEST_KEY), "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen([sys.executable, "-m", "chartgw", "serve", "--access-log", "--port", str(port)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(base + "/korea-chart/", trust_env=False, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield server, base
    finally:
        server.terminate()
        server.wait(20)


def test_serve_access_log_is_json_lines_instead_of_uvicorns_text(served: tuple[subprocess.Popen[str], str]) -> None:
    server, base = served
    url = base + "/korea-chart/charts?site=portal-a&chart_type=realtime&limit=3"
    with httpx.Client(trust_env=False) as http:
        statuses = [http.get(url, headers=KEY_HEADERS).status_code for _ in range(3)]
        statuses.append(http.get(url).status_code)
    assert statuses == [200, 200, 200, 401]
    server.terminate()
    out, err = server.communicate(timeout=20)
    lines = [json.loads(line) for line in out.splitlines()]
    chart = [line for line in lines if line["route"] == "/korea-chart/charts"]
    assert [(line["status"], line["answered_by"]) for line in chart] == [
        (200, "app"), (200, "lane"), (200, "lane"), (401, "lane")]  # the lane stays on, and logs
    assert all(line["group"] == "korea-chart" and line["request_id"] for line in chart)
    assert [line["key_id"] for line in chart] == [env_key_id(TEST_KEY)] * 3 + [None]
    assert "HTTP/1.1" not in out + err  # no uvicorn text access line anywhere
