"""How the index reads an entry's credit: every credited artist once (split on `,`, `&`, ` x `, `feat.`, `ft.`,
`featuring`, `with`, `/`, and featured credits in the title), one key each, the alias pairs a credit printed in
two scripts gives ("아이유(IU)"), and the alias table shipped and configured.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.core.text import artist_aliases, artist_key, compact, split_artists, title_key

__all__ = ["ALIASES_FILE_SETTING", "SHIPPED_ALIASES", "Credit", "alias_groups", "credit_keys", "credit_of", "credited_names",
           "entry_credit", "name_keys", "track_key"]

_FEATURED = re.compile(r"[\(\[]\s*(?:feat\.?|ft\.?|featuring|with)\s+([^\)\]]*)[\)\]]", re.IGNORECASE)
_JOINERS = re.compile(r"\s+(?:feat\.?|ft\.?|featuring|with|x|vs\.?)\s+|\s*/\s*", re.IGNORECASE)
_OF_GROUP = re.compile(r"\s+of\s+.+$", re.IGNORECASE)


def _split_credit(text: str) -> list[str]:
    featured = [f for inner in _FEATURED.findall(text) for f in _split_credit(_OF_GROUP.sub("", inner))]
    rest = _FEATURED.sub(" ", text)
    names = [name for part in _JOINERS.split(rest) for name in split_artists(part)]
    return names + featured


def credited_names(artist: str, artists: Sequence[str], title: str | None = None) -> list[str]:
    """Every artist one entry credits, once each: the credited list split on `,`, `&`, ` x `, `feat.`,
    `ft.`, `featuring`, `with` and `/`, plus artists featured in the title ("Song (feat. B)")."""
    names: list[str] = []
    for credit in list(artists) or [artist]:
        names += _split_credit(credit)
    if title:
        names += [f for inner in _FEATURED.findall(title) for f in _split_credit(_OF_GROUP.sub("", inner))]
    seen: dict[str, str] = {}
    for name in names:
        key = compact(name)
        if key and key not in seen:
            seen[key] = name.strip()
    return list(seen.values())


def name_keys(name: str) -> set[str]:
    """The keys a name given by a client (or printed by a chart) is known by: each credited artist's
    name outside brackets and each name inside them."""
    return {key for part in credited_names(name, [name]) for key in artist_aliases(part)}


class Credit(NamedTuple):
    names_json: str
    keys: tuple[str, ...]
    """One key per credited artist (its name outside brackets): what `appearance_artists` holds."""
    links: tuple[tuple[str, str], ...]
    """Alias pairs of one artist printed in two scripts ("아이유(IU)"): how a name in either script reaches the key."""
    single: str | None
    """The artist key when the entry credits one artist only."""


@lru_cache(maxsize=200_000)
def entry_credit(artist: str, artists: tuple[str, ...], title: str | None) -> Credit:
    """An entry's credit as indexed (cached: the same credits recur in every snapshot)."""
    return credit_of(credited_names(artist, artists, title))


def credit_of(names: list[str]) -> Credit:
    keys: dict[str, None] = {}
    links: list[tuple[str, str]] = []
    for name in names:
        keys[artist_key(name)] = None
        aliases = sorted(artist_aliases(name))
        links += [(a, b) for a in aliases for b in aliases if a != b]
    return Credit(json.dumps(names, ensure_ascii=False), tuple(keys), tuple(links),
                  artist_key(names[0]) if len(names) == 1 else None)


@lru_cache(maxsize=50_000)
def credit_keys(names_json: str) -> tuple[str, ...]:
    """The artist keys rows of a variant with these stored credits are indexed under (the first is the
    first credited artist's)."""
    return credit_of(json.loads(names_json)).keys


@lru_cache(maxsize=200_000)
def track_key(title: str | None, artist: str) -> str:
    return f"{title_key(title) if title else ''}|{artist_key(artist)}"


# --- aliases --------------------------------------------------------------------------------------

SHIPPED_ALIASES: tuple[tuple[str, ...], ...] = (
    ("아이유", "IU"),
    ("방탄소년단", "BTS"),
    ("블랙핑크", "BLACKPINK"),
    ("르세라핌", "LE SSERAFIM"),
    ("뉴진스", "NewJeans"),
    ("에스파", "aespa"),
    ("세븐틴", "SEVENTEEN"),
    ("트와이스", "TWICE"),
    ("아이브", "IVE"),
    ("로제", "ROSÉ"),
    ("제니", "JENNIE"),
    ("지민", "Jimin"),
    ("정국", "Jung Kook"),
    ("스트레이 키즈", "Stray Kids"),
    ("임영웅", "Lim Young Woong"),
    ("데이식스", "DAY6"),
    ("(여자)아이들", "(G)I-DLE", "i-dle"),
    ("키스오브라이프", "KISS OF LIFE"),
    ("보이넥스트도어", "BOYNEXTDOOR"),
    ("투모로우바이투게더", "TOMORROW X TOGETHER", "TXT"),
)
"""Names of one artist in several scripts that no chart prints together (extend with a file:
`CHARTGW_ARTIST_HISTORY_ALIASES_FILE`, one artist per line, names separated by `|`)."""


def _alias_file(value: str) -> Path | None:
    return Path(value) if value else None


ALIASES_FILE_SETTING = config.Setting(
    "ARTIST_HISTORY_ALIASES_FILE", "",
    "a UTF-8 file of extra artist aliases for /artist-history-api: one artist per line, names separated by '|'",
    _alias_file)


def alias_groups(settings: Settings) -> list[set[str]]:
    """The shipped alias table plus the lines of the file `settings` name, each a set of keys."""
    groups = [{compact(n) for n in names} - {""} for names in SHIPPED_ALIASES]
    path = settings.get(ALIASES_FILE_SETTING)
    if path is not None:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise config.SettingError(f"{ALIASES_FILE_SETTING.variable}: cannot read {path}: {exc.strerror}") from None
        groups += [{compact(n) for n in line.split("|")} - {""} for line in lines if line.strip()
                   and not line.lstrip().startswith("#")]
    return [g for g in groups if len(g) > 1]
