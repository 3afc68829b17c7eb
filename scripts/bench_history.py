"""The /artist-history-api benchmark: a synthetic index of N rows (default 10M), built and served for real.

    scripts/bench_history [--rows N] [--work DIR] [--keep] [--requests N] [--skip-generate | --serve-only]
                          [--cache-mb N] [--explain-memory] [--smoke]

1. Writes synthetic snapshot files for four groups (/streaming: 40 countries' daily top 200 and the global
   one; /digital-sales: 10 storefronts' top 100 songs; /korea-chart: three daily top 100s and an hourly
   realtime top 100; /uk-charts: the weekly singles top 100), day after day back from 2026-11-20 until the
   index would hold N rows. Titles and artists come from the sample pools (chartgw.demo.samples: the real global
   and Korean charts' songs and credits, "DAY6 (데이식스)" included), extended by a synthetic tail of artists;
   popularity is Zipf-like (weight 1/(i+5)), so a few artists hold 100k+ rows of a 10M index. One track in
   ten credits a second artist ("A & B", "A feat. B" or "(feat. B)" in the title). Records have the
   groups' real stored shapes. Deterministic (a fixed seed).
2. Builds the index with `chartgw index artist-history-api` (a fresh build, the real CLI's code path, run in a
   child as `bench_history.py --timed-index OUT [PROFILE]`) and reports its rate (index rows per second of wall time
   and of CPU time), the file size and the rows of the heaviest artists; and identity's linking, which the build
   runs as it writes each new variant (`chartgw.index.identity.links.Linking.link`: a variant's recording is the
   track its rows are kept under) and whose links it keeps at its end (`links.link_new`), both timed where the build
   calls them: the variants
   linked, the recordings they make, its wall and CPU seconds, and the index rows and variants per second. With
   PROFILE the child writes a cProfile of the whole build (read it with `python -m pstats PROFILE`).
3. Starts `chartgw serve --workers 1` over that data folder and measures over HTTP, one request at a time
   on a kept-alive connection: the first page of the heaviest artist at limit=100 and at the default 5000,
   a deep cursor page (limit 100 after 100,000 rows), coverage, and the plot of a 5000-row page; p50 and p90
   of --requests requests each. Every measured request is a response-cache miss: each repeats the query with
   a different `since` before the first chart date (the same rows, another cache key). Then the server's RSS
   (idle, after the pages, after the deep walks whose 50,000-row pages the response cache keeps), each split
   into anonymous memory (the heap) and file pages (from /proc/PID/smaps_rollup).
   Then the /identity routes on the heaviest recording (the catalogue's first track, found by its Spotify id on
   /streaming) and its first artist: /identity/lookup by its Spotify id and by its Apple id (/digital-sales),
   its /identity/recordings page, /identity/search by its title and artist, /identity/artists; p50 and p90, each
   request a cache miss (another `limit`, or the search's letters in another case).
   With --explain-memory, the same requests again in this process through the same app (Starlette's
   TestClient), with what a server cannot report from outside: the response cache's bytes, SQLite's own heap
   (sqlite3_status64) and the memory glibc's malloc holds freed (what `malloc_trim(0)` returns at the end).
4. Deletes the work folder (under $TMPDIR) unless --keep, or --skip-generate or --serve-only (which reuse files
   made before: never deleted).

--smoke runs every step at 5,000 rows with 2 requests per figure (tests/test_bench.py: the script cannot rot).

Goals (issue 14): first page < 20 ms at limit=100 and < 150 ms at 5000, coverage < 100 ms, build >= 100k rows/s.
Issue 30: linking keeps the build at >= 100k rows/s; a lookup or a recording page < 5 ms p50 (docs/identity.md).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import functools
import gc
import json
import os
import random
import resource
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from datetime import date, timedelta
from pathlib import Path

import httpx

from chartgw.core.text import artist_key, title_key
from chartgw.demo.samples import global_songs, song_pool
from chartgw.index import history as index
from chartgw.store.schema import migrate
from chartgw.store.tables import TABLES

ROOT = Path(__file__).resolve().parents[1]
LAST_DAY = date(2026, 11, 20)
SEED = 14
KEY = "bench-history-key-0123456789"
API = "/artist-history-api"

STREAMING_COUNTRIES = ("us", "gb", "de", "jp", "br", "mx", "kr", "fr", "es", "it", "ca", "au", "nl", "se", "no", "dk",
                       "fi", "pl", "at", "ch", "be", "ie", "pt", "ar", "cl", "co", "pe", "id", "ph", "th", "vn", "my",
                       "sg", "tw", "hk", "in", "tr", "za", "nz", "ae")
STORE_COUNTRIES = ("us", "gb", "jp", "kr", "de", "fr", "ca", "au", "br", "mx")
SYLLABLES = ("ka", "lo", "mi", "ren", "sa", "vo", "ti", "na", "be", "ru", "zel", "dan", "ko", "ra", "lu", "mei", "jo",
             "vic", "an", "el", "tor", "is", "ya", "po")


# --- the synthetic catalogue -----------------------------------------------------------------------------

class Track:
    __slots__ = ("artist", "artists", "id", "title")

    def __init__(self, title: str, artist: str, artists: list[str], track_id: int) -> None:
        self.title, self.artist, self.artists, self.id = title, artist, artists, track_id


def _tail_names(count: int, rng: random.Random) -> list[str]:
    names: dict[str, None] = {}
    while len(names) < count:
        first = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 2))).capitalize()
        last = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        names[f"{first} {last}" if rng.random() < 0.7 else f"{first}{last}".upper()] = None
    return list(names)


@functools.cache
def catalogue(tail: int = 22_000) -> tuple[list[Track], list[float], list[float], dict[str, float]]:
    """Tracks, and their cumulative weights on global charts and on Korean charts; the artists' weights."""
    rng = random.Random(SEED)
    global_pool = global_songs()
    korea_pool = song_pool("melon")
    titles: dict[str, list[str]] = {}
    for song in global_pool:
        titles.setdefault(song.artists[0], []).append(song.title)
    for k in korea_pool:
        titles.setdefault(k.artists[0], []).append(k.title)

    def by_songs(names: list[str]) -> list[str]:
        return sorted(dict.fromkeys(names), key=lambda n: (-len(titles.get(n, ())), n))

    global_head = by_songs([s.artists[0] for s in global_pool])
    korea_head = by_songs([s.artists[0] for s in korea_pool])
    tails = _tail_names(tail, rng)
    global_order = global_head + [n for n in korea_head if n not in global_head] + tails
    korea_order = korea_head + [n for n in global_head if n not in korea_head] + tails
    weight = {name: 1 / (i + 5) for i, name in enumerate(global_order)}
    korea_weight = {name: 1 / (i + 5) for i, name in enumerate(korea_order)}
    top = weight[global_order[0]]
    tracks: list[Track] = []
    g_w: list[float] = []
    k_w: list[float] = []
    for name in global_order:
        count = max(3, min(60, round(60 * (weight[name] / top) ** 0.5)))
        own = titles.get(name, [])
        for j in range(count):
            title = own[j] if j < len(own) else f"{own[j % len(own)] if own else name.split()[0]} {j + 1}"
            artist, artists = name, [name]
            draw = rng.random()
            if draw < 0.1:
                other = rng.choice(global_order[: 2000])
                if other != name:
                    style = rng.randrange(3)
                    if style == 0:
                        artist, artists = f"{name} & {other}", [name, other]
                    elif style == 1:
                        artist, artists = f"{name} feat. {other}", [f"{name} feat. {other}"]
                    else:
                        title = f"{title} (feat. {other})"
            share = 1 / (j + 1) ** 0.8
            tracks.append(Track(title, artist, artists, len(tracks)))
            g_w.append(weight[name] * share)
            k_w.append(korea_weight[name] * share)
    return tracks, _cumulative(g_w), _cumulative(k_w), weight


def _cumulative(weights: list[float]) -> list[float]:
    out, total = [], 0.0
    for w in weights:
        total += w
        out.append(total)
    return out


def draw(rng: random.Random, cum: list[float], size: int) -> list[int]:
    """`size` distinct tracks by weight."""
    chosen: dict[int, None] = {}
    while len(chosen) < size:
        for t in rng.choices(range(len(cum)), cum_weights=cum, k=size + size // 3):
            chosen[t] = None
            if len(chosen) == size:
                break
    return list(chosen)


# --- records in the groups' stored shapes ---------------------------------------------------------------

def _split(record: dict[str, object]) -> tuple[bytes, bytes]:
    """A record's JSON around its rank: b'{"rank":' + rank + rest (records are encoded once per track)."""
    body = json.dumps({k: v for k, v in record.items() if k != "rank"}, ensure_ascii=False, separators=(",", ":"))
    return b'{"rank":', ("," + body[1:]).encode()


def streaming_record(t: Track) -> dict[str, object]:
    track_id = f"{t.id:022d}"
    return {"rank": 0, "title": t.title, "artist": t.artist, "artists": t.artists, "track_id": track_id,
            "track_uri": f"spotify:track:{track_id}", "streams": 1000 + t.id, "previous_rank": None,
            "peak_rank": None, "periods_on_chart": None, "entry_status": None, "label": None, "image_url": None}


def store_record(t: Track) -> dict[str, object]:
    return {"rank": 0, "title": t.title, "artist": t.artist, "artists": t.artists, "store_id": str(1_000_000_000 + t.id),
            "store_url": f"https://itunes.apple.com/us/album/id{1_000_000_000 + t.id}", "artist_id": str(t.id % 99991),
            "collection": None, "price": 1.29, "currency": "USD", "release_date": "2024-01-22", "genre": "Pop",
            "image_url": "https://is1-ssl.mzstatic.com/image/thumb/art.jpg/170x170bb.png"}


def korea_record(t: Track) -> dict[str, object]:
    return {"rank": 0, "title": t.title, "artist": t.artist, "artists": t.artists, "album": t.title,
            "image_url": "https://cdn.music-flo.com/image/v2/album/13821453_s.jpg", "song_id": str(30_000_000 + t.id),
            "album_id": str(10_000_000 + t.id // 3), "artist_ids": [str(800_000 + t.id % 5000)],
            "rank_change": 0, "rank_status": "same"}


def uk_record(t: Track) -> dict[str, object]:
    return {"rank": 0, "title": t.title, "artist": t.artist, "last_week": None, "peak": None, "weeks_on_chart": 1,
            "label": None, "is_new": False, "is_reentry": False, "image": None}


class GroupFile:
    """A group's snapshot file written directly in the store's layout (one transaction per day)."""

    def __init__(self, folder: Path, name: str, make: object, tracks: list[Track]) -> None:
        self.db = sqlite3.connect(folder / f"{name}.sqlite", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        migrate(self.db, TABLES)
        self.db.execute("DROP INDEX entries_by_title")  # not read by the index; saves generation time
        self.db.execute("DROP INDEX entries_by_item")
        self.make = make
        self.tracks = tracks
        self.cache: dict[int, tuple[bytes, bytes, str, str]] = {}
        self.entries = 0

    def _parts(self, t: int) -> tuple[bytes, bytes, str, str]:
        hit = self.cache.get(t)
        if hit is None:
            track = self.tracks[t]
            head, tail = _split(self.make(track))  # type: ignore[operator]
            hit = self.cache[t] = (head, tail, title_key(track.title), artist_key(track.artist))
        return hit

    def snapshot(self, target: str, day: str, hour: int | None, chosen: list[int]) -> None:
        fetched = f"{day}T{hour if hour is not None else 6:02d}:05:00Z"
        cur = self.db.execute("INSERT INTO snapshots (target, chart_date, chart_hour, fetched_at, source, row_count)"
                              " VALUES (?, ?, ?, ?, 'bench', ?)", (target, day, hour, fetched, len(chosen)))
        sid = cur.lastrowid
        rows = []
        for pos, t in enumerate(chosen, start=1):
            head, tail, tk, ak = self._parts(t)
            rows.append((sid, pos, pos, tk, ak, None, head + str(pos).encode() + tail, f"{tk}|{ak}"))
        self.db.executemany("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        self.entries += len(rows)


def generate(folder: Path, rows: int) -> dict[str, object]:
    """The four groups' files, enough days back from LAST_DAY for about `rows` index rows."""
    started = time.monotonic()
    tracks, global_cum, korea_cum, weights = catalogue()
    rng = random.Random(SEED + 1)
    folder.mkdir(parents=True, exist_ok=True)
    files = {"streaming": GroupFile(folder, "streaming", streaming_record, tracks),
             "digital-sales": GroupFile(folder, "digital-sales", store_record, tracks),
             "korea-chart": GroupFile(folder, "korea-chart", korea_record, tracks),
             "uk-charts": GroupFile(folder, "uk-charts", uk_record, tracks)}
    realtime_rows_per_day = 112  # measured: 24 hourly top 100s of one day hold about this many tracks
    per_day = (len(STREAMING_COUNTRIES) + 1) * 200 + len(STORE_COUNTRIES) * 100 + 300 + realtime_rows_per_day + 100 / 7
    days = max(1, round(rows / per_day))
    first = LAST_DAY - timedelta(days=days - 1)
    for n in range(days):
        day = (first + timedelta(days=n)).isoformat()
        for f in files.values():
            f.db.execute("BEGIN")
        s = files["streaming"]
        s.snapshot("regional-daily/global", day, None, draw(rng, global_cum, 200))
        for cc in STREAMING_COUNTRIES:
            s.snapshot(f"regional-daily/{cc}", day, None, draw(rng, korea_cum if cc == "kr" else global_cum, 200))
        for cc in STORE_COUNTRIES:
            files["digital-sales"].snapshot(f"top-songs/{cc}", day, None,
                                            draw(rng, korea_cum if cc == "kr" else global_cum, 100))
        k = files["korea-chart"]
        for site in ("portal-a", "portal-b", "portal-c"):
            k.snapshot(f"{site}/daily", day, None, draw(rng, korea_cum, 100))
        hourly = draw(rng, korea_cum, 130)
        for hour in range(24):
            top = hourly[:100]
            rng.shuffle(top)
            k.snapshot("portal-a/realtime", day, hour, top)
            hourly = hourly[5:] + hourly[:5] if hour % 6 == 5 else hourly
        if (first + timedelta(days=n)).weekday() == 4:
            files["uk-charts"].snapshot("singles", day, None, draw(rng, global_cum, 100))
        for f in files.values():
            f.db.execute("COMMIT")
    entries = sum(f.entries for f in files.values())
    for f in files.values():
        f.db.close()
    heavy = max(weights, key=lambda name: weights[name])
    return {"days": days, "first_day": first.isoformat(), "entries": entries, "heaviest": heavy,
            "seconds": round(time.monotonic() - started, 1)}


# --- the run ------------------------------------------------------------------------------------------------

def _python() -> str:
    return os.environ.get("CHARTGW_BENCH_PYTHON") or str(ROOT / ".venv" / "bin" / "python")


def timed_index(out: Path, profile: Path | None = None) -> int:
    """`chartgw index artist-history-api --json` in this process (the real CLI's code path), with identity's
    linking (`Linking.link`, each variant as the build writes it) and `link_new` (the links kept at the end) timed
    where the build calls them: their wall and CPU seconds and the variants linked go to `out` (JSON). With
    `profile`, the whole build under cProfile (pstats file). Run by `build_index` as a child."""
    import cProfile

    from chartgw.cli import main as cli
    from chartgw.index.identity import links
    from chartgw.index.identity.linker import Link, Row

    linked: list[dict[str, float]] = []
    real, real_link = links.link_new, links.Linking.link
    spent = {"seconds": 0.0, "cpu_seconds": 0.0}

    def link(self: links.Linking, variant_id: int, row: Row, credits: str) -> Link:
        wall, cpu = time.perf_counter(), time.process_time()  # this process's CPU only (not its reading process's)
        found = real_link(self, variant_id, row, credits)
        spent["seconds"] += time.perf_counter() - wall
        spent["cpu_seconds"] += time.process_time() - cpu
        return found

    def link_new(db: sqlite3.Connection, linking: links.Linking | None = None) -> int:
        wall, cpu = time.perf_counter(), time.process_time()
        count = real(db, linking)
        linked.append({"variants": count, "seconds": time.perf_counter() - wall + spent["seconds"],
                       "cpu_seconds": time.process_time() - cpu + spent["cpu_seconds"]})
        spent.update(seconds=0.0, cpu_seconds=0.0)
        return count

    links.link_new = link_new
    links.Linking.link = link  # type: ignore[method-assign]
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    status = cli(["index", "artist-history-api", "--json"])
    if profiler and profile:
        profiler.disable()
        profiler.dump_stats(profile)
    mine, readers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    out.write_text(json.dumps({"linking": linked, "writer_cpu_seconds": mine.ru_utime + mine.ru_stime,
                               "reader_cpu_seconds": readers.ru_utime + readers.ru_stime}))
    return status


def build_index(folder: Path, profile: Path | None = None) -> dict[str, object]:
    env = {**os.environ, "CHARTGW_DATA_DIR": str(folder)}
    linking = folder.parent / "linking.json"
    started, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([_python(), str(Path(__file__).resolve()), "--timed-index", str(linking),
                           *([str(profile)] if profile else [])], env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the build and its reading process (it waits for it)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"bench_history: the index build failed:\n{done.stderr}")
    path = folder / "artist-history-api.sqlite"
    db = sqlite3.connect(path)
    rows = db.execute("SELECT count(*) FROM appearances").fetchone()[0]
    keys = db.execute("SELECT count(*) FROM appearance_artists").fetchone()[0]
    try:
        recordings = db.execute("SELECT count(*) FROM identity_recordings").fetchone()[0]
    except sqlite3.OperationalError:  # identity's tables under other names: not counted
        recordings = None
    db.close()
    size = sum(p.stat().st_size for p in folder.glob("artist-history-api.sqlite*"))
    timed = json.loads(linking.read_text())
    runs = timed["linking"]
    link_wall, link_cpu = sum(r["seconds"] for r in runs), sum(r["cpu_seconds"] for r in runs)
    # Every index row's variant is linked: linking's rate in index rows is what it costs the build per row.
    link = {"rows": rows, "variants": sum(int(r["variants"]) for r in runs), "recordings": recordings,
            "seconds": round(link_wall, 2), "cpu_seconds": round(link_cpu, 2),
            "rows_per_second": round(rows / link_wall) if link_wall else None,
            "rows_per_cpu_second": round(rows / link_cpu) if link_cpu else None,
            "variants_per_cpu_second": round(sum(int(r["variants"]) for r in runs) / link_cpu) if link_cpu else None}
    # On a shared box the wall-time rate falls with the load; the rate per CPU second is the build's own cost.
    return {"rows": rows, "artist_keys": keys, "seconds": round(seconds, 1), "rows_per_second": round(rows / seconds),
            "cpu_seconds": round(cpu, 1), "rows_per_cpu_second": round(rows / cpu) if cpu else None, "bytes": size,
            "writer_cpu_seconds": round(timed["writer_cpu_seconds"], 1),
            "reader_cpu_seconds": round(timed["reader_cpu_seconds"], 1), "linking": link, "load_average": os.getloadavg()}


def heaviest(folder: Path, names: list[str]) -> list[tuple[str, int]]:
    """Rows of each of `names` (its first credited artist's key), most first."""
    db = sqlite3.connect(folder / "artist-history-api.sqlite")
    try:
        counts = [(n, db.execute("SELECT coalesce(sum(t.rows), 0) FROM artist_tracks t JOIN artists a ON a.id = t.artist_id"
                                 " WHERE a.key = ?", (index.credit_keys(json.dumps(index.credited_names(n, [n])))[0],)
                                 ).fetchone()[0]) for n in names]
    finally:
        db.close()
    return sorted(counts, key=lambda c: -c[1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _memory(pid: int) -> dict[str, int]:
    """The server's memory in MB: resident (and its peak), and of the resident what is anonymous (the heap: Python
    objects, the response cache, SQLite's page caches) and what is file pages (the interpreter and libraries'
    code, and any memory-mapped database pages)."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    rollup = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:])
    kb = {name: int(value.split()[0]) for name, value in rollup.items()}
    return {"rss": int(status["VmRSS"].split()[0]) // 1024, "peak": int(status["VmHWM"].split()[0]) // 1024,
            "anonymous": kb["Anonymous"] // 1024, "file": (kb["Rss"] - kb["Anonymous"]) // 1024,
            "threads": int(status["Threads"])}


def _since(i: int) -> str:
    """A `since` before every chart date: the same rows, a different cache key."""
    return (date(1990, 1, 1) + timedelta(days=i)).isoformat()


def _timed(client: httpx.Client, path: str, params: dict[str, str | int]) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = client.get(path, params=params)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"bench_history: {path} {params} answered {response.status_code}: {response.text[:300]}")
    return elapsed, response


def _summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"p50_ms": round(statistics.median(ordered), 1), "p90_ms": round(ordered[max(0, int(len(ordered) * 0.9) - 1)], 1),
            "n": len(ordered)}


class Sizes:
    """How much one run measures: the full run, or --smoke's (the same steps on a few thousand rows)."""

    def __init__(self, requests: int, warmup: int, deep_page: int, deep_walks: int) -> None:
        self.requests, self.warmup, self.deep_page, self.deep_walks = requests, warmup, deep_page, deep_walks


def walk(client: httpx.Client, artist: str, sizes: Sizes, memory: Callable[[], Mapping[str, object]]) -> dict[str, object]:
    """The measured requests, and `memory()` idle, after the pages and after the deep walks."""
    history = f"{API}/artist-history"
    results: dict[str, object] = {"artist": artist, "memory_idle_mb": memory()}
    counter = iter(range(1_000_000))
    for label, path, extra in (("first_page_limit_100", history, {"limit": 100}),
                               ("first_page_limit_5000", history, {}),
                               ("coverage", f"{history}/coverage", {}),
                               ("plot_limit_5000", f"{history}/plot", {})):
        for _ in range(sizes.warmup):
            _timed(client, path, {"name": artist, "since": _since(next(counter)), **extra})
        times = [_timed(client, path, {"name": artist, "since": _since(next(counter)), **extra})[0]
                 for _ in range(sizes.requests)]
        results[label] = _summary(times)
    results["memory_after_pages_mb"] = memory()
    deep: list[float] = []
    for _ in range(sizes.deep_walks):
        query: dict[str, str | int] = {"name": artist, "since": _since(next(counter))}
        cursor = None
        for _ in range(2):  # 2 x 50,000 rows deep
            body = _timed(client, history, {**query, "limit": sizes.deep_page, **({"cursor": cursor} if cursor else {})})[1]
            cursor = body.json()["next_cursor"]
        if cursor is None:
            break
        deep.append(_timed(client, history, {**query, "limit": 100, "cursor": cursor})[0])
    results[f"deep_page_limit_100_after_{2 * sizes.deep_page}"] = _summary(deep) if deep else None
    results["artist_rows"] = client.get(f"{history}/coverage", params={"name": artist}).json()["rows"]
    # The response cache holds the walks' pages (up to CHARTGW_CACHE_MAX_MB, default 256).
    results["memory_after_deep_pages_mb"] = memory()
    return results


def _cased(text: str, i: int) -> str:
    """`text` with the case of its letters flipped by the bits of `i`: the same search, another cache key."""
    letters = [n for n, c in enumerate(text) if c.isalpha()]
    chars = list(text)
    for bit, n in enumerate(letters[:20]):
        if i >> bit & 1:
            chars[n] = chars[n].swapcase()
    return "".join(chars)


def identity_walk(client: httpx.Client, sizes: Sizes) -> dict[str, object]:
    """The /identity routes on the heaviest recording (the catalogue's first track: its Spotify id on /streaming,
    its Apple id on /digital-sales) and its first artist: lookups by either id, the recording's first page, a search
    by its title and artist, the artist's page. Each request a cache miss (another `limit`, or the search's letters
    in another case: the same rows, another cache key)."""
    tracks, _, _, _ = catalogue()
    track = tracks[0]
    spotify, apple = streaming_record(track)["track_id"], store_record(track)["store_id"]
    found = _timed(client, "/identity/lookup", {"spotify_track": str(spotify)})[1].json()
    recording, artist = found["id"], found["artists"][0]["id"]
    counter = iter(range(1_000_000))
    figures: dict[str, tuple[str, Callable[[int], dict[str, str | int]]]] = {
        "lookup_spotify_track": ("/identity/lookup", lambda i: {"spotify_track": str(spotify), "limit": 100 + i % 400}),
        "lookup_apple_track": ("/identity/lookup", lambda i: {"apple_track": str(apple), "limit": 100 + i % 400}),
        "recording_first_page": (f"/identity/recordings/{recording}", lambda i: {"limit": 100 + i % 400}),
        "search_title_and_artist": ("/identity/search", lambda i: {"title": _cased(track.title, i),
                                                                   "artist": _cased(track.artists[0], i >> 10)}),
        "artist_page": (f"/identity/artists/{artist}", lambda i: {"limit": 200 + i % 800}),
    }
    results: dict[str, object] = {"recording": recording, "title": track.title, "artist": artist,
                                  "spotify_track": spotify, "apple_track": apple}
    for label, (path, params) in figures.items():
        for _ in range(sizes.warmup):
            _timed(client, path, params(next(counter)))
        results[label] = _summary([_timed(client, path, params(next(counter)))[0] for _ in range(sizes.requests)])
    page = client.get(f"/identity/recordings/{recording}", params={"limit": 500}).json()
    results["recording_appearances_first_page"] = page["count"]
    results["artist_recordings"] = client.get(f"/identity/artists/{artist}", params={"limit": 1000}).json()["count"]
    return results


def measure(folder: Path, artist: str, sizes: Sizes, cache_mb: int | None = None) -> dict[str, object]:
    """`walk` against `chartgw serve --workers 1` over `folder`, and the server's memory."""
    port = _free_port()
    env = {**os.environ, "CHARTGW_DATA_DIR": str(folder), "CHARTGW_API_KEYS": KEY,
           "CHARTGW_RATE_LIMIT_PER_MINUTE": "0"}
    if cache_mb is not None:
        env["CHARTGW_CACHE_MAX_MB"] = str(cache_mb)
    log = folder.parent / "serve.log"
    with log.open("wb") as err:
        server = subprocess.Popen([_python(), "-m", "chartgw", "serve", "--host", "127.0.0.1", "--port", str(port),
                                   "--workers", "1"], env=env, stdout=subprocess.DEVNULL, stderr=err,
                                  start_new_session=True)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"X-API-Key": KEY}, timeout=120) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if client.get(f"{API}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"bench_history: the server did not start:\n{log.read_text()[-2000:]}")
                time.sleep(0.2)
            results = walk(client, artist, sizes, lambda: _memory(server.pid))
            results["identity"] = identity_walk(client, sizes)
        results["cache_max_mb"] = cache_mb if cache_mb is not None else "default"
        return results
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def _sqlite_memory() -> dict[str, float] | None:
    """SQLite's own heap in this process, MB (sqlite3_status64: page caches, statements, sorts), now and at its
    highest; None when the sqlite3 module's library cannot be loaded by name."""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0")
    except OSError:
        return None
    now, high = ctypes.c_int64(), ctypes.c_int64()
    if lib.sqlite3_status64(0, ctypes.byref(now), ctypes.byref(high), 0) != 0:  # SQLITE_STATUS_MEMORY_USED
        return None
    return {"now": round(now.value / 2**20, 1), "highest": round(high.value / 2**20, 1)}


def explain_memory(folder: Path, artist: str, sizes: Sizes, cache_mb: int | None = None) -> dict[str, object]:
    """`walk` again in this process, through the same app (Starlette's TestClient instead of uvicorn), with the parts
    of the memory a server process cannot report from outside: the response cache's bytes, SQLite's heap, and what
    glibc's malloc holds freed (returned by `malloc_trim(0)` at the end)."""
    from starlette.testclient import TestClient

    from chartgw.api.cache import ResponseCache
    from chartgw.core.settings import Settings
    from chartgw.http.app import build_app

    values = {"CHARTGW_DATA_DIR": str(folder), "CHARTGW_API_KEYS": KEY, "CHARTGW_RATE_LIMIT_PER_MINUTE": "0"}
    if cache_mb is not None:
        values["CHARTGW_CACHE_MAX_MB"] = str(cache_mb)
    app = build_app(settings=Settings.from_environment({**os.environ, **values}))
    caches = [o for o in gc.get_objects() if isinstance(o, ResponseCache)]

    def memory() -> dict[str, object]:
        parts: dict[str, object] = {**_memory(os.getpid()), "response_cache": round(sum(c.size for c in caches) / 2**20, 1),
                                    "sqlite": _sqlite_memory()}
        return parts

    with TestClient(app, headers={"X-API-Key": KEY}) as client:
        if client.get(f"{API}/health").status_code != 200:
            raise SystemExit("bench_history: the index is not served in process")
        results = walk(client, artist, sizes, memory)
        before = _memory(os.getpid())["rss"]
        gc.collect()
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
        results["returned_by_malloc_trim_mb"] = before - _memory(os.getpid())["rss"]
    return results


SMOKE_ROWS = 5_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="index rows to aim for (default 10M)")
    parser.add_argument("--work", type=Path, help="work folder (default: a new one under $TMPDIR)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (data and index) afterwards")
    parser.add_argument("--requests", type=int, default=25, help="measured requests per figure (default 25)")
    parser.add_argument("--skip-generate", action="store_true", help="reuse the group files in --work")
    parser.add_argument("--serve-only", action="store_true",
                        help="reuse the group files and the index in --work: only the served figures")
    parser.add_argument("--cache-mb", type=int, help="the server's CHARTGW_CACHE_MAX_MB (default: its default, 256)")
    parser.add_argument("--explain-memory", action="store_true",
                        help="then the same requests in this process, with the response cache's bytes, SQLite's heap "
                             "and what malloc holds freed (the server's memory, part by part)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"the same steps at a smoke size: {SMOKE_ROWS:,} rows, 2 requests per figure, one deep walk"
                             " of 2 x 100 rows (tests/test_bench.py)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rows = SMOKE_ROWS
        sizes = Sizes(requests=2, warmup=1, deep_page=100, deep_walks=1)
    else:
        sizes = Sizes(requests=args.requests, warmup=3, deep_page=50_000, deep_walks=max(5, args.requests // 3))
    if (args.skip_generate or args.serve_only) and args.work is None:
        parser.error("--skip-generate and --serve-only need --work")
    work = args.work or Path(tempfile.mkdtemp(prefix="chartgw-bench-history."))
    work.mkdir(parents=True, exist_ok=True)
    folder = work / "data"
    need = args.rows * 900  # group files and the index, bytes per row, generously
    free = shutil.disk_usage(work).free
    if free < need and not args.serve_only:
        raise SystemExit(f"bench_history: {work} has {free / 1e9:.1f} GB free; {need / 1e9:.1f} GB needed")
    report: dict[str, object] = {"rows_asked": args.rows, "work": str(work), "cpus": os.cpu_count(),
                                 "load_average_before": os.getloadavg()}
    try:
        if not args.serve_only:
            for stale in folder.glob("artist-history-api.sqlite*"):
                stale.unlink()
            if not args.skip_generate:
                report["generate"] = generate(folder, args.rows)
                print(f"generated: {json.dumps(report['generate'])}", file=sys.stderr, flush=True)
            report["index"] = build_index(folder)
            print(f"index: {json.dumps(report['index'])}", file=sys.stderr, flush=True)
        _, _, _, weights = catalogue()
        names = sorted(weights, key=lambda n: -weights[n])[:12]
        heavy = heaviest(folder, names)
        report["heaviest_artists"] = heavy
        report["served"] = measure(folder, heavy[0][0], sizes, args.cache_mb)
        if args.explain_memory:
            report["in_process"] = explain_memory(folder, heavy[0][0], sizes, args.cache_mb)
    finally:
        if not (args.keep or args.skip_generate or args.serve_only):  # files made before are the caller's
            shutil.rmtree(work, ignore_errors=True)
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--timed-index"]:  # build_index's child: the build, its linking timed
        sys.exit(timed_index(Path(sys.argv[2]), Path(sys.argv[3]) if len(sys.argv) > 3 else None))
    sys.exit(main())
