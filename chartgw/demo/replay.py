"""A local HTTP server that answers upstream requests from stored bodies.

The demo data and the tests point `CHARTGW_UPSTREAM_<NAME>` at one of these on 127.0.0.1, so the
real crawlers run their real HTTP code against real-format payloads with no network.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import NamedTuple
from urllib.parse import parse_qsl, urlsplit

import httpx

from chartgw.core.settings import Settings
from chartgw.upstreams import ORIGINS, UpstreamRequest, origin

ReplayKey = tuple[str, str, tuple[tuple[str, str], ...]]


class Reply(NamedTuple):
    body: bytes
    status: int = 200
    content_type: str = "text/html; charset=utf-8"


def replay_key(method: str, path: str, params: list[tuple[str, str]] | tuple[tuple[str, str], ...]) -> ReplayKey:
    return (method.upper(), path, tuple(sorted(params)))


BODY = "__body__"
"""A JSON request body is part of the key under this name, so one path can answer many bodies."""


def request_key(req: UpstreamRequest) -> ReplayKey:
    body = ((BODY, req.body.decode("utf-8")),) if req.body is not None else ()
    return replay_key(req.method, req.path, tuple(req.params) + tuple(req.form or ()) + body)


def answer_key(method: str, target: str, content_type: str, body: bytes) -> ReplayKey:
    """The key a request as received is answered by: its path, query and form fields, or JSON body."""
    parts = urlsplit(target)
    params = parse_qsl(parts.query, keep_blank_values=True)
    if body:
        text = body.decode("utf-8")
        if content_type.startswith("application/json"):
            params.append((BODY, text))
        else:
            params += parse_qsl(text, keep_blank_values=True)
    return replay_key(method, parts.path, params)


class ReplayTransport(httpx.MockTransport):
    """The same replies in process, for a crawl's httpx client (`crawl_group(..., transport=)`): no socket
    and no setting changed. `tables` maps an upstream name to its replies; the request's host (the upstream's
    origin under `settings`, by default its real one) picks it."""

    def __init__(self, tables: dict[str, dict[ReplayKey, Reply]], settings: Settings | None = None) -> None:
        self.tables = tables
        self.settings = settings
        self.seen: list[tuple[ReplayKey, dict[str, str]]] = []
        super().__init__(self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        by_host = {urlsplit(origin(name, self.settings) if self.settings is not None else ORIGINS[name]).netloc: table
                   for name, table in self.tables.items()}
        key = answer_key(request.method, str(request.url.raw_path, "ascii"), request.headers.get("content-type", ""),
                         request.content)
        self.seen.append((key, {k.lower(): v for k, v in request.headers.items()}))
        reply = by_host.get(request.url.netloc.decode("ascii"), {}).get(
            key, Reply(b"<html><body>no such page</body></html>", 404))
        return httpx.Response(reply.status, content=reply.body, headers={"content-type": reply.content_type})


def stop_serving(httpd: HTTPServer) -> None:
    """Stop `httpd.serve_forever` at once and close it. The loop looks for a stop only when its wait for a
    connection ends (every half second by default): a connection of our own ends that wait now, so a server need
    not wake every few milliseconds all its life to stop quickly (a demo runs thirty of them at a time)."""
    host, port = httpd.server_address[:2]
    stopping = threading.Thread(target=httpd.shutdown, daemon=True)
    stopping.start()
    while stopping.is_alive():
        with suppress(OSError):
            socket.create_connection((str(host), int(port)), timeout=1).close()
        stopping.join(0.01)
    httpd.server_close()


class ReplayServer:
    """Serves `replies` (mutable while running); anything else is a 404. Records every request seen."""

    def __init__(self, replies: dict[ReplayKey, Reply] | None = None) -> None:
        self.replies: dict[ReplayKey, Reply] = dict(replies or {})
        self.seen: list[tuple[ReplayKey, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                key = answer_key(self.command, self.path, self.headers.get("content-type") or "", body)
                server.seen.append((key, {k.lower(): v for k, v in self.headers.items()}))
                reply = server.replies.get(key, Reply(b"<html><body>no such page</body></html>", 404))
                # A crawl stopped mid-request (`chartgw demo --keep-fresh` stopped within a round) closes its
                # connection: nobody is left to answer, and socketserver would print the broken pipe's traceback.
                with suppress(ConnectionError):
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ReplayServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        stop_serving(self._httpd)


@contextmanager
def replaying(replies: dict[ReplayKey, Reply]) -> Iterator[ReplayServer]:
    server = ReplayServer(replies).start()
    try:
        yield server
    finally:
        server.stop()


class ReplayServers(dict[str, ReplayServer]):
    """The replay servers of `replay_upstreams` by upstream name."""

    def over(self, settings: Settings) -> Settings:
        """`settings` with each upstream's `CHARTGW_UPSTREAM_<NAME>` pointing at its replay server. The servers are
        local, so the crawl delay (politeness towards real upstreams) is 0 too."""
        return settings.with_values({**{f"CHARTGW_UPSTREAM_{n}": s.origin for n, s in self.items()},
                                     "CHARTGW_CRAWL_DELAY_SECONDS": "0"})


@contextmanager
def replay_upstreams(replies: dict[str, dict[ReplayKey, Reply]]) -> Iterator[ReplayServers]:
    """One replay server per upstream while the block runs; a crawl reaches them under `servers.over(settings)`."""
    with ExitStack() as stack:
        servers = ReplayServers()
        for name, table in replies.items():
            server = ReplayServer(table).start()
            stack.callback(server.stop)
            servers[name] = server
        yield servers
