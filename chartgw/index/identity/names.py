"""How a chart row's title and artist credit are read for recording identity.

A title splits into the song's name, the version it is (a remix, a live take, "Taylor's Version", a year's
re-recording: each a recording of its own), the featured artists it credits, and bracketed asides ("From
'Zootopia 2'", an English title beside a Korean one) that only the weakest tier may drop. Marks of the same
recording ("(Explicit Ver.)", "(Remastered)", "- 2004 Remaster", "(Prod. X)") fold away. A credit splits into
artists, each with the names it is printed under ("아일릿(ILLIT)" is "아일릿" and "illit").

Unlike `chartgw.core.text.title_key` (the artist-history search key), a live take stays apart from the studio
recording: identity tells recordings apart, search finds songs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from chartgw.core.text import compact

__all__ = ["Credit", "TitleParts", "name_key", "parse_credit", "parse_title", "script_of", "split_printed"]

_OPEN, _CLOSE = "([{", ")]}"

# Credits inside a title: "(feat. X)", "(Feat.X)", "(ft. X)", "(with X)"; "(prod. X)" names a producer.
_FEATURING = re.compile(r"^\s*(?:feat(?:uring)?\.?|ft\.?|with)\s*(?P<who>.+)$", re.IGNORECASE)
_PRODUCER = re.compile(r"^\s*prod(?:uced)?\.?(?:\s*by)?\b", re.IGNORECASE)
# A trailing " feat. X" outside brackets (Billboard prints "Featuring" only in the credit, some sites in the title).
_TRAILING_FEAT = re.compile(r"\s+(?:feat(?:uring)?\.?|ft\.)\s+(?P<who>.+)$", re.IGNORECASE)
# " - Suffix" (Spotify's and Apple's way of naming a version: "Song - Live", "Song - 2004 Remaster").
_DASH_SUFFIX = re.compile(r"\s+[-\u2013\u2014]\s+(?P<suffix>[^-\u2013\u2014]+)$")

# Marks of the same recording, folded away.
_SAME = re.compile(
    r"^(?:(?:explicit|clean|censored|dirty|edited)(?:\s+(?:ver(?:sion)?\.?))?"
    r"|(?:\d{4}\s+)?(?:digital(?:ly)?\s+)?remaster(?:ed)?(?:\s+(?:ver(?:sion)?\.?|\d{4}))?(?:\s+\d{4})?"
    r"|(?:radio|single|album|original|soundtrack|ost|film|movie)\s+(?:edit|ver(?:sion)?\.?|mix)|mono|stereo|original)$",
    re.IGNORECASE)
# Marks of another recording, each with the tag it keeps.
_VERSIONS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), tag) for p, tag in (
    (r"\bsped\s*up\b|\bspeed\s*up\b|\bnightcore\b", "sped up"),
    (r"\bslow(?:ed)?\b", "slowed"),
    (r"\btaylor'?\u2019?s\s+version\b", "taylor's version"),
    (r"\binst(?:rumental|\.)?(?=\W|$)|\bmr\b", "instrumental"),
    (r"\ba\s*cappella\b|\bacapella\b", "a cappella"),
    (r"\bacoustic\b|\bunplugged\b", "acoustic"),
    (r"\blive\b|\u05dc\u05d9\u05d9\u05d1|\ub77c\uc774\ube0c", "live"),
    (r"\bre-?mix\b|\brmx\b|\bflip\b|\bbootleg\b", "remix"),
    (r"\bextended\b", "extended"),
    (r"\bdemo\b", "demo"),
    (r"\bre-?record(?:ed|ing)\b", "re-recorded"),
    (r"\bver(?:sion|\.|\b)|\bmix\b|\bedit\b|\bcover\b|\bremake\b", "version"),
))
"""Any other "... Version", "... Mix" or "... Edit" ("Christmas Ver.", "Slow Version") is a version too: its words
stay in the title, so two such versions stay apart."""
_YEAR = re.compile(r"^(?:19|20)\d{2}$")
"""A bare year in brackets ("운명 (2025)") marks a new recording of an old song."""

_SPLIT = re.compile(r"\s*(?:,|&|\s[xX×]\s|\bfeat(?:uring)?\.?\s|\bft\.\s|\bwith\s|;)\s*", re.IGNORECASE)
_FEAT_IN_CREDIT = re.compile(r"\s+(?:feat(?:uring)?\.?|ft\.|with)\s+", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class TitleParts:
    """What a title says about the recording it names."""

    name: str
    """The song's name with its asides, compacted (the `exact` tier's title)."""
    bare: str
    """The song's name without the asides that name no version, compacted (the `low` tier's title)."""
    versions: frozenset[str]
    """Tags of another recording ("remix", "live", "year 2025"); empty for the original."""
    featured: tuple[str, ...]
    """Artists the title credits, as printed."""


@dataclass(frozen=True, slots=True)
class Credit:
    """One credited artist: the names it is printed under, compacted, and its main name."""

    main: str
    aliases: frozenset[str]


def _brackets(title: str) -> tuple[str, list[str]]:
    """The title outside top-level brackets, and each top-level bracket's inside (nested brackets kept)."""
    outside: list[str] = []
    asides: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in title:
        if ch in _OPEN:
            if depth:
                current.append(ch)
            depth += 1
        elif ch in _CLOSE and depth:
            depth -= 1
            if depth:
                current.append(ch)
            else:
                asides.append("".join(current).strip())
                current = []
                outside.append(" ")
        elif depth:
            current.append(ch)
        else:
            outside.append(ch)
    if current:  # an unclosed bracket: its text is the title's
        outside.append("".join(current))
    return "".join(outside).strip(), [a for a in asides if a]


def _version_tags(text: str) -> set[str]:
    if _YEAR.match(text.strip()):
        return {f"year {text.strip()}"}
    return {tag for pattern, tag in _VERSIONS if pattern.search(text)}


@lru_cache(maxsize=1 << 15)
def parse_title(title: str) -> TitleParts:
    """Read a chart row's title: its name, the version it is, who it features."""
    text = title.strip()
    featured: list[str] = []
    versions: set[str] = set()
    kept: list[str] = []  # asides that are neither credits nor marks of a version
    while (dash := _DASH_SUFFIX.search(text)) is not None:
        suffix = dash["suffix"].strip()
        if _SAME.match(suffix):
            text = text[: dash.start()].strip()
            continue
        if tags := _version_tags(suffix):
            versions |= tags
            kept.append(suffix)
            text = text[: dash.start()].strip()
            continue
        if (feat := _FEATURING.match(suffix)) is not None:
            featured.append(feat["who"])
            text = text[: dash.start()].strip()
            continue
        break
    outside, asides = _brackets(text)
    if (trailing := _TRAILING_FEAT.search(outside)) is not None:
        featured.append(trailing["who"])
        outside = outside[: trailing.start()]
    for aside in asides:
        for part in (p.strip() for p in re.split(r"\s*/\s*", aside) if p.strip()):
            if (feat := _FEATURING.match(part)) is not None:
                featured.append(feat["who"])
            elif _PRODUCER.match(part) or _SAME.match(part):
                continue
            elif tags := _version_tags(part):
                versions |= tags
                kept.append(part)
            else:
                kept.append(part)
    bare = compact(outside) or compact(text)
    name = compact(" ".join([outside, *kept])) or bare
    bare = compact(" ".join([outside, *(k for k in kept if _version_tags(k))])) or bare
    return TitleParts(name, bare, frozenset(versions), tuple(f.strip() for f in featured if f.strip()))


def script_of(name: str) -> str:
    """"hangul", "kana", "han", "latin" or "other": the script a name is written in (its first letter's)."""
    for ch in name:
        if "\uac00" <= ch <= "\ud7a3" or "\u1100" <= ch <= "\u11ff" or "\u3130" <= ch <= "\u318f":
            return "hangul"
        if "\u3040" <= ch <= "\u30ff":
            return "kana"
        if "\u4e00" <= ch <= "\u9fff":
            return "han"
        if (ch.isascii() and ch.isalpha()) or "\u00c0" <= ch <= "\u024f":
            return "latin"
    return "other"


def name_key(name: str) -> str:
    """A name's key: compacted, its words in sorted order ("Yonezu Kenshi" is "Kenshi Yonezu", "SG 워너비" "SG워너비")."""
    return "".join(sorted(compact(word) for word in name.split()))


def _credit(name: str) -> Credit | None:
    outside, asides = _brackets(name)
    main = name_key(outside) or (name_key(asides[0]) if asides else "")
    if not main:
        return None
    aliases = {main}
    for aside in asides:
        key = name_key(aside)
        # "화사 (HWASA)" is one artist in two scripts; "원필 (DAY6)" and "순순희(지환)" name a group or a member:
        # the aside is an alias only when written in another script and not itself a list of names.
        if key and script_of(aside) != script_of(outside) and not _SPLIT.search(aside):
            aliases.add(key)
    return Credit(main, frozenset(aliases))


def _split_credit(credit: str) -> list[str]:
    """Split on separators outside brackets ("싹쓰리 (유두래곤, 린다G)" is one artist)."""
    parts: list[str] = []
    depth = 0
    start = 0
    masked = []
    for ch in credit:
        depth += (ch in _OPEN) - (ch in _CLOSE)
        masked.append(ch if depth <= 0 else "\0")
    flat = "".join(masked)
    for match in _SPLIT.finditer(flat):
        parts.append(credit[start:match.start()])
        start = match.end()
    parts.append(credit[start:])
    return [p.strip() for p in parts if p.strip()]


def split_printed(credit: str) -> list[str]:
    """The main artists of a credit as printed ("아일릿(ILLIT), X feat. Y" is "아일릿(ILLIT)", "X")."""
    return _split_credit(_FEAT_IN_CREDIT.split(credit, maxsplit=1)[0])


@lru_cache(maxsize=1 << 15)
def parse_credit(credit: str) -> tuple[tuple[Credit, ...], tuple[Credit, ...]]:
    """The main artists and the featured artists of a credit ("A & B Featuring C" is (A, B), (C,))."""
    head, *feats = _FEAT_IN_CREDIT.split(credit, maxsplit=1)
    main = tuple(c for c in map(_credit, _split_credit(head)) if c is not None)
    featured = tuple(c for part in feats for c in map(_credit, _split_credit(part)) if c is not None)
    return main, featured
