"""`GET /docs`: the API reference for people, Swagger UI over the joined `/openapi.json`. Public, like the
document it shows.

The page and its assets are served from the package (`chartgw/http/static`), never from a CDN: a gateway may run
where browsers reach nothing else, and a reference page should not tell a third party who reads it. The page's
Content-Security-Policy lets it load and call nothing but this origin. Swagger UI is vendored unchanged from
npm's swagger-ui-dist (version, licence and checksums in `chartgw/http/static/swagger-ui/VERSION`;
`scripts/update-docs-assets` fetches it again). It was chosen over Redoc, whose 2.x bundle loads its logo from
cdn.redoc.ly on every page and whose 3.x bundle sends telemetry unless told not to, and over Scalar, which
loads its fonts from its own CDN by default; Swagger UI also lets an integrator try a call with a key.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

__all__ = ["DOCS_PATH", "docs_routes", "public_paths"]

STATIC = Path(__file__).parent / "static"
DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"

# Relative links: the page works under a reverse proxy's prefix too ("/api/docs" loads "/api/openapi.json").
PAGE = b"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>chartgw API reference</title>
<meta name="viewport" content="width=device-width,initial-scale=1"><link rel="icon" href="data:,">
<link rel="stylesheet" href="docs/assets/swagger-ui/swagger-ui.css"></head>
<body><div id="swagger-ui" data-openapi="openapi.json"></div>
<script src="docs/assets/swagger-ui/swagger-ui-bundle.js"></script><script src="docs/assets/docs.js"></script>
</body></html>
"""
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
          "font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
"""Swagger UI sets inline styles; everything else it loads or calls must be this origin."""


async def page(request: Request) -> Response:
    return Response(PAGE, media_type="text/html; charset=utf-8", headers={
        "Cache-Control": "public, max-age=300", "Content-Security-Policy": POLICY, "X-Content-Type-Options": "nosniff"})


def docs_routes() -> list[BaseRoute]:
    """The page and its assets (StaticFiles: ETag and Last-Modified, so a browser's reload is a 304)."""
    return [Route(DOCS_PATH, page, methods=["GET"]), Mount(ASSETS_PATH, app=StaticFiles(directory=STATIC))]


def public_paths() -> set[str]:
    """The page and each bundled asset, as exact paths for the access table."""
    return {DOCS_PATH, *(f"{ASSETS_PATH}/{path.relative_to(STATIC).as_posix()}"
                         for path in STATIC.rglob("*") if path.is_file())}
