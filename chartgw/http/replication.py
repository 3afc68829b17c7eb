"""`GET /replication`: this node's replication state (docs/replication.md), public and never cached."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as StarletteRoute

from chartgw.core.clock import Clock
from chartgw.core.settings import Settings
from chartgw.replica.state import node_status

__all__ = ["replication_route"]


def replication_route(clock: Clock, settings: Settings) -> StarletteRoute:
    """`GET /replication` (public, never cached): this node's `node_status` under the app's `settings`."""

    async def replication(request: Request) -> Response:
        return Response(msgspec.json.encode(node_status(clock(), settings)), media_type="application/json",
                        headers={"cache-control": "no-store"})

    return StarletteRoute("/replication", replication, methods=["GET"])
