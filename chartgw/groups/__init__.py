"""The service groups of the spec, in the order the app and CLI list them. Adding a group is its own
modules plus one line here."""

from __future__ import annotations

from chartgw.group import Group
from chartgw.groups import digital_sales, korea_chart, recognition, streaming, video

GROUPS: tuple[Group, ...] = (
    streaming.GROUP,
    video.GROUP,
    digital_sales.GROUP,
    korea_chart.GROUP,
    recognition.GROUP,
)

