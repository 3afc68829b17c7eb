"""The one clock type: every crawl, store write and response that needs the time takes a `Clock`,
so tests (and the demo's back-dated observations) run at an injected moment, never at the wall clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = [
    "Clock",
    "fixed",
    "utc_now",
]

Clock = Callable[[], datetime]
"""Returns the current time as an aware UTC datetime."""


def utc_now() -> datetime:
    """The wall clock: the default `Clock` in production."""
    return datetime.now(UTC)


def fixed(moment: datetime) -> Clock:
    """A clock that always says `moment` (tests, seeding at a chosen time)."""
    return lambda: moment
