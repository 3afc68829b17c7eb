"""What a command runs with: the settings, the clock, the upstreams' transport and where progress goes.

The CLI builds one `Context` per command from the settings it resolved at start-up; tests build their
own. A command takes everything it needs from it, so nothing reaches for a module's clock, the process
environment or a global transport.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx

from chartgw.core.clock import Clock, utc_now
from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome

__all__ = ["Context", "Progress"]

Progress = Callable[[Outcome], Any]
"""Called with each target's outcome as it finishes (a terminal's progress line)."""


@dataclass(frozen=True)
class Context:
    settings: Settings
    """The settings the command runs with (the CLI's, resolved once at start-up)."""
    clock: Clock = utc_now
    """What now is for the command: fetch times, retention, the weeks a backfill may ask for."""
    transport: httpx.AsyncBaseTransport | None = None
    """The httpx transport crawls use (None: the network; tests replay upstreams in process)."""
    progress: Progress | None = None
    """Where each target's outcome is reported as it finishes (None: nowhere, e.g. under cron)."""
    interactive: bool = False
    """A person watches (a terminal): commands may draw progress bars and say more."""

    def replace(self, **changes: Any) -> Context:
        return replace(self, **changes)
