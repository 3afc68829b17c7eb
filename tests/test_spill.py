"""`chartgw.http.spill`: large answers handed to granian as files (bounded memory for unread answers under RSGI),
and the RSGI adapter's use of them (`chartgw.http.rsgi`), with an in-process stand-in for granian's protocol object."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

from chartgw.http.rsgi import _Reply
from chartgw.http.spill import GRACE_SECONDS, PREFIX, Spill


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_file_per_etag_and_coding_written_once(tmp_path: Path) -> None:
    spill = Spill(tmp_path / "answers", clock=Clock())
    body = b"x" * 300_000

    async def run() -> list[str]:
        return list(await asyncio.gather(spill.path('"abc"', None, body), spill.path('"abc"', None, body),
                                         spill.path('"abc"', "gzip", b"zipped")))

    plain, again, zipped = asyncio.run(run())
    assert plain == again != zipped
    assert Path(plain).read_bytes() == body and Path(zipped).read_bytes() == b"zipped"
    assert sorted(p.name for p in (tmp_path / "answers").iterdir()) == sorted([Path(plain).name, Path(zipped).name])
    spill.close()
    assert not (tmp_path / "answers").exists()


def test_files_past_the_caps_go_once_unused_for_the_grace(tmp_path: Path) -> None:
    clock = Clock()
    folder = tmp_path / "answers"
    spill = Spill(folder, max_files=2, max_bytes=10_000, clock=clock)

    def put(tag: str, size: int = 10) -> str:
        return asyncio.run(spill.path(tag, None, b"y" * size))

    first = put('"1"')
    put('"2"')
    put('"3"')  # past max_files, but "1" was answered just now: kept
    assert Path(first).exists() and len(spill) == 3
    clock.now += GRACE_SECONDS
    put('"4"')
    assert not Path(first).exists() and len(spill) == 2  # the two oldest, unused for the grace, are gone
    clock.now += GRACE_SECONDS
    big = put('"5"', 20_000)  # past max_bytes alone: the others go, the newest stays
    assert Path(big).exists() and len(spill) == 1 and spill.size == 20_000


class Protocol:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def response_file(self, status: int, headers: list[tuple[str, str]], path: str) -> None:
        self.calls.append(("file", status, headers, path))

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.calls.append(("bytes", status, headers, body))


def test_the_apps_file_answers_and_large_bodies_are_handed_over_as_files(tmp_path: Path) -> None:
    """A FileResponse's pathsend is granian's response_file; a whole body past JOIN_MAX goes through `large`."""
    protocol = Protocol()
    handed: list[tuple[int, bytes]] = []

    async def large(protocol: Any, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        handed.append((status, body))

    async def run() -> None:
        reply = _Reply(protocol, lambda status, size: b"rid", 5.0, large)  # type: ignore[arg-type]
        await reply.send({"type": "http.response.start", "status": 200, "headers": [(b"etag", b'"e"')]})
        await reply.send({"type": "http.response.pathsend", "path": "/exports/x.sqlite"})
        other = _Reply(protocol, lambda status, size: b"rid", 5.0, large)  # type: ignore[arg-type]
        await other.send({"type": "http.response.start", "status": 200, "headers": []})
        await other.send({"type": "http.response.body", "body": b"z" * 200_000})

    asyncio.run(run())
    assert protocol.calls == [("file", 200, [("etag", '"e"')], "/exports/x.sqlite")]
    assert handed == [(200, b"z" * 200_000)]


def test_a_killed_workers_folder_is_removed_by_the_next(tmp_path: Path) -> None:
    """A worker killed before `close` leaves its folder; the next worker to start removes it (its pid is gone),
    never a running worker's."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = tmp_path / f"{PREFIX}{dead.pid}-abc"
    orphan.mkdir()
    (orphan / "x").write_bytes(b"1")
    alive = tmp_path / f"{PREFIX}{os.getpid()}-def"
    alive.mkdir()
    spill = Spill(parent=tmp_path)
    try:
        assert not orphan.exists() and alive.exists() and spill.folder.parent == tmp_path
        assert spill.folder.name.startswith(f"{PREFIX}{os.getpid()}-")
    finally:
        spill.close()
