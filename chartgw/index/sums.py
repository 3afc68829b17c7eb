"""`artist_tracks` summed again from `appearance_artists` (a bulk build's end, or a run after one that was killed).

A large run's sums are made by other processes, into scratch files beside the index (one set per indexer: two may
end at once), then copied in, in key order. A bulk build writes each group's charts whole before the next group's
(no later group adds to a chart), so the charts written so far are summed as soon as a group is done, at idle
priority, in the CPU time the writer and the readers leave; the rest while the writer keeps the run's identity
links. The 10M-row benchmark's sums took 8.3 s of the writer's time, then (one process at the end) kept the writer
waiting 3.5 s after its links; in parts (/streaming's charts first), the writer does not wait for them, and copying
the parts in takes 0.8-1.3 s. (A thread would not do: each artist's statement waited for the GIL the linking held.
Sums of each group at the readers' priority took the CPU the next groups' readers needed.)
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from chartgw.index import tables as q
from chartgw.store.connect import connect, transaction

__all__ = ["END", "SUMS_ASIDE_SNAPSHOTS", "ArtistSums", "sums_main"]

SUMS_ASIDE_SNAPSHOTS = 20_000
"""A run that read this many snapshots sums in a process of its own (a smaller one sums in this one: a process
costs more than it saves)."""


class ArtistSums:
    """Sums every artist's rows by chart and track into scratch files beside the index, `<index>.sums<n>-<pid>` (files
    of their own: making them takes no lock of the index's); `write` then puts them in the index's `artist_tracks`.
    Until then `meta.artist_tracks` is 'stale' and coverage counts the rows themselves.

    With `aside`, the sums are made in parts, each by a process of its own into a file of its own, each part the
    charts numbered from where the last ended: `begin` starts a part for the charts a bulk build has written whole
    (its groups done) at idle priority, in the CPU time the writer and the readers leave, unless a part still runs;
    `finish` starts the last part, the charts left, while the writer keeps its identity links. Without it, the sums
    are made in this process, at `write`."""

    def __init__(self, index: Path, *, aside: bool) -> None:
        self.index, self.aside = index, aside
        _remove_orphans(index)
        self.summed = 1
        """The charts numbered from here on are in no part yet."""
        self.parts: list[tuple[Path, subprocess.Popen[bytes] | None]] = []
        self.failed: str | None = None

    def begin(self, below: int) -> None:
        """A part for the charts numbered below `below` (their rows final: no later group writes them), unless one
        still runs (the next part takes them)."""
        if self.aside and below > self.summed and all(p is None or p.poll() is not None for _, p in self.parts):
            self._start(below, idle=True)

    def finish(self) -> None:
        """The last part, the charts left (started now: it runs while the writer does the rest of its end)."""
        if self.aside and self.summed < END:
            self._start(END, idle=False)

    def write(self, db: sqlite3.Connection) -> None:
        """Wait for the parts (or make the sums here), then replace `artist_tracks` with them (in the writer's
        connection, outside a transaction). A part that failed raises its error; the sums stay 'stale'."""
        if not self.aside:
            self.parts.append((self._path(), None))
            _sum(self.index, self.parts[-1][0], self.summed, END)
            self.summed = END
        self.finish()
        for number, (_, process) in enumerate(self.parts):
            self._ended(number, process)
        if self.failed is not None:
            raise sqlite3.OperationalError(self.failed)
        for number, (path, _) in enumerate(self.parts):
            db.execute(q.ATTACH_ASIDE.sql, (str(path),))
            try:
                with transaction(db):  # 'stale' until the last part is in: an interrupted copy is summed again
                    if number == 0:
                        db.execute(q.CLEAR_ARTIST_TRACKS.sql)
                    db.execute(q.COPY_ARTIST_SUMS.sql)
                    if number == len(self.parts) - 1:
                        db.execute(q.ARTIST_TRACKS_OK.sql)
            finally:
                db.execute(q.DETACH_ASIDE.sql)

    def close(self) -> None:
        """Stop the parts still running (the run failed first) and remove the scratch files."""
        for path, process in self.parts:
            if process is not None:
                if process.poll() is None:
                    process.kill()
                process.wait()
                if process.stderr is not None:
                    process.stderr.close()
            path.unlink(missing_ok=True)
        self.parts = [(path, None) for path, _ in self.parts]

    def _path(self) -> Path:
        return self.index.with_name(f"{self.index.name}.sums{len(self.parts)}-{os.getpid()}")

    def _start(self, below: int, *, idle: bool) -> None:
        path = self._path()
        process = subprocess.Popen(
            [sys.executable, "-c", "from chartgw.index.sums import sums_main; sums_main()", str(self.index),
             str(path), str(self.summed), str(below), "idle" if idle else ""],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.parts.append((path, process))
        self.summed = below

    def _ended(self, number: int, process: subprocess.Popen[bytes] | None) -> None:
        """Wait for a part's process; its failure kept in `failed`."""
        if process is None:
            return
        assert process.stderr is not None
        error = process.stderr.read()  # until the process ends
        process.stderr.close()
        if process.wait() != 0 and self.failed is None:
            lines = error.decode(errors="replace").strip().splitlines()
            self.failed = f"the artist sums process failed ({process.returncode}): {lines[-1] if lines else 'no message'}"
        self.parts[number] = (self.parts[number][0], None)


END = 1 << 62
"""Past every chart's number."""


def sums_main() -> None:
    """A part's process: argv is the index file (only read), the part's scratch file, the charts' numbers from and
    below, and "idle" to run at idle priority."""
    index, path, first, below, idle = sys.argv[1:6]
    if idle:  # only the CPU time no other process wants
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except (AttributeError, OSError):  # not Linux
            os.nice(19)
    _sum(Path(index), Path(path), int(first), int(below))


def _sum(index: Path, path: Path, first: int, below: int) -> None:
    """The sums of the charts numbered from `first` up to `below` into the scratch file `path`, the index attached
    (only read: its writer writes meanwhile, and the rows of these charts are final)."""
    path.unlink(missing_ok=True)
    out = connect(path, synchronous="OFF", wal=False)
    try:
        out.executescript(q.ARTIST_SUMS_SCRIPT)
        out.execute(q.ATTACH_ASIDE.sql, (str(index),))
        with transaction(out, immediate=False):  # IMMEDIATE would wait for the index's writer
            for (artist_id,) in out.execute(q.ARTIST_IDS.sql).fetchall():
                out.execute(q.SUM_ARTIST_ASIDE.sql, (artist_id, first, below))
    finally:
        out.close()


def _remove_orphans(index: Path) -> None:
    """The scratch files of killed indexers (their process is gone), and this process's own of an earlier run."""
    for path in index.parent.glob(f"{index.name}.sums*-*"):
        pid = path.name.rpartition("-")[2]
        if not pid.isdigit():
            continue
        if int(pid) != os.getpid():
            try:
                os.kill(int(pid), 0)
                continue  # another indexer's, ending now
            except PermissionError:
                continue  # a process of another user's
            except (ProcessLookupError, OverflowError):
                pass
        with contextlib.suppress(OSError):
            path.unlink()
