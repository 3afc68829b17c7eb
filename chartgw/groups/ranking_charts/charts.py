"""/ranking-charts: the Billboard charts served, their settings, and chart-week arithmetic (chart dates,
the newest published week, weeks back, the week a year before).
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from chartgw.api.catalog import Chart
from chartgw.core import config
from chartgw.store.targets import TargetKey
from chartgw.upstreams import billboard
from chartgw.upstreams.billboard import (
    DEFAULT_SLUGS,
    chart_date_for,
    previous_chart_date,
)

NAME = "ranking-charts"
WEEK_SECONDS = 7 * 86400
PRESETS = ("top-10", "top-40", "debuts", "re-entries", "gainers", "year-ago")
DEFAULT_PRESET = "top-10"
"""The preset of `/preset` without one (the spec lists `preset` as optional): the view a chart is known by."""
SLUG_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
FEATURING = re.compile(r"\s+(?:featuring|feat\.|ft\.)\s+", re.IGNORECASE)


# --- settings -------------------------------------------------------------------------------------------------


CHARTS_SETTING = config.Setting("RANKING_CHARTS", ",".join(DEFAULT_SLUGS),
                                "Billboard charts /ranking-charts crawls and lists (slugs of billboard.com/charts/...)",
                                config.subset(DEFAULT_SLUGS, "chart slug"))
BACKFILL_DELAY_SETTING = config.Setting("RANKING_CHARTS_BACKFILL_DELAY_SECONDS", "3",
                                        "pause between two weeks fetched by `chartgw backfill ranking-charts` "
                                        "(politeness; up to 50% jitter added)", config.seconds)


TARGET = TargetKey(("chart_slug",))
"""A chart's snapshots are stored under its slug."""
CHARTS = tuple(Chart(slug, TARGET, "weekly", {"chart_slug": slug}, market="=global" if "global" in slug else "=us",
                     latest="/ranking-charts/charts/{chart_slug}/latest",
                     by_date="/ranking-charts/charts/{chart_slug}/{date}",
                     history="/ranking-charts/charts/{chart_slug}/dates")
               for slug in DEFAULT_SLUGS)


# --- chart weeks ----------------------------------------------------------------------------------------------

FULL_SIZE_SINCE: dict[str, date] = {
    "hot-100": date(1958, 8, 4),
    "billboard-200": date(1967, 5, 13),
    "artist-100": date(2014, 7, 19),
    "billboard-global-200": date(2020, 9, 19),
    "billboard-global-excl-us": date(2020, 9, 19),
    "hot-country-songs": date(2012, 10, 20),
    "hot-r-and-b-hip-hop-songs": date(2012, 10, 20),
    "hot-rock-alternative-songs": date(2020, 6, 20),
    "hot-latin-songs": date(2012, 10, 20),
    "dance-electronic-songs": date(2013, 1, 26),
    "hot-rap-songs": date(2012, 10, 20),
}
"""From which chart week (conservatively) each chart has had today's size; a page of that week or later with fewer
rows is a short page. Older weeks of several charts were legitimately shorter and are taken with any rows."""


def required_size(slug: str, chart_date: date) -> int:
    """Rows a page of `slug` dated `chart_date` must have at least (0 = any non-empty page)."""
    since = FULL_SIZE_SINCE.get(slug)
    size = billboard.expected_size(slug)
    return size if size is not None and since is not None and chart_date >= since else 0


def newest_published(today: date) -> date:
    """The chart date of the newest chart out on `today`: charts come out on Tuesdays, dated the Saturday after."""
    saturday = chart_date_for(today + timedelta(days=4))
    return saturday if saturday - timedelta(days=4) <= today else saturday - timedelta(days=7)


def year_before(chart_date: date) -> date:
    """The chart date of the same week one year earlier (the week containing the same day of the previous year)."""
    try:
        day = chart_date.replace(year=chart_date.year - 1)
    except ValueError:  # 29 February
        day = chart_date.replace(year=chart_date.year - 1, day=28)
    return chart_date_for(day)


def weeks_between(older: date, newer: date) -> int:
    """Chart weeks from the week of `older` to the week of `newer` (both chart dates)."""
    return (newer - older).days // 7


def weeks_back(latest: date, weeks: int) -> date:
    """The chart date `weeks` chart weeks before `latest` (exact across the 1961/1962 Monday-to-Saturday change)."""
    target = latest - timedelta(weeks=weeks)
    if target >= billboard.FIRST_SATURDAY_CHART:
        return target
    day = billboard.FIRST_SATURDAY_CHART
    for _ in range(weeks_between(billboard.FIRST_SATURDAY_CHART, latest), weeks):
        day = previous_chart_date(day)
    return day
