"""The identity evaluation's rows, read from the real captures in ../shared/upstream.

Each row is named "<set>/<source>/<rank>" so the labels (labels.json beside this file) can say which rows are one
recording. The sets: three Korean sites on one day; Apple Music's catalog chart (ISRCs) against its RSS chart of the
same day; Billboard's Hot 100 against Spotify's weekly chart; Shazam's Israel chart four weeks apart.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from chartgw.index.identity.linker import Row

UPSTREAM = Path(__file__).resolve().parents[3] / "shared" / "upstream"


def korea() -> dict[str, Row]:
    rows: dict[str, Row] = {}
    for site in ("melon", "bugs", "flo"):
        for item in json.loads((UPSTREAM / f"korea-derived/woogamjaa_{site}100_1-1-2026.json").read_text()):
            rows[f"korea/{site}/{item['rank']}"] = Row(item["title"], item["artist"])
    return rows


def apple() -> dict[str, Row]:
    rows: dict[str, Row] = {}
    api = json.loads((UPSTREAM / "apple/apple-music-api-v1-catalog-us-charts-most-played-songs-2017-11-04.json").read_text())
    for rank, item in enumerate(api["results"]["songs"][0]["data"], 1):
        attrs = item["attributes"]
        rows[f"apple/api/{rank}"] = Row(attrs["name"], attrs["artistName"], attrs.get("isrc"), (("apple_track", item["id"]),))
    rss = json.loads((UPSTREAM / "apple/rss-itunes-v1-apple-music-top-songs-us-200-2017-11-04.json").read_text())
    for rank, item in enumerate(rss["feed"]["results"], 1):
        # Without its Apple id: the RSS rows are matched to the ISRC rows by title and credit, what another
        # storefront's chart would have to do.
        rows[f"apple/rss/{rank}"] = Row(item["name"], item["artistName"])
    return rows


def apple_ids() -> dict[str, Row]:
    """The same two Apple charts, the RSS rows with their Apple track ids (the `platform_id` tier)."""
    rows = {key.replace("apple/", "apple-ids/", 1): row for key, row in apple().items()}
    rss = json.loads((UPSTREAM / "apple/rss-itunes-v1-apple-music-top-songs-us-200-2017-11-04.json").read_text())
    for rank, item in enumerate(rss["feed"]["results"], 1):
        rows[f"apple-ids/rss/{rank}"] = Row(item["name"], item["artistName"], None, (("apple_track", item["id"]),))
    return rows


def billboard_spotify() -> dict[str, Row]:
    from chartgw.upstreams import billboard

    rows: dict[str, Row] = {}
    week = billboard.parse("hot-100", (UPSTREAM / "billboard/hot-100_2024-12-07_browser-saved_Sadavar-si206.html").read_bytes())
    for entry in week.entries:
        rows[f"bbsp/billboard/{entry.rank}"] = Row(entry.title or "", entry.artist or "")
    path = UPSTREAM / "spotify/charts-spotify-com-download-regional-global-weekly-2023-11-16.csv"
    with path.open(encoding="utf-8-sig", newline="") as f:
        for item in csv.DictReader(f):
            track = item["uri"].rsplit(":", 1)[-1]
            rows[f"bbsp/spotify/{item['rank']}"] = Row(item["track_name"], item["artist_names"], None,
                                                       (("spotify_track", track),))
    return rows


def shazam() -> dict[str, Row]:
    rows: dict[str, Row] = {}
    for day, name in (("0726", "2026-07-26-first-raw"), ("0822", "2026-08-22")):
        path = UPSTREAM / f"shazam/shazam-services-charts-csv-top-200-israel-{name}.csv"
        lines = path.read_text(encoding="utf-8-sig").splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("Rank,"))
        for item in csv.DictReader(lines[start:]):
            rows[f"shazam/{day}/{item['Rank']}"] = Row(item["Title"], item["Artist"])
    return rows


def all_rows() -> dict[str, Row]:
    return {**korea(), **apple(), **apple_ids(), **billboard_spotify(), **shazam()}


_SAME_MARKS = (" (Explicit Ver.)", " (Remastered)", " - 2004 Remaster", " [Explicit]", " (Clean Version)")
_OTHER_MARKS = (" (Remix)", " - Live", " (Acoustic)", " (Sped Up)", " (Taylor's Version)", " (Instrumental)",
                " (Slowed + Reverb)", " (Live at Wembley)", " - Extended Mix")
_MOVED = (("apple/api/1", "Ghostface Killers", "21 Savage, Offset & Metro Boomin feat. Travis Scott"),
          ("korea/melon/22", "HOME SWEET HOME", "G-DRAGON, 태양, 대성"),
          ("korea/melon/60", "TOO BAD", "G-DRAGON & Anderson .Paak"),
          ("korea/melon/25", "like JENNIE", "JENNIE"),
          ("korea/melon/21", "toxic till the end", "ROSÉ"),
          ("korea/melon/30", "NOT CUTE ANYMORE", "ILLIT"),
          ("korea/melon/59", "FOCUS", "하츠투하츠"),
          ("bbsp/billboard/15", "Rocking Around The Christmas Tree", "Brenda Lee"),
          ("korea/melon/40", "모든 날, 모든 순간 (Every day, Every Momment)", "폴킴"))
"""Real rows printed another way: a featured credit moved into the credit, an artist under its name in another
script only, a title a small edit away. Each is one recording with its real row."""
_BASES = ("korea/melon/1", "bbsp/spotify/1", "bbsp/billboard/16", "korea/melon/48", "apple/api/19", "apple/api/46",
          "shazam/0726/2", "korea/melon/5")


def constructed() -> tuple[dict[str, Row], list[list[str]]]:
    """Hard cases made from real rows: each base row's marks of the same recording (one cluster with it), its
    other versions and the same title by another artist of the set (each a recording of its own)."""
    real = all_rows()
    rows: dict[str, Row] = {}
    clusters: list[list[str]] = []
    for n, base in enumerate(_BASES):
        row = real[base]
        cluster = [f"made/{n}/base"]
        rows[cluster[0]] = Row(row.title, row.artist)
        for i, mark in enumerate(_SAME_MARKS):
            rows[f"made/{n}/same{i}"] = Row(row.title + mark, row.artist)
            cluster.append(f"made/{n}/same{i}")
        for i, mark in enumerate(_OTHER_MARKS):
            rows[f"made/{n}/other{i}"] = Row(row.title + mark, row.artist)
        rows[f"made/{n}/artist"] = Row(row.title, real[_BASES[(n + 1) % len(_BASES)]].artist)
        clusters.append(cluster)
    for n, (key, title, artist) in enumerate(_MOVED):
        rows[f"made/{key}"] = real[key]
        rows[f"made/moved{n}"] = Row(title, artist)
        clusters.append([f"made/{key}", f"made/moved{n}"])
    return rows, clusters
