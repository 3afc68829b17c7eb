"""`chartgw serve` (granian's RSGI, chartgw/http/rsgi.py) as it runs with no proxy in front, as a real process on
127.0.0.1 over /digital-sales' demo data, attacked as issue 19 attacked it: many small heads pipelined at once are
all answered, 1,000 slow bodies and 1,000 slow heads leave keyed requests answered at once and are cut off once
their time is up, and no key reaches the access log. The single limits (URL and head caps, head and body
timeouts, malformed requests, unread answers) are tried one by one in tests/test_rsgi.py.

The timeouts are shortened (a few seconds) so the suite stays fast; the properties do not depend on them."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chartgw.http.limits import MAX_HEAD_BYTES
from tests.fixtures import TEST_KEY, child_env, group_data
from tests.tiers import wait_for_port

pytestmark = pytest.mark.waits

REPO = Path(__file__).resolve().parents[1]
PROBE = "/digital-sales/top-songs/us/latest?limit=3"
"""A small keyed answer: repeated it is the fast lane's, with a query of its own each time the app's."""
BIG = "/digital-sales/pull.json"
"""The largest answer of the demo data (about 4 MB)."""
HEAD_TIMEOUT = BODY_TIMEOUT = SEND_TIMEOUT = 3.0
LATE = 10.0
"""How late past a timeout the server may act on a loaded machine (a CPU hog on every core): a ceiling, not a figure."""
MIN_PROBES = 10
"""Keyed requests that must have run while an attack was on for its test to say anything."""
SLOW_BODY = b"GET /streaming/latest HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\na"
SLOW_HEAD = b"GET /streaming/latest HTTP/1.1\r\nHost: x\r\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def chartgw_serve(data: Path, *args: str, output: Path | None = None, **settings: str) -> Iterator[subprocess.Popen[bytes]]:
    """`chartgw serve *args` as a process over data folder `data`, accepting TEST_KEY, with the tests' settings
    and `settings` (`REQUEST_BODY_TIMEOUT_SECONDS="3"`), never the caller's CHARTGW_* environment; its
    output goes to `output`. Yields the process once its port answers; the port is `process.args[-1]`."""
    port = _free_port()
    env = child_env(**{"DATA_DIR": str(data), "API_KEYS": TEST_KEY, "RATE_LIMIT_PER_MINUTE": "0", **settings})
    sink = output.open("wb") if output is not None else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-m", "chartgw", "serve", *args, "--port", str(port)], env=env, cwd=REPO,
                            stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, 30, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:  # a test failed with connections left open: do not wait for them
            proc.kill()
            proc.wait(10)
        if output is not None:
            sink.close()  # type: ignore[union-attr]  # the file opened above


def _port(proc: subprocess.Popen[bytes]) -> int:
    return int(proc.args[-1])  # type: ignore[index, arg-type]  # the argument list given above


@pytest.fixture(scope="module")
def edge_data(tmp_path_factory: pytest.TempPathFactory, all_groups_data: Path) -> Path:
    data = group_data(all_groups_data, tmp_path_factory.mktemp("edge"), "digital-sales")
    for name in ("keys.sqlite", "server-secret"):  # key files left readable by anyone, as issue 19 found one
        (data / name).write_bytes(b"" if name == "keys.sqlite" else os.urandom(32))
        (data / name).chmod(0o644)
    return data


@pytest.fixture(scope="module")
def server(edge_data: Path) -> Iterator[int]:
    """The server under attack, with --limit-concurrency 100 (issue 19: 99 slow connections held it)."""
    with chartgw_serve(edge_data, "--limit-concurrency", "100", REQUEST_HEAD_TIMEOUT_SECONDS=str(HEAD_TIMEOUT),
                       REQUEST_BODY_TIMEOUT_SECONDS=str(BODY_TIMEOUT), SEND_TIMEOUT_SECONDS=str(SEND_TIMEOUT)) as proc:
        port = _port(proc)
        for path in (PROBE, PROBE, BIG):  # cached, so repeats are the lane's
            assert _ask(port, path).startswith(b"HTTP/1.1 200 ")
        yield port


def _exchange(port: int, data: bytes, wait: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # refused before it was all sent
            s.sendall(data)
        return _read_all(s)


def _read_all(s: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = s.recv(1 << 20)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _read_answer(s: socket.socket) -> bytes:
    """One answer with a Content-Length, read from a keep-alive connection."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += s.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")).split(b":")[1])
    while len(body) < length:
        body += s.recv(65536)
    return head + b"\r\n\r\n" + body


def _request(path: str, *headers: str, close: bool = True) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: x", f"X-API-Key: {TEST_KEY}", *headers]
    return ("\r\n".join([*lines, *(["Connection: close"] if close else []), "", ""])).encode()


def _ask(port: int, path: str) -> bytes:
    return _exchange(port, _request(path))


class Prober:
    """Keyed requests while an attack is on, each timed: alternately a cached repeat on one keep-alive
    connection (the fast lane) and a fresh query on a new connection (the app, and a new connection's
    accept)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.kept = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.times: list[float] = []
        self.statuses: list[bytes] = []

    def probe(self, n: int) -> None:
        started = time.perf_counter()
        if n % 2:
            answer = _ask(self.port, f"{PROBE}&n={n}")
        else:
            self.kept.sendall(_request(PROBE, close=False))
            answer = _read_answer(self.kept)
        self.times.append(time.perf_counter() - started)
        self.statuses.append(answer[:12])

    def p99(self) -> float:
        ordered = sorted(self.times)
        return ordered[max(0, int(len(ordered) * 0.99) - 1)]


def _open(port: int, count: int, first: bytes) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(first)
        sockets.append(s)
    return sockets


def _answered(sockets: list[socket.socket], status: bytes) -> None:
    """Waits until each socket has its answer's status line: the server has got to every one of them."""
    for s in sockets:
        assert s.recv(12) == status


def _closed(s: socket.socket) -> bool:
    """Whether the server has closed `s` (what it sent before is read and dropped)."""
    s.setblocking(False)
    try:
        while chunk := s.recv(1 << 20):
            del chunk
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def _trickle(sockets: list[socket.socket], data: bytes) -> None:
    for s in sockets:
        with contextlib.suppress(OSError):
            s.send(data)


# The caps and timeouts on a head.

def test_the_head_cap_counts_each_requests_head(server: int) -> None:
    """300 small pipelined GETs in one write (over 32 KB together) are all answered; a 70 KB header that
    arrives in the same read as the body before it is a 431 (granian's own, with no body)."""
    many = _request(PROBE, "Accept: application/json", close=False) * 299 + _request(PROBE)
    assert len(many) > MAX_HEAD_BYTES
    answers = _exchange(server, many, wait=20)
    assert answers.count(b"HTTP/1.1 200 OK\r\n") == 300 and b"HTTP/1.1 4" not in answers
    with_body = b"POST /korea-chart/refresh HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789"
    big_head = b"GET /korea-chart/ HTTP/1.1\r\nHost: x\r\nX-Junk: " + b"j" * 70_000 + b"\r\n\r\n"
    answers = _exchange(server, with_body + big_head)
    assert b"HTTP/1.1 431" in answers


def test_an_ordinary_request_still_answers(server: int) -> None:
    answer = _ask(server, PROBE)
    assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b"}")


# Issue 19's attacks, at its numbers.

def test_1000_slow_bodies_are_closed_in_time_and_keyed_requests_answered_meanwhile(server: int) -> None:
    """1,000 connections without a key send a head with `Content-Length: 1000000000`, then a byte now and
    then. They are answered (401) and do not count against --limit-concurrency 100: keyed requests meanwhile
    (up to 200, while the slow bodies are open) are all 200, none waiting for the attack to be cut off (their
    p99 is printed: under 100 ms on an idle box; a figure to measure, not to assert). Each is closed within the
    body timeout."""
    slow = _open(server, 1000, SLOW_BODY)
    opened = time.monotonic()
    _answered(slow, b"HTTP/1.1 401")
    prober = Prober(server)
    next_trickle = time.monotonic()
    for n in range(200):
        if time.monotonic() - opened >= BODY_TIMEOUT - 0.5:  # only probes while the slow bodies are surely open
            break
        if time.monotonic() >= next_trickle:
            _trickle(slow, b"a")
            next_trickle += 0.5
        prober.probe(n)
    print(f"\n{len(prober.times)} keyed requests beside 1,000 slow bodies: p99 {prober.p99() * 1000:.0f} ms")
    assert len(prober.times) >= MIN_PROBES, "too few probes ran while the slow bodies were open"
    assert set(prober.statuses) == {b"HTTP/1.1 200"}
    assert max(prober.times) < BODY_TIMEOUT, sorted(prober.times)[-5:]  # none queued behind the attack
    while time.monotonic() - opened < BODY_TIMEOUT + LATE:
        _trickle(slow, b"a")
        time.sleep(0.5)
    assert sum(_closed(s) for s in slow) == 1000
    for s in slow:
        s.close()


def test_slow_heads_and_slow_bodies_together_keep_no_keyed_client_waiting(server: int) -> None:
    """1,000 slowloris heads and 1,000 slow bodies at once: every keyed request meanwhile is a 200, none waiting
    for the attack to be cut off (p99 printed: under 100 ms on an idle box, measured, not asserted); issue 19
    saw 9 of 14 probes get 503 from the heads alone."""
    heads = _open(server, 1000, SLOW_HEAD)
    bodies = _open(server, 1000, SLOW_BODY)
    opened = time.monotonic()
    _answered(bodies, b"HTTP/1.1 401")  # the connections are all in (heads before bodies): the attack is on
    prober = Prober(server)
    for n in range(200):
        if time.monotonic() - opened >= HEAD_TIMEOUT - 0.5:  # only probes while the attack is surely on
            break
        if n % 40 == 0:
            _trickle(heads, b"X-A: b\r\n")
            _trickle(bodies, b"a")
        prober.probe(n)
    print(f"\n{len(prober.times)} keyed requests beside 1,000 slow heads and bodies: p99 {prober.p99() * 1000:.0f} ms")
    assert len(prober.times) >= MIN_PROBES, "too few probes ran while the attack was on"
    assert set(prober.statuses) == {b"HTTP/1.1 200"}
    assert max(prober.times) < HEAD_TIMEOUT, sorted(prober.times)[-5:]  # none queued behind the attack
    time.sleep(max(0.0, max(HEAD_TIMEOUT, BODY_TIMEOUT) + LATE - (time.monotonic() - opened)))
    assert sum(_closed(s) for s in heads + bodies) == 2000
    for s in heads + bodies:
        s.close()


# Keys: never in a log, never in a readable file.

def test_serve_makes_the_key_files_owner_only(server: int, edge_data: Path) -> None:
    for name in ("keys.sqlite", "server-secret"):
        assert stat.S_IMODE((edge_data / name).stat().st_mode) == 0o600, name


def test_the_access_log_logs_lane_and_app_answers_alike_and_no_key(edge_data: Path, tmp_path: Path) -> None:
    """`--access-log` is the gateway's JSON log (docs/observability.md): the lane's answers are lines like the app's,
    and no line holds a key, wherever the client put it (the log has the route's template, never the URL)."""
    output = tmp_path / "serve.log"
    with chartgw_serve(edge_data, "--access-log", output=output) as proc:
        port = _port(proc)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for _ in range(3):  # the first built by the app, the repeats the lane's (a kept-alive connection)
            conn.request("GET", PROBE, headers={"X-API-Key": TEST_KEY})
            answer = conn.getresponse()
            assert answer.status == 200 and answer.read()
        conn.close()
        assert _ask(port, f"{PROBE}&api_key={TEST_KEY}").startswith(b"HTTP/1.1 200")
        assert _ask(port, f"{PROBE}&X-Api-Key={TEST_KEY}&x=cgw_secret123").startswith(b"HTTP/1.1 200")
        # The key twice: refused (issue 28: one rule for the app and the lane), and still not logged. The lane
        # answers a request that asks to close the connection too.
        assert _exchange(port, _request(PROBE, f"X-API-Key: {TEST_KEY}")).startswith(b"HTTP/1.1 400")
    log = output.read_text()  # written when the server stopped, at the latest
    assert TEST_KEY not in log and "cgw_secret123" not in log and "limit=3" not in log
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    probe = [line for line in lines if line["route"] == "/digital-sales/{combo}/{country}/latest"]
    assert [line["answered_by"] for line in probe] == ["app", "lane", "lane", "app", "app", "lane"], log
    volatile = {"time", "request_id", "duration_ms", "answered_by"}
    assert len({json.dumps({k: v for k, v in line.items() if k not in volatile}) for line in probe[:-1]}) == 1  # alike
    assert (probe[-1]["status"], probe[-1]["key_id"]) == (400, None)


def test_the_uvicorn_fallback_serves_the_same_app_and_stops_cleanly(edge_data: Path) -> None:
    """`--interface uvicorn`: the app through uvicorn's public ASGI interface, no lane: the same answers (a repeat is
    the app's, from its cache, with the same ETag), the same refusals, and a clean stop on SIGTERM."""
    with chartgw_serve(edge_data, "--interface", "uvicorn") as proc:
        port = _port(proc)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        answers = []
        for _ in range(2):
            conn.request("GET", PROBE, headers={"X-API-Key": TEST_KEY})
            answer = conn.getresponse()
            answers.append((answer.status, answer.getheader("etag"), answer.read()))
        assert answers[0] == answers[1] and answers[0][0] == 200 and answers[0][1]
        conn.request("GET", PROBE, headers={"X-API-Key": TEST_KEY, "If-None-Match": str(answers[0][1])})
        assert conn.getresponse().status == 304
        assert _ask(port, PROBE.replace("limit=3", "limit=x")).startswith(b"HTTP/1.1 422")
        assert _exchange(port, b"GET " + PROBE.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                         ).startswith(b"HTTP/1.1 401")
        conn.close()
        proc.terminate()
        assert proc.wait(10) == 0


def test_the_hardening_page_lists_every_limit_and_its_setting() -> None:
    from chartgw.core import config
    from chartgw.http import limits

    text = (REPO / "docs" / "hardening.md").read_text()
    for setting in (config.REQUEST_HEAD_TIMEOUT_SECONDS, config.REQUEST_BODY_TIMEOUT_SECONDS,
                    config.IDLE_TIMEOUT_SECONDS, config.SEND_TIMEOUT_SECONDS, config.RATE_LIMIT_PER_MINUTE,
                    config.REQUESTS_IN_PROGRESS_PER_KEY, config.CHANGES_WAITERS_PER_KEY, config.CHANGES_STREAMS_PER_KEY):
        row = next((line for line in text.splitlines() if line.startswith("|") and f"`{setting.variable}`" in line), "")
        assert setting.default in row, f"docs/hardening.md has no row of {setting.variable} with its default"
    for name, size in (("MAX_URL_BYTES", "8 KB"), ("MAX_HEAD_BYTES", "32 KB")):
        assert f"{size} (`{name}`" in text and getattr(limits, name) == int(size.split()[0]) * (1024 if "KB" in size else 1 << 20)
    assert "--limit-concurrency" in text and "(docs/hardening.md)" in (REPO / "README.md").read_text()
