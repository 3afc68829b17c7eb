"""The service groups of the spec, in the order the app and CLI list them. Adding a group is its own
modules plus one line here."""

from __future__ import annotations

from chartgw.api.group import Group
from chartgw.groups import (
    digital_sales,
    dj_rankings,
    korea_chart,
    radio,
    ranking_charts,
    recognition,
    retail_digital,
    retail_music,
    retail_physical,
    short_video,
    social_trends,
    streaming,
    uk_charts,
    video,
)
from chartgw.index import artist_history

GROUPS: tuple[Group, ...] = (
    streaming.GROUP,
    video.GROUP,
    digital_sales.GROUP,
    korea_chart.GROUP,
    recognition.GROUP,
    ranking_charts.GROUP,
    uk_charts.GROUP,
    social_trends.GROUP,
    short_video.GROUP,
    dj_rankings.GROUP,
    retail_digital.GROUP,
    retail_music.GROUP,
    retail_physical.GROUP,
    radio.GROUP,
    artist_history.GROUP,  # last: its demo indexes the others' demo data
)
artist_history.register_sources(GROUPS)  # the index reads every group above by its entry mapping

