"""`chartgw serve`: the gateway served by granian through its public RSGI interface.

`Gateway.__rsgi__` asks the app's fast lane (`chartgw.http.fastlane`) first, with the request's path, query and
headers: a repeat of a cached body is answered straight from the response cache (key check, rate limit, ETag/304,
gzip, CORS, request id, metrics and access log are the lane's, which are the app's own parts). Everything else, and
every request the lane declines, is handed to the Starlette app through a small ASGI adapter (`_asgi`), so the app
answers it as under any ASGI server: routes, errors, SSE and long polls (a streamed answer), exports (Range).

granian parses HTTP in Rust, so the limits on what a client may send are its settings where it has one
(`granian_limits` makes them; docs/hardening.md lists each limit): a head must arrive within
`CHARTGW_REQUEST_HEAD_TIMEOUT_SECONDS` (granian's `header_read_timeout`), a head past granian's buffer is refused.
This module times the body (`CHARTGW_REQUEST_BODY_TIMEOUT_SECONDS`, on the app's reads: a 408), refuses long URLs
and requests past the concurrency limit, and, as granian has no send timeout, has the kernel drop unread answers
(`time_out_unread_answers`).

No private class of any server is subclassed: this module uses the RSGI protocol (granian's `__rsgi__`,
`__rsgi_init__` and `__rsgi_del__`, its `response_*` methods) and granian's ASGI lifespan helper.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import quote

from granian.asgi import LifespanProtocol
from granian.http import HTTP1Settings
from granian.rsgi import HTTPProtocol, ProtocolClosed, Scope  # type: ignore[attr-defined]  # re-exported "as"
from starlette.types import ASGIApp, Message

from chartgw.api.endpoints import declared_length
from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.http.app import build_replica_app, build_served_app
from chartgw.http.fastlane import FastLane
from chartgw.http.limits import JOIN_MAX, MAX_HEAD_BYTES, MAX_URL_BYTES
from chartgw.http.observe import Observability, request_id
from chartgw.http.spill import Spill
from chartgw.push.changes import ChangeHub

__all__ = ["Gateway", "gateway", "granian_limits", "replica_gateway"]

ASGI_VERSIONS = {"version": "3.0", "spec_version": "2.3"}
EXTENSIONS: dict[str, dict[str, Any]] = {"http.response.pathsend": {}}
"""A file answered whole (Starlette's FileResponse: an export without Range) is granian's `response_file`."""
PATH_SAFE = "/:@!$&'()*+,;=-._~"
"""What a path may hold unquoted (RFC 3986's pchar and "/")."""
CHUNK = 64 * 1024
"""The slice of a large answer handed to granian at a time (`send_large`)."""


class Gateway:
    """The RSGI application granian runs: the fast lane first, the ASGI app for the rest."""

    def __init__(self, app: ASGIApp, spill: Spill | None = None, *, lifespan: bool = True) -> None:
        self.app = app
        self.lifespan = lifespan
        """False: `__rsgi_init__` does not run the app's lifespan (its caller may, with `start_lifespan`), which
        granian's embedded server needs: its loop is already running when it calls `__rsgi_init__` (the tests serve
        it so)."""
        self.in_progress = 0
        hub = app_state(app, "change_hub")
        self.hub: ChangeHub | None = hub if isinstance(hub, ChangeHub) else None
        lane = app_state(app, "fast_lane")
        self.lane: FastLane | None = lane if isinstance(lane, FastLane) else None
        settings = app_state(app, "settings") or Settings()  # an app not the gateway's: the defaults
        self.settings: Settings = settings
        self.spill = spill if spill is not None else Spill(max_bytes=settings.get(config.CACHE_MAX_MB) * 1024 * 1024)
        self.body_timeout: float = settings.get(config.REQUEST_BODY_TIMEOUT_SECONDS)
        self.send_timeout: float = settings.get(config.SEND_TIMEOUT_SECONDS)
        self.limit_concurrency: int = settings.get(config.LIMIT_CONCURRENCY)
        """Requests in progress in the app (long polls waiting and streams open not counted) past which a 503."""
        seen = app_state(app, "observability")
        self.observability: Observability | None = seen if isinstance(seen, Observability) else None
        self._lifespan: LifespanProtocol | None = None
        self._state: dict[str, Any] = {}

    # The server's life (granian's workers call these with the worker's loop, not yet running; its embedded server
    # with its running loop, so there `lifespan` is off).

    def __rsgi_init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Runs the app's lifespan start-up (its observer, the change hub), as an ASGI server does before serving,
        unless `lifespan` is off; sets the kernel's send timeout either way."""
        if self.lifespan:
            loop.run_until_complete(self.start_lifespan())
            self._stop_hub_on_signals(loop)
        # granian builds the worker's listening socket after this call and before the loop runs its first callback.
        loop.call_soon(time_out_unread_answers, self.send_timeout)

    async def start_lifespan(self) -> None:
        """The app's lifespan start-up; its state is every request's."""
        self._lifespan = LifespanProtocol(self.app)  # type: ignore[no-untyped-call]
        await self._lifespan.startup()  # type: ignore[no-untyped-call]
        if self._lifespan.interrupt:
            raise RuntimeError("the app's start-up failed") from self._lifespan.exc
        self._state = self._lifespan.state

    async def stop_lifespan(self) -> None:
        """The app's lifespan shutdown, when it was started: the change hub ends its long polls and streams, the
        readers close."""
        if self._lifespan is not None:
            await self._lifespan.shutdown()  # type: ignore[no-untyped-call]

    def _stop_hub_on_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        # On SIGTERM (or SIGINT) granian stops accepting and waits for the requests in progress: the change hub's
        # long polls answer and its streams end at once, instead of holding the stop for up to a minute.
        # granian's own handling stays: the loop learns of the signal through its wakeup fd whatever
        # Python-level handler is installed, and this one only asks the loop to stop the hub.
        hub = self.hub
        if hub is not None:
            def stop_hub(signum: int, frame: Any) -> None:
                loop.call_soon_threadsafe(hub.stop)

            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, stop_hub)

    def __rsgi_del__(self, loop: asyncio.AbstractEventLoop) -> None:
        """The app's lifespan shutdown (`stop_lifespan`) unless `lifespan` is off, then the spill's files go."""
        if self.lifespan:
            loop.run_until_complete(self.stop_lifespan())
        self.spill.close()

    # Requests.

    async def __rsgi__(self, scope: Scope, protocol: HTTPProtocol) -> None:
        if scope.proto != "http":
            return  # websockets: the gateway has none (granian runs with them off)
        if len(scope.path) + len(scope.query_string) >= MAX_URL_BYTES:
            _Reply(protocol, self._refused(scope), self.send_timeout, self._large).refuse(414, "The request URL is too long")
            return
        limit = self.limit_concurrency
        if self.in_progress >= limit and self.in_progress - self._parked() >= limit:
            _Reply(protocol, self._refused(scope), self.send_timeout, self._large).refuse(
                503, "Service Unavailable: too many requests in progress, retry shortly")
            return
        lane = self.lane
        if lane is not None and scope.method == "GET":
            path = scope.path  # percent-decoded: a "%" left in it was sent as %25, which the app's cache key is not
            if path[:1] == "/" and "%" not in path and path.isascii():
                headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in scope.headers.items()]
                if not _framed(headers):
                    reply = lane.reply(path, scope.query_string.encode("latin-1"), headers)
                    if reply is not None:
                        status, sent, body = reply
                        answer = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in sent]
                        if not body:  # a 304: granian's call for no body, a few % faster (docs/benchmark.md)
                            protocol.response_empty(status, answer)
                        elif len(body) <= JOIN_MAX:
                            protocol.response_bytes(status, answer, body)
                        else:
                            await self._large(protocol, status, answer, body)
                        return
                await self._asgi(scope, protocol, headers)
                return
        await self._asgi(scope, protocol, None)

    async def _asgi(self, scope: Scope, protocol: HTTPProtocol, headers: list[tuple[bytes, bytes]] | None) -> None:
        """The request answered by the ASGI app: an ASGI scope, `receive` reading the body as it comes (within
        the body timeout) and then waiting for the client to leave, `send` answering in one piece or streamed."""
        if headers is None:
            headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in scope.headers.items()]
        path = scope.path  # granian's is percent-decoded (RSGI has no raw path): the raw one is quoted again
        client_host, _, client_port = scope.client.rpartition(":")
        server_host, _, server_port = scope.server.rpartition(":")
        asgi_scope: dict[str, Any] = {
            "type": "http", "asgi": ASGI_VERSIONS, "http_version": scope.http_version, "method": scope.method,
            "scheme": scope.scheme, "path": path, "raw_path": quote(path, safe=PATH_SAFE).encode("ascii"),
            "query_string": scope.query_string.encode("latin-1"), "root_path": "", "headers": headers,
            "client": (client_host, int(client_port or 0)), "server": (server_host, int(server_port or 0)),
            "state": self._state.copy(), "extensions": EXTENSIONS,
        }
        reply = _Reply(protocol, self._refused(scope), self.send_timeout, self._large)
        body = _Body(protocol, reply, self.body_timeout, _framed(headers), declared_length(headers))
        self.in_progress += 1
        try:
            await self.app(asgi_scope, body.receive, reply.send)
        except ProtocolClosed:
            return  # the client left while its answer was streamed
        finally:
            self.in_progress -= 1
            if body.left is not None:  # the wait for the client to leave holds the request open
                body.left.cancel()
        reply.finish()

    def _parked(self) -> int:
        """Requests in progress parked on the change hub (long polls, streams): they have caps of their own."""
        return self.hub.parked if self.hub is not None else 0

    async def _large(self, protocol: HTTPProtocol, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        """A whole body past JOIN_MAX: from a file (`chartgw.http.spill`) when it has an ETag, as every cached body
        has, so a client that does not read it holds granian's read buffer, not a copy; else streamed in slices."""
        etag = coding = None
        for name, value in headers:
            if name == "etag":
                etag = value
            elif name == "content-encoding":
                coding = value
        if etag is not None:
            try:
                path = await self.spill.path(etag, coding, body)
            except OSError:
                pass  # a full disk: memory it is
            else:
                protocol.response_file(status, headers, path)
                return
        await send_large(protocol, status, headers, body, self.send_timeout)


    def _refused(self, scope: Scope) -> Callable[[int, int], bytes]:
        """What a refusal of this module (414, 408, 503) does besides answering, as the app's answers do: it gets a
        request id (the client's, when sane) and is counted and logged by the app's observer. Returns the id."""
        def refused(status: int, size: int) -> bytes:
            rid = request_id(_sent_id(scope))
            if self.observability is not None:
                self.observability.observer.refused(status, scope.method, size, rid)
            return rid
        return refused


async def send_large(protocol: HTTPProtocol, status: int, headers: list[tuple[str, str]], body: bytes,
                     send_timeout: float) -> None:
    """A body past JOIN_MAX, streamed in CHUNK slices, each awaited: granian copies what it is given, so an answer
    given whole to a client that reads nothing would hold a copy of it (issue 19's 300 unread 4 MB answers), where
    this holds one slice. A client that takes nothing of a slice for `send_timeout` is dropped: the answer ends
    short of its Content-Length, and granian closes the connection."""
    stream = protocol.response_stream(status, headers)
    view = memoryview(body)
    with contextlib.suppress(TimeoutError, ProtocolClosed):
        for start in range(0, len(body), CHUNK):
            await asyncio.wait_for(stream.send_bytes(bytes(view[start:start + CHUNK])), send_timeout)


def time_out_unread_answers(seconds: float) -> int:
    """Sets the kernel's send timeout (Linux's TCP_USER_TIMEOUT) on this process's listening TCP sockets, which its
    connections inherit: a connection whose client takes no byte of its answer for `seconds` (a zero window) is
    reset, and granian frees what it held for it. granian has no such timeout of its own, and hands Python no
    connection's socket; the worker's only listening socket is granian's. Returns how many were set (0 off Linux)."""
    option = getattr(socket, "TCP_USER_TIMEOUT", None)
    if option is None or not os.path.isdir("/proc/self/fd"):
        return 0
    done = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=int(name))
        except (OSError, ValueError):
            continue  # not a socket (or already closed)
        try:
            if (sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM
                    and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)):
                sock.setsockopt(socket.IPPROTO_TCP, option, max(1, round(seconds * 1000)))
                done += 1
        except OSError:
            pass
        finally:
            sock.detach()  # granian's, not ours to close
    return done


def _sent_id(scope: Scope) -> bytes | None:
    sent = scope.headers.get("x-request-id")
    return sent.encode("latin-1") if isinstance(sent, str) else None


def _framed(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the request declared a body (Content-Length or Transfer-Encoding): never the lane's."""
    return any(name == b"content-length" or name == b"transfer-encoding" for name, _ in headers)


class _Body:
    """The ASGI `receive` of one request: its body in the chunks granian reads, then `http.disconnect` once the
    client has gone (what SSE and long polls wait for)."""

    def __init__(self, protocol: HTTPProtocol, reply: _Reply, timeout: float, framed: bool,
                 length: int | None) -> None:
        self.protocol = protocol
        self.reply = reply
        self.timeout = timeout
        self.chunks: AsyncIterator[bytes] | None = protocol.__aiter__() if framed else None
        self.done = not framed
        self.length = length
        """The declared Content-Length. granian ends the body of a client that left mid-body as if it were whole, so
        a body short of it is a client that left. (A chunked body cut short cannot be told from a whole one.)"""
        self.received = 0
        self.left: asyncio.Future[None] | None = None

    async def receive(self) -> Message:
        if self.done:
            # Waited for through a task of its own: an app that stops waiting (a stream that ended) cancels the
            # wait, not granian's future, which resolves when the connection closes.
            if self.left is None:
                self.left = asyncio.ensure_future(self.protocol.client_disconnect())
            await asyncio.wait((self.left,))
            return {"type": "http.disconnect"}
        assert self.chunks is not None
        try:
            chunk = await asyncio.wait_for(anext(self.chunks), self.timeout)
        except StopAsyncIteration:
            self.done = True
            if self.length is not None and self.received < self.length:
                return {"type": "http.disconnect"}  # cut short: the app acts on no part of it
            return {"type": "http.request", "body": b"", "more_body": False}
        except TimeoutError:
            # A 408 (unless the app has begun its answer), and the app is told the client left, so it acts on no
            # part of the body and what it sends later goes nowhere.
            self.done = True
            self.reply.refuse(408, f"The request body did not arrive within {self.timeout:g}s")
            return {"type": "http.disconnect"}
        except ProtocolClosed:
            self.done = True
            return {"type": "http.disconnect"}
        self.received += len(chunk)
        return {"type": "http.request", "body": bytes(chunk), "more_body": True}


class _Reply:
    """The ASGI `send` of one request: a body sent whole is one `response_bytes`; one in parts is streamed."""

    def __init__(self, protocol: HTTPProtocol, refused: Callable[[int, int], bytes], send_timeout: float,
                 large: Callable[[HTTPProtocol, int, list[tuple[str, str]], bytes], Awaitable[None]]) -> None:
        self.protocol = protocol
        self.send_timeout = send_timeout
        self.large = large
        self.refused = refused
        self.status = 500
        self.headers: list[tuple[str, str]] = []
        self.started = False
        self.stream: Any = None
        self.complete = False

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.started = True
            self.status = message["status"]
            self.headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in message.get("headers", ())]
        elif kind == "http.response.body" and not self.complete:
            body = message.get("body", b"")
            more = message.get("more_body", False)
            if self.stream is None and not more:
                self.complete = True
                if len(body) <= JOIN_MAX:
                    self.protocol.response_bytes(self.status, self.headers, body)
                else:
                    await self.large(self.protocol, self.status, self.headers, body)
                return
            if self.stream is None:
                self.stream = self.protocol.response_stream(self.status, self.headers)
            if body:
                await asyncio.wait_for(self.stream.send_bytes(body), self.send_timeout)
            if not more:
                self.complete = True
        elif kind == "http.response.pathsend" and not self.complete and self.stream is None:
            self.complete = True  # a file (an export): granian reads it as the client takes it
            self.protocol.response_file(self.status, self.headers, message["path"])

    def refuse(self, status: int, detail: str) -> None:
        """Answers `status` with a JSON body and closes the connection, unless an answer has begun; the app's
        sends go nowhere from now on."""
        if not self.complete and self.stream is None:
            body = b'{"detail":"' + detail.encode() + b'"}'
            rid = self.refused(status, len(body))
            self.protocol.response_bytes(status, [("content-type", "application/json"), ("connection", "close"),
                                                  ("x-request-id", rid.decode("latin-1"))], body)
        self.complete = True

    def finish(self) -> None:
        """An app that returned without a whole answer: what it started ends here (nothing sent: a 500)."""
        if self.stream is not None:
            # granian ends a streamed answer when its transport is freed: a reference left in a cycle (the
            # frames of a cancelled task group keep `send`) would hold it open until the garbage collector ran.
            self.stream = None
            return
        if self.complete:
            return
        if self.stream is None:
            with contextlib.suppress(ProtocolClosed, RuntimeError):
                self.protocol.response_bytes(self.status if self.started else 500, self.headers, b"")


def gateway() -> Gateway:
    """`chartgw serve`'s factory (each granian worker calls it)."""
    stop_with_parent()
    return Gateway(build_served_app())


def replica_gateway() -> Gateway:
    """`chartgw serve --read-only`'s factory."""
    stop_with_parent()
    return Gateway(build_replica_app())


PR_SET_PDEATHSIG = 1


def stop_with_parent() -> bool:
    """Has the kernel send this granian worker SIGTERM (a graceful stop) when granian's main process dies. Killed
    outright (`kill -9`, an OOM kill), the main process cannot stop its workers, and one left running would go on
    serving on the port (granian binds it with SO_REUSEPORT) beside the next server. A worker whose main process
    dies while it starts stops at once. Linux only, and only in a worker granian started: False otherwise."""
    parent = multiprocessing.parent_process()
    if parent is None or not sys.platform.startswith("linux"):
        return False
    # Until granian installs the worker's own handlers, SIGTERM stops it at once: the handler it inherited from the
    # main process's fork would take the signal and do nothing.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent.pid:  # it died before the request: nobody will send the signal
        os.kill(os.getpid(), signal.SIGTERM)
    return True


def app_state(app: Any, name: str) -> Any:
    """`state.<name>` of the gateway app `app` (None for an app without it)."""
    return getattr(getattr(app, "state", None), name, None)


def granian_limits(settings: Settings, head_timeout: float | None = None) -> dict[str, Any]:
    """granian's options that hold a client to `settings`' limits (docs/hardening.md), for `chartgw serve` and the
    tests' embedded server alike. The workers answer 503 past CHARTGW_LIMIT_CONCURRENCY requests in progress in the
    app (long polls and streams, capped on their own, not counted); granian's backpressure, which makes requests wait
    unanswered, is set past everything a worker may hold at once, so it never acts before them. granian has one
    timer from the previous answer (or the connection) to a whole head: by default the shorter of the head and idle
    timeouts, so an idle connection closes in time too."""
    held = settings.get(config.CHANGES_MAX_WAITERS) + settings.get(config.CHANGES_MAX_STREAMS)
    if head_timeout is None:
        head_timeout = min(settings.get(config.REQUEST_HEAD_TIMEOUT_SECONDS), settings.get(config.IDLE_TIMEOUT_SECONDS))
    return {"backpressure": 2 * settings.get(config.LIMIT_CONCURRENCY) + held,
            "http1_settings": HTTP1Settings(header_read_timeout=int(head_timeout * 1000), keep_alive=True,
                                            max_buffer_size=MAX_HEAD_BYTES)}
