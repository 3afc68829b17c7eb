"""Every answer, seen once: its request id, its metrics and its access-log line.

`Observer.answered` is the one hook: the app's `ObserveMiddleware` calls it for what the app answers, and
the server's fast lane for what it answers itself. Both give the same labels: the group, the route's
template (`RouteLabels`), the status, who answered (`lane` or `app`) and the response cache's part.

Request ids: a client's own `X-Request-Id` is kept when it is sane (1-128 characters of letters, digits and
`-_.:/+=@~`, so it can go into a log line or a header as it is); otherwise the gateway makes one, a random
prefix per process and a counter (unique without a random draw per request). Every answer carries it.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chartgw.api.access import KEY_ID_SCOPE
from chartgw.api.endpoints import CACHE_SCOPE, REQUEST_ID_HEADER, EndpointApp
from chartgw.core import config
from chartgw.core.clock import Clock
from chartgw.core.settings import Settings
from chartgw.http.accesslog import AccessLog, Templates
from chartgw.http.metrics import (
    METRICS_PATH,
    MetricsEndpoint,
    RequestMetrics,
    StoreCollector,
    WorkerRequestMetrics,
    request_metrics,
    scrape_registry,
)

__all__ = [
    "APP",
    "LANE",
    "REQUEST_ID_HEADER",
    "REQUEST_ID_SCOPE",
    "Observability",
    "ObserveMiddleware",
    "Observer",
    "RouteLabels",
    "request_id",
]

REQUEST_ID_SCOPE = "chartgw.request_id"
APP = "app"
LANE = "lane"
SERVER = "server"
"""`answered_by` of the server's own refusals (chartgw.http.rsgi: 414, 408, 503), before the lane or the app."""
NO_CACHE = "none"
GATEWAY = "gateway"
"""The group label of paths outside every group (the front door, /docs, /metrics)."""
UNMATCHED = "(unmatched)"
"""The route label of a path no route matches: never the path itself (labels stay bounded)."""
REFUSED = "(refused)"
"""The route label of a refusal of the HTTP server itself: the request was not read far enough to route."""
REDIRECT = "(slash redirect)"
"""The route label of the 307 to a path's other spelling (with or without its trailing slash)."""
METHODS = frozenset({"GET", "HEAD", "POST", "OPTIONS", "PUT", "PATCH", "DELETE"})

_SAFE = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/+=@~"
_PREFIX = os.urandom(6).hex().encode()
_counter = itertools.count(1)


def request_id(sent: bytes | None) -> bytes:
    """The client's id when it is sane, else a new one."""
    if sent is not None and 0 < len(sent) <= 128 and not sent.translate(None, _SAFE):
        return sent
    return b"%s-%x" % (_PREFIX, next(_counter))


class RouteLabels:
    """(group, route template) of a request, from the route that answered it or, for a request refused before
    routing (401, 429), from the route it would have reached."""

    def __init__(self, groups: Iterable[str], fixed: dict[str, str], match: Callable[[Scope], BaseRoute | None],
                 routed: str) -> None:
        self.groups = frozenset(groups)
        self.fixed = fixed
        """Exact paths outside the groups to their route label (`/docs/assets/x.js` -> `/docs/assets/{path}`)."""
        self.match = match
        self.routed = routed
        """The scope entry where routing leaves the route that answered."""
        self._known: dict[int, tuple[str, str]] = {}  # id of a route (the app's, alive as long as it) -> labels

    def of(self, scope: Scope) -> tuple[str, str]:
        route = scope.get(self.routed)
        if not isinstance(route, Route):  # not routed to a group's route: refused before routing, or elsewhere
            path: str = scope["path"]
            fixed = self.fixed.get(path)
            if fixed is not None:
                return GATEWAY, fixed
            found = self.match(scope) if route is None else None
            if not isinstance(found, Route):
                return self._group(path), UNMATCHED if route is None else REDIRECT
            route = found
        known = self._known.get(id(route))  # by identity: a Starlette Route compares by value and is not hashable
        if known is None:
            known = self._known[id(route)] = (self._group(route.path), route.path)
        return known

    def _group(self, path: str) -> str:
        head = path.split("/", 2)[1] if path.startswith("/") else ""
        return head if head in self.groups else GATEWAY


class Observer:
    """Counts and logs answers; `metrics` and `log` are each optional (settings `METRICS`, `ACCESS_LOG`)."""

    def __init__(self, metrics: RequestMetrics | WorkerRequestMetrics | None, log: AccessLog | None) -> None:
        self.metrics = metrics
        self.log = log
        self._lane_labels: dict[int, tuple[str, str, Templates | None]] = {}
        """id of an endpoint (the app's) -> its group, route and access-log labels' JSON (`AccessLog.templates`)."""

    def answered(self, group: str, route: str, method: str, status: int, nbytes: int, seconds: float,
                 key_id: int | None, rid: bytes, answered_by: str, cache: str) -> None:
        if self.metrics is not None:
            self.metrics.observe(group, route, status, answered_by, cache, seconds)
        if self.log is not None:
            self.log.record(rid, key_id, method if method in METHODS else "OTHER", group, route,
                            status, nbytes, seconds, answered_by)

    def refused(self, status: int, method: str, nbytes: int, rid: bytes) -> None:
        """An answer of the HTTP server itself, before the lane or the app (a 400, 408, 414, 431 or 503)."""
        self.answered(GATEWAY, REFUSED, method, status, nbytes, 0.0, None, rid, SERVER, NO_CACHE)

    def lane_answered(self, endpoint: EndpointApp, status: int, nbytes: int, seconds: float, key_id: int | None,
                      rid: bytes, cache: str) -> None:
        """A GET the server's fast lane answered for `endpoint` (what `answered` does, in fewer steps: the lane
        answers in microseconds, so its labels and their log JSON are worked out once per endpoint)."""
        labels = self._lane_labels.get(id(endpoint))
        if labels is None:
            group = GATEWAY if endpoint.root else endpoint.data.group  # as RouteLabels labels the app's answers
            route = endpoint.path
            labels = self._lane_labels[id(endpoint)] = (
                group, route, self.log.templates("GET", group, route, LANE) if self.log is not None else None)
        if self.metrics is not None:
            self.metrics.observe(labels[0], labels[1], status, LANE, cache, seconds)
        if labels[2] is not None and self.log is not None:
            self.log.line(labels[2], rid, key_id, status, nbytes, seconds)


class ObserveMiddleware:
    """Plain ASGI, outermost: gives the request its id (in the scope and on the answer), and reports the answer
    to the observer once its last byte is handed to the server; an exception is reported as the 500 it becomes."""

    def __init__(self, app: ASGIApp, observer: Observer, labels: RouteLabels) -> None:
        self.app = app
        self.observer = observer
        self.labels = labels

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = request_id(next((value for name, value in scope["headers"] if name == REQUEST_ID_HEADER), None))
        scope[REQUEST_ID_SCOPE] = rid
        sent = [0, 0]  # status, body bytes
        header = (REQUEST_ID_HEADER, rid)

        async def send_observed(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent[0] = message["status"]
                headers = message.get("headers")
                if type(headers) is list:  # the responses here build a fresh list per response: extend it
                    headers.append(header)
                else:
                    message = {**message, "headers": [*(headers or ()), header]}
                await send(message)
                return
            sent[1] += len(message.get("body", b""))
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self._report(scope, sent[0], sent[1], started)

        try:
            await self.app(scope, receive, send_observed)
        except Exception:
            self._report(scope, 500, sent[1], started)
            raise

    def _report(self, scope: Scope, status: int, nbytes: int, started: float) -> None:
        group, route = self.labels.of(scope)
        self.observer.answered(group, route, scope["method"], status, nbytes, time.perf_counter() - started,
                               scope.get(KEY_ID_SCOPE), scope[REQUEST_ID_SCOPE], APP,
                               scope.get(CACHE_SCOPE, NO_CACHE))


class Observability:
    """What the settings ask for, assembled for `build_app`: the observer, `/metrics` when it is public (with its
    public path), and the own-port metrics listener and the log's last flush, run by the app's lifespan."""

    def __init__(self, groups: Sequence[str], clock: Clock, settings: Settings) -> None:
        place = settings.get(config.METRICS)
        self.routes: list[BaseRoute] = []
        self.public: set[str] = set()
        self.endpoint: MetricsEndpoint | None = None
        self.listen = place if isinstance(place, tuple) else None
        metrics = None
        if place != "off":
            registry = CollectorRegistry()
            metrics = request_metrics(registry)
            self.endpoint = MetricsEndpoint(scrape_registry(registry, StoreCollector(groups, settings, clock), settings))
            if place == "public":
                self.routes.append(Route(METRICS_PATH, self.endpoint.page, methods=["GET"]))
                self.public.add(METRICS_PATH)
        self.log = AccessLog() if settings.get(config.ACCESS_LOG) == "on" else None
        self.observer = Observer(metrics, self.log)

    def start(self) -> None:
        if self.endpoint is not None and self.listen is not None:
            self.endpoint.listen(*self.listen)

    def stop(self) -> None:
        if self.endpoint is not None:
            self.endpoint.close()
        if self.log is not None:
            self.log.flush()
