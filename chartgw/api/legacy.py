"""Legacy `-api` prefixes: `/korea-chart-api/...` is answered exactly as `/korea-chart/...`."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send


class LegacyPrefixMiddleware:
    """Rewrites the first path segment before access checks and routing, so both see one path."""

    def __init__(self, app: ASGIApp, prefixes: Iterable[str]) -> None:
        self.app = app
        self.legacy = legacy_names(prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            found = rewrite(self.legacy, scope["path"])
            if found is not None:
                head, current, path = found
                raw = scope.get("raw_path") or scope["path"].encode()
                # In place, as Starlette's router updates the scope: the request log outside sees the routed request.
                scope["path"], scope["raw_path"] = path, b"/" + current.encode() + raw[len(head.encode()) + 1:]
        await self.app(scope, receive, send)


def legacy_names(prefixes: Iterable[str]) -> dict[str, str]:
    """Each legacy first path segment (`korea-chart-api`) to the current one (`korea-chart`). A group whose name
    carries the suffix already (`artist-history-api`) has no legacy form: `/artist-history-api-api/` is a 404."""
    return {f"{name}-api": name for name in prefixes if not name.endswith("-api")}


def rewrite(legacy: dict[str, str], path: str) -> tuple[str, str, str] | None:
    """(legacy segment, current segment, current path) when `path` starts with a legacy prefix, else None."""
    head, sep, rest = path[1:].partition("/")
    current = legacy.get(head)
    return None if current is None else (head, current, f"/{current}{sep}{rest}")
