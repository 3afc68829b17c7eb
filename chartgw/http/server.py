"""The HTTP server as `chartgw serve` runs it, with no proxy in front: uvicorn's httptools protocol with
limits on what a client may send, leave unread or hold open (docs/hardening.md lists each one).

- Each request head (request line and headers) is capped as it arrives, counted per request even when many
  come in one read: a request line past `MAX_URL_BYTES` is a 414, a head past `MAX_HEAD_BYTES` a 431, and
  neither is read further. Requests are fed to the parser one head (and one body) at a time, which is how a
  head is told from the body before it.
- Time limits, all on one timer per connection: a head must arrive within
  `CHARTGW_REQUEST_HEAD_TIMEOUT_SECONDS` (408), a body within `CHARTGW_REQUEST_BODY_TIMEOUT_SECONDS` of its head
  (408, or a plain close once the request was answered), a connection with nothing to do closes after the idle
  (keep-alive) timeout, and one whose answers go unread for `CHARTGW_SEND_TIMEOUT_SECONDS` is dropped.
- Unread answers cost bounded memory: while more than `BACKLOG_BYTES` of answers wait to be sent, no further
  request is parsed (nor read); a large answer is written as its head and the cached body itself, never a joined
  copy (`JOIN_MAX`).
- `--limit-concurrency` counts requests in progress in the app, not connections: a thousand connections that
  trickle heads or bodies, none of them admitted, do not make a keyed request wait or fail. Past it the
  lane and the app alike answer 503. Long polls waiting and change streams open are not counted (each kind has
  its own cap, `ChangeHub.parked`).
Every refusal is a JSON body, like every other error the gateway gives.

A repeated GET of a cached body is answered from the head alone by the app's fast lane
(`chartgw.http.fastlane`), written in the bytes uvicorn would write for the app's own answer: only for a request
that declares no body (no Content-Length or Transfer-Encoding), and only once the parser has accepted all
the bytes read with it (a read that ends in a refusal answers only the refusal, as the app path does).
Every answer, the lane's and the server's own refusals too, carries an `X-Request-Id` and is counted and logged
through the app's observer (`chartgw.http.observe`; `--access-log` is its JSON log, so uvicorn's text log stays off).

This subclasses uvicorn's private `HttpToolsProtocol` (pinned in pyproject.toml to the minor version it was
written against; tests/test_server.py fails naming the pin when the internals read here change): the lane's
speed is answering without an ASGI task, which nothing public in uvicorn offers.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle

from chartgw.api.access import Reply
from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.http.fastlane import FastLane
from chartgw.http.observe import REQUEST_ID_HEADER, Observability, request_id
from chartgw.push.changes import ChangeHub

__all__ = ["BACKLOG_BYTES", "MAX_HEAD_BYTES", "MAX_URL_BYTES", "LimitedHttpToolsProtocol", "app_state"]

MAX_HEAD_BYTES = 32 * 1024
"""The request line and all headers together; browsers and clients send a few KB."""
MAX_URL_BYTES = 8 * 1024
BACKLOG_BYTES = 64 * 1024
"""Answers waiting to be sent past which no further request of the connection is parsed."""
MAX_STASH_BYTES = 1024 * 1024
"""Requests read but not yet parsed (held while answers wait) past which the connection is dropped."""
JOIN_MAX = 128 * 1024
"""A lane answer's body up to this size is written joined to its head: one copy and one `write`, sent at once
(as separate buffers uvloop sends them with `writelines`, a loop turn later: about 5 us more CPU a request under
wrk). A larger body is written after its head as the cached object itself, so an answer left unread holds no copy
of it (and one that is read costs a copy less)."""
EMPTY_LINE = b"\r\n\r\n"


class _Refused(Exception):
    """Stops parsing: the connection has been answered (refused) and is closing."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol` that parses one request at a time, counts each head, times heads, bodies, idle
    connections and unread answers, and lets the fast lane answer cached repeats."""

    _joined_defaults: tuple[Any, bytes] = (None, b"")
    """uvicorn's default headers (Date, Server) of this second, and their lines joined."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = app_state(self.app, "settings") or Settings()  # the app's own, as its handlers read them
        self._head_timeout = settings.get(config.REQUEST_HEAD_TIMEOUT_SECONDS)
        self._body_timeout = settings.get(config.REQUEST_BODY_TIMEOUT_SECONDS)
        self._send_timeout = settings.get(config.SEND_TIMEOUT_SECONDS)
        self._in_progress_limit: int | None = self.limit_concurrency
        self.limit_concurrency = None  # uvicorn's check counts connections: on_headers_complete counts requests in progress
        hub = app_state(self.app, "change_hub")
        self._hub: ChangeHub | None = hub if isinstance(hub, ChangeHub) else None
        lane = app_state(self.app, "fast_lane")
        self._lane: FastLane | None = lane if isinstance(lane, FastLane) else None
        # One log for every answer, the gateway's (CHARTGW_ACCESS_LOG): uvicorn's cycles would log the app's only.
        self.access_log = False
        seen = app_state(self.app, "observability")
        self._observability: Observability | None = seen if isinstance(seen, Observability) else None
        # The request being read.
        self._in_head = True
        self._head_bytes = 0
        self._url_done = False
        self._tail = b""
        """The last bytes of the head (or chunked body) read so far: its empty line may span two reads."""
        self._started = 0.0
        """When the phase the timer watches began: the wait for a head (or the head), or the body."""
        self._body_left: int | None = 0
        """Bytes of the body still to come (its Content-Length); None for a chunked body."""
        self._framed = False
        self._answered = False
        """This request was answered by the fast lane (or refused): its callbacks are not the app's."""
        # The connection.
        self._running: RequestResponseCycle | None = None
        """The request the app is answering (uvicorn's `cycle` is the newest, perhaps queued behind it)."""
        self._timer: asyncio.TimerHandle | None = None
        self._pending: list[bytes] = []
        """Lane answers of the bytes being parsed, written once the parser has accepted them all."""
        self._pending_bytes = 0
        self._stash = b""
        """Bytes read but not parsed while answers wait to be sent (`BACKLOG_BYTES`)."""
        self._unsent = 0
        self._unsent_since = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's own signature
        super().connection_made(transport)
        self._start_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        self._pending, self._pending_bytes, self._stash = [], 0, b""
        self._disconnect()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown (SIGTERM) asks each connection to finish: the change hub's long polls answer
        and its streams end at once, instead of holding the shutdown for up to a minute, or for ever."""
        if self._hub is not None and not self._hub.stopping:
            self._hub.stop()
        super().shutdown()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        self._running = cycle
        super()._start_asgi_task(cycle, app)

    def _drop(self) -> None:
        """Closes the connection at once with a reset, discarding what it has not sent: the answers left here
        and those the kernel holds (a plain close would keep sending them for minutes to a client that does
        not read)."""
        self._disconnect()
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def _disconnect(self) -> None:
        """Tells every request of this connection still being answered that its client is gone, so the app's
        later sends go nowhere (uvicorn tells only the newest, which may be one still queued)."""
        for cycle in (self._running, self.cycle, *(queued for queued, _ in self.pipeline)):
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True
                cycle.message_event.set()

    # Reading: one head, or one body, at a time.

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        if self._stash:
            data, self._stash = self._stash + data, b""
            if len(data) > MAX_STASH_BYTES:
                self._drop()  # pipelines far faster than it reads its answers: not a client we keep
                return
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        pos, end = 0, len(data)
        try:
            if (self._in_head and not self._head_bytes and not self._tail and end <= MAX_URL_BYTES
                    and self._pending_bytes <= BACKLOG_BYTES and not self.flow.write_paused
                    and data.find(EMPTY_LINE) == end - 4):
                # The usual read, one whole head and no more, within every cap: what the loop below does with
                # it, without cutting it up.
                self._head_bytes, self._url_done = end, True
                self.parser.feed_data(data)
                self._flush()
                return
            view = memoryview(data)
            while pos < end:
                if self._in_head:
                    if not self._head_bytes and (self._pending_bytes > BACKLOG_BYTES or self.flow.write_paused):
                        self._stash = data[pos:]  # parsed once the answers before it are taken (`resume_writing`)
                        self._flush()
                        self.flow.pause_reading()
                        if not self.flow.write_paused:  # the socket took them all: no resume_writing will come
                            self.loop.call_soon(self._resume)
                        return
                    stop = self._empty_line_end(data, pos)
                    self._count_head(data, pos, stop)
                elif self._body_left is None:  # chunked: up to an empty line (the last chunk's, or its trailers')
                    stop = self._empty_line_end(data, pos)
                else:  # up to the end of its Content-Length (all of it, should the parser see more body)
                    left = self._body_left
                    stop = min(end, pos + left) if left > 0 else end
                    self._body_left = max(0, left - (stop - pos))
                self.parser.feed_data(view[pos:stop])
                pos = stop
        except _Refused:
            return
        except httptools.HttpParserUpgrade:
            self._flush()
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError:
            if not self.transport.is_closing():  # else a callback refused the request already
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
            return
        self._flush()

    def _empty_line_end(self, data: bytes, pos: int) -> int:
        """Where the empty line ending the head (or chunked body) being read ends in `data`, else its end."""
        if self._tail:
            joined = self._tail + data[pos:pos + 3]
            found = joined.find(EMPTY_LINE)
            if found >= 0:
                stop = pos + found + 4 - len(self._tail)
                self._tail = b""
                return stop
        found = data.find(EMPTY_LINE, pos)
        if found >= 0:
            self._tail = b""
            return found + 4
        self._tail = (self._tail + data[max(pos, len(data) - 3):])[-3:]
        return len(data)

    def _count_head(self, data: bytes, pos: int, stop: int) -> None:
        if not self._url_done:
            newline = data.find(b"\n", pos, stop)
            line = self._head_bytes + (newline if newline >= 0 else stop) - pos
            if line > MAX_URL_BYTES:
                self._refuse(414, "The request URL is too long")
            self._url_done = newline >= 0
        self._head_bytes += stop - pos
        if self._head_bytes > MAX_HEAD_BYTES:
            self._refuse(431, "The request's header fields are too large")

    # Parser callbacks.

    def on_message_begin(self) -> None:
        self._answered = False
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_URL_BYTES:
            self._refuse(414, "The request URL is too long")

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._tail = b""
        # The length of the request's body (0 without one; None when chunked), and whether it declared any framing
        # at all: a request that does is never the lane's, whatever the parser makes of it.
        length: int | None = 0
        framed = False
        for name, value in self.headers:
            if name == b"content-length":
                framed = True
                if length is not None and value.strip().isdigit():
                    length = int(value)
            elif name == b"transfer-encoding":
                framed, length = True, None
        self._body_left, self._framed = length, framed
        if self._body_left != 0:
            self._started = self.loop.time()  # the body's time starts (a request without one is complete now)
        if self.parser.should_upgrade():
            super().on_headers_complete()
            return
        limit = self._in_progress_limit
        if limit is not None and len(self.tasks) >= limit and self._in_progress() >= limit:  # parked counted only near it
            self._answered = True
            self._refuse(503, "Service Unavailable: too many requests in progress, retry shortly")
        reply = self._fast_reply() if self._lane is not None else None
        if reply is None:
            super().on_headers_complete()
            return
        self._answered = True
        self._queue(reply)
        # What uvicorn's on_response_complete does, less arming a keep-alive timer per request: reading was
        # never paused for it, nothing is queued (the lane answers only then), and this connection's timer
        # closes it once it has been idle for the keep-alive timeout (`_tick`).
        self.server_state.total_requests += 1

    def _in_progress(self) -> int:
        """Requests the app is answering, less those parked on the change hub (long polls, streams)."""
        return len(self.tasks) - (self._hub.parked if self._hub is not None else 0)

    def _fast_reply(self) -> Reply | None:
        """The fast lane's answer, for a plain keep-alive HTTP/1.1 GET with no body that nothing else on the
        connection is answering (no response in progress or queued, no write back-pressure); else None."""
        parser = self.parser
        busy = self.cycle is not None and not self.cycle.response_complete
        if (busy or self.pipeline or self._framed or self.flow.write_paused or self.expect_100_continue
                or parser.get_method() != b"GET" or parser.get_http_version() != "1.1" or not parser.should_keep_alive()):
            return None
        raw_path, _, query = self.url.partition(b"?")
        if raw_path[:1] != b"/" or b"%" in raw_path or b"#" in self.url or self.root_path or not raw_path.isascii():
            return None  # absolute forms, fragments, unquoting and mounted paths: uvicorn's and the app's way
        assert self._lane is not None
        return self._lane.reply(raw_path.decode("ascii"), query, self.headers)  # observed by the lane itself

    def on_body(self, body: bytes) -> None:
        if not self._answered:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._answered:
            super().on_message_complete()
        self._start_head()  # the next request on this connection gets its own budget and deadline

    # Writing.

    def _queue(self, reply: Reply) -> None:
        """A lane answer, written by `_flush` once the parser has accepted every byte read with its request."""
        status, headers, body = reply
        defaults = self.server_state.default_headers  # a new list each second (its Date): joined once per list
        joined = LimitedHttpToolsProtocol._joined_defaults  # one tuple, read and replaced whole (servers in threads)
        if joined[0] is not defaults:
            joined = LimitedHttpToolsProtocol._joined_defaults = (
                defaults, b"".join([name + b": " + value + b"\r\n" for name, value in defaults]))
        parts = [STATUS_LINE[status], joined[1], *[name + b": " + value + b"\r\n" for name, value in headers], b"\r\n"]
        if len(body) <= JOIN_MAX:
            parts.append(body)
            self._pending.append(answer := b"".join(parts))
            self._pending_bytes += len(answer)
        else:
            head = b"".join(parts)
            self._pending += (head, body)
            self._pending_bytes += len(head) + len(body)

    def _flush(self) -> None:
        pending = self._pending
        if pending:
            if len(pending) == 1:  # the usual poll: uvloop's write sends at once, its writelines a loop turn later
                self.transport.write(pending[0])
            else:
                self.transport.writelines(pending)  # uvloop sends them with one writev, each buffer uncopied
            pending.clear()
            self._pending_bytes = 0

    def pause_writing(self) -> None:
        super().pause_writing()
        # Answers are piling up: watch whether the client takes them from now on, not from the next tick.
        now = self.loop.time()
        self._unsent, self._unsent_since = self.transport.get_write_buffer_size(), now
        if self._timer is not None and self._timer.when() > now + self._send_timeout / 4:
            self._timer.cancel()
            self._timer = self.loop.call_later(self._send_timeout / 4, self._tick)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stash:
            self.loop.call_soon(self._resume)  # not from inside the transport's write path

    def _resume(self) -> None:
        if not self._stash or self.transport.is_closing() or self.flow.write_paused:
            return
        data, self._stash = self._stash, b""
        self._feed(data)
        if not self._stash and not self.pipeline:
            self.flow.resume_reading()

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, msg, stop=False)

    def _refuse(self, status: int, detail: str, stop: bool = True) -> None:
        """Answers `status` with a JSON body and closes the connection; with `stop`, raises `_Refused` to stop
        parsing (from a callback or the reading loop). Answers of the lane to requests read with this one
        are dropped, as the app's would be (its tasks would write to a closed connection)."""
        self._stop_timer()
        self._pending, self._pending_bytes, self._stash = [], 0, b""
        self._disconnect()
        if not self.transport.is_closing():
            body = b'{"detail":"' + detail.encode() + b'"}'
            rid = request_id(next((value for name, value in self.headers or () if name == REQUEST_ID_HEADER), None))
            self.transport.write(b"".join([
                STATUS_LINE[status], *[name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers],
                b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n" % len(body),
                b"x-request-id: " + rid + b"\r\n\r\n", body]))
            self.transport.close()
            if self._observability is not None:
                self._observability.observer.refused(status, self._method(), len(body), rid)
        if stop:
            raise _Refused

    def _method(self) -> str:
        """The request's method, when its line has been read far enough to tell."""
        try:
            return str(self.parser.get_method().decode("ascii"))
        except (httptools.HttpParserError, UnicodeDecodeError, AttributeError):
            return "OTHER"

    # The one timer of a connection.

    def _start_head(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        self._url_done = False
        self._tail = b""
        self._started = self.loop.time()
        if self._timer is None:  # one timer a connection, not one a request: it checks and re-arms
            self._timer = self.loop.call_later(min(self._head_timeout, self.timeout_keep_alive), self._tick)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        """Closes the connection whose time is up (see the module's docstring), else re-arms for the next limit."""
        self._timer = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        now = self.loop.time()
        unsent = transport.get_write_buffer_size()
        if unsent != self._unsent:  # progress: the client took some, or new answers (written once it had)
            self._unsent, self._unsent_since = unsent, now
        elif unsent and now - self._unsent_since >= self._send_timeout:
            self._drop()
            return
        busy = self.cycle is not None and not self.cycle.response_complete
        due: float | None
        if not self._in_head:
            due = self._started + self._body_timeout
            if now >= due:
                if self.cycle is not None and not self.cycle.response_started and not self._answered:
                    self._refuse(408, f"The request body did not arrive within {self._body_timeout:g}s", stop=False)
                else:
                    transport.close()  # answered already: what is left of its body is not worth waiting for
                return
        elif busy:
            due = None  # the app's time, not the client's
        elif self._head_bytes:
            due = self._started + self._head_timeout
            if now >= due:
                self._refuse(408, f"The request did not arrive within {self._head_timeout:g}s", stop=False)
                return
        elif unsent or self._stash:
            due, self._started = None, now  # waiting for the client to read: idle from when it has
        else:
            due = self._started + min(self._head_timeout, self.timeout_keep_alive)
            if now >= due:
                transport.close()  # a connection that sent nothing within the time
                return
        if unsent:  # looked at often enough to tell when the client last took a byte
            stalled = min(self._unsent_since + self._send_timeout, now + self._send_timeout / 4)
            due = stalled if due is None else min(due, stalled)
        wait = due - now if due is not None else min(self._head_timeout, self.timeout_keep_alive)
        self._timer = self.loop.call_later(max(wait, 0.05), self._tick)


def app_state(app: Any, name: str) -> Any:
    """`state.<name>` of the gateway app `app` is, or wraps (as uvicorn's proxy-headers middleware does); else None."""
    for _ in range(8):
        found = getattr(getattr(app, "state", None), name, None)
        if found is not None:
            return found
        app = getattr(app, "app", None)
        if app is None:
            return None
    return None

