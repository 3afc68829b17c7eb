"""1,000 idle change streams against a real `chartgw serve` process: what they cost in memory, and that a commit
reaches every one of them.

The server runs as `chartgw serve` does in production (its own process, uvicorn with the gateway's protocol) over a
copy of the korea-chart demo data. The clients are raw asyncio sockets in this process. The server's RSS is read
from /proc after one warm-up stream (the feed's code loaded, its polling running) and again with 1,000 streams open
and idle through two heartbeats; the difference is what the streams cost.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry
from tests.fixtures import FIXED_NOW, KEY_HEADERS, child_env, copy_data

pytestmark = pytest.mark.waits

REPO_ROOT = Path(__file__).resolve().parents[1]
STREAMS = 1000
BUDGET_MB = 100
HEARTBEAT_SECONDS = 2


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture
def gateway(korea_data: Path, tmp_path: Path) -> Iterator[tuple[str, int, Path]]:
    """`chartgw serve` over a copy of the korea-chart data: (base URL, server pid, data folder)."""
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the server's RSS from /proc (Linux only)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2 * STREAMS + 200:
        pytest.skip(f"needs {2 * STREAMS + 200} open files (client and server sockets); the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2 * STREAMS + 200), hard))  # the server inherits it
    data = copy_data(korea_data, tmp_path / "data")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**child_env(DATA_DIR=str(data), API_KEYS=KEY_HEADERS["X-API-Key"], RATE_LIMIT_PER_MINUTE="0",
                       CHANGES_HEARTBEAT_SECONDS=str(HEARTBEAT_SECONDS), CHANGES_STREAMS_PER_KEY=str(STREAMS)),
           "PYTHONPATH": str(REPO_ROOT)}  # one key opens every stream: its own cap raised to them all
    server = subprocess.Popen([sys.executable, "-m", "chartgw", "serve", "--port", str(port),
                               "--limit-concurrency", str(STREAMS + 100)],
                              env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
            try:
                if httpx.get(base + "/korea-chart/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        yield base, server.pid, data
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


class Stream:
    """One raw client of GET /changes/stream that reads what it is sent, counting heartbeats and events."""

    def __init__(self) -> None:
        self.pings = 0
        self.events = 0
        self.opened = asyncio.Event()
        self.heard: dict[int, asyncio.Event] = {}

    async def run(self, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET /changes/stream?since=now HTTP/1.1\r\nHost: gw\r\nX-API-Key: {KEY_HEADERS['X-API-Key']}\r\n\r\n"
                     .encode())
        try:
            while line := await reader.readline():
                if line.startswith(b": chartgw changes"):
                    self.opened.set()
                elif line.startswith(b": ping"):
                    self.pings += 1
                elif line.startswith(b"event: change"):
                    self.events += 1
                    self.heard.setdefault(self.events, asyncio.Event()).set()
        finally:
            writer.close()

    async def hear(self, n: int) -> None:
        await self.heard.setdefault(n, asyncio.Event()).wait()


def _commit_one(data: Path) -> None:
    snapshot = NewSnapshot("portal-a/realtime", FIXED_NOW.date().isoformat(), 23, FIXED_NOW + timedelta(hours=1),
                           "stream test", [StoredEntry(1, "only", "one", None, b'{"title":"only"}')])
    with SnapshotWriter(data / "korea-chart.sqlite", now=lambda: FIXED_NOW + timedelta(hours=1)) as writer:
        writer.commit([snapshot], FetchLogRow("portal-a/realtime", FIXED_NOW, 0, "ok"))


def test_a_thousand_idle_streams_cost_under_100_mb_and_all_hear_a_commit(gateway: tuple[str, int, Path]) -> None:
    base, pid, data = gateway
    port = int(base.rsplit(":", 1)[1])
    report: dict[str, float] = {}

    async def scenario() -> None:
        streams = [Stream() for _ in range(STREAMS)]
        tasks = [asyncio.create_task(streams[0].run(port))]
        await asyncio.wait_for(streams[0].opened.wait(), 30)
        await asyncio.sleep(HEARTBEAT_SECONDS + 1)
        before = _rss_kb(pid)
        began = time.monotonic()
        for start in range(1, STREAMS, 100):  # in batches, as clients arrive
            tasks += [asyncio.create_task(s.run(port)) for s in streams[start:start + 100]]
            await asyncio.wait_for(asyncio.gather(*(s.opened.wait() for s in streams[start:start + 100])), 120)
        report["open_seconds"] = time.monotonic() - began
        pings = [s.pings for s in streams]
        await asyncio.sleep(2 * HEARTBEAT_SECONDS + 1)  # idle: only heartbeats
        after = _rss_kb(pid)
        report["rss_before_mb"], report["rss_after_mb"] = before / 1024, after / 1024
        report["cost_mb"] = (after - before) / 1024
        assert all(s.pings > p for s, p in zip(streams, pings)), "every stream stays open and hears its heartbeats"
        began = time.monotonic()
        await asyncio.to_thread(_commit_one, data)
        await asyncio.wait_for(asyncio.gather(*(s.hear(1) for s in streams)), 60)
        report["commit_to_all_seconds"] = time.monotonic() - began
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(scenario())
    print(f"\n{STREAMS} idle streams: RSS {report['rss_before_mb']:.1f} MB -> {report['rss_after_mb']:.1f} MB, "
          f"cost {report['cost_mb']:.1f} MB ({report['cost_mb'] * 1024 / STREAMS:.1f} KB a stream); opened in "
          f"{report['open_seconds']:.1f} s; a commit reached all in {report['commit_to_all_seconds']:.2f} s")
    assert report["cost_mb"] < BUDGET_MB, report
