"""`artist_tracks` summed again from `appearance_artists` (a bulk build's end, or a run after one that was killed).

A large run's sums are made by a second process, into a scratch file beside the index (one per indexer: two may end
at once), while the writer keeps the run's identity links; then copied in, in key order, in one transaction. The
10M-row benchmark's sums took 8.3 s of the writer's time; the copy takes 0.6 s. (A thread would not do: each
artist's statement waited for the GIL the linking held. Sums of a group made as soon as it was written took the
CPU the next groups' readers needed.)
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

__all__ = ["SUMS_ASIDE_SNAPSHOTS", "ArtistSums", "sums_main"]

SUMS_ASIDE_SNAPSHOTS = 20_000
"""A run that read this many snapshots sums in a process of its own (a smaller one sums in this one: a process
costs more than it saves)."""


class ArtistSums:
    """Sums every artist's rows by chart and track into `<index>.sums-<pid>` (a file of its own: making them takes no
    lock of the index's), in a process started now when `aside`; `write` waits for them (or makes them) and puts
    them in the index's `artist_tracks`. Until then `meta.artist_tracks` is 'stale' and coverage counts the rows
    themselves."""

    def __init__(self, index: Path, *, aside: bool) -> None:
        self.index, self.path = index, index.with_name(f"{index.name}.sums-{os.getpid()}")
        _remove_orphans(index)
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from chartgw.index.sums import sums_main; sums_main()", str(index), str(self.path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) if aside else None

    def write(self, db: sqlite3.Connection) -> None:
        """Replace `artist_tracks` with the sums (in the writer's connection, outside a transaction)."""
        if self.process is None:
            _sum(self.index, self.path)
        else:
            assert self.process.stderr is not None
            error = self.process.stderr.read()  # until the process ends
            if self.process.wait() != 0:
                lines = error.decode(errors="replace").strip().splitlines()
                raise sqlite3.OperationalError(f"the artist sums process failed ({self.process.returncode}): "
                                               f"{lines[-1] if lines else 'no message'}")
        db.execute(q.ATTACH_ASIDE.sql, (str(self.path),))
        try:
            with transaction(db):
                db.execute(q.CLEAR_ARTIST_TRACKS.sql)
                db.execute(q.COPY_ARTIST_SUMS.sql)
                db.execute(q.ARTIST_TRACKS_OK.sql)
        finally:
            db.execute(q.DETACH_ASIDE.sql)

    def close(self) -> None:
        """Stop the process if it still runs (the run failed first) and remove the scratch file."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            if self.process.stderr is not None:
                self.process.stderr.close()
        self.path.unlink(missing_ok=True)


def sums_main() -> None:
    """The sums process: argv is the index file (only read) and the scratch file to write."""
    _sum(Path(sys.argv[1]), Path(sys.argv[2]))


def _sum(index: Path, path: Path) -> None:
    """The sums into the scratch file `path`, the index attached (only read: its writer links meanwhile)."""
    path.unlink(missing_ok=True)
    out = connect(path, synchronous="OFF", wal=False)
    try:
        out.executescript(q.ARTIST_SUMS_SCRIPT)
        out.execute(q.ATTACH_ASIDE.sql, (str(index),))
        with transaction(out, immediate=False):  # IMMEDIATE would wait for the index's writer
            for (artist_id,) in out.execute(q.ARTIST_IDS.sql).fetchall():
                out.execute(q.SUM_ARTIST_ASIDE.sql, (artist_id,))
    finally:
        out.close()


def _remove_orphans(index: Path) -> None:
    """The scratch files of killed indexers (their process is gone), and this process's own of an earlier run."""
    for path in index.parent.glob(f"{index.name}.sums-*"):
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
