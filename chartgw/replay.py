"""A local HTTP server that answers upstream requests from stored bodies.

The demo data and the tests point `CHARTGW_UPSTREAM_<NAME>` at one of these on 127.0.0.1, so the
real crawlers run their real HTTP code against real-format payloads with no network.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple
from urllib.parse import parse_qsl, urlsplit

from chartgw.config import environment
from chartgw.upstreams import UpstreamRequest

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


class ReplayServer:
    """Serves `replies` (mutable while running); anything else is a 404. Records every request seen."""

    def __init__(self, replies: dict[ReplayKey, Reply] | None = None) -> None:
        self.replies: dict[ReplayKey, Reply] = dict(replies or {})
        self.seen: list[tuple[ReplayKey, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                parts = urlsplit(self.path)
                params = parse_qsl(parts.query, keep_blank_values=True)
                length = int(self.headers.get("content-length") or 0)
                if length:
                    body = self.rfile.read(length).decode("utf-8")
                    if (self.headers.get("content-type") or "").startswith("application/json"):
                        params.append((BODY, body))
                    else:
                        params += parse_qsl(body, keep_blank_values=True)
                key = replay_key(self.command, parts.path, params)
                server.seen.append((key, {k.lower(): v for k, v in self.headers.items()}))
                reply = server.replies.get(key, Reply(b"<html><body>no such page</body></html>", 404))
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
        self._httpd.shutdown()
        self._httpd.server_close()


@contextmanager
def replaying(replies: dict[ReplayKey, Reply]) -> Iterator[ReplayServer]:
    server = ReplayServer(replies).start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def replay_upstreams(replies: dict[str, dict[ReplayKey, Reply]]) -> Iterator[dict[str, ReplayServer]]:
    """One replay server per upstream, with `CHARTGW_UPSTREAM_<NAME>` pointing at it meanwhile.

    The servers are local, so the crawl delay (politeness towards real upstreams) is 0 meanwhile too.
    """
    with ExitStack() as stack:
        servers = {}
        for name, table in replies.items():
            server = ReplayServer(table).start()
            stack.callback(server.stop)
            servers[name] = server
        settings: dict[str, str | None] = {f"CHARTGW_UPSTREAM_{n}": s.origin for n, s in servers.items()}
        stack.enter_context(environment({**settings, "CHARTGW_CRAWL_DELAY_SECONDS": "0"}))
        yield servers
