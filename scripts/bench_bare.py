"""Helpers for scripts/bench: fetch the gateway's exact responses, wait for a server, serve the bare baseline.

    bench_bare.py wait URL [--timeout S]
    bench_bare.py fetch BASE PATH --key KEY --out FILE [--if-none-match ETAG]   (prints JSON: status, etag, headers)
    bench_bare.py serve --port P --manifest FILE              (the bare Starlette app)
    bench_bare.py impl                                        (what uvicorn's "auto" loop/http resolve to)

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
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


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
    headers = {"X-API-Key": args.key}
    if args.if_none_match:
        headers["If-None-Match"] = args.if_none_match
    request = urllib.request.Request(args.base + args.path, headers=headers)
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


def build_bare_app(manifest: dict):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    by_path: dict[str, dict[bytes, tuple[int, bytes, dict[str, str]]]] = {}
    for entry in manifest["urls"]:
        path, _, query = entry["path"].partition("?")
        body = Path(entry["body_file"]).read_bytes()
        by_path.setdefault(path, {})[query.encode()] = (entry["status"], body, entry["headers"])

    def endpoint_for(variants: dict[bytes, tuple[int, bytes, dict[str, str]]]):
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
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
