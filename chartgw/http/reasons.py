"""Why a group's health is not `ok`, in words, read from its own /health answer (for the front page).

Every group's health extends `HealthHead` with its own shape, so the reasons are read from what the shapes
share rather than written per group:

- a top-level `detail` text is a reason as it stands (/short-video without its token);
- a list of parts with a `stale` flag (targets, locations, charts, sources) gives how many of them are never
  crawled and how many are stale, naming the first few and the newest failure among them;
- a list of parts with a `state` other than ok (/retail-* marketplaces failing or backing off) names each with
  its reason;
- a single part that is `stale` (a DJ list, a discovery) or not `running` (the radio monitor) is named;
- a health answer may add its own (`reasons()` on its response type), for what only it can tell (an index
  with nothing indexed yet).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["UNEXPLAINED", "health_reasons"]

NAMED = 3
"""Parts named in a reason before "+N more"."""
IDENTITY = frozenset({"target", "slug", "chart_key", "source", "market", "site", "chart_type", "code2", "interval"})
"""Fields that name a part: its leading ones of these, joined by "/" (`portal-d/rising`, `global/daily`)."""
UNEXPLAINED = "its /health says degraded without saying why"


def health_reasons(head: msgspec.Struct) -> list[str]:
    """The reasons `head` (a group's health answer) gives for not being ok; UNEXPLAINED when it gives none."""
    found: list[str] = []
    for name in head.__struct_fields__:
        value = getattr(head, name)
        if name == "detail" and isinstance(value, str) and value:
            found.append(value)
        elif isinstance(value, list) and value and all(isinstance(v, msgspec.Struct) for v in value):
            found += _parts(name, value)
        elif isinstance(value, msgspec.Struct):
            found += _part(name, value)
    own = getattr(head, "reasons", None)
    if callable(own):
        found += own()
    return found or [UNEXPLAINED]


def _parts(name: str, parts: list[Any]) -> list[str]:
    found = []
    stale = [p for p in parts if getattr(p, "stale", False) is True]
    never = [p for p in stale if _never(p)]
    old = [p for p in stale if not _never(p)]
    noun = name.replace("_", " ")
    if never:
        found.append(f"{_count(never, parts)} {noun} {_never(never[0])}: {_named(never)}")
    if old:
        found.append(f"{_count(old, parts)} {noun} stale: {_named(old)}")
    failures = [(p.last_failure, p) for p in stale if isinstance(getattr(p, "last_failure", None), str)]
    if failures:
        newest, part = max(failures, key=lambda f: f[0])
        found.append(f"last failure ({_label(part)}): {newest}")
    for part in parts:
        state = getattr(part, "state", None)
        if state not in (None, "ok", "fresh", "stale", "never crawled"):
            why = getattr(part, "error", None) or getattr(part, "reason", None)
            found.append(f"{_label(part)} {state.replace('_', ' ')}" + (f": {why}" if why else ""))
    return found


def _part(name: str, part: Any) -> list[str]:
    noun = name.replace("_", " ")
    if getattr(part, "running", None) is False:
        stopped = getattr(part, "stopped_at", None)
        return [f"{noun} not running" + (f" (stopped {stopped})" if stopped else " (never started)")]
    if getattr(part, "stale", None) is True:
        return [f"{noun} {_never(part) or 'stale'}"]
    count = getattr(part, "stale", None)
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return [f"{count} {noun} stale"]
    return []


def _never(part: Any) -> str | None:
    """"never crawled" (or "never indexed") for a part without any data yet: said so, or every time field it
    has empty; None for a part that has some."""
    fields = part.__struct_fields__
    verb = "never indexed" if "indexed_at" in fields else "never crawled"
    if getattr(part, "state", None) == "never crawled":
        return verb
    times = [f for f in fields if f in ("fetched_at", "discovered_at", "indexed_at", "snapshot_id")]
    return verb if times and all(getattr(part, f) is None for f in times) else None


def _count(some: list[Any], every: list[Any]) -> str:
    return f"{len(some)} of {len(every)}"


def _named(parts: list[Any]) -> str:
    names = ", ".join(_label(p) for p in parts[:NAMED])
    return names + (f" (+{len(parts) - NAMED} more)" if len(parts) > NAMED else "")


def _label(part: Any) -> str:
    leading = []
    for name in part.__struct_fields__:
        value = getattr(part, name)
        if name not in IDENTITY or not isinstance(value, str):
            break
        leading.append(value)
    return "/".join(leading) or type(part).__name__
