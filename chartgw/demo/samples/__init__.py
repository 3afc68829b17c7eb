"""Sample charts for the demo data and the tests.

Korean rows come from a real 2026 capture of three Korean sites (`korea-songs.json`), global rows
from a real charts.spotify.com download plus Korean titles (`global-songs.json`); renderers in the
sibling modules write them out in each upstream's real page or payload format, so the real
crawlers and parsers read them exactly as they read the live sites.
"""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Generic, TypeVar


@dataclass(frozen=True)
class SampleSong:
    title: str
    artists: tuple[str, ...]
    album: str
    song_id: str
    album_id: str
    artist_ids: tuple[str, ...]


@dataclass(frozen=True)
class GlobalSong:
    title: str
    artists: tuple[str, ...]
    label: str | None
    spotify_id: str | None
    """A real Spotify track id for the first 200 songs; None for the Korean extras."""
    streams: int | None
    """The song's weekly streams in the captured chart; None for the Korean extras."""


Song = TypeVar("Song", SampleSong, GlobalSong)


@dataclass(frozen=True)
class SampleRow(Generic[Song]):
    rank: int
    previous_rank: int | None
    """None for a song that was not on the previous chart (a new entry)."""
    song: Song

    @property
    def rank_change(self) -> int | None:
        return None if self.previous_rank is None else self.previous_rank - self.rank


def _stable_id(base: int, *parts: str) -> str:
    return str(base + zlib.crc32("|".join(parts).encode()) % 9_000_000)


@cache
def song_pool(spelling: str) -> tuple[SampleSong, ...]:
    """All songs spelled as site `spelling` ("melon", "bugs" or "flo") spells them, its own chart first."""
    data = json.loads(resources.files(__package__).joinpath("korea-songs.json").read_text("utf-8"))["sites"]
    own = data[spelling]
    titles = {row["title"] for row in own}
    extras = [row for site, rows in data.items() if site != spelling for row in rows if row["title"] not in titles]
    songs: dict[str, SampleSong] = {}
    for row in own + extras:
        if row["title"] in songs:
            continue
        artists = tuple(row["artists"])
        songs[row["title"]] = SampleSong(
            title=row["title"],
            artists=artists,
            album=row["album"],
            song_id=_stable_id(30_000_000, row["title"], *artists),
            album_id=_stable_id(10_000_000, row["album"]),
            artist_ids=tuple(_stable_id(800_000, a) for a in artists),
        )
    return tuple(songs.values())


@cache
def global_songs() -> tuple[GlobalSong, ...]:
    """The global sample pool: 200 songs of a real Spotify global chart, then 20 Korean titles."""
    data = json.loads(resources.files(__package__).joinpath("global-songs.json").read_text("utf-8"))["songs"]
    return tuple(GlobalSong(s["title"], tuple(s["artists"]), s["label"], s["spotify_id"], s["streams"]) for s in data)


def _step(order: list[Song], size: int, rng: random.Random) -> list[Song]:
    """The next chart: some songs move a few places, three from outside the top `size` enter."""
    nxt = list(order)
    for _ in range(12):
        i = rng.randrange(size)
        j = max(0, min(size - 1, i + rng.randint(-6, 6)))
        nxt.insert(j, nxt.pop(i))
    for _ in range(3):
        nxt.insert(rng.randrange(size), nxt.pop(rng.randrange(size, len(nxt))))
    return nxt


def sample_rows(spelling: str, chart_key: str, variant: int = 0, size: int = 100) -> list[SampleRow[SampleSong]]:
    """Rows of a Korean sample chart, songs spelled as site `spelling` spells them."""
    return chart_rows(list(song_pool(spelling)), f"{spelling}/{chart_key}", chart_key, variant, size)


def global_rows(chart_key: str, variant: int = 0, size: int = 100) -> list[SampleRow[GlobalSong]]:
    """Rows of a global sample chart (any group's), from `global_songs()`; at most 217 rows."""
    return chart_rows(list(global_songs()), f"global/{chart_key}", chart_key, variant, size)


def chart_rows(pool: list[Song], seed: str, chart_key: str, variant: int, size: int) -> list[SampleRow[Song]]:
    """Rows of a sample chart drawn from `pool`. `variant` n+1 is the chart after n, so ranks and
    changes line up over time; the same arguments always give the same chart."""
    size = min(size, len(pool) - 3)
    rng = random.Random(seed)
    shift = zlib.crc32(chart_key.encode()) % 30
    order = pool[shift:size] + pool[:shift] + pool[size:]
    previous = order
    current = _step(order, size, rng)
    for _ in range(variant):
        previous, current = current, _step(current, size, rng)
    previous_rank = {song.title: rank for rank, song in enumerate(previous[:size], start=1)}
    return [
        SampleRow(rank=rank, previous_rank=previous_rank.get(song.title), song=song)
        for rank, song in enumerate(current[:size], start=1)
    ]
