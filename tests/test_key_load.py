"""Issue 28's hostile keys against real `chartgw serve` processes over every group's demo data, at the issue's
numbers: 200 change streams from the first change that never read (memory bounded, a keyed probe answered),
1,000 slow bodies and 1,000 long polls of key A (key B still served, a long poll a few KB and no thread),
200 concurrent requests on a cold server (one SQLite connection per file), and SIGTERM with streams and long
polls open (the process exits, the long polls answered).

Every assertion is a count or a generous ceiling; the figures are printed (`-s`) and written down in
docs/hardening.md. The clients are raw asyncio sockets in this process, two keys of the server's key file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chartgw.api.access import KeyLoad, KeyStore
from chartgw.store import connect
from tests.fixtures import child_env, copy_data
from tests.tiers import wait_for_port

pytestmark = pytest.mark.waits

REPO = Path(__file__).resolve().parents[1]
MANY = 1000


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    key_a: str
    key_b: str
    files: int
    """Group files in the data folder (each may be open once, with its -wal and -shm)."""
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def sqlite_descriptors(self) -> int:
        found = 0
        for fd in os.listdir(f"/proc/{self.pid}/fd"):
            try:
                target = os.readlink(f"/proc/{self.pid}/fd/{fd}")
            except OSError:
                continue  # closed meanwhile
            found += ".sqlite" in target and "keys.sqlite" not in target
        return found

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/task"))


@pytest.fixture
def start(all_groups_data: Path, tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Starts `chartgw serve` over a copy of every group's data with two keys (A and B) of the key file."""
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the server's RSS and descriptors from /proc (Linux only)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = 2 * MANY + 500
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"needs {needed} open files (client and server sockets); the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, needed), hard))  # the server inherits it
    started: list[subprocess.Popen[bytes]] = []

    def run(**settings: str) -> Server:
        data = copy_data(all_groups_data, tmp_path / f"data{len(started)}")
        store = KeyStore(data / "keys.sqlite")
        _, key_a = store.create("partner-a", rate_per_minute=0)
        _, key_b = store.create("partner-b", rate_per_minute=0)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        env = child_env(DATA_DIR=str(data), API_KEYS="", RATE_LIMIT_PER_MINUTE="0", **settings)
        with (tmp_path / f"serve{len(started)}.log").open("wb") as log:  # what the server said, should a test fail
            proc = subprocess.Popen([sys.executable, "-m", "chartgw", "serve", "--port", str(port)], env=env, cwd=REPO,
                                    stdout=log, stderr=subprocess.STDOUT)
        started.append(proc)
        wait_for_port(port, 60, proc)
        return Server(proc, port, key_a, key_b, len(list(data.glob("*.sqlite"))) - 1,  # less keys.sqlite
                      tmp_path / f"serve{len(started) - 1}.log")

    yield run
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def get(path: str, key: str, close: bool = True) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: gw\r\nX-API-Key: {key}\r\n" + ("Connection: close\r\n" if close else "")
            + "\r\n").encode()


async def status_of(port: int, head: bytes, timeout: float = 300) -> int:
    """The status of the answer to `head` on a new connection (0: none within `timeout`, or the connection reset).
    Concurrent requests progress together on the server's loop, so on a loaded box they all end late together:
    the time is generous."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head)
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
        return int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else 0
    except (TimeoutError, ConnectionError):
        return 0
    finally:
        writer.close()


async def hold(port: int, heads: list[bytes]) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """A connection per head, each head sent and nothing read, opened a hundred at a time as clients arrive."""
    held = []
    for start in range(0, len(heads), 100):
        opened = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in heads[start:start + 100]))
        for (reader, writer), head in zip(opened, heads[start:start + 100], strict=True):
            writer.write(head)
            held.append((reader, writer))
        await asyncio.sleep(0.05)
    return held


def close_all(held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
    for _, writer in held:
        writer.close()


def summary_bytes(data: Path) -> int:
    """What every change record of the data holds in summaries: what a stream from the first change sends."""
    total = 0
    for path in data.glob("*.sqlite"):
        with contextlib.closing(connect(path, readonly=True)) as db, contextlib.suppress(sqlite3.OperationalError):
            total += db.execute("SELECT coalesce(sum(length(summary)), 0) FROM changes").fetchone()[0]  # else no feed
    return total


def test_200_unread_streams_from_the_first_change_hold_a_page_each_and_a_probe_is_answered(
        start: Callable[..., Server], all_groups_data: Path) -> None:
    """Issue 28 item 5: each stream read its catch-up 500 changes of every group at a time (5 GB for 200 streams
    that never read). It now reads a page of a few changes once the previous one is sent."""
    history = summary_bytes(all_groups_data)
    assert history > 1_000_000, "the data's history is large enough that holding it per stream would show"
    server = start()
    report: dict[str, float] = {}

    async def scenario() -> None:
        # Warm: every file's connection open, the feed's code loaded, its polling run once.
        assert await status_of(server.port, get("/changes?limit=1000", server.key_b)) == 200
        assert await status_of(server.port, get("/changes?since=now&wait=1", server.key_b)) == 200
        before = server.rss_mb()
        held = await hold(server.port, [get("/changes/stream", server.key_a, close=False)] * 200)
        await asyncio.sleep(5)
        report["before"], report["after"] = before, server.rss_mb()
        began = time.monotonic()
        probe = await status_of(server.port, get("/changes?limit=1", server.key_b))
        report["probe_seconds"] = time.monotonic() - began
        assert probe == 200, "a keyed probe is answered while the streams wait"
        # Each stream did send: the first of them has its events waiting, in order, from the first change.
        reader, _ = held[0]
        first = await asyncio.wait_for(reader.read(1 << 16), 30)
        assert first.startswith(b"HTTP/1.1 200 ") and b"event: change" in first, first[:300]
        close_all(held)

    asyncio.run(scenario())
    cost = report["after"] - report["before"]
    print(f"\n200 unread streams from the first change (history {history / 1e6:.1f} MB of summaries): RSS "
          f"{report['before']:.0f} -> {report['after']:.0f} MB ({cost * 1024 / 200:.0f} KB a stream); a keyed probe "
          f"in {report['probe_seconds']:.2f} s")
    assert cost < 100, report  # was 3.8 GB; a page and a socket's buffer each is under 20 MB


def test_one_keys_slow_bodies_and_long_polls_leave_another_key_served(start: Callable[..., Server]) -> None:
    """Issue 28 item 8: key A's 1,000 slow POST /hooks bodies made key B's GETs 503, and its 1,000 long polls
    made B's long poll 503. Each key now holds at most CHARTGW_REQUESTS_IN_PROGRESS_PER_KEY requests and
    CHARTGW_CHANGES_WAITERS_PER_KEY long polls (a 429 past them)."""
    server = start(REQUEST_BODY_TIMEOUT_SECONDS="60", REQUESTS_IN_PROGRESS_PER_KEY="100",
                   CHANGES_WAITERS_PER_KEY="100")

    async def scenario() -> None:
        slow = (f"POST /hooks HTTP/1.1\r\nHost: gw\r\nX-API-Key: {server.key_a}\r\nContent-Type: application/json\r\n"
                "Content-Length: 100\r\n\r\n{").encode()
        bodies = await hold(server.port, [slow] * MANY)
        await asyncio.sleep(2)
        probes = Counter(await asyncio.gather(*(status_of(server.port, get(p, server.key_b)) for p in
                                                ["/changes?limit=1", "/korea-chart/health"] * 10)))
        assert probes == Counter({200: 20}), probes
        # Read together: the refused answer at once, the 100 still sending their bodies time out side by side.
        refused = sum(s == 429 for s in await asyncio.gather(*(_answered(reader, 5) for reader, _ in bodies[:MANY])))
        assert refused >= MANY - 100, f"past its cap key A's bodies are refused at once ({refused} were)"
        close_all(bodies)
        await asyncio.sleep(1)
        polls = await hold(server.port, [get("/changes?since=now&wait=60", server.key_a)] * MANY)
        await asyncio.sleep(2)
        assert await status_of(server.port, get("/changes?since=now&wait=1", server.key_b)) == 200
        assert await status_of(server.port, get("/korea-chart/health", server.key_b)) == 200
        answered = Counter(await asyncio.gather(*(_answered(reader, 2) for reader, _ in polls)))
        assert answered[429] >= MANY - 100 and answered[0] <= 100, answered  # 100 still waiting, the rest refused
        close_all(polls)

    asyncio.run(scenario())


async def _answered(reader: asyncio.StreamReader, timeout: float = 10) -> int:
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
    except (TimeoutError, ConnectionError):
        return 0
    return int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else 0


def test_a_thousand_waiting_long_polls_cost_a_few_kb_each_and_no_thread(start: Callable[..., Server]) -> None:
    """A long poll waits on the hub's asyncio event: 1,000 of them (one key, its cap lifted) on a cold server add
    no thread and tens of MB in all (issue 28: 56 -> 1,571 MB, a reader connection and its thread each)."""
    server = start(REQUESTS_IN_PROGRESS_PER_KEY="0", CHANGES_WAITERS_PER_KEY="0", CHANGES_MAX_WAITERS=str(2 * MANY))
    report: dict[str, float] = {}

    async def scenario() -> None:
        before, threads = server.rss_mb(), server.threads()
        polls = await hold(server.port, [get("/changes?since=now&wait=60", server.key_a)] * MANY)
        await asyncio.sleep(5)
        report["before"], report["after"] = before, server.rss_mb()
        report["threads_before"], report["threads"] = threads, server.threads()
        assert await status_of(server.port, get("/changes?since=now&wait=1", server.key_b)) == 200
        close_all(polls)

    asyncio.run(scenario())
    print(f"\n{MANY} long polls on a cold server: RSS {report['before']:.0f} -> {report['after']:.0f} MB, threads "
          f"{report['threads_before']:.0f} -> {report['threads']:.0f} ({server.files} group files)")
    assert report["threads"] <= report["threads_before"] + server.files + 8, report  # a reader thread a file at most
    assert report["after"] - report["before"] < 100, report  # the files' connections opened, and a few KB a poll


def test_200_cold_concurrent_requests_open_one_connection_per_file_and_sigterm_ends_the_process(
        start: Callable[..., Server]) -> None:
    """Issue 28 item 9: 200 simultaneous requests on a fresh server opened a reader connection each (282
    descriptors) and their threads kept the process alive after SIGTERM. The reader opens once, under a lock."""
    server = start()

    async def scenario() -> Counter[int]:
        heads = [get("/changes?limit=1", key) for key in (server.key_a, server.key_b)] * 100  # each key within its cap
        return Counter(await asyncio.gather(*(status_of(server.port, head) for head in heads)))

    answered = asyncio.run(scenario())
    assert answered == Counter({200: 200}), (answered, server.proc.poll(), server.log.read_text()[-3000:])
    descriptors = server.sqlite_descriptors()
    print(f"\n200 cold concurrent requests: {descriptors} SQLite descriptors open ({server.files} group files)")
    assert descriptors <= 3 * server.files, descriptors  # the file, its -wal and -shm, once each
    began = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(30) == 0  # raises TimeoutExpired when it does not exit
    print(f"exited {time.monotonic() - began:.1f} s after SIGTERM")


def test_sigterm_with_streams_and_long_polls_open_exits_and_answers_the_long_polls(start: Callable[..., Server]) -> None:
    """uvicorn's graceful shutdown waited for every long poll (up to a minute) and for ever for streams. The hub
    now stops at SIGTERM: long polls answer with what they have, streams end, and the process exits."""
    server = start()

    async def scenario() -> tuple[Counter[int], float]:
        streams = await hold(server.port, [get("/changes/stream?since=now", server.key_a, close=False)] * 50)
        polls = await hold(server.port, [get("/changes?since=now&wait=60", server.key_b)] * 50)
        await asyncio.sleep(3)
        began = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        answered = Counter(await asyncio.gather(*(_answered(reader, 30) for reader, _ in polls)))
        await asyncio.to_thread(server.proc.wait, 30)  # raises TimeoutExpired when it does not exit
        took = time.monotonic() - began
        ended = [await asyncio.wait_for(reader.read(), 30) for reader, _ in streams]
        assert all(b": chartgw changes" in body for body in ended), "every stream was open, and ended"
        close_all(streams + polls)
        return answered, took

    answered, took = asyncio.run(scenario())
    print(f"\nSIGTERM with 50 streams and 50 long polls open: exited in {took:.1f} s; long polls {dict(answered)}")
    assert answered == Counter({200: 50}), answered
    assert server.proc.returncode == 0
    assert took < 20, took  # measured about 1 s; a minute (long polls) or never (streams) before


def test_a_keys_load_is_counted_per_kind_and_a_parked_request_leaves_its_requests() -> None:
    """The accounting the middleware and the hub share: a cap per key and kind (0: none), a parked long poll or
    stream counted as such and not among the key's requests in progress, another key never touched."""
    load = KeyLoad({KeyLoad.REQUESTS: 2, KeyLoad.WAITERS: 1, KeyLoad.STREAMS: 0})
    assert load.take(1, KeyLoad.REQUESTS) and load.take(1, KeyLoad.REQUESTS)
    assert not load.take(1, KeyLoad.REQUESTS) and load.take(2, KeyLoad.REQUESTS)  # key 1 full, key 2 not
    assert load.park(1, KeyLoad.WAITERS)  # one of key 1's requests becomes a long poll: a request slot frees
    assert load.held(1, KeyLoad.REQUESTS) == 1 and load.take(1, KeyLoad.REQUESTS)
    assert not load.park(1, KeyLoad.WAITERS) and load.held(1, KeyLoad.REQUESTS) == 2  # refused: nothing moved
    load.give(1, KeyLoad.REQUESTS)  # the refused one answered (429)
    for _ in range(50):  # streams arrive one by one (each a request the middleware let in), no cap of them
        assert load.take(1, KeyLoad.REQUESTS) and load.park(1, KeyLoad.STREAMS)
    assert load.held(1, KeyLoad.REQUESTS) == 1 and load.held(1, KeyLoad.STREAMS) == 50
    for kind, n in ((KeyLoad.STREAMS, 50), (KeyLoad.WAITERS, 1)):
        for _ in range(n):
            load.unpark(1, kind)  # a request in progress again, past the cap (it is finishing)...
            load.give(1, KeyLoad.REQUESTS)  # ...until the middleware lets it go
    assert load.held(1, KeyLoad.REQUESTS) == 1
    load.give(1, KeyLoad.REQUESTS)
    load.give(2, KeyLoad.REQUESTS)
    assert load._held == {}  # an idle key costs nothing
