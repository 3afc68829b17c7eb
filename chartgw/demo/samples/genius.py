"""Sample Genius search answers for the demo's lyrics ids, in the shape of the captured 2019 answer
(../shared/upstream/genius: `meta`, `response.hits[]` of song hits with `result.id`, `title`, `full_title`,
`primary_artist {id, name, ...}`).

A track whose title is in the sample pools (the real global and Korean charts' songs) is found: the answer
lists first a near miss (the same title by another artist, as Genius's translation and cover pages are),
then the song itself with made-up but stable ids. Any other track gets an answer with no hits (a miss).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from chartgw.core.text import title_key
from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples import global_songs, song_pool
from chartgw.demo.samples.bodies import json_body, stable_number
from chartgw.upstreams import genius

JSON_TYPE = "application/json; charset=utf-8"
NEAR_MISS_ARTIST = "Genius English Translations"


@cache
def known_titles() -> frozenset[str]:
    """Normalised titles of the sample pools' songs: the songs Genius "has"."""
    titles = [s.title for s in global_songs()] + [s.title for s in song_pool("melon")]
    return frozenset(title_key(t) for t in titles)


def _song(title: str, artist: str) -> dict[str, object]:
    song_id = 100_000 + stable_number("genius-song", title, artist) % 9_000_000
    artist_id = 1_000 + stable_number("genius-artist", artist) % 2_000_000
    slug = "-".join(f"{artist} {title}".split()).lower()
    return {
        "annotation_count": 1, "api_path": f"/songs/{song_id}", "full_title": f"{title} by {artist}",
        "header_image_thumbnail_url": None, "header_image_url": None, "id": song_id, "lyrics_owner_id": 1,
        "lyrics_state": "complete", "path": f"/{slug}-lyrics", "pyongs_count": None,
        "stats": {"unreviewed_annotations": 0, "hot": False}, "title": title, "title_with_featured": title,
        "url": f"https://genius.com/{slug}-lyrics",
        "primary_artist": {"api_path": f"/artists/{artist_id}", "header_image_url": None, "id": artist_id,
                           "image_url": None, "is_meme_verified": False, "is_verified": False, "name": artist,
                           "url": f"https://genius.com/artists/{artist_id}"},
    }


def search_body(title: str, artist: str) -> bytes:
    """The answer to a search for `title` by `artist`."""
    hits = []
    if title_key(title) in known_titles():
        hits = [{"highlights": [], "index": "song", "type": "song", "result": _song(title, NEAR_MISS_ARTIST)},
                {"highlights": [], "index": "song", "type": "song", "result": _song(title, artist)}]
    return json_body({"meta": {"status": 200}, "response": {"hits": hits}})


def search_replies(tracks: Iterable[tuple[str, str]], token: str) -> dict[ReplayKey, Reply]:
    """Replies to the searches `chartgw enrich` makes for (title, primary artist) pairs."""
    return {request_key(genius.search_request(title, artist, token)): Reply(search_body(title, artist), 200, JSON_TYPE)
            for title, artist in tracks}
