"""Refresh endpoints run the cron code path, `chartgw crawl GROUP ... --json`, in a child process:
isolated from the server, under the same per-group lock, answering what it committed."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import sys
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from chartgw.api.endpoints import ApiError, Call, Route
from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.crawl.runner import EXIT_BUSY

__all__ = ["admit_key", "admit_refresh", "crawl_in_subprocess", "on_replica"]

HOUR = 3600.0


def admit_refresh(call: Call, target: Hashable, clock: Callable[[], float] = time.monotonic) -> None:
    """At most one refresh of a target per `CHARTGW_REFRESH_INTERVAL_SECONDS` in this server process (a
    refresh costs the upstream a crawl; polling the snapshots costs nothing), and within the caller's
    per-key budget (`admit_key`): else a 429 with Retry-After. Nothing is counted when refused."""
    data = call.data
    interval = call.settings.get(config.REFRESH_INTERVAL_SECONDS)
    now = clock()
    last = data.refreshed.get(target)
    if last is not None and now - last < interval:
        wait = max(1, math.ceil(interval - (now - last)))
        raise ApiError(429, f"This was refreshed {now - last:.0f}s ago; refresh it again in {wait}s",
                       {"Retry-After": str(wait)})
    admit_key(call, clock)
    data.refreshed[target] = now


def admit_key(call: Call, clock: Callable[[], float] = time.monotonic) -> None:
    """At most `CHARTGW_REFRESHES_PER_KEY_PER_HOUR` refreshes started by one key in a group (a sliding hour in
    this server process), so one partner cannot keep every target of a group crawling: else a 429 with
    Retry-After saying when the oldest of its refreshes leaves the hour."""
    budget = call.settings.get(config.REFRESHES_PER_KEY_PER_HOUR)
    if budget == 0:
        return
    now = clock()
    started = call.data.key_refreshes.setdefault(call.key_id, deque())
    while started and now - started[0] >= HOUR:
        started.popleft()
    if len(started) >= budget:
        wait = max(1, math.ceil(HOUR - (now - started[0])))
        raise ApiError(429, f"This key started {len(started)} refreshes in the last hour, its limit "
                            f"(CHARTGW_REFRESHES_PER_KEY_PER_HOUR); try again in {wait}s", {"Retry-After": str(wait)})
    started.append(now)


async def crawl_in_subprocess(group: str, options: dict[str, str | None], settings: Settings) -> list[dict[str, Any]]:
    """Run `chartgw crawl GROUP ... --json` in a child process with `settings` (the app's): the cron code path,
    isolated from the server.

    Raises ApiError 409 when another crawl of the group holds the lock, 502 when the child died
    without reporting.
    """
    args = [sys.executable, "-m", "chartgw", "crawl", group, "--json"]
    for name, value in options.items():
        if value is not None:
            args += [f"--{name.replace('_', '-')}", value]
    proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                env=settings.child_environment())
    out, err = await proc.communicate()
    if proc.returncode == EXIT_BUSY:
        raise ApiError(409, f"Another crawl of {group} is running (cron or a refresh); try again shortly")
    try:
        outcomes = json.loads(out)
    except ValueError:
        reason = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise ApiError(502, f"The crawl process failed: {reason[0]}") from None
    return list(outcomes)


def on_replica(route: Route, what: str = "refreshes", writer_only: bool = False) -> Route:
    """`route` as a read replica serves it: a write (a POST refresh, which crawls; any route when `writer_only`,
    such as the webhooks, whose file only the writer keeps) answers 503 naming the writer once its request is
    valid; every other route is unchanged."""
    if route.method == "GET" and not writer_only:
        return route

    async def refuse(call: Call) -> Any:
        writer = call.settings.get(config.WRITER_URL)
        raise ApiError(503, f"This gateway is a read-only replica: {what} run on the writer"
                            + (f" ({writer})" if writer else ""))

    return dataclasses.replace(route, handler=refuse, errors=tuple(sorted({*route.errors, 503})))
