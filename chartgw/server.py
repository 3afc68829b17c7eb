"""The HTTP server as `chartgw serve` runs it, with no proxy in front: uvicorn's httptools protocol with
limits on what a client may send before the app sees a request.

- The request head (request line and headers) is capped: a URL that alone passes the cap is a 414, a
  header block that does is a 431, and neither is read further.
- A request head must arrive within `CHARTGW_REQUEST_HEAD_TIMEOUT_SECONDS` of the connection (or of the
  previous request's end),
  so connections that trickle bytes are closed with a 408 instead of being held open forever.
- Connections beyond `chartgw serve --limit-concurrency` are answered 503 by uvicorn itself.
Every refusal is a JSON body, like every other error the gateway gives.

A repeated GET of a cached body is answered from the head alone by the app's fast lane
(`chartgw.fastlane`), written in the bytes uvicorn would write for the app's own answer. A connection
that sends nothing after an answer is closed after the keep-alive timeout (`timeout_keep_alive`), by the
same per-connection timer that watches heads.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from chartgw import config
from chartgw.fastlane import FastLane, Reply, find_lane

__all__ = ["MAX_HEAD_BYTES", "MAX_URL_BYTES", "LimitedHttpToolsProtocol"]

MAX_HEAD_BYTES = 32 * 1024
"""The request line and all headers together; browsers and clients send a few KB."""
MAX_URL_BYTES = 8 * 1024


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol` that counts the bytes of each request head and times its arrival."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        self._in_head = True
        self._url_done = False
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_started = 0.0
        self._head_timeout = config.get(config.REQUEST_HEAD_TIMEOUT_SECONDS)
        # Off under uvicorn's own text access log, which would not see the lane's answers (the gateway's JSON log,
        # `chartgw serve --access-log`, logs both: chartgw.observe).
        self._lane: FastLane | None = None if self.config.access_log else find_lane(self.app)
        self._answered = False
        """This request was answered by the fast lane: its body (if any) is not the app's to read."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's own signature
        super().connection_made(transport)
        self._start_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            before = self._head_bytes
            self._head_bytes += len(data)
            if not self._url_done:
                end = data.find(b"\n")
                line = before + end if end >= 0 else self._head_bytes
                if line > MAX_URL_BYTES:
                    self._refuse(414, "The request URL is too long")
                    return
                self._url_done = end >= 0
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(431, "The request's header fields are too large")
                return
        super().data_received(data)

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_URL_BYTES:
            self._refuse(414, "The request URL is too long")

    def on_message_begin(self) -> None:
        self._answered = False
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._in_head = False
        reply = self._fast_reply() if self._lane is not None else None
        if reply is None:
            super().on_headers_complete()
            return
        self._answered = True
        status, headers, body = reply
        self.transport.write(b"".join([STATUS_LINE[status], *[name + b": " + value + b"\r\n" for name, value in
                                                               (*self.server_state.default_headers, *headers)],
                                       b"\r\n", body]))
        # What uvicorn's on_response_complete does, less arming a keep-alive timer per request: reading was
        # never paused, nothing is queued (the lane answers only then), and this connection's head timer
        # closes it once it has been idle for the keep-alive timeout (`_check_head`).
        self.server_state.total_requests += 1

    def _fast_reply(self) -> Reply | None:
        """The fast lane's answer, for a plain keep-alive HTTP/1.1 GET that nothing else on the connection
        is answering (no response in progress or queued, no write back-pressure); else None."""
        parser = self.parser
        busy = self.cycle is not None and not self.cycle.response_complete
        if (busy or self.pipeline or self.flow.write_paused or self.expect_100_continue or parser.get_method() != b"GET"
                or parser.get_http_version() != "1.1" or not parser.should_keep_alive() or parser.should_upgrade()):
            return None
        raw_path, _, query = self.url.partition(b"?")
        if raw_path[:1] != b"/" or b"%" in raw_path or b"#" in self.url or self.root_path or not raw_path.isascii():
            return None  # absolute forms, fragments, unquoting and mounted paths: uvicorn's and the app's way
        assert self._lane is not None
        return self._lane.reply(raw_path.decode("ascii"), query, self.headers)

    def on_body(self, body: bytes) -> None:
        if not self._answered:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._answered:
            super().on_message_complete()
        self._start_head()  # the next request on this connection gets its own budget and deadline

    def _start_head(self) -> None:
        self._head_bytes = 0
        self._in_head = True
        self._url_done = False
        self._head_started = self.loop.time()
        if self._head_timer is None:  # one timer a connection, not one a request: it checks and re-arms
            self._head_timer = self.loop.call_later(self._idle_timeout(), self._check_head)

    def _idle_timeout(self) -> float:
        return min(self._head_timeout, self.timeout_keep_alive)

    def _stop_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _check_head(self) -> None:
        self._head_timer = None
        if self.transport is None or self.transport.is_closing():
            return
        waited = self.loop.time() - self._head_started
        busy = self.cycle is not None and not self.cycle.response_complete
        # A connection that has sent nothing since its last answer is closed after the keep-alive timeout
        # (answers of the fast lane arm no keep-alive timer of uvicorn's); a started head gets the head timeout.
        limit = self._idle_timeout() if not self._head_bytes else self._head_timeout
        if not self._in_head or busy or waited < limit:
            self._head_timer = self.loop.call_later(max(limit - waited, 0.05) if self._in_head and not busy
                                                    else self._idle_timeout(), self._check_head)
            return
        if self._head_bytes:
            self._refuse(408, f"The request did not arrive within {self._head_timeout:g}s")
        else:
            self.transport.close()  # a connection that sent nothing within the time

    def _refuse(self, status: int, detail: str) -> None:
        self._stop_timer()
        if self.transport is None or self.transport.is_closing():
            return
        body = b'{"detail":"' + detail.encode() + b'"}'
        self.transport.write(b"".join([
            STATUS_LINE[status], b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n", b"connection: close\r\n\r\n", body]))
        self.transport.close()
