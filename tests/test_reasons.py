"""Why a health answer is not ok, read from the shapes the groups' health answers share."""

from __future__ import annotations

import msgspec

from chartgw.api.responses import HealthHead, TargetStatus
from chartgw.http.reasons import UNEXPLAINED, health_reasons


class Market(msgspec.Struct):
    market: str
    host: str
    state: str
    reason: str | None
    error: str | None


class Monitor(msgspec.Struct):
    running: bool
    stopped_at: str | None


class Health(HealthHead):
    markets: list[Market]
    monitor: Monitor
    targets: list[TargetStatus]


def _target(name: str, fetched_at: str | None, failure: str | None = None) -> TargetStatus:
    state = "never crawled" if fetched_at is None else "stale"
    return TargetStatus(name, None, None, None, fetched_at, None, True, state, failure)


def test_every_part_that_is_not_ok_is_named_with_its_reason() -> None:
    head = Health("degraded", "retail", [Market("us", "www.amazon.com", "ok", None, None),
                                         Market("jp", "www.amazon.co.jp", "backing_off", "robot_check", None)],
                  Monitor(False, "2026-11-20T05:30:00Z"),
                  [_target(f"t{n}", None) for n in range(5)] + [
                      _target("old", "2026-11-01T00:00:00Z", "2026-11-19T00:00:00Z: HTTP 503"),
                      TargetStatus("fine", 1, None, None, "2026-11-20T05:00:00Z", 60, False)])
    assert health_reasons(head) == [
        "jp backing off: robot_check",
        "monitor not running (stopped 2026-11-20T05:30:00Z)",
        "5 of 7 targets never crawled: t0, t1, t2 (+2 more)",
        "1 of 7 targets stale: old",
        "last failure (old): 2026-11-19T00:00:00Z: HTTP 503",
    ]


def test_a_degraded_answer_that_says_nothing_says_so() -> None:
    assert health_reasons(HealthHead("degraded", "x")) == [UNEXPLAINED]
