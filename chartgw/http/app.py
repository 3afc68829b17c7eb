"""Builds the Starlette app from the groups' route tables, behind the legacy-prefix and key middleware."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.routing import Route as StarletteRoute
from starlette.types import Receive, Scope, Send

from chartgw.api.access import (
    AccessTable,
    ApiKeyMiddleware,
    Gate,
    KeyChecker,
    KeyLoad,
    KeyStore,
    RateLimiter,
    keys_db_path,
)
from chartgw.api.cache import ResponseCache
from chartgw.api.catalog import CatalogData, catalog_routes
from chartgw.api.endpoints import Call, EndpointApp, GroupData, Route
from chartgw.api.group import Group
from chartgw.api.legacy import LegacyPrefixMiddleware, legacy_names
from chartgw.api.openapi import build_document
from chartgw.api.refresh import on_replica
from chartgw.api.responses import FETCH_LOGS_ROUTE
from chartgw.core import config
from chartgw.core.clock import Clock, utc_now
from chartgw.core.settings import Settings
from chartgw.groups import GROUPS
from chartgw.http import apidocs, exports
from chartgw.http.cors import CorsMiddleware, CorsPolicy
from chartgw.http.fastlane import FastLane
from chartgw.http.front import FrontDoor
from chartgw.http.observe import REQUEST_ID_SCOPE, Observability, ObserveMiddleware, RouteLabels
from chartgw.http.replication import replication_route
from chartgw.index.history import INDEX_NAME
from chartgw.index.identity.include import ranked, with_includes
from chartgw.index.identity.routes import identity_routes
from chartgw.push.changes import DIFF_ROUTE, ChangeHub, changes_routes
from chartgw.push.hooks import hooks_routes
from chartgw.replica.state import usage_path


class EndpointInfo(msgspec.Struct):
    method: str
    path: str
    auth: str
    summary: str


class GroupRoot(msgspec.Struct):
    service: str
    title: str
    description: str
    openapi: str
    endpoints: list[EndpointInfo]


DocumentBuilder = Callable[[], dict[str, Any]]


def service_routes(group: Group, documents: dict[str, DocumentBuilder] | None = None,
                   identity: GroupData | None = None, settings: Settings | None = None) -> list[Route]:
    """The group's own routes plus what every group has: its public root, its OpenAPI document, the log of
    its crawl attempts, (when it crawls snapshots) the diff between two of them and its whole-history exports. The
    document is built anew for each data version (the route's cache keeps it), so what it declares from the data
    (a discovered catalogue's values) is current; `documents` receives the group's builder. With `identity` (the
    index's data), its chart lists take `include=identity` and `include=facts` (`chartgw.index.identity.include`)."""
    mapping = group.entries
    own = [with_includes(r, mapping, identity) if identity is not None and mapping is not None and ranked(r) else r
           for r in group.routes]
    root_info: list[EndpointInfo] = []

    async def root(call: Call) -> GroupRoot:
        return GroupRoot(group.name, group.title, group.description, f"/{group.name}/openapi.json", root_info)

    def document() -> dict[str, Any]:
        return build_document(group.name, group.title, group.description, routes, settings)

    async def openapi(call: Call) -> dict[str, Any]:
        # Built in a worker thread: a document declares what the data holds (a discovered catalogue's values,
        # read from SQLite) and is large; neither may hold up the event loop.
        return await asyncio.to_thread(document)

    # The platform's routes first: a group's catch-all path ("/{year}") must not shadow them.
    routes = [
        Route("/", root, public=True, errors=(), summary="Service root: what this group serves", response=GroupRoot),
        Route("/openapi.json", openapi, public=True, errors=(), summary="This OpenAPI document",
              response=dict[str, Any]),
        FETCH_LOGS_ROUTE,
        *([DIFF_ROUTE] if group.targets is not None else []),  # a group that crawls snapshots into its file
        *exports.EXPORT_ROUTES,
        *own,
    ]
    assert len({(r.method, r.path) for r in routes}) == len(routes), f"{group.name} declares a platform route itself"
    root_info.extend(EndpointInfo(r.method, f"/{group.name}{r.path}", "public" if r.public else "X-API-Key", r.summary)
                     for r in routes)
    document()  # a declaration error shows when the app is built, not at the first request
    if documents is not None:
        documents[group.name] = document
    return routes


class GroupRoutes(BaseRoute):
    """Every group's routes, indexed by the group's prefix: a request is matched against its own
    group's routes only, so adding groups does not slow the others down (a flat table costs about
    0.4 us per route declared before the match; a Mount per group about 5 us for its child scope)."""

    ROUTE = "chartgw.route"

    def __init__(self, by_group: dict[str, list[StarletteRoute]]) -> None:
        self.by_group = by_group

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http":
            return Match.NONE, {}
        match, child = self._match(scope)
        if match is Match.NONE and scope["path"].startswith("/"):
            # The other spelling of the path (with or without its trailing slash) answers with a relative
            # redirect, never one built from the client's Host header.
            path: str = scope["path"]
            other = path[:-1] if path.endswith("/") else path + "/"
            if other != "/" and self._match({**scope, "path": other})[0] is Match.FULL:
                return Match.FULL, {self.ROUTE: SlashRedirect(other)}
        return match, child

    def _match(self, scope: Scope) -> tuple[Match, Scope]:
        path: str = scope["path"]
        prefix = path.split("/", 2)[1] if path.startswith("/") else ""  # "*" (OPTIONS *) has no group
        partial: Scope | None = None
        for route in self.by_group.get(prefix, ()):
            match, child = route.matches(scope)
            if match is Match.FULL:
                return match, {**child, self.ROUTE: route}
            if match is Match.PARTIAL and partial is None:
                partial = {**child, self.ROUTE: route}
        return (Match.PARTIAL, partial) if partial is not None else (Match.NONE, {})

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await scope[self.ROUTE].handle(scope, receive, send)

    def route_for(self, scope: Scope) -> BaseRoute | None:
        """The route a request's path and method would reach, without routing it (labels of refused requests)."""
        return self._match(scope)[1].get(self.ROUTE)


class SlashRedirect:
    """A 307 to the same request at `path` (and its query), as a relative Location."""

    def __init__(self, path: str) -> None:
        self.path = path

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        query = scope.get("query_string", b"")
        location = self.path.encode() + (b"?" + query if query else b"")
        body = msgspec.json.encode({"detail": f"Moved to {self.path}"})
        await send({"type": "http.response.start", "status": 307, "headers": [
            (b"location", location), (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def _json_response(status: int, detail: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(msgspec.json.encode({"detail": detail}), status_code=status, headers=headers,
                    media_type="application/json")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _json_response(exc.status_code, exc.detail, dict(exc.headers) if exc.headers else None)


async def _server_error(request: Request, exc: Exception) -> Response:
    rid: bytes | None = request.scope.get(REQUEST_ID_SCOPE)
    return _json_response(500, "Internal server error", {"X-Request-Id": rid.decode()} if rid else None)


def declared_routes(groups: Sequence[Group], documents: dict[str, DocumentBuilder] | None = None,
                    identity: GroupData | None = None, settings: Settings | None = None) -> list[tuple[Group, Route]]:
    """Every group's routes, each group's built once (its OpenAPI document's builder kept in `documents`)."""
    return [(group, route) for group in groups for route in service_routes(group, documents, identity, settings)]


def access_table(declared: Sequence[tuple[Group, Route]], extra: Iterable[str] = ()) -> AccessTable:
    """Public: the routes declared public (roots, health, schema documents) and `extra` paths; all else needs a
    key."""
    public: set[str] = {"/", "/openapi.json", "/replication", *extra}  # the front door, joined document, replication
    for group, route in declared:
        if route.public:
            public.add(f"/{group.name}{route.path}")
            if route.path == "/":
                public.add(f"/{group.name}")
    return AccessTable(public)


def build_app(groups: Sequence[Group] | None = None, checker: KeyChecker | None = None,
              clock: Clock = utc_now, limiter: RateLimiter | None = None, *, settings: Settings) -> Starlette:
    """The gateway over `groups` (default: all) with `settings`, which its handlers, workers and middleware read
    (each app its own: two apps of two configurations share a process); `clock` is what responses take as now
    (ages, staleness)."""
    return _build_app(list(groups if groups is not None else GROUPS), checker, clock, limiter, settings)


def build_served_app() -> Starlette:
    """`chartgw serve --workers N`'s factory (each worker process calls it): the gateway with the settings of the
    worker's environment, resolved once (the parent exported what it resolved)."""
    return build_app(settings=Settings.from_environment())


def build_replica_app(settings: Settings | None = None) -> Starlette:
    """`chartgw serve --read-only`'s factory (each worker process calls it without `settings`: those of its
    environment, resolved once): the gateway with CHARTGW_READ_ONLY in force whatever the settings say."""
    settings = settings if settings is not None else Settings.from_environment()
    return build_app(settings=settings.with_values({config.READ_ONLY.variable: "1"}))


def _build_app(groups: list[Group], checker: KeyChecker | None, clock: Clock, limiter: RateLimiter | None,
               settings: Settings) -> Starlette:
    cache = ResponseCache(max_bytes=settings.get(config.CACHE_MAX_MB) * 1024 * 1024)
    read_only = settings.get(config.READ_ONLY)
    datas = {g.name: GroupData(g.name, clock, read_only, settings=settings) for g in groups}
    documents: dict[str, DocumentBuilder] = {}
    # recording identity's (docs/identity.md)
    indexed = datas.get(INDEX_NAME) or GroupData(INDEX_NAME, clock, read_only, settings=settings)
    declared = declared_routes(groups, documents, indexed, settings)
    door = FrontDoor(groups, datas, documents)
    by_group: dict[str, list[StarletteRoute]] = {}
    for group, route in declared:
        if read_only:  # exports are built from the writer's files (a followed file moves behind SQLite's back)
            route = (on_replica(route, "exports", writer_only=True) if route in exports.EXPORT_ROUTES
                     else on_replica(route))
        by_group.setdefault(group.name, []).append(StarletteRoute(
            f"/{group.name}{route.path}", EndpointApp(route, datas[group.name], cache), methods=[route.method]))
    seen = Observability([g.name for g in groups], clock, settings)
    group_routes = GroupRoutes(by_group)
    # The change feed and webhooks at the root, over every group's file (read through the hub, not `feed`).
    load = KeyLoad.of(settings)  # each key's requests in progress, long polls and streams, capped per key
    hub = ChangeHub(datas, load, settings=settings)
    feed = GroupData("changes", clock, settings=settings)
    hooks, exported = hooks_routes([g.name for g in groups]), exports.root_routes(datas)
    if read_only:  # hooks.sqlite is the writer's (its `chartgw deliver` reads it) and so are the exports
        hooks = [on_replica(route, "webhooks", writer_only=True) for route in hooks]
        exported = [on_replica(route, "exports", writer_only=True) for route in exported]
    identity = identity_routes()
    # every group's version: /charts is cached until any group's data moves
    catalog = CatalogData(datas, clock, settings=settings)
    charts = catalog_routes(groups, datas)
    root_routes = [*changes_routes(hub), *hooks, *exported, *identity, *charts]
    documents[""] = lambda: build_document("", "chartgw root", "Every group's changes, webhooks, exports, recording"
                                           " identity and chart catalog", root_routes)
    # The groups' routes first: every chart request is matched there; the front door's paths and /docs after.
    routes = [group_routes, StarletteRoute("/", door.page, methods=["GET"]),
              StarletteRoute("/openapi.json", door.openapi, methods=["GET"]),
              *(StarletteRoute(r.path, EndpointApp(r, indexed if r in identity else catalog if r in charts else feed,
                                                    cache, root=True), methods=[r.method])
                for r in root_routes),
              *apidocs.docs_routes(), *seen.routes, replication_route(clock, settings)]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        seen.start()
        yield
        seen.stop()
        await hub.close()
        for data in {*datas.values(), indexed}:
            await data.reader.close()

    front = {"/", "/openapi.json", *apidocs.public_paths(), *seen.public}
    labeled = front | {r.path for r in root_routes} | {"/replication"}  # every path of the app outside the groups
    labels = RouteLabels([g.name for g in groups], {path: path for path in labeled},
                         group_routes.route_for, GroupRoutes.ROUTE)
    checker = checker or KeyChecker(keys_db_path(settings), plain_keys=[*settings.get(config.API_KEYS)], clock=clock)
    # A replica counts its keys' requests in a node-local file: it never writes a replicated one.
    limiter = limiter or RateLimiter(settings.get(config.RATE_LIMIT_PER_MINUTE),
                                     KeyStore(keys_db_path(settings), usage_path=usage_path(settings)))
    gate = Gate(access_table(declared, front), checker, limiter, load)  # one way in: the key middleware's and the fast lane's
    cors_origins = settings.get(config.CORS_ORIGINS)
    policy = CorsPolicy(cors_origins) if cors_origins else None
    cors = [Middleware(CorsMiddleware, policy=policy)] if policy is not None else []
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(ObserveMiddleware, observer=seen.observer, labels=labels),  # sees every answer
            *cors,  # before the key check: a preflight carries no key
            Middleware(LegacyPrefixMiddleware, prefixes=[g.name for g in groups]),
            Middleware(ApiKeyMiddleware, gate=gate),
        ],
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # GroupRoutes redirects with a relative Location instead
    app.state.change_hub = hub
    # The same cache, gate, CORS and observer, for repeats the server answers before the app (chartgw.http.rsgi), and
    # the settings the server's limits are read from.
    app.state.fast_lane = FastLane(cache, gate, legacy_names(g.name for g in groups), seen.observer, policy)
    app.state.settings = settings
    app.state.observability = seen
    return app
