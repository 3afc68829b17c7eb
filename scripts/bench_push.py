"""Issue 28's figures for `chartgw deliver` (docs/hardening.md, "The push surface under hostile partners").

    .venv/bin/python scripts/bench_push.py fair|huge [REPO] [--smoke]

`fair`: key A's 8 hooks to a receiver that accepts and never answers, key B's 2 to a good one, 10 changes 1 s apart:
key B's commit-to-delivery median and max. `huge`: one hook to a receiver answering 200 with a 4 GiB body: the
worker's RSS and peak RSS 12 s after each of two changes. The worker is `python -m chartgw deliver` run from REPO
(default: this checkout; give an older tree to measure it), with CHARTGW_HOOKS_TIMEOUT_SECONDS=10; the data and
hooks are made with this checkout's code in a temporary folder, the receivers are sockets of this process.
`--smoke` (tests/test_bench.py): the same figures in seconds, with a hook timeout of 2 s, 3 changes 0.3 s apart for
`fair` and the RSS 2 s after each change for `huge`."""
from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
from chartgw.api.access import env_key_id  # noqa: E402
from chartgw.push.hooks import HookStore  # noqa: E402
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry  # noqa: E402

SMOKE = "--smoke" in sys.argv
args = [arg for arg in sys.argv[1:] if arg != "--smoke"]
what = args[0]
repo = Path(args[1]) if len(args) > 1 else HERE
CHANGES, APART, SETTLE, HOOK_TIMEOUT = (3, 0.3, 2, "2") if SMOKE else (10, 1.0, 12, "10")
data = Path(tempfile.mkdtemp()) / "data"
data.mkdir()
KEY_A, KEY_B = "partner-a-key-0123456789", "partner-b-key-0123456789"
NOW = datetime.now(UTC)


def commit(n: int) -> None:
    when = NOW + timedelta(minutes=n)
    entries = [StoredEntry(r, f"song {n}-{r}", "a", None, json.dumps({"t": n}).encode()) for r in range(1, 11)]
    with SnapshotWriter(data / "korea-chart.sqlite", now=lambda: when) as w:
        w.commit([NewSnapshot("portal-a/realtime", when.date().isoformat(), when.hour, when, "m", entries)],
                 FetchLogRow("portal-a/realtime", when, 0, "ok"))


arrivals: dict[int, float] = {}


class Good(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        arrivals.setdefault(json.loads(body)["data"]["id"], time.monotonic())
        self.send_response(204)
        self.end_headers()

    def log_message(self, *a: object) -> None:
        pass


held: list[socket.socket] = []


def hang_or_flood(flood: bool) -> str:
    s = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            c, _ = s.accept()
            held.append(c)
            if flood:
                threading.Thread(target=pour, args=(c,), daemon=True).start()

    def pour(c: socket.socket) -> None:
        h = b""
        while b"\r\n\r\n" not in h:
            h += c.recv(65536)
        mb = b"x" * (1 << 20)
        try:
            c.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % (4 << 30))
            for _ in range(4 << 10):
                c.sendall(mb)
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{s.getsockname()[1]}/hook"


commit(0)
store = HookStore(data / "hooks.sqlite")
groups = ["korea-chart"]
good = ThreadingHTTPServer(("127.0.0.1", 0), Good)
threading.Thread(target=good.serve_forever, daemon=True).start()
# each hook starts after the change already there (its file reads the group file beside it)
if what == "fair":
    bad = hang_or_flood(False)
    for _ in range(8):
        store.create(env_key_id(KEY_A), bad, groups, [], groups, NOW)
    for _ in range(2):
        store.create(env_key_id(KEY_B), f"http://127.0.0.1:{good.server_port}/hook", groups, [], groups, NOW)
else:
    store.create(env_key_id(KEY_A), hang_or_flood(True), groups, [], groups, NOW)
env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTGW_")}
env.update(CHARTGW_DATA_DIR=str(data), CHARTGW_HOOKS_HTTP_HOSTS="127.0.0.1", CHARTGW_HOOKS_PRIVATE_ADDRESSES="allow",
           CHARTGW_API_KEYS=f"{KEY_A},{KEY_B}", CHARTGW_HOOKS_TIMEOUT_SECONDS=HOOK_TIMEOUT, PYTHONPATH=str(repo))
proc = subprocess.Popen([sys.executable, "-m", "chartgw", "deliver"], cwd=repo, env=env, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
time.sleep(1 if SMOKE else 2)


def rss() -> tuple[float, float]:
    f = dict(line.split(":", 1) for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines() if ":" in line)
    return int(f["VmRSS"].split()[0]) / 1024, int(f["VmHWM"].split()[0]) / 1024


try:
    if what == "fair":
        committed = {}
        for n in range(1, CHANGES + 1):
            commit(n)
            with sqlite3.connect(data / "korea-chart.sqlite") as db:
                committed[db.execute("SELECT max(id) FROM changes").fetchone()[0]] = time.monotonic()
            time.sleep(APART)
        deadline = time.monotonic() + 60
        while not set(committed) <= set(arrivals) and time.monotonic() < deadline:
            time.sleep(0.1)
        lat = sorted(arrivals[c] - t for c, t in committed.items() if c in arrivals)
        print(f"key B: {len(lat)}/{len(committed)} delivered; median {statistics.median(lat):.1f} s, max {lat[-1]:.1f} s"
              if lat else "key B: none delivered in 60 s")
    else:
        before = rss()
        commit(1)
        time.sleep(SETTLE)
        print(f"worker RSS before {before[0]:.0f} MB; {SETTLE} s after one change: RSS {rss()[0]:.0f} MB, "
              f"peak {rss()[1]:.0f} MB")
        commit(2)
        time.sleep(SETTLE)
        print(f"after a second change: RSS {rss()[0]:.0f} MB, peak {rss()[1]:.0f} MB")
finally:
    proc.kill()
    proc.wait()
    shutil.rmtree(data.parent, ignore_errors=True)
