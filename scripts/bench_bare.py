"""Helpers for scripts/bench: fetch the gateway's exact responses, wait for a server, serve the bare baseline.

    bench_bare.py wait URL [--timeout S]
    bench_bare.py fetch BASE PATH --key KEY --out FILE [--if-none-match ETAG]   (prints JSON: status, etag, headers)
    bench_bare.py serve --port P --manifest FILE              (the bare Starlette app)
    bench_bare.py impl                                        (what uvicorn's "auto" loop/http resolve to)
    bench_bare.py lag --commits N --key KEY PORT ...          (scripts/bench_replicas' replication lag)
    bench_bare.py report DIR LABEL=GWRUN,BARERUN[,BYTES[,STATUS]] ... [--no-targets]
                                                              (the table, from wrk outputs DIR/RUN.<round>.wrk)

The bare app is the baseline the gateway is measured against: one Starlette `Route` per path whose
endpoint returns `Response(body, media_type="application/json")` with the bytes the gateway sent
(and the same ETag / Cache-Control / Vary headers, answering a matching `If-None-Match` with 304,
so the 304 run compares like with like). It is served by `uvicorn.run` with the settings
`chartgw serve` uses: 1 worker, no access log, uvicorn's default ("auto") loop and http
implementation, so the ratio measures the gateway's own layers, not a different server.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when serving only (the other commands run without Starlette's import time)
    from starlette.applications import Starlette


def cmd_wait(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(args.url, timeout=2) as reply:
                reply.read()
                return 0
        except urllib.error.HTTPError:
            return 0  # it answers; a non-200 health is still a running server
        except OSError:
            time.sleep(0.1)
    print(f"bench: {args.url} did not answer within {args.timeout:.0f} s", file=sys.stderr)
    return 1


def cmd_fetch(args: argparse.Namespace) -> int:
    # urllib sends Accept-Encoding: identity, like wrk (which sends none): the plain body is measured.
    sent = {"X-API-Key": args.key}
    if args.if_none_match:
        sent["If-None-Match"] = args.if_none_match
    request = urllib.request.Request(args.base + args.path, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            status, headers, body = reply.status, reply.headers, reply.read()
    except urllib.error.HTTPError as exc:
        status, headers, body = exc.code, exc.headers, exc.read()
    Path(args.out).write_bytes(body)
    keep = {k.lower(): v for k, v in headers.items() if k.lower() in ("etag", "cache-control", "vary")}
    print(json.dumps({"status": status, "bytes": len(body), "etag": keep.get("etag", ""), "headers": keep}))
    return 0


def cmd_impl(args: argparse.Namespace) -> int:
    def have(module: str) -> bool:
        try:
            __import__(module)
            return True
        except ImportError:
            return False

    # uvicorn's "auto": uvloop if importable, else asyncio; httptools if importable, else h11.
    print(f"loop={'uvloop' if have('uvloop') else 'asyncio'} http={'httptools' if have('httptools') else 'h11'}")
    return 0


def build_bare_app(manifest: dict[str, Any]) -> Starlette:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    by_path: dict[str, dict[bytes, tuple[int, bytes, dict[str, str]]]] = {}
    for entry in manifest["urls"]:
        path, _, query = entry["path"].partition("?")
        body = Path(entry["body_file"]).read_bytes()
        by_path.setdefault(path, {})[query.encode()] = (entry["status"], body, entry["headers"])

    def endpoint_for(variants: dict[bytes, tuple[int, bytes, dict[str, str]]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            status, body, headers = variants.get(request.scope["query_string"]) or next(iter(variants.values()))
            etag = headers.get("etag")
            if etag and request.headers.get("if-none-match") == etag:
                return Response(status_code=304, headers=headers)
            return Response(body, status_code=status, media_type="application/json", headers=headers)
        return endpoint

    return Starlette(routes=[Route(path, endpoint_for(variants)) for path, variants in by_path.items()])


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    app = build_bare_app(json.loads(Path(args.manifest).read_text()))
    # The same call as `chartgw serve` (chartgw/cli.py), only with the app object instead of the factory.
    uvicorn.run(app, host=args.host, port=args.port, workers=1, access_log=False, log_level="info")
    return 0


def cmd_lag(args: argparse.Namespace) -> int:
    """scripts/bench_replicas' replication lag: `--commits` crawls of /korea-chart's demo on the writer (the data
    folder of CHARTGW_DATA_DIR), each timed from the commit of its realtime chart until every reader serves it."""
    import threading

    import httpx

    from chartgw.core import config
    from chartgw.core.settings import Settings
    from chartgw.demo.seeding import seed
    from chartgw.store.connect import connect

    settings = Settings.from_environment()  # this script's start-up: the one read of the environment
    path = settings.get(config.DATA_DIR) / "korea-chart.sqlite"
    chart = "/korea-chart/portal-a/charts/realtime"

    def newest() -> int:
        db = connect(path, readonly=True)
        try:
            return int(db.execute("SELECT max(id) FROM snapshots WHERE target = 'portal-a/realtime'").fetchone()[0])
        finally:
            db.close()

    def served(port: str) -> int:
        reply = httpx.get(f"http://127.0.0.1:{port}{chart}", headers={"X-API-Key": args.key})
        return int(reply.json()["snapshot"]["id"])

    lags = []
    for _ in range(args.commits):
        before = newest()
        crawl = threading.Thread(target=seed, args=(settings, ["korea-chart"]))
        crawl.start()
        while newest() == before:  # the commit of the measured chart, seen within 20 ms
            if not crawl.is_alive() and newest() == before:
                print("bench: the crawl of /korea-chart committed no new realtime chart", file=sys.stderr)
                return 1
            time.sleep(0.02)
        committed, target = time.monotonic(), newest()
        for port in args.ports:
            while served(port) < target:
                if time.monotonic() - committed > args.timeout:
                    print(f"bench: the reader on port {port} did not serve snapshot {target} within {args.timeout:.0f} s",
                          file=sys.stderr)
                    return 1
                time.sleep(0.02)
        lags.append(time.monotonic() - committed)
        crawl.join()
    print(f"{statistics.median(lags):.2f}s median, {max(lags):.2f}s max over {args.commits} commits"
          " (commit -> both readers)")
    return 0


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


class WrkRun:
    """One wrk run: its rate, p99 latency (ms), error lines, and the server's CPU microseconds per request."""

    def __init__(self, wrk_file: Path) -> None:
        text = wrk_file.read_text()
        rate = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M)
        p99 = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s|m)\s*$", text, re.M)
        count = re.search(r"^\s+(\d+) requests in", text, re.M)
        self.rate = float(rate.group(1)) if rate else None
        self.p99 = float(p99.group(1)) * _UNITS[p99.group(2)] if p99 else None
        self.errors = [m.strip() for m in re.findall(r"^\s*(Non-2xx or 3xx responses:.*|Socket errors:.*)$", text, re.M)]
        cpu_file = wrk_file.with_suffix(".cpu")
        cpu = float(cpu_file.read_text()) if cpu_file.exists() else None
        self.cpu_us = cpu / int(count.group(1)) * 1e6 if cpu is not None and count and int(count.group(1)) else None


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


LOGGED = ", access log on"
"""The label's end of a row measured on the gateway with its access log on (scripts/bench BENCH_ACCESS_LOG=1)."""
LOG_COST_TARGET = 0.15


def cmd_report(args: argparse.Namespace) -> int:
    """Per row: median gateway and bare rates over the rounds, and the median of the per-round ratios.

    Each round runs the gateway and then the bare app back to back, so a ratio compares two runs a few
    seconds apart; the median over rounds keeps one noisy run (a shared VM, CPU steal) out of the figure.
    The CPU columns are each server's CPU time per request (user + system, from /proc), and cpu ratio is
    bare/gateway of those: the rate ratio the two would have on a core of their own.
    """
    work = Path(args.dir)
    print(f"{'URL':46} {'bytes':>6} {'gateway r/s':>11} {'bare r/s':>9} {'ratio':>6} {'(rounds)':>11}  "
          f"{'gw p99':>8} {'bare p99':>8}  {'gw cpu':>8} {'bare cpu':>8} {'cpu ratio':>9}")
    first_ratio = None
    plain: list[WrkRun] = []
    verdicts: list[str] = []
    for spec in args.rows:
        label, _, runs = spec.rpartition("=")
        gw_run, bare_run, *rest = runs.split(",")
        gw = [WrkRun(f) for f in sorted(work.glob(f"{gw_run}.*.wrk"))]
        bare = [WrkRun(f) for f in sorted(work.glob(f"{bare_run}.*.wrk"))]
        ratios = [g.rate / b.rate for g, b in zip(gw, bare, strict=False) if g.rate and b.rate]
        if not ratios:
            print(f"{label:46} (no result)")
            continue
        ratio = statistics.median(ratios)
        if label.endswith(LOGGED) and plain:  # BENCH_ACCESS_LOG: against the row before, its twin, round by round
            cost = 1 - statistics.median(g.rate / p.rate for g, p in zip(gw, plain, strict=False) if g.rate and p.rate)
            verdicts.append(f"access log costs at most {LOG_COST_TARGET:.0%} on {label.removesuffix(LOGGED)}: "
                            f"{'met' if cost <= LOG_COST_TARGET else 'NOT met'} ({cost:.0%})")
        elif first_ratio is None:
            first_ratio = ratio
            verdicts.append(_verdict(label, ratio, args.target))
        elif len(rest) > 1 and rest[1] == "304":
            verdicts.append(_verdict(label, ratio, args.target_304))
        plain = gw
        gw_cpu, bare_cpu = _median([g.cpu_us for g in gw]), _median([b.cpu_us for b in bare])
        cpu_ratio = bare_cpu / gw_cpu if gw_cpu and bare_cpu else None
        print(f"{label:46} {rest[0] if rest else '':>6} {_fmt(_median([g.rate for g in gw]), '11.0f')} "
              f"{_fmt(_median([b.rate for b in bare]), '9.0f')} {ratio:6.2f} {f'{min(ratios):.2f}-{max(ratios):.2f}':>11}  "
              f"{_fmt(_median([g.p99 for g in gw]), '6.2f', 'ms')} {_fmt(_median([b.p99 for b in bare]), '6.2f', 'ms')}  "
              f"{_fmt(gw_cpu, '6.1f', 'us')} {_fmt(bare_cpu, '6.1f', 'us')} {_fmt(cpu_ratio, '9.2f')}")
        expected_error = len(rest) > 1 and not rest[1].startswith(("2", "3"))  # a 404 row answers 404 on purpose
        for name, results in (("gateway", gw), ("bare", bare)):
            for i, run in enumerate(results):
                errors = [e for e in run.errors if not (expected_error and e.startswith("Non-2xx"))]
                if errors:
                    print(f"    note: {name} round {i + 1}: {'; '.join(errors)}")
    if verdicts and not args.no_targets:
        print()
        print("\n".join(verdicts))
    return 0


def _verdict(label: str, ratio: float, target: float) -> str:
    """The verdict on one target, the ratio to three places (a ratio printed as 1.50 may be 1.497: NOT met)."""
    return f"target gateway/bare >= {target:.2f} on {label}: {'met' if ratio >= target else 'NOT met'} ({ratio:.3f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_bare.py")
    commands = parser.add_subparsers(dest="command", required=True)
    wait = commands.add_parser("wait")
    wait.add_argument("url")
    wait.add_argument("--timeout", type=float, default=30.0)
    wait.set_defaults(func=cmd_wait)
    fetch = commands.add_parser("fetch")
    fetch.add_argument("base")
    fetch.add_argument("path")
    fetch.add_argument("--key", required=True)
    fetch.add_argument("--out", required=True)
    fetch.add_argument("--if-none-match")
    fetch.set_defaults(func=cmd_fetch)
    serve = commands.add_parser("serve")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--manifest", required=True)
    serve.set_defaults(func=cmd_serve)
    commands.add_parser("impl").set_defaults(func=cmd_impl)
    lag = commands.add_parser("lag")
    lag.add_argument("--commits", type=int, required=True)
    lag.add_argument("--key", required=True)
    lag.add_argument("--timeout", type=float, default=120.0, help="seconds a commit may take to reach the readers")
    lag.add_argument("ports", nargs="+")
    lag.set_defaults(func=cmd_lag)
    report = commands.add_parser("report")
    report.add_argument("dir")
    report.add_argument("rows", nargs="+")
    report.add_argument("--target", type=float, default=1.0, help="for the first row (the cached latest chart)")
    report.add_argument("--target-304", type=float, default=1.5, help="for each 304 row")
    report.add_argument("--no-targets", action="store_true", help="no verdicts (scripts/bench --smoke)")
    report.set_defaults(func=cmd_report)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
