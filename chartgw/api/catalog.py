"""Charts as data: what each group declares about the charts it serves (`Chart`), the one cadence helper every
group asks, `GET /charts` (every chart of every group, at the root) and the previous/next chart dates of a
chart-by-date answer (`dated`).

`/charts` is computed from the declarations and one store query per group file (`SnapshotReader.coverage`), so
a new group lists its charts by declaring them, never by code here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Protocol
from urllib.parse import quote

import msgspec

from chartgw.api.endpoints import Call, GroupData, Route
from chartgw.api.params import Param
from chartgw.core.settings import Settings
from chartgw.store.targets import TargetKey

__all__ = ["CADENCES", "CatalogData", "Chart", "cadence_of", "cadences", "catalog_routes", "dated"]

CADENCES: dict[str, int] = {
    "realtime": 300, "half-hourly": 1800, "hourly": 3600, "3-hourly": 3 * 3600, "daily": 86400,
    "weekly": 7 * 86400, "monthly": 31 * 86400, "yearly": 365 * 86400,
}
"""Every cadence a chart may declare, with the seconds between two editions (what staleness is measured by)."""

class Group(Protocol):
    """What `/charts` reads of a group (`chartgw.api.group.Group`, a layer above this module)."""

    @property
    def name(self) -> str: ...

    @property
    def charts(self) -> tuple[Chart, ...]: ...


_PLACEHOLDER = re.compile(r"{([a-z_][a-z0-9_]*)}")


@dataclass(frozen=True)
class Chart:
    """One chart of a group: the snapshot targets it is stored under, how often it is published, and the routes
    that serve it as URL templates (the gateway's path with `{field}`s of its target and `{date}`), None where the
    group has no such route."""

    chart: str
    """The chart's id in its group; `{field}`s of its target make one id per target (one declaration for the charts
    of a configurable list, e.g. any Billboard slug)."""
    target: TargetKey
    cadence: str
    fixed: Mapping[str, str] = field(default_factory=dict)
    """Target fields this chart's targets always have (a chart kind sharing the group's key)."""
    market: str = "=global"
    """The target field holding the market (a country code, a city, a location), or "=xx" for one fixed market."""
    latest: str | None = None
    by_date: str | None = None
    """`{date}` takes a chart date held (the `previous_date` / `next_date` of a chart-by-date answer)."""
    history: str | None = None

    def __post_init__(self) -> None:
        assert self.cadence in CADENCES, f"{self.chart}: cadence {self.cadence!r}; known: {sorted(CADENCES)}"
        assert set(self.fixed) <= set(self.target.fields), f"{self.chart}: fixed fields {sorted(self.fixed)}"
        assert self.market.startswith("=") or self.market in self.target.fields, f"{self.chart}: market {self.market!r}"
        allowed = {*self.target.fields, "date"}
        assert "date" not in _PLACEHOLDER.findall(self.chart), f"{self.chart}: a chart id names no date"
        for template in (self.chart, self.latest, self.by_date, self.history):
            if template is not None:
                assert template is self.chart or template.startswith("/"), f"{self.chart}: not a path: {template!r}"
                unknown = set(_PLACEHOLDER.findall(template)) - allowed
                assert not unknown, f"{self.chart}: {template!r} names {sorted(unknown)}, not fields of its target"
        assert self.by_date is None or "{date}" in self.by_date, f"{self.chart}: a by-date template takes {{date}}"

    @property
    def cadence_seconds(self) -> int:
        return CADENCES[self.cadence]

    def parts(self, target: str) -> dict[str, str] | None:
        """The target's field values when it is one of this chart's targets, else None."""
        parts = self.target.parse(target)
        if parts is None or any(parts[name] != value for name, value in self.fixed.items()):
            return None
        return parts

    def market_of(self, parts: Mapping[str, str]) -> str | None:
        return self.market[1:] if self.market.startswith("=") else parts.get(self.market)

    def pattern(self) -> str:
        """A GLOB over this chart's targets."""
        return self.target.pattern(**self.fixed)

    def fill(self, template: str | None, parts: Mapping[str, str]) -> str | None:
        """A template with the target's fields filled in (`{date}`, and any field not known, left as they are)."""
        if template is None:
            return None
        return _PLACEHOLDER.sub(lambda m: parts.get(m.group(1), m.group(0)), template)


def chart_of(charts: Iterable[Chart], target: str) -> Chart | None:
    """The first declared chart `target` is stored under (a catch-all declared last takes what no other does)."""
    return next((chart for chart in charts if chart.parts(target) is not None), None)


def cadence_of(charts: Iterable[Chart], target: str, default: str = "daily") -> int:
    """The seconds between two editions of the chart stored under `target` (`default`'s when no chart declares
    it): the one cadence function of every group (health, staleness, snapshot metadata, `/charts`)."""
    chart = chart_of(charts, target)
    return chart.cadence_seconds if chart is not None else CADENCES[default]


def cadences(charts: Sequence[Chart], targets: Iterable[str]) -> dict[str, int]:
    """Each of `targets` with its cadence in seconds (what `/health` expects)."""
    return {target: cadence_of(charts, target) for target in targets}


# --- GET /charts --------------------------------------------------------------------------------------------

class CatalogChart(msgspec.Struct):
    group: str
    chart: str
    market: str | None
    """An ISO alpha-2 code (lowercase), "global", or the group's own place name (a city, a location); null for a
    chart held in no market yet."""
    cadence: str
    """realtime (5 minutes), half-hourly, hourly, 3-hourly, daily, weekly, monthly or yearly."""
    cadence_seconds: int
    target: str | None
    """The snapshot target it is stored under (null: nothing stored yet)."""
    first_date: str | None
    last_date: str | None
    dates: int
    """Distinct chart dates held."""
    snapshots: int
    latest: str | None
    """URL of its latest edition; null when the group has no such route."""
    by_date: str | None
    """URL template of one edition: `{date}` takes a chart date held (first_date..last_date)."""
    history: str | None
    """URL of its stored history (snapshots, dates or a track's runs); null when the group has none."""


class CatalogGroup(msgspec.Struct):
    group: str
    charts: int
    """Rows of `charts` for this group (0: it declares no chart, e.g. the derived artist-history index)."""


class CatalogResponse(msgspec.Struct):
    count: int
    groups: list[CatalogGroup]
    charts: list[CatalogChart]


class CatalogData(GroupData):
    """Every group's data seen as one: its version moves whenever any group's does, so `/charts` is cached per
    data version like any answer."""

    def __init__(self, datas: Mapping[str, GroupData], clock: Callable[[], Any], *, settings: Settings) -> None:
        super().__init__("charts", clock, settings=settings)
        self.datas = datas

    async def current_version(self) -> int:
        return sum([await data.current_version() for data in self.datas.values()])

    def settled_version(self) -> int | None:
        versions = [data.settled_version() for data in self.datas.values()]
        return None if any(v is None for v in versions) else sum(v for v in versions if v is not None)


async def _group_rows(group: Group, data: GroupData | None, market: str | None) -> list[CatalogChart]:
    if not group.charts:
        return []
    coverage = await data.reader.spans() if data is not None else {}  # the group file's one query
    held: list[list[tuple[str | None, dict[str, str]]]] = [[] for _ in group.charts]
    for stored in sorted(coverage):
        index = next((i for i, chart in enumerate(group.charts) if chart.parts(stored) is not None), None)
        if index is not None:  # else not a chart's (a discovered catalogue, a station directory)
            held[index].append((stored, group.charts[index].parts(stored) or {}))
    rows: list[CatalogChart] = []
    for chart, targets in zip(group.charts, held, strict=True):
        if not targets and not _PLACEHOLDER.search(chart.chart):
            targets = [(None, dict(chart.fixed))]  # declared, nothing stored yet: what the declaration alone says
        for target, parts in targets:
            where = chart.market_of(parts)
            if market is not None and where != market:
                continue
            first, last, dates, snapshots = coverage.get(target or "", (None, None, 0, 0))
            rows.append(CatalogChart(
                group.name, chart.fill(chart.chart, parts) or chart.chart, where, chart.cadence, chart.cadence_seconds, target,
                first, last, dates, snapshots, chart.fill(chart.latest, parts), chart.fill(chart.by_date, parts),
                chart.fill(chart.history, parts)))
    return rows


def catalog_routes(groups: Sequence[Group], datas: Mapping[str, GroupData]) -> list[Route]:
    """`GET /charts` at the gateway's root, keyed: every declared chart of every group, one row per market held."""
    names = tuple(group.name for group in groups)

    async def every_chart(call: Call) -> CatalogResponse:
        wanted, market = call.params["group"], call.params["market"]
        listed: list[CatalogGroup] = []
        rows: list[CatalogChart] = []
        for group in groups:
            if wanted is not None and group.name != wanted:
                continue
            mine = await _group_rows(group, datas.get(group.name), market)
            listed.append(CatalogGroup(group.name, len(mine)))
            rows += mine
        return CatalogResponse(len(rows), listed, rows)

    params = (
        Param("group", kind="choice", choices=names, description="Only this group's charts"),
        Param("market", pattern=r"^[a-z0-9][a-z0-9 _-]{0,63}$",
              description='Only charts of this market ("us", "global", a city or location slug)'),
    )
    return [Route("/charts", every_chart, params, errors=(422,), rows="charts", response=CatalogResponse,
                  summary="Every chart of every group: market, cadence, first and last chart date, snapshots, and "
                          "the URLs of its latest, by-date and history routes (docs/charts.md)")]


# --- previous and next chart dates ---------------------------------------------------------------------------

_Neighbour = Annotated[str | None, msgspec.Meta(description="The chart date held just before this one (null: the first)")]
_Following = Annotated[str | None, msgspec.Meta(description="The chart date held just after this one (null: the newest)")]
_DATED: dict[type, type] = {}


def dated_type(base: type) -> type:
    """`base` (a chart response) with `previous_date` and `next_date` at its top level, after its own fields."""
    made = _DATED.get(base)
    if made is None:
        made = msgspec.defstruct(f"Dated{base.__name__}", [("previous_date", _Neighbour), ("next_date", _Following)],
                                 bases=(base,), kw_only=True, module=base.__module__)
        _DATED[base] = made
    return made


def _snapshot(payload: Any) -> tuple[str, str] | None:
    snapshot = getattr(payload, "snapshot", None)
    target, chart_date = getattr(snapshot, "target", None), getattr(snapshot, "chart_date", None)
    return (target, chart_date) if isinstance(target, str) and isinstance(chart_date, str) else None


def dated(group: str, route: Route, date_param: str) -> Route:
    """A chart-by-date route whose answer carries the chart dates held just before and after its own
    (`previous_date`, `next_date`: one indexed query of its snapshot's target) and a `Link` header naming the
    same route at those dates (rel="prev" / rel="next"). `date_param` is the parameter holding the date."""
    assert any(p.name == date_param for p in route.params), f"{route.path}: no parameter {date_param!r}"
    kinds = route.response if isinstance(route.response, tuple) else (route.response,)
    response = tuple(dated_type(kind) for kind in kinds)
    handler = route.handler

    async def with_neighbours(call: Call) -> Any:
        payload = await handler(call)
        if not isinstance(payload, msgspec.Struct):  # declared as a chart response: a struct with its snapshot
            raise TypeError(f"{route.path}: a dated route answers a msgspec Struct, not {type(payload).__name__}")
        found = _snapshot(payload)
        previous, following = await call.data.reader.neighbours(*found) if found else (None, None)
        kind = dated_type(type(payload))
        return kind(**{name: getattr(payload, name) for name in type(payload).__struct_fields__},
                    previous_date=previous, next_date=following)

    query = [p for p in route.params if p.where == "query"]

    def link(params: Mapping[str, Any], day: str) -> str:
        values = {**params, date_param: day}
        path = _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), route.path)
        shown = [(p.name, values[p.name]) for p in query
                 if p.name == date_param or (values.get(p.name) is not None and values.get(p.name) != p.default)]
        search = "&".join(f"{name}={_query_value(value)}" for name, value in shown)
        return f"/{group}{path}" + (f"?{search}" if search else "")

    def links(payload: Any, params: Mapping[str, Any]) -> bytes | None:
        return link_header(payload, params, link)

    return replace(route, handler=with_neighbours, response=response[0] if len(response) == 1 else response,
                   links=links)


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return quote(str(value), safe="")


def link_header(payload: Any, params: Mapping[str, Any], link: Callable[[Mapping[str, Any], str], str]) -> bytes | None:
    """The `Link` value of a dated answer: its previous and next chart dates as URLs of the same route."""
    if isinstance(payload, dict):
        previous, following = payload.get("previous_date"), payload.get("next_date")
    else:
        previous, following = getattr(payload, "previous_date", None), getattr(payload, "next_date", None)
    parts = [f'<{link(params, day)}>; rel="{rel}"' for day, rel in ((previous, "prev"), (following, "next"))
             if isinstance(day, str)]
    return ", ".join(parts).encode() if parts else None
