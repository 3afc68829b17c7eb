"""`chartgw serve` (chartgw/http/rsgi.py): granian over the RSGI app, as a real process on 127.0.0.1
over /korea-chart's demo data. The lane's answers are compared with the app's (the first request of a URL is the
app's, its repeats the lane's: the access log says which answered each); the hostile-edge limits of
docs/hardening.md are tried one by one; SIGTERM with a long poll and a change stream open stops it cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import http.client
import http.server
import json
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette

from chartgw.cli import SHUTDOWN_GRACE_SECONDS
from chartgw.core.settings import Settings
from chartgw.http.limits import MAX_HEAD_BYTES, MAX_URL_BYTES
from chartgw.http.rsgi import Gateway, time_out_unread_answers
from chartgw.push.changes import ChangeHub
from tests.fixtures import TEST_KEY, copy_data, group_data, held_in_app
from tests.test_server import LATE, _exchange, _port, _read_all, chartgw_serve

pytestmark = pytest.mark.waits

PATH = "/korea-chart/portal-a/charts/realtime"
VOLATILE = {"date", "x-ratelimit-remaining", "x-ratelimit-reset", "x-request-id"}
HEAD_TIMEOUT = BODY_TIMEOUT = 3.0


@pytest.fixture(scope="module")
def rsgi_data(tmp_path_factory: pytest.TempPathFactory, korea_data: Path) -> Path:
    return copy_data(korea_data, tmp_path_factory.mktemp("rsgi") / "data")


@contextlib.contextmanager
def rsgi_serve(data: Path, *args: str, output: Path | None = None, **settings: str) -> Iterator[subprocess.Popen[bytes]]:
    timeouts = {"REQUEST_HEAD_TIMEOUT_SECONDS": str(HEAD_TIMEOUT), "REQUEST_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT)}
    with chartgw_serve(data, "--interface", "rsgi", *args, output=output, **{**timeouts, **settings}) as proc:
        yield proc


@pytest.fixture(scope="module")
def server(rsgi_data: Path) -> Iterator[int]:
    with rsgi_serve(rsgi_data) as proc:
        yield _port(proc)


class Answer:
    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.headers = [(k.lower(), v) for k, v in response.getheaders()]
        self.body = response.read()

    def stable(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.headers if k not in VOLATILE]

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)


def _get(conn: http.client.HTTPConnection, path: str, **headers: str) -> Answer:
    conn.request("GET", path, headers={"X-API-Key": TEST_KEY, **headers})
    return Answer(conn.getresponse())


KINDS: list[tuple[str, dict[str, str], str]] = [  # a request, and who answers it first
    (PATH, {}, "app"),
    (PATH + "?limit=3", {}, "app"),
    (PATH, {"Accept-Encoding": "gzip"}, "lane"),  # the body of PATH is cached: gzipped by the lane at once
    ("/korea-chart-api/portal-a/charts/realtime?limit=3", {}, "lane"),  # a legacy prefix of a cached URL
    (PATH + "?limit=5", {"Accept": "text/csv"}, "app"),
    (PATH + "?limit=5&format=ndjson", {}, "app"),
    (PATH + "?limit=4", {"Origin": "https://partner.example"}, "app"),
]


def test_every_repeat_is_the_lanes_answer_and_equals_the_apps(rsgi_data: Path, tmp_path: Path) -> None:
    """Each kind of request asked twice on a kept-alive connection: the first built by the app, the second
    answered by the lane, in the same status, headers (in order) and body; 304s and 401s alike. The access
    log (one JSON line per answer, the lane's too) says which answered each."""
    output = tmp_path / "serve.log"
    expected: list[str] = []
    with rsgi_serve(rsgi_data, "--access-log", output=output, CORS_ORIGINS="https://partner.example") as proc:
        conn = http.client.HTTPConnection("127.0.0.1", _port(proc), timeout=10)
        for path, headers, first in KINDS:
            by_app, by_lane = _get(conn, path, **headers), _get(conn, path, **headers)
            assert by_app.status == by_lane.status == 200, (path, headers, by_app.body[:200])
            assert by_app.stable() == by_lane.stable() and by_app.body == by_lane.body, (path, headers)
            assert [k for k, _ in by_app.headers] == [k for k, _ in by_lane.headers]
            assert by_lane.header("x-request-id")
            etag = by_lane.header("etag")
            assert etag
            # The conditional repeat: the lane's 304 (the app built this URL already, so it never sees it).
            again = _get(conn, path, **headers, **{"If-None-Match": etag})
            assert again.status == 304 and again.body == b"" and again.header("etag") == etag
            expected += [first, "lane", "lane"]
        assert gzip.decompress(_get(conn, PATH, **{"Accept-Encoding": "gzip"}).body) == _get(conn, PATH).body
        expected += ["lane", "lane"]
        assert _get(conn, PATH, **{"Origin": "https://partner.example"}).header("access-control-allow-origin") == \
            "https://partner.example"
        expected += ["lane"]
        # A key refused: the gate's 401, from the lane as from the app (the app answers the unknown URL).
        lane_401 = _get(conn, PATH, **{"X-API-Key": "not-a-key"})
        app_401 = _get(conn, PATH + "?limit=9", **{"X-API-Key": "not-a-key"})
        assert lane_401.status == app_401.status == 401 and lane_401.body == app_401.body
        assert lane_401.stable() == app_401.stable()
        expected += ["lane", "app"]
    lines = [json.loads(line) for line in output.read_text().splitlines() if line.startswith("{")]
    answered = [line["answered_by"] for line in lines if line["route"].startswith("/korea-chart/")]
    assert answered == expected, answered
    assert TEST_KEY not in output.read_text()


def test_a_percent_encoded_path_is_decoded_once(server: int) -> None:
    """granian gives RSGI a decoded path: the app routes on it as it is (an escaped "%" stays one "%")."""
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
    plain = _get(conn, PATH + "?limit=2")
    escaped = _get(conn, PATH.replace("realtime", "real%74ime") + "?limit=2")
    assert plain.status == escaped.status == 200 and plain.body == escaped.body
    twice = _get(conn, PATH.replace("realtime", "real%2574ime") + "?limit=2")  # the path "real%74ime": no such chart
    assert twice.status in (404, 422) and twice.body.startswith(b'{"detail":'), twice.body[:200]


def test_the_lane_counts_against_the_keys_rate_and_answers_its_429(rsgi_data: Path) -> None:
    with rsgi_serve(rsgi_data, RATE_LIMIT_PER_MINUTE="3") as proc:
        conn = http.client.HTTPConnection("127.0.0.1", _port(proc), timeout=10)
        answers = [_get(conn, PATH) for _ in range(4)]
    assert [a.status for a in answers] == [200, 200, 200, 429]
    assert [a.header("x-ratelimit-remaining") for a in answers[:3]] == ["2", "1", "0"]
    assert answers[3].header("retry-after") and answers[3].body.startswith(b'{"detail":')


def test_a_url_past_the_cap_is_a_json_414(server: int) -> None:
    answer = _exchange(server, b"GET /" + b"a" * (MAX_URL_BYTES + 10) + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 414") and answer.endswith(b'{"detail":"The request URL is too long"}')
    assert b"x-request-id: " in answer


def test_a_header_block_past_the_cap_is_refused_with_a_431_and_not_read_whole(server: int) -> None:
    """granian's own refusal (its buffer is MAX_HEAD_BYTES): a 431 with no body, the connection closed."""
    head = b"GET /korea-chart/ HTTP/1.1\r\nHost: x\r\nX-Junk: " + b"j" * (4 * MAX_HEAD_BYTES) + b"\r\n\r\n"
    assert _exchange(server, head).startswith(b"HTTP/1.1 431")


def test_a_trickling_request_head_is_cut_off(server: int) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=HEAD_TIMEOUT + LATE + 5) as s:
        s.sendall(b"GET /korea-chart/ HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        answer = _read_all(s)
        assert time.monotonic() - started < HEAD_TIMEOUT + LATE
        assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer[:100]


def test_an_idle_connection_is_closed_after_the_idle_timeout(rsgi_data: Path) -> None:
    """granian's one timer (a whole head from the previous answer) is the shorter of the head and idle timeouts."""
    with rsgi_serve(rsgi_data, IDLE_TIMEOUT_SECONDS="1", REQUEST_HEAD_TIMEOUT_SECONDS="60") as proc, \
            socket.create_connection(("127.0.0.1", _port(proc)), timeout=60) as s:
        s.sendall(b"GET /korea-chart/health HTTP/1.1\r\nHost: x\r\n\r\n")
        started = time.monotonic()
        answer = _read_all(s)
        assert answer.startswith(b"HTTP/1.1 200") and time.monotonic() - started < 1 + LATE


def test_a_body_that_does_not_arrive_in_time_is_a_json_408(server: int) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=BODY_TIMEOUT + LATE + 5) as s:
        s.sendall(b"POST /korea-chart/refresh?site=portal-a&chart_type=realtime HTTP/1.1\r\nHost: x\r\nX-API-Key: "
                  + TEST_KEY.encode() + b"\r\nContent-Length: 10\r\n\r\n01")
        started = time.monotonic()
        answer = _read_all(s)
    assert BODY_TIMEOUT - 0.5 < time.monotonic() - started < BODY_TIMEOUT + LATE
    assert answer.startswith(b"HTTP/1.1 408") and answer.endswith(b'{"detail":"The request body did not arrive within 3s"}')


def test_a_body_declared_past_the_limit_is_a_413_without_100_continue(server: int) -> None:
    head = ("POST /hooks HTTP/1.1\r\nHost: x\r\nX-API-Key: " + TEST_KEY + "\r\nContent-Type: application/json\r\n"
            "Expect: 100-continue\r\nContent-Length: %d\r\n\r\n")
    with socket.create_connection(("127.0.0.1", server), timeout=BODY_TIMEOUT + 5) as s:
        s.sendall((head % (10 * 1024 * 1024)).encode())
        answer = _read_all(s)
    assert answer.startswith(b"HTTP/1.1 413") and b"100 Continue" not in answer, answer[:200]


def test_a_malformed_request_is_a_400(server: int) -> None:
    for garbage in (b"NOT HTTP AT ALL\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n"):
        assert _exchange(server, garbage).startswith(b"HTTP/1.1 400"), garbage


def test_sigterm_answers_long_polls_ends_streams_and_exits(rsgi_data: Path) -> None:
    """SIGTERM with a long poll (wait=60) and a change stream open: the poll is answered and the stream ends
    (the change hub is stopped, as under uvicorn), so the worker stops by itself, before granian's kill."""
    with rsgi_serve(rsgi_data) as proc:
        port = _port(proc)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        cursor = json.loads(_get(conn, "/changes?since=now").body)["next"]
        results: dict[str, tuple[int, Any]] = {}

        def poll() -> None:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            answer = _get(c, f"/changes?since={cursor}&wait=60")
            results["poll"] = (answer.status, json.loads(answer.body)["count"])

        def stream() -> None:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/changes/stream?since=now", headers={"X-API-Key": TEST_KEY})
            response = c.getresponse()
            results["stream"] = (response.status, response.read())  # to its end

        threads = [threading.Thread(target=poll), threading.Thread(target=stream)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)  # both waiting in the app
        assert not results
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        for thread in threads:
            thread.join(SHUTDOWN_GRACE_SECONDS + LATE)
        assert results.get("poll") == (200, 0)
        status, body = results["stream"]
        assert status == 200 and body.startswith(b": chartgw changes")
        assert proc.wait(SHUTDOWN_GRACE_SECONDS + LATE) == 0
        assert time.monotonic() - started < SHUTDOWN_GRACE_SECONDS + LATE


def test_past_the_concurrency_limit_a_json_503_long_polls_not_counted(rsgi_data: Path) -> None:
    """--limit-concurrency counts requests in progress in the app, as under uvicorn: two long polls waiting leave
    a keyed GET answered; two POSTs whose bodies never come make the next request a JSON 503 (the lane's repeat
    and the app's alike), until the body timeout frees them."""
    with rsgi_serve(rsgi_data, "--limit-concurrency", "2") as proc:
        port = _port(proc)
        assert _get(http.client.HTTPConnection("127.0.0.1", port, timeout=10), PATH).status == 200  # cached: the lane's
        cursor = json.loads(_get(http.client.HTTPConnection("127.0.0.1", port, timeout=10), "/changes?since=now").body)["next"]
        opened = []
        for _ in range(2):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(f"GET /changes?since={cursor}&wait=20 HTTP/1.1\r\nHost: x\r\nX-API-Key: {TEST_KEY}\r\n\r\n".encode())
            opened.append(s)
        time.sleep(0.5)
        for path in (PATH, PATH + "?limit=7"):
            assert _get(http.client.HTTPConnection("127.0.0.1", port, timeout=10), path).status == 200
        opened += held_in_app(port)  # the app waits on their bodies
        time.sleep(0.5)
        for path in (PATH, PATH + "?limit=8"):
            refused = _get(http.client.HTTPConnection("127.0.0.1", port, timeout=10), path)
            assert refused.status == 503 and refused.header("content-type") == "application/json"
            assert json.loads(refused.body)["detail"].startswith("Service Unavailable") and refused.header("x-request-id")
        for s in opened[2:]:  # cut off at the body timeout: then answered again
            assert s.recv(65536).startswith(b"HTTP/1.1 408")
        assert _get(http.client.HTTPConnection("127.0.0.1", port, timeout=10), PATH).status == 200
        for s in opened:
            s.close()


def test_an_export_is_answered_from_its_file_whole_and_by_range(rsgi_data: Path, tmp_path: Path) -> None:
    """An export (a FileResponse) is handed to granian as its file (ASGI's pathsend), so it is read as the client
    takes it; a Range is the app's 206."""
    data = copy_data(rsgi_data, tmp_path / "data")
    with rsgi_serve(data, EXPORTS_INTERVAL_SECONDS="0") as proc:
        port = _port(proc)
        deadline = time.monotonic() + 30
        while not (listed := json.loads(_get(http.client.HTTPConnection("127.0.0.1", port, timeout=30),
                                             "/korea-chart/exports").body))["exports"]:
            assert time.monotonic() < deadline, listed
            time.sleep(0.2)
        export = listed["exports"][0]
        whole = _get(http.client.HTTPConnection("127.0.0.1", port, timeout=30), export["url"])
        assert whole.status == 200 and hashlib.sha256(whole.body).hexdigest() == export["sha256"]
        assert whole.header("content-length") == str(export["size"]) and whole.header("etag") == f'"{export["sha256"]}"'
        ranged = _get(http.client.HTTPConnection("127.0.0.1", port, timeout=30), export["url"], Range="bytes=0-15")
        assert ranged.status == 206 and ranged.body == b"SQLite format 3\x00"


def test_two_workers_answer_from_two_processes(rsgi_data: Path) -> None:
    with rsgi_serve(rsgi_data, "--workers", "2") as proc:
        port = _port(proc)
        for _ in range(20):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            assert _get(conn, PATH + "?limit=2").status == 200
            conn.close()
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True, text=True)
        assert len(children.stdout.split()) >= 2


def test_workers_stop_when_the_main_process_is_killed(rsgi_data: Path) -> None:
    """`kill -9` of granian's main process: its workers get SIGTERM from the kernel and stop, instead of serving on,
    orphaned, on the port (SO_REUSEPORT) beside the next server."""
    with rsgi_serve(rsgi_data, "--workers", "2") as proc:
        port = _port(proc)
        workers = [int(pid) for pid in subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True,
                                                      text=True).stdout.split()]
        assert len(workers) == 2
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 30  # a ceiling: ends as soon as both are gone
        while any(Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid) for pid in workers):
            assert time.monotonic() < deadline, f"workers {workers} outlived the main process"
            time.sleep(0.1)
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()


def _state(pid: int) -> str:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line
    return "zombie (gone)"


def _worker_rss_mb(proc: subprocess.Popen[bytes]) -> float:
    """The resident memory of the server's granian worker(s), the children of `proc`, in MB."""
    children = subprocess.run(["ps", "-o", "rss=", "--ppid", str(proc.pid)], capture_output=True, text=True).stdout
    return sum(int(kb) for kb in children.split()) / 1024


def _established_peers(port: int) -> set[int]:
    """The client ports of the connections the server's kernel holds established on `port` (/proc/net/tcp)."""
    peers = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as rows:
            for row in list(rows)[1:]:
                local, remote, state = row.split()[1:4]
                if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                    peers.add(int(remote.rsplit(":", 1)[1], 16))
    return peers


def test_unread_answers_cost_bounded_memory_and_are_dropped(tmp_path: Path, all_groups_data: Path) -> None:
    """300 keyed connections each pipeline 20 GETs of the 4 MB /digital-sales/pull.json and never read. granian
    copies what it is given into a channel without a bound, so answers given whole, or in slices, cost up to 4 MB
    each (720-770 MB here on an idle box): answered from a file (`chartgw.http.spill`), read as the client takes
    it, they stay within 250 MB together (147 MB more measured)."""
    data = group_data(all_groups_data, tmp_path, "digital-sales")
    big = "/digital-sales/pull.json"
    with rsgi_serve(data, SEND_TIMEOUT_SECONDS="3") as proc:
        port = _port(proc)
        bodies = []
        for _ in range(2):  # built by the app, then cached: the lane's from now on (both from one file)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            answer = _get(conn, big)
            assert answer.status == 200 and len(answer.body) > 4_000_000
            assert answer.header("content-length") == str(len(answer.body))
            bodies.append(answer.body)
        assert bodies[0] == bodies[1]
        zipped = _get(http.client.HTTPConnection("127.0.0.1", port, timeout=30), big, **{"Accept-Encoding": "gzip"})
        assert zipped.header("content-encoding") == "gzip" and gzip.decompress(zipped.body) == bodies[0]
        before = _worker_rss_mb(proc)
        sockets = []
        request = f"GET {big} HTTP/1.1\r\nHost: x\r\nX-API-Key: {TEST_KEY}\r\n\r\n".encode()
        try:
            for _ in range(300):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.connect(("127.0.0.1", port))
                s.sendall(request * 20)
                sockets.append(s)
            opened, peak = time.monotonic(), before
            while time.monotonic() - opened < 3:
                peak = max(peak, _worker_rss_mb(proc))
                time.sleep(0.1)
            assert peak - before < 250, f"{before:.0f} MB before, {peak:.0f} MB with 300 unread connections"
            # Then each is dropped once its answer has gone unread for the send timeout: the server's kernel ends it
            # (TCP_USER_TIMEOUT, set by the worker on its listening socket), and granian frees what it held. The
            # client, which sends nothing, is not told until it does: the server's side is what is counted.
            mine = {s.getsockname()[1] for s in sockets}
            held = mine
            while held and time.monotonic() - opened < 60:  # a ceiling: ends when all are dropped
                time.sleep(0.5)
                held = mine & _established_peers(port)
            print(f"\nunread connections: {300 - len(held)} dropped after {time.monotonic() - opened:.1f} s")
            assert not held, f"{len(held)} of 300 unread connections still open on the server's side"
        finally:
            for s in sockets:
                s.close()
        assert _get(http.client.HTTPConnection("127.0.0.1", port, timeout=30), "/digital-sales/top-songs/us/latest?limit=3"
                    ).status == 200


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="TCP_USER_TIMEOUT is Linux's")
def test_the_send_timeout_is_set_on_listening_sockets_only() -> None:
    """`time_out_unread_answers` sets the kernel's send timeout on the process's listening TCP sockets (the
    connections granian accepts inherit it) and leaves every other socket alone."""
    listening, other = socket.socket(), socket.socket()
    try:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        assert time_out_unread_answers(2.5) >= 1
        assert listening.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 2500
        assert other.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 0
        accepted = socket.create_connection(listening.getsockname())
        served, _ = listening.accept()
        with accepted, served:
            assert served.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 2500
    finally:
        listening.close()
        other.close()


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="TCP_USER_TIMEOUT is Linux's")
@pytest.mark.parametrize("lifespan", [True, False])
def test_the_gateway_runs_the_apps_lifespan_unless_told_not_to(lifespan: bool) -> None:
    """`Gateway(app, lifespan=False)` (for an app whose lifespan its caller runs, or granian's embedded server, whose
    loop is already running) runs neither start-up nor shutdown and installs no signal handler; the kernel's send
    timeout is set on the listening sockets either way."""
    ran: list[str] = []

    @contextlib.asynccontextmanager
    async def life(app: Starlette) -> Any:
        ran.append("start-up")
        yield
        ran.append("shutdown")

    app = Starlette(lifespan=life)
    app.state.change_hub = ChangeHub({}, settings=Settings())  # what the signal handlers would stop
    gateway = Gateway(app, lifespan=lifespan)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    loop = asyncio.new_event_loop()
    listening = socket.socket()
    try:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        gateway.__rsgi_init__(loop)
        installed = {sig: signal.getsignal(sig) for sig in handlers}
        loop.run_until_complete(asyncio.sleep(0))  # the loop's first turn: the send timeout is set
        timeout = listening.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
        gateway.__rsgi_del__(loop)
    finally:
        listening.close()
        loop.close()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert timeout == round(gateway.send_timeout * 1000)
    assert ran == (["start-up", "shutdown"] if lifespan else [])
    assert (installed != handlers) is lifespan


def test_a_body_cut_short_is_not_acted_on(rsgi_data: Path, tmp_path: Path) -> None:
    """A keyed refresh POST declares 10 bytes, sends 2 and leaves. granian ends such a body as if it were whole, so
    the app would refresh (crawl) on it; the gateway tells the app the client left instead, and nothing is fetched.
    The same POST sent whole does crawl (the control), from a local stand-in for the upstream that counts requests."""
    hits: list[str] = []

    class Upstream(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's name
            hits.append(self.path)
            self.send_error(503)

        def log_message(self, *args: Any) -> None:
            pass

    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{upstream.server_address[1]}"
    post = (f"POST /korea-chart/refresh?site=portal-a&chart_type=realtime HTTP/1.1\r\nHost: x\r\nX-API-Key: {TEST_KEY}\r\n"
            "Content-Length: 10\r\n\r\n").encode()
    try:
        with rsgi_serve(copy_data(rsgi_data, tmp_path / "data"), UPSTREAM_MELON=origin, CRAWL_DELAY_SECONDS="0",
                        REFRESH_INTERVAL_SECONDS="0") as proc:
            port = _port(proc)
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(post + b"01")
                time.sleep(0.5)
            time.sleep(2)  # what a refresh would fetch, it would have fetched by now (a ceiling for the assertion)
            assert hits == []
            with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                s.sendall(post + b"0123456789")
                assert s.recv(65536).startswith(b"HTTP/1.1 ")
            assert hits, "the whole POST did not refresh: the control failed"
    finally:
        upstream.shutdown()
        upstream.server_close()
