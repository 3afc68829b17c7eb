"""The public entry types of every group, found where they are declared: the `entries` (or `plays`) field
of the groups' response types. A new group's entry types appear here by being in its route table, nothing more."""

from __future__ import annotations

import typing
from typing import Any

import msgspec

from chartgw.api.group import Group
from chartgw.api.responses import FetchLogResponse
from chartgw.groups import GROUPS

__all__ = ["ENTRY_FIELDS", "all_entry_types", "entry_types"]

ENTRY_FIELDS = ("entries", "plays")
"""The response fields that hold a group's entries: chart rows, or the plays /radio observes."""


def _members(annotation: Any) -> list[type]:
    """The Struct types inside `list[T]`, `list[A | B]`, `T | None`."""
    found: list[type] = []
    for arg in typing.get_args(annotation) or (annotation,):
        if isinstance(arg, type) and issubclass(arg, msgspec.Struct):
            found.append(arg)
        elif typing.get_args(arg):
            found += _members(arg)
    return found


def entry_types(group: Group) -> list[type]:
    """The entry record types `group` serves, in route order, each once."""
    found: dict[type, None] = {}
    for route in group.routes:
        if route.response is None or route.response is FetchLogResponse:
            continue
        responses = route.response if isinstance(route.response, tuple) else (route.response,)
        for response in (kind for declared in responses for kind in _members(declared)):
            hints = typing.get_type_hints(response)
            for field in ENTRY_FIELDS:
                for kind in _members(hints.get(field)):
                    found[kind] = None
    return list(found)


def all_entry_types() -> dict[str, list[type]]:
    return {group.name: entry_types(group) for group in GROUPS}
