"""Refresh endpoints run the cron code path, `chartgw crawl GROUP ... --json`, in a child process:
isolated from the server, under the same per-group lock, answering what it committed."""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from collections.abc import Callable, Hashable
from typing import Any

from chartgw import config
from chartgw.crawl import EXIT_BUSY
from chartgw.endpoints import ApiError, GroupData

__all__ = ["admit_refresh", "crawl_in_subprocess"]


def admit_refresh(data: GroupData, target: Hashable, clock: Callable[[], float] = time.monotonic) -> None:
    """At most one refresh of a target per `CHARTGW_REFRESH_INTERVAL_SECONDS` in this server process (a
    refresh costs the upstream a crawl; polling the snapshots costs nothing): else a 429 with Retry-After."""
    interval = config.get(config.REFRESH_INTERVAL_SECONDS)
    now = clock()
    last = data.refreshed.get(target)
    if last is not None and now - last < interval:
        wait = max(1, math.ceil(interval - (now - last)))
        raise ApiError(429, f"This was refreshed {now - last:.0f}s ago; refresh it again in {wait}s",
                       {"Retry-After": str(wait)})
    data.refreshed[target] = now


async def crawl_in_subprocess(group: str, options: dict[str, str | None]) -> list[dict[str, Any]]:
    """Run `chartgw crawl GROUP ... --json` in a child process: the cron code path, isolated from the server.

    Raises ApiError 409 when another crawl of the group holds the lock, 502 when the child died
    without reporting.
    """
    args = [sys.executable, "-m", "chartgw", "crawl", group, "--json"]
    for name, value in options.items():
        if value is not None:
            args += [f"--{name.replace('_', '-')}", value]
    proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode == EXIT_BUSY:
        raise ApiError(409, f"Another crawl of {group} is running (cron or a refresh); try again shortly")
    try:
        outcomes = json.loads(out)
    except ValueError:
        reason = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise ApiError(502, f"The crawl process failed: {reason[0]}") from None
    return list(outcomes)
