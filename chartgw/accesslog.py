"""The JSON access log (`chartgw serve --access-log`): one JSON object per line per answer, on standard output.

    {"time":"2026-11-20T05:30:00.123Z","request_id":"5f0c9a1e2b3d-1a","key_id":3,"method":"GET",
     "group":"korea-chart","route":"/korea-chart/charts","status":200,"bytes":3675,"duration_ms":0.041,
     "answered_by":"lane"}

The key's id, never the key; the route's template, never the raw path or query. The fast lane answers tens of
thousands of requests a second, so a line costs one bytes format and a list append (the labels' JSON is encoded
by msgspec once per label set, the date once a second): lines are written in
batches, when they would pass `FLUSH_BYTES` (one write of whole lines, at most a pipe's atomic size, so the
lines of several workers never interleave) and at most `FLUSH_SECONDS` after the first line of a batch.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

import msgspec

__all__ = ["FLUSH_BYTES", "AccessLog", "AccessRecord"]

FLUSH_BYTES = 4096
"""PIPE_BUF on Linux: a write of at most this many bytes to a pipe is never interleaved with another's."""
FLUSH_SECONDS = 1.0
LINE = (b'{"time":"%%s.%%03dZ","request_id":"%%s","key_id":%s,%s,"status":%%d,"bytes":%%d,"duration_ms":%%.3f,%s}\n')
"""A line, with the fields of `AccessRecord` in its order: the key id and the labels filled once per label set
(`AccessLog.templates`), the rest per answer."""
Templates = tuple[bytes, bytes]


class AccessRecord(msgspec.Struct):
    time: str
    request_id: str
    key_id: int | None
    method: str
    group: str
    route: str
    status: int
    bytes: int
    duration_ms: float
    answered_by: str


def write_stdout(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


class AccessLog:
    def __init__(self, write: Callable[[bytes], None] = write_stdout, clock: Callable[[], float] = time.time,
                 flush_bytes: int = FLUSH_BYTES, flush_seconds: float = FLUSH_SECONDS) -> None:
        self.write = write
        self.clock = clock
        self.flush_bytes = flush_bytes
        self.flush_seconds = flush_seconds
        self._lines: list[bytes] = []
        self._size = 0
        self._encode = msgspec.json.Encoder().encode
        self._second = -1
        self._stamp = b""
        self._templates: dict[tuple[str, str, str, str], Templates] = {}
        self._timed = False

    def record(self, request_id: bytes, key_id: int | None, method: str, group: str, route: str, status: int,
               nbytes: int, seconds: float, answered_by: str) -> None:
        """One answer's line. `request_id` is one `chartgw.observe.request_id` gave (letters, digits and
        `-_.:/+=@~` only, so it goes into the line as it is)."""
        templates = self._templates.get((method, group, route, answered_by))
        if templates is None:
            templates = self._templates[(method, group, route, answered_by)] = self.templates(method, group, route,
                                                                                            answered_by)
        self.line(templates, request_id, key_id, status, nbytes, seconds)

    def templates(self, method: str, group: str, route: str, answered_by: str) -> Templates:
        """The lines of one label set, to fill with `line`, with a key id and without: the labels' JSON is encoded
        (msgspec) once per set, not once per line (the fast lane keeps its endpoints' own)."""
        fields = self._encode(AccessRecord("", "", None, method, group, route, 0, 0, 0.0, answered_by))
        head = fields[fields.index(b'"method":'):fields.index(b',"status":')].replace(b"%", b"%%")
        tail = fields[fields.index(b'"answered_by":'):-1].replace(b"%", b"%%")
        return (LINE % (b"%d", head, tail), LINE % (b"null", head, tail))

    def line(self, templates: Templates, request_id: bytes, key_id: int | None, status: int, nbytes: int,
             seconds: float) -> None:
        now = self.clock()
        second = int(now)
        if second != self._second:  # the date and time are formatted once a second
            self._second = second
            self._stamp = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S").encode()
        if key_id is None:
            line = templates[1] % (self._stamp, int((now - second) * 1000), request_id, status, nbytes, seconds * 1000)
        else:
            line = templates[0] % (self._stamp, int((now - second) * 1000), request_id, key_id, status, nbytes,
                                   seconds * 1000)
        if self._size + len(line) > self.flush_bytes:
            self.flush()
        if not self._timed:
            self._schedule()
        self._lines.append(line)
        self._size += len(line)

    def _schedule(self) -> None:
        """One timer at a time flushes what is waiting `flush_seconds` after it was armed."""
        try:
            asyncio.get_running_loop().call_later(self.flush_seconds, self._flush_timed)
        except RuntimeError:  # no event loop: lines wait for a full batch or `flush()`
            return
        self._timed = True

    def _flush_timed(self) -> None:
        self._timed = False
        self.flush()

    def flush(self) -> None:
        if self._lines:
            lines, self._lines, self._size = self._lines, [], 0
            self.write(b"".join(lines))
