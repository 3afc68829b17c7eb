"""`scripts/bench --interfaces`: the cached path against nginx and a trivial granian RSGI app, in one run, on the
same bytes (issue 31's table).

    scripts/bench --interfaces [--smoke] [--rounds N] [--duration 4s] [--connections 32] [--path PATH]

Seeds a data folder with `chartgw demo` (or uses $CHARTGW_DATA_DIR with $CHARTGW_BENCH_KEY), starts, each with one
worker: `chartgw serve` (granian's RSGI, the default) and `chartgw serve --interface uvicorn` (the ASGI fallback,
no fast lane; both with metrics on, the rate limiter on at a rate no load reaches, as in production), fetches the
gateway's body of PATH (default the realtime chart, limit=100), and serves those exact bytes from nginx (1 worker, a
static file) and from the trivial RSGI app below (granian, 1 worker: a header check, then the bytes). wrk -t1 -cN
runs against each in turn, round after round (the order rotating), on the 200 and on the 304 (If-None-Match with
each server's own ETag); every run must have no answer but 2xx/3xx and move the body's size per answer (so every
answer is a 200 of that body, or a 304 with none). Then the RSGI gateway with `--workers 2` against one worker.
Prints req/s (medians over the rounds) and the ratios (the median of each round's ratio); with targets (issue 31)
unless --smoke.

--smoke: 1 round of 1 s per server at -c4, no warm-up, no verdicts (tests/test_bench.py runs it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATH = "/korea-chart/portal-a/charts/realtime?limit=100"
TARGETS = {"gateway rsgi / trivial rsgi": 0.8, "gateway rsgi / nginx": 0.5, "gateway rsgi 304 / trivial rsgi 304": 0.8,
           "workers 2 / workers 1": 1.7}

# The trivial RSGI app (granian imports this module as `bench_interfaces:app` in its worker).
_BODY = b""
_ETAG = ""


async def app(scope: Any, protocol: Any) -> None:
    """A header check, then the bytes: the floor of any RSGI app answering this body."""
    global _BODY, _ETAG
    if not _BODY:
        _BODY = Path(os.environ["BENCH_BODY_FILE"]).read_bytes()
        _ETAG = os.environ["BENCH_ETAG"]
    headers = scope.headers
    if headers.get("x-api-key") is None:
        protocol.response_bytes(401, [("content-type", "application/json")], b'{"detail":"no key"}')
    elif headers.get("if-none-match") == _ETAG:
        protocol.response_empty(304, [("etag", _ETAG)])
    else:
        protocol.response_bytes(200, [("content-type", "application/json"), ("etag", _ETAG)], _BODY)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                reply.read()
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"bench: {url} did not answer within {timeout:.0f} s")


def fetch(url: str, key: str, etag: str | None = None) -> tuple[int, dict[str, str], bytes]:
    headers = {"X-API-Key": key, **({"If-None-Match": etag} if etag else {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as reply:
            return reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


class Servers:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> int:
        """`args` started with its output to WORK/NAME.log; the pid (the servers' workers are its children)."""
        log = (self.work / f"{name}.log").open("wb")
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                cwd=cwd or ROOT, start_new_session=True)
        self.procs.append(proc)
        return proc.pid

    def stop(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


def run_wrk(url: str, headers: list[str], duration: str, connections: int, size: int) -> float:
    """wrk's req/s; refuses a run with any answer but 2xx/3xx, or whose bytes per answer are not the body's."""
    args = ["wrk", "-t1", f"-c{connections}", f"-d{duration}"]
    for header in headers:
        args += ["-H", header]
    out = subprocess.run([*args, url], capture_output=True, text=True, check=True).stdout
    if "Non-2xx or 3xx" in out or ("Socket errors" in out and re.search(r"read [1-9]|write [1-9]|timeout [1-9]", out)):
        raise SystemExit(f"bench: errors under wrk on {url}:\n{out}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = re.search(r"(\d+) requests in [\d.]+\w+, ([\d.]+)(\w+) read", out)
    assert total is not None, out
    units = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}
    per_answer = float(total.group(2)) * units[total.group(3)] / int(total.group(1))
    slack = per_answer * 0.006  # wrk prints the total with 3 significant digits ("1.01GB read")
    if not size - slack <= per_answer <= size + 1024 + slack:
        raise SystemExit(f"bench: {url} moved {per_answer:.0f} bytes per answer, not a {size}-byte body:\n{out}")
    return rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", default="4s")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--path", default=DEFAULT_PATH)
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.duration, args.connections = 1, "1s", 4
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None or shutil.which("wrk") is None:
        print("bench: needs nginx and wrk (apt-get install nginx-light wrk)", file=sys.stderr)
        return 1
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="chartgw-bench-if.") as folder:
        work = Path(folder)
        servers = Servers(work)
        try:
            return measure(args, work, servers, py, nginx)
        finally:
            servers.stop()


def measure(args: argparse.Namespace, work: Path, servers: Servers, py: str, nginx: str) -> int:
    env = {"CHARTGW_RATE_LIMIT_PER_MINUTE": os.environ.get("CHARTGW_RATE_LIMIT_PER_MINUTE", "10000000")}
    if os.environ.get("CHARTGW_DATA_DIR") and os.environ.get("CHARTGW_BENCH_KEY"):
        key = os.environ["CHARTGW_BENCH_KEY"]
    else:
        env["CHARTGW_DATA_DIR"] = str(work / "data")
        done = subprocess.run([py, "-m", "chartgw", "demo"], capture_output=True, text=True, env={**os.environ, **env},
                              check=True)
        key = os.environ.get("CHARTGW_BENCH_KEY") or done.stdout.strip()
    ports = {name: free_port() for name in ("rsgi", "uvicorn", "rsgi2", "trivial", "nginx", "nginx2")}
    serve = [py, "-m", "chartgw", "serve", "--host", "127.0.0.1"]
    pids = {
        "gateway rsgi": servers.start("rsgi", [*serve, "--interface", "rsgi", "--port", str(ports["rsgi"])], env),
        "gateway uvicorn": servers.start("uvicorn", [*serve, "--interface", "uvicorn", "--port", str(ports["uvicorn"])], env),
    }
    servers.start("rsgi2", [*serve, "--interface", "rsgi", "--workers", "2", "--port", str(ports["rsgi2"])], env)
    bases = {"gateway rsgi": f"http://127.0.0.1:{ports['rsgi']}", "gateway uvicorn": f"http://127.0.0.1:{ports['uvicorn']}",
             "trivial rsgi": f"http://127.0.0.1:{ports['trivial']}", "nginx": f"http://127.0.0.1:{ports['nginx']}"}
    for port in (ports["rsgi"], ports["uvicorn"], ports["rsgi2"]):
        wait_for(f"http://127.0.0.1:{port}/korea-chart/health")
    status, headers, body = fetch(bases["gateway rsgi"] + args.path, key)
    if status != 200:
        raise SystemExit(f"bench: the gateway answered {status}: {body[:300]!r}")
    (work / "www").mkdir()
    (work / "www" / "body.json").write_bytes(body)
    etags = {"gateway rsgi": headers["etag"], "gateway uvicorn": headers["etag"], "trivial rsgi": headers["etag"]}
    # Started by root, nginx's worker would run as nobody, who may not read a private temporary folder.
    user = f"user {pwd.getpwuid(os.getuid()).pw_name};\n" if os.getuid() == 0 else ""
    (work / "nginx.conf").write_text(
        f"{user}worker_processes 1; daemon off; pid {work}/nginx.pid; error_log {work}/nginx.err;\n"
        "events { worker_connections 4096; }\n"
        f"http {{ access_log off; client_body_temp_path {work}; proxy_temp_path {work}; fastcgi_temp_path {work};"
        f" uwsgi_temp_path {work}; scgi_temp_path {work};\n"
        f"  server {{ listen 127.0.0.1:{ports['nginx']}; root {work}/www;"
        "    location / { default_type application/json; try_files /body.json =404; } } }\n")
    pids["nginx"] = servers.start("nginx", [nginx, "-p", str(work), "-c", str(work / "nginx.conf")])
    # The control of --workers 2: nginx with two workers, on a port of its own. wrk shares the box's cores with
    # the servers, so a second worker can only take what wrk leaves; nginx's own ratio shows that ceiling.
    (work / "nginx2").mkdir()
    conf2 = (work / "nginx.conf").read_text().replace("worker_processes 1;", "worker_processes 2;").replace(
        f"{work}/nginx.pid", f"{work}/nginx2/nginx.pid").replace(f"listen 127.0.0.1:{ports['nginx']};",
                                                                  f"listen 127.0.0.1:{ports['nginx2']};")
    (work / "nginx2.conf").write_text(conf2)
    servers.start("nginx2", [nginx, "-p", str(work / "nginx2"), "-c", str(work / "nginx2.conf")])
    pids["trivial rsgi"] = servers.start(
        "trivial", [py, "-m", "granian", "--interface", "rsgi", "--host", "127.0.0.1", "--port", str(ports["trivial"]),
                    "--workers", "1", "--http", "1", "--no-ws", "--log-level", "warning", "bench_interfaces:app"],
        {"BENCH_BODY_FILE": str(work / "www" / "body.json"), "BENCH_ETAG": headers["etag"]}, cwd=ROOT / "scripts")
    for name in ("nginx", "trivial rsgi"):
        wait_for(bases[name] + args.path)
    nginx2 = f"http://127.0.0.1:{ports['nginx2']}{args.path}"
    wait_for(nginx2)
    for name, base in bases.items():  # every server: a 200 of the same bytes, and its 304
        got_status, got_headers, got = fetch(base + args.path, key)
        if got_status != 200 or got != body:
            raise SystemExit(f"bench: {name} did not answer a 200 of the gateway's {len(body)} bytes ({got_status})")
        etags.setdefault(name, got_headers.get("etag", ""))
        if fetch(base + args.path, key, etags[name])[0] != 304:
            raise SystemExit(f"bench: {name} did not answer its ETag with a 304")
    print(f"chartgw bench --interfaces: {os.cpu_count()} CPUs, granian {granian_version(py)}, one worker each; wrk -t1"
          f" -c{args.connections}, {args.rounds} rounds of {args.duration} per server; {args.path}, a {len(body)}-byte"
          " body; the gateways keyed, metrics on")
    names = list(bases)
    if not args.smoke:  # warm: the gateway's first answers build its caches, the servers' first connections
        for name in names:
            run_wrk(bases[name] + args.path, [f"X-API-Key: {key}"], "1s", args.connections, len(body))
    rates: dict[str, list[float]] = {}
    for round_no in range(args.rounds):
        order = names[round_no % len(names):] + names[:round_no % len(names)]
        for kind in ("200", "304"):
            for name in order:
                sent = [f"X-API-Key: {key}"] + ([f"If-None-Match: {etags[name]}"] if kind == "304" else [])
                rates.setdefault(f"{name} {kind}", []).append(
                    run_wrk(bases[name] + args.path, sent, args.duration, args.connections, len(body) if kind == "200" else 0))
    two = f"http://127.0.0.1:{ports['rsgi2']}{args.path}"
    for _ in range(args.rounds):
        rates.setdefault("workers 1", []).append(run_wrk(bases["gateway rsgi"] + args.path, [f"X-API-Key: {key}"],
                                                         args.duration, args.connections * 2, len(body)))
        rates.setdefault("workers 2", []).append(run_wrk(two, [f"X-API-Key: {key}"], args.duration,
                                                         args.connections * 2, len(body)))
        rates.setdefault("nginx workers 1", []).append(run_wrk(bases["nginx"] + args.path, [], args.duration,
                                                               args.connections * 2, len(body)))
        rates.setdefault("nginx workers 2", []).append(run_wrk(nginx2, [], args.duration, args.connections * 2,
                                                               len(body)))
    print(f"\n{'server':<22} {'200 req/s':>10} {'of nginx':>9} {'of trivial':>11} {'304 req/s':>10} {'of nginx':>9}"
          f" {'of trivial':>11}")
    ratios: dict[str, float] = {}
    for name in names:
        cells = []
        for kind in ("200", "304"):
            mine = rates[f"{name} {kind}"]
            of_nginx = statistics.median(a / b for a, b in zip(mine, rates[f"nginx {kind}"], strict=True))
            of_trivial = statistics.median(a / b for a, b in zip(mine, rates[f"trivial rsgi {kind}"], strict=True))
            cells.append(f"{statistics.median(mine):>10.0f} {of_nginx:>9.2f} {of_trivial:>11.2f}")
            if name == "gateway rsgi":
                suffix = "" if kind == "200" else " 304"
                ratios[f"gateway rsgi{suffix} / trivial rsgi{suffix}"] = of_trivial
                if kind == "200":
                    ratios["gateway rsgi / nginx"] = of_nginx
        print(f"{name:<22} {cells[0]} {cells[1]}")
    scale = statistics.median(a / b for a, b in zip(rates["workers 2"], rates["workers 1"], strict=True))
    ratios["workers 2 / workers 1"] = scale
    print(f"\ngateway rsgi at -c{args.connections * 2}: 1 worker {statistics.median(rates['workers 1']):.0f} req/s,"
          f" --workers 2 {statistics.median(rates['workers 2']):.0f} req/s: {scale:.2f}x")
    control = statistics.median(a / b for a, b in zip(rates["nginx workers 2"], rates["nginx workers 1"], strict=True))
    print(f"nginx at -c{args.connections * 2} (the control): 1 worker {statistics.median(rates['nginx workers 1']):.0f}"
          f" req/s, 2 workers {statistics.median(rates['nginx workers 2']):.0f} req/s: {control:.2f}x")
    trivial_us = 1e6 / statistics.median(rates["trivial rsgi 200"])
    print("\n" + profile(Path(env.get("CHARTGW_DATA_DIR") or os.environ["CHARTGW_DATA_DIR"]), key, args.path,
                         trivial_us, env))
    print("rounds (req/s): " + json.dumps({k: [round(v) for v in vs] for k, vs in rates.items()}))
    if not args.smoke:
        print()
        for label, target in TARGETS.items():
            verdict = "met" if ratios[label] >= target else "NOT met"
            print(f"target {label} >= {target}: {ratios[label]:.3f} ({verdict})")  # 3 places: 1.497 is not 1.50
    return 0


PROFILE_CALLS = 20_000


def profile(data: Path, key: str, path: str, trivial_us: float, env: dict[str, str]) -> str:
    """Where a cached 200 of `path` goes, in microseconds of CPU per request: the gateway's RSGI handler run in this
    process (with a stand-in for granian's protocol object; the app built over `data` as a worker builds it) split
    into its parts, beside granian's own share (parse, the call into Python, the write), which is the trivial app's
    whole time per request in the run above. CPU time (process_time), not wall time: a loaded box stretches both alike."""
    import asyncio

    import httpx

    sys.path.insert(0, str(ROOT))
    from chartgw.api.endpoints import request_fields
    from chartgw.core.settings import Settings
    from chartgw.http.app import build_app
    from chartgw.http.observe import request_id
    from chartgw.http.rsgi import Gateway

    raw_path, _, query = path.partition("?")

    class Scope:
        proto, method, http_version, scheme = "http", "GET", "1.1", "http"
        client, server = "127.0.0.1:40000", "127.0.0.1:8000"

        def __init__(self) -> None:
            self.path, self.query_string = raw_path, query
            self.headers = {"host": "127.0.0.1:8000", "x-api-key": key}

    class Protocol:
        def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            assert status == 200, status

    def per_call(run: Any) -> float:
        started = time.process_time()
        for _ in range(PROFILE_CALLS):
            run()
        return (time.process_time() - started) / PROFILE_CALLS * 1e6

    async def measure() -> str:
        app = build_app(settings=Settings.from_environment({**os.environ, **env, "CHARTGW_DATA_DIR": str(data)}))
        gateway = Gateway(app)
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
                assert (await client.get(path, headers={"X-API-Key": key})).status_code == 200  # cached from now on
            scope, protocol = Scope(), Protocol()
            headers = [(n.encode(), v.encode()) for n, v in scope.headers.items()]
            lane = gateway.lane
            assert lane is not None
            known = lane.cache.canonical((raw_path, query.encode()))
            assert known is not None
            endpoint = known.owner
            version = endpoint.data.settled_version()
            hit = lane.cache.get(known.key, version)
            parts: dict[str, float] = {}
            started = time.process_time()
            for _ in range(PROFILE_CALLS):
                await gateway.__rsgi__(scope, protocol)  # type: ignore[arg-type]
            parts["the whole RSGI handler"] = (time.process_time() - started) / PROFILE_CALLS * 1e6
            parts["  the lane (FastLane.reply)"] = per_call(lambda: lane.reply(raw_path, query.encode(), headers))
            parts["    lookup (alias, data version, cached body)"] = per_call(lambda: (
                lane.cache.canonical((raw_path, query.encode())), endpoint.data.settled_version(),
                lane.cache.get(known.key, version)))
            parts["    request fields"] = per_call(lambda: request_fields(headers))
            parts["    admit (key, rate limit)"] = per_call(lambda: lane.gate.admit(raw_path, key.encode()))
            parts["    answer (ETag, headers)"] = per_call(lambda: endpoint.reply(hit, None, None, known.variant))
            observer = lane.observer

            def observed() -> None:
                request_id(None)
                if observer is not None:
                    observer.lane_answered(endpoint, 200, 1, 1e-5, 1, b"x", "hit")

            parts["    request id, metrics, log"] = per_call(observed)
            parts["  RSGI's str headers (both ways)"] = parts["the whole RSGI handler"] - parts["  the lane (FastLane.reply)"]
        gateway.spill.close()  # its folder for large answers (none here), as a granian worker's ends
        lines = [f"where a cached 200 goes, us per request: the gateway's handler in process ({PROFILE_CALLS} calls, CPU"
                 " time), granian's share (parse, the call into Python, write) from the trivial app's rate above:",
                 f"  {'granian and the kernel, a whole request of the trivial app':<58} {trivial_us:6.1f}"]
        lines += [f"  {name:<58} {value:6.1f}" for name, value in parts.items()]
        return "\n".join(lines)

    return asyncio.run(measure())


def granian_version(py: str) -> str:
    return subprocess.run([py, "-c", "import granian; print(granian.__version__)"], capture_output=True,
                          text=True).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
