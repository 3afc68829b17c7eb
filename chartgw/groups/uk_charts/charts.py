"""/uk-charts: the Official Charts served, their settings, the week a chart is published, and how a credit
splits into artists.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from chartgw.api.catalog import Chart
from chartgw.core import config
from chartgw.core.text import compact
from chartgw.store.targets import TargetKey
from chartgw.upstreams import officialcharts
from chartgw.upstreams.officialcharts import (
    DEFAULT_KEYS,
    week_start_for,
)

NAME = "uk-charts"
WEEK_SECONDS = 7 * 86400
LONDON = ZoneInfo("Europe/London")
RELEASE_HOUR = 18
"""The Official Chart is announced on Fridays at 17:45 UK time; from 18:00 the new week counts as published."""
MAX_FAILURES_IN_A_ROW = 3
ONE_WEEK = timedelta(days=7)

DEFAULT_CHARTS: tuple[str, ...] = tuple(key for key in DEFAULT_KEYS if key != "singles-top-40")
"""Every chart of the site's menu but the Singles Top 40 (the first 40 rows of `singles`)."""


CHARTS_SETTING = config.Setting("UK_CHARTS", ",".join(DEFAULT_CHARTS),
                                "chart keys /uk-charts crawls and serves (comma-separated; see /uk-charts/charts)",
                                config.subset(DEFAULT_KEYS, "chart key", lower=True))
BACKFILL_DELAY_SETTING = config.Setting("UK_CHARTS_BACKFILL_DELAY_SECONDS", "3",
                                        "pause after each page a /uk-charts backfill fetches (politeness; 0 under "
                                        "replay)", config.seconds)

TARGET = TargetKey(("chart_key",))
CATALOG = tuple(Chart(key, TARGET, "weekly", {"chart_key": key}, market="=gb", latest="/uk-charts/{chart_key}/latest",
                     by_date="/uk-charts/{chart_key}/{date}", history="/uk-charts/snapshots?chart_key={chart_key}")
               for key in DEFAULT_KEYS)


def latest_published_week(moment: datetime) -> date:
    """The Friday starting the newest chart week published at `moment`: this Friday's week from 18:00 UK time on
    Friday, else the week before."""
    local = moment.astimezone(LONDON)
    day = local.date()
    if local.weekday() == officialcharts.FRIDAY and local.hour < RELEASE_HOUR:
        day -= timedelta(days=1)
    return week_start_for(day)


_SPLIT_WORDS = (" FEATURING ", " FEAT. ", " FEAT ", " FT. ", " FT ", " & ", " X ", " VS. ", " VS ", " WITH ")


def credited_artists(credit: str) -> list[str]:
    """The artists of one credit as the site prints it: "A FT B", "A & B", "A X B", "A/B/C" are two or three;
    "AC/DC" stays one (a "/" splits only when every part has at least three letters or digits)."""
    parts = [credit]
    for word in _SPLIT_WORDS:
        parts = [piece for part in parts for piece in _split_word(part, word)]
    names: list[str] = []
    for part in parts:
        pieces = [piece.strip() for piece in part.split("/")]
        names += pieces if len(pieces) > 1 and all(len(compact(p)) >= 3 for p in pieces) else [part.strip()]
    return [name for name in names if name] or [credit]


def _split_word(text: str, word: str) -> list[str]:
    upper = text.upper()
    pieces, start = [], 0
    while (found := upper.find(word, start)) != -1:
        pieces.append(text[start:found])
        start = found + len(word)
    pieces.append(text[start:])
    return pieces
