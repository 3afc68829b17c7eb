"""Name normalisation, so one song spelled three ways by three sites is one song.

Keys are case-, accent- and width-insensitive and keep Hangul intact. An artist credited as
"아이유(IU)" has two aliases, "아이유" and "iu"; `ArtistAliases` joins every name that shares an
alias, so "아이유", "아이유(IU)" and "IU" meet once any source has printed the combined form.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

_FEAT = re.compile(r"[\(\[]\s*(?:feat|ft|with|prod)\b[^\)\]]*[\)\]]", re.IGNORECASE)
_PARENS = re.compile(r"[\(\[]([^\)\]]*)[\)\]]")
_VER = r"(?:\s+ver(?:\.|sion\b|\b))?"
_VERSION_MARK = (
    r"(?:explicit|clean|censored|dirty)" + _VER
    + r"|(?:\d{4}\s+)?(?:digital(?:ly)?\s+)?remaster(?:ed)?(?:\s+\d{4})?" + _VER
    + r"|live(?:\s+(?:at|from|in|on)\b[^\)\]]*)?" + _VER
    + r"|(?:radio|single|album)\s+(?:edit|ver(?:\.|sion\b|\b))|mono|stereo"
)
_VERSION_SUFFIX = re.compile(rf"\s*(?:[\(\[]\s*(?:{_VERSION_MARK})\s*[\)\]]|\s[-\u2013\u2014]\s+(?:{_VERSION_MARK}))\s*$",
                             re.IGNORECASE)
"""A trailing mark of a version of the same song: "(Explicit Ver.)", "(Clean)", "(Remastered 2011)",
"- 2011 Remaster", "- Live", "(Live at Wembley)", "- Radio Edit", "(Single Version)", "- Mono". Not a remix,
a sped-up or an acoustic take, another language or "(Taylor's Version)": those chart as songs of their own."""


_NOT_ASCII_ALNUM = re.compile(r"[^0-9a-z]+")

# The keys below are pure functions of short strings that a crawl meets many times over (every snapshot repeats
# its chart's titles and artists): each keeps its last answers. ASCII text, most of it, needs no Unicode pass
# (it has no accent, width or combining mark; casefold is lower).


@lru_cache(maxsize=1 << 15)
def fold(text: str) -> str:
    """Casefolded, accents dropped, widths unified; Hangul syllables recomposed after the split."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return unicodedata.normalize("NFC", stripped)


@lru_cache(maxsize=1 << 15)
def compact(text: str) -> str:
    """Only letters and digits of the folded text: "Love Lee!" and "love-lee" are the same key."""
    if text.isascii():
        return _NOT_ASCII_ALNUM.sub("", text.lower())
    return "".join(ch for ch in fold(text) if ch.isalnum())


@lru_cache(maxsize=1 << 15)
def title_key(title: str) -> str:
    """The song a title names, compacted: without featuring/producer credits (anywhere) and without trailing
    version marks ("Seven (feat. Latto) (Explicit Ver.)" is "seven"). The one title normalisation of every
    group. Only a suffix is dropped, so a key made before version marks were folded starts with this one."""
    credited = _FEAT.sub(" ", title)
    song = credited
    while (shorter := _VERSION_SUFFIX.sub("", song)) != song:
        song = shorter
    return compact(song) or compact(credited) or compact(title)


def split_artists(artist: str) -> list[str]:
    """"A, B" and "A & B" are two artists; commas inside brackets ("싹쓰리 (유두래곤, 린다G)") are not."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in artist:
        depth += (ch in "([") - (ch in ")]")
        if depth <= 0 and ch in ",&":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def artist_aliases(name: str) -> set[str]:
    """Keys one artist credit can be known by: its name outside and each name inside brackets."""
    aliases = {compact(inner) for inner in _PARENS.findall(name)}
    aliases.add(compact(_PARENS.sub(" ", name)))
    aliases.discard("")
    return aliases or {compact(name)}


@lru_cache(maxsize=1 << 15)
def artist_key(artist: str) -> str:
    """The stored artist column: the first credited artist's main name."""
    names = split_artists(artist) or [artist]
    return min(artist_aliases(names[0]), key=lambda a: (a != compact(_PARENS.sub(" ", names[0])), a))


def search_key(title: str, artists: Iterable[str]) -> str:
    """The stored search column: the compacted title and each artist's, joined by "|" so a search
    term never matches across two fields."""
    return "|".join([compact(title), *(compact(a) for a in artists)])


class ArtistAliases:
    """A union-find over alias keys, fed with every artist credit seen."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._parent: dict[str, str] = {}
        for name in names:
            self.add(name)

    def _find(self, key: str) -> str:
        parent = self._parent.setdefault(key, key)
        while parent != key:
            grand = self._parent[parent]
            self._parent[key] = grand
            key, parent = parent, grand
        return key

    def add(self, credit: str) -> None:
        for name in split_artists(credit):
            first, *rest = sorted(artist_aliases(name))
            for other in rest:
                self._parent[self._find(other)] = self._find(first)

    def identities(self, credit: str) -> frozenset[str]:
        """One identity per artist of the credit; two credits share an artist when these intersect."""
        return frozenset(self._find(next(iter(sorted(artist_aliases(n))))) for n in split_artists(credit))
