"""The gateway's front door: `GET /`, a status page of every group (HTML for a browser, JSON by
`Accept`), and `GET /openapi.json`, one OpenAPI document over every group. Both are public."""

from __future__ import annotations

import asyncio
import html
import logging
import time
from collections.abc import Callable, Sequence
from datetime import date, timedelta
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from chartgw.api.endpoints import Call, GroupData
from chartgw.api.group import Group
from chartgw.api.responses import HealthHead
from chartgw.core.config import SettingError
from chartgw.http.reasons import health_reasons
from chartgw.store import ChangeRow

__all__ = ["FrontDoor"]

DAYS = 7
log = logging.getLogger("chartgw.http.front")
GATEWAY_TAG = "gateway"
"""The joined document's tag of the gateway's own root paths (a document named "")."""


class DayOutcomes(msgspec.Struct):
    day: str
    ok: int
    failed: int


class GroupStatus(msgspec.Struct):
    name: str
    title: str
    status: str
    """The group's /health status, "ok" or "degraded"; "misconfigured" when a setting it reads is bad, "failing"
    when its health could not be read at all."""
    reasons: list[str]
    """Why it is not ok, in words (empty when it is)."""
    targets: int
    stale: int
    """Targets missing or older than twice their cadence."""
    last_crawl: str | None
    last_outcome: str | None
    """"ok" or "failed" (and why) of the newest crawl attempt."""
    days: list[DayOutcomes]
    """Crawl attempts per UTC day over the last week, oldest first."""
    links: dict[str, str]
    last_change: str | None = None
    """The group's latest change record in one line (when, chart, what changed); null before the first."""


class FrontPage(msgspec.Struct):
    service: str
    status: str
    """"ok" when every group is ok, else "degraded"."""
    groups: list[GroupStatus]
    openapi: str


class FrontDoor:
    """Builds the status page and the joined OpenAPI document from the groups and their data."""

    DOCUMENT_SECONDS = 60.0
    """How long the joined document is served before it is joined again from the groups' current ones."""

    def __init__(self, groups: Sequence[Group], datas: dict[str, GroupData],
                 documents: dict[str, Callable[[], dict[str, Any]]]) -> None:
        self.groups = list(groups)
        self.datas = datas
        self.documents = documents
        self._document = b""
        self._joined_at = float("-inf")

    async def status(self) -> FrontPage:
        statuses = [await self._group_status(group) for group in self.groups]
        overall = "ok" if statuses and all(s.status == "ok" for s in statuses) else "degraded"
        return FrontPage("chartgw", overall, statuses, "/openapi.json")

    async def _group_status(self, group: Group) -> GroupStatus:
        """The group's row. One group's bad setting or broken file is its row's to say, never the page's 500."""
        data = self.datas[group.name]
        now = data.clock()
        health = next((r for r in group.routes if r.path == "/health"), None)
        head: Any = None
        try:
            head = await health.handler(Call({}, data, now)) if health is not None else None
            status = head.status if isinstance(head, HealthHead) else "unknown"
            reasons = health_reasons(head) if isinstance(head, HealthHead) and status != "ok" else []
        except SettingError as exc:
            status, reasons = "misconfigured", [str(exc)]
        except Exception as exc:  # a broken file, a bug: this row says so, the other groups' rows still show
            log.exception("the health of /%s could not be read", group.name)
            status, reasons = "failing", [f"its /health could not be read: {type(exc).__name__}: {exc}"]
        targets = _stale_flags(head)
        try:
            fetched = await data.reader.fetch_log(None, 1)
            days = await data.reader.outcomes_by_day((now - timedelta(days=DAYS - 1)).date().isoformat())
            change = await data.reader.latest_change()
        except Exception as exc:
            log.exception("the fetch log of /%s could not be read", group.name)
            fetched, days, change = [], [], None
            status, reasons = "failing", [*reasons, f"its fetch log could not be read: {type(exc).__name__}: {exc}"]
        last = fetched[0] if fetched else None
        return GroupStatus(
            group.name, group.title, status, reasons, len(targets), sum(targets),
            last[2] if last else None, (last[4] if last[4] == "ok" else f"failed: {last[8]}") if last else None,
            [DayOutcomes(*d) for d in days],
            {"root": f"/{group.name}/", "health": f"/{group.name}/health", "openapi": f"/{group.name}/openapi.json"},
            change_line(group, change) if change is not None else None)

    async def page(self, request: Request) -> Response:
        page = await self.status()
        if "text/html" in request.headers.get("accept", ""):
            return HTMLResponse(render_html(page, self._today()))
        return Response(msgspec.json.encode(page), media_type="application/json")

    def _today(self) -> date:
        """The page's UTC day, by the groups' clock (build_app gives them one); without groups no row needs it."""
        data = next(iter(self.datas.values()), None)
        return data.clock().date() if data is not None else date.min

    async def openapi(self, request: Request) -> Response:
        if time.monotonic() - self._joined_at >= self.DOCUMENT_SECONDS:
            self._document = await asyncio.to_thread(self._joined)  # every group's document: off the event loop
            self._joined_at = time.monotonic()
        return Response(self._document, media_type="application/json")

    def _joined(self) -> bytes:
        return msgspec.json.encode(joined_document({name: build() for name, build in self.documents.items()}))


class _Summary(msgspec.Struct):
    """What the status page reads of a change summary (chartgw.store.diff.ChangeSummary)."""

    changed: bool
    entries_in: int
    entries_out: int
    moved: int
    new_number_one: bool
    number_one: dict[str, Any] | None


def change_line(group: Group, change: ChangeRow) -> str:
    """A change record in one line: "2026-11-20T05:30:00Z portal-a/realtime: 3 in, 3 out, 12 moved; new #1 Song - Artist"."""
    summary = msgspec.json.decode(change.summary, type=_Summary)
    what = (f"{summary.entries_in} in, {summary.entries_out} out, {summary.moved} moved" if summary.changed
            else "no change")
    top = summary.number_one.get("entry") if summary.number_one and summary.new_number_one else None
    if isinstance(top, dict):
        what += f"; new #1 {_entry_name(group, change.target, top)}"
    return f"{change.committed_at} {change.target}: {what}"


def _entry_name(group: Group, target: str, record: dict[str, Any]) -> str:
    """An entry as people name it: title and artist through the group's entry mapping, else its title or name."""
    mapped = group.entries.read(target, record) if group.entries is not None else None
    if mapped is not None:
        return f"{mapped.title} - {mapped.artist}" if mapped.title else mapped.artist
    return str(record.get("title") or record.get("name") or record.get("artist") or "?")


def _stale_flags(head: Any) -> list[bool]:
    """The stale flag of each target a group's health lists (under whatever name its response gives them)."""
    if not isinstance(head, msgspec.Struct):
        return []
    for name in head.__struct_fields__:
        value = getattr(head, name)
        if isinstance(value, list) and value and all(isinstance(getattr(v, "stale", None), bool) for v in value):
            return [v.stale for v in value]
    return []


def joined_document(documents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every group's document as one: paths under the group's prefix (a document named "" is the gateway's own
    root paths, the change feed's); a component whose name two groups use for different schemas is renamed after
    its group (`VideoHealthResponse`) and its refs follow."""
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for name, document in documents.items():
        own = document.get("components", {}).get("schemas", {})
        renames: dict[str, str] = {}
        while True:  # a schema referring to a renamed one differs too once its refs follow (CountriesResponse)
            more = {key: _group_prefix(name) + key for key, schema in own.items()
                    if key not in renames and key in schemas and schemas[key] != _renamed(schema, renames)}
            if not more:
                break
            renames.update(more)
        for key, schema in own.items():
            schemas[renames.get(key, key)] = _renamed(schema, renames)
        for path, operations in document.get("paths", {}).items():
            renamed = _renamed(operations, renames)
            for operation in renamed.values():  # operation ids are unique across the joined document
                if not isinstance(operation, dict):
                    continue
                if name and "operationId" in operation:
                    operation["operationId"] = name.replace("-", "_") + "_" + operation["operationId"]
                operation["tags"] = [name or GATEWAY_TAG]  # a reader (/docs) lists the operations group by group
            paths[f"/{name}{path}" if name else path] = renamed
    first = next(iter(documents.values()), {})
    return {
        "openapi": first.get("openapi", "3.1.0"),
        "info": {"title": "chartgw", "version": "1.0.0",
                 "description": "Every group of the music chart aggregation gateway in one document."},
        "tags": [{"name": name or GATEWAY_TAG, "description": document.get("info", {}).get("title", name)}
                 for name, document in documents.items()],
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": first.get("components", {}).get("securitySchemes", {})},
    }


def _group_prefix(name: str) -> str:
    return "".join(part.capitalize() for part in (name or "root").split("-"))


def _renamed(value: Any, renames: dict[str, str]) -> Any:
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            key = ref.rsplit("/", 1)[1]
            if key in renames:
                return {**value, "$ref": f"#/components/schemas/{renames[key]}"}
        return {k: _renamed(v, renames) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, renames) for v in value]
    return value


def render_html(page: FrontPage, today: date) -> str:
    """The status page: one row per group with its freshness and a week of crawl outcomes as bars, one slot
    per UTC day ending `today`. Rows and cells carry stable ids and classes (`data-group`) for scripts and tests."""
    rows = []
    for group in page.groups:
        name = html.escape(group.name, quote=True)
        by_day = {d.day: d for d in group.days}
        window = [(today - timedelta(days=DAYS - 1 - i)).isoformat() for i in range(DAYS)]
        bars = "".join(_bar(i, day, by_day.get(day)) for i, day in enumerate(window))
        last = html.escape(group.last_outcome or "never crawled")
        links = {k: html.escape(v, quote=True) for k, v in group.links.items()}
        rows.append(
            f"<tr id='group-{name}' data-group='{name}' class={group.status}>"
            f"<td class=group><a href='{links['root']}'>/{name}</a><div class=title>{html.escape(group.title)}</div></td>"
            f"<td class=status>{group.status}</td>"
            f"<td class=why>{'<br>'.join(html.escape(r) for r in group.reasons)}</td>"
            f"<td class=targets>{group.targets - group.stale} of {group.targets} fresh</td>"
            f"<td class=crawl>{html.escape(group.last_crawl or '-')}<div class=last>{last}</div></td>"
            f"<td class=change>{html.escape(group.last_change or 'none yet')}</td>"
            f"<td class=outcomes><svg width='{DAYS * 12}' height='24' role='img'"
            f" aria-label='crawl outcomes, last {DAYS} days'>{bars}</svg></td>"
            f"<td class=links><a href='{links['health']}'>health</a> <a href='{links['openapi']}'>openapi</a></td></tr>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>chartgw status</title>
<meta name="viewport" content="width=device-width,initial-scale=1"><link rel="icon" href="data:,">
<style>
body{{font:14px system-ui,sans-serif;margin:2em;color:#222}} table{{border-collapse:collapse}}
td,th{{padding:.4em .8em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}}
.title,.last,.change,.why{{color:#666;font-size:12px}} .why{{max-width:28em}}
.ok .status,#status.ok{{color:#176f2c}} .degraded .status,.misconfigured .status,.failing .status,#status.degraded{{color:#a33}}
</style></head>
<body><h1>chartgw <span id=status class={page.status}>{page.status}</span></h1>
{_summary(page)}<p>Every group, its freshness against its cadence, its latest change (all of them: <code>GET /changes</code>)
and its crawls over the last {DAYS} days (green: attempts that committed, red: failed, grey: none).
JSON: send <code>Accept: application/json</code>.
All groups in one document: <a href="{page.openapi}">{page.openapi}</a>.</p>
<table id=groups><thead><tr><th>group</th><th>status</th><th>why</th><th>targets</th><th>last crawl</th>
<th>latest change</th><th>last {DAYS} days</th><th></th></tr></thead>
<tbody>{"".join(rows)}</tbody></table></body></html>
"""


def _summary(page: FrontPage) -> str:
    """Under the heading: each group that is not ok, and its first reason (the rows below say all of them)."""
    items = [f"<li><a href='#group-{html.escape(g.name, quote=True)}'>/{html.escape(g.name)}</a> {g.status}: "
             f"{html.escape(g.reasons[0] if g.reasons else '')}</li>" for g in page.groups if g.status != "ok"]
    return f"<ul id=reasons>{''.join(items)}</ul>\n" if items else ""


def _bar(slot: int, day: str, outcomes: DayOutcomes | None) -> str:
    """One day's bar: its ok share green from the bottom, its failed share red above; a grey line without crawls."""
    x = 12 * slot
    if outcomes is None or outcomes.ok + outcomes.failed == 0:
        return f"<g class=none><title>{day}: no crawls</title><rect x='{x}' y='21' width='9' height='2' fill='#ccc'/></g>"
    ok_height = round(22 * outcomes.ok / (outcomes.ok + outcomes.failed))
    return (f"<g class=day><title>{day}: {outcomes.ok} ok, {outcomes.failed} failed</title>"
            f"<rect x='{x}' y='{23 - ok_height}' width='9' height='{ok_height}' fill='#2e9e4b'/>"
            f"<rect x='{x}' y='1' width='9' height='{22 - ok_height}' fill='#d9534f'/></g>")
