"""Hostile keys against a real `chartgw serve` (issue 28; figures in docs/hardening.md): the server's RSS, SQLite
descriptors and threads, and whether another key is served, while key A holds N unread change streams, long polls
or slow bodies; or N concurrent requests on a cold server; then, with --sigterm, how long SIGTERM takes.

    .venv/bin/python scripts/bench_keys.py --data DIR streams -n 200 --settle 8 --warm --sigterm

`--smoke` holds 5 and settles 1 s (the suite's run, tests/test_bench.py).

`--src` is the checkout whose code is served (default: this one; a9a0130's `git archive` for the before figures),
`--data` a data folder (`chartgw demo`'s), copied for each run with two new keys; `--env NAME=VALUE` sets the
server's settings. Linux only (/proc)."""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def sqlite_fds(pid: int) -> int:
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if ".sqlite" in os.readlink(f"/proc/{pid}/fd/{fd}"):
                n += 1
        except OSError:
            pass
    return n


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def start(src: Path, data: Path, extra_env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTGW_")}
    env.update({"CHARTGW_DATA_DIR": str(data), "CHARTGW_RATE_LIMIT_PER_MINUTE": "0", "PYTHONPATH": str(src), **extra_env})
    with (data / "serve.log").open("wb") as log:  # the child keeps its own descriptor
        server = subprocess.Popen([sys.executable, "-m", "chartgw", "serve", "--port", str(port)], env=env, cwd=src,
                                  stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            assert time.monotonic() < deadline and server.poll() is None, "did not start"
            time.sleep(0.2)
    return server, port


async def request(port: int, head: str, body: bytes = b"", timeout: float = 120) -> tuple[int, float]:
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head.encode() + body)
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
        status = int(line.split()[1]) if line else 0
    except (TimeoutError, IndexError, ValueError):
        status = -1
    writer.close()
    return status, time.monotonic() - began


def get(path: str, key: str) -> str:
    return f"GET {path} HTTP/1.1\r\nHost: gw\r\nX-API-Key: {key}\r\nConnection: close\r\n\r\n"


async def scenario(args: argparse.Namespace, pid: int, port: int, key_a: str, key_b: str,
                   server: subprocess.Popen[bytes]) -> None:
    held: list[asyncio.StreamWriter] = []
    print(f"start: RSS {rss_mb(pid):.0f} MB, sqlite fds {sqlite_fds(pid)}, threads {threads(pid)}")
    if args.what == "cold":
        results = await asyncio.gather(*(request(port, get("/changes?limit=1", (key_a, key_b)[i % 2]))  # within the caps
                                         for i in range(args.n)))
        codes: dict[int, int] = {}
        for status, _ in results:
            codes[status] = codes.get(status, 0) + 1
        await asyncio.sleep(1)
        print(f"after {args.n} concurrent cold GET /changes?limit=1: {codes}; RSS {rss_mb(pid):.0f} MB, sqlite fds "
              f"{sqlite_fds(pid)}, threads {threads(pid)}")
        if args.sigterm:
            await stop(server)
        return
    if args.warm:  # every file's connection open and its pages cached, the feed's code loaded
        for _ in range(3):
            await request(port, get("/changes?limit=1000", key_b))
        await request(port, get("/changes?since=now&wait=1", key_b))
        await asyncio.sleep(1)
    before = rss_mb(pid)
    if args.what in ("streams", "longpolls", "bodies", "mixed"):
        kinds = {"streams": ["stream"], "longpolls": ["poll"], "bodies": ["body"], "mixed": ["stream", "poll"]}[args.what]
        for i in range(args.n):
            kind = kinds[i % len(kinds)]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            if kind == "stream":
                writer.write(get(args.stream, key_a).encode())
            elif kind == "poll":
                writer.write(get("/changes?since=now&wait=60", key_a).encode())
            else:
                writer.write(f"POST /hooks HTTP/1.1\r\nHost: gw\r\nX-API-Key: {key_a}\r\nContent-Type: application/json\r\n"
                             f"Content-Length: 100\r\n\r\n{{".encode())
            held.append(writer)
            if i % 100 == 99:
                await asyncio.sleep(0.05)
        await asyncio.sleep(args.settle)
        after = rss_mb(pid)
        print(f"{args.n} x {args.what} of key A held: RSS {before:.0f} -> {after:.0f} MB "
              f"({(after - before) * 1024 / args.n:.1f} KB each), sqlite fds {sqlite_fds(pid)}, threads {threads(pid)}")
        probes = await asyncio.gather(*(request(port, get("/korea-chart/health" if i % 2 else "/changes?limit=1", key_b))
                                        for i in range(20)))
        print(f"key B's 20 GETs meanwhile: {[s for s, _ in probes]}; slowest {max(t for _, t in probes):.2f} s")
        status, took = await request(port, get("/changes?since=now&wait=1", key_b))
        print(f"key B's long poll meanwhile: {status} in {took:.2f} s")
        status, took = await request(port, get("/changes?limit=1", key_b))
        print(f"key B's keyed probe: {status} in {took:.2f} s; RSS now {rss_mb(pid):.0f} MB")
    if args.sigterm:
        await stop(server)
    for writer in held:
        writer.close()


async def stop(server: subprocess.Popen[bytes]) -> None:
    began = time.monotonic()
    server.send_signal(signal.SIGTERM)
    try:
        await asyncio.to_thread(server.wait, 60)
        print(f"SIGTERM -> exit {server.returncode} in {time.monotonic() - began:.1f} s")
    except subprocess.TimeoutExpired:
        print("SIGTERM: still running after 60 s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("what", choices=["cold", "streams", "longpolls", "bodies", "mixed", "none"])
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("--settle", type=float, default=5)
    parser.add_argument("--sigterm", action="store_true")
    parser.add_argument("--warm", action="store_true", help="read the feed first (connections open, code loaded)")
    parser.add_argument("--stream", default="/changes/stream", help="the streams' path and query")
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--smoke", action="store_true", help="5 of them, 1 s to settle: that it runs (tests/test_bench.py)")
    args = parser.parse_args()
    if args.smoke:
        args.n, args.settle = 5, 1.0
    data = Path(tempfile.mkdtemp(prefix="bench-keys-")) / "data"
    shutil.copytree(args.data, data, ignore=shutil.ignore_patterns("keys.sqlite*", "usage*"))
    sys.path.insert(0, str(args.src))
    from chartgw.api.access import KeyStore

    store = KeyStore(data / "keys.sqlite")
    _, key_a = store.create("a", rate_per_minute=0)
    _, key_b = store.create("b", rate_per_minute=0)
    server, port = start(args.src, data, dict(e.split("=", 1) for e in args.env))
    try:
        asyncio.run(scenario(args, server.pid, port, key_a, key_b, server))
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        shutil.rmtree(data.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
