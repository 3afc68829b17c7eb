"""The JSON access log (`chartgw serve --access-log`): one JSON object per line per answer, on standard output.

    {"time":"2026-11-20T05:30:00.123Z","request_id":"5f0c9a1e2b3d-1a","key_id":3,"method":"GET",
     "group":"korea-chart","route":"/korea-chart/charts","status":200,"bytes":3675,"duration_ms":0.041,
     "answered_by":"lane"}

The key's id, never the key; the route's template, never the raw path or query.

The fast lane answers tens of thousands of requests a second, so an answer costs the log one tuple appended to a
list. The lines are made `BATCH_LINES` at a time and joined from bytes made once: the labels' JSON (msgspec, once
per label set), the part with key id, status and size (once per such triple), the time (once per millisecond) and
the duration (once per microsecond value), a third of what formatting each line costs (docs/benchmark.md). They are
written in writes of whole lines: to a pipe or socket at most `PIPE_BYTES` (a pipe's atomic size, so the lines of
several workers never interleave), to a file at most `FILE_BYTES` (a write to a file is made whole), at the latest
`FLUSH_SECONDS` after the first answer of a batch.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections.abc import Callable
from datetime import UTC, datetime

import msgspec

__all__ = ["BATCH_LINES", "FILE_BYTES", "PIPE_BYTES", "AccessLog", "AccessRecord", "stdout_write_bytes"]

PIPE_BYTES = 4096
"""PIPE_BUF on Linux: a write of at most this many bytes to a pipe is never interleaved with another's."""
FILE_BYTES = 64 * 1024
"""Writes to a regular file: one system call per batch rather than per 4 KB (a third of the cost per line)."""
FLUSH_SECONDS = 1.0
BATCH_LINES = 256
"""Answers whose lines are made and written together: what waits is bounded by it (and by `FLUSH_SECONDS`)."""
CACHED = 4096
"""Entries kept of each of the made parts (key id, status and size; durations) before they are made anew."""
Templates = tuple[bytes, bytes]
"""The JSON of one label set: its fields from `method` to `route`, and `answered_by`'s."""
Entry = tuple[Templates, float, bytes, int | None, int, int, float]
"""An answer waiting for its line: labels, time, request id, key id, status, bytes, seconds."""


class AccessRecord(msgspec.Struct):
    """A line's fields, in its order."""

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


def stdout_write_bytes() -> int:
    """How large a write of whole lines to standard output may be: `FILE_BYTES` to a file, else `PIPE_BYTES`."""
    try:
        return FILE_BYTES if stat.S_ISREG(os.fstat(1).st_mode) else PIPE_BYTES
    except OSError:
        return PIPE_BYTES


class AccessLog:
    def __init__(self, write: Callable[[bytes], None] = write_stdout, clock: Callable[[], float] = time.time,
                 flush_bytes: int | None = None, flush_seconds: float = FLUSH_SECONDS,
                 batch_lines: int = BATCH_LINES) -> None:
        self.write = write
        self.clock = clock
        self.flush_bytes = stdout_write_bytes() if flush_bytes is None else flush_bytes
        self.flush_seconds = flush_seconds
        self.batch_lines = batch_lines
        self._waiting: list[Entry] = []
        self._encode = msgspec.json.Encoder().encode
        self._templates: dict[tuple[str, str, str, str], Templates] = {}
        self._middles: dict[tuple[Templates, int | None, int, int], tuple[bytes, bytes]] = {}
        self._durations: dict[int, bytes] = {}
        self._second = -1
        self._stamp = b""
        self._timed = False

    def record(self, request_id: bytes, key_id: int | None, method: str, group: str, route: str, status: int,
               nbytes: int, seconds: float, answered_by: str) -> None:
        """One answer's line. `request_id` is one `chartgw.http.observe.request_id` gave (letters, digits and
        `-_.:/+=@~` only, so it goes into the line as it is)."""
        templates = self._templates.get((method, group, route, answered_by))
        if templates is None:
            templates = self._templates[(method, group, route, answered_by)] = self.templates(method, group, route,
                                                                                            answered_by)
        self.line(templates, request_id, key_id, status, nbytes, seconds)

    def templates(self, method: str, group: str, route: str, answered_by: str) -> Templates:
        """The JSON of one label set, encoded (msgspec) once per set, not once per line (the fast lane keeps its
        endpoints' own)."""
        fields = self._encode(AccessRecord("", "", None, method, group, route, 0, 0, 0.0, answered_by))
        return fields[fields.index(b'"method":'):fields.index(b',"status":')], fields[fields.index(b'"answered_by":'):-1]

    def line(self, templates: Templates, request_id: bytes, key_id: int | None, status: int, nbytes: int,
             seconds: float) -> None:
        """One answer's line, made and written with the batch it joins."""
        waiting = self._waiting
        waiting.append((templates, self.clock(), request_id, key_id, status, nbytes, seconds))
        if len(waiting) >= self.batch_lines:
            self.flush()
        elif not self._timed:
            self._schedule()

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
        """Makes the waiting answers' lines and writes them, in writes of whole lines up to `flush_bytes`."""
        if not self._waiting:
            return
        waiting, self._waiting = self._waiting, []
        middles, durations = self._middles, self._durations
        if len(middles) > CACHED:
            middles.clear()
        if len(durations) > CACHED:
            durations.clear()
        pieces: list[bytes] = []
        size = 0
        milli, stamp = -1, b""
        for templates, now, request_id, key_id, status, nbytes, seconds in waiting:
            middle = middles.get((templates, key_id, status, nbytes))
            if middle is None:
                middle = middles[(templates, key_id, status, nbytes)] = (
                    b'","key_id":%s,%s,"status":%d,"bytes":%d,"duration_ms":' % (
                        b"null" if key_id is None else b"%d" % key_id, templates[0], status, nbytes),
                    b",%s}\n" % templates[1])
            if int(now * 1000) != milli:
                milli = int(now * 1000)
                stamp = b'{"time":"%s.%03dZ","request_id":"' % (self._date(milli // 1000), milli % 1000)
            micros = int(seconds * 1_000_000 + 0.5)  # rounded, as "%.3f" of the milliseconds
            duration = durations.get(micros)
            if duration is None:
                duration = durations[micros] = b"%d.%03d" % divmod(micros, 1000)
            length = len(stamp) + len(request_id) + len(middle[0]) + len(duration) + len(middle[1])
            if pieces and size + length > self.flush_bytes:
                self.write(b"".join(pieces))
                pieces, size = [], 0
            pieces += (stamp, request_id, middle[0], duration, middle[1])
            size += length
        self.write(b"".join(pieces))

    def _date(self, second: int) -> bytes:
        """The date and time to the second, formatted once a second."""
        if second != self._second:
            self._second = second
            self._stamp = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S").encode()
        return self._stamp
