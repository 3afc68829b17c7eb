"""OpenAPI 3.1 documents built from a group's route table, so the docs cannot drift from the code."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from chartgw.api.endpoints import JSON, Route
from chartgw.api.formats import DOCUMENTED
from chartgw.api.params import Param
from chartgw.core.settings import Settings

ERROR_DESCRIPTIONS = {
    401: "Missing, unknown, revoked or expired API key",
    403: "A limit of the key is reached",
    404: "No such identifier, or no snapshot yet",
    406: "Not acceptable: the representation asked for (format, Accept) is not one this endpoint answers in",
    409: "Another refresh is running",
    422: "Validation error",
    429: "Rate limit of the key reached; retry after the Retry-After seconds",
    502: "The upstream failed; the last good snapshot stays",
    503: "Storage busy or the gateway misconfigured; retry after the Retry-After seconds when given",
}
RATE_HEADERS = {
    "X-RateLimit-Limit": {"description": "Requests per minute the key may make", "schema": {"type": "integer"}},
    "X-RateLimit-Remaining": {"description": "Requests left in this minute", "schema": {"type": "integer"}},
    "X-RateLimit-Reset": {"description": "Seconds until the minute's window ends", "schema": {"type": "integer"}},
}
ETAG_HEADER = {"ETag": {"description": "The body's entity tag; send it back in If-None-Match", "schema": {"type": "string"}}}
IF_NONE_MATCH = {"name": "If-None-Match", "in": "header", "required": False, "schema": {"type": "string"},
                 "description": "The ETag of a body held: a 304 with no body when it is still the current one"}
LINK_HEADER = {"Link": {"description": 'The same route at the previous and next chart dates held: `<url>; rel="prev"`, '
                                 '`<url>; rel="next"` (absent at the ends)', "schema": {"type": "string"}}}
"""A chart-by-date answer's (`Route.links`: `chartgw.api.catalog.dated`)."""
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}}

COMMON_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object", "required": ["detail"],
        "properties": {"detail": {"description": "What went wrong", "anyOf": [{"type": "string"}, {"type": "object"}]}},
    },
    "ValidationError": {
        "type": "object", "required": ["loc", "msg", "type"],
        "properties": {
            "loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
            "msg": {"type": "string"},
            "type": {"type": "string"},
            "input": {},
            "ctx": {"type": "object"},
        },
    },
    "HTTPValidationError": {
        "type": "object", "required": ["detail"],
        "properties": {"detail": {"type": "array", "items": {"$ref": "#/components/schemas/ValidationError"}}},
    },
}


def _operation_id(method: str, path: str) -> str:
    return method.lower() + "_" + (re.sub(r"[^a-z0-9]+", "_", path.lower()).strip("_") or "root")


def _response_types(route: Route) -> tuple[Any, ...]:
    """A route documents one response type, or several alternatives as a tuple."""
    if route.response is None:
        return ()
    return route.response if isinstance(route.response, tuple) else (route.response,)


def _one_of(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    return {} if not schemas else schemas[0] if len(schemas) == 1 else {"anyOf": schemas}


DATE_FIELDS = re.compile(r"(^|_)(date|day|first_seen|last_seen)$|_date$|^week_(start|end)$")
TIME_FIELDS = re.compile(r"_at$|._since$")
"""`since` alone is a date in one response (a query echo) and a time in others: no format is claimed for it."""
PARTIAL_DATES = frozenset({"first_release_date"})
"""Dates an upstream may give as a year or a year and month (MusicBrainz): no format is claimed."""


def _declare_formats(schema: dict[str, Any]) -> None:
    """String properties named as dates ("chart_date") or times ("fetched_at") say their format, so a
    generated client parses them; the values are YYYY-MM-DD and ISO 8601 UTC timestamps throughout."""
    for name, prop in schema.get("properties", {}).items():
        if name in PARTIAL_DATES:
            continue
        for option in prop.get("anyOf", [prop]):
            if option.get("type") == "string" and "format" not in option:
                if TIME_FIELDS.search(name):
                    option["format"] = "date-time"
                elif DATE_FIELDS.search(name):
                    option["format"] = "date"


def documented_paths(route: Route) -> list[tuple[str, dict[str, str]]]:
    """The paths a route is documented under, each with the path parameters it fixes: its own path, or, when a
    path parameter's choices depend on another path parameter (`choices_by`), one path per value of that one
    as a literal segment ("/portal-a/charts/{chart_type}"), so each declares its own enum."""
    for param in route.params:
        if param.where == "path" and param.choices_by is not None:
            other, table = param.choices_by
            return [(route.path.replace("{" + other + "}", value), {other: value}) for value in table]
    return [(route.path, {})]


def _parameter(param: Param, fixed: dict[str, str], settings: Settings | None) -> dict[str, Any]:
    schema, description = param.json_schema(settings), param.description
    if param.choices_by is not None:
        other, table = param.choices_by
        if other in fixed:
            schema = {**schema, "enum": list(table[fixed[other]])}
        else:
            description += f"; by {other}: " + "; ".join(f"{key}: {', '.join(values)}" for key, values in table.items())
    return {"name": param.name, "in": param.where, "required": param.required or param.where == "path",
            "description": description, "schema": schema}


def build_document(name: str, title: str, description: str, routes: list[Route], settings: Settings | None = None,
                   ) -> dict[str, Any]:
    """The OpenAPI document of `routes`; what it declares from the data (a discovered catalogue's values) is read
    under `settings`, the app's (without them it is left out)."""
    types = list(dict.fromkeys([*(t for r in routes for t in _response_types(r)), *(r.body for r in routes if r.body)]))
    refs, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    schemas = {**COMMON_SCHEMAS, **components}
    ref_of = dict(zip(types, refs, strict=True))
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        cached = route.cache_ttl > 0
        rate = {} if route.public else RATE_HEADERS
        content = ({"application/json": {"schema": _one_of([ref_of[t] for t in _response_types(route)])}}
                   if route.media_type == JSON else {route.media_type.decode(): {"schema": {"type": "string"}}})
        if route.rows is not None:  # a chart or list: its rows as CSV and NDJSON too (chartgw.api.formats)
            content.update({media: {"schema": {"type": "string"}} for media in DOCUMENTED.values()})
        responses: dict[str, Any] = {"200": {
            "description": "Success" if route.rows is None else "Success: the JSON answer, or its rows as CSV or NDJSON",
            "headers": {**(ETAG_HEADER if cached else {}), **(LINK_HEADER if route.links is not None else {}), **rate},
            "content": content,
        }}
        if cached:
            responses["304"] = {"description": "Not modified: the If-None-Match sent names the current body",
                                "headers": {**ETAG_HEADER, **rate}}
        codes = (set(route.errors) | ({422} if route.params else set()) | (set() if route.public else {401, 429})
                 | {406, 503})
        for code in sorted(codes):
            schema = "HTTPValidationError" if code == 422 else "Error"
            responses[str(code)] = {"description": ERROR_DESCRIPTIONS.get(code, "Error"),
                                    "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}
            if code in (429, 503):
                responses[str(code)]["headers"] = RETRY_AFTER
        for path, fixed in documented_paths(route):
            operation: dict[str, Any] = {
                "operationId": _operation_id(route.method, path),
                "summary": route.summary,
                "parameters": [_parameter(p, fixed, settings) for p in route.params if p.name not in fixed]
                + ([IF_NONE_MATCH] if cached else []),
                "responses": responses,
            }
            if route.body is not None:
                operation["requestBody"] = {"required": True,
                                            "content": {"application/json": {"schema": ref_of[route.body]}}}
            if not route.public:
                operation["security"] = [{"APIKeyHeader": []}]
            paths.setdefault(path, {})[route.method.lower()] = operation
    schemas.update(declared for route in routes for p in route.params if (declared := p.component(settings)) is not None)
    for key, schema in schemas.items():
        _declare_formats(schema)
        if schema.get("title") == key:
            # The component's name says it; a generated client names its model after a title first, so one kept
            # here would name two models alike once the joined document renames a clash (VideoHealthResponse).
            del schema["title"]
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": "1.0.0", "description": description},
        "servers": [{"url": f"/{name}"}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"APIKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key"}},
        },
    }
